//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`, `stream: true`):
//! OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter, DeepSeek, Groq.
//!
//! Servers differ most in how tool calls stream, so `ToolCalls` accumulates fragments by
//! `index` and survives each known quirk: indexes that start at 1 or are reused for a new id,
//! ids and names repeated on every fragment, empty-string ids and names, whole arguments in one
//! fragment, and missing arguments (meaning `{}`). Whether the turn called tools is decided from
//! the accumulated calls, never from `finish_reason` alone.

use super::http::{self, Auth, Endpoint, ErrorBody, OnEndpoint, SharedHttp};
use super::{
    ByteStream, Delta, Deltas, Error, ErrorKind, Limits, Provider, Request, Response, StopReason,
};
use crate::config::ApiKey;
use agentd_proto::{ProviderKind, ReasoningEffort, ToolCall, ToolCallId, Turn, Usage};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};

/// A client for one OpenAI-compatible endpoint.
pub(crate) struct OpenAiChat {
    endpoint: Endpoint,
    /// OpenAI's own API, which takes `prompt_cache_key`; a compatible server may refuse it.
    openai: bool,
}

impl OpenAiChat {
    /// A client for `base_url` (including `/v1`), sending `api_key` as a bearer token if set.
    pub(crate) fn new(http: SharedHttp, base_url: &str, api_key: Option<ApiKey>) -> Self {
        let openai =
            reqwest::Url::parse(base_url).is_ok_and(|url| url.host_str() == Some("api.openai.com"));
        Self {
            endpoint: Endpoint::new(http, base_url, api_key, Auth::Bearer),
            openai,
        }
    }
}

impl OnEndpoint for OpenAiChat {
    fn endpoint_mut(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }
}

#[async_trait]
impl Provider for OpenAiChat {
    fn limits(&self) -> Limits {
        self.endpoint.limits()
    }

    fn kind(&self) -> ProviderKind {
        ProviderKind::OpenaiChat
    }

    fn takes_input_images(&self) -> bool {
        self.endpoint.images()
    }

    /// Many compatible servers run text-only models, and the `tool` role takes only text.
    fn accepts_images(&self) -> bool {
        false
    }

    async fn open(&self, request: &Request<'_>) -> Result<ByteStream, Error> {
        let http = self
            .endpoint
            .post("/chat/completions")
            .json(&request_body(request, self.openai));
        http::send(
            http,
            "OpenAI-compatible",
            parse_error,
            self.endpoint.limits(),
        )
        .await
    }

    async fn decode(
        &self,
        body: ByteStream,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Response, Error> {
        decode_stream(body, self.endpoint.limits().max_line_bytes, on_delta).await
    }
}

/// `{"error":{"message","type","param","code"}}`; llama.cpp puts the HTTP status in `code`.
pub(super) fn parse_error(body: &str) -> ErrorBody {
    let v: Value = serde_json::from_str(body).unwrap_or_default();
    let e = &v["error"];
    let kind = e["type"].as_str().or(e["code"].as_str()).map(str::to_owned);
    let quota = e["code"] == "insufficient_quota" || e["type"] == "insufficient_quota";
    ErrorBody {
        kind,
        message: e["message"].as_str().map(str::to_owned),
        quota,
        retry_after: None,
    }
}

fn effort(e: ReasoningEffort) -> &'static str {
    match e {
        ReasoningEffort::Low => "low",
        ReasoningEffort::Medium => "medium",
        ReasoningEffort::High => "high",
    }
}

/// The JSON body of a streaming request; with `openai`, for OpenAI's own API.
pub(crate) fn request_body(request: &Request<'_>, openai: bool) -> Value {
    let mut messages = vec![json!({"role": "system", "content": request.system})];
    messages.extend(history(request.history));
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
        "max_tokens": request.max_output_tokens,
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
        body["tool_choice"] = json!("auto");
    }
    if let Some(e) = request.reasoning_effort {
        body["reasoning_effort"] = json!(effort(e));
    }
    if let (true, Some(key)) = (openai, request.cache_key) {
        body["prompt_cache_key"] = json!(key);
    }
    body
}

