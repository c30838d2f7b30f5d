//! Anthropic Messages API (`POST /v1/messages`, `stream: true`).
//!
//! Request building maps [`Turn`]s to messages (tool results and steering become user content,
//! consecutive same-role messages are merged, thinking blocks are sent back verbatim), and
//! [`decode_stream`] assembles the SSE stream: text and thinking deltas as they arrive,
//! `tool_use` input from `input_json_delta` fragments (none means `{}`), cumulative usage from
//! `message_delta`, and an error for a mid-stream `error` event or an EOF before
//! `message_stop`.

use super::{ByteStream, Delta, Error, ErrorKind, Provider, Request, Response, StopReason};
use crate::config::ApiKey;
use agentd_proto::{ReasoningBlock, ReasoningEffort, ToolCall, ToolCallId, Turn, Usage};
use async_trait::async_trait;
use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt, TryStreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;

const API_VERSION: &str = "2023-06-01";
/// Largest error body read from a failed response.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// A client for one Anthropic-compatible endpoint.
pub struct Anthropic {
    http: reqwest::Client,
    base_url: String,
    api_key: Option<ApiKey>,
}

impl Anthropic {
    /// A client for `base_url` (without `/v1`), authenticating with `api_key` if set.
    pub fn new(http: reqwest::Client, base_url: &str, api_key: Option<ApiKey>) -> Self {
        Self {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
        }
    }
}

#[async_trait]
impl Provider for Anthropic {
    async fn open(&self, request: &Request<'_>) -> Result<ByteStream, Error> {
        let mut http = self
            .http
            .post(format!("{}/v1/messages", self.base_url))
            .header("anthropic-version", API_VERSION)
            .header("accept", "text/event-stream")
            .json(&request_body(request));
        if let Some(key) = &self.api_key {
            http = http.header("x-api-key", key.expose());
        }
        let response = http.send().await.map_err(|e| network_error(&e))?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            let retry_after = retry_after(response.headers());
            let body = read_limited(response).await;
            let mut error = http_error(status, &body);
            error.retry_after = retry_after;
            return Err(error);
        }
        Ok(response
            .bytes_stream()
            .map_err(|e| {
                Error::new(
                    ErrorKind::Stream,
                    format!("the response stream broke: {}", error_chain(&e)),
                )
            })
            .boxed())
    }

    async fn decode(
        &self,
        body: ByteStream,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Response, Error> {
        decode_stream(body, on_delta).await
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

fn network_error(e: &reqwest::Error) -> Error {
    Error::new(
        ErrorKind::Network,
        format!("cannot reach the Anthropic API: {}", error_chain(e)),
    )
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

/// `retry-after-ms` (preferred) or `retry-after` in seconds.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    if let Some(ms) = get("retry-after-ms").filter(|v| v.is_finite() && *v >= 0.0) {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    get("retry-after")
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map(Duration::from_secs_f64)
}

/// Classifies a non-2xx response. The body is parsed leniently: a proxy may answer with HTML.
fn http_error(status: u16, body: &str) -> Error {
    #[derive(Deserialize)]
    struct Body {
        error: Inner,
    }
    #[derive(Deserialize)]
    struct Inner {
        #[serde(rename = "type")]
        kind: Option<String>,
        message: Option<String>,
        details: Option<Value>,
    }
    let parsed = serde_json::from_str::<Body>(body).ok().map(|b| b.error);
    let api_type = parsed
        .as_ref()
        .and_then(|e| e.kind.clone())
        .unwrap_or_default();
    let api_message = parsed
        .as_ref()
        .and_then(|e| e.message.clone())
        .unwrap_or_else(|| {
            let snippet: String = body.chars().take(200).collect();
            if snippet.trim().is_empty() {
                "no details".into()
            } else {
                snippet.trim().to_owned()
            }
        });
    let spend_limit = parsed
        .as_ref()
        .and_then(|e| e.details.as_ref())
        .and_then(|d| d.get("error_code"))
        .and_then(Value::as_str)
        == Some("enforced_spend_limit_reached");
    let lower = api_message.to_ascii_lowercase();
    let kind = match status {
        401 | 403 => ErrorKind::Authentication,
        429 if spend_limit => ErrorKind::QuotaExceeded,
        429 => ErrorKind::RateLimited,
        529 => ErrorKind::Overloaded,
        408 | 500..=599 => ErrorKind::Server,
        400 | 413
            if lower.contains("prompt is too long")
                || lower.contains("context window")
                || lower.contains("too many tokens") =>
        {
            ErrorKind::ContextLength
        }
        _ => ErrorKind::InvalidRequest,
    };
    let what = if api_type.is_empty() {
        String::new()
    } else {
        format!(" {api_type}")
    };
    let mut error = Error::new(
        kind,
        format!("Anthropic API error {status}{what}: {api_message}"),
    );
    error.status = Some(status);
    error
}

fn thinking_budget(effort: ReasoningEffort, max_tokens: u32) -> Option<u32> {
    let wanted = match effort {
        ReasoningEffort::Low => 1024,
        ReasoningEffort::Medium => 8192,
        ReasoningEffort::High => 24_576,
    };
    // The API wants 1024 <= budget < max_tokens.
    let budget = wanted.min(max_tokens.saturating_sub(1024));
    (budget >= 1024).then_some(budget)
}

/// The JSON body of a streaming Messages request.
pub fn request_body(request: &Request<'_>) -> Value {
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(
            |t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}),
        )
        .collect();
    if let Some(last) = tools.last_mut() {
        last["cache_control"] = json!({"type": "ephemeral"});
    }
    let mut messages = messages(request.history);
    if let Some(block) = messages
        .iter_mut()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_array_mut())
        .and_then(|c| c.last_mut())
    {
        block["cache_control"] = json!({"type": "ephemeral"});
    }
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_output_tokens,
        "stream": true,
        "system": [{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
    });
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
        body["tool_choice"] = json!({"type": "auto"});
    }
    if let Some(budget) = request
        .reasoning_effort
        .and_then(|e| thinking_budget(e, request.max_output_tokens))
    {
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
    }
    body
}

