//! The container's command worker: one POSIX sh process (`worker.sh`, busybox's sh is
//! enough) exec'd once per container through the engine's API, which starts each command in
//! a new session and process group, reports its group and exit status, and stops a group
//! (TERM, KILL after the grace period) when asked. An engine exec costs tens of
//! milliseconds; a line to the worker costs one write. The commands' output does not pass
//! through it: they write to FIFOs in the control directory, which the daemon reads itself.
//! On a remote engine (no control directory) each command is exec'd by the daemon with its
//! output on the exec's attach stream (`remote.rs`); the worker then only relays what those
//! commands report (their group and exit status, written to a FIFO it made in the container)
//! and stops groups, so timeouts, aborts and a dropped link work the same on both.
//!
//! A task owns the exec (started for the first command, again after it died) and routes the
//! worker's answers to the commands. The container is not trusted: an answer longer than
//! [`MAX_LINE`], of an unknown kind or with a malformed field ends the worker (its commands
//! see it lost), and answers for commands no longer followed are dropped.

use super::super::child::{Control, KILL_GRACE, Process};
use super::engine::{CONTROL_MOUNT, Engine};
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecResults};
use futures::StreamExt;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::pin::Pin;
use std::process::ExitStatus;
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

const PROGRAM: &str = include_str!("worker.sh");
/// Longest answer line: a kind, a command id, a process group or a short reason.
const MAX_LINE: usize = 1024;
/// How long the worker's exec may take to answer its first line.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The handle to a container's worker task.
pub(super) struct Worker {
    requests: mpsc::Sender<Request>,
}

enum Request {
    Start {
        id: u64,
        started: oneshot::Sender<Result<i32, String>>,
        exit: oneshot::Sender<ExitStatus>,
        /// `Some`: the daemon starts the command itself (a remote engine); the worker only
        /// follows it, and this gets the FIFO its reports go to.
        follow: Option<oneshot::Sender<String>>,
    },
    Stop {
        id: u64,
        group: i32,
        done: oneshot::Sender<()>,
    },
    /// The command is no longer followed; `stop`: its group may still run, stop it.
    Forget { id: u64, stop: Option<i32> },
}

/// Where one command's answers go.
#[derive(Default)]
struct Route {
    started: Option<oneshot::Sender<Result<i32, String>>>,
    exit: Option<oneshot::Sender<ExitStatus>>,
    stops: Vec<oneshot::Sender<()>>,
}

impl Worker {
    /// The handle; its task execs the worker in container `container` on `engine` at once
    /// (and again for a command after it died), and ends it when the handle is dropped.
    /// `local`: the control directory is mounted (a local engine); else the worker makes
    /// the FIFO the daemon's own execs report to.
    pub(super) fn new(engine: Engine, container: String, local: bool) -> Self {
        let (requests, receiver) = mpsc::channel(64);
        tokio::spawn(serve(engine, container, local, receiver));
        Self { requests }
    }

    /// Starts command `id` (its script and FIFOs are in the control directory); returns its
    /// process group, its exit status to come and what stops it.
    pub(super) async fn start(&self, id: u64) -> Result<(i32, ContainerProcess, Stopper), String> {
        self.request(id, None).await?.started().await
    }

    /// Follows command `id`, which the daemon starts itself: returns the FIFO in the
    /// container its runner reports its group and status to, and what awaits them.
    pub(super) async fn follow(&self, id: u64) -> Result<(String, Pending), String> {
        let (follow, fifo) = oneshot::channel();
        let pending = self.request(id, Some(follow)).await?;
        match fifo.await {
            Ok(path) => Ok((path, pending)),
            Err(_) => Err(pending
                .started()
                .await
                .err()
                .unwrap_or_else(|| "the container's command worker ended".to_owned())),
        }
    }

    async fn request(
        &self,
        id: u64,
        follow: Option<oneshot::Sender<String>>,
    ) -> Result<Pending, String> {
        let (started, answer) = oneshot::channel();
        let (exit, status) = oneshot::channel();
        self.requests
            .send(Request::Start {
                id,
                started,
                exit,
                follow,
            })
            .await
            .map_err(|_| "the container's command worker is gone".to_owned())?;
        Ok(Pending {
            id,
            answer,
            status,
            requests: self.requests.clone(),
        })
    }
}

