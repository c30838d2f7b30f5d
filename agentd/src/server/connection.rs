//! One client connection's life: find its framing, read its messages (see
//! [`framing`](super::framing)) and hand each to a task of its [`Dispatcher`], write the answers
//! and notifications from one bounded queue, and close it when the client goes, when it stays
//! idle, or when the daemon shuts down. Also the one answer a refused client gets before the
//! close.
//!
//! At most `max_concurrent_calls` messages are handled at once; beyond that the socket is not
//! read, so a client that floods requests is slowed down instead of growing the daemon's
//! memory. An idle connection holds no read or write buffer: buffers are allocated when bytes
//! arrive and freed once consumed, so thousands of idle clients cost little and the memory
//! returns when they go. A connection with no subscription and no call in flight that
//! completes no message for the idle timeout is closed (so a client trickling one message byte
//! by byte is bounded by it too).

use super::Limits;
use super::dispatch::Dispatcher;
use super::framing::{Frame, FrameReader, Framing, FramingError, MessageDecoder};
use super::message::{parse_error, request_id, with_raw_id};
use super::peer::Peer;
use bytes::BytesMut;
use futures::SinkExt;
use jsonrpsee::core::server::{MethodResponse, Methods};
use jsonrpsee::types::error::reject_too_big_request;
use jsonrpsee::types::{ErrorObjectOwned, Id};
use serde_json::value::RawValue;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::Interest;
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;
use tokio_util::codec::FramedWrite;
use tokio_util::sync::CancellationToken;

/// Outgoing bytes gathered before a write.
const WRITE_CHUNK: usize = 64 * 1024;
/// How much of a refused client's first message is read to find its id.
const REFUSAL_READ: usize = 64 * 1024;

/// Serves one connection until the client closes it, it stays idle too long, or the daemon
/// shuts down.
pub(super) async fn serve(
    stream: UnixStream,
    peer: Peer,
    methods: Methods,
    conn_id: usize,
    limits: Limits,
    budget: Arc<Semaphore>,
    shutdown: CancellationToken,
) {
    let (read, write) = stream.into_split();
    let mut reader = FrameReader::new(read);
    let framing = tokio::select! {
        f = reader.framing() => f,
        _ = shutdown.cancelled() => return,
        _ = sleep_or_forever(limits.idle_timeout) => {
            tracing::debug!(conn_id, "closing a connection that sent nothing");
            return;
        }
    };
    let framing = match framing {
        Ok(Some(f)) => f,
        Ok(None) => return,
        Err(e) => {
            tracing::debug!(conn_id, "connection closed before framing: {e}");
            return;
        }
    };
    let (tx, rx) = mpsc::channel(limits.message_buffer);
    let read_closed = CancellationToken::new();
    let writer = tokio::spawn(write_loop(write, rx, framing, read_closed.clone()));
    let dispatcher = Arc::new(Dispatcher::new(methods, tx, conn_id, peer, limits));
    let in_flight = Arc::new(Semaphore::new(limits.max_concurrent_calls));
    let is_idle = || {
        !dispatcher.has_subscriptions()
            && in_flight.available_permits() == limits.max_concurrent_calls
    };
    // A message larger than the whole input budget could never be taken: it is too big, not
    // a reason to retry.
    let max_request = (limits.max_request_size as usize).min(limits.max_buffered_input);
    let mut reader = reader.messages(MessageDecoder::new(framing, max_request, Some(budget)));
    loop {
        let frame = tokio::select! {
            f = reader.next() => f,
            _ = shutdown.cancelled() => break,
            _ = idle(limits.idle_timeout, &is_idle) => {
                tracing::debug!(conn_id, "closing an idle connection");
                break;
            }
        };
        match frame {
            Some(Ok(Frame::Message(message))) => {
                // Waiting here stops reading the socket: a client that floods requests is
                // slowed down instead of growing the daemon's memory.
                let Ok(permit) = in_flight.clone().acquire_owned().await else {
                    break;
                };
                let dispatcher = dispatcher.clone();
                tokio::spawn(async move {
                    dispatcher.handle(&message.bytes).await;
                    // The message's budget is released with it, after its handling.
                    drop(message);
                    drop(permit);
                });
            }
            Some(Ok(Frame::Busy)) => {
                let error = super::methods::input_overloaded(limits.max_buffered_input);
                dispatcher.send_error(error).await;
            }
            Some(Ok(Frame::TooBig)) => {
                let max = u32::try_from(max_request).unwrap_or(u32::MAX);
                dispatcher.send_error(reject_too_big_request(max)).await;
            }
            Some(Err(FramingError::Broken(why))) => {
                dispatcher.send_error(parse_error(&why)).await;
                break;
            }
            Some(Err(FramingError::Io(e))) => {
                tracing::debug!(conn_id, "read error: {e}");
                break;
            }
            None => break,
        }
    }
    // A half-closed client (socat) still gets its responses and subscription items: the writer
    // runs until every handler and subscription holding the sink has finished, or until the
    // client turns out to be gone for good.
    read_closed.cancel();
    drop(reader);
    drop(dispatcher);
    let _ = writer.await;
}

