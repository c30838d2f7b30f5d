//! The connection's command worker: one long-lived Perl process on the remote
//! (`command_worker.pl`) on a channel of its own, which starts every shell command of every
//! session on the host in a new session and process group, streams its stdout and stderr
//! back in frames as they come, reports its exit status, and stops its group (TERM, KILL after
//! the grace period) when asked or when the channel closes. A command then costs one round
//! trip on the connection instead of a new channel and a login shell.
//!
//! A task owns the worker (started on the first command, again after it died) and routes its
//! frames to the commands: each gets bounded pipes for its output, so a command whose output
//! is not read holds back the worker's channel, not the daemon's memory. The remote is not
//! trusted: a frame longer than its type allows, of an unknown type or with a malformed field
//! ends the worker (its commands see a lost connection), and frames for commands no longer
//! followed are dropped.

use super::super::child::{Control, KILL_GRACE, Process};
use super::super::process::{self, SpawnedChild};
use super::connection::{SshTarget, mux_command};
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::{mpsc, oneshot};

/// The worker, run by the remote's bash with the grace period in seconds as `$2`. `SSH_CLIENT`
/// is unset as for the file workers, though Perl reads no startup file.
const START: &str = r#"unset SSH_CLIENT SSH2_CLIENT; exec perl -e "$1" -- "$2""#;
const PROGRAM: &str = include_str!("command_worker.pl");

/// Largest output frame the worker sends (it reads its pipes 64 KiB at a time).
const MAX_OUTPUT_FRAME: usize = 64 * 1024;
/// Largest other frame (a process group, an exit status, a reason).
const MAX_OTHER_FRAME: usize = 4096;
/// Type, id, length.
const HEADER: usize = 9;
/// Buffer of each command's stdout and stderr between the task and the command's loop.
const PIPE_BUFFER: usize = 64 * 1024;
/// After a worker failed to start, commands use channels of their own for this long before
/// the next attempt.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// Why a command did not start on the worker.
pub(super) enum Unstarted {
    /// There is no worker (it could not be started, or the connection dropped before the
    /// command started): the command may run on a channel of its own.
    NoWorker(String),
    /// The worker refused it (its directory cannot be entered, no fork): the reason.
    Refused(String),
}

/// A command started on the worker.
pub(super) struct Started {
    /// Its process group on the remote.
    pub(super) group: i32,
    /// Its exit status.
    pub(super) process: RemoteProcess,
    pub(super) stdout: DuplexStream,
    pub(super) stderr: DuplexStream,
    /// Stops it; sends the worker `D` when dropped.
    pub(super) control: Stopper,
}

/// The handle to a connection's command worker task.
pub(super) struct Commands {
    requests: mpsc::Sender<Request>,
    next: AtomicU32,
}

enum Request {
    /// Start the worker if none runs, so the first command does not wait for it (its channel
    /// starts the remote login shell, whose startup files may take a second).
    Warm {
        timeout: Duration,
    },
    Start {
        id: u32,
        payload: Vec<u8>,
        /// How long the worker may take to start.
        timeout: Duration,
        route: Route,
    },
    Stop {
        id: u32,
        done: oneshot::Sender<()>,
    },
    /// The command is no longer followed; `stop`: its group may still run (its caller went
    /// away mid-command), stop it first.
    Done {
        id: u32,
        stop: bool,
    },
}

/// Where one command's frames go.
struct Route {
    started: Option<oneshot::Sender<Result<i32, Unstarted>>>,
    stdout: Option<DuplexStream>,
    stderr: Option<DuplexStream>,
    exit: Option<oneshot::Sender<ExitStatus>>,
    stops: Vec<oneshot::Sender<()>>,
}

impl Commands {
    /// The handle; its task starts the worker over the master at `control` when the first
    /// command comes, and ends it when the handle is dropped.
    pub(super) fn new(target: SshTarget, control: PathBuf) -> Self {
        let (requests, receiver) = mpsc::channel(64);
        tokio::spawn(serve(target, control, receiver));
        Self {
            requests,
            next: AtomicU32::new(1),
        }
    }

    /// Starts the worker in the background if none runs.
    pub(super) fn warm(&self, timeout: Duration) {
        // Full: commands are coming anyway, and the first starts it.
        let _ = self.requests.try_send(Request::Warm { timeout });
    }

