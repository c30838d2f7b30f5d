//! Where the daemon's socket lives, shared by the daemon and every client so they agree.

use std::path::PathBuf;

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
