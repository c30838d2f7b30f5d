//! One client connection: detect the framing from the first byte (`{`/`[` newline-delimited
//! JSON, `C` LSP-style `Content-Length` headers), read messages under a size cap (an oversized
//! message is skipped without buffering, answered with an error, and the connection stays
//! usable), dispatch each through jsonrpsee's `Methods` concurrently, and write responses and
//! notifications from one bounded queue.

use super::Limits;
use jsonrpsee::core::id_providers::RandomStringIdProvider;
use jsonrpsee::core::server::{
    BatchResponseBuilder, BoundedSubscriptions, ConnectionId, Extensions, MethodCallback,
    MethodResponse, MethodSink, Methods, SubscriptionState, prepare_error,
};
use jsonrpsee::types::error::{
    ErrorCode, ErrorObject, reject_too_big_batch_request, reject_too_big_request,
    reject_too_many_subscriptions,
};
use jsonrpsee::types::{ErrorObjectOwned, Id, Notification, Params, Request};
use serde_json::value::RawValue;
use std::io;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Lines,
    ContentLength,
}

enum Frame {
    Message(Vec<u8>),
    TooBig,
    Eof,
}

/// The caller's credentials, available to handlers through `Extensions`.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    /// User id.
    pub uid: u32,
    /// Process id, when the OS reports it.
    pub pid: Option<i32>,
}

struct Ctx {
    methods: Methods,
    sink: MethodSink,
    conn_id: ConnectionId,
    subscriptions: BoundedSubscriptions,
    ids: RandomStringIdProvider,
    extensions: Extensions,
    limits: Limits,
}

/// Serves one connection until the client closes it or the daemon shuts down.
pub(super) async fn serve(
    stream: UnixStream,
    peer: Peer,
    methods: Methods,
    conn_id: usize,
    limits: Limits,
    shutdown: CancellationToken,
) {
    let (read, write) = stream.into_split();
    let mut reader = BufReader::with_capacity(64 * 1024, read);
    let framing = match detect_framing(&mut reader).await {
        Ok(Some(f)) => f,
        Ok(None) => return,
        Err(e) => {
            tracing::debug!(conn_id, "connection closed before framing: {e}");
            return;
        }
    };
    let (tx, rx) = mpsc::channel(limits.message_buffer);
    let writer = tokio::spawn(write_loop(write, rx, framing));
    let mut extensions = Extensions::new();
    extensions.insert(peer);
    let ctx = Arc::new(Ctx {
        methods,
        sink: MethodSink::new_with_limit(tx, limits.max_response_size),
        conn_id: ConnectionId(conn_id),
        subscriptions: BoundedSubscriptions::new(limits.max_subscriptions),
        ids: RandomStringIdProvider::new(16),
        extensions,
        limits,
    });
    let in_flight = Arc::new(Semaphore::new(limits.max_concurrent_calls));
    loop {
        let frame = tokio::select! {
            f = read_frame(&mut reader, framing, limits.max_request_size as usize) => f,
            _ = shutdown.cancelled() => break,
        };
        match frame {
            Ok(Frame::Message(bytes)) => {
                // Waiting here stops reading the socket: a client that floods requests is
                // slowed down instead of growing the daemon's memory.
                let Ok(permit) = in_flight.clone().acquire_owned().await else {
                    break;
                };
                let ctx = ctx.clone();
                tokio::spawn(async move {
                    handle(&bytes, &ctx).await;
                    drop(permit);
                });
            }
            Ok(Frame::TooBig) => {
                let _ = ctx
                    .sink
                    .send_error(Id::Null, reject_too_big_request(limits.max_request_size))
                    .await;
            }
            Ok(Frame::Eof) => break,
            Err(e) => {
                tracing::debug!(conn_id, "read error: {e}");
                break;
            }
        }
    }
    // A half-closed client (socat) still gets its responses and subscription items: the writer
    // runs until every handler and subscription holding the sink has finished.
    drop(ctx);
    let _ = writer.await;
}

