//! OpenAI Responses (`POST {base}/responses`, `stream: true`).
//!
//! Requests are stateless (`store: false`): every call sends the whole conversation, with the
//! reasoning items of earlier turns and their `encrypted_content` (requested through
//! `include`), so no state lives on OpenAI's side. Tool results are `function_call_output`
//! items keyed by `call_id`. The response is rebuilt from the completed output items (servers
//! such as LM Studio skip the argument deltas); deltas only feed the live events.

use super::http::{self, Auth, Endpoint, OnEndpoint, SharedHttp};
use super::openai_chat::{arguments_string, parse_error};
use super::{
    ByteStream, Delta, Deltas, Error, ErrorKind, Limits, Provider, Request, Response, StopReason,
};
use crate::config::ApiKey;
use agentd_proto::{
    ImageData, ProviderKind, ReasoningBlock, ReasoningEffort, ToolCall, ToolCallId, Turn, Usage,
};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// A client for the Responses API.
pub(crate) struct OpenAi {
    endpoint: Endpoint,
}

impl OpenAi {
    /// A client for `base_url` (including `/v1`).
    pub(crate) fn new(http: SharedHttp, base_url: &str, api_key: Option<ApiKey>) -> Self {
        Self {
            endpoint: Endpoint::new(http, base_url, api_key, Auth::Bearer),
        }
    }
}

impl OnEndpoint for OpenAi {
    fn endpoint_mut(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }
}

#[async_trait]
impl Provider for OpenAi {
    fn limits(&self) -> Limits {
        self.endpoint.limits()
    }

    fn kind(&self) -> ProviderKind {
        ProviderKind::Openai
    }

    fn takes_input_images(&self) -> bool {
        self.endpoint.images()
    }

    async fn open(&self, request: &Request<'_>) -> Result<ByteStream, Error> {
        let http = self
            .endpoint
            .post("/responses")
            .json(&request_body(request));
        http::send(http, "OpenAI", parse_error, self.endpoint.limits()).await
    }

    async fn decode(
        &self,
        body: ByteStream,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Response, Error> {
        decode_stream(body, self.endpoint.limits().max_line_bytes, on_delta).await
    }
}

/// The JSON body of a streaming, stateless request.
pub(crate) fn request_body(request: &Request<'_>) -> Value {
    let mut body = json!({
        "model": request.model,
        "instructions": request.system,
        "input": input(request.history),
        "stream": true,
        "store": false,
        "include": ["reasoning.encrypted_content"],
        "max_output_tokens": request.max_output_tokens,
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}))
            .collect();
        body["tool_choice"] = json!("auto");
        body["parallel_tool_calls"] = json!(true);
    }
    if let Some(key) = request.cache_key {
        body["prompt_cache_key"] = json!(key);
    }
    if let Some(e) = request.reasoning_effort {
        let effort = match e {
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        };
        body["reasoning"] = json!({"effort": effort, "summary": "auto"});
    }
    body
}

/// An `input_image` part, in a user message or a tool's output.
fn image(i: &ImageData) -> Value {
    json!({"type": "input_image", "image_url": super::data_url(i)})
}

fn input(turns: &[&Turn]) -> Vec<Value> {
    let mut items = Vec::new();
    for turn in turns {
        match turn {
            Turn::User { images, .. } | Turn::Steering { images, .. } => {
                let text = turn.model_text();
                let mut content: Vec<Value> = images.iter().map(image).collect();
                if !text.is_empty() || content.is_empty() {
                    content.insert(0, json!({"type": "input_text", "text": text}));
                }
                items.push(json!({"role": "user", "content": content}));
            }
            Turn::System { text } | Turn::Compaction { summary: text, .. } => {
                items.push(
                    json!({"role": "user", "content": [{"type": "input_text", "text": text}]}),
                );
            }
            Turn::Assistant {
                text,
                reasoning,
                tool_calls,
                api,
                ..
            } => {
                // Reasoning items only make sense to the API that produced them.
                if *api == Some(ProviderKind::Openai) {
                    for r in reasoning.iter().filter(|r| r.redacted.is_some()) {
                        let summary: Vec<Value> = if r.text.is_empty() {
                            vec![]
                        } else {
                            vec![json!({"type": "summary_text", "text": r.text})]
                        };
                        let mut item = json!({"type": "reasoning", "summary": summary, "encrypted_content": r.redacted});
                        if let Some(id) = &r.id {
                            item["id"] = json!(id);
                        }
                        items.push(item);
                    }
                }
                if !text.is_empty() {
                    items.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}));
                }
                for c in tool_calls {
                    items.push(json!({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": arguments_string(&c.arguments)}));
                }
            }
            Turn::ToolResults { results } => {
                items.extend(results.iter().map(|r| {
                    let output = if r.images.is_empty() {
                        json!(r.content)
                    } else {
                        let mut parts = vec![json!({"type": "input_text", "text": r.content})];
                        parts.extend(r.images.iter().map(image));
                        Value::Array(parts)
                    };
                    json!({"type": "function_call_output", "call_id": r.call_id, "output": output})
                }));
            }
        }
    }
    items
}

fn usage(u: &Value) -> Option<Usage> {
    let input = u["input_tokens"].as_u64()?;
    let cached = u["input_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    Some(Usage {
        input_tokens: input.saturating_sub(cached),
        output_tokens: u["output_tokens"].as_u64().unwrap_or(0),
        cache_read_tokens: cached,
        cache_write_tokens: 0,
        reasoning_tokens: u["output_tokens_details"]["reasoning_tokens"]
            .as_u64()
            .unwrap_or(0),
        cost_usd: None,
        unreported_calls: 0,
    })
}

