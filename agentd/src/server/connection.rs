//! One client connection: detect the framing from the first byte (`{`/`[` newline-delimited
//! JSON, `C` LSP-style `Content-Length` headers), read messages under a size cap (an oversized
//! message is skipped without buffering, answered with an error, and the connection stays
//! usable), dispatch each through jsonrpsee's `Methods` concurrently, and write responses and
//! notifications from one bounded queue.
//!
//! Every message that is not a valid request gets a specific answer: bytes that are not JSON
//! (or not UTF-8) get -32700, JSON that is not a request object (a bare value, a bad `id`, a
//! missing `method`) gets -32600, and the message says which. Ids are echoed exactly as sent,
//! including negative and arbitrarily large integers, which jsonrpsee's `Id` cannot hold.
//!
//! An idle connection holds no read or write buffer: buffers are allocated when bytes arrive
//! and freed once consumed, so thousands of idle clients cost little and the memory returns
//! when they go. A connection with no subscription and no call in flight that completes no
//! message for the idle timeout is closed (so a client trickling one message byte by byte is
//! bounded by it too).

use super::Limits;
use jsonrpsee::core::id_providers::RandomStringIdProvider;
use jsonrpsee::core::server::{
    BoundedSubscriptions, ConnectionId, Extensions, MethodCallback, MethodResponse, MethodSink,
    Methods, PendingSubscriptionAcceptError, PendingSubscriptionSink, SubscriptionSink,
    SubscriptionState,
};
use jsonrpsee::types::error::{
    ErrorObject, INVALID_PARAMS_CODE, INVALID_REQUEST_CODE, OVERSIZED_RESPONSE_CODE,
    PARSE_ERROR_CODE, reject_too_big_request, reject_too_many_subscriptions,
};
use jsonrpsee::types::{ErrorCode, ErrorObjectOwned, Id, Params, Request};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 64 * 1024;
/// Outgoing bytes gathered before a write.
const WRITE_CHUNK: usize = 64 * 1024;
/// Longest `Content-Length` header block; a client that sends more is not speaking LSP framing.
const MAX_HEADER: usize = 8 * 1024;
/// How much of a refused client's first message is read to find its id.
const REFUSAL_READ: usize = 64 * 1024;
/// The input budget's unit: one permit per KiB held.
const BUDGET_UNIT: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Lines,
    ContentLength,
}

enum Frame {
    Message(Incoming),
    TooBig,
    /// The daemon holds as much unhandled input as it may: the message was dropped.
    Busy,
    Eof,
    /// The framing itself is broken (a bad `Content-Length` header): the stream cannot be
    /// resynchronised, so the connection is answered and closed.
    BadFraming(String),
}

/// The caller's credentials, available to handlers through `Extensions`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer {
    /// User id.
    pub uid: u32,
    /// Process id, when the OS reports it.
    pub pid: Option<i32>,
}

/// What a subscription handler needs of its connection beyond jsonrpsee's sink: the outgoing
/// queue, for the final item after an unsubscribe (when jsonrpsee's sink no longer accepts
/// messages; weak, so that holding it keeps neither the connection nor its idle accounting
/// alive), and the count of subscriptions being accepted (see [`Outbox::accept`]).
#[derive(Clone)]
pub(super) struct Outbox {
    queue: mpsc::WeakSender<Box<RawValue>>,
    accepting: Arc<Acceptances>,
}

/// A connection's subscription acceptances: how many are under way, and how many have
/// finished. An unsubscribe that finds nothing retries if either says one may have
/// registered meanwhile.
#[derive(Default)]
struct Acceptances {
    under_way: AtomicUsize,
    finished: AtomicU64,
}

impl Outbox {
    /// Accepts a subscription. jsonrpsee sends the reply before it registers the
    /// subscription for `*/unsubscribe`, so a client that unsubscribes at once could find
    /// nothing to end; the count lets that unsubscribe wait for the registration (see
    /// [`unsubscribe`]).
    pub(super) async fn accept(
        &self,
        pending: PendingSubscriptionSink,
    ) -> Result<SubscriptionSink, PendingSubscriptionAcceptError> {
        self.accepting.under_way.fetch_add(1, Ordering::SeqCst);
        let accepted = pending.accept().await;
        self.accepting.finished.fetch_add(1, Ordering::SeqCst);
        self.accepting.under_way.fetch_sub(1, Ordering::SeqCst);
        accepted
    }

