//! The server: the socket's lifecycle, framing, dispatch and peer credentials. Only this
//! module sees jsonrpsee; it turns protocol calls into [`crate::session`] calls and their
//! errors into protocol error codes, in one place (`methods.rs`).

mod connection;
mod methods;
mod socket;

pub use connection::Peer;
pub use socket::{Error as SocketError, Listener, take_systemd_fd};

use crate::session::Registry;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Per-connection limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
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
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_request_size: 10 * 1024 * 1024,
            max_response_size: 64 * 1024 * 1024,
            message_buffer: 256,
            max_concurrent_calls: 64,
            max_subscriptions: 256,
            max_batch_len: 100,
        }
    }
}

/// What the method handlers share.
pub struct Daemon {
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
}

/// Serves `listener` until `daemon.shutdown` fires, then stops every session's work and waits
/// for connections to drain their queues. `ready` runs once the socket is being served.
pub async fn run(listener: Listener, daemon: Arc<Daemon>, limits: Limits, ready: impl FnOnce()) {
    let methods = methods::build(daemon.clone());
    let uid = nix::unistd::geteuid().as_raw();
    let next_conn = AtomicUsize::new(1);
    let connections = tokio_util::task::TaskTracker::new();
    ready();
    loop {
        let accepted = tokio::select! {
            a = listener.listener.accept() => a,
            _ = daemon.shutdown.cancelled() => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // EMFILE and the like: log and keep serving everyone else.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
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
        if peer.uid != uid {
            tracing::warn!(
                peer_uid = peer.uid,
                "refused a connection from another user"
            );
            connections.spawn(connection::refuse(stream, methods::unauthorized(), limits));
            continue;
        }
        let conn_id = next_conn.fetch_add(1, Ordering::Relaxed);
        connections.spawn(connection::serve(
            stream,
            peer,
            methods.clone(),
            conn_id,
            limits,
            daemon.shutdown.clone(),
        ));
    }
    let aborted = daemon.registry.shutdown().await;
    tracing::info!(aborted, "sessions stopped");
    daemon.streams_closed.cancel();
    listener.remove_file();
    connections.close();
    // Connections end once their subscriptions have sent their final notification.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), connections.wait()).await;
}
