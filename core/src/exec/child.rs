//! The loop every command runs in, locally and over SSH ([`run`]). It reads the command's
//! stdout and stderr as they arrive, in whole UTF-8 characters, to the sink and to a copy
//! capped at [`MAX_RETAINED`] per stream; starts the command's stop once, on the timeout or a
//! cancellation, and awaits it to its end; and returns when the command has exited and its
//! pipes closed, or [`DRAIN_AFTER_EXIT`] after it exited or was stopped, whoever still holds
//! them. What differs between a local process group and a remote one (how it is stopped,
//! what its stdout carries besides the command's output) is the environment's [`Control`].

use super::utf8::Utf8Decoder;
use super::{Error, ExecResult, OutputSink};
use agentd_proto::OutputStream;
use futures::future::BoxFuture;
use std::future::Future;
use std::process::ExitStatus;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

/// Grace period between SIGTERM and SIGKILL (spec 4.2).
pub(super) const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long to keep reading after the command exits (or is stopped) while other processes
/// still hold its pipes open: background children that keep running, or processes that left
/// the group and survived the kill. Past it the pipes are dropped unread, so no process can
/// hold a command (or an abort) open.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);
/// Output kept per stream; more is counted but dropped, so a runaway command cannot exhaust
/// the daemon's memory. The sink still gets all of it.
const MAX_RETAINED: usize = 16 * 1024 * 1024;
/// One read from a pipe.
const READ_CHUNK: usize = 16 * 1024;

/// The process of a started command, as far as its exit status goes.
pub(super) trait Process {
    /// Waits for it to exit. Cancel-safe: the loop polls it afresh after every other event.
    fn wait(&mut self) -> impl Future<Output = std::io::Result<ExitStatus>> + Send;
    /// Its status if it has exited.
    fn try_wait(&mut self) -> Option<ExitStatus>;
}

impl Process for tokio::process::Child {
    fn wait(&mut self) -> impl Future<Output = std::io::Result<ExitStatus>> + Send {
        tokio::process::Child::wait(self)
    }

    fn try_wait(&mut self) -> Option<ExitStatus> {
        tokio::process::Child::try_wait(self).ok().flatten()
    }
}

/// What an environment does its own way while [`run`] drives one of its commands.
pub(super) trait Control {
    /// What a stop reports (locally: the processes that had left the command's group).
    type Stopped;
    /// The command's own output among `bytes` read from its stdout; the rest is the
    /// environment's (over SSH: the first line, the remote process group's id).
    fn stdout<'b>(&mut self, bytes: &'b [u8]) -> &'b [u8] {
        bytes
    }
    /// Ends the command and everything it started: SIGTERM, up to [`KILL_GRACE`] for them to
    /// go, SIGKILL. [`run`] starts it at most once and awaits it to its end. It owns what it
    /// needs, so the control stays free to read the output meanwhile.
    fn stop(&mut self) -> BoxFuture<'static, Self::Stopped>;
}

/// A started command: its process and the read ends of its stdout and stderr. The pipes
/// something still held open when [`run`] returned stay open until this is dropped.
pub(super) struct Child<P, O, E> {
    process: P,
    stdout: Option<O>,
    stderr: Option<E>,
}

impl<P, O, E> Child<P, O, E> {
    pub(super) fn new(process: P, stdout: Option<O>, stderr: Option<E>) -> Self {
        Self {
            process,
            stdout,
            stderr,
        }
    }

    /// The process and its pipes, for a caller that reads them itself (a server spoken to
    /// over them).
    pub(super) fn into_parts(self) -> (P, Option<O>, Option<E>) {
        (self.process, self.stdout, self.stderr)
    }

    /// Whether a pipe was still open when [`run`] returned: a process other than the command
    /// held it (its output was drained for [`DRAIN_AFTER_EXIT`], then no longer read).
    pub(super) fn held(&self) -> bool {
        self.stdout.is_some() || self.stderr.is_some()
    }
}

impl Child<tokio::process::Child, tokio::process::ChildStdout, tokio::process::ChildStderr> {
    /// A spawned process whose stdout and stderr are pipes.
    pub(super) fn piped(mut process: tokio::process::Child) -> Self {
        let (stdout, stderr) = (process.stdout.take(), process.stderr.take());
        Self::new(process, stdout, stderr)
    }
}

/// How a command ended, as [`run`] saw it.
#[derive(Debug)]
pub(super) struct Finished<S> {
    /// Its stdout, capped (a line at the end says how much was dropped).
    pub(super) stdout: String,
    /// Its stderr, capped the same way.
    pub(super) stderr: String,
    /// `None`: still not reaped when the loop gave up on it.
    pub(super) status: Option<ExitStatus>,
    /// The timeout started the stop.
    pub(super) timed_out: bool,
    /// The cancellation started the stop.
    pub(super) cancelled: bool,
    /// What the stop reported, if one ran.
    pub(super) stopped: Option<S>,
}

impl<S> Finished<S> {
    /// The command's result for an environment that names no escaped processes, with
    /// `stderr` as the caller completed it (taken from `self.stderr`). No exit code when it
    /// was stopped or `lost` (its end was not seen, so no status there is the command's).
    pub(super) fn result(self, stderr: String, lost: bool, started: Instant) -> ExecResult {
        let seen = self.stopped.is_none() && !lost;
        ExecResult {
            stdout: self.stdout,
            stderr,
            exit_code: self.status.filter(|_| seen).and_then(|s| s.code()),
            timed_out: self.timed_out,
            cancelled: self.cancelled,
            duration: started.elapsed(),
            escaped: Vec::new(),
        }
    }
}

