//! A mock LLM server on 127.0.0.1 for every provider family: scripted replies (streams, pauses, cuts,
//! HTTP errors, withheld headers), every request recorded for assertions.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, mpsc};

/// One piece of a streamed reply.
#[derive(Clone)]
pub enum Chunk {
    /// Bytes to send.
    Data(String),
    /// Wait until the gate is opened ([`Gate::open`]).
    Wait(Gate),
    /// Wait this long (a trickling server; never a way to order events in a test).
    Pause(std::time::Duration),
    /// Drop the connection mid-body.
    Cut,
}

/// A point a streamed reply pauses at until the test opens it.
#[derive(Clone, Default)]
pub struct Gate(Arc<Notify>);

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lets the reply continue (before or after it arrived at the gate).
    pub fn open(&self) {
        self.0.notify_one();
    }
}

/// A scripted reply.
#[derive(Clone)]
pub enum Reply {
    /// 200 with an SSE body.
    Stream(Vec<Chunk>),
    /// Another status with headers and a body.
    Status(u16, Vec<(String, String)>, String),
    /// Accept the request and never answer it: no status, no headers.
    NoHeaders,
}

/// A recorded request.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The path and query (`/v1/messages`, `/v1beta/models/m:streamGenerateContent?alt=sse`).
    pub path: String,
    /// The JSON body.
    pub body: Value,
    /// The headers (lower-case names).
    pub headers: Vec<(String, String)>,
}

impl Recorded {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

type Responder = Box<dyn Fn(&Value) -> Reply + Send + Sync>;

#[derive(Default)]
struct Inner {
    queue: VecDeque<Reply>,
    responder: Option<Responder>,
    requests: Vec<Recorded>,
}

#[derive(Default)]
struct Shared {
    inner: Mutex<Inner>,
    arrived: Notify,
}

/// The mock server. It stops when dropped (with the test's runtime).
#[derive(Clone)]
pub struct MockProvider {
    /// `http://127.0.0.1:PORT`, for `ANTHROPIC_BASE_URL`.
    pub url: String,
    shared: Arc<Shared>,
}

impl MockProvider {
    /// Starts on an ephemeral port.
    pub async fn start() -> anyhow::Result<Self> {
        let shared = Arc::new(Shared::default());
        // Every family's endpoint: /v1/messages, /v1/responses, /v1/chat/completions and
        // /v1beta/models/{model}:streamGenerateContent.
        // Requests as large as a real API takes (axum's default is 2 MiB): tests send files of
        // megabytes as images.
        let app = Router::new()
            .fallback(post(handle))
            .layer(axum::extract::DefaultBodyLimit::max(32 << 20))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        // Without TCP_NODELAY, small streamed chunks meet delayed ACKs and stall ~40 ms each.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { url, shared })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.shared.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a reply for the next request.
    pub fn push(&self, reply: Reply) {
        self.lock().queue.push_back(reply);
    }

    /// Queues a streamed reply.
    pub fn push_stream(&self, chunks: Vec<Chunk>) {
        self.push(Reply::Stream(chunks));
    }

    /// Answers every request without a queued reply with `f(request body)`.
    pub fn respond_with(&self, f: impl Fn(&Value) -> Reply + Send + Sync + 'static) {
        self.lock().responder = Some(Box::new(f));
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    /// Waits until at least `n` requests have arrived.
    pub async fn wait_requests(&self, n: usize) -> Vec<Recorded> {
        let deadline = tokio::time::Instant::now() + crate::WAIT;
        loop {
            let notified = self.shared.arrived.notified();
            let requests = self.requests();
            if requests.len() >= n {
                return requests;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("expected {n} requests, got {}", self.requests().len());
            }
        }
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let reply = {
        let mut inner = shared.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.requests.push(Recorded {
            path: uri
                .path_and_query()
                .map(|p| p.as_str().to_owned())
                .unwrap_or_default(),
            body: body.clone(),
            headers: headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_owned(),
                        v.to_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect(),
        });
        match inner.queue.pop_front() {
            Some(r) => r,
            None => match &inner.responder {
                Some(f) => f(&body),
                None => Reply::Status(500, vec![], r#"{"type":"error","error":{"type":"api_error","message":"mock: no scripted reply"}}"#.into()),
            },
        }
    };
    shared.arrived.notify_waiters();
    match reply {
        Reply::NoHeaders => std::future::pending().await,
        Reply::Status(status, extra, text) => {
            let mut response = Response::builder()
                .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
            response = response.header("content-type", "application/json");
            for (k, v) in extra {
                response = response.header(k, v);
            }
            response.body(Body::from(text)).unwrap_or_default()
        }
        Reply::Stream(chunks) => {
            let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(16);
            tokio::spawn(async move {
                for chunk in chunks {
                    match chunk {
                        Chunk::Data(d) => {
                            if tx.send(Ok(Bytes::from(d))).await.is_err() {
                                return;
                            }
                        }
                        Chunk::Wait(gate) => gate.0.notified().await,
                        Chunk::Pause(d) => tokio::time::sleep(d).await,
                        Chunk::Cut => {
                            let _ = tx
                                .send(Err(std::io::Error::other("mock: connection cut")))
                                .await;
                            return;
                        }
                    }
                }
            });
            let stream = futures::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|item| (item, rx))
            });
            Response::builder()
                .status(200)
                .header("content-type", "text/event-stream; charset=utf-8")
                .header("request-id", "req_mock")
                .body(Body::from_stream(stream))
                .unwrap_or_default()
        }
    }
}
