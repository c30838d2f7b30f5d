//! LLM providers over HTTP + SSE. Only this module does HTTP.
//!
//! A [`Provider`] turns a [`Request`] (the conversation as [`Turn`]s plus tools) into an open
//! byte stream, and decodes that stream into [`Delta`]s as they arrive and a final
//! [`Response`]. [`complete`] adds the one retry policy every provider shares: failures before
//! any delta (a retryable status, a broken connection, a stream that ends without a terminal
//! event or stop reason) are retried with backoff; once deltas have reached the client, a
//! failure is reported, never silently replayed. A stream is an answer only when it says why
//! the model stopped.
//!
//! Every call is bounded by its provider's [`Limits`]: no bytes for `idle_timeout` (the wait
//! for the response headers included) fails the attempt, which is retried like a broken
//! stream; the whole call, retries and their delays included, ends at `request_timeout`; and
//! a line or a body larger than its cap is an error, never a buffer that grows without bound.

pub(crate) mod anthropic;
#[cfg(test)]
mod fixtures;
pub(crate) mod gemini;
mod http;
pub(crate) use http::error_chain;
pub(crate) mod openai;
pub(crate) mod openai_chat;
mod retry;
mod sse;

pub(crate) use retry::RetryPolicy;

use crate::tools::ToolDefinition;
use agentd_proto::{ProviderKind, ReasoningBlock, ReasoningEffort, ToolCall, Turn, Usage};
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Bounds on one provider's calls, set per provider in the config file (`[providers.NAME]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest wait for the next bytes of a response, its headers included
    /// (`idle_timeout_secs`). A server that goes quiet this long fails the attempt.
    pub idle_timeout: Duration,
    /// Longest one call may take, its retries and their delays included
    /// (`request_timeout_secs`): a server that trickles bytes never hits the idle timeout.
    pub request_timeout: Duration,
    /// Longest SSE line, in bytes (`max_line_bytes`).
    pub max_line_bytes: usize,
    /// Most bytes of one response body (`max_response_bytes`).
    pub max_response_bytes: usize,
}

impl Default for Limits {
    /// 120 s idle, 15 min per call, 16 MiB per line, 64 MiB per response: far above what a
    /// real provider sends (its largest lines are base64 images of a few MiB), far below what
    /// would hurt the daemon.
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(120),
            request_timeout: Duration::from_secs(15 * 60),
            max_line_bytes: 16 << 20,
            max_response_bytes: 64 << 20,
        }
    }
}

/// A duration in seconds for messages: `120` as configured, `0.05` in unit tests.
fn secs(d: Duration) -> String {
    d.as_secs_f64().to_string()
}

/// How messages name a family's API.
fn family_name(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Anthropic => "Anthropic",
        ProviderKind::Openai => "OpenAI",
        ProviderKind::OpenaiChat => "OpenAI-compatible",
        ProviderKind::Gemini => "Gemini",
    }
}

/// One LLM call.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// Model identifier.
    pub model: &'a str,
    /// The system prompt.
    pub system: &'a str,
    /// The conversation so far.
    pub history: &'a [&'a Turn],
    /// Tools the model may call.
    pub tools: Vec<&'a ToolDefinition>,
    /// Reasoning effort; `None` is the provider default.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Most output tokens.
    pub max_output_tokens: u32,
    /// Routes requests that share a prefix to the same prompt cache (the session's id), for
    /// the providers that take one (OpenAI's `prompt_cache_key`); the others ignore it.
    pub cache_key: Option<&'a str>,
}

#[cfg(test)]
impl Request<'_> {
    /// A request for model `m` with nothing in it, for tests of what does not read it.
    pub(crate) fn bare() -> Self {
        Self {
            model: "m",
            system: "",
            history: &[],
            tools: vec![],
            reasoning_effort: None,
            max_output_tokens: 1,
            cache_key: None,
        }
    }
}

/// Incremental output of a streaming call.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    /// The model started writing text.
    TextStart,
    /// More text.
    Text(String),
    /// More reasoning.
    Reasoning(String),
}