/// Runs `child` to its end, streaming its output to `output`; stops it through `control`
/// once `timeout` passes or `cancel` fires. Fails only when waiting for its status does.
pub(super) async fn run<P, O, E, C>(
    child: &mut Child<P, O, E>,
    control: &mut C,
    timeout: Duration,
    cancel: &CancellationToken,
    output: OutputSink<'_>,
) -> Result<Finished<C::Stopped>, Error>
where
    P: Process,
    O: AsyncRead + Unpin,
    E: AsyncRead + Unpin,
    C: Control,
{
    run_keeping(child, control, timeout, cancel, output, MAX_RETAINED).await
}

/// [`run`], keeping at most `keep` bytes of each stream (a hook's answer needs less than a
/// command's output).
pub(super) async fn run_keeping<P, O, E, C>(
    child: &mut Child<P, O, E>,
    control: &mut C,
    timeout: Duration,
    cancel: &CancellationToken,
    output: OutputSink<'_>,
    keep: usize,
) -> Result<Finished<C::Stopped>, Error>
where
    P: Process,
    O: AsyncRead + Unpin,
    E: AsyncRead + Unpin,
    C: Control,
{
    let Child {
        process,
        stdout,
        stderr,
    } = child;
    let (mut out, mut err) = (Captured::new(keep), Captured::new(keep));
    let (mut out_buf, mut err_buf) = (vec![0u8; READ_CHUNK], vec![0u8; READ_CHUNK]);
    let mut status = None;
    let (mut timed_out, mut cancelled) = (false, false);
    let timeout = tokio::time::sleep(timeout);
    tokio::pin!(timeout);
    // Set once a stop starts. It runs once, however often the token fires, so a dead group is
    // never signalled again.
    let mut stopping: Option<BoxFuture<'static, C::Stopped>> = None;
    let mut stopped: Option<C::Stopped> = None;
    // Armed once the command has exited or been stopped: stop waiting for output from
    // whatever still holds the pipes.
    let mut drain_until: Option<tokio::time::Instant> = None;

    loop {
        // A stop under way is awaited (at most the grace period): it reports what only it
        // sees (the processes that left the group), even when everything died at once and
        // closed the pipes.
        if status.is_some() && stdout.is_none() && stderr.is_none() && stopping.is_none() {
            break;
        }
        let stop_started = stopping.is_some() || stopped.is_some();
        tokio::select! {
            n = read_some(stdout, &mut out_buf), if stdout.is_some() => match n {
                Some(n) => out.take(control.stdout(&out_buf[..n]), OutputStream::Stdout, output),
                None => *stdout = None,
            },
            n = read_some(stderr, &mut err_buf), if stderr.is_some() => match n {
                Some(n) => err.take(&err_buf[..n], OutputStream::Stderr, output),
                None => *stderr = None,
            },
            s = process.wait(), if status.is_none() => {
                status = Some(s);
                if !stop_started {
                    drain_until = Some(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
                }
            }
            _ = &mut timeout, if !stop_started && status.is_none() => {
                timed_out = true;
                stopping = Some(control.stop());
            }
            _ = cancel.cancelled(), if !stop_started => {
                cancelled = true;
                stopping = Some(control.stop());
                drain_until = None;
            }
            report = poll_stop(&mut stopping), if stopping.is_some() => {
                stopping = None;
                stopped = Some(report);
                // Pipes close as the processes die; whatever still holds them open after
                // this (a process in uninterruptible sleep) is not waited for.
                drain_until = Some(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
            }
            _ = sleep_until(drain_until), if drain_until.is_some() && stopping.is_none() => break,
        }
    }
    let status = match status {
        Some(s) => Some(s.map_err(Error::Spawn)?),
        None => process.try_wait(),
    };
    Ok(Finished {
        stdout: out.finish(),
        stderr: err.finish(),
        status,
        timed_out,
        cancelled,
        stopped,
    })
}

/// Collected output of one stream, capped at `keep` bytes.
struct Captured {
    text: String,
    dropped: usize,
    decoder: Utf8Decoder,
    keep: usize,
}

impl Captured {
    fn new(keep: usize) -> Self {
        Self {
            text: String::new(),
            dropped: 0,
            decoder: Utf8Decoder::default(),
            keep,
        }
    }

    /// Decodes `bytes` (a character split across reads waits for its end), hands the text to
    /// `output` and keeps what fits.
    fn take(&mut self, bytes: &[u8], stream: OutputStream, output: OutputSink<'_>) {
        let text = self.decoder.push(bytes);
        if !text.is_empty() {
            output(stream, &text);
            self.push(&text);
        }
    }

    fn push(&mut self, text: &str) {
        let room = self.keep.saturating_sub(self.text.len());
        if text.len() <= room {
            self.text.push_str(text);
        } else {
            let mut cut = room;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            self.text.push_str(&text[..cut]);
            self.dropped += text.len() - cut;
        }
    }

    fn finish(mut self) -> String {
        let tail = self.decoder.finish();
        self.push(&tail);
        if self.dropped > 0 {
            let kept = match self.keep {
                k if k % (1 << 20) == 0 => format!("{} MiB", k >> 20),
                k => format!("{} KiB", k >> 10),
            };
            self.text.push_str(&format!(
                "\n[{} bytes of output beyond {kept} were discarded]",
                self.dropped
            ));
        }
        self.text
    }
}

/// Reads what is there; `None` at the end of the stream or on an error.
async fn read_some<R: AsyncRead + Unpin>(pipe: &mut Option<R>, buf: &mut [u8]) -> Option<usize> {
    let pipe = pipe.as_mut()?;
    match pipe.read(buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

/// Waits for a stop under way (never ready when there is none).
async fn poll_stop<S>(stopping: &mut Option<BoxFuture<'_, S>>) -> S {
    match stopping {
        Some(stop) => stop.await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
