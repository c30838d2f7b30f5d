//! Where the daemon's socket lives, shared by the daemon and every client so they agree.

use std::path::{Path, PathBuf};

/// Set to `agentctl` in the environment of a daemon agentctl starts, so the daemon knows how
/// it was started (and so how it is restarted).
pub const STARTED_BY_ENV: &str = "AGENTD_STARTED_BY";

/// Environment variable that overrides the socket path.
pub const SOCKET_ENV: &str = "AGENTD_SOCKET";

/// The socket path: `$AGENTD_SOCKET`, else `$XDG_RUNTIME_DIR/agentd/agentd.sock`, else
/// `<tmp>/agentd-<uid>/agentd.sock`.
pub fn default_socket_path(uid: u32) -> PathBuf {
    if let Some(p) = std::env::var_os(SOCKET_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    runtime_dir(uid).join("agentd.sock")
}

/// The daemon's runtime directory: `$XDG_RUNTIME_DIR/agentd`, else `<tmp>/agentd-<uid>`. The
/// default socket lives in it, and so do the SSH control sockets.
pub fn runtime_dir(uid: u32) -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|p| !p.is_empty()) {
        Some(runtime) => PathBuf::from(runtime).join("agentd"),
        None => std::env::temp_dir().join(format!("agentd-{uid}")),
    }
}

/// Whether the runtime directory is the fallback in the temp directory (no
/// `XDG_RUNTIME_DIR`), where any user could have created it first: then the daemon and every
/// client check it before use ([`runtime_dir_problem`]).
pub fn runtime_dir_is_fallback() -> bool {
    std::env::var_os("XDG_RUNTIME_DIR").is_none_or(|p| p.is_empty())
}

/// What makes `dir` unfit to be the runtime directory of user `uid`, given what `lstat` says
/// of it (`meta`): it must be a directory itself (not a symbolic link to one), owned by `uid`,
/// with mode 0700. Otherwise another user could receive the user's prompts through a socket
/// of their own. The message says what to do.
pub fn runtime_dir_problem(dir: &Path, meta: &std::fs::Metadata, uid: u32) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dir = dir.display();
    let own = "or set XDG_RUNTIME_DIR (or TMPDIR) to a directory only you can use";
    if meta.file_type().is_symlink() {
        return Some(format!(
            "{dir} is a symbolic link, not a directory: it could lead your sessions anywhere; \
             remove it (agentd creates the directory itself, mode 0700), {own}"
        ));
    }
    if !meta.is_dir() {
        return Some(format!(
            "{dir} is not a directory; remove it (agentd creates the directory itself, mode \
             0700), {own}"
        ));
    }
    if meta.uid() != uid {
        return Some(format!(
            "{dir} belongs to uid {}, not to you (uid {uid}): another user may have created it \
             to receive your sessions; have it removed (by its owner or root), {own}",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode != 0o700 {
        return Some(format!(
            "{dir} has mode {mode:04o}, so other users may reach what is in it; it must be \
             0700: stop agentd and remove it (agentd creates it again, mode 0700), {own}"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_a_private_directory_of_ones_own_is_a_runtime_directory() {
        let root = std::env::temp_dir().join(format!("agentd-proto-test-{}", std::process::id()));
        let dir = root.join("run");
        std::fs::create_dir_all(&dir).unwrap();
        let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::symlink_metadata(&dir).unwrap());
        let problem =
            |p: &Path| runtime_dir_problem(p, &std::fs::symlink_metadata(p).unwrap(), uid);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(problem(&dir), None);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(problem(&dir).unwrap().contains("has mode 0777"));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let other = runtime_dir_problem(&dir, &std::fs::symlink_metadata(&dir).unwrap(), uid + 1);
        assert!(
            other
                .unwrap()
                .contains(&format!("belongs to uid {uid}, not to you"))
        );
        let link = root.join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(problem(&link).unwrap().contains("is a symbolic link"));
        let file = root.join("file");
        std::fs::write(&file, "").unwrap();
        assert!(problem(&file).unwrap().contains("is not a directory"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
