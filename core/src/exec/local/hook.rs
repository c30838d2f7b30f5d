//! Running a hook (`[[hooks.EVENT]]`): the user's own program, `bash -c COMMAND` on this
//! machine, started as commands are (a new session and process group without a terminal,
//! filtered variables, a marker, the group in the process ledger, so a crashed daemon's next
//! start ends it), in the session's sandbox unless the user's config took it out, with a JSON
//! document on its stdin. The timeout or the work's abort ends its group, and whatever it
//! started is ended when it ends. What it writes is kept up to [`MAX_HOOK_OUTPUT`] bytes per
//! stream, the rest dropped.

use super::super::child;
use super::super::process::{self, MARKER_VAR};
use super::super::sandbox::SandboxPolicy;
use super::super::spawn::Command;
use super::super::{Error, OutputSink};
use super::LocalExecutionEnvironment;
use super::command::{detach, sandbox, spawn};
use super::stop::Targets;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

/// Output kept per stream of a hook: enough for any reason or JSON answer.
const MAX_HOOK_OUTPUT: usize = 64 * 1024;

/// The descriptor a sandboxed hook reads the session's journal from: agentd's state is
/// hidden in the sandbox, so `transcript_path` names this descriptor instead
/// ([`TRANSCRIPT_IN_SANDBOX`]).
const TRANSCRIPT_FD: i32 = 3;
/// `transcript_path` for a sandboxed hook: the journal, opened by the daemon, read-only.
pub(crate) const TRANSCRIPT_IN_SANDBOX: &str = "/proc/self/fd/3";

/// One hook to run.
pub(crate) struct HookCommand<'a> {
    /// The command line, run with `bash -c`.
    pub(crate) command: &'a str,
    /// Set over the filtered environment.
    pub(crate) env: &'a [(&'a str, &'a str)],
    /// Written to its stdin, which is then closed.
    pub(crate) stdin: &'a [u8],
    /// Its group is ended after this long.
    pub(crate) timeout: Duration,
    /// Where it runs; `None`: unsandboxed.
    pub(crate) sandbox: Option<&'a SandboxPolicy>,
    /// The session's journal, given to a sandboxed hook at [`TRANSCRIPT_FD`].
    pub(crate) transcript: Option<&'a Path>,
}

/// How a hook ended.
#[derive(Debug)]
pub(crate) struct HookRun {
    /// Its stdout, at most [`MAX_HOOK_OUTPUT`] bytes (and a line saying what was dropped).
    pub(crate) stdout: String,
    /// Its stderr, the same.
    pub(crate) stderr: String,
    /// `None`: killed by a signal (or not reaped).
    pub(crate) exit_code: Option<i32>,
    pub(crate) timed_out: bool,
    pub(crate) cancelled: bool,
}

impl LocalExecutionEnvironment {
    /// Runs `hook` in this environment's directory to its end, its timeout or `cancel`.
    pub(crate) async fn run_hook(
        &self,
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
            &self.cwd,
        )
        .map_err(Error::Spawn)?;
        let (stdin_read, stdin_write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| Error::Spawn(e.into()))?;
        command
            .envs(self.options.env.filter(std::env::vars_os()))
            .env(MARKER_VAR, &marker)
            .stdin(stdin_read);
        for (k, v) in hook.env {
            command.env(k, v);
        }
        // SAFETY: `detach` makes only system calls, and cannot panic.
        unsafe {
            command.hook(Box::new(detach));
        }
        if let Some(policy) = hook.sandbox {
            let namespaces = self.namespaces(policy).await?;
            sandbox(&mut command, policy, namespaces, &self.cwd)?;
            if let Some(transcript) = hook.transcript {
                let file = std::fs::File::open(transcript).map_err(|e| Error::io(transcript, e))?;
                give_transcript(&mut command, file.into());
            }
        }
        // Made before the spawn: once the hook runs, nothing may fail before its loop does.
        let mut stdin =
            tokio::net::unix::pipe::Sender::from_owned_fd(stdin_write).map_err(Error::Spawn)?;
        let (pgid, mut child) = spawn(command, hook.sandbox.is_some())?;
        let group = process::identify(pgid);
        if let Some(group) = group {
            self.track(group, true);
        }
        let nothing: OutputSink<'_> = &|_, _| {};
        let mut targets = Targets::command(pgid, &marker);
        let finished = {
            let run = child::run_keeping(
                &mut child,
                &mut targets,
                hook.timeout,
                cancel,
                nothing,
                MAX_HOOK_OUTPUT,
            );
            // The input is written while the hook runs, and given up when its run ends: a
            // hook that never reads it may have left a process holding its stdin open.
            let feed = async move {
                let _ = stdin.write_all(hook.stdin).await;
            };
            tokio::pin!(run);
            tokio::select! {
                finished = &mut run => finished,
                () = feed => run.await,
            }
        };
        // Whatever the hook started is ended with it, in its group or out of it (found by
        // its marker): nothing a hook starts is left running.
        targets.end().await;
        if let Some(group) = group {
            self.track(group, false);
        }
        let finished = finished?;
        Ok(HookRun {
            stdout: finished.stdout,
            stderr: finished.stderr,
            exit_code: finished.status.and_then(|s| s.code()),
            timed_out: finished.timed_out,
            cancelled: finished.cancelled,
        })
    }
}

/// Gives the command `file` at [`TRANSCRIPT_FD`], after the sandbox's steps (which may use
/// that number for the namespaces they enter).
fn give_transcript(command: &mut Command, file: OwnedFd) {
    // SAFETY: `dup2` and `fcntl` on descriptors the child owns; `file` is kept open by the
    // closure until the spawn is over.
    unsafe {
        command.hook(Box::new(move || {
            let fd = file.as_raw_fd();
            let done = if fd == TRANSCRIPT_FD {
                // dup2 onto itself would leave close-on-exec set.
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, TRANSCRIPT_FD)
            };
            if done == -1 {
                return Err(nix::errno::Errno::last());
            }
            Ok(())
        }));
    }
}
