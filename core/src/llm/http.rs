//! HTTP and SSE plumbing shared by every provider: sending a streaming request, turning a
//! failed response into a classified [`Error`], bounding a body (idle timeout, size cap) and
//! decoding it into SSE events (with [`super::sse`]).

use super::sse::{self, Decoder};
use super::{ByteStream, Error, ErrorKind, Limits, secs};
use crate::config::ApiKey;
use futures::{Stream, StreamExt};
use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Largest error body read from a failed response.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// How an API takes its key.
#[derive(Debug, Clone, Copy)]
pub(super) enum Auth {
    /// In a header of its own (`x-api-key`, `x-goog-api-key`).
    Header(&'static str),
    /// As `Authorization: Bearer`.
    Bearer,
}

/// The HTTP client providers share (one connection pool), made by their first request: a
/// fresh daemon builds no TLS configuration, root store or connector, whose code (reqwest,
/// rustls, hyper-util) would otherwise be mapped in at start (0.7 MB of RSS, measured). Clones
/// share it.
#[derive(Clone, Default)]
pub(crate) struct SharedHttp(Arc<OnceLock<reqwest::Client>>);

impl SharedHttp {
    /// The client, made on the first call.
    fn get(&self) -> &reqwest::Client {
        self.0.get_or_init(super::http_client)
    }
}

/// Where a provider sends its requests and how it authenticates.
pub(super) struct Endpoint {
    http: SharedHttp,
    base_url: String,
    api_key: Option<ApiKey>,
    auth: Auth,
    limits: Limits,
    /// Whether its models take images in user input (`[providers.NAME] images`).
    images: bool,
}

impl Endpoint {
    pub(super) fn new(
        http: SharedHttp,
        base_url: &str,
        api_key: Option<ApiKey>,
        auth: Auth,
    ) -> Self {
        Self {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            auth,
            limits: Limits::default(),
            images: true,
        }
    }

    /// Whether its models take images in user input.
    pub(super) fn images(&self) -> bool {
        self.images
    }

    /// The bounds on its calls.
    pub(super) fn limits(&self) -> Limits {
        self.limits
    }

    /// A POST to `path` under the base URL, with the key if one is set.
    pub(super) fn post(&self, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.get().post(format!("{}{path}", self.base_url));
        match (&self.api_key, self.auth) {
            (Some(key), Auth::Header(name)) => request.header(name, key.expose()),
            (Some(key), Auth::Bearer) => request.bearer_auth(key.expose()),
            (None, _) => request,
        }
    }
}

/// A family's client, which calls one [`Endpoint`].
pub(super) trait OnEndpoint: Sized {
    /// The endpoint it calls.
    fn endpoint_mut(&mut self) -> &mut Endpoint;

    /// The same client with the configured bounds on its calls, saying whether its models
    /// take images in user input.
    fn configured(mut self, limits: Limits, images: bool) -> Self {
        let endpoint = self.endpoint_mut();
        endpoint.limits = limits;
        endpoint.images = images;
        self
    }
}

/// What a family's error body says, extracted by its own parser.
#[derive(Debug, Default)]
pub(super) struct ErrorBody {
    /// The API's error type or status (`rate_limit_error`, `RESOURCE_EXHAUSTED`, ...).
    pub(crate) kind: Option<String>,
    /// The API's message.
    pub(crate) message: Option<String>,
    /// A hard quota rather than a rate limit: not worth retrying.
    pub(crate) quota: bool,
    /// A delay the body asks for (Gemini's RetryInfo).
    pub(crate) retry_after: Option<Duration>,
}

/// Phrases providers use when the prompt does not fit the context window.
const CONTEXT_PHRASES: [&str; 8] = [
    "prompt is too long",
    "context window",
    "context_length_exceeded",
    "maximum context length",
    "exceed_context_size",
    "too many tokens",
    "input token count",
    "context length",
];

/// Sends `request` and returns its body as a stream once the status is 2xx, bounded by
/// `limits` (the idle timeout between any two reads, the response size); otherwise reads the
/// (bounded) error body and classifies it with `parse`. Waiting for the headers counts as idle.
pub(super) async fn send(
    request: reqwest::RequestBuilder,
    family: &'static str,
    parse: fn(&str) -> ErrorBody,
    limits: Limits,
) -> Result<ByteStream, Error> {
    let response = tokio::time::timeout(limits.idle_timeout, request.send())
        .await
        .map_err(|_| {
            Error::new(
                ErrorKind::Timeout,
                format!(
                    "the {family} API sent no response headers for {} s (idle_timeout_secs)",
                    secs(limits.idle_timeout)
                ),
            )
        })?
        .map_err(|e| {
            Error::new(
                ErrorKind::Network,
                format!("cannot reach the {family} API: {}", error_chain(&e)),
            )
        })?;
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        return Ok(bounded(response.bytes_stream(), family, limits));
    }
    let header_delay = retry_after(response.headers());
    let body = read_limited(response, limits.idle_timeout).await;
    Err(classify(family, status, &body, parse(&body), header_delay))
}

