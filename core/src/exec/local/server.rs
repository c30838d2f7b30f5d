//! Starting a program the daemon talks to over its stdin and stdout (an MCP stdio server),
//! the way commands start: a new session and process group without a terminal, the
//! environment's filtered variables (plus the server's own), a marker variable, and the
//! group recorded in the process ledger, so a crashed daemon's next start ends it. It never
//! outlives its owner: [`ServerProcess::stop`] ends its group (SIGTERM, the grace, SIGKILL),
//! and dropping it kills the group at once.

use super::super::process::{self, MARKER_VAR, ProcessId};
use super::super::spawn::{Command, Output};
use super::super::{Error, ProcessLedger};
use super::LocalOptions;
use super::command::detach;
use super::stop::Targets;
use nix::sys::signal::Signal;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What to start.
pub(crate) struct ServerCommand<'a> {
    /// A path, or a name looked up in the `PATH` the server gets.
    pub(crate) program: &'a str,
    pub(crate) args: &'a [String],
    /// Set over the filtered environment.
    pub(crate) env: &'a BTreeMap<String, String>,
    pub(crate) cwd: &'a Path,
}

/// A running server: the write end of its stdin, the read ends of its stdout and stderr, and
/// its process group.
pub(crate) struct ServerProcess {
    pub(crate) stdin: tokio::net::unix::pipe::Sender,
    pub(crate) stdout: Output,
    pub(crate) stderr: Output,
    pub(crate) group: ServerGroup,
}

/// A server's process group, ended when stopped or dropped.
pub(crate) struct ServerGroup {
    targets: Targets,
    recorded: Option<ProcessId>,
    ledger: Option<Arc<dyn ProcessLedger>>,
    /// Holds the leader's pidfd; reaped in the background once dropped.
    _process: super::super::spawn::Process,
    pgid: i32,
}

impl ServerGroup {
    /// Ends the group and what left it carrying its marker: SIGTERM, up to the grace
    /// period, SIGKILL.
    pub(crate) async fn stop(self) {
        self.targets.end().await;
    }

    /// The leader's pid (the group's id).
    pub(crate) fn pid(&self) -> i32 {
        self.pgid
    }
}

impl Drop for ServerGroup {
    fn drop(&mut self) {
        // After `stop` this finds nothing; otherwise nothing may survive its owner.
        process::signal_group(self.pgid, Signal::SIGKILL);
        if let (Some(group), Some(ledger)) = (self.recorded, &self.ledger) {
            ledger.ended(group);
        }
    }
}

/// Starts `server` under `options`.
pub(crate) fn start_server(
    options: &LocalOptions,
    server: &ServerCommand<'_>,
) -> Result<ServerProcess, Error> {
    static SERVERS: AtomicU64 = AtomicU64::new(0);
    let marker = format!(
        "{}.mcp.{}",
        process::run_id(),
        SERVERS.fetch_add(1, Ordering::Relaxed)
    );
    let mut vars: BTreeMap<std::ffi::OsString, std::ffi::OsString> = options
        .env
        .filter(std::env::vars_os())
        .into_iter()
        .collect();
    for (k, v) in server.env {
        vars.insert(k.into(), v.into());
    }
    let program = find_program(server.program, vars.get(OsStr::new("PATH")), server.cwd)?;
    let args: Vec<&OsStr> = server.args.iter().map(OsStr::new).collect();
    let mut command = Command::new(&program, &args, server.cwd).map_err(Error::Spawn)?;
    let (stdin_read, stdin_write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| Error::Spawn(e.into()))?;
    command
        .envs(vars)
        .env(MARKER_VAR, &marker)
        .stdin(stdin_read);
    // SAFETY: `detach` makes only system calls, and cannot panic.
    unsafe {
        command.hook(Box::new(detach));
    }
    let (pgid, child) = command.spawn().map_err(Error::Spawn)?;
    let (process, stdout, stderr) = child.into_parts();
    let recorded = process::identify(pgid);
    if let (Some(group), Some(ledger)) = (recorded, &options.ledger) {
        ledger.started(group);
    }
    let group = ServerGroup {
        targets: Targets::command(pgid, &marker),
        recorded,
        ledger: options.ledger.clone(),
        _process: process,
        pgid,
    };
    let missing = || Error::Spawn(std::io::Error::other("the server's pipes are missing"));
    Ok(ServerProcess {
        stdin: tokio::net::unix::pipe::Sender::from_owned_fd(stdin_write).map_err(Error::Spawn)?,
        stdout: stdout.ok_or_else(missing)?,
        stderr: stderr.ok_or_else(missing)?,
        group,
    })
}

/// `program` itself when it holds a `/` (relative to `cwd`), else the first executable of that
/// name in `path`.
fn find_program(
    program: &str,
    path: Option<&std::ffi::OsString>,
    cwd: &Path,
) -> Result<PathBuf, Error> {
    if program.contains('/') {
        return Ok(cwd.join(program));
    }
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    path.into_iter()
        .flat_map(std::env::split_paths)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|p| executable(p))
        .ok_or_else(|| {
            Error::Spawn(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{program}: not found in the server's PATH"),
            ))
        })
}