/// Completes once the connection has been idle (per `is_idle`) for `timeout`; never, without
/// a timeout. Checked again each period, so a subscription that ends later starts the clock.
async fn idle(timeout: Option<Duration>, is_idle: &impl Fn() -> bool) {
    let Some(timeout) = timeout else {
        return std::future::pending().await;
    };
    let mut idle_since = Instant::now();
    loop {
        tokio::time::sleep_until(idle_since + timeout).await;
        if is_idle() {
            return;
        }
        idle_since = Instant::now();
    }
}

async fn sleep_or_forever(timeout: Option<Duration>) {
    match timeout {
        Some(t) => tokio::time::sleep(t).await,
        None => std::future::pending().await,
    }
}

/// Answers the first request of a refused connection with `error` (under the request's own
/// id, so that clients match it to their call) and closes the connection. A client that sends
/// nothing within `wait` gets the error with a null id, as a line.
pub(super) async fn refuse(stream: UnixStream, error: ErrorObjectOwned, wait: Duration) {
    let (read, write) = stream.into_split();
    let first = async {
        let mut reader = FrameReader::new(read);
        let framing = reader.framing().await.ok().flatten()?;
        let mut reader = reader.messages(MessageDecoder::new(framing, REFUSAL_READ, None));
        let id = match reader.next().await {
            Some(Ok(Frame::Message(message))) => request_id(&message.bytes),
            _ => None,
        };
        Some((framing, id))
    };
    let (framing, id) = tokio::time::timeout(wait, first)
        .await
        .ok()
        .flatten()
        .unwrap_or((Framing::Lines, None));
    let response = with_raw_id(MethodResponse::error(Id::Null, error).into_json(), id);
    let mut out = FramedWrite::new(write, framing);
    let answer = async {
        out.send(response.get()).await?;
        out.close().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), answer).await;
}

/// Answers a connection that cannot be given even a refusal task (the daemon is refusing
/// many at once) with one line, without waiting, and closes it.
pub(super) fn refuse_now(stream: UnixStream, error: ErrorObjectOwned) {
    let response = MethodResponse::error(Id::Null, error).into_json();
    let line = format!("{}\n", response.get());
    // A fresh socket's send buffer takes one short line; if not, the client sees the close.
    let _ = stream.try_write(line.as_bytes());
}

async fn write_loop(
    write: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Box<RawValue>>,
    framing: Framing,
    read_closed: CancellationToken,
) {
    let mut out = FramedWrite::new(write, framing);
    out.set_backpressure_boundary(WRITE_CHUNK);
    *out.write_buffer_mut() = BytesMut::new();
    loop {
        let first = tokio::select! {
            m = rx.recv() => m,
            // Dropping the queue ends every subscription of the connection.
            _ = peer_gone(out.get_ref(), &read_closed) => None,
        };
        let Some(first) = first else {
            return;
        };
        // Messages are gathered into writes of about `WRITE_CHUNK` while they keep coming.
        let mut next = Some(first);
        while let Some(message) = next {
            if out.feed(message.get()).await.is_err() {
                return;
            }
            next = rx.try_recv().ok();
        }
        if out.flush().await.is_err() {
            return;
        }
        // Freed after each burst, so an idle connection holds no buffer.
        *out.write_buffer_mut() = BytesMut::new();
    }
}

/// Completes when the client has closed both directions. Reading end-of-stream alone does not
/// tell: a client that half-closes (socat after its input ends) still reads its answers and
/// stream items. A full close shows as write-closed readiness (EPOLLHUP), which is checked
/// once the reader has seen the end, then once a second: without it, a client gone while its
/// subscription is quiet would hold its connection until the next item failed to send.
async fn peer_gone(write: &OwnedWriteHalf, read_closed: &CancellationToken) {
    read_closed.cancelled().await;
    loop {
        match write.as_ref().ready(Interest::WRITABLE).await {
            Ok(ready) if ready.is_write_closed() => return,
            Ok(_) => {}
            Err(_) => return,
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