/// A command the worker was asked about, until it reports the command's group.
pub(super) struct Pending {
    id: u64,
    answer: oneshot::Receiver<Result<i32, String>>,
    status: oneshot::Receiver<ExitStatus>,
    requests: mpsc::Sender<Request>,
}

impl Pending {
    /// Waits for the command's group; returns it, its exit status to come and what stops
    /// it.
    pub(super) async fn started(self) -> Result<(i32, ContainerProcess, Stopper), String> {
        let Self {
            id,
            answer,
            status,
            requests,
        } = self;
        let group = match tokio::time::timeout(START_TIMEOUT * 2, answer).await {
            Ok(Ok(answer)) => answer?,
            Ok(Err(_)) => return Err("the container's command worker ended".to_owned()),
            Err(_) => {
                let _ = requests.try_send(Request::Forget { id, stop: None });
                return Err(format!(
                    "the command did not start within {} s",
                    (START_TIMEOUT * 2).as_secs()
                ));
            }
        };
        let stopper = Stopper {
            id,
            group,
            requests,
            settled: false,
        };
        Ok((
            group,
            ContainerProcess {
                status,
                lost: false,
            },
            stopper,
        ))
    }
}

/// A command's exit status as the worker reports it.
pub(super) struct ContainerProcess {
    status: oneshot::Receiver<ExitStatus>,
    /// The worker went away before the status came.
    pub(super) lost: bool,
}

impl Process for ContainerProcess {
    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match (&mut self.status).await {
            Ok(status) => Ok(status),
            Err(_) => {
                self.lost = true;
                Ok(ExitStatus::from_raw(255 << 8))
            }
        }
    }

    fn try_wait(&mut self) -> Option<ExitStatus> {
        self.status.try_recv().ok()
    }
}

/// Stops a command's group; forgets the command when dropped, stopping its group first unless
/// it was [settled](Self::settle).
pub(super) struct Stopper {
    id: u64,
    group: i32,
    requests: mpsc::Sender<Request>,
    settled: bool,
}

impl Stopper {
    /// Whether the command is over: it exited (the worker stops what it left in its group)
    /// or its stop ended its group.
    pub(super) fn settle(&mut self, settled: bool) {
        self.settled = settled;
    }
}

impl Control for Stopper {
    type Stopped = ();

    fn stop(&mut self) -> BoxFuture<'static, ()> {
        let (requests, id, group) = (self.requests.clone(), self.id, self.group);
        Box::pin(async move {
            let (done, stopped) = oneshot::channel();
            if requests
                .send(Request::Stop { id, group, done })
                .await
                .is_ok()
            {
                // An error: the worker went away, and with it the command.
                let _ = tokio::time::timeout(KILL_GRACE * 3, stopped).await;
            }
        })
    }
}

impl Drop for Stopper {
    fn drop(&mut self) {
        let forget = Request::Forget {
            id: self.id,
            stop: (!self.settled).then_some(self.group),
        };
        if let Err(mpsc::error::TrySendError::Full(forget)) = self.requests.try_send(forget) {
            let requests = self.requests.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { requests.send(forget).await });
            }
        }
    }
}

type Input = Pin<Box<dyn AsyncWrite + Send>>;
type Output =
    Pin<Box<dyn futures::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;

/// A running worker exec: its stdin, its stdout and the part of a line read so far.
struct Exec {
    input: Input,
    output: Output,
    buffer: Vec<u8>,
    /// The FIFO the daemon's own execs report to (a remote engine's worker).
    fifo: Option<String>,
}

impl Exec {
    async fn start(engine: &Engine, container: &str, local: bool) -> Result<Self, String> {
        let grace = (KILL_GRACE.as_millis() / 100).to_string();
        let options = CreateExecOptions {
            cmd: Some(vec![
                "/bin/sh",
                "-c",
                PROGRAM,
                "agentd-worker",
                if local { CONTROL_MOUNT } else { "-" },
                &grace,
            ]),
            attach_stdin: Some(true),
            attach_stdout: Some(true),
            attach_stderr: Some(false),
            ..CreateExecOptions::default()
        };
        let docker = engine.docker();
        let created = docker
            .create_exec(container, options)
            .await
            .map_err(|e| format!("cannot exec the command worker: {e}"))?;
        let (output, input) = match docker.start_exec(&created.id, None).await {
            Ok(StartExecResults::Attached { output, input }) => (output, input),
            Ok(StartExecResults::Detached) => return Err("the worker exec detached".to_owned()),
            Err(e) => return Err(format!("cannot start the command worker: {e}")),
        };
        let mut exec = Self {
            input,
            output,
            buffer: Vec::new(),
            fifo: None,
        };
        match tokio::time::timeout(START_TIMEOUT, exec.next()).await {
            Ok(Ok(line)) if line == "H" && local => Ok(exec),
            Ok(Ok(line)) if !local && line.starts_with("H /") => {
                exec.fifo = Some(line[2..].to_owned());
                Ok(exec)
            }
            Ok(Ok(line)) => Err(format!("the worker said {line:?} first")),
            Ok(Err(why)) => Err(why),
            Err(_) => Err(format!(
                "the worker did not answer within {} s",
                START_TIMEOUT.as_secs()
            )),
        }
    }