/// A response body whose every read must come within the idle timeout and whose total stays
/// within the size cap; either failure, or a broken connection, is its last item.
fn bounded<S>(body: S, family: &'static str, limits: Limits) -> ByteStream
where
    S: Stream<Item = Result<bytes::Bytes, reqwest::Error>> + Send + 'static,
{
    struct State<S> {
        body: std::pin::Pin<Box<S>>,
        total: usize,
        ended: bool,
    }
    let state = State {
        body: Box::pin(body),
        total: 0,
        ended: false,
    };
    futures::stream::unfold(state, move |mut st| async move {
        if st.ended {
            return None;
        }
        let item = match tokio::time::timeout(limits.idle_timeout, st.body.next()).await {
            Err(_) => Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "the {family} API sent nothing for {} s in the middle of its response \
                     (idle_timeout_secs)",
                    secs(limits.idle_timeout)
                ),
            )),
            Ok(None) => return None,
            Ok(Some(Err(e))) => Err(Error::new(
                ErrorKind::Incomplete,
                format!("the response stream broke: {}", error_chain(&e)),
            )),
            Ok(Some(Ok(chunk))) => {
                st.total = st.total.saturating_add(chunk.len());
                if st.total > limits.max_response_bytes {
                    Err(Error::new(
                        ErrorKind::Stream,
                        format!(
                            "the {family} API response is larger than {} bytes \
                             (max_response_bytes)",
                            limits.max_response_bytes
                        ),
                    ))
                } else {
                    Ok(chunk)
                }
            }
        };
        st.ended = item.is_err();
        Some((item, st))
    })
    .boxed()
}

/// Decides what a failed status means.
pub(super) fn classify(
    family: &str,
    status: u16,
    raw: &str,
    body: ErrorBody,
    header_delay: Option<Duration>,
) -> Error {
    let message = body.message.clone().unwrap_or_else(|| {
        let snippet: String = raw.chars().take(200).collect();
        if snippet.trim().is_empty() {
            "no details".into()
        } else {
            snippet.trim().to_owned()
        }
    });
    let lower = message.to_ascii_lowercase();
    let kind_lower = body
        .kind
        .as_deref()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let context = CONTEXT_PHRASES
        .iter()
        .any(|p| lower.contains(p) || kind_lower.contains(p));
    let kind = match status {
        401 | 403 => ErrorKind::Authentication,
        429 if body.quota => ErrorKind::QuotaExceeded,
        429 => ErrorKind::RateLimited,
        529 => ErrorKind::Overloaded,
        400 | 413 if context => ErrorKind::ContextLength,
        408 | 500..=599 => ErrorKind::Server,
        _ => ErrorKind::InvalidRequest,
    };
    let what = body.kind.map(|k| format!(" {k}")).unwrap_or_default();
    Error {
        kind,
        message: format!("{family} API error {status}{what}: {message}"),
        status: Some(status),
        retry_after: header_delay.or(body.retry_after),
    }
}

/// The full chain of an error's sources, for messages that say what actually failed.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

