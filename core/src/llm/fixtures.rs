//! Test support: loads the recorded streams in `core/testdata/providers/<family>` (copies of
//! `shared/fixtures/providers`, kept in the repository so a clean clone tests them) and frames
//! `*.chunks.txt` files the way each provider does (see the fixtures' README).

use super::{Delta, Error, Provider, Response};
use serde_json::Value;
use std::path::PathBuf;

/// How a family frames one recorded JSON payload on the wire.
#[derive(Clone, Copy)]
pub(super) enum Framing {
    /// `event: {type}\ndata: {json}\n\n` (Anthropic, OpenAI Responses).
    Typed,
    /// `data: {json}\n\n`, then `data: [DONE]` (Chat Completions).
    DataDone,
    /// `data: {json}\r\n\r\n` (Gemini).
    Crlf,
}

/// The directory of `family`'s recordings.
pub(super) fn dir(family: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/providers")
        .join(family)
}

/// The recorded stream `family/name` as wire bytes split into recordings of one response each
/// (a file may hold several, each starting with `first_type`'s payload).
pub(super) fn load(family: &str, name: &str, framing: Framing) -> Vec<Vec<u8>> {
    let path = dir(family).join(name);
    let raw = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {} is readable: {e}", path.display()));
    if name.ends_with(".sse.txt") {
        return vec![raw.into_bytes()];
    }
    let starts = ["message_start", "response.created"];
    let mut responses: Vec<String> = Vec::new();
    for line in raw.lines().filter(|l| !l.trim().is_empty()) {
        let kind = serde_json::from_str::<Value>(line).expect("chunk is JSON")["type"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if responses.is_empty()
            || (starts.contains(&kind.as_str()) && !responses.last().is_some_and(String::is_empty))
        {
            responses.push(String::new());
        }
        let frame = match framing {
            Framing::Typed => format!("event: {kind}\ndata: {line}\n\n"),
            Framing::DataDone => format!("data: {line}\n\n"),
            Framing::Crlf => format!("data: {line}\r\n\r\n"),
        };
        if let Some(last) = responses.last_mut() {
            last.push_str(&frame);
        }
    }
    if let (Framing::DataDone, Some(last)) = (framing, responses.last_mut()) {
        last.push_str("data: [DONE]\n\n");
    }
    responses.into_iter().map(String::into_bytes).collect()
}

/// Feeds `bytes` to `provider`'s decoder in 7-byte chunks (so lines and code points split
/// across reads) and returns the result and every delta.
pub(super) fn decode(
    bytes: Vec<u8>,
    provider: &dyn Provider,
) -> (Result<Response, Error>, Vec<Delta>) {
    use futures::StreamExt;
    let chunks: Vec<Result<bytes::Bytes, Error>> = bytes
        .chunks(7)
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    let mut deltas = Vec::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let result = rt.block_on(
        provider.decode(futures::stream::iter(chunks).boxed(), &mut |d| {
            deltas.push(d)
        }),
    );
    (result, deltas)
}

/// An HTTP client for providers whose decoders are tested (it never sends anything).
pub(super) fn http() -> super::http::SharedHttp {
    super::http::SharedHttp::default()
}

/// The text deltas joined.
pub(super) fn streamed_text(deltas: &[Delta]) -> String {
    deltas
        .iter()
        .filter_map(|d| {
            if let Delta::Text(t) = d {
                Some(t.as_str())
            } else {
                None
            }
        })
        .collect()
}
