//! Reaching the daemon: where its socket is, and starting `agentd` in the background when
//! nothing answers there (unless `AGENTD_NO_AUTOSTART=1`), so a first command just works. A
//! started daemon is polled until its socket answers (it is usually ready in milliseconds);
//! if it exits first, its own words (a bad config file, say) are the error, at once.

use crate::client::{ConnectError, Connection};
use crate::error::{Failure, Result};
use std::fs::OpenOptions;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
pub(crate) fn agentd_binary() -> PathBuf {
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

/// A daemon this agentctl started.
pub(crate) struct Started {
    child: Child,
    /// Its log file, and where in it this daemon's output begins.
    log: PathBuf,
    offset: u64,
}

/// Starts `agentd` on `socket` in a session of its own, so it has no controlling terminal
/// (Ctrl-C in this terminal must not stop it, and nothing it runs can type into this shell),
/// logging to [`log_path`]. It inherits this environment, provider keys included.
pub(crate) fn start(socket: &Path) -> io::Result<Started> {
    let log = log_path();
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = OpenOptions::new().create(true).append(true).open(&log)?;
    let offset = file.metadata()?.len();
    let mut command = Command::new(agentd_binary());
    command
        .env(agentd_proto::socket::STARTED_BY_ENV, "agentctl")
        .arg("--socket")
        .arg(socket)
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    // SAFETY: setsid is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| nix::unistd::setsid().map(drop).map_err(io::Error::from));
    }
    let child = command.spawn()?;
    Ok(Started { child, log, offset })
}

impl Started {
    /// What the daemon wrote to its log since it started (its stderr: why it stopped).
    fn output(&self) -> String {
        let text = std::fs::read(&self.log)
            .map(|bytes| {
                let from = usize::try_from(self.offset).unwrap_or(0).min(bytes.len());
                String::from_utf8_lossy(&bytes[from..]).into_owned()
            })
            .unwrap_or_default();
        // The reason is at the end; a daemon that ran a while may have logged much before it.
        let lines: Vec<&str> = text.trim().lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

/// Waits until `socket` answers, polling with a short backoff (the daemon is usually ready in
/// a few milliseconds), and fails at once, with the daemon's own words, if it exits first.
async fn wait_ready(socket: &Path, started: &mut Started) -> Result<Connection> {
    let deadline = Instant::now() + READY_WITHIN;
    let mut pause = Duration::from_millis(1);
    loop {
        match Connection::connect(socket).await {
            Ok(conn) => return Ok(conn),
            Err(ConnectError::Untrusted(why)) => return Err(Failure::untrusted(why)),
            Err(ConnectError::Io(_)) => {}
        }
        if let Ok(Some(status)) = started.child.try_wait() {
            // Another agentctl may have started the daemon first; this one then stops.
            match Connection::connect(socket).await {
                Ok(conn) => return Ok(conn),
                Err(ConnectError::Untrusted(why)) => return Err(Failure::untrusted(why)),
                Err(ConnectError::Io(_)) => {}
            }
            let said = started.output();
            let said = if said.is_empty() {
                format!("it exited with {status}")
            } else {
                said
            };
            return Err(not_started(
                socket,
                format!(
                    "agentd could not start: {said}\n(`agentd --check-config` checks the \
                     config; the daemon's log is {})",
                    started.log.display()
                ),
            ));
        }
        if Instant::now() > deadline {
            return Err(not_started(
                socket,
                format!(
                    "agentd was started but did not answer within {} s (see {})",
                    READY_WITHIN.as_secs(),
                    started.log.display()
                ),
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// The failure of a start that did not bring a daemon up.
fn not_started(socket: &Path, why: String) -> Failure {
    Failure::unavailable(format!(
        "nothing answered at {}, so agentctl started agentd; {why}",
        socket.display()
    ))
}

/// Refuses the fallback runtime directory (`<tmp>/agentd-<uid>`, used without
/// `XDG_RUNTIME_DIR`) unless it is this user's own: whoever owns it could serve a daemon of
/// their own there. A missing one is fine: agentd creates it.
fn check_runtime_dir(socket: &Path) -> Result<()> {
    let uid = nix::unistd::geteuid().as_raw();
    let dir = agentd_proto::socket::runtime_dir(uid);
    if !agentd_proto::socket::runtime_dir_is_fallback() || socket.parent() != Some(dir.as_path()) {
        return Ok(());
    }
    let problem = match std::fs::symlink_metadata(&dir) {
        Ok(meta) => agentd_proto::socket::runtime_dir_problem(&dir, &meta, uid),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => Some(format!("cannot inspect {}: {e}", dir.display())),
    };
    match problem {
        Some(problem) => Err(Failure::untrusted(format!(
            "refusing to use the runtime directory: {problem}"
        ))),
        None => Ok(()),
    }
}

/// How long a daemon this agentctl started has to answer.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// Connects to the daemon; when nothing answers and `autostart` allows it, starts one and
/// waits for it.
pub(crate) async fn connect(socket: Option<&Path>, autostart: bool) -> Result<Connection> {
    let socket = socket_path(socket);
    check_runtime_dir(&socket)?;
    let first = match Connection::connect(&socket).await {
        Ok(conn) => return Ok(conn),
        Err(ConnectError::Untrusted(why)) => return Err(Failure::untrusted(why)),
        Err(ConnectError::Io(e)) => e,
    };
    let unreachable = |detail: String| {
        Failure::unavailable(format!(
            "cannot reach agentd at {}: {detail}\nstart it with `agentd &` (or `systemctl --user start agentd.socket`)",
            socket.display()
        ))
    };
    let nothing_there = matches!(
        first.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    );
    if !(autostart && nothing_there && autostart_allowed()) {
        return Err(unreachable(first.to_string()));
    }
    // Its failure says what went wrong; "start it with agentd &" would not help.
    launch(&socket).await
}

/// Starts agentd on `socket` and connects once it answers.
pub(crate) async fn launch(socket: &Path) -> Result<Connection> {
    check_runtime_dir(socket)?;
    let mut started =
        start(socket).map_err(|e| Failure::unavailable(format!("starting agentd failed: {e}")))?;
    wait_ready(socket, &mut started).await
}

/// Whether the daemon runs under systemd, where `systemctl --user` owns its life. It says
/// so itself: its `/proc` files are closed to other processes (it is not dumpable).
pub(crate) fn under_systemd(info: &agentd_proto::DaemonInfo) -> bool {
    info.started_by == Some(agentd_proto::StartedBy::Systemd)
}
