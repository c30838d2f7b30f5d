//! Reaching the daemon: where its socket is, and starting `agentd` in the background when
//! nothing answers there (unless `AGENTD_NO_AUTOSTART=1`), so a first command just works.

use crate::client::Connection;
use crate::error::{EX_UNAVAILABLE, Failure, Result};
use std::fs::OpenOptions;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Set to `1` to never start the daemon.
pub(crate) const NO_AUTOSTART: &str = "AGENTD_NO_AUTOSTART";

/// Whether auto-start is allowed by the environment.
pub(crate) fn autostart_allowed() -> bool {
    std::env::var(NO_AUTOSTART).map_or(true, |v| v != "1")
}

/// The socket: `--socket`/`AGENTD_SOCKET`, else the shared default.
pub(crate) fn socket_path(flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_owned).unwrap_or_else(|| {
        agentd_proto::socket::default_socket_path(nix::unistd::geteuid().as_raw())
    })
}

/// `agentd` beside this `agentctl` if it is there, else from `PATH`.
fn agentd_binary() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("agentd")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("agentd"))
}

/// Where a daemon started by agentctl logs: the XDG state directory.
pub(crate) fn log_path() -> PathBuf {
    directories::ProjectDirs::from("", "", "agentd")
        .and_then(|d| d.state_dir().map(Path::to_owned))
        .unwrap_or_else(|| std::env::temp_dir().join(format!("agentd-{}", nix::unistd::geteuid())))
        .join("agentd.log")
}

/// Starts `agentd` on `socket` in its own process group (Ctrl-C in this terminal must not stop
/// it), logging to [`log_path`]. It inherits this environment, provider keys included.
pub(crate) fn start(socket: &Path) -> io::Result<PathBuf> {
    let log = log_path();
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = OpenOptions::new().create(true).append(true).open(&log)?;
    Command::new(agentd_binary())
        .arg("--socket")
        .arg(socket)
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .process_group(0)
        .spawn()?;
    Ok(log)
}

/// Connects to the daemon; when nothing answers and `autostart` allows it, starts one and
/// waits for it.
pub(crate) async fn connect(socket: Option<&Path>, autostart: bool) -> Result<Connection> {
    let socket = socket_path(socket);
    let first = match Connection::connect(&socket).await {
        Ok(conn) => return Ok(conn),
        Err(e) => e,
    };
    let unreachable = |detail: String| {
        Failure(
            EX_UNAVAILABLE,
            format!(
                "cannot reach agentd at {}: {detail}\nstart it with `agentd &` (or `systemctl --user start agentd.socket`)",
                socket.display()
            ),
        )
    };
    let nothing_there = matches!(
        first.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    );
    if !(autostart && nothing_there && autostart_allowed()) {
        return Err(unreachable(first.to_string()));
    }
    let log =
        start(&socket).map_err(|e| unreachable(format!("{first}; starting agentd failed: {e}")))?;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        if let Ok(conn) = Connection::connect(&socket).await {
            return Ok(conn);
        }
    }
    Err(unreachable(format!(
        "{first}; agentd was started but did not answer within 5 s (see {})",
        log.display()
    )))
}