    /// Starts `command` in `cwd` with exactly the variables `env` (`NAME=VALUE`), none of
    /// which holds a NUL byte; waits at most `timeout` for the worker (when it must start)
    /// and the command's start.
    pub(super) async fn start(
        &self,
        cwd: &str,
        command: &str,
        env: &[String],
        timeout: Duration,
    ) -> Result<Started, Unstarted> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut payload = Vec::with_capacity(cwd.len() + command.len() + 2);
        for part in [cwd, command]
            .into_iter()
            .chain(env.iter().map(String::as_str))
        {
            payload.extend_from_slice(part.as_bytes());
            payload.push(0);
        }
        payload.pop();
        let (out_write, stdout) = tokio::io::duplex(PIPE_BUFFER);
        let (err_write, stderr) = tokio::io::duplex(PIPE_BUFFER);
        let (started, answer) = oneshot::channel();
        let (exit, status) = oneshot::channel();
        let route = Route {
            started: Some(started),
            stdout: Some(out_write),
            stderr: Some(err_write),
            exit: Some(exit),
            stops: Vec::new(),
        };
        let gone = || Unstarted::NoWorker("the command worker's task is gone".to_owned());
        self.requests
            .send(Request::Start {
                id,
                payload,
                timeout,
                route,
            })
            .await
            .map_err(|_| gone())?;
        let control = Stopper {
            id,
            requests: self.requests.clone(),
            limit: KILL_GRACE + timeout,
            settled: false,
        };
        let group = match tokio::time::timeout(timeout * 2, answer).await {
            Ok(Ok(Ok(group))) => group,
            Ok(Ok(Err(why))) => return Err(why),
            Ok(Err(_)) => {
                return Err(Unstarted::NoWorker(
                    "the connection dropped before the command started".to_owned(),
                ));
            }
            Err(_) => {
                // Dropping `control` forgets it; a late start is stopped first.
                control.stop().await;
                return Err(Unstarted::Refused(format!(
                    "the command did not start within {} s",
                    (timeout * 2).as_secs()
                )));
            }
        };
        Ok(Started {
            group,
            process: RemoteProcess {
                status,
                lost: false,
            },
            stdout,
            stderr,
            control,
        })
    }
}

/// A command's exit status as the worker reports it.
pub(super) struct RemoteProcess {
    status: oneshot::Receiver<ExitStatus>,
    /// The worker went away before the command's status came (the connection dropped).
    pub(super) lost: bool,
}

/// What [`RemoteProcess`] reports when the connection dropped: ssh's own exit code.
const LOST: i32 = 255;

impl Process for RemoteProcess {
    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match (&mut self.status).await {
            Ok(status) => Ok(status),
            Err(_) => {
                self.lost = true;
                Ok(ExitStatus::from_raw(LOST << 8))
            }
        }
    }

    fn try_wait(&mut self) -> Option<ExitStatus> {
        self.status.try_recv().ok()
    }
}

/// Stops a command on the worker; forgets it (`D`) when dropped, stopping it first unless it
/// was [settled](Self::settle).
pub(super) struct Stopper {
    id: u32,
    requests: mpsc::Sender<Request>,
    /// How long a stop may take before it is given up (a remote that never answers).
    limit: Duration,
    settled: bool,
}

impl Stopper {
    /// Whether the command is over: it exited (the worker stops what it left in its group)
    /// or its stop ended its group.
    pub(super) fn settle(&mut self, settled: bool) {
        self.settled = settled;
    }

    fn stop(&self) -> BoxFuture<'static, ()> {
        let (requests, id, limit) = (self.requests.clone(), self.id, self.limit);
        Box::pin(async move {
            let (done, stopped) = oneshot::channel();
            if requests.send(Request::Stop { id, done }).await.is_ok() {
                // An error: the worker went away, and with it the command.
                let _ = tokio::time::timeout(limit, stopped).await;
            }
        })
    }
}

impl Control for Stopper {
    type Stopped = ();

    fn stop(&mut self) -> BoxFuture<'static, ()> {
        Stopper::stop(self)
    }
}

impl Drop for Stopper {
    fn drop(&mut self) {
        let done = Request::Done {
            id: self.id,
            stop: !self.settled,
        };
        if let Err(mpsc::error::TrySendError::Full(done)) = self.requests.try_send(done) {
            let requests = self.requests.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { requests.send(done).await });
            }
        }
    }
}

/// A running worker: its channel's pipes and the frames read but not yet routed.
struct Worker {
    child: tokio::process::Child,
    _spawned: SpawnedChild,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::process::ChildStdout,
    buffer: Vec<u8>,
}

