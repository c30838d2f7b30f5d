//! The server: the socket's lifecycle, framing, dispatch and peer credentials. Only this
//! module sees jsonrpsee; it turns protocol calls into [`agentd_core`] calls and their
//! errors into protocol error codes, in one place (`methods.rs`).
//!
//! The accept loop bounds what clients can hold: at most [`Limits::max_connections`]
//! connections (a client beyond that gets an `overloaded` error before the close), idle
//! connections time out, and a failing `accept` (out of file descriptors) backs off instead
//! of spinning, with its log lines summarised.

mod connection;
mod dispatch;
mod framing;
mod message;
mod methods;
mod peer;
mod socket;

pub(crate) use methods::reload;
pub(crate) use peer::Peer;
pub(crate) use socket::{Listener, ensure_runtime_dir, take_systemd_fd};

use agentd_core::Registry;
use peer::{PeerProcess, Refusal};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Refusals answered at once; each waits briefly for the client's first request so that the
/// error carries its id. Beyond this, refused clients get the error line at once.
const MAX_REFUSING: usize = 32;
/// How long a refused client may take to send its first request.
const REFUSAL_WAIT: Duration = Duration::from_secs(1);
/// Peer checks run at once (see [`screen`]); each holds up to two descriptors for a moment.
const MAX_CHECKS: usize = 8;
/// How long a peer check keeps retrying while the daemon is out of file descriptors.
const CHECK_PATIENCE: Duration = Duration::from_secs(60);
/// Longest pause between `accept` attempts while they fail.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);
/// At most one log line per this period about failing `accept`s.
const ACCEPT_LOG_PERIOD: Duration = Duration::from_secs(10);
/// How long after connections close the allocator is asked to give memory back: a burst of
/// closes costs one trim.
const TRIM_DELAY: Duration = Duration::from_secs(1);

/// Per-connection limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Largest request, in bytes; larger ones get -32007 and are skipped.
    pub max_request_size: u32,
    /// Largest response, in bytes; larger ones become -32008.
    pub max_response_size: u32,
    /// Messages queued for a connection before handlers wait. Small, because events can be
    /// large (see research/transport.md: the bound is in messages, not bytes).
    pub message_buffer: usize,
    /// Calls handled at once; the connection is not read while at the limit.
    pub max_concurrent_calls: usize,
    /// Open subscriptions per connection.
    pub max_subscriptions: u32,
    /// Requests in one batch.
    pub max_batch_len: usize,
    /// Connections served at once; one more is answered with an `overloaded` error and
    /// closed.
    pub max_connections: usize,
    /// A connection with no subscription and no call in flight that completes no message for
    /// this long is closed (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// Bytes of requests held at once across all connections, being read or handled; a
    /// message that would pass it is dropped and answered `overloaded`. Bounds what many
    /// connections sending large messages at once can make the daemon hold.
    pub max_buffered_input: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_request_size: agentd_proto::MAX_REQUEST_BYTES as u32,
            max_response_size: 64 * 1024 * 1024,
            message_buffer: 256,
            max_concurrent_calls: 64,
            max_subscriptions: 256,
            max_batch_len: 100,
            max_connections: 4096,
            idle_timeout: Some(Duration::from_secs(600)),
            max_buffered_input: 256 * 1024 * 1024,
        }
    }
}

impl Limits {
    /// File descriptors kept free for everything but client connections: sessions' files,
    /// tool processes' pipes, provider connections.
    const FD_RESERVE: u64 = 256;

    /// `max_connections` lowered to fit the file descriptor limit `nofile`, so that refusing a
    /// client (which needs one descriptor for a moment) never fails for want of one.
    pub(crate) fn fit_fd_limit(mut self, nofile: u64) -> Self {
        let reserve = Self::FD_RESERVE.min(nofile / 2) + (MAX_REFUSING + 2 * MAX_CHECKS) as u64;
        let room = nofile.saturating_sub(reserve).max(1);
        self.max_connections = self
            .max_connections
            .min(usize::try_from(room).unwrap_or(usize::MAX));
        self
    }
}

/// What the method handlers share.
pub(crate) struct Daemon {
    /// The sessions.
    pub registry: Arc<Registry>,
    /// When the daemon started.
    pub started: Instant,
    /// The socket it serves.
    pub socket: PathBuf,
    /// Cancelled when the daemon begins to shut down: no new connections or requests.
    pub shutdown: CancellationToken,
    /// Cancelled once every session has stopped: subscriptions send their final notification.
    pub streams_closed: CancellationToken,
    /// Client connections open now.
    pub connections: AtomicUsize,
}