    /// Queues a complete JSON-RPC message, waiting at most `timeout` for room. Fails when the
    /// connection is gone or the queue stayed full.
    pub(super) async fn send(&self, message: Box<RawValue>, timeout: Duration) -> Result<(), ()> {
        let tx = self.queue.upgrade().ok_or(())?;
        tx.send_timeout(message, timeout).await.map_err(|_| ())
    }
}

struct Ctx {
    methods: Methods,
    sink: MethodSink,
    /// A weak handle on the queue: its strong count tells whether a subscription still holds
    /// the sink (each subscription keeps a clone), which makes the connection not idle.
    queue: mpsc::WeakSender<Box<RawValue>>,
    conn_id: ConnectionId,
    subscriptions: BoundedSubscriptions,
    ids: RandomStringIdProvider,
    extensions: Extensions,
    limits: Limits,
    /// Source of the stand-in ids used for request ids jsonrpsee cannot represent.
    next_alias: AtomicU64,
    /// Subscriptions being accepted (see [`Outbox::accept`]).
    accepting: Arc<Acceptances>,
}

impl Ctx {
    fn has_subscriptions(&self) -> bool {
        // `ctx.sink` itself is one strong sender; every other one belongs to a subscription.
        self.queue.strong_count() > 1
    }
}

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
    let mut input = Input::new(read);
    let framing = tokio::select! {
        f = detect_framing(&mut input) => f,
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
    let queue = tx.downgrade();
    let read_closed = CancellationToken::new();
    let writer = tokio::spawn(write_loop(write, rx, framing, read_closed.clone()));
    let mut extensions = Extensions::new();
    extensions.insert(peer);
    let accepting = Arc::new(Acceptances::default());
    extensions.insert(Outbox {
        queue: queue.clone(),
        accepting: accepting.clone(),
    });
    let ctx = Arc::new(Ctx {
        methods,
        sink: MethodSink::new_with_limit(tx, limits.max_response_size),
        queue,
        conn_id: ConnectionId(conn_id),
        subscriptions: BoundedSubscriptions::new(limits.max_subscriptions),
        ids: RandomStringIdProvider::new(16),
        extensions,
        limits,
        next_alias: AtomicU64::new(0),
        accepting,
    });
    let in_flight = Arc::new(Semaphore::new(limits.max_concurrent_calls));
    let is_idle =
        || !ctx.has_subscriptions() && in_flight.available_permits() == limits.max_concurrent_calls;
    // A message larger than the whole input budget could never be taken: it is too big, not
    // a reason to retry.
    let max_request = (limits.max_request_size as usize).min(limits.max_buffered_input);
    loop {
        let frame = tokio::select! {
            f = read_frame(&mut input, framing, max_request, Some(&budget)) => f,
            _ = shutdown.cancelled() => break,
            _ = idle(limits.idle_timeout, &is_idle) => {
                tracing::debug!(conn_id, "closing an idle connection");
                break;
            }
        };
        match frame {
            Ok(Frame::Message(message)) => {
                // Waiting here stops reading the socket: a client that floods requests is
                // slowed down instead of growing the daemon's memory.
                let Ok(permit) = in_flight.clone().acquire_owned().await else {
                    break;
                };
                let ctx = ctx.clone();
                tokio::spawn(async move {
                    handle(&message.bytes, &ctx).await;
                    // The message's budget is released with it, after its handling.
                    drop(message);
                    drop(permit);
                });
            }
            Ok(Frame::Busy) => {
                let _ = ctx
                    .sink
                    .send_error(
                        Id::Null,
                        super::methods::input_overloaded(limits.max_buffered_input),
                    )
                    .await;
            }
            Ok(Frame::TooBig) => {
                let _ = ctx
                    .sink
                    .send_error(
                        Id::Null,
                        reject_too_big_request(u32::try_from(max_request).unwrap_or(u32::MAX)),
                    )
                    .await;
            }
            Ok(Frame::BadFraming(why)) => {
                let _ = ctx
                    .sink
                    .send_error(Id::Null, parse_error(&why).into_owned())
                    .await;
                break;
            }
            Ok(Frame::Eof) => break,
            Err(e) => {
                tracing::debug!(conn_id, "read error: {e}");
                break;
            }
        }
    }
    // A half-closed client (socat) still gets its responses and subscription items: the writer
    // runs until every handler and subscription holding the sink has finished, or until the
    // client turns out to be gone for good.
    read_closed.cancel();
    drop(input);
    drop(ctx);
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
    let mut input = Input::new(read);
    let first = async {
        let framing = detect_framing(&mut input).await.ok().flatten()?;
        let id = match read_frame(&mut input, framing, REFUSAL_READ, None)
            .await
            .ok()?
        {
            Frame::Message(message) => request_id(&message.bytes),
            Frame::TooBig | Frame::Busy | Frame::Eof | Frame::BadFraming(_) => None,
        };
        Some((framing, id))
    };
    let (framing, id) = tokio::time::timeout(wait, first)
        .await
        .ok()
        .flatten()
        .unwrap_or((Framing::Lines, None));
    let response = with_raw_id(MethodResponse::error(Id::Null, error).into_json(), id);
    let mut write = write;
    let answer = async {
        write_frame(&mut write, response.get(), framing).await?;
        write.shutdown().await
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

/// A read buffer that exists only while it holds unread bytes: waiting for input holds none.
struct Input {
    read: OwnedReadHalf,
    buf: Vec<u8>,
    pos: usize,
}

impl Input {
    fn new(read: OwnedReadHalf) -> Self {
        Self {
            read,
            buf: Vec::new(),
            pos: 0,
        }
    }

    /// The unread bytes, reading more if there are none; empty at end of stream.
    async fn fill(&mut self) -> io::Result<&[u8]> {
        if self.pos >= self.buf.len() {
            self.buf = Vec::new();
            self.pos = 0;
            loop {
                self.read.readable().await?;
                let mut chunk = Vec::with_capacity(READ_CHUNK);
                match self.read.try_read_buf(&mut chunk) {
                    Ok(_) => {
                        self.buf = chunk;
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(&self.buf[self.pos..])
    }

    fn consume(&mut self, n: usize) {
        self.pos += n;
    }
}

async fn detect_framing(input: &mut Input) -> io::Result<Option<Framing>> {
    loop {
        let buf = input.fill().await?;
        if buf.is_empty() {
            return Ok(None);
        }
        let skip = buf.iter().take_while(|b| b.is_ascii_whitespace()).count();
        if skip == buf.len() {
            let n = buf.len();
            input.consume(n);
            continue;
        }
        return Ok(Some(match buf[skip] {
            b'C' | b'c' => Framing::ContentLength,
            _ => Framing::Lines,
        }));
    }
}

async fn read_frame(
    input: &mut Input,
    framing: Framing,
    max: usize,
    budget: Option<&Arc<Semaphore>>,
) -> io::Result<Frame> {
    match framing {
        Framing::Lines => loop {
            let frame = read_line(input, Body::new(max, budget)).await?;
            match &frame {
                Frame::Message(m) if m.bytes.iter().all(u8::is_ascii_whitespace) => continue,
                _ => return Ok(frame),
            }
        },
        Framing::ContentLength => read_content_length(input, max, budget).await,
    }
}

/// A message read whole, with the share of the daemon-wide input budget its bytes hold
/// until it has been handled.
struct Incoming {
    bytes: Vec<u8>,
    _charge: Option<OwnedSemaphorePermit>,
}

/// A message being read. Its bytes are charged to the input budget as they arrive; past
/// `max`, or when the budget is spent, the rest is consumed and dropped, never buffered.
struct Body<'a> {
    bytes: Vec<u8>,
    charge: Option<OwnedSemaphorePermit>,
    budget: Option<&'a Arc<Semaphore>>,
    max: usize,
    state: BodyState,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BodyState {
    Reading,
    TooBig,
    Busy,
}

impl<'a> Body<'a> {
    fn new(max: usize, budget: Option<&'a Arc<Semaphore>>) -> Self {
        Self {
            bytes: Vec::new(),
            charge: None,
            budget,
            max,
            state: BodyState::Reading,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        if self.state != BodyState::Reading {
            return;
        }
        let len = self.bytes.len() + chunk.len();
        if len > self.max {
            self.drop_with(BodyState::TooBig);
        } else if !self.cover(len) {
            self.drop_with(BodyState::Busy);
        } else {
            self.bytes.extend_from_slice(chunk);
        }
    }

    /// Charges the budget for `len` bytes (in KiB units); false when it cannot.
    fn cover(&mut self, len: usize) -> bool {
        let Some(budget) = self.budget else {
            return true;
        };
        let need = len.div_ceil(BUDGET_UNIT);
        let have = self
            .charge
            .as_ref()
            .map_or(0, OwnedSemaphorePermit::num_permits);
        if need <= have {
            return true;
        }
        let Ok(more) = u32::try_from(need - have) else {
            return false;
        };
        match budget.clone().try_acquire_many_owned(more) {
            Ok(permit) => {
                match &mut self.charge {
                    Some(charge) => charge.merge(permit),
                    None => self.charge = Some(permit),
                }
                true
            }
            Err(_) => false,
        }
    }

    fn drop_with(&mut self, state: BodyState) {
        self.state = state;
        self.bytes = Vec::new();
        self.charge = None;
    }

    fn is_empty(&self) -> bool {
        self.state == BodyState::Reading && self.bytes.is_empty()
    }

    fn finish(self) -> Frame {
        match self.state {
            BodyState::Reading => Frame::Message(Incoming {
                bytes: self.bytes,
                _charge: self.charge,
            }),
            BodyState::TooBig => Frame::TooBig,
            BodyState::Busy => Frame::Busy,
        }
    }
}

/// Reads up to the next `\n` into `body`.
async fn read_line(input: &mut Input, mut body: Body<'_>) -> io::Result<Frame> {
    loop {
        let available = input.fill().await?;
        if available.is_empty() {
            return Ok(if body.is_empty() {
                Frame::Eof
            } else {
                body.finish()
            });
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        body.push(chunk);
        let consumed = done.unwrap_or(available.len());
        input.consume(consumed);
        if done.is_some() {
            return Ok(body.finish());
        }
    }
}

/// Reads one `Content-Length` framed message. The header block is bounded; a missing,
/// negative or non-numeric length is a broken frame.
async fn read_content_length(
    input: &mut Input,
    max: usize,
    budget: Option<&Arc<Semaphore>>,
) -> io::Result<Frame> {
    let mut length: Option<usize> = None;
    let mut header_bytes = 0;
    loop {
        let line = match read_line(input, Body::new(MAX_HEADER, None)).await? {
            Frame::Message(line) => line.bytes,
            Frame::Eof => return Ok(Frame::Eof),
            Frame::TooBig | Frame::Busy | Frame::BadFraming(_) => {
                return Ok(Frame::BadFraming("header line too long".into()));
            }
        };
        header_bytes += line.len() + 1;
        if header_bytes > MAX_HEADER {
            return Ok(Frame::BadFraming("header block too long".into()));
        }
        let Ok(line) = std::str::from_utf8(&line) else {
            return Ok(Frame::BadFraming("header is not UTF-8".into()));
        };
        let line = line.trim();
        if line.is_empty() {
            if length.is_some() {
                break;
            }
            if header_bytes <= 2 {
                // Blank lines between messages.
                header_bytes = 0;
                continue;
            }
            return Ok(Frame::BadFraming("missing Content-Length header".into()));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Ok(Frame::BadFraming(format!(
                "expected a `Content-Length: <bytes>` header, got {:?}",
                clip(line)
            )));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let value = value.trim();
            match value.parse::<usize>() {
                Ok(n) => length = Some(n),
                Err(_) => {
                    return Ok(Frame::BadFraming(format!(
                        "Content-Length must be a non-negative integer, got {:?}",
                        clip(value)
                    )));
                }
            }
        }
    }
    let mut remaining = length.unwrap_or(0);
    // Grown as bytes arrive: a length claimed but never sent costs nothing.
    let mut body = Body::new(max, budget);
    if remaining > max {
        body.drop_with(BodyState::TooBig);
    }
    while remaining > 0 {
        let available = input.fill().await?;
        if available.is_empty() {
            return Ok(Frame::Eof);
        }
        let n = available.len().min(remaining);
        body.push(&available[..n]);
        input.consume(n);
        remaining -= n;
    }
    Ok(body.finish())
}

fn clip(s: &str) -> &str {
    match s.char_indices().nth(40) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

async fn write_loop(
    mut write: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Box<RawValue>>,
    framing: Framing,
    read_closed: CancellationToken,
) {
    loop {
        let first = tokio::select! {
            m = rx.recv() => m,
            // Dropping the queue ends every subscription of the connection.
            _ = peer_gone(&write, &read_closed) => None,
        };
        let Some(first) = first else {
            return;
        };
        // Gathered per burst and freed after it, so an idle connection holds no buffer.
        let mut out = Vec::new();
        let mut next = Some(first);
        while let Some(msg) = next {
            if msg.get().len() >= WRITE_CHUNK {
                if write.write_all(&out).await.is_err()
                    || write_frame(&mut write, msg.get(), framing).await.is_err()
                {
                    return;
                }
                out.clear();
            } else {
                encode_frame(&mut out, msg.get(), framing);
                if out.len() >= WRITE_CHUNK {
                    if write.write_all(&out).await.is_err() {
                        return;
                    }
                    out.clear();
                }
            }
            next = rx.try_recv().ok();
        }
        if write.write_all(&out).await.is_err() {
            return;
        }
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

fn encode_frame(out: &mut Vec<u8>, json: &str, framing: Framing) {
    match framing {
        Framing::Lines => {
            // Our serializers emit compact JSON; re-compact anything else so a newline can never
            // break the framing.
            if json.contains('\n') {
                let compact = serde_json::from_str::<serde_json::Value>(json)
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                out.extend_from_slice(compact.as_bytes());
            } else {
                out.extend_from_slice(json.as_bytes());
            }
            out.push(b'\n');
        }
        Framing::ContentLength => {
            out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", json.len()).as_bytes());
            out.extend_from_slice(json.as_bytes());
        }
    }
}

async fn write_frame(write: &mut OwnedWriteHalf, json: &str, framing: Framing) -> io::Result<()> {
    match framing {
        Framing::Lines if !json.contains('\n') => {
            write.write_all(json.as_bytes()).await?;
            write.write_all(b"\n").await
        }
        Framing::Lines => {
            let mut out = Vec::new();
            encode_frame(&mut out, json, framing);
            write.write_all(&out).await
        }
        Framing::ContentLength => {
            write
                .write_all(format!("Content-Length: {}\r\n\r\n", json.len()).as_bytes())
                .await?;
            write.write_all(json.as_bytes()).await
        }
    }
}

fn parse_error(why: &str) -> ErrorObject<'static> {
    ErrorObject::owned(PARSE_ERROR_CODE, format!("Parse error: {why}"), None::<()>)
}

fn invalid_request(why: &str) -> ErrorObject<'static> {
    ErrorObject::owned(
        INVALID_REQUEST_CODE,
        format!("Invalid request: {why}"),
        None::<()>,
    )
}

/// A request's id as sent, when jsonrpsee's `Id` (null, u64, string) cannot hold it: the
/// request runs under a stand-in string id and the response gets this one back.
type RawId = Box<RawValue>;

/// One message, classified.
enum Message<'a> {
    Call(Request<'a>, Option<RawId>),
    Notification,
    /// Answered with this error under this id (`None`: null).
    Reject(ErrorObject<'static>, Option<RawId>),
}

/// Classifies one message that is not a batch. The common case (a valid request) costs one
/// parse; the rest is diagnosis of what is wrong.
fn classify<'a>(bytes: &'a [u8], ctx: &Ctx) -> Message<'a> {
    if let Ok(request) = serde_json::from_slice::<Request>(bytes) {
        // jsonrpsee takes any JSON as params; JSON-RPC allows only structured values.
        if request
            .params
            .as_ref()
            .is_some_and(|p| !matches!(p.get().as_bytes().first(), Some(b'{' | b'[')))
        {
            let id = serde_json::value::to_raw_value(&request.id).ok();
            return Message::Reject(
                invalid_request("`params` must be an object or an array"),
                id,
            );
        }
        return Message::Call(request, None);
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            return Message::Reject(
                parse_error(&format!("invalid UTF-8 at byte {}", e.valid_up_to())),
                None,
            );
        }
    };
    // Whole-document syntax first (serde_json bounds nesting depth, so this is bounded too).
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        return Message::Reject(parse_error(&e.to_string()), None);
    }
    let Ok(object) = serde_json::from_str::<BTreeMap<String, &RawValue>>(text) else {
        let what = match text.trim_start().as_bytes().first() {
            Some(b'"') => "a string",
            Some(b't' | b'f') => "a boolean",
            Some(b'n') => "null",
            _ => "a number",
        };
        return Message::Reject(
            invalid_request(&format!("expected a request object, got {what}")),
            None,
        );
    };
    let id = match object.get("id") {
        None => None,
        Some(raw) => match classify_id(raw) {
            Ok(id) => Some(id),
            Err(why) => return Message::Reject(invalid_request(&why), None),
        },
    };
    let echo = id.as_ref().map(|id| id.raw.clone());
    let version_ok = object
        .get("jsonrpc")
        .is_some_and(|v| serde_json::from_str::<&str>(v.get()).ok() == Some("2.0"));
    if !version_ok {
        return Message::Reject(invalid_request("`jsonrpc` must be \"2.0\""), echo);
    }
    let method = match object
        .get("method")
        .map(|m| serde_json::from_str::<String>(m.get()))
    {
        Some(Ok(m)) => m,
        Some(Err(_)) => {
            return Message::Reject(invalid_request("`method` must be a string"), echo);
        }
        None => return Message::Reject(invalid_request("`method` is missing"), echo),
    };
    let params = object.get("params").copied();
    if params.is_some_and(|p| !matches!(p.get().as_bytes().first(), Some(b'{' | b'[' | b'n'))) {
        return Message::Reject(
            invalid_request("`params` must be an object or an array"),
            echo,
        );
    }
    let Some(id) = id else {
        return Message::Notification;
    };
    let params = params.filter(|p| p.get() != "null").map(|p| p.to_owned());
    match id.native {
        Some(native) => Message::Call(Request::owned(method, params, native), None),
        None => {
            let n = ctx.next_alias.fetch_add(1, Ordering::Relaxed);
            let stand_in = Id::Str(Cow::Owned(format!("agentd-id-alias-{}-{n}", ctx.conn_id.0)));
            Message::Call(Request::owned(method, params, stand_in), Some(id.raw))
        }
    }
}

struct ClassifiedId {
    /// How jsonrpsee carries it, if it can.
    native: Option<Id<'static>>,
    /// As sent.
    raw: RawId,
}

/// Valid ids are strings, null and integers of any size; fractions, exponents, booleans,
/// objects and arrays are not (JSON-RPC 2.0: "Numbers SHOULD NOT contain fractional parts").
fn classify_id(raw: &RawValue) -> Result<ClassifiedId, String> {
    let text = raw.get();
    let digits = text.strip_prefix('-').unwrap_or(text);
    let native = if text == "null" {
        Some(Id::Null)
    } else if text.starts_with('"') {
        serde_json::from_str::<String>(text)
            .ok()
            .map(|s| Id::Str(Cow::Owned(s)))
    } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        // Negative or beyond u64: answered under the id as sent.
        text.parse::<u64>().ok().map(Id::Number)
    } else {
        let what = match text.as_bytes().first() {
            Some(b'{') => "an object".to_owned(),
            Some(b'[') => "an array".to_owned(),
            Some(b't' | b'f') => "a boolean".to_owned(),
            _ => format!("the number {}", clip(text)),
        };
        return Err(format!(
            "`id` must be a string, an integer or null, got {what}"
        ));
    };
    Ok(ClassifiedId {
        native,
        raw: raw.to_owned(),
    })
}

/// The id of a message, as sent, if it has a valid one.
fn request_id(bytes: &[u8]) -> Option<RawId> {
    #[derive(serde::Deserialize)]
    struct WithId<'a> {
        #[serde(borrow)]
        id: Option<&'a RawValue>,
    }
    let with_id = serde_json::from_slice::<WithId>(bytes).ok()?;
    classify_id(with_id.id?).ok().map(|id| id.raw)
}

/// The start of every response jsonrpsee serializes: the id follows it.
const RESPONSE_PREFIX: &str = "{\"jsonrpc\":\"2.0\",\"id\":";

/// Puts `id` (as sent) in place of the response's `id`, which is null or a stand-in string
/// without escapes. Text surgery rather than a `serde_json::Value` round trip, because a
/// `Value` cannot hold an integer beyond 64 bits exactly.
fn with_raw_id(response: Box<RawValue>, id: Option<RawId>) -> Box<RawValue> {
    let Some(id) = id else {
        return response;
    };
    let json = response.get();
    let Some(rest) = json.strip_prefix(RESPONSE_PREFIX) else {
        return response;
    };
    let rest = if let Some(r) = rest.strip_prefix("null") {
        r
    } else if let Some(r) = rest.strip_prefix('"') {
        match r.find('"') {
            Some(end) => &r[end + 1..],
            None => return response,
        }
    } else {
        return response;
    };
    RawValue::from_string(format!("{RESPONSE_PREFIX}{}{rest}", id.get())).unwrap_or(response)
}

async fn handle(bytes: &[u8], ctx: &Ctx) {
    let is_batch = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    if is_batch {
        if let Some(response) = handle_batch(bytes, ctx).await {
            let _ = ctx.sink.send(response).await;
        }
        return;
    }
    match classify(bytes, ctx) {
        Message::Call(request, raw_id) => {
            let response = call(request, raw_id.as_ref(), ctx).await;
            // A subscription's reply was already sent when it was accepted or rejected.
            if !response.is_subscription() {
                let _ = ctx
                    .sink
                    .send(with_raw_id(response.into_json(), raw_id))
                    .await;
            }
        }
        // Client notifications need no answer.
        Message::Notification => {}
        Message::Reject(error, raw_id) => {
            let response = MethodResponse::error(Id::Null, error).into_json();
            let _ = ctx.sink.send(with_raw_id(response, raw_id)).await;
        }
    }
}

async fn handle_batch(bytes: &[u8], ctx: &Ctx) -> Option<Box<RawValue>> {
    let items = match serde_json::from_slice::<Vec<&RawValue>>(bytes) {
        Ok(items) => items,
        Err(e) => {
            let why = match std::str::from_utf8(bytes) {
                Err(u) => format!("invalid UTF-8 at byte {}", u.valid_up_to()),
                Ok(_) => e.to_string(),
            };
            return Some(MethodResponse::error(Id::Null, parse_error(&why)).into_json());
        }
    };
    if items.is_empty() {
        return Some(MethodResponse::error(Id::Null, invalid_request("empty batch")).into_json());
    }
    let max = ctx.limits.max_batch_len;
    if items.len() > max {
        let why = format!(
            "a batch holds at most {max} requests, this one has {}",
            items.len()
        );
        return Some(MethodResponse::error(Id::Null, invalid_request(&why)).into_json());
    }
    let budget = ctx.limits.max_response_size as usize;
    let mut answers: Vec<Box<RawValue>> = Vec::new();
    let mut size = 2;
    for item in items {
        let answer = match classify(item.get().as_bytes(), ctx) {
            Message::Call(request, raw_id) => {
                let response = call(request, raw_id.as_ref(), ctx).await;
                if response.is_subscription() {
                    continue;
                }
                with_raw_id(response.into_json(), raw_id)
            }
            Message::Notification => continue,
            Message::Reject(error, raw_id) => {
                with_raw_id(MethodResponse::error(Id::Null, error).into_json(), raw_id)
            }
        };
        size += answer.get().len() + 1;
        if size > budget {
            let error = ErrorObject::owned(
                OVERSIZED_RESPONSE_CODE,
                format!("the batch's responses exceed {budget} bytes; send fewer requests at once"),
                None::<()>,
            );
            return Some(MethodResponse::error(Id::Null, error).into_json());
        }
        answers.push(answer);
    }
    if answers.is_empty() {
        return None;
    }
    let parts: Vec<&str> = answers.iter().map(|a| a.get()).collect();
    RawValue::from_string(format!("[{}]", parts.join(","))).ok()
}

/// Dispatches one request; the same steps as jsonrpsee's own (crate-private) RPC service.
/// `raw_id`: the request runs under a stand-in id and this is its own (see [`RawId`]).
async fn call(request: Request<'_>, raw_id: Option<&RawId>, ctx: &Ctx) -> MethodResponse {
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
                let sink = match raw_id {
                    None => ctx.sink.clone(),
                    Some(raw_id) => match aliased_sink(ctx, raw_id.clone()) {
                        Some(sink) => sink,
                        // The connection is gone; no one reads this.
                        None => {
                            return MethodResponse::error(
                                id,
                                ErrorObject::from(ErrorCode::InternalError),
                            );
                        }
                    },
                };
                cb(id, params, sink, state, extensions).await
            }
            None => {
                MethodResponse::error(id, reject_too_many_subscriptions(ctx.subscriptions.max()))
            }
        },
        Some((_, MethodCallback::Unsubscription(cb))) => match unsubscribe_params(params) {
            Ok(params) => unsubscribe(cb.as_ref(), id, params, ctx, extensions).await,
            Err(error) => MethodResponse::error(id, error),
        },
    }
}

/// Runs jsonrpsee's unsubscribe. When it finds nothing while a subscription of this
/// connection is being accepted, that may be the one named (its reply reached the client
/// before jsonrpsee registered it): it is tried again once the acceptances are done.
async fn unsubscribe(
    cb: &(
         dyn Fn(Id<'static>, Params<'static>, ConnectionId, usize, Extensions) -> MethodResponse
             + Send
             + Sync
     ),
    id: Id<'static>,
    params: Params<'static>,
    ctx: &Ctx,
    extensions: Extensions,
) -> MethodResponse {
    let max = ctx.limits.max_response_size as usize;
    let acceptances = &ctx.accepting;
    let finished_before = acceptances.finished.load(Ordering::SeqCst);
    let first = cb(
        id.clone(),
        params.clone(),
        ctx.conn_id,
        max,
        extensions.clone(),
    );
    let found = first.as_json().get().ends_with(",\"result\":true}");
    // One that finished after the lookup may have registered just after it, too.
    let maybe_meanwhile = acceptances.under_way.load(Ordering::SeqCst) > 0
        || acceptances.finished.load(Ordering::SeqCst) != finished_before;
    if found || !maybe_meanwhile {
        return first;
    }
    // An acceptance is a send to this connection's queue and a map insert: bounded by the
    // queue's send timeout, so this wait is too.
    let deadline = Instant::now() + Duration::from_secs(15);
    while acceptances.under_way.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    cb(id, params, ctx.conn_id, max, extensions)
}

/// The sink for a subscription whose request id jsonrpsee cannot hold. Its reply, sent by
/// jsonrpsee under the stand-in id, is the first message through it: on the way to the
/// connection's queue it gets the id as sent. Notifications pass unchanged, with the same
/// backpressure; the forwarder ends with the subscription or the connection.
fn aliased_sink(ctx: &Ctx, raw_id: RawId) -> Option<MethodSink> {
    let queue = ctx.queue.upgrade()?;
    let (tx, mut rx) = mpsc::channel::<Box<RawValue>>(ctx.limits.message_buffer);
    tokio::spawn(async move {
        let mut raw_id = Some(raw_id);
        loop {
            let message = tokio::select! {
                m = rx.recv() => m,
                _ = queue.closed() => None,
            };
            let Some(message) = message else {
                return;
            };
            let message = with_raw_id(message, raw_id.take());
            if queue.send(message).await.is_err() {
                return;
            }
        }
    });
    Some(MethodSink::new_with_limit(tx, ctx.limits.max_response_size))
}

/// jsonrpsee's unsubscribe takes `[id]`; this protocol's params are objects, so
/// `{"subscription": id}` is turned into that, and an object that is not that is an
/// invalid-params error naming what is wrong. An array goes through as sent.
fn unsubscribe_params(params: Params<'static>) -> Result<Params<'static>, ErrorObject<'static>> {
    let Some(object) = params.as_str().filter(|p| p.trim_start().starts_with('{')) else {
        return Ok(params);
    };
    match serde_json::from_str::<agentd_proto::UnsubscribeParams>(object) {
        Ok(named) => {
            let positional = serde_json::to_string(&[named.subscription]).unwrap_or_default();
            Ok(Params::new(Some(&positional)).into_owned())
        }
        Err(e) => {
            let message = e.to_string();
            let message = message
                .rsplit_once(" at line ")
                .map_or(message.as_str(), |(m, _)| m);
            Err(ErrorObject::owned(
                INVALID_PARAMS_CODE,
                format!("invalid params: {message}"),
                None::<()>,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_jsonrpsee_cannot_hold_are_swapped_back_exactly() {
        let stand_in = Id::Str(Cow::Borrowed("agentd-id-alias-1-0"));
        let response = MethodResponse::error(stand_in, invalid_request("x")).into_json();
        let raw = RawValue::from_string("-123456789012345678901234567890".into()).unwrap();
        let swapped = with_raw_id(response, Some(raw));
        assert_eq!(
            swapped.get(),
            "{\"jsonrpc\":\"2.0\",\"id\":-123456789012345678901234567890,\"error\":{\"code\":-32600,\"message\":\"Invalid request: x\"}}"
        );
        let null = MethodResponse::error(Id::Null, invalid_request("y")).into_json();
        let raw = RawValue::from_string("-5".into()).unwrap();
        assert!(
            with_raw_id(null, Some(raw))
                .get()
                .starts_with("{\"jsonrpc\":\"2.0\",\"id\":-5,")
        );
    }

    #[test]
    fn id_classes() {
        let check = |text: &str| {
            let raw = RawValue::from_string(text.into()).unwrap();
            classify_id(&raw).map(|id| id.native.is_some())
        };
        assert_eq!(check("7"), Ok(true));
        assert_eq!(check("\"a\""), Ok(true));
        assert_eq!(check("null"), Ok(true));
        assert_eq!(check("-7"), Ok(false));
        assert_eq!(check("18446744073709551616"), Ok(false));
        assert!(check("1.5").unwrap_err().contains("the number 1.5"));
        assert!(check("1e3").is_err());
        assert!(check("true").unwrap_err().contains("a boolean"));
        assert!(check("{}").unwrap_err().contains("an object"));
        assert!(check("[1]").unwrap_err().contains("an array"));
    }
}
