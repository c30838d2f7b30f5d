//! HTTP and SSE plumbing shared by every provider: sending a streaming request, turning a
//! failed response into a classified [`Error`], and decoding the body into SSE events.

use super::{ByteStream, Error, ErrorKind};
use crate::config::ApiKey;
use futures::{Stream, StreamExt, TryStreamExt};
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

/// Where a provider sends its requests and how it authenticates.
pub(super) struct Endpoint {
    http: reqwest::Client,
    base_url: String,
    api_key: Option<ApiKey>,
    auth: Auth,
}

impl Endpoint {
    pub(super) fn new(
        http: reqwest::Client,
        base_url: &str,
        api_key: Option<ApiKey>,
        auth: Auth,
    ) -> Self {
        Self {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            auth,
        }
    }

    /// A POST to `path` under the base URL, with the key if one is set.
    pub(super) fn post(&self, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.post(format!("{}{path}", self.base_url));
        match (&self.api_key, self.auth) {
            (Some(key), Auth::Header(name)) => request.header(name, key.expose()),
            (Some(key), Auth::Bearer) => request.bearer_auth(key.expose()),
            (None, _) => request,
        }
    }
}

/// What a family's error body says, extracted by its own parser.
#[derive(Debug, Default)]
pub(super) struct ErrorBody {
    /// The API's error type or status (`rate_limit_error`, `RESOURCE_EXHAUSTED`, ...).
    pub kind: Option<String>,
    /// The API's message.
    pub message: Option<String>,
    /// A hard quota rather than a rate limit: not worth retrying.
    pub quota: bool,
    /// A delay the body asks for (Gemini's RetryInfo).
    pub retry_after: Option<Duration>,
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

/// Sends `request` and returns its body as a stream once the status is 2xx; otherwise reads
/// the (bounded) error body and classifies it with `parse`.
pub(super) async fn send(
    request: reqwest::RequestBuilder,
    family: &str,
    parse: fn(&str) -> ErrorBody,
) -> Result<ByteStream, Error> {
    let response = request.send().await.map_err(|e| {
        Error::new(
            ErrorKind::Network,
            format!("cannot reach the {family} API: {}", error_chain(&e)),
        )
    })?;
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        return Ok(response
            .bytes_stream()
            .map_err(|e| {
                Error::new(
                    ErrorKind::Incomplete,
                    format!("the response stream broke: {}", error_chain(&e)),
                )
            })
            .boxed());
    }
    let header_delay = retry_after(response.headers());
    let body = read_limited(response).await;
    Err(classify(family, status, &body, parse(&body), header_delay))
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
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

async fn read_limited(response: reqwest::Response) -> String {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
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

/// The body as SSE events. LF, CRLF and CR line ends, comments and multi-line data are
/// handled by `eventsource-stream`; a final event not followed by a blank line (recorded
/// streams end so) is still delivered. A broken body keeps its own error (and kind).
pub(super) fn sse<S>(body: S) -> impl Stream<Item = Result<eventsource_stream::Event, Error>>
where
    S: Stream<Item = Result<bytes::Bytes, Error>>,
{
    use eventsource_stream::{EventStreamError, Eventsource};
    body.chain(futures::stream::iter([Ok(bytes::Bytes::from_static(
        b"\n\n",
    ))]))
    .eventsource()
    .map_err(|e| match e {
        EventStreamError::Transport(e) => e,
        other => Error::new(
            ErrorKind::Stream,
            format!("the response stream is malformed: {other}"),
        ),
    })
}

/// Parses one event's data as JSON.
pub(super) fn json(event: &eventsource_stream::Event) -> Result<serde_json::Value, Error> {
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
