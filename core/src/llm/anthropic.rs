//! Anthropic Messages API (`POST /v1/messages`, `stream: true`).
//!
//! The request body is built in `request.rs`; `decode_stream` assembles the SSE stream: text and thinking deltas as they arrive,
//! `tool_use` input from `input_json_delta` fragments (none means `{}`), cumulative usage from
//! `message_delta`, and an error for a mid-stream `error` event or an EOF before
//! `message_stop`.

mod request;

use super::http::{self, Auth, Endpoint, ErrorBody, OnEndpoint, SharedHttp};
use super::{
    ByteStream, Delta, Deltas, Error, ErrorKind, Limits, Provider, Request, Response, StopReason,
};
use crate::config::ApiKey;
use agentd_proto::{ProviderKind, ReasoningBlock, ToolCall, ToolCallId, Usage};
use async_trait::async_trait;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

const API_VERSION: &str = "2023-06-01";

/// A client for one Anthropic-compatible endpoint.
pub(crate) struct Anthropic {
    endpoint: Endpoint,
    /// Joined into the `anthropic-beta` header when not empty.
    betas: String,
}

impl Anthropic {
    /// A client for `base_url` (without `/v1`), authenticating with `api_key` if set.
    pub(crate) fn new(http: SharedHttp, base_url: &str, api_key: Option<ApiKey>) -> Self {
        Self {
            endpoint: Endpoint::new(http, base_url, api_key, Auth::Header("x-api-key")),
            betas: String::new(),
        }
    }

    /// Sends these beta flags (for example `interleaved-thinking-2025-05-14`) with every request.
    pub(crate) fn with_betas(mut self, betas: &[String]) -> Self {
        self.betas = betas.join(",");
        self
    }
}

impl OnEndpoint for Anthropic {
    fn endpoint_mut(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }
}

#[async_trait]
impl Provider for Anthropic {
    fn limits(&self) -> Limits {
        self.endpoint.limits()
    }

    fn kind(&self) -> ProviderKind {
        ProviderKind::Anthropic
    }

    fn takes_input_images(&self) -> bool {
        self.endpoint.images()
    }

    async fn open(&self, request: &Request<'_>) -> Result<ByteStream, Error> {
        let mut http = self
            .endpoint
            .post("/v1/messages")
            .header("anthropic-version", API_VERSION)
            .header("accept", "text/event-stream")
            .json(&request::body(request));
        if !self.betas.is_empty() {
            http = http.header("anthropic-beta", &self.betas);
        }
        http::send(http, "Anthropic", parse_error, self.endpoint.limits()).await
    }

    async fn decode(
        &self,
        body: ByteStream,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Response, Error> {
        decode_stream(body, self.endpoint.limits().max_line_bytes, on_delta).await
    }
}

/// Reads `{"type":"error","error":{"type","message","details"?}}`, leniently: a proxy may
/// answer with HTML.
fn parse_error(body: &str) -> ErrorBody {
    let v: Value = serde_json::from_str(body).unwrap_or_default();
    let e = &v["error"];
    ErrorBody {
        kind: e["type"].as_str().map(str::to_owned),
        message: e["message"].as_str().map(str::to_owned),
        // A spend cap, not a rate limit: retrying will not help.
        quota: e["details"]["error_code"] == "enforced_spend_limit_reached",
        retry_after: None,
    }
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
async fn decode_stream(
    body: ByteStream,
    max_line: usize,
    on_delta: &mut (dyn FnMut(Delta) + Send),
) -> Result<Response, Error> {
    let mut events = std::pin::pin!(http::sse(body, max_line));
    let mut response = Response::default();
    let mut blocks: Vec<(u64, Block)> = Vec::new();
    let mut deltas = Deltas::new(on_delta);
    let mut stopped = false;
    while let Some(event) = events.next().await {
        let data = http::json(&event?)?;
        let index = data["index"].as_u64().unwrap_or(0);
        match data["type"].as_str().unwrap_or_default() {
            "message_start" => {
                let message = &data["message"];
                response.response_id = message["id"].as_str().map(str::to_owned);
                response.model = message["model"].as_str().map(str::to_owned);
                if let Ok(u) = WireUsage::deserialize(&message["usage"]) {
                    u.merge_into(response.usage.get_or_insert_with(Usage::default));
                }
            }
            "content_block_start" => {
                let cb = &data["content_block"];
                let new = match cb["type"].as_str().unwrap_or_default() {
                    "text" => Block::Text,
                    "tool_use" => Block::ToolUse {
                        id: cb["id"].as_str().unwrap_or_default().to_owned(),
                        name: cb["name"].as_str().unwrap_or_default().to_owned(),
                        json: String::new(),
                    },
                    "thinking" => Block::Thinking(ReasoningBlock {
                        id: None,
                        text: cb["thinking"].as_str().unwrap_or_default().to_owned(),
                        signature: cb["signature"]
                            .as_str()
                            .filter(|s| !s.is_empty())
                            .map(str::to_owned),
                        redacted: None,
                    }),
                    "redacted_thinking" => Block::Thinking(ReasoningBlock {
                        id: None,
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
                        response.text.push_str(text);
                        deltas.text(text);
                    }
                    (Some(Block::ToolUse { json, .. }), "input_json_delta") => {
                        json.push_str(delta["partial_json"].as_str().unwrap_or_default());
                    }
                    (Some(Block::Thinking(r)), "thinking_delta") => {
                        let text = delta["thinking"].as_str().unwrap_or_default();
                        r.text.push_str(text);
                        deltas.reasoning(text);
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
                    u.merge_into(response.usage.get_or_insert_with(Usage::default));
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
                // The kind stays: `llm::complete` retries an overloaded stream only while none
                // of it has reached a client.
                return Err(Error::new(
                    kind,
                    format!("Anthropic stream error: {message}"),
                ));
            }
            // ping and event types added later by the API.
            _ => {}
        }
    }
    if !stopped {
        return Err(http::truncated("message_stop"));
    }
    if response.stop_reason.is_none() {
        return Err(http::no_stop_reason("stop_reason"));
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
                    signature: None,
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