/// Appends `items` to the last message of `out` when it has the same `role`, else starts a new
/// message `{role, <key>: items}`: Anthropic (`content`) and Gemini (`parts`) want alternating
/// roles, while the history may hold several user-side turns in a row.
pub(crate) fn push_merged(
    out: &mut Vec<serde_json::Value>,
    role: &str,
    key: &str,
    items: Vec<serde_json::Value>,
) {
    if items.is_empty() {
        return;
    }
    match out.last_mut() {
        Some(last) if last["role"] == role => {
            if let Some(existing) = last[key].as_array_mut() {
                existing.extend(items);
            }
        }
        _ => out.push(serde_json::json!({"role": role, key: items})),
    }
}

/// Reports a decoder's deltas, opening the text with one [`Delta::TextStart`] before its
/// first piece. Empty pieces are not reported.
pub(crate) struct Deltas<'a> {
    on_delta: &'a mut (dyn FnMut(Delta) + Send),
    text_started: bool,
}

impl<'a> Deltas<'a> {
    pub(crate) fn new(on_delta: &'a mut (dyn FnMut(Delta) + Send)) -> Self {
        Self {
            on_delta,
            text_started: false,
        }
    }

    /// More text.
    pub(crate) fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if !self.text_started {
            self.text_started = true;
            (self.on_delta)(Delta::TextStart);
        }
        (self.on_delta)(Delta::Text(text.to_owned()));
    }

    /// More reasoning.
    pub(crate) fn reasoning(&mut self, text: &str) {
        if !text.is_empty() {
            (self.on_delta)(Delta::Reasoning(text.to_owned()));
        }
    }

    /// Whether any text has been reported.
    pub(crate) fn text_started(&self) -> bool {
        self.text_started
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// It finished its turn.
    EndTurn,
    /// It requested tools.
    ToolUse,
    /// It hit the output token limit.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// It refused.
    Refusal,
    /// The context window is full.
    ContextWindowExceeded,
    /// Something this daemon does not know.
    Other(String),
}

/// A complete model response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Response {
    /// All text blocks, joined.
    pub text: String,
    /// Reasoning blocks, verbatim.
    pub reasoning: Vec<ReasoningBlock>,
    /// Tool calls, in order. The loop runs these whatever `stop_reason` says, except after
    /// `MaxTokens` (the last may be half written) and `Refusal`.
    pub tool_calls: Vec<ToolCall>,
    /// Token counts (final cumulative values); `None` when the server reported none.
    pub usage: Option<Usage>,
    /// Why it stopped.
    pub stop_reason: Option<StopReason>,
    /// The provider's response id.
    pub response_id: Option<String>,
    /// The model that answered.
    pub model: Option<String>,
}

/// What kind of failure an [`Error`] is; decides retries and what the session does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// 401/403: bad or missing credentials. Closes the session (spec 9.11).
    Authentication,
    /// 429.
    RateLimited,
    /// A hard quota or spend limit; retrying will not help.
    QuotaExceeded,
    /// 529 or an `overloaded_error`.
    Overloaded,
    /// 408 or 5xx.
    Server,
    /// The request was too large for the context window: a warning, the session continues.
    ContextLength,
    /// Any other 4xx.
    InvalidRequest,
    /// The connection failed before the response started.
    Network,
    /// The server sent nothing for the idle timeout, or the call passed its deadline. An idle
    /// attempt is retried while nothing of it reached a client; a call past its deadline ends.
    Timeout,
    /// The stream was malformed or reported an error.
    Stream,
    /// The stream broke or ended before the response was complete: no terminal event, or no
    /// stop reason. Retried only while nothing of the response has reached a client.
    Incomplete,
}

/// A provider failure.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// What happened, for people.
    pub message: String,
    /// HTTP status, when there was one.
    pub status: Option<u16>,
    /// How long the server asked us to wait.
    pub retry_after: Option<Duration>,
}

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            status: None,
            retry_after: None,
        }
    }

    /// Whether sending the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::RateLimited
                | ErrorKind::Overloaded
                | ErrorKind::Server
                | ErrorKind::Network
                | ErrorKind::Timeout
                | ErrorKind::Incomplete
        )
    }
}

/// A response body as it arrives.
pub type ByteStream = BoxStream<'static, Result<Bytes, Error>>;