/// The error an `error` event or a failed response carries: nested
/// (`{"error":{"type","code","message"}}`, as recorded) or flat (`{"code","message"}`).
fn stream_error(v: &Value) -> Error {
    let e = if v["error"].is_object() {
        &v["error"]
    } else {
        v
    };
    let code = e["code"].as_str().or(e["type"].as_str()).unwrap_or("error");
    let message = e["message"].as_str().unwrap_or("unknown error");
    let kind = if code == "insufficient_quota" {
        ErrorKind::QuotaExceeded
    } else {
        ErrorKind::Stream
    };
    Error::new(kind, format!("OpenAI stream error {code}: {message}"))
}

/// Builds the response from the output items, in output order.
fn collect(items: &BTreeMap<u64, Value>, response: &mut Response) {
    response.text.clear();
    for item in items.values() {
        match item["type"].as_str().unwrap_or_default() {
            "message" => {
                if !response.text.is_empty() {
                    response.text.push_str("\n\n");
                }
                for part in item["content"].as_array().into_iter().flatten() {
                    if part["type"] == "refusal" {
                        response
                            .text
                            .push_str(part["refusal"].as_str().unwrap_or_default());
                        response.stop_reason = Some(StopReason::Refusal);
                    } else if let Some(text) = part["text"].as_str() {
                        response.text.push_str(text);
                    }
                }
            }
            "function_call" => {
                let raw = item["arguments"].as_str().unwrap_or_default();
                response.tool_calls.push(ToolCall {
                    id: ToolCallId(item["call_id"].as_str().unwrap_or_default().to_owned()),
                    name: item["name"].as_str().unwrap_or_default().to_owned(),
                    arguments: if raw.trim().is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(raw).unwrap_or(Value::String(raw.to_owned()))
                    },
                    signature: None,
                });
            }
            "reasoning" => {
                let summary: Vec<&str> = item["summary"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s["text"].as_str())
                    .collect();
                let content: Vec<&str> = item["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s["text"].as_str())
                    .collect();
                let text = if summary.is_empty() {
                    content.join("\n")
                } else {
                    summary.join("\n")
                };
                response.reasoning.push(ReasoningBlock {
                    id: item["id"].as_str().map(str::to_owned),
                    text,
                    signature: None,
                    redacted: item["encrypted_content"].as_str().map(str::to_owned),
                });
            }
            // Built-in tool items (web search and the like) are the server's own business.
            _ => {}
        }
    }
}

/// Decodes a Responses SSE stream up to its terminal event (`response.completed`,
/// `response.incomplete` or `response.failed`); there is no `[DONE]`.
async fn decode_stream(
    body: ByteStream,
    max_line: usize,
    on_delta: &mut (dyn FnMut(Delta) + Send),
) -> Result<Response, Error> {
    let mut events = std::pin::pin!(http::sse(body, max_line));
    let mut response = Response::default();
    let mut items: BTreeMap<u64, Value> = BTreeMap::new();
    let mut deltas = Deltas::new(on_delta);
    let mut terminal = false;
    while let Some(event) = events.next().await {
        let data = http::json(&event?)?;
        let index = data["output_index"].as_u64().unwrap_or(0);
        match data["type"].as_str().unwrap_or_default() {
            "response.created" | "response.in_progress" => {
                response.response_id = data["response"]["id"].as_str().map(str::to_owned);
                response.model = data["response"]["model"].as_str().map(str::to_owned);
            }
            "response.output_item.added"
                if data["item"]["type"] == "message" && deltas.text_started() =>
            {
                // Keeps the streamed text equal to the final text when a response has two messages.
                deltas.text("\n\n");
            }
            // A refusal is the answer's text, in a part of its own.
            "response.output_text.delta" | "response.refusal.delta" => {
                deltas.text(data["delta"].as_str().unwrap_or_default())
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                deltas.reasoning(data["delta"].as_str().unwrap_or_default());
            }
            "response.output_item.done" => {
                items.insert(index, data["item"].clone());
            }
            kind @ ("response.completed" | "response.incomplete") => {
                let r = &data["response"];
                if let Some(output) = r["output"].as_array().filter(|o| !o.is_empty()) {
                    items = output
                        .iter()
                        .cloned()
                        .enumerate()
                        .map(|(i, item)| (i as u64, item))
                        .collect();
                }
                if let Some(u) = usage(&r["usage"]) {
                    response.usage = Some(u);
                }
                response.response_id = r["id"].as_str().map(str::to_owned).or(response.response_id);
                response.stop_reason = Some(if kind == "response.completed" {
                    StopReason::EndTurn
                } else {
                    match r["incomplete_details"]["reason"]
                        .as_str()
                        .unwrap_or_default()
                    {
                        "max_output_tokens" => StopReason::MaxTokens,
                        "content_filter" => StopReason::Refusal,
                        other => StopReason::Other(other.to_owned()),
                    }
                });
                terminal = true;
                break;
            }
            "response.failed" => return Err(stream_error(&data["response"])),
            "error" => return Err(stream_error(&data)),
            _ => {}
        }
    }
    if !terminal {
        return Err(http::truncated("response.completed"));
    }
    collect(&items, &mut response);
    if !response.tool_calls.is_empty() && response.stop_reason == Some(StopReason::EndTurn) {
        response.stop_reason = Some(StopReason::ToolUse);
    }
    Ok(response)
}

#[cfg(test)]
mod tests;