/// A frame from the worker.
#[derive(Debug, PartialEq, Eq)]
struct Frame {
    kind: u8,
    id: u32,
    payload: Vec<u8>,
}

/// The worker broke the protocol (or its channel closed).
#[derive(Debug)]
struct Broken(String);

impl Worker {
    async fn start(
        target: &SshTarget,
        control: &std::path::Path,
        timeout: Duration,
    ) -> Result<Self, String> {
        let grace = format!("{}", KILL_GRACE.as_secs_f64());
        let mut command = mux_command(target, control, START, &[PROGRAM, &grace]);
        command.stderr(Stdio::null());
        let (mut child, spawned) =
            process::spawn(&mut command).map_err(|e| format!("cannot run ssh: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("ssh started without its pipes".to_owned());
        };
        let mut worker = Self {
            child,
            _spawned: spawned,
            stdin,
            stdout,
            buffer: Vec::new(),
        };
        match tokio::time::timeout(timeout, worker.next()).await {
            Ok(Ok(Frame { kind: b'H', .. })) => Ok(worker),
            Ok(Ok(frame)) => Err(format!("the worker said {frame:?} first")),
            Ok(Err(Broken(why))) => Err(why),
            Err(_) => Err(format!("no answer within {} s", timeout.as_secs())),
        }
    }

    /// The next frame. Cancel-safe: what was read stays in the buffer.
    async fn next(&mut self) -> Result<Frame, Broken> {
        loop {
            if let Some(frame) = parse(&mut self.buffer)? {
                return Ok(frame);
            }
            let mut chunk = [0u8; 16 * 1024];
            match self.stdout.read(&mut chunk).await {
                Ok(0) | Err(_) => {
                    let status = self.child.try_wait().ok().flatten();
                    return Err(Broken(match status {
                        Some(s) => format!("its channel closed ({s})"),
                        None => "its channel closed".to_owned(),
                    }));
                }
                Ok(n) => self.buffer.extend_from_slice(&chunk[..n]),
            }
        }
    }

    async fn send(&mut self, kind: u8, id: u32, payload: &[u8]) -> std::io::Result<()> {
        let length = u32::try_from(payload.len()).map_err(std::io::Error::other)?;
        let mut frame = Vec::with_capacity(HEADER + payload.len());
        frame.push(kind);
        frame.extend_from_slice(&id.to_be_bytes());
        frame.extend_from_slice(&length.to_be_bytes());
        frame.extend_from_slice(payload);
        self.stdin.write_all(&frame).await?;
        self.stdin.flush().await
    }
}

/// Takes the first whole frame off `buffer`; `None` until one is whole. Its length is checked
/// against its type before anything more is read, so the buffer stays within one frame and
/// one read.
fn parse(buffer: &mut Vec<u8>) -> Result<Option<Frame>, Broken> {
    let Some(header) = buffer.get(..HEADER) else {
        return Ok(None);
    };
    let kind = header[0];
    let id = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
    let length = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) as usize;
    let max = match kind {
        b'O' | b'E' => MAX_OUTPUT_FRAME,
        b'H' | b'G' | b'F' | b'X' | b'Y' => MAX_OTHER_FRAME,
        _ => {
            return Err(Broken(format!(
                "a frame of unknown type {:?}",
                char::from(kind)
            )));
        }
    };
    if length > max {
        return Err(Broken(format!(
            "a {:?} frame of {length} bytes (at most {max})",
            char::from(kind)
        )));
    }
    if buffer.len() < HEADER + length {
        return Ok(None);
    }
    let payload = buffer[HEADER..HEADER + length].to_vec();
    buffer.drain(..HEADER + length);
    Ok(Some(Frame { kind, id, payload }))
}

/// A process group id (`G`): a number above 1.
fn parse_group(payload: &[u8]) -> Option<i32> {
    std::str::from_utf8(payload)
        .ok()?
        .parse()
        .ok()
        .filter(|&g: &i32| g > 1)
}

/// An exit status (`X`): `c CODE` (0-255) or `s SIGNAL` (1-127).
fn parse_status(payload: &[u8]) -> Option<ExitStatus> {
    let text = std::str::from_utf8(payload).ok()?;
    let (how, n) = text.split_once(' ')?;
    let n: i32 = n.parse().ok()?;
    match how {
        "c" if (0..=255).contains(&n) => Some(ExitStatus::from_raw(n << 8)),
        "s" if (1..=127).contains(&n) => Some(ExitStatus::from_raw(n)),
        _ => None,
    }
}

