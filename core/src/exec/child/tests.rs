//! The shared loop against a command the test plays: each chunk it sends is one read, and it
//! says when the command exits and what a stop does.

use super::*;
use std::os::unix::process::ExitStatusExt;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::ReadBuf;
use tokio::sync::{mpsc, oneshot, watch};

/// A pipe whose every chunk is one read; dropping the sender closes it.
struct Pipe(mpsc::UnboundedReceiver<Vec<u8>>);

impl AsyncRead for Pipe {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.0.poll_recv(cx) {
            Poll::Ready(Some(chunk)) => {
                assert!(chunk.len() <= buf.remaining(), "a chunk is one read");
                buf.put_slice(&chunk);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(None) => Poll::Ready(Ok(())),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The command's process: it exits when the test says so.
struct Fake(watch::Receiver<Option<ExitStatus>>);

impl Process for Fake {
    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let status = self.0.wait_for(Option::is_some).await.ok().and_then(|s| *s);
        match status {
            Some(status) => Ok(status),
            None => std::future::pending().await,
        }
    }

    fn try_wait(&mut self) -> Option<ExitStatus> {
        *self.0.borrow()
    }
}

/// The test's side of the command.
struct Command {
    stdout: Option<mpsc::UnboundedSender<Vec<u8>>>,
    stderr: Option<mpsc::UnboundedSender<Vec<u8>>>,
    exit: watch::Sender<Option<ExitStatus>>,
}

impl Command {
    fn out(&self, bytes: &[u8]) {
        self.stdout.as_ref().unwrap().send(bytes.to_vec()).unwrap();
    }
    fn err(&self, bytes: &[u8]) {
        self.stderr.as_ref().unwrap().send(bytes.to_vec()).unwrap();
    }
    fn close_pipes(&mut self) {
        (self.stdout, self.stderr) = (None, None);
    }
    fn exit(&self, status: ExitStatus) {
        self.exit.send_replace(Some(status));
    }
}

fn command() -> (Child<Fake, Pipe, Pipe>, Command) {
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let (err_tx, err_rx) = mpsc::unbounded_channel();
    let (exit_tx, exit_rx) = watch::channel(None);
    let child = Child::new(Fake(exit_rx), Some(Pipe(out_rx)), Some(Pipe(err_rx)));
    let command = Command {
        stdout: Some(out_tx),
        stderr: Some(err_tx),
        exit: exit_tx,
    };
    (child, command)
}

fn code(code: i32) -> ExitStatus {
    ExitStatus::from_raw(code << 8)
}

fn killed() -> ExitStatus {
    ExitStatus::from_raw(libc::SIGKILL)
}

/// Counts the stops it is asked for; the first runs `on_stop` (what the command does when
/// signalled, and what the stop reports).
struct Stopper {
    stops: usize,
    on_stop: Option<BoxFuture<'static, &'static str>>,
}

impl Stopper {
    fn new(on_stop: impl Future<Output = &'static str> + Send + 'static) -> Self {
        Self {
            stops: 0,
            on_stop: Some(Box::pin(on_stop)),
        }
    }
    /// For a command nothing should stop (the tests check `stops`).
    fn unused() -> Self {
        Self::new(std::future::pending())
    }
}

impl Control for Stopper {
    type Stopped = &'static str;
    fn stop(&mut self) -> BoxFuture<'static, &'static str> {
        self.stops += 1;
        self.on_stop
            .take()
            .unwrap_or_else(|| Box::pin(async { "a second stop" }))
    }
}

/// What the sink got, in order.
struct Sink {
    tx: mpsc::UnboundedSender<(OutputStream, String)>,
}

impl Sink {
    fn new() -> (Self, mpsc::UnboundedReceiver<(OutputStream, String)>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx }, rx)
    }
    fn output(&self) -> impl Fn(OutputStream, &str) + Send + Sync + '_ {
        |stream, text| {
            let _ = self.tx.send((stream, text.to_owned()));
        }
    }
}

/// A guard against hangs, not a timing assertion.
const WATCHDOG: Duration = Duration::from_secs(60);
/// Awaits `f`, failing the test if it hangs.
async fn guarded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(WATCHDOG, f)
        .await
        .expect("the loop returns")
}

