//! agentd's own files, which no tool may read or write whatever the sandbox: the runtime
//! directory (the socket, the SSH control sockets), the state directory (sessions, journals,
//! `groups.json`), the config directory, the config file and the credentials file. The file
//! tools' reads and writes are made by the daemon itself, so the sandbox of commands cannot
//! stop them; [`ProtectedPaths::check`] does, on the file a tool *opened* (its real path from
//! `/proc/self/fd`), so neither a symlink, `..` nor a race can route around it. A hard link
//! has no path of its own to give it away, so the credentials file is also recognised by its
//! inode.

use super::Error;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The real paths of agentd's own directories and files, computed once at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtectedPaths {
    /// Directories and files; nothing beneath any of them may be opened by a tool.
    paths: Vec<PathBuf>,
    /// The credentials file, also recognised by its inode (a hard link elsewhere).
    credentials: Option<PathBuf>,
}

impl ProtectedPaths {
    /// `paths` (absolute; they need not exist yet) and the credentials file. Each is
    /// reduced to its real path: the real path of its deepest existing ancestor followed by
    /// the parts that do not exist yet.
    pub fn new(paths: impl IntoIterator<Item = PathBuf>, credentials: Option<PathBuf>) -> Self {
        let credentials = credentials.map(|c| real_path(&c));
        let mut paths: Vec<PathBuf> = paths
            .into_iter()
            .map(|p| real_path(&p))
            .chain(credentials.clone())
            .collect();
        paths.sort();
        paths.dedup();
        // A path beneath another one adds nothing (sorted, a parent comes first).
        let mut kept: Vec<PathBuf> = Vec::with_capacity(paths.len());
        for p in paths {
            if !kept.iter().any(|k| p.starts_with(k)) {
                kept.push(p);
            }
        }
        Self {
            paths: kept,
            credentials,
        }
    }

    /// The protected directories and files (real paths), for hiding them from commands too.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// The protected path `real` (a real path) lies beneath, if any.
    pub fn containing(&self, real: &Path) -> Option<&Path> {
        self.paths
            .iter()
            .find(|p| real.starts_with(p))
            .map(PathBuf::as_path)
    }

    /// Refuses `fd` (opened for `shown`, the path the tool was given) when it is one of
    /// agentd's own files or directories, or beneath one.
    pub fn check(&self, fd: BorrowedFd<'_>, shown: &Path) -> Result<(), Error> {
        if self.paths.is_empty() {
            return Ok(());
        }
        let real = fd_path(fd).map_err(|e| {
            Error::NotAllowed(format!(
                "{}: cannot tell where it leads ({e}), so it is not opened: agentd's own \
                 files are not readable by tools, and /proc/self/fd is how it tells",
                shown.display()
            ))
        })?;
        if let Some(protected) = self.containing(&real) {
            return Err(refusal(shown, &real, protected));
        }
        if let Some(creds) = &self.credentials
            && let (Ok(opened), Ok(stored)) = (nix::sys::stat::fstat(fd), std::fs::metadata(creds))
            && (opened.st_dev, opened.st_ino) == (stored.dev(), stored.ino())
        {
            return Err(refusal(shown, &real, creds));
        }
        Ok(())
    }
}

fn refusal(shown: &Path, real: &Path, protected: &Path) -> Error {
    let leads = if real == shown {
        String::new()
    } else {
        format!(" (it is {})", real.display())
    };
    Error::NotAllowed(format!(
        "agentd's own files are not readable by tools: {}{leads} is {} {}, where agentd keeps \
         its sockets, sessions, config or keys; tools may neither read nor write there",
        shown.display(),
        if real.starts_with(protected) {
            "beneath"
        } else {
            "a link to"
        },
        protected.display()
    ))
}

/// Makes `dir` (one of agentd's directories, such as its config directory) with its parents,
/// `0700` where it is new, so that commands' namespaces hide it from their first command on.
pub fn create_protected_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Where an open file descriptor really leads.
pub(crate) fn fd_path(fd: BorrowedFd<'_>) -> std::io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// The real path of `path`'s deepest existing ancestor followed by the rest; `..` in the rest
/// drops a part (nothing there can be a symlink yet).
fn real_path(path: &Path) -> PathBuf {
    let Ok(mut existing) = std::path::absolute(path) else {
        return path.to_owned();
    };
    let mut rest: Vec<OsString> = Vec::new();
    loop {
        if let Ok(mut real) = std::fs::canonicalize(&existing) {
            for part in rest.iter().rev() {
                if part == ".." {
                    real.pop();
                } else {
                    real.push(part);
                }
            }
            return real;
        }
        let Some(last) = existing.components().next_back() else {
            return path.to_owned();
        };
        let last = last.as_os_str().to_owned();
        if !existing.pop() {
            return path.to_owned();
        }
        if last != "." {
            rest.push(last);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn opened_files_beneath_a_protected_path_are_refused_however_reached() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (config, ws) = (root.join("config"), root.join("ws"));
        std::fs::create_dir_all(&config).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        let creds = config.join("credentials.json");
        std::fs::write(&creds, "{}").unwrap();
        std::fs::write(ws.join("ok.txt"), "x").unwrap();
        symlink(&config, ws.join("cfg")).unwrap();
        std::fs::hard_link(&creds, ws.join("hard")).unwrap();
        // The state directory does not exist yet; it is protected all the same.
        let state = root.join("state/agentd");
        let protected = ProtectedPaths::new(
            [config.clone(), state.clone(), ws.join("cfg/../config")],
            Some(creds.clone()),
        );
        assert_eq!(protected.paths(), [config.clone(), state.clone()]);
        let check = |p: &Path| {
            use std::os::fd::AsFd;
            let f = std::fs::File::open(p).unwrap();
            protected.check(f.as_fd(), p).map_err(|e| e.to_string())
        };
        assert_eq!(check(&ws.join("ok.txt")), Ok(()));
        assert_eq!(check(&ws), Ok(()));
        for p in [
            creds.clone(),
            config.clone(),
            ws.join("cfg/credentials.json"),
            ws.join("../config/credentials.json"),
            ws.join("hard"),
        ] {
            let e = check(&p).unwrap_err();
            assert!(
                e.starts_with("agentd's own files are not readable by tools: "),
                "{e}"
            );
        }
        std::fs::create_dir_all(&state).unwrap();
        assert!(check(&state).is_err());
        assert_eq!(ProtectedPaths::default().paths(), [] as [PathBuf; 0]);
    }
}
