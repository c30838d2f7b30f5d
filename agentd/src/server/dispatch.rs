//! Dispatch: runs a connection's messages through jsonrpsee's `Methods` and queues their
//! answers. Does by hand what jsonrpsee's own (crate-private) RPC service does for its
//! transports, because this one must also: answer every malformed message with a specific
//! error (see [`message`]), run requests whose ids jsonrpsee cannot hold under
//! stand-in ids (for subscriptions too, through a sink that swaps the id back), bound batches
//! by count and by the size of their answers, take unsubscribe params as an object, and let an
//! unsubscribe sent right after the subscribe reply find its subscription.

use super::Limits;
use super::message::{self, Message, RawId, StandIns, invalid_request, parse_error, with_raw_id};
use super::peer::Peer;
use jsonrpsee::core::id_providers::RandomStringIdProvider;
use jsonrpsee::core::server::{
    BoundedSubscriptions, ConnectionId, Extensions, MethodCallback, MethodResponse, MethodSink,
    Methods, PendingSubscriptionAcceptError, PendingSubscriptionSink, SubscriptionSink,
    SubscriptionState,
};
use jsonrpsee::types::error::{
    ErrorObject, INVALID_PARAMS_CODE, OVERSIZED_RESPONSE_CODE, reject_too_many_subscriptions,
};
use jsonrpsee::types::{ErrorCode, ErrorObjectOwned, Id, Params, Request};
use serde_json::value::RawValue;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

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
    /// [`Dispatcher::unsubscribe`]).
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

/// One connection's dispatch state, shared by the tasks handling its messages.
pub(super) struct Dispatcher {
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
    stand_ins: StandIns,
    /// Subscriptions being accepted (see [`Outbox::accept`]).
    accepting: Arc<Acceptances>,
}

impl Dispatcher {
    /// Dispatches for connection `conn_id` of `peer`, answering into `queue`.
    pub(super) fn new(
        methods: Methods,
        queue: mpsc::Sender<Box<RawValue>>,
        conn_id: usize,
        peer: Peer,
        limits: Limits,
    ) -> Self {
        let weak = queue.downgrade();
        let accepting = Arc::new(Acceptances::default());
        let mut extensions = Extensions::new();
        extensions.insert(peer);
        extensions.insert(Outbox {
            queue: weak.clone(),
            accepting: accepting.clone(),
        });
        Self {
            methods,
            sink: MethodSink::new_with_limit(queue, limits.max_response_size),
            queue: weak,
            conn_id: ConnectionId(conn_id),
            subscriptions: BoundedSubscriptions::new(limits.max_subscriptions),
            ids: RandomStringIdProvider::new(16),
            extensions,
            limits,
            stand_ins: StandIns::new(conn_id),
            accepting,
        }
    }

    /// Whether a subscription of this connection is still open.
    pub(super) fn has_subscriptions(&self) -> bool {
        // `self.sink` itself is one strong sender; every other one belongs to a subscription.
        self.queue.strong_count() > 1
    }

    /// Answers with `error` under a null id (for what the framing refused).
    pub(super) async fn send_error(&self, error: ErrorObjectOwned) {
        let _ = self.sink.send_error(Id::Null, error).await;
    }

    /// Handles one message (a request, a notification or a batch) and queues its answer.
    pub(super) async fn handle(&self, bytes: &[u8]) {
        let is_batch = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
        if is_batch {
            if let Some(response) = self.handle_batch(bytes).await {
                let _ = self.sink.send(response).await;
            }
            return;
        }
        match message::classify(bytes, &self.stand_ins) {
            Message::Call(request, raw_id) => {
                let response = self.call(request, raw_id.as_ref()).await;
                // A subscription's reply was already sent when it was accepted or rejected.
                if !response.is_subscription() {
                    let _ = self
                        .sink
                        .send(with_raw_id(response.into_json(), raw_id))
                        .await;
                }
            }
            // Client notifications need no answer.
            Message::Notification => {}
            Message::Reject(error, raw_id) => {
                let response = MethodResponse::error(Id::Null, error).into_json();
                let _ = self.sink.send(with_raw_id(response, raw_id)).await;
            }
        }
    }