/// A timeout no test reaches.
const NEVER: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn output_reaches_the_sink_in_the_order_it_arrives_across_the_streams() {
    let (mut child, mut command) = command();
    let mut stopper = Stopper::unused();
    let (sink, mut seen) = Sink::new();
    let output = sink.output();
    let cancel = CancellationToken::new();
    let (finished, got) = guarded(async {
        tokio::join!(
            run(&mut child, &mut stopper, NEVER, &cancel, &output),
            async {
                let mut got = Vec::new();
                for (stream, text) in [
                    (OutputStream::Stdout, "one "),
                    (OutputStream::Stderr, "two "),
                    (OutputStream::Stdout, "three "),
                    (OutputStream::Stderr, "four"),
                ] {
                    match stream {
                        OutputStream::Stdout => command.out(text.as_bytes()),
                        OutputStream::Stderr => command.err(text.as_bytes()),
                    }
                    // Streamed while the command runs, not after.
                    got.push(seen.recv().await.unwrap());
                }
                command.close_pipes();
                command.exit(code(0));
                got
            }
        )
    })
    .await;
    let finished = finished.unwrap();
    let expected: Vec<(OutputStream, String)> = [
        (OutputStream::Stdout, "one "),
        (OutputStream::Stderr, "two "),
        (OutputStream::Stdout, "three "),
        (OutputStream::Stderr, "four"),
    ]
    .into_iter()
    .map(|(s, t)| (s, t.to_owned()))
    .collect();
    assert_eq!(got, expected);
    assert_eq!(
        (finished.stdout.as_str(), finished.stderr.as_str()),
        ("one three ", "two four")
    );
    assert_eq!(finished.status, Some(code(0)));
    assert!(!finished.timed_out && !finished.cancelled && finished.stopped.is_none());
    assert_eq!(stopper.stops, 0);
}

/// The cap falls inside a character that arrives in two reads: the sink gets the character
/// whole, the kept copy stops before it and says how much it dropped.
#[tokio::test]
async fn the_output_cap_reached_inside_a_split_character_keeps_whole_characters() {
    let (mut child, mut command) = command();
    let mut stopper = Stopper::unused();
    let (sink, mut seen) = Sink::new();
    let output = sink.output();
    let cancel = CancellationToken::new();
    let (finished, streamed) = guarded(async {
        tokio::join!(
            run(&mut child, &mut stopper, NEVER, &cancel, &output),
            async {
                let filler = vec![b'a'; READ_CHUNK];
                let mut sent = 0;
                while sent + READ_CHUNK < MAX_RETAINED {
                    command.out(&filler);
                    sent += READ_CHUNK;
                }
                // One byte short of the cap, then the first byte of "é".
                let mut last = vec![b'a'; MAX_RETAINED - 1 - sent];
                last.push(0xc3);
                command.out(&last);
                command.out(&[0xa9]);
                command.close_pipes();
                command.exit(code(0));
                let mut streamed = String::new();
                while let Some((_, text)) = seen.recv().await {
                    streamed.push_str(&text);
                    if streamed.ends_with('é') {
                        break;
                    }
                }
                streamed
            }
        )
    })
    .await;
    let finished = finished.unwrap();
    assert_eq!(streamed.len(), MAX_RETAINED + 1);
    assert!(streamed.ends_with("aé"));
    let kept = finished
        .stdout
        .strip_suffix("\n[2 bytes of output beyond 16 MiB were discarded]")
        .expect("the dropped bytes are counted");
    assert_eq!(kept.len(), MAX_RETAINED - 1);
    assert!(kept.bytes().all(|b| b == b'a'));
}

/// A command that closes its pipes is not done: the loop waits for its exit, and a command
/// that never exits meets its timeout.
#[tokio::test]
async fn a_command_that_closes_its_pipes_and_keeps_running_meets_its_timeout() {
    let (mut child, mut command) = command();
    command.out(b"before closing\n");
    command.close_pipes();
    let mut stopper = Stopper::new(async move {
        command.exit(killed());
        "stopped"
    });
    let cancel = CancellationToken::new();
    let finished = guarded(run(
        &mut child,
        &mut stopper,
        Duration::from_millis(100),
        &cancel,
        &|_, _| {},
    ))
    .await
    .unwrap();
    assert!(finished.timed_out && !finished.cancelled);
    assert_eq!(finished.stopped, Some("stopped"));
    assert_eq!(finished.status, Some(killed()));
    assert_eq!(finished.stdout, "before closing\n");
    assert_eq!(stopper.stops, 1);
}