/// Arguments as the JSON string the API carries: the model's own text when it was not JSON.
pub(super) fn arguments_string(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

fn history(turns: &[&Turn]) -> Vec<Value> {
    let mut out = Vec::new();
    for turn in turns {
        match turn {
            Turn::User { images, .. } | Turn::Steering { images, .. } if !images.is_empty() => {
                let text = turn.model_text();
                let mut content: Vec<Value> = images
                    .iter()
                    .map(|i| json!({"type": "image_url", "image_url": {"url": super::data_url(i)}}))
                    .collect();
                if !text.is_empty() {
                    content.insert(0, json!({"type": "text", "text": text}));
                }
                out.push(json!({"role": "user", "content": content}));
            }
            Turn::User { .. }
            | Turn::Steering { .. }
            | Turn::System { .. }
            | Turn::Compaction { .. } => {
                out.push(json!({"role": "user", "content": turn.model_text()}));
            }
            Turn::Assistant {
                text, tool_calls, ..
            } => {
                // Always a string: llama-cpp-python answers 500 to `"content": null` (issue 11),
                // and every server tried accepts `""` beside tool calls.
                let mut message = json!({"role": "assistant", "content": text});
                if !tool_calls.is_empty() {
                    message["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments_string(&c.arguments)}}))
                        .collect();
                }
                out.push(message);
            }
            Turn::ToolResults { results } => {
                out.extend(results.iter().map(
                    |r| json!({"role": "tool", "tool_call_id": r.call_id, "content": r.content}),
                ));
            }
        }
    }
    out
}

#[derive(Default)]
struct PartialCall {
    index: u64,
    id: String,
    name: String,
    arguments: String,
}

/// Tool-call fragments, accumulated in arrival order.
#[derive(Default)]
pub(super) struct ToolCalls {
    calls: Vec<PartialCall>,
}

impl ToolCalls {
    /// Applies one `{index, id?, function: {name?, arguments?}}` fragment.
    pub(super) fn push(&mut self, fragment: &Value) {
        let index = fragment["index"].as_u64().unwrap_or(0);
        let id = fragment["id"].as_str().filter(|s| !s.is_empty());
        let function = &fragment["function"];
        let name = function["name"].as_str().filter(|s| !s.is_empty());
        let current = self.calls.iter().rposition(|c| c.index == index);
        // A different id at a known index is a new call (lmdeploy/sglang reuse index 0).
        let slot = match (current, id) {
            (Some(i), Some(id)) if !self.calls[i].id.is_empty() && self.calls[i].id != id => None,
            (found, _) => found,
        };
        let call = match slot {
            Some(i) => &mut self.calls[i],
            None => {
                self.calls.push(PartialCall {
                    index,
                    ..Default::default()
                });
                let last = self.calls.len() - 1;
                &mut self.calls[last]
            }
        };
        if let Some(id) = id {
            call.id = id.to_owned();
        }
        // Names arrive once, or repeated whole on every fragment; never append them.
        if let Some(name) = name {
            call.name = name.to_owned();
        }
        if let Some(args) = function["arguments"].as_str() {
            call.arguments.push_str(args);
        } else if function["arguments"].is_object() {
            call.arguments.push_str(&function["arguments"].to_string());
        }
    }

    /// The finished calls; no arguments means `{}`, unparseable ones stay raw text.
    pub(super) fn finish(self) -> Vec<ToolCall> {
        self.calls
            .into_iter()
            .enumerate()
            .map(|(n, c)| ToolCall {
                id: ToolCallId(if c.id.is_empty() {
                    format!("call_{n}")
                } else {
                    c.id
                }),
                name: c.name,
                arguments: if c.arguments.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(&c.arguments).unwrap_or(Value::String(c.arguments))
                },
                signature: None,
            })
            .collect()
    }
}

fn usage(u: &Value) -> Option<Usage> {
    let prompt = u["prompt_tokens"].as_u64()?;
    let cached = u["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .or(u["prompt_cache_hit_tokens"].as_u64())
        .unwrap_or(0);
    Some(Usage {
        input_tokens: prompt.saturating_sub(cached),
        output_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
        cache_read_tokens: cached,
        cache_write_tokens: 0,
        reasoning_tokens: u["completion_tokens_details"]["reasoning_tokens"]
            .as_u64()
            .unwrap_or(0),
        cost_usd: None,
        unreported_calls: 0,
    })
}

/// Decodes a Chat Completions SSE stream. The stream ends at `data: [DONE]`; a server that
/// omits it (some forks do) is accepted once a `finish_reason` has arrived. Any other EOF is a
/// truncated response, and a `[DONE]` without any `finish_reason` (llama-cpp-python sent one
/// after only `{"role":"assistant"}`) an incomplete one: neither is ever a completed answer.
async fn decode_stream(
    body: ByteStream,
    max_line: usize,
    on_delta: &mut (dyn FnMut(Delta) + Send),
) -> Result<Response, Error> {
    let mut events = std::pin::pin!(http::sse(body, max_line));
    let mut response = Response::default();
    let mut calls = ToolCalls::default();
    let mut reasoning = String::new();
    let mut deltas = Deltas::new(on_delta);
    let mut done = false;
    let mut refused = false;
    while let Some(event) = events.next().await {
        let event = event?;
        if event.data.trim() == "[DONE]" {
            done = true;
            break;
        }
        let chunk = http::json(&event)?;
        if let Some(message) = chunk["error"]["message"]
            .as_str()
            .or(chunk["error"].as_str())
        {
            return Err(Error::new(
                ErrorKind::Stream,
                format!("OpenAI-compatible stream error: {message}"),
            ));
        }
        if response.response_id.is_none() {
            response.response_id = chunk["id"].as_str().map(str::to_owned);
        }
        if response.model.is_none() {
            response.model = chunk["model"].as_str().map(str::to_owned);
        }
        if let Some(u) = usage(&chunk["usage"]).or_else(|| usage(&chunk["x_groq"]["usage"])) {
            response.usage = Some(u);
        }
        let Some(choice) = chunk["choices"].as_array().and_then(|c| c.first()) else {
            continue;
        };
        let delta = &choice["delta"];
        // A refusal comes in its own field, and is the answer's text.
        let refusal = delta["refusal"].as_str().filter(|t| !t.is_empty());
        refused |= refusal.is_some();
        for text in [delta["content"].as_str(), refusal].into_iter().flatten() {
            response.text.push_str(text);
            deltas.text(text);
        }
        if let Some(r) = delta["reasoning_content"]
            .as_str()
            .or(delta["reasoning"].as_str())
            .filter(|r| !r.is_empty())
        {
            reasoning.push_str(r);
            deltas.reasoning(r);
        }
        for fragment in delta["tool_calls"].as_array().into_iter().flatten() {
            calls.push(fragment);
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            response.stop_reason = Some(match reason {
                "stop" => StopReason::EndTurn,
                "tool_calls" | "function_call" => StopReason::ToolUse,
                "length" => StopReason::MaxTokens,
                "content_filter" => StopReason::Refusal,
                other => StopReason::Other(other.to_owned()),
            });
        }
    }
    if refused && response.stop_reason.is_some() {
        response.stop_reason = Some(StopReason::Refusal);
    }
    if response.stop_reason.is_none() {
        return Err(if done {
            http::no_stop_reason("finish_reason")
        } else {
            http::truncated("[DONE]")
        });
    }
    response.tool_calls = calls.finish();
    if !reasoning.is_empty() {
        response.reasoning.push(agentd_proto::ReasoningBlock {
            id: None,
            text: reasoning,
            signature: None,
            redacted: None,
        });
    }
    Ok(response)
}

#[cfg(test)]
mod tests;