    async fn handle_batch(&self, bytes: &[u8]) -> Option<Box<RawValue>> {
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
            return Some(
                MethodResponse::error(Id::Null, invalid_request("empty batch")).into_json(),
            );
        }
        let max = self.limits.max_batch_len;
        if items.len() > max {
            let why = format!(
                "a batch holds at most {max} requests, this one has {}",
                items.len()
            );
            return Some(MethodResponse::error(Id::Null, invalid_request(&why)).into_json());
        }
        let budget = self.limits.max_response_size as usize;
        let mut answers: Vec<Box<RawValue>> = Vec::new();
        let mut size = 2;
        for item in items {
            let answer = match message::classify(item.get().as_bytes(), &self.stand_ins) {
                Message::Call(request, raw_id) => {
                    let response = self.call(request, raw_id.as_ref()).await;
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
                    format!(
                        "the batch's responses exceed {budget} bytes; send fewer requests at once"
                    ),
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

    /// Dispatches one request; the same steps as jsonrpsee's own RPC service. `raw_id`: the
    /// request runs under a stand-in id and this is its own (see [`RawId`]).
    async fn call(&self, request: Request<'_>, raw_id: Option<&RawId>) -> MethodResponse {
        let id = request.id.clone().into_owned();
        let params = Params::new(request.params.as_ref().map(|p| p.get())).into_owned();
        let extensions = self.extensions.clone();
        let max = self.limits.max_response_size as usize;
        match self.methods.method_with_name(&request.method) {
            None => MethodResponse::error(id, ErrorObject::from(ErrorCode::MethodNotFound)),
            Some((_, MethodCallback::Sync(cb))) => cb(id, params, max, extensions),
            Some((_, MethodCallback::Async(cb))) => {
                cb(id, params, self.conn_id, max, extensions).await
            }
            Some((_, MethodCallback::Subscription(cb))) => match self.subscriptions.acquire() {
                Some(permit) => {
                    let state = SubscriptionState {
                        conn_id: self.conn_id,
                        id_provider: &self.ids,
                        subscription_permit: permit,
                    };
                    let sink = match raw_id {
                        None => self.sink.clone(),
                        Some(raw_id) => match self.aliased_sink(raw_id.clone()) {
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
                None => MethodResponse::error(
                    id,
                    reject_too_many_subscriptions(self.subscriptions.max()),
                ),
            },
            Some((_, MethodCallback::Unsubscription(cb))) => match unsubscribe_params(params) {
                Ok(params) => self.unsubscribe(cb.as_ref(), id, params, extensions).await,
                Err(error) => MethodResponse::error(id, error),
            },
        }
    }

    /// Runs jsonrpsee's unsubscribe. When it finds nothing while a subscription of this
    /// connection is being accepted, that may be the one named (its reply reached the client
    /// before jsonrpsee registered it): it is tried again once the acceptances are done.
    async fn unsubscribe(
        &self,
        cb: &(
             dyn Fn(Id<'static>, Params<'static>, ConnectionId, usize, Extensions) -> MethodResponse
                 + Send
                 + Sync
         ),
        id: Id<'static>,
        params: Params<'static>,
        extensions: Extensions,
    ) -> MethodResponse {
        let max = self.limits.max_response_size as usize;
        let acceptances = &self.accepting;
        let finished_before = acceptances.finished.load(Ordering::SeqCst);
        let first = cb(
            id.clone(),
            params.clone(),
            self.conn_id,
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
        cb(id, params, self.conn_id, max, extensions)
    }

    /// The sink for a subscription whose request id jsonrpsee cannot hold. Its reply, sent by
    /// jsonrpsee under the stand-in id, is the first message through it: on the way to the
    /// connection's queue it gets the id as sent. Notifications pass unchanged, with the same
    /// backpressure; the forwarder ends with the subscription or the connection.
    fn aliased_sink(&self, raw_id: RawId) -> Option<MethodSink> {
        let queue = self.queue.upgrade()?;
        let (tx, mut rx) = mpsc::channel::<Box<RawValue>>(self.limits.message_buffer);
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
        Some(MethodSink::new_with_limit(
            tx,
            self.limits.max_response_size,
        ))
    }
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