    /// The next answer line. Cancel-safe: what was read stays in the buffer.
    async fn next(&mut self) -> Result<String, String> {
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                return String::from_utf8(line[..end].to_vec())
                    .map_err(|_| "an answer that is not UTF-8".to_owned());
            }
            if self.buffer.len() > MAX_LINE {
                return Err(format!("an answer longer than {MAX_LINE} bytes"));
            }
            match self.output.next().await {
                Some(Ok(LogOutput::StdOut { message })) => {
                    self.buffer.extend_from_slice(&message);
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(format!("its stream failed: {e}")),
                None => return Err("its stream closed".to_owned()),
            }
        }
    }

    async fn send(&mut self, line: &str) -> std::io::Result<()> {
        self.input.write_all(line.as_bytes()).await?;
        self.input.flush().await
    }
}

/// The task that owns the worker exec: starts it for a command when none runs, writes the
/// requests to it and routes its answers.
async fn serve(
    engine: Engine,
    container: String,
    local: bool,
    mut requests: mpsc::Receiver<Request>,
) {
    // Started at once, so the first command does not wait for the exec.
    let mut exec: Option<Exec> = match Exec::start(&engine, &container, local).await {
        Ok(e) => Some(e),
        Err(why) => {
            tracing::info!(container, "no command worker yet: {why}");
            None
        }
    };
    let mut routes: HashMap<u64, Route> = HashMap::new();
    loop {
        let answer = async {
            match exec.as_mut() {
                Some(e) => e.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            request = requests.recv() => {
                let Some(request) = request else { return };
                let sent = match request {
                    Request::Start { id, started, exit, follow } => {
                        if exec.is_none() {
                            match Exec::start(&engine, &container, local).await {
                                Ok(e) => exec = Some(e),
                                Err(why) => {
                                    let _ = started.send(Err(why));
                                    continue;
                                }
                            }
                        }
                        routes.insert(id, Route { started: Some(started), exit: Some(exit), stops: Vec::new() });
                        match (follow, exec.as_ref().and_then(|e| e.fifo.clone())) {
                            (None, _) => send(&mut exec, &format!("S {id}\n")).await,
                            (Some(follow), Some(fifo)) => {
                                let _ = follow.send(fifo);
                                Ok(())
                            }
                            (Some(_), None) => Err(std::io::Error::other("no report FIFO")),
                        }
                    }
                    Request::Stop { id, group, done } => match routes.get_mut(&id) {
                        Some(route) => {
                            route.stops.push(done);
                            send(&mut exec, &format!("K {id} {group}\n")).await
                        }
                        None => Ok(()),
                    },
                    Request::Forget { id, stop } => {
                        routes.remove(&id);
                        match stop {
                            // Nobody waits for its `Z`.
                            Some(group) => send(&mut exec, &format!("K {id} {group}\n")).await,
                            None => Ok(()),
                        }
                    }
                };
                if let Err(e) = sent {
                    tracing::info!(container, "the container's command worker went away: {e}");
                    exec = None;
                    routes.clear();
                }
            }
            answer = answer => {
                let broken = match answer.and_then(|line| route(&mut routes, &line)) {
                    // Started for a caller that went (its tool call was dropped): stopped.
                    Ok(Some((id, group))) => send(&mut exec, &format!("K {id} {group}\n"))
                        .await
                        .err()
                        .map(|e| e.to_string()),
                    Ok(None) => None,
                    Err(why) => Some(why),
                };
                if let Some(why) = broken {
                    tracing::info!(container, "the container's command worker ended: {why}");
                    exec = None;
                    routes.clear();
                }
            }
        }
    }
}

async fn send(exec: &mut Option<Exec>, line: &str) -> std::io::Result<()> {
    match exec.as_mut() {
        Some(e) => e.send(line).await,
        None => Err(std::io::Error::other("no worker")),
    }
}

/// Hands an answer to its command; answers for commands no longer followed are dropped.
/// Returns a command whose group started after its caller went, to be stopped.
fn route(routes: &mut HashMap<u64, Route>, line: &str) -> Result<Option<(u64, i32)>, String> {
    let malformed = || format!("a malformed answer: {line:?}");
    let mut fields = line.splitn(3, ' ');
    let kind = fields.next().unwrap_or_default();
    let id: u64 = fields
        .next()
        .and_then(|f| f.parse().ok())
        .ok_or_else(malformed)?;
    let rest = fields.next();
    let number =
        || -> Result<i32, String> { rest.and_then(|r| r.parse().ok()).ok_or_else(malformed) };
    match kind {
        "G" => {
            let group = number().and_then(|g| if g > 1 { Ok(g) } else { Err(malformed()) })?;
            // A second `G` for a command (not the worker's: a process of the container's
            // user writing to its FIFO) changes nothing.
            let taken = match routes.get_mut(&id) {
                Some(route) => match route.started.take() {
                    Some(started) => started.send(Ok(group)).is_ok(),
                    None => true,
                },
                None => false,
            };
            if !taken {
                routes.remove(&id);
                return Ok(Some((id, group)));
            }
        }
        "F" => {
            if let Some(mut route) = routes.remove(&id)
                && let Some(started) = route.started.take()
            {
                let _ = started.send(Err(rest.unwrap_or("refused").to_owned()));
            }
        }
        "X" => {
            let code = number().and_then(|c| {
                if (0..=255).contains(&c) {
                    Ok(c)
                } else {
                    Err(malformed())
                }
            })?;
            if let Some(exit) = routes.get_mut(&id).and_then(|r| r.exit.take()) {
                let _ = exit.send(ExitStatus::from_raw(code << 8));
            }
        }
        "Z" => {
            for done in routes
                .get_mut(&id)
                .map(|r| std::mem::take(&mut r.stops))
                .unwrap_or_default()
            {
                let _ = done.send(());
            }
        }
        _ => return Err(malformed()),
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_worker_breaks_the_protocol_at_its_first_bad_answer() {
        let mut routes = HashMap::new();
        for bad in [
            "",
            "Q 1",
            "G",
            "G x 5",
            "G 1",
            "G 1 1",
            "G 1 -4",
            "X 1 256",
            "X 1 -1",
            "X 1 x",
            "X 1 99999999999",
        ] {
            assert!(route(&mut routes, bad).is_err(), "{bad:?}");
        }
        // Well-formed answers for commands nobody follows are dropped, but a group that
        // started for nobody is to be stopped.
        assert_eq!(route(&mut routes, "G 7 42"), Ok(Some((7, 42))));
        assert_eq!(route(&mut routes, "X 7 3"), Ok(None));
        assert_eq!(route(&mut routes, "Z 7"), Ok(None));
    }

    /// A tool call dropped (aborted) while its command was being started leaves no group
    /// running: the start that comes after is stopped.
    #[test]
    fn a_group_started_after_its_caller_went_is_to_be_stopped() {
        let mut routes = HashMap::new();
        let (started, group) = oneshot::channel();
        let (exit, _status) = oneshot::channel();
        routes.insert(
            5,
            Route {
                started: Some(started),
                exit: Some(exit),
                stops: Vec::new(),
            },
        );
        drop(group);
        assert_eq!(route(&mut routes, "G 5 777"), Ok(Some((5, 777))));
        assert!(routes.is_empty());
    }

    #[tokio::test]
    async fn answers_reach_their_command() {
        let mut routes = HashMap::new();
        let (started, group) = oneshot::channel();
        let (exit, status) = oneshot::channel();
        routes.insert(
            3,
            Route {
                started: Some(started),
                exit: Some(exit),
                stops: Vec::new(),
            },
        );
        assert_eq!(route(&mut routes, "G 3 4242"), Ok(None));
        // A second start of the same command (forged by a process of the container's user)
        // neither stops it nor takes its exit away.
        assert_eq!(route(&mut routes, "G 3 99"), Ok(None));
        route(&mut routes, "X 3 7").unwrap();
        assert_eq!(group.await.unwrap(), Ok(4242));
        assert_eq!(status.await.unwrap().code(), Some(7));
    }
}