fn messages(history: &[&Turn]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut push = |role: &str, blocks: Vec<Value>| {
        if blocks.is_empty() {
            return;
        }
        match out.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(content) = last["content"].as_array_mut() {
                    content.extend(blocks);
                }
            }
            _ => out.push(json!({"role": role, "content": blocks})),
        }
    };
    for turn in history {
        match turn {
            Turn::User { text, .. } | Turn::Steering { text, .. } | Turn::System { text } => {
                push("user", vec![json!({"type": "text", "text": text})]);
            }
            Turn::Assistant {
                text,
                reasoning,
                tool_calls,
                ..
            } => {
                let mut blocks: Vec<Value> = reasoning
                    .iter()
                    .map(|r| match &r.redacted {
                        Some(data) => json!({"type": "redacted_thinking", "data": data}),
                        None => json!({"type": "thinking", "thinking": r.text, "signature": r.signature.clone().unwrap_or_default()}),
                    })
                    .collect();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    let input = if call.arguments.is_object() {
                        call.arguments.clone()
                    } else {
                        json!({})
                    };
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
                }
                push("assistant", blocks);
            }
            Turn::ToolResults { results } => {
                let blocks = results
                    .iter()
                    .map(|r| json!({"type": "tool_result", "tool_use_id": r.call_id, "content": r.content, "is_error": r.is_error}))
                    .collect();
                push("user", blocks);
            }
        }
    }
    out
}

#[derive(Deserialize, Default)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Usage values are cumulative: a present field replaces the earlier value.
    fn merge_into(&self, usage: &mut Usage) {
        let set = |slot: &mut u64, v: Option<u64>| {
            if let Some(v) = v {
                *slot = v;
            }
        };
        set(&mut usage.input_tokens, self.input_tokens);
        set(&mut usage.output_tokens, self.output_tokens);
        set(
            &mut usage.cache_write_tokens,
            self.cache_creation_input_tokens,
        );
        set(&mut usage.cache_read_tokens, self.cache_read_input_tokens);
    }
}

enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    Thinking(ReasoningBlock),
    /// A block type this daemon does not use (server tools and the like): skipped.
    Other,
}