/// One LLM API family.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The API family, recorded on each assistant turn.
    fn kind(&self) -> ProviderKind;
    /// Whether tool results may carry images.
    fn accepts_images(&self) -> bool {
        true
    }
    /// Whether its models take images in user input (the config's `images`).
    fn takes_input_images(&self) -> bool {
        true
    }
    /// The bounds on its calls.
    fn limits(&self) -> Limits {
        Limits::default()
    }
    /// Sends the request and returns the body once the status says it will stream.
    async fn open(&self, request: &Request<'_>) -> Result<ByteStream, Error>;
    /// Decodes a streaming body, reporting deltas as they arrive.
    async fn decode(
        &self,
        body: ByteStream,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Response, Error>;
}

/// The providers a session may use, by configured name. A session's set can gain a provider
/// while it works (`session/set_config` switching to one made usable since the session began),
/// so it changes through `&self`; the lock is held only to look up or insert, never across an
/// `.await`. A clone is an independent copy: each session owns its set.
#[derive(Default)]
pub(crate) struct ProviderSet {
    providers: std::sync::RwLock<BTreeMap<String, Arc<dyn Provider>>>,
}

impl Clone for ProviderSet {
    fn clone(&self) -> Self {
        let providers = self.providers.read().unwrap_or_else(|e| e.into_inner());
        Self {
            providers: std::sync::RwLock::new(providers.clone()),
        }
    }
}

impl ProviderSet {
    /// Adds (or replaces) the provider called `name`.
    pub(crate) fn insert(&self, name: &str, provider: Arc<dyn Provider>) {
        self.providers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned(), provider);
    }

    /// The provider called `name`.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<dyn Provider>> {
        self.providers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }
}

/// Builds a config's providers, every one sharing one HTTP client (one connection pool, made
/// by the first request), as often as the config or its keys change.
#[derive(Clone, Default)]
pub(crate) struct ProviderFactory {
    http: http::SharedHttp,
}

impl ProviderFactory {
    /// A client for every provider of `config` that can be used.
    pub(crate) fn build(&self, config: &crate::config::Config) -> ProviderSet {
        let set = ProviderSet::default();
        for p in config.providers.values().filter(|p| p.is_usable()) {
            set.insert(&p.name, client(self.http.clone(), p));
        }
        set
    }
}

/// A retry about to happen, for a `warning` event.
#[derive(Debug, Clone)]
pub(crate) struct RetryNotice<'a> {
    /// The failure.
    pub(crate) error: &'a Error,
    /// Attempt number about to be made (2 for the first retry).
    pub(crate) attempt: u32,
    /// How long until then.
    pub(crate) delay: Duration,
}