/// Serves `listener` until `daemon.shutdown` fires, then stops every session's work and waits
/// for connections to drain their queues. `ready` runs once the socket is being served.
pub(crate) async fn run(
    listener: Listener,
    daemon: Arc<Daemon>,
    limits: Limits,
    ready: impl FnOnce(),
) {
    let methods = methods::build(daemon.clone());
    let uid = nix::unistd::geteuid().as_raw();
    let next_conn = AtomicUsize::new(1);
    let connections = tokio_util::task::TaskTracker::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSING));
    let checks = Arc::new(Semaphore::new(MAX_CHECKS));
    let input_budget = Arc::new(Semaphore::new(
        limits
            .max_buffered_input
            .div_ceil(framing::BUDGET_UNIT)
            .min(Semaphore::MAX_PERMITS),
    ));
    let mut failures = AcceptFailures::default();
    let closed = Arc::new(tokio::sync::Notify::new());
    tokio::spawn(release_memory(closed.clone(), daemon.shutdown.clone()));
    tracing::info!(
        max_connections = limits.max_connections,
        idle_timeout_secs = limits.idle_timeout.map(|t| t.as_secs()),
        "serving"
    );
    ready();
    loop {
        let accepted = tokio::select! {
            a = listener.listener.accept() => a,
            _ = daemon.shutdown.cancelled() => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                failures.succeeded();
                stream
            }
            Err(e) => {
                // EMFILE and the like: the client stays in the backlog; wait for descriptors
                // to free up, longer each time, and keep serving everyone else.
                let pause = failures.failed(&e);
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = daemon.shutdown.cancelled() => break,
                }
                continue;
            }
        };
        let peer = match stream.peer_cred() {
            Ok(c) => Peer {
                uid: c.uid(),
                pid: c.pid(),
            },
            Err(e) => {
                tracing::warn!("cannot read peer credentials: {e}");
                continue;
            }
        };
        // Root may connect too, as to ssh-agent: it can read the daemon's memory anyway.
        if peer.uid != uid && peer.uid != 0 {
            tracing::warn!(
                peer_uid = peer.uid,
                "refused a connection from another user"
            );
            refuse(&connections, &refusals, stream, methods::unauthorized());
            continue;
        }
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(
                max_connections = limits.max_connections,
                "refused a connection: at the limit"
            );
            refuse(
                &connections,
                &refusals,
                stream,
                methods::too_many_connections(limits.max_connections),
            );
            continue;
        };
        let conn_id = next_conn.fetch_add(1, Ordering::Relaxed);
        let shutdown = daemon.shutdown.clone();
        let methods = methods.clone();
        let daemon = daemon.clone();
        let closed = closed.clone();
        let budget = input_budget.clone();
        daemon.connections.fetch_add(1, Ordering::Relaxed);
        let checks = checks.clone();
        connections.spawn(async move {
            if let Some(error) = screen(&stream, peer.pid, &checks).await {
                connection::refuse(stream, error, REFUSAL_WAIT).await;
            } else {
                connection::serve(stream, peer, methods, conn_id, limits, budget, shutdown).await;
            }
            daemon.connections.fetch_sub(1, Ordering::Relaxed);
            drop(slot);
            closed.notify_one();
        });
    }
    let aborted = daemon.registry.shutdown().await;
    tracing::info!(aborted, "sessions stopped");
    daemon.streams_closed.cancel();
    listener.remove_file();
    connections.close();
    // Connections end once their subscriptions have sent their final notification.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), connections.wait()).await;
}

/// The error for a peer the daemon must not serve (see [`peer`]), logged here; `None` lets it
/// in. At most [`MAX_CHECKS`] run at once (each holds a pidfd and reads `/proc` on the
/// blocking pool); one that finds the daemon out of file descriptors waits and tries again,
/// as the accept loop does, for up to [`CHECK_PATIENCE`].
async fn screen(
    stream: &tokio::net::UnixStream,
    pid: Option<i32>,
    checks: &Semaphore,
) -> Option<jsonrpsee::types::ErrorObjectOwned> {
    let daemon = myself();
    let deadline = Instant::now() + CHECK_PATIENCE;
    let mut pause = Duration::from_millis(10);
    let verdict = loop {
        let verdict = match checks.acquire().await {
            Ok(_permit) => match PeerProcess::of(stream, pid) {
                Ok(process) => tokio::task::spawn_blocking(move || process.check(daemon))
                    .await
                    .unwrap_or_else(|e| Err(Refusal::Unknown(format!("the check failed: {e}")))),
                Err(refusal) => Err(refusal),
            },
            Err(_) => Err(Refusal::Unknown("the daemon is stopping".into())),
        };
        match verdict {
            Err(Refusal::OutOfFiles) if Instant::now() < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_ACCEPT_BACKOFF);
            }
            verdict => break verdict,
        }
    };
    let pid = pid.unwrap_or_default();
    let (error, why) = match verdict {
        Ok(()) => return None,
        Err(Refusal::Descendant) => {
            tracing::warn!(
                peer_pid = pid,
                "refused a connection from a process agentd started (a tool command or its child)"
            );
            return Some(methods::started_by_daemon());
        }
        Err(Refusal::OutOfFiles) => (
            methods::unverified_peer("the daemon is out of file descriptors"),
            "out of file descriptors".to_owned(),
        ),
        Err(Refusal::Unknown(why)) => (methods::unverified_peer(&why), why),
    };
    tracing::warn!(
        peer_pid = pid,
        "refused a connection: cannot verify its process: {why}"
    );
    Some(error)
}