/// Decodes a Messages SSE stream.
pub async fn decode_stream<S, E>(
    body: S,
    on_delta: &mut (dyn FnMut(Delta) + Send),
) -> Result<Response, Error>
where
    S: Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    // A final event not followed by a blank line is still an event (recorded streams end so).
    let mut events = std::pin::pin!(
        body.chain(futures::stream::iter([Ok(bytes::Bytes::from_static(
            b"\n\n"
        ))]))
        .eventsource()
    );
    let mut response = Response {
        text: String::new(),
        reasoning: Vec::new(),
        tool_calls: Vec::new(),
        usage: Usage::default(),
        stop_reason: None,
        response_id: None,
        model: None,
    };
    let mut blocks: Vec<(u64, Block)> = Vec::new();
    let mut text_started = false;
    let mut stopped = false;
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| {
            Error::new(ErrorKind::Stream, format!("the response stream broke: {e}"))
        })?;
        let data: Value = match serde_json::from_str(&event.data) {
            Ok(v) => v,
            Err(e) => {
                return Err(Error::new(
                    ErrorKind::Stream,
                    format!("malformed stream event {:?}: {e}", event.event),
                ));
            }
        };
        let index = data["index"].as_u64().unwrap_or(0);
        match data["type"].as_str().unwrap_or_default() {
            "message_start" => {
                let message = &data["message"];
                response.response_id = message["id"].as_str().map(str::to_owned);
                response.model = message["model"].as_str().map(str::to_owned);
                if let Ok(u) = WireUsage::deserialize(&message["usage"]) {
                    u.merge_into(&mut response.usage);
                }
            }
            "content_block_start" => {
                let cb = &data["content_block"];
                let new = match cb["type"].as_str().unwrap_or_default() {
                    "text" => {
                        if !text_started {
                            text_started = true;
                            on_delta(Delta::TextStart);
                        }
                        Block::Text
                    }
                    "tool_use" => Block::ToolUse {
                        id: cb["id"].as_str().unwrap_or_default().to_owned(),
                        name: cb["name"].as_str().unwrap_or_default().to_owned(),
                        json: String::new(),
                    },
                    "thinking" => Block::Thinking(ReasoningBlock {
                        text: cb["thinking"].as_str().unwrap_or_default().to_owned(),
                        signature: cb["signature"]
                            .as_str()
                            .filter(|s| !s.is_empty())
                            .map(str::to_owned),
                        redacted: None,
                    }),
                    "redacted_thinking" => Block::Thinking(ReasoningBlock {
                        text: String::new(),
                        signature: None,
                        redacted: cb["data"].as_str().map(str::to_owned),
                    }),
                    _ => Block::Other,
                };
                blocks.push((index, new));
            }
            "content_block_delta" => {
                let delta = &data["delta"];
                let block = blocks
                    .iter_mut()
                    .rev()
                    .find(|(i, _)| *i == index)
                    .map(|(_, b)| b);
                match (block, delta["type"].as_str().unwrap_or_default()) {
                    (Some(Block::Text), "text_delta") => {
                        let text = delta["text"].as_str().unwrap_or_default();
                        if !text.is_empty() {
                            response.text.push_str(text);
                            on_delta(Delta::Text(text.to_owned()));
                        }
                    }
                    (Some(Block::ToolUse { json, .. }), "input_json_delta") => {
                        json.push_str(delta["partial_json"].as_str().unwrap_or_default());
                    }
                    (Some(Block::Thinking(r)), "thinking_delta") => {
                        let text = delta["thinking"].as_str().unwrap_or_default();
                        if !text.is_empty() {
                            r.text.push_str(text);
                            on_delta(Delta::Reasoning(text.to_owned()));
                        }
                    }
                    (Some(Block::Thinking(r)), "signature_delta") => {
                        r.signature = delta["signature"].as_str().map(str::to_owned);
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    response.stop_reason = Some(stop_reason(reason));
                }
                if let Ok(u) = WireUsage::deserialize(&data["usage"]) {
                    u.merge_into(&mut response.usage);
                }
            }
            "message_stop" => {
                stopped = true;
                break;
            }
            "error" => {
                let kind = match data["error"]["type"].as_str().unwrap_or_default() {
                    "overloaded_error" => ErrorKind::Overloaded,
                    "rate_limit_error" => ErrorKind::RateLimited,
                    "authentication_error" | "permission_error" => ErrorKind::Authentication,
                    "api_error" => ErrorKind::Server,
                    _ => ErrorKind::Stream,
                };
                let message = data["error"]["message"].as_str().unwrap_or("unknown error");
                let mut e = Error::new(kind, format!("Anthropic stream error: {message}"));
                // Deltas may already have reached clients; never retry this silently.
                if e.is_retryable() {
                    e.kind = ErrorKind::Stream;
                }
                return Err(e);
            }
            // ping and event types added later by the API.
            _ => {}
        }
    }
    if !stopped {
        return Err(Error::new(
            ErrorKind::Stream,
            "the response stream ended before message_stop (truncated response)",
        ));
    }
    for (_, block) in blocks {
        match block {
            Block::ToolUse { id, name, json } => {
                let arguments = if json.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(&json).unwrap_or(Value::String(json))
                };
                response.tool_calls.push(ToolCall {
                    id: ToolCallId(id),
                    name,
                    arguments,
                });
            }
            Block::Thinking(r) => response.reasoning.push(r),
            Block::Text | Block::Other => {}
        }
    }
    Ok(response)
}

fn stop_reason(s: &str) -> StopReason {
    match s {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::Refusal,
        "model_context_window_exceeded" => StopReason::ContextWindowExceeded,
        other => StopReason::Other(other.to_owned()),
    }
}

#[cfg(test)]
mod tests;