#[tokio::test]
async fn a_command_that_closes_its_pipes_is_waited_for_until_it_exits() {
    let (mut child, mut command) = command();
    let mut stopper = Stopper::unused();
    let cancel = CancellationToken::new();
    let (finished, ()) = guarded(async {
        tokio::join!(
            run(&mut child, &mut stopper, NEVER, &cancel, &|_, _| {}),
            async {
                command.close_pipes();
                // Time for the loop to see both pipes close (it cannot return before the exit).
                for _ in 0..100 {
                    tokio::task::yield_now().await;
                }
                command.exit(code(3));
            }
        )
    })
    .await;
    let finished = finished.unwrap();
    assert_eq!(finished.status, Some(code(3)));
    assert!(!finished.timed_out && !finished.cancelled);
    assert!(!child.held());
}

/// A command that ignores SIGTERM keeps running and printing through the grace period; the
/// loop keeps reading, a cancellation meanwhile starts no second stop, and the result comes
/// once the stop's SIGKILL ended it.
#[tokio::test]
async fn a_timeout_stops_a_command_that_ignores_sigterm_once() {
    let (mut child, command) = command();
    command.out(b"started\n");
    let (stopping, stop_started) = oneshot::channel();
    let (kill, killed_now) = oneshot::channel::<()>();
    let mut stopper = Stopper::new(async move {
        let _ = stopping.send(());
        // SIGTERM: ignored, and it goes on.
        command.out(b"ignoring TERM\n");
        // The grace period, then SIGKILL.
        let _ = killed_now.await;
        command.exit(killed());
        drop(command);
        "killed"
    });
    let cancel = CancellationToken::new();
    let (finished, ()) = guarded(async {
        tokio::join!(
            run(
                &mut child,
                &mut stopper,
                Duration::from_millis(100),
                &cancel,
                &|_, _| {}
            ),
            async {
                stop_started.await.unwrap();
                cancel.cancel();
                for _ in 0..100 {
                    tokio::task::yield_now().await;
                }
                kill.send(()).unwrap();
            }
        )
    })
    .await;
    let finished = finished.unwrap();
    assert!(finished.timed_out, "the timeout started the stop");
    assert!(!finished.cancelled, "the cancellation came during the stop");
    assert_eq!(stopper.stops, 1);
    assert_eq!(finished.stopped, Some("killed"));
    assert_eq!(finished.stdout, "started\nignoring TERM\n");
    assert_eq!(finished.status, Some(killed()));
}

/// Everything dies at the first signal and the pipes close at once, but the stop reports
/// later: the loop waits for its report.
#[tokio::test]
async fn a_cancellation_stops_the_command_and_awaits_the_stops_report() {
    let (mut child, mut command) = command();
    command.out(b"working\n");
    let (stopping, stop_started) = oneshot::channel();
    let (report, reported) = oneshot::channel::<()>();
    let mut stopper = Stopper::new(async move {
        command.close_pipes();
        command.exit(killed());
        let _ = stopping.send(());
        let _ = reported.await;
        "what the stop saw"
    });
    let (sink, mut seen) = Sink::new();
    let output = sink.output();
    let cancel = CancellationToken::new();
    let (finished, ()) = guarded(async {
        tokio::join!(
            run(&mut child, &mut stopper, NEVER, &cancel, &output),
            async {
                seen.recv().await.unwrap();
                cancel.cancel();
                stop_started.await.unwrap();
                for _ in 0..100 {
                    tokio::task::yield_now().await;
                }
                report.send(()).unwrap();
            }
        )
    })
    .await;
    let finished = finished.unwrap();
    assert!(finished.cancelled && !finished.timed_out);
    assert_eq!(finished.stopped, Some("what the stop saw"));
    assert_eq!(finished.stdout, "working\n");
    assert_eq!(finished.status, Some(killed()));
    assert_eq!(stopper.stops, 1);
}

/// The command exits while something it started keeps its stdout open: the loop reads on
/// for the drain, then returns with the pipe still held.
#[tokio::test]
async fn output_held_after_the_exit_is_drained_then_left() {
    let (mut child, command) = command();
    command.out(b"done\n");
    command.exit(code(0));
    let mut stopper = Stopper::unused();
    let cancel = CancellationToken::new();
    let finished = guarded(run(&mut child, &mut stopper, NEVER, &cancel, &|_, _| {}))
        .await
        .unwrap();
    assert_eq!(finished.stdout, "done\n");
    assert_eq!(finished.status, Some(code(0)));
    assert!(child.held(), "the background process still holds the pipes");
    drop(command);
}