/// Answers the first request of a refused connection with `error` (under the request's own
/// id, so that clients match it to their call) and closes the connection.
pub(super) async fn refuse(stream: UnixStream, error: ErrorObjectOwned, limits: Limits) {
    let (read, write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let answer = async {
        let framing = detect_framing(&mut reader).await.ok().flatten()?;
        let id = match read_frame(&mut reader, framing, limits.max_request_size as usize)
            .await
            .ok()?
        {
            Frame::Message(bytes) => prepare_error(&bytes).0.into_owned(),
            Frame::TooBig | Frame::Eof => Id::Null,
        };
        let response = MethodResponse::error(id, error);
        let mut out = BufWriter::new(write);
        write_frame(&mut out, response.as_json().get(), framing)
            .await
            .ok()?;
        out.flush().await.ok()?;
        out.shutdown().await.ok()
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), answer).await;
}

async fn detect_framing(reader: &mut BufReader<OwnedReadHalf>) -> io::Result<Option<Framing>> {
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(None);
        }
        let skip = buf.iter().take_while(|b| b.is_ascii_whitespace()).count();
        if skip == buf.len() {
            let n = buf.len();
            reader.consume(n);
            continue;
        }
        return Ok(Some(match buf[skip] {
            b'C' | b'c' => Framing::ContentLength,
            _ => Framing::Lines,
        }));
    }
}

async fn read_frame(
    reader: &mut BufReader<OwnedReadHalf>,
    framing: Framing,
    max: usize,
) -> io::Result<Frame> {
    match framing {
        Framing::Lines => loop {
            let frame = read_line(reader, max).await?;
            match &frame {
                Frame::Message(m) if m.iter().all(u8::is_ascii_whitespace) => continue,
                _ => return Ok(frame),
            }
        },
        Framing::ContentLength => read_content_length(reader, max).await,
    }
}

/// Reads up to the next `\n`; a line longer than `max` is consumed and dropped as it streams
/// in, never buffered whole.
async fn read_line(reader: &mut BufReader<OwnedReadHalf>, max: usize) -> io::Result<Frame> {
    let mut line = Vec::new();
    let mut too_big = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_big, line.is_empty()) {
                (true, _) => Frame::TooBig,
                (false, true) => Frame::Eof,
                (false, false) => Frame::Message(line),
            });
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if !too_big {
            if line.len() + chunk.len() > max {
                too_big = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let consumed = done.unwrap_or(available.len());
        reader.consume(consumed);
        if done.is_some() {
            return Ok(if too_big {
                Frame::TooBig
            } else {
                Frame::Message(line)
            });
        }
    }
}

async fn read_content_length(
    reader: &mut BufReader<OwnedReadHalf>,
    max: usize,
) -> io::Result<Frame> {
    let mut length: Option<usize> = None;
    let mut header = String::new();
    loop {
        header.clear();
        let n = (&mut *reader).take(8192).read_line(&mut header).await?;
        if n == 0 {
            return Ok(Frame::Eof);
        }
        let line = header.trim();
        if line.is_empty() {
            if length.is_some() {
                break;
            }
            continue;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length =
                Some(value.trim().parse().map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidData, "bad Content-Length")
                })?);
        }
    }
    let length = length.unwrap_or(0);
    if length > max {
        let skipped = tokio::io::copy(
            &mut (&mut *reader).take(length as u64),
            &mut tokio::io::sink(),
        )
        .await?;
        if skipped < length as u64 {
            return Ok(Frame::Eof);
        }
        return Ok(Frame::TooBig);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    Ok(Frame::Message(body))
}

async fn write_loop(
    write: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Box<RawValue>>,
    framing: Framing,
) {
    let mut out = BufWriter::with_capacity(64 * 1024, write);
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(msg) = next {
            if write_frame(&mut out, msg.get(), framing).await.is_err() {
                return;
            }
            next = rx.try_recv().ok();
        }
        if out.flush().await.is_err() {
            return;
        }
    }
}

async fn write_frame(
    out: &mut BufWriter<OwnedWriteHalf>,
    json: &str,
    framing: Framing,
) -> io::Result<()> {
    match framing {
        Framing::Lines => {
            // Our serializers emit compact JSON; re-compact anything else so a newline can never
            // break the framing.
            if json.contains('\n') {
                let compact = serde_json::from_str::<serde_json::Value>(json)
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                out.write_all(compact.as_bytes()).await?;
            } else {
                out.write_all(json.as_bytes()).await?;
            }
            out.write_all(b"\n").await
        }
        Framing::ContentLength => {
            out.write_all(format!("Content-Length: {}\r\n\r\n", json.len()).as_bytes())
                .await?;
            out.write_all(json.as_bytes()).await
        }
    }
}

