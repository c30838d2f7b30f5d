//! Google Gemini (`POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`).
//!
//! Each SSE event (CRLF-framed) is a whole `GenerateContentResponse`: text parts are deltas, a
//! `functionCall` arrives complete with `args` as an object (or, on Vertex AI, streamed as
//! `partialArgs`), `usageMetadata` repeats cumulatively, and `finishReason` is `STOP` even for
//! tool turns. `thoughtSignature`s are kept on the part they came with and sent back there.
//! There is no terminator: EOF after a `finishReason` is the end, EOF before one is truncation.

use super::http::{self, Auth, Endpoint, ErrorBody, OnEndpoint, SharedHttp};
use super::{
    ByteStream, Delta, Deltas, Error, ErrorKind, Limits, Provider, Request, Response, StopReason,
};
use crate::config::ApiKey;
use agentd_proto::{
    ImageData, ProviderKind, ReasoningBlock, ReasoningEffort, ToolCall, ToolCallId, Turn, Usage,
};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Map, Value, json};
use std::collections::HashMap;

/// Prefix of call ids this daemon made up for calls Gemini sent without one; they are not
/// sent back to Gemini, which pairs a `functionResponse` with its `functionCall` by name and
/// order when there is no id.
const LOCAL_ID: &str = "agentd-call-";

/// The id of the `n`th call of a response tagged `tag`. Call ids must be unique within a
/// session (clients key tool events by them, and Anthropic and OpenAI reject a history that
/// repeats one after a provider switch), but a counter in this process would start again
/// after a restart while the session's history lives on; 64 random bits per response do not
/// repeat in practice.
fn local_id(tag: u64, n: usize) -> ToolCallId {
    ToolCallId(format!("{LOCAL_ID}{tag:016x}-{n}"))
}

/// A client for the Gemini API.
pub(crate) struct Gemini {
    endpoint: Endpoint,
}

impl Gemini {
    /// A client for `base_url` (without `/v1beta`).
    pub(crate) fn new(http: SharedHttp, base_url: &str, api_key: Option<ApiKey>) -> Self {
        Self {
            endpoint: Endpoint::new(http, base_url, api_key, Auth::Header("x-goog-api-key")),
        }
    }
}

impl OnEndpoint for Gemini {
    fn endpoint_mut(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }
}

#[async_trait]
impl Provider for Gemini {
    fn limits(&self) -> Limits {
        self.endpoint.limits()
    }

    fn kind(&self) -> ProviderKind {
        ProviderKind::Gemini
    }

    fn takes_input_images(&self) -> bool {
        self.endpoint.images()
    }

    async fn open(&self, request: &Request<'_>) -> Result<ByteStream, Error> {
        let path = format!(
            "/v1beta/models/{}:streamGenerateContent?alt=sse",
            request.model
        );
        let http = self.endpoint.post(&path).json(&request_body(request));
        http::send(http, "Gemini", parse_error, self.endpoint.limits()).await
    }

    async fn decode(
        &self,
        body: ByteStream,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Response, Error> {
        decode_stream(body, self.endpoint.limits().max_line_bytes, on_delta).await
    }
}

/// `{"error":{"code","message","status","details":[{"@type":"...RetryInfo","retryDelay":"34.4s"}]}}`.
fn parse_error(body: &str) -> ErrorBody {
    let v: Value = serde_json::from_str(body).unwrap_or_default();
    let e = &v["error"];
    let retry_after = e["details"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| {
            d["@type"]
                .as_str()
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .and_then(|d| d["retryDelay"].as_str())
        .and_then(|d| d.strip_suffix('s'))
        .and_then(|d| d.trim().parse::<f64>().ok())
        .and_then(http::seconds);
    ErrorBody {
        kind: e["status"].as_str().map(str::to_owned),
        message: e["message"].as_str().map(str::to_owned),
        quota: false,
        retry_after,
    }
}

/// The JSON body of a streaming request.
pub(crate) fn request_body(request: &Request<'_>) -> Value {
    let mut generation = json!({"maxOutputTokens": request.max_output_tokens});
    if let Some(e) = request.reasoning_effort {
        let budget = match e {
            ReasoningEffort::Low => 1024,
            ReasoningEffort::Medium => 8192,
            ReasoningEffort::High => 24_576,
        };
        generation["thinkingConfig"] = json!({"thinkingBudget": budget, "includeThoughts": true});
    }
    let mut body = json!({
        "systemInstruction": {"parts": [{"text": request.system}]},
        "contents": contents(request.history),
        "generationConfig": generation,
    });
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}))
            .collect();
        body["tools"] = json!([{"functionDeclarations": declarations}]);
        body["toolConfig"] = json!({"functionCallingConfig": {"mode": "AUTO"}});
    }
    body
}

