//! A typed test client: requests go through the protocol's method table (`call::<M>`) and
//! events are read as the protocol's own [`Event`] (`until(|e: &EventBody| ...)`), so a renamed
//! method or field fails to compile instead of failing at run time. It wraps [`RawClient`],
//! which stays for what must be sent or read as bytes (malformed input, framing).

use crate::RawClient;
use agentd_proto::methods::{Method, SessionGet, SessionSubmit};
use agentd_proto::{
    ErrorData, Event, EventBody, SessionId, SessionParams, StreamEnd, StreamItem, SubmitParams,
};
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::path::Path;

/// A JSON-RPC error answer, with the daemon's typed `data` when it has one.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct RpcError {
    /// The JSON-RPC code.
    pub code: i64,
    /// What was wrong.
    pub message: String,
    /// The application error's kind and details (absent on protocol errors).
    #[serde(default)]
    pub data: Option<ErrorData>,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "error {}: {}", self.code, self.message)
    }
}

impl std::error::Error for RpcError {}

/// A connection to the daemon speaking the protocol's types.
pub struct Client {
    raw: RawClient,
}

impl From<RawClient> for Client {
    fn from(raw: RawClient) -> Self {
        Self { raw }
    }
}

impl Client {
    /// Connects to `socket`.
    pub async fn connect(socket: &Path) -> Result<Self> {
        Ok(RawClient::connect(socket).await?.into())
    }

    /// The untyped client underneath, for bytes a typed call cannot send.
    pub fn raw(&mut self) -> &mut RawClient {
        &mut self.raw
    }

    /// Calls `M` and returns its answer: the typed result, or the typed error.
    pub async fn request<M: Method>(
        &mut self,
        params: M::Params,
    ) -> Result<Result<M::Response, RpcError>> {
        let response = self
            .raw
            .request(M::NAME, serde_json::to_value(params)?)
            .await?;
        if let Some(error) = response.get("error") {
            return Ok(Err(serde_json::from_value(error.clone()).with_context(
                || format!("{} answered a malformed error: {error}", M::NAME),
            )?));
        }
        let result = response.get("result").cloned().unwrap_or(Value::Null);
        Ok(Ok(serde_json::from_value(result.clone()).with_context(
            || format!("{} answered what its type does not read: {result}", M::NAME),
        )?))
    }

    /// Calls `M`; an error answer fails.
    pub async fn call<M: Method>(&mut self, params: M::Params) -> Result<M::Response> {
        self.request::<M>(params)
            .await?
            .with_context(|| format!("{} failed", M::NAME))
    }

    /// Subscribes to `session`'s events after `since_seq` (`None`: live ones only); later
    /// reads see this subscription's items only. Returns the subscription id.
    pub async fn subscribe(
        &mut self,
        session: &SessionId,
        since_seq: Option<u64>,
    ) -> Result<String> {
        self.raw.subscribe(&session.0, since_seq).await
    }

    /// The next item of the newest subscription.
    pub async fn item(&mut self) -> Result<StreamItem> {
        let item = self.raw.item().await?;
        serde_json::from_value(item.clone())
            .with_context(|| format!("a stream item its type does not read: {item}"))
    }

    /// Reads events until one satisfies `pred`; returns every event read, that one last. The
    /// stream ending first fails, naming what was seen.
    pub async fn until(&mut self, mut pred: impl FnMut(&EventBody) -> bool) -> Result<Vec<Event>> {
        let mut seen = Vec::new();
        loop {
            match self.item().await? {
                StreamItem::Event(event) => {
                    let matched = pred(&event.body);
                    seen.push(event);
                    if matched {
                        return Ok(seen);
                    }
                }
                StreamItem::End(StreamEnd { reason, .. }) => bail!(
                    "the stream ended ({reason}) first; saw {}",
                    seen.iter()
                        .map(|e| e.body.kind())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            }
        }
    }

    /// Subscribes to `session` from its newest event, submits `text`, and returns every event
    /// up to the `processing_end`.
    pub async fn run(&mut self, session: &SessionId, text: &str) -> Result<Vec<Event>> {
        self.start(session, text).await?;
        self.until(|e| matches!(e, EventBody::ProcessingEnd { .. }))
            .await
    }

    /// Subscribes to `session` from its newest event and submits `text`, without waiting.
    pub async fn start(&mut self, session: &SessionId, text: &str) -> Result<()> {
        let snapshot = self
            .call::<SessionGet>(SessionParams {
                session_id: session.clone(),
            })
            .await?;
        self.subscribe(session, Some(snapshot.last_seq)).await?;
        self.call::<SessionSubmit>(submit(session, text)).await?;
        Ok(())
    }
}

/// `session/submit`'s params for plain text.
pub fn submit(session: &SessionId, text: &str) -> SubmitParams {
    SubmitParams {
        session_id: session.clone(),
        text: text.into(),
        images: Vec::new(),
        client_input_id: None,
        when_busy: None,
    }
}