/// The daemon as [`agentd_core::process::descends_from`] takes it: its pid and start time, read once
/// (without the start time, 0, every peer's ancestry is walked up to pid 1).
fn myself() -> agentd_core::process::ProcessId {
    static ME: std::sync::OnceLock<agentd_core::process::ProcessId> = std::sync::OnceLock::new();
    *ME.get_or_init(|| {
        let pid = std::process::id() as i32;
        agentd_core::process::identify(pid)
            .unwrap_or(agentd_core::process::ProcessId { pid, start_time: 0 })
    })
}

/// Returns memory to the OS after connections close. Their buffers are freed, but glibc's
/// allocator keeps freed pages in its arenas, so without this the daemon's RSS stays at its
/// high-water mark after a burst of clients (or of large messages) has gone.
async fn release_memory(closed: Arc<tokio::sync::Notify>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = closed.notified() => {}
            _ = shutdown.cancelled() => return,
        }
        tokio::time::sleep(TRIM_DELAY).await;
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: malloc_trim only walks the allocator's own free lists; it takes no pointers.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

/// Answers a refused client with `error` and closes it; bounded, so that a flood of clients
/// cannot make the refusals themselves hold descriptors or memory.
fn refuse(
    connections: &tokio_util::task::TaskTracker,
    refusals: &Arc<Semaphore>,
    stream: tokio::net::UnixStream,
    error: jsonrpsee::types::ErrorObjectOwned,
) {
    match refusals.clone().try_acquire_owned() {
        Ok(permit) => {
            connections.spawn(async move {
                connection::refuse(stream, error, REFUSAL_WAIT).await;
                drop(permit);
            });
        }
        Err(_) => connection::refuse_now(stream, error),
    }
}

/// Backoff and log throttling for failing `accept`s.
#[derive(Default)]
struct AcceptFailures {
    /// Failures in a row.
    streak: u32,
    /// Failures since the last log line.
    unlogged: u64,
    last_log: Option<Instant>,
}

impl AcceptFailures {
    fn succeeded(&mut self) {
        if self.streak > 0 && self.unlogged > 0 {
            tracing::warn!(
                failures = self.unlogged,
                "accept failed {} more times before recovering",
                self.unlogged
            );
        }
        self.streak = 0;
        self.unlogged = 0;
    }

    /// Records a failure; returns how long to wait before the next attempt.
    fn failed(&mut self, e: &std::io::Error) -> Duration {
        self.streak = self.streak.saturating_add(1);
        self.unlogged += 1;
        if self
            .last_log
            .is_none_or(|t| t.elapsed() >= ACCEPT_LOG_PERIOD)
        {
            tracing::warn!(
                failures = self.unlogged,
                "accept failed: {e} (raise the file descriptor limit or lower [server] max_connections)"
            );
            self.unlogged = 0;
            self.last_log = Some(Instant::now());
        }
        let exp = self.streak.min(7);
        (Duration::from_millis(10) * 2u32.pow(exp)).min(MAX_ACCEPT_BACKOFF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_cap_fits_the_fd_limit() {
        let limits = Limits::default();
        assert_eq!(limits.fit_fd_limit(1 << 20).max_connections, 4096);
        assert_eq!(limits.fit_fd_limit(1024).max_connections, 1024 - 256 - 48);
        assert_eq!(limits.fit_fd_limit(100).max_connections, 100 - 50 - 48);
        assert_eq!(limits.fit_fd_limit(10).max_connections, 1);
    }

    #[test]
    fn accept_backoff_grows_to_a_bound_and_resets() {
        let mut f = AcceptFailures::default();
        let e = std::io::Error::from_raw_os_error(24);
        let pauses: Vec<Duration> = (0..10).map(|_| f.failed(&e)).collect();
        assert_eq!(pauses[0], Duration::from_millis(20));
        assert!(pauses.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(pauses[9], MAX_ACCEPT_BACKOFF);
        f.succeeded();
        assert_eq!(f.failed(&e), Duration::from_millis(20));
    }
}