/// The start of an error body: at most `MAX_ERROR_BODY` bytes, and only what arrives without
/// a pause longer than `idle` (a server that trickles its error body is not waited for).
async fn read_limited(response: reqwest::Response, idle: Duration) -> String {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout(idle, stream.next()).await {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_ERROR_BODY {
            body.truncate(MAX_ERROR_BODY);
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// `retry-after-ms` (preferred) or `retry-after` in seconds. A value that is not a number of
/// seconds (an HTTP date, garbage) counts as absent, and so does one no `Duration` can hold.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    if let Some(ms) = get("retry-after-ms") {
        return seconds(ms / 1000.0);
    }
    get("retry-after").and_then(seconds)
}

/// A server-sent delay in seconds as a `Duration`; `None` for values a hostile or broken
/// server may send that no `Duration` holds (negative, NaN, infinite, or past `u64` seconds),
/// where `Duration::from_secs_f64` would panic.
pub(super) fn seconds(value: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(value).ok()
}

/// The body as SSE events, decoded by [`sse::Decoder`] in time linear in its size; a line
/// longer than `max_line` bytes ends it with an error. A final event not followed by a blank
/// line (recorded streams end so) is still delivered. A broken body keeps its own error (and
/// kind); events decoded before a failure are delivered first.
pub(super) fn sse(
    body: ByteStream,
    max_line: usize,
) -> impl Stream<Item = Result<sse::Event, Error>> {
    struct State {
        body: ByteStream,
        decoder: Decoder,
        ready: VecDeque<sse::Event>,
        /// Reused for each chunk's events.
        batch: Vec<sse::Event>,
        /// The failure to report once `ready` is empty.
        failed: Option<Error>,
        ended: bool,
    }
    let malformed = |e: sse::DecodeError| {
        Error::new(
            ErrorKind::Stream,
            format!("the response stream is malformed: {e}"),
        )
    };
    let state = State {
        body,
        decoder: Decoder::new(max_line),
        ready: VecDeque::new(),
        batch: Vec::new(),
        failed: None,
        ended: false,
    };
    futures::stream::unfold(state, move |mut st| async move {
        loop {
            if let Some(event) = st.ready.pop_front() {
                return Some((Ok(event), st));
            }
            if let Some(e) = st.failed.take() {
                st.ended = true;
                return Some((Err(e), st));
            }
            if st.ended {
                return None;
            }
            let decoded = match st.body.next().await {
                Some(Ok(chunk)) => st.decoder.feed(&chunk, &mut st.batch),
                Some(Err(e)) => {
                    st.failed = Some(e);
                    Ok(())
                }
                None => {
                    st.ended = true;
                    st.decoder.finish(&mut st.batch)
                }
            };
            st.ready.extend(st.batch.drain(..));
            if let Err(e) = decoded {
                st.failed = Some(malformed(e));
            }
        }
    })
}

/// Parses one event's data as JSON.
pub(super) fn json(event: &sse::Event) -> Result<serde_json::Value, Error> {
    serde_json::from_str(&event.data).map_err(|e| {
        Error::new(
            ErrorKind::Stream,
            format!(
                "malformed stream event {:?}: {e}",
                event.data.chars().take(80).collect::<String>()
            ),
        )
    })
}

/// The error for a stream that ended before its family's terminal event.
pub(super) fn truncated(terminal: &str) -> Error {
    Error::new(
        ErrorKind::Incomplete,
        format!("the response stream ended before {terminal} (truncated response)"),
    )
}

/// The error for a stream that ended without saying why the model stopped: whatever it
/// carried is not known to be the whole answer.
pub(super) fn no_stop_reason(field: &str) -> Error {
    Error::new(
        ErrorKind::Incomplete,
        format!("the response stream ended without a {field} (incomplete response)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(kind: &str, message: &str) -> ErrorBody {
        ErrorBody {
            kind: Some(kind.into()),
            message: Some(message.into()),
            ..Default::default()
        }
    }

    fn delay_of(headers: &[(&'static str, &str)]) -> Option<Duration> {
        let mut map = reqwest::header::HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, value.parse().unwrap());
        }
        retry_after(&map)
    }

    #[test]
    fn hostile_retry_after_values_never_panic_and_count_as_absent() {
        for value in [
            "1e30",
            "-1",
            "NaN",
            "inf",
            "-inf",
            "1e400",
            "soon",
            "",
            "0x10",
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "1e23",
        ] {
            assert_eq!(
                delay_of(&[("retry-after", value)]),
                None,
                "retry-after: {value}"
            );
            assert_eq!(
                delay_of(&[("retry-after-ms", value)]),
                None,
                "retry-after-ms: {value}"
            );
        }
        assert_eq!(
            delay_of(&[("retry-after", " 2 ")]),
            Some(Duration::from_secs(2))
        );
        assert_eq!(delay_of(&[("retry-after", "0")]), Some(Duration::ZERO));
        assert_eq!(
            delay_of(&[("retry-after", "1e10")]),
            Some(Duration::from_secs(10_000_000_000)),
            "huge but representable: the retry policy decides"
        );
        assert_eq!(
            delay_of(&[("retry-after-ms", "250"), ("retry-after", "9")]),
            Some(Duration::from_millis(250))
        );
    }

    fn limits(idle_ms: u64, max_response_bytes: usize) -> Limits {
        Limits {
            idle_timeout: Duration::from_millis(idle_ms),
            max_response_bytes,
            ..Limits::default()
        }
    }

    /// Everything `stream` yields up to its end or first error.
    async fn drain<T>(stream: impl Stream<Item = Result<T, Error>>) -> (Vec<T>, Option<Error>) {
        let mut stream = std::pin::pin!(stream);
        let mut items = Vec::new();
        while let Some(item) = stream.next().await {
            match item {
                Ok(i) => items.push(i),
                Err(e) => {
                    assert!(stream.next().await.is_none(), "an error is the last item");
                    return (items, Some(e));
                }
            }
        }
        (items, None)
    }

    fn response_body(chunks: &[&'static str]) -> impl Stream<Item = reqwest::Result<bytes::Bytes>> {
        futures::stream::iter(
            chunks
                .iter()
                .map(|c| Ok(bytes::Bytes::from_static(c.as_bytes())))
                .collect::<Vec<_>>(),
        )
    }

    #[tokio::test]
    async fn a_body_that_goes_quiet_ends_with_an_idle_timeout() {
        let quiet = response_body(&["data: 1\n\n"]).chain(futures::stream::pending());
        let (items, err) = drain(bounded(quiet, "Gemini", limits(20, 1 << 20))).await;
        let err = err.unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(
            (err.kind, err.message.as_str()),
            (
                ErrorKind::Timeout,
                "the Gemini API sent nothing for 0.02 s in the middle of its response (idle_timeout_secs)"
            )
        );
        assert!(err.is_retryable());
    }

    #[tokio::test]
    async fn a_body_past_its_cap_ends_with_an_error_naming_the_limit() {
        let (items, err) = drain(bounded(
            response_body(&["12345", "67890", "x"]),
            "Anthropic",
            limits(10_000, 10),
        ))
        .await;
        let err = err.unwrap();
        assert_eq!(items.len(), 2, "exactly at the cap is fine");
        assert_eq!(
            (err.kind, err.message.as_str()),
            (
                ErrorKind::Stream,
                "the Anthropic API response is larger than 10 bytes (max_response_bytes)"
            )
        );
        assert!(!err.is_retryable());
    }

    #[tokio::test]
    async fn sse_delivers_the_events_before_a_failure_then_the_failure() {
        let chunks: Vec<Result<bytes::Bytes, Error>> = vec![
            Ok("event: ping\ndata: {}\n\ndata: [DONE]\n\ndata: 12345".into()),
            Ok("6789\n\n".into()),
        ];
        let (events, err) = drain(sse(futures::stream::iter(chunks).boxed(), 12)).await;
        assert_eq!(
            events,
            [
                sse::Event {
                    event: "ping".into(),
                    data: "{}".into()
                },
                sse::Event {
                    event: "message".into(),
                    data: "[DONE]".into()
                }
            ]
        );
        assert_eq!(
            err.unwrap().message,
            "the response stream is malformed: a line of the response stream is longer than 12 bytes \
             (the limit is max_line_bytes in the provider's config)"
        );
        let broken: Vec<Result<bytes::Bytes, Error>> = vec![
            Ok("data: 1".into()),
            Err(Error::new(
                ErrorKind::Incomplete,
                "the response stream broke: reset",
            )),
        ];
        let (events, err) = drain(sse(futures::stream::iter(broken).boxed(), 8)).await;
        assert!(
            events.is_empty(),
            "an unfinished event is not delivered on a broken body"
        );
        assert_eq!(err.unwrap().kind, ErrorKind::Incomplete);
    }

    #[test]
    fn statuses_and_messages_are_classified() {
        let e = classify(
            "Anthropic",
            401,
            "",
            body("authentication_error", "invalid x-api-key"),
            None,
        );
        assert_eq!(
            (e.kind, e.message.as_str()),
            (
                ErrorKind::Authentication,
                "Anthropic API error 401 authentication_error: invalid x-api-key"
            )
        );
        assert_eq!(
            classify("X", 529, "", ErrorBody::default(), None).kind,
            ErrorKind::Overloaded
        );
        assert_eq!(
            classify("X", 503, "", ErrorBody::default(), None).kind,
            ErrorKind::Server
        );
        assert_eq!(
            classify(
                "X",
                400,
                "",
                body("invalid_request_error", "prompt is too long: 1 > 0"),
                None
            )
            .kind,
            ErrorKind::ContextLength
        );
        assert_eq!(
            classify(
                "X",
                400,
                "",
                body("context_length_exceeded", "too big"),
                None
            )
            .kind,
            ErrorKind::ContextLength
        );
        assert_eq!(
            classify(
                "X",
                413,
                "<html>Request Entity Too Large</html>",
                ErrorBody::default(),
                None
            )
            .message,
            "X API error 413: <html>Request Entity Too Large</html>"
        );
        let quota = ErrorBody {
            quota: true,
            ..Default::default()
        };
        assert!(!classify("X", 429, "", quota, None).is_retryable());
        let delayed = ErrorBody {
            retry_after: Some(Duration::from_secs(3)),
            ..Default::default()
        };
        assert_eq!(
            classify("X", 429, "", delayed, None).retry_after,
            Some(Duration::from_secs(3))
        );
    }
}