/// The task that owns the worker: starts it for a command when none runs, writes the
/// commands' requests to it and routes its frames.
async fn serve(target: SshTarget, control: PathBuf, mut requests: mpsc::Receiver<Request>) {
    let mut worker: Option<Worker> = None;
    let mut routes: HashMap<u32, Route> = HashMap::new();
    let mut failed: Option<(Instant, String)> = None;
    loop {
        let frame = async {
            match worker.as_mut() {
                Some(w) => w.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            request = requests.recv() => {
                let Some(request) = request else { return };
                let sent = match request {
                    Request::Warm { timeout } => {
                        if worker.is_none() {
                            worker = ensure(&target, &control, timeout, &mut failed).await.ok();
                        }
                        Ok(())
                    }
                    Request::Start { id, payload, timeout, mut route } => {
                        if worker.is_none() {
                            match ensure(&target, &control, timeout, &mut failed).await {
                                Ok(w) => worker = Some(w),
                                Err(why) => {
                                    reply(&mut route, Err(Unstarted::NoWorker(why)));
                                    continue;
                                }
                            }
                        }
                        routes.insert(id, route);
                        send(&mut worker, b'S', id, &payload).await
                    }
                    Request::Stop { id, done } => match routes.get_mut(&id) {
                        Some(route) => {
                            route.stops.push(done);
                            send(&mut worker, b'K', id, &[]).await
                        }
                        None => Ok(()),
                    },
                    Request::Done { id, stop } => match routes.remove(&id) {
                        Some(_) if stop => match send(&mut worker, b'K', id, &[]).await {
                            Ok(()) => send(&mut worker, b'D', id, &[]).await,
                            e => e,
                        },
                        Some(_) => send(&mut worker, b'D', id, &[]).await,
                        None => Ok(()),
                    },
                };
                if let Err(e) = sent {
                    tracing::info!(host = %target.label, "the command worker's channel closed: {e}");
                    worker = None;
                    routes.clear();
                }
            }
            frame = frame => match frame {
                Ok(frame) => {
                    if let Err(Broken(why)) = route(&mut routes, frame).await {
                        tracing::warn!(host = %target.label, "the command worker broke the protocol, ended: {why}");
                        failed = Some((Instant::now(), why));
                        worker = None;
                        routes.clear();
                    }
                }
                Err(Broken(why)) => {
                    tracing::info!(host = %target.label, "the command worker ended: {why}");
                    worker = None;
                    routes.clear();
                }
            },
        }
    }
}

/// A new worker, unless one failed to start less than [`RETRY_AFTER`] ago; records a failure.
async fn ensure(
    target: &SshTarget,
    control: &std::path::Path,
    timeout: Duration,
    failed: &mut Option<(Instant, String)>,
) -> Result<Worker, String> {
    if let Some((at, why)) = failed.as_ref()
        && at.elapsed() < RETRY_AFTER
    {
        return Err(why.clone());
    }
    match Worker::start(target, control, timeout).await {
        Ok(w) => {
            *failed = None;
            Ok(w)
        }
        Err(why) => {
            tracing::info!(host = %target.label, "no command worker, commands use channels of their own: {why}");
            *failed = Some((Instant::now(), why.clone()));
            Err(why)
        }
    }
}

/// Writes a request to the worker; an error means its channel is gone.
async fn send(
    worker: &mut Option<Worker>,
    kind: u8,
    id: u32,
    payload: &[u8],
) -> std::io::Result<()> {
    match worker.as_mut() {
        Some(w) => w.send(kind, id, payload).await,
        None => Err(std::io::Error::other("no worker")),
    }
}

fn reply(route: &mut Route, answer: Result<i32, Unstarted>) {
    if let Some(started) = route.started.take() {
        let _ = started.send(answer);
    }
}

/// Hands a frame to its command; frames of commands no longer followed are dropped.
async fn route(routes: &mut HashMap<u32, Route>, frame: Frame) -> Result<(), Broken> {
    let Frame { kind, id, payload } = frame;
    let malformed = || {
        Broken(format!(
            "a malformed {:?} frame: {:?}",
            char::from(kind),
            String::from_utf8_lossy(&payload)
        ))
    };
    if kind == b'H' {
        return Err(Broken("a second hello".to_owned()));
    }
    let Some(route) = routes.get_mut(&id) else {
        return Ok(());
    };
    match kind {
        b'G' => {
            let group = parse_group(&payload).ok_or_else(malformed)?;
            reply(route, Ok(group));
        }
        b'F' => {
            let reason = String::from_utf8_lossy(&payload).into_owned();
            reply(route, Err(Unstarted::Refused(reason)));
            routes.remove(&id);
        }
        b'O' | b'E' => {
            let pipe = if kind == b'O' {
                &mut route.stdout
            } else {
                &mut route.stderr
            };
            if payload.is_empty() {
                *pipe = None;
            } else if let Some(writer) = pipe {
                // The command's loop stopped reading: the rest is dropped.
                if writer.write_all(&payload).await.is_err() {
                    *pipe = None;
                }
            }
        }
        b'X' => {
            let status = parse_status(&payload).ok_or_else(malformed)?;
            if let Some(exit) = route.exit.take() {
                let _ = exit.send(status);
            }
        }
        _ => {
            for done in route.stops.drain(..) {
                let _ = done.send(());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, id: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![kind];
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn frames_are_taken_whole_and_one_at_a_time() {
        let mut buffer = frame(b'O', 7, b"hello");
        buffer.extend(frame(b'X', 7, b"c 0"));
        let whole = buffer.len();
        let mut partial = buffer[..whole - 1].to_vec();
        assert_eq!(
            parse(&mut partial).unwrap(),
            Some(Frame {
                kind: b'O',
                id: 7,
                payload: b"hello".to_vec()
            })
        );
        assert_eq!(
            parse(&mut partial).unwrap(),
            None,
            "the X frame is not whole"
        );
        assert_eq!(parse(&mut buffer[..4].to_vec()).unwrap(), None);
    }

    #[test]
    fn a_hostile_worker_breaks_the_protocol_at_its_first_bad_frame() {
        // Longer than its type allows: refused from the header alone, before the payload.
        let mut huge = frame(b'O', 1, &[])[..5].to_vec();
        huge.extend_from_slice(&(MAX_OUTPUT_FRAME as u32 + 1).to_be_bytes());
        assert!(parse(&mut huge).is_err());
        let mut big_group = frame(b'G', 1, &[])[..5].to_vec();
        big_group.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(parse(&mut big_group).is_err());
        assert!(parse(&mut b"garbage!!\n".to_vec()).is_err());
        assert!(parse(&mut frame(0, 1, b"")).is_err());
        for group in ["", "1", "0", "-5", "x", "99999999999", "12 "] {
            assert_eq!(parse_group(group.as_bytes()), None, "{group:?}");
        }
        assert_eq!(parse_group(b"4242"), Some(4242));
        for status in [
            "", "c", "c 256", "c -1", "s 0", "s 128", "q 1", "c 1 2", "c x",
        ] {
            assert!(parse_status(status.as_bytes()).is_none(), "{status:?}");
        }
        assert_eq!(parse_status(b"c 3").unwrap().code(), Some(3));
        assert_eq!(parse_status(b"s 9").unwrap().signal(), Some(9));
    }

    #[tokio::test]
    async fn frames_of_unknown_commands_are_dropped_and_output_reaches_its_command() {
        let mut routes = HashMap::new();
        let (write, mut read) = tokio::io::duplex(PIPE_BUFFER);
        let (exit, status) = oneshot::channel();
        routes.insert(
            3,
            Route {
                started: None,
                stdout: Some(write),
                stderr: None,
                exit: Some(exit),
                stops: Vec::new(),
            },
        );
        let f = |kind, id, payload: &[u8]| Frame {
            kind,
            id,
            payload: payload.to_vec(),
        };
        route(&mut routes, f(b'O', 99, b"not yours")).await.unwrap();
        route(&mut routes, f(b'O', 3, b"out")).await.unwrap();
        route(&mut routes, f(b'O', 3, b"")).await.unwrap();
        route(&mut routes, f(b'X', 3, b"c 7")).await.unwrap();
        let mut text = String::new();
        read.read_to_string(&mut text).await.unwrap();
        assert_eq!(text, "out", "the empty frame ended the stream");
        assert_eq!(status.await.unwrap().code(), Some(7));
        assert!(route(&mut routes, f(b'X', 3, b"c 999")).await.is_err());
        assert!(route(&mut routes, f(b'H', 0, b"")).await.is_err());
    }
}