/// An inline image part, in a user turn or beside tool responses.
fn image(i: &ImageData) -> Value {
    json!({"inlineData": {"mimeType": i.media_type, "data": i.data}})
}

fn contents(turns: &[&Turn]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut push =
        |role: &str, parts: Vec<Value>| super::push_merged(&mut out, role, "parts", parts);
    for turn in turns {
        match turn {
            Turn::User { images, .. } | Turn::Steering { images, .. } => {
                let text = turn.model_text();
                let mut parts: Vec<Value> = images.iter().map(image).collect();
                if !text.is_empty() || parts.is_empty() {
                    parts.insert(0, json!({"text": text}));
                }
                push("user", parts);
            }
            Turn::System { text } | Turn::Compaction { summary: text, .. } => {
                push("user", vec![json!({"text": text})]);
            }
            Turn::Assistant {
                text,
                reasoning,
                tool_calls,
                api,
                ..
            } => {
                let own = *api == Some(ProviderKind::Gemini);
                let text_signature = reasoning
                    .iter()
                    .find_map(|r| r.signature.as_ref())
                    .filter(|_| own);
                let mut parts = Vec::new();
                if !text.is_empty() || text_signature.is_some() {
                    let mut part = json!({"text": text});
                    if let Some(sig) = text_signature {
                        part["thoughtSignature"] = json!(sig);
                    }
                    parts.push(part);
                }
                for c in tool_calls {
                    names.insert(c.id.as_str(), c.name.as_str());
                    let args = if c.arguments.is_object() {
                        c.arguments.clone()
                    } else {
                        json!({})
                    };
                    let mut call = json!({"name": c.name, "args": args});
                    if !c.id.as_str().starts_with(LOCAL_ID) {
                        call["id"] = json!(c.id);
                    }
                    let mut part = json!({"functionCall": call});
                    if let Some(sig) = c.signature.as_ref().filter(|_| own) {
                        part["thoughtSignature"] = json!(sig);
                    }
                    parts.push(part);
                }
                push("model", parts);
            }
            Turn::ToolResults { results } => {
                let mut parts: Vec<Value> = results
                    .iter()
                    .map(|r| {
                        let name = names.get(r.call_id.as_str()).copied().unwrap_or_default();
                        let response = if r.is_error {
                            json!({"error": r.content})
                        } else {
                            json!({"output": r.content})
                        };
                        let mut f = json!({"name": name, "response": response});
                        if !r.call_id.as_str().starts_with(LOCAL_ID) {
                            f["id"] = json!(r.call_id);
                        }
                        json!({"functionResponse": f})
                    })
                    .collect();
                // Images go beside the responses, as inline data.
                parts.extend(results.iter().flat_map(|r| &r.images).map(image));
                push("user", parts);
            }
        }
    }
    out
}

/// A call streamed as `partialArgs` (Vertex AI), until its empty `functionCall: {}`.
struct Streaming {
    name: String,
    args: Map<String, Value>,
    signature: Option<String>,
}

/// Applies `{"jsonPath": "$.a.b", "stringValue"|"numberValue"|"boolValue"|"nullValue": v}`.
/// String values arrive in pieces and are appended.
fn apply_partial(args: &mut Map<String, Value>, partial: &Value) {
    let Some(path) = partial["jsonPath"]
        .as_str()
        .and_then(|p| p.strip_prefix("$."))
    else {
        return;
    };
    let keys: Vec<&str> = path.split('.').collect();
    let Some((last, parents)) = keys.split_last() else {
        return;
    };
    let mut node = args;
    for key in parents {
        let entry = node.entry(key.to_string()).or_insert_with(|| json!({}));
        let Some(obj) = entry.as_object_mut() else {
            return;
        };
        node = obj;
    }
    if let Some(piece) = partial["stringValue"].as_str() {
        match node.get_mut(*last) {
            Some(Value::String(s)) => s.push_str(piece),
            _ => {
                node.insert(last.to_string(), json!(piece));
            }
        }
    } else if let Some(v) = ["numberValue", "boolValue", "nullValue"]
        .iter()
        .find_map(|k| partial.get(*k))
    {
        node.insert(
            last.to_string(),
            if partial.get("nullValue").is_some() {
                Value::Null
            } else {
                v.clone()
            },
        );
    }
}

