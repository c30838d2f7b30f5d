//! Running a hook (`[[hooks.EVENT]]`): the user's own program, `bash -c COMMAND` on this
//! machine, started as commands are (a new session and process group without a terminal,
//! filtered variables, a marker, the group in the process ledger, so a crashed daemon's next
//! start ends it), with a JSON document on its stdin. It runs unsandboxed, since the user
//! wrote it; the timeout or the work's abort ends its group and what left it. What it
//! writes is kept up to [`MAX_HOOK_OUTPUT`] bytes per stream, the rest dropped.

use super::super::child;
use super::super::process::{self, MARKER_VAR};
use super::super::spawn::Command;
use super::super::{Error, OutputSink};
use super::LocalOptions;
use super::command::detach;
use super::stop::Targets;
use agentd_proto::OutputStream;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

/// Output kept per stream of a hook: enough for any reason or JSON answer.
const MAX_HOOK_OUTPUT: usize = 64 * 1024;

/// One hook to run.
pub(crate) struct HookCommand<'a> {
    /// The command line, run with `bash -c`.
    pub(crate) command: &'a str,
    /// Its working directory.
    pub(crate) cwd: &'a Path,
    /// Set over the filtered environment.
    pub(crate) env: &'a [(&'a str, &'a str)],
    /// Written to its stdin, which is then closed.
    pub(crate) stdin: &'a [u8],
    /// Its group is ended after this long.
    pub(crate) timeout: Duration,
}

/// How a hook ended.
#[derive(Debug)]
pub(crate) struct HookRun {
    /// Its stdout, at most [`MAX_HOOK_OUTPUT`] bytes.
    pub(crate) stdout: String,
    /// Its stderr, the same.
    pub(crate) stderr: String,
    /// `None`: killed by a signal (or not reaped).
    pub(crate) exit_code: Option<i32>,
    pub(crate) timed_out: bool,
    pub(crate) cancelled: bool,
}

/// Output kept up to a cap, the rest counted.
#[derive(Default)]
struct Kept {
    stdout: String,
    stderr: String,
}

impl Kept {
    fn take(&mut self, stream: OutputStream, text: &str) {
        let kept = match stream {
            OutputStream::Stdout => &mut self.stdout,
            OutputStream::Stderr => &mut self.stderr,
        };
        let mut room = MAX_HOOK_OUTPUT.saturating_sub(kept.len()).min(text.len());
        while !text.is_char_boundary(room) {
            room -= 1;
        }
        kept.push_str(&text[..room]);
    }
}

/// Runs `hook` under `options` to its end, its timeout or `cancel`.
pub(crate) async fn run_hook(
    options: &LocalOptions,
    hook: &HookCommand<'_>,
    cancel: &CancellationToken,
) -> Result<HookRun, Error> {
    static HOOKS: AtomicU64 = AtomicU64::new(0);
    let marker = format!(
        "{}.hook.{}",
        process::run_id(),
        HOOKS.fetch_add(1, Ordering::Relaxed)
    );
    let mut command = Command::new(
        Path::new("/bin/bash"),
        &["-c".as_ref(), hook.command.as_ref()],
        hook.cwd,
    )
    .map_err(Error::Spawn)?;
    let (stdin_read, stdin_write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| Error::Spawn(e.into()))?;
    command
        .envs(options.env.filter(std::env::vars_os()))
        .env(MARKER_VAR, &marker)
        .stdin(stdin_read);
    for (k, v) in hook.env {
        command.env(k, v);
    }
    // SAFETY: `detach` makes only system calls, and cannot panic.
    unsafe {
        command.hook(Box::new(detach));
    }
    // Made before the spawn: once the hook runs, nothing may fail before its loop does.
    let mut stdin =
        tokio::net::unix::pipe::Sender::from_owned_fd(stdin_write).map_err(Error::Spawn)?;
    let (pgid, mut child) = command.spawn().map_err(Error::Spawn)?;
    let group = process::identify(pgid);
    if let (Some(group), Some(ledger)) = (group, &options.ledger) {
        ledger.started(group);
    }
    // A hook that never reads its stdin gets the end of the pipe closed on it when it exits
    // or is stopped, which ends the write.
    let feed = async move {
        let _ = stdin.write_all(hook.stdin).await;
    };
    let kept = Mutex::new(Kept::default());
    let sink = |stream, text: &str| {
        kept.lock()
            .unwrap_or_else(|e| e.into_inner())
            .take(stream, text)
    };
    let output: OutputSink<'_> = &sink;
    let mut targets = Targets::command(pgid, &marker);
    let ((), finished) = tokio::join!(
        feed,
        child::run(&mut child, &mut targets, hook.timeout, cancel, output)
    );
    // What outlived the hook in its group, or holds its pipes from outside it, is ended:
    // nothing a hook starts is left running.
    if process::group_alive(pgid) || child.held() {
        targets.end().await;
    }
    if let (Some(group), Some(ledger)) = (group, &options.ledger) {
        ledger.ended(group);
    }
    let finished = finished?;
    let kept = kept.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(HookRun {
        stdout: kept.stdout,
        stderr: kept.stderr,
        exit_code: finished.status.and_then(|s| s.code()),
        timed_out: finished.timed_out,
        cancelled: finished.cancelled,
    })
}