/// Runs one call: opens the stream and decodes it, retrying per `policy` while that is safe.
/// A failure to open is retried; so is a stream that fails before any delta was reported
/// (an incomplete, broken or idle stream, say), since nothing of it has reached a client yet.
/// Once a delta has been reported, a failure is returned, never silently replayed. The whole
/// call, retries and their delays included, ends at the provider's `request_timeout`.
/// `pace` wraps each response's byte stream: the session's back-pressure, which holds the
/// reading of the response while its events wait for the disk.
pub(crate) async fn complete(
    provider: &dyn Provider,
    request: &Request<'_>,
    policy: &RetryPolicy,
    pace: &(dyn Fn(ByteStream) -> ByteStream + Sync),
    on_retry: &mut (dyn FnMut(RetryNotice<'_>) + Send),
    on_delta: &mut (dyn FnMut(Delta) + Send),
) -> Result<Response, Error> {
    let limit = provider.limits().request_timeout;
    // A deadline past what the clock can hold (a huge configured value) is no deadline.
    let deadline = tokio::time::Instant::now().checked_add(limit);
    let past_deadline = |last: Option<&Error>| {
        let mut message = format!(
            "the {} API call did not complete within {} s (request_timeout_secs)",
            family_name(provider.kind()),
            secs(limit)
        );
        if let Some(e) = last {
            message.push_str(&format!("; the last attempt failed: {e}"));
        }
        Error::new(ErrorKind::Timeout, message)
    };
    let mut attempt = 1;
    loop {
        let mut reported = false;
        let call = async {
            let body = pace(provider.open(request).await?);
            let mut tracked = |d: Delta| {
                reported = true;
                on_delta(d);
            };
            provider.decode(body, &mut tracked).await
        };
        let result = match deadline {
            Some(at) => match tokio::time::timeout_at(at, call).await {
                Ok(result) => result,
                Err(_) => return Err(past_deadline(None)),
            },
            None => call.await,
        };
        match result {
            Err(e) if e.is_retryable() && !reported && attempt < policy.max_attempts => {
                let delay = policy.delay(attempt, e.retry_after);
                if deadline.is_some_and(|at| tokio::time::Instant::now() + delay >= at) {
                    return Err(past_deadline(Some(&e)));
                }
                attempt += 1;
                on_retry(RetryNotice {
                    error: &e,
                    attempt,
                    delay,
                });
                tokio::time::sleep(delay).await;
            }
            other => return other,
        }
    }
}

/// An image as a `data:` URL, the form both OpenAI APIs take.
fn data_url(i: &agentd_proto::ImageData) -> String {
    format!("data:{};base64,{}", i.media_type, i.data)
}

/// The HTTP client every provider shares (one connection pool for the daemon). It has no read
/// timeout of its own: each provider's [`Limits::idle_timeout`] bounds every wait, headers
/// included, so that the configured value is the one that applies.
fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("agentd/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
}

impl crate::config::ProviderConfig {
    /// A client for this provider, for a host building sessions itself; the daemon's
    /// sessions share one connection pool instead.
    pub fn client(&self) -> Arc<dyn Provider> {
        client(http::SharedHttp::default(), self)
    }
}

/// The client of the configured provider `p`, over `http`.
pub(crate) fn client(
    http: http::SharedHttp,
    p: &crate::config::ProviderConfig,
) -> Arc<dyn Provider> {
    use self::http::OnEndpoint;
    let (base, key, limits, images) = (p.base_url.as_str(), p.api_key.clone(), p.limits, p.images);
    match p.kind {
        ProviderKind::Anthropic => Arc::new(
            anthropic::Anthropic::new(http, base, key)
                .with_betas(&p.beta_headers)
                .configured(limits, images),
        ),
        ProviderKind::Openai => {
            Arc::new(openai::OpenAi::new(http, base, key).configured(limits, images))
        }
        ProviderKind::OpenaiChat => {
            Arc::new(openai_chat::OpenAiChat::new(http, base, key).configured(limits, images))
        }
        ProviderKind::Gemini => {
            Arc::new(gemini::Gemini::new(http, base, key).configured(limits, images))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// One scripted attempt: deltas to report, then the decoder's result.
    type Attempt = (Vec<Delta>, Result<Response, Error>);

    /// A provider whose every attempt is scripted.
    struct Scripted(Mutex<Vec<Attempt>>);

    #[async_trait]
    impl Provider for Scripted {
        fn kind(&self) -> ProviderKind {
            ProviderKind::OpenaiChat
        }

        async fn open(&self, _: &Request<'_>) -> Result<ByteStream, Error> {
            Ok(Box::pin(futures::stream::empty()))
        }

        async fn decode(
            &self,
            _: ByteStream,
            on_delta: &mut (dyn FnMut(Delta) + Send),
        ) -> Result<Response, Error> {
            let (deltas, result) = self.0.lock().unwrap().remove(0);
            deltas.into_iter().for_each(&mut *on_delta);
            result
        }
    }

    async fn run(attempts: Vec<Attempt>) -> (Result<Response, Error>, Vec<u32>, usize) {
        let provider = Scripted(Mutex::new(attempts));
        let policy = RetryPolicy {
            initial_delay: Duration::ZERO,
            ..RetryPolicy::default()
        };
        let request = Request::bare();
        let mut retries = Vec::new();
        let mut deltas = 0;
        let result = complete(
            &provider,
            &request,
            &policy,
            &|s| s,
            &mut |n| retries.push(n.attempt),
            &mut |_| deltas += 1,
        )
        .await;
        (result, retries, deltas)
    }

    fn incomplete() -> Error {
        Error::new(ErrorKind::Incomplete, "no finish_reason")
    }

    fn answer() -> Response {
        Response {
            text: "ok".into(),
            stop_reason: Some(StopReason::EndTurn),
            ..Response::default()
        }
    }

    #[tokio::test]
    async fn an_incomplete_stream_is_retried_while_nothing_was_reported() {
        let (result, retries, deltas) = run(vec![
            (vec![], Err(incomplete())),
            (vec![], Err(incomplete())),
            (
                vec![Delta::TextStart, Delta::Text("ok".into())],
                Ok(answer()),
            ),
        ])
        .await;
        assert_eq!(
            (result.unwrap(), retries, deltas),
            (answer(), vec![2, 3], 2)
        );
    }

    #[tokio::test]
    async fn a_failure_after_a_delta_is_returned_not_replayed() {
        let (result, retries, deltas) = run(vec![
            (vec![Delta::Reasoning("hm".into())], Err(incomplete())),
            (vec![], Ok(answer())),
        ])
        .await;
        assert_eq!(result.unwrap_err().kind, ErrorKind::Incomplete);
        assert_eq!((retries, deltas), (vec![], 1));
    }

    /// A provider whose every attempt fails with `error` at once, or never ends when `None`.
    struct Failing {
        error: Option<Error>,
        limits: Limits,
        attempts: Mutex<u32>,
    }

    #[async_trait]
    impl Provider for Failing {
        fn kind(&self) -> ProviderKind {
            ProviderKind::Gemini
        }

        fn limits(&self) -> Limits {
            self.limits
        }

        async fn open(&self, _: &Request<'_>) -> Result<ByteStream, Error> {
            *self.attempts.lock().unwrap() += 1;
            match &self.error {
                Some(e) => Err(e.clone()),
                None => Ok(Box::pin(futures::stream::pending())),
            }
        }

        async fn decode(
            &self,
            mut body: ByteStream,
            _: &mut (dyn FnMut(Delta) + Send),
        ) -> Result<Response, Error> {
            use futures::StreamExt;
            body.next().await;
            Ok(answer())
        }
    }

    async fn run_failing(
        error: Option<Error>,
        request_timeout: Duration,
        initial_delay: Duration,
    ) -> (Error, u32) {
        let provider = Failing {
            error,
            limits: Limits {
                request_timeout,
                ..Limits::default()
            },
            attempts: Mutex::new(0),
        };
        let policy = RetryPolicy {
            initial_delay,
            ..RetryPolicy::default()
        };
        let request = Request::bare();
        let err = complete(
            &provider,
            &request,
            &policy,
            &|s| s,
            &mut |_| {},
            &mut |_| {},
        )
        .await
        .unwrap_err();
        let attempts = *provider.attempts.lock().unwrap();
        (err, attempts)
    }

    #[tokio::test]
    async fn a_call_that_never_ends_stops_at_its_deadline() {
        let (err, attempts) = run_failing(None, Duration::from_millis(50), Duration::ZERO).await;
        assert_eq!(
            (err.kind, err.message.as_str(), attempts),
            (
                ErrorKind::Timeout,
                "the Gemini API call did not complete within 0.05 s (request_timeout_secs)",
                1
            )
        );
    }

    #[tokio::test]
    async fn no_retry_is_started_that_would_end_past_the_deadline() {
        let idle = Error::new(ErrorKind::Timeout, "the Gemini API sent nothing for 1 s");
        let (err, attempts) =
            run_failing(Some(idle), Duration::from_secs(1), Duration::from_secs(60)).await;
        assert_eq!(
            (err.kind, err.message.as_str(), attempts),
            (
                ErrorKind::Timeout,
                "the Gemini API call did not complete within 1 s (request_timeout_secs); \
                 the last attempt failed: the Gemini API sent nothing for 1 s",
                1
            )
        );
    }

    #[tokio::test]
    async fn a_malformed_stream_is_not_retried_and_attempts_are_bounded() {
        let (result, retries, _) = run(vec![(
            vec![],
            Err(Error::new(ErrorKind::Stream, "malformed")),
        )])
        .await;
        assert_eq!(
            (result.unwrap_err().kind, retries),
            (ErrorKind::Stream, vec![])
        );
        let (result, retries, _) = run((0..5).map(|_| (vec![], Err(incomplete()))).collect()).await;
        assert_eq!(
            (result.unwrap_err().kind, retries),
            (ErrorKind::Incomplete, vec![2, 3, 4, 5])
        );
    }
}