async fn handle(bytes: &[u8], ctx: &Ctx) {
    let is_batch = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    if is_batch {
        if let Some(response) = handle_batch(bytes, ctx).await {
            let _ = ctx.sink.send(response).await;
        }
        return;
    }
    if let Ok(request) = serde_json::from_slice::<Request>(bytes) {
        let response = call(request, ctx).await;
        // A subscription's reply was already sent when it was accepted or rejected.
        if !response.is_subscription() {
            let _ = ctx.sink.send(response.into_json()).await;
        }
    } else if serde_json::from_slice::<Notification<Option<&RawValue>>>(bytes).is_ok() {
        // Client notifications need no answer.
    } else {
        let (id, code) = prepare_error(bytes);
        let _ = ctx.sink.send_error(id, ErrorObject::from(code)).await;
    }
}

async fn handle_batch(bytes: &[u8], ctx: &Ctx) -> Option<Box<RawValue>> {
    let items = match serde_json::from_slice::<Vec<&RawValue>>(bytes) {
        Ok(items) => items,
        Err(_) => {
            return Some(
                MethodResponse::error(Id::Null, ErrorObject::from(ErrorCode::ParseError))
                    .into_json(),
            );
        }
    };
    if items.is_empty() {
        return Some(
            MethodResponse::error(Id::Null, ErrorObject::from(ErrorCode::InvalidRequest))
                .into_json(),
        );
    }
    if items.len() > ctx.limits.max_batch_len {
        return Some(
            MethodResponse::error(
                Id::Null,
                reject_too_big_batch_request(ctx.limits.max_batch_len),
            )
            .into_json(),
        );
    }
    let mut batch = BatchResponseBuilder::new_with_limit(ctx.limits.max_response_size as usize);
    for item in items {
        let response = if let Ok(request) = serde_json::from_str::<Request>(item.get()) {
            let response = call(request, ctx).await;
            if response.is_subscription() {
                continue;
            }
            response
        } else if serde_json::from_str::<Notification<Option<&RawValue>>>(item.get()).is_ok() {
            continue;
        } else {
            // The element is valid JSON (the array parsed), so it can only be an invalid request.
            let (id, _) = prepare_error(item.get().as_bytes());
            MethodResponse::error(id, ErrorObject::from(ErrorCode::InvalidRequest))
        };
        if let Err(too_big) = batch.append(response) {
            return Some(too_big.into_json());
        }
    }
    (!batch.is_empty()).then(|| MethodResponse::from_batch(batch.finish()).into_json())
}

/// Dispatches one request; the same steps as jsonrpsee's own (crate-private) RPC service.
async fn call(request: Request<'_>, ctx: &Ctx) -> MethodResponse {
    let id = request.id.clone().into_owned();
    let params = Params::new(request.params.as_ref().map(|p| p.get())).into_owned();
    let extensions = ctx.extensions.clone();
    let max = ctx.limits.max_response_size as usize;
    match ctx.methods.method_with_name(&request.method) {
        None => MethodResponse::error(id, ErrorObject::from(ErrorCode::MethodNotFound)),
        Some((_, MethodCallback::Sync(cb))) => cb(id, params, max, extensions),
        Some((_, MethodCallback::Async(cb))) => cb(id, params, ctx.conn_id, max, extensions).await,
        Some((_, MethodCallback::Subscription(cb))) => match ctx.subscriptions.acquire() {
            Some(permit) => {
                let state = SubscriptionState {
                    conn_id: ctx.conn_id,
                    id_provider: &ctx.ids,
                    subscription_permit: permit,
                };
                cb(id, params, ctx.sink.clone(), state, extensions).await
            }
            None => {
                MethodResponse::error(id, reject_too_many_subscriptions(ctx.subscriptions.max()))
            }
        },
        Some((_, MethodCallback::Unsubscription(cb))) => {
            cb(id, params, ctx.conn_id, max, extensions)
        }
    }
}