fn usage(u: &Value) -> Option<Usage> {
    let prompt = u["promptTokenCount"].as_u64()?;
    let cached = u["cachedContentTokenCount"].as_u64().unwrap_or(0);
    let thoughts = u["thoughtsTokenCount"].as_u64().unwrap_or(0);
    Some(Usage {
        input_tokens: prompt.saturating_sub(cached),
        output_tokens: u["candidatesTokenCount"].as_u64().unwrap_or(0) + thoughts,
        cache_read_tokens: cached,
        cache_write_tokens: 0,
        reasoning_tokens: thoughts,
        cost_usd: None,
        unreported_calls: 0,
    })
}

/// Decodes a `streamGenerateContent?alt=sse` stream.
async fn decode_stream(
    body: ByteStream,
    max_line: usize,
    on_delta: &mut (dyn FnMut(Delta) + Send),
) -> Result<Response, Error> {
    let mut events = std::pin::pin!(http::sse(body, max_line));
    let mut response = Response::default();
    let mut thoughts = String::new();
    let mut text_signature: Option<String> = None;
    let mut streaming: Option<Streaming> = None;
    let mut blocked = false;
    let mut deltas = Deltas::new(on_delta);
    let tag = rand::random::<u64>();
    while let Some(event) = events.next().await {
        let chunk = http::json(&event?)?;
        if let Some(message) = chunk["error"]["message"].as_str() {
            return Err(Error::new(
                ErrorKind::Stream,
                format!("Gemini stream error: {message}"),
            ));
        }
        response.response_id = chunk["responseId"]
            .as_str()
            .map(str::to_owned)
            .or(response.response_id);
        response.model = chunk["modelVersion"]
            .as_str()
            .map(str::to_owned)
            .or(response.model);
        if let Some(u) = usage(&chunk["usageMetadata"]) {
            response.usage = Some(u);
        }
        // A prompt blocked for its content (usually without candidates) is a refusal, whatever
        // else the stream says.
        blocked |= chunk["promptFeedback"]["blockReason"].is_string();
        let Some(candidate) = chunk["candidates"].as_array().and_then(|c| c.first()) else {
            continue;
        };
        for part in candidate["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let signature = part["thoughtSignature"].as_str().map(str::to_owned);
            if let Some(call) = part.get("functionCall") {
                if let Some(name) = call["name"].as_str() {
                    if call["willContinue"] == true {
                        streaming = Some(Streaming {
                            name: name.to_owned(),
                            args: Map::new(),
                            signature,
                        });
                    } else {
                        let n = response.tool_calls.len();
                        response.tool_calls.push(ToolCall {
                            id: call["id"]
                                .as_str()
                                .map_or_else(|| local_id(tag, n), |id| ToolCallId(id.to_owned())),
                            name: name.to_owned(),
                            arguments: if call["args"].is_object() {
                                call["args"].clone()
                            } else {
                                json!({})
                            },
                            signature,
                        });
                    }
                } else if let Some(partials) = call["partialArgs"].as_array() {
                    if let Some(s) = streaming.as_mut() {
                        partials.iter().for_each(|p| apply_partial(&mut s.args, p));
                    }
                } else if let Some(s) = streaming.take() {
                    let n = response.tool_calls.len();
                    response.tool_calls.push(ToolCall {
                        id: local_id(tag, n),
                        name: s.name,
                        arguments: Value::Object(s.args),
                        signature: s.signature,
                    });
                }
                continue;
            }
            if let Some(text) = part["text"].as_str() {
                if part["thought"] == true {
                    thoughts.push_str(text);
                    deltas.reasoning(text);
                } else {
                    response.text.push_str(text);
                    deltas.text(text);
                }
                if signature.is_some() {
                    text_signature = signature;
                }
            }
        }
        if let Some(reason) = candidate["finishReason"].as_str() {
            response.stop_reason = Some(match reason {
                "STOP" if !response.tool_calls.is_empty() => StopReason::ToolUse,
                "STOP" => StopReason::EndTurn,
                "MAX_TOKENS" => StopReason::MaxTokens,
                // Content the model would not produce (safety, blocklists, personal data).
                "SAFETY" | "PROHIBITED_CONTENT" | "BLOCKLIST" | "SPII" | "IMAGE_SAFETY" => {
                    StopReason::Refusal
                }
                other => StopReason::Other(other.to_owned()),
            });
        }
    }
    if blocked {
        response.stop_reason = Some(StopReason::Refusal);
    }
    if response.stop_reason.is_none() {
        return Err(http::truncated("a finishReason"));
    }
    if !thoughts.is_empty() || text_signature.is_some() {
        response.reasoning.push(ReasoningBlock {
            id: None,
            text: thoughts,
            signature: text_signature,
            redacted: None,
        });
    }
    Ok(response)
}

#[cfg(test)]
mod tests;
