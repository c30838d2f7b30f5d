//! The four provider families as the tests see them: how to reach each through the mock, how
//! each streams a reply, how each shapes an error, and where each puts tool results in a
//! request. Scenarios written once run against every family.

use crate::TestDaemon;
use crate::mock::{Chunk, MockProvider, Reply};
use crate::sse;
use serde_json::{Value, json};

/// A provider family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses.
    OpenAi,
    /// OpenAI-compatible Chat Completions (an Ollama-style endpoint named `local`).
    Chat,
    /// Gemini.
    Gemini,
}

impl Family {
    /// The provider name sessions use.
    pub fn provider(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::OpenAi => "openai",
            Self::Chat => "local",
            Self::Gemini => "gemini",
        }
    }

    /// The request path the daemon calls.
    pub fn path(self) -> &'static str {
        match self {
            Self::Anthropic => "/v1/messages",
            Self::OpenAi => "/v1/responses",
            Self::Chat => "/v1/chat/completions",
            Self::Gemini => "/v1beta/models/gemini-mock:streamGenerateContent?alt=sse",
        }
    }

    /// A daemon that reaches every family through `mock`.
    pub async fn daemon(mock: &MockProvider) -> anyhow::Result<TestDaemon> {
        let config = format!(
            "[providers.anthropic]\nbeta_headers = [\"interleaved-thinking-2025-05-14\"]\n\n\
             [providers.local]\nkind = \"openai_chat\"\nbase_url = \"{}/v1\"\ndefault_model = \"local-model\"\nimages = true\n\n\
             [providers.gemini]\ndefault_model = \"gemini-mock\"\n\n\
             [pricing.\"gemini-mock\"]\ninput = 1.0\noutput = 2.0\n",
            mock.url
        );
        let v1 = format!("{}/v1", mock.url);
        TestDaemon::start_with_config(
            &[
                ("ANTHROPIC_BASE_URL", &mock.url),
                ("ANTHROPIC_API_KEY", "test-key"),
                ("OPENAI_BASE_URL", &v1),
                ("OPENAI_API_KEY", "test-key"),
                ("GEMINI_BASE_URL", &mock.url),
                ("GEMINI_API_KEY", "test-key"),
            ],
            Some(&config),
        )
        .await
    }

    /// A reply with text only.
    pub fn text(self, text: &str) -> Vec<Chunk> {
        self.tools(text, &[])
    }

    /// A reply with optional text, then tool calls `(id, name, arguments)`.
    pub fn tools(self, text: &str, calls: &[(&str, &str, Value)]) -> Vec<Chunk> {
        match self {
            Self::Anthropic if calls.is_empty() => sse::text(text),
            Self::Anthropic => sse::tools(text, calls),
            Self::OpenAi => responses(text, calls),
            Self::Chat => chat(text, calls),
            Self::Gemini => gemini(text, calls),
        }
    }

    /// Like [`Family::tools`], but the model stopped at the output-token limit: Anthropic
    /// `max_tokens`, Chat Completions `length`, Gemini `MAX_TOKENS`, Responses
    /// `response.incomplete` with `max_output_tokens`.
    pub fn cut_off(self, text: &str, calls: &[(&str, &str, Value)]) -> Vec<Chunk> {
        let mut chunks = self.tools(text, calls);
        let mut rewrite = |from: &str, to: &str| {
            let mut found = false;
            for chunk in &mut chunks {
                if let Chunk::Data(d) = chunk
                    && d.contains(from)
                {
                    *d = d.replace(from, to);
                    found = true;
                }
            }
            assert!(found, "{self:?}: no {from} in the stream");
        };
        match self {
            Self::Anthropic if calls.is_empty() => rewrite(
                r#""stop_reason":"end_turn""#,
                r#""stop_reason":"max_tokens""#,
            ),
            Self::Anthropic => rewrite(
                r#""stop_reason":"tool_use""#,
                r#""stop_reason":"max_tokens""#,
            ),
            Self::Chat if calls.is_empty() => {
                rewrite(r#""finish_reason":"stop""#, r#""finish_reason":"length""#)
            }
            Self::Chat => rewrite(
                r#""finish_reason":"tool_calls""#,
                r#""finish_reason":"length""#,
            ),
            Self::Gemini => rewrite(r#""finishReason":"STOP""#, r#""finishReason":"MAX_TOKENS""#),
            Self::OpenAi => {
                rewrite("event: response.completed", "event: response.incomplete");
                rewrite(
                    r#""type":"response.completed""#,
                    r#""type":"response.incomplete""#,
                );
                // Rewritten as JSON: the order of a serialized object's keys is not fixed.
                let mut found = false;
                for chunk in &mut chunks {
                    let Chunk::Data(d) = chunk else { continue };
                    let lines: Vec<String> = d
                        .split('\n')
                        .map(|line| {
                            let Some(json) = line.strip_prefix("data: ") else {
                                return line.to_owned();
                            };
                            let Ok(mut event) = serde_json::from_str::<serde_json::Value>(json)
                            else {
                                return line.to_owned();
                            };
                            if event["response"]["status"] != "completed" {
                                return line.to_owned();
                            }
                            event["response"]["status"] = "incomplete".into();
                            event["response"]["incomplete_details"] =
                                serde_json::json!({"reason": "max_output_tokens"});
                            found = true;
                            format!("data: {event}")
                        })
                        .collect();
                    *d = lines.join("\n");
                }
                assert!(found, "{self:?}: no completed response in the stream");
            }
        }
        chunks
    }

    /// A model declining to answer, in each family's words: Anthropic `stop_reason: refusal`
    /// after its text, a Responses `refusal` part (streamed as `response.refusal.delta`), a
    /// Chat Completions `delta.refusal`, and Gemini `finishReason: SAFETY` (Gemini gives no
    /// text, so `text` is not sent).
    pub fn refused(self, text: &str) -> Vec<Chunk> {
        match self {
            Self::Anthropic => {
                let mut chunks = sse::text(text);
                for chunk in &mut chunks {
                    if let Chunk::Data(d) = chunk {
                        *d = d.replace(r#""stop_reason":"end_turn""#, r#""stop_reason":"refusal""#);
                    }
                }
                chunks
            }
            Self::OpenAi => responses_refusal(text),
            Self::Chat => {
                let chunk = |delta: Value, finish: Value| {
                    data(
                        json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "gpt-mock",
                        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]}),
                    )
                };
                let mut chunks = vec![chunk(
                    json!({"role": "assistant", "content": null, "refusal": ""}),
                    Value::Null,
                )];
                for p in pieces(text, 6) {
                    chunks.push(chunk(json!({"content": null, "refusal": p}), Value::Null));
                }
                chunks.push(chunk(json!({}), json!("stop")));
                chunks.push(Chunk::Data("data: [DONE]\n\n".into()));
                chunks
            }
            Self::Gemini => {
                let chunk = json!({"candidates": [{"finishReason": "SAFETY", "index": 0,
                    "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": true}]}],
                    "usageMetadata": {"promptTokenCount": 150, "totalTokenCount": 150},
                    "modelVersion": "gemini-mock", "responseId": "gem_mock"});
                vec![Chunk::Data(format!("data: {chunk}\r\n\r\n"))]
            }
        }
    }

    /// A stream that ends before any text and without saying why the model stopped: the
    /// opening events and EOF, or for Chat Completions the role chunk and `[DONE]` (what
    /// llama-cpp-python sent).
    pub fn unfinished(self) -> Vec<Chunk> {
        match self {
            Self::Anthropic | Self::OpenAi => {
                let mut chunks = self.text("never sent");
                chunks.truncate(2);
                chunks
            }
            Self::Chat => vec![
                data(
                    json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "local-model",
                    "choices": [{"index": 0, "delta": {"role": "assistant"}, "logprobs": null, "finish_reason": null}]}),
                ),
                Chunk::Data("data: [DONE]\n\n".into()),
            ],
            Self::Gemini => vec![Chunk::Data(format!(
                "data: {}\r\n\r\n",
                json!({"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "index": 0}],
                    "usageMetadata": {"promptTokenCount": 150, "totalTokenCount": 150},
                    "modelVersion": "gemini-mock", "responseId": "gem_mock"})
            ))],
        }
    }

    /// An HTTP error shaped as this family sends it.
    pub fn error(self, status: u16, message: &str, headers: Vec<(String, String)>) -> Reply {
        let body = match self {
            Self::Anthropic => {
                json!({"type": "error", "error": {"type": "error", "message": message}})
            }
            Self::OpenAi | Self::Chat => {
                json!({"error": {"message": message, "type": "error", "param": null, "code": null}})
            }
            Self::Gemini => {
                json!({"error": {"code": status, "message": message, "status": "ERROR"}})
            }
        };
        Reply::Status(
            status,
            headers,
            serde_json::to_string_pretty(&body).unwrap_or_default(),
        )
    }

    /// Every tool result in a request: `(call id, content)`.
    pub fn results(self, body: &Value) -> Vec<(String, String)> {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let all = |key: &str| body[key].as_array().cloned().unwrap_or_default();
        match self {
            Self::Anthropic => all("messages")
                .iter()
                .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                .filter(|b| b["type"] == "tool_result")
                .map(|b| (s(&b["tool_use_id"]), s(&b["content"])))
                .collect(),
            Self::OpenAi => all("input")
                .iter()
                .filter(|i| i["type"] == "function_call_output")
                .map(|i| (s(&i["call_id"]), s(&i["output"])))
                .collect(),
            Self::Chat => all("messages")
                .iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| (s(&m["tool_call_id"]), s(&m["content"])))
                .collect(),
            Self::Gemini => all("contents")
                .iter()
                .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
                .filter_map(|p| p.get("functionResponse").cloned())
                .map(|f| {
                    let r = &f["response"];
                    (
                        s(&f["id"]),
                        s(if r.get("output").is_some() {
                            &r["output"]
                        } else {
                            &r["error"]
                        }),
                    )
                })
                .collect(),
        }
    }
}

fn data(v: Value) -> Chunk {
    Chunk::Data(format!("data: {v}\n\n"))
}

/// Splits `s` into pieces of about `n` bytes on character boundaries.
fn pieces(s: &str, n: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < s.len() {
        let mut end = (start + n).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        out.push(&s[start..end]);
        start = end;
    }
    out
}

/// A Responses stream: created, items with their added/delta/done lifecycle, completed.
fn responses(text: &str, calls: &[(&str, &str, Value)]) -> Vec<Chunk> {
    let mut seq = 0u64;
    let mut ev = |mut v: Value| {
        v["sequence_number"] = json!(seq);
        seq += 1;
        let kind = v["type"].as_str().unwrap_or_default().to_owned();
        Chunk::Data(format!("event: {kind}\ndata: {v}\n\n"))
    };
    let head = json!({"id": "resp_mock", "object": "response", "status": "in_progress", "model": "gpt-mock", "output": [], "usage": null});
    let mut chunks = vec![
        ev(json!({"type": "response.created", "response": head})),
        ev(json!({"type": "response.in_progress", "response": head})),
    ];
    let mut output = Vec::new();
    if !text.is_empty() {
        let done = json!({"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "annotations": [], "text": text}]});
        chunks.push(ev(json!({"type": "response.output_item.added", "output_index": 0,
            "item": {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}})));
        chunks.push(ev(json!({"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0,
            "part": {"type": "output_text", "annotations": [], "text": ""}})));
        for p in pieces(text, 6) {
            chunks.push(ev(json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": p, "obfuscation": "x"})));
        }
        chunks.push(ev(json!({"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0, "content_index": 0, "text": text})));
        chunks.push(ev(
            json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
        ));
        output.push(done);
    }
    for (id, name, args) in calls {
        let index = output.len();
        let item_id = format!("fc_{index}");
        let arguments = args.to_string();
        chunks.push(ev(json!({"type": "response.output_item.added", "output_index": index,
            "item": {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": id, "name": name}})));
        for p in pieces(&arguments, 5) {
            chunks.push(ev(json!({"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": index, "delta": p})));
        }
        chunks.push(ev(json!({"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": index, "arguments": arguments})));
        let done = json!({"id": item_id, "type": "function_call", "status": "completed", "arguments": arguments, "call_id": id, "name": name});
        chunks.push(ev(
            json!({"type": "response.output_item.done", "output_index": index, "item": done}),
        ));
        output.push(done);
    }
    chunks.push(ev(json!({"type": "response.completed", "response": {"id": "resp_mock", "object": "response", "status": "completed",
        "model": "gpt-mock", "output": output,
        "usage": {"input_tokens": 150, "input_tokens_details": {"cached_tokens": 50}, "output_tokens": 20,
                  "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 170}}})));
    chunks
}

/// A Responses stream whose one message is a `refusal` part.
fn responses_refusal(text: &str) -> Vec<Chunk> {
    let ev = |v: Value| {
        let kind = v["type"].as_str().unwrap_or_default().to_owned();
        Chunk::Data(format!("event: {kind}\ndata: {v}\n\n"))
    };
    let item = json!({"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
        "content": [{"type": "refusal", "refusal": text}]});
    let mut chunks = vec![
        ev(
            json!({"type": "response.created", "response": {"id": "resp_mock", "status": "in_progress", "model": "gpt-mock", "output": []}}),
        ),
        ev(
            json!({"type": "response.output_item.added", "output_index": 0,
            "item": {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}}),
        ),
        ev(
            json!({"type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0,
            "part": {"type": "refusal", "refusal": ""}}),
        ),
    ];
    for p in pieces(text, 6) {
        chunks.push(ev(json!({"type": "response.refusal.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": p})));
    }
    chunks.push(ev(json!({"type": "response.refusal.done", "item_id": "msg_1", "output_index": 0, "content_index": 0, "refusal": text})));
    chunks.push(ev(
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    ));
    chunks.push(ev(json!({"type": "response.completed", "response": {"id": "resp_mock", "status": "completed", "model": "gpt-mock",
        "output": [item], "usage": {"input_tokens": 150, "output_tokens": 8, "total_tokens": 158}}})));
    chunks
}

/// A Chat Completions stream: role chunk, content, tool-call fragments, finish, usage, [DONE].
fn chat(text: &str, calls: &[(&str, &str, Value)]) -> Vec<Chunk> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "local-model",
               "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}], "usage": null})
    };
    let mut chunks = vec![data(chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    ))];
    for p in pieces(text, 6) {
        chunks.push(data(chunk(json!({"content": p}), Value::Null)));
    }
    for (index, (id, name, args)) in calls.iter().enumerate() {
        chunks.push(data(chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        )));
        for p in pieces(&args.to_string(), 5) {
            chunks.push(data(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": p}}]}),
                Value::Null,
            )));
        }
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    chunks.push(data(chunk(json!({}), json!(finish))));
    chunks.push(data(json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "local-model", "choices": [],
        "usage": {"prompt_tokens": 150, "completion_tokens": 20, "total_tokens": 170, "prompt_tokens_details": {"cached_tokens": 50}}})));
    chunks.push(Chunk::Data("data: [DONE]\n\n".into()));
    chunks
}

/// A Gemini stream, CRLF-framed: text deltas, complete functionCall parts (the first with a
/// thoughtSignature), then a final empty-text chunk with finishReason STOP.
fn gemini(text: &str, calls: &[(&str, &str, Value)]) -> Vec<Chunk> {
    let frame = |parts: Value, finish: Option<&str>, out: u64| {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(f) = finish {
            candidate["finishReason"] = json!(f);
        }
        let chunk = json!({"candidates": [candidate],
            "usageMetadata": {"promptTokenCount": 150, "cachedContentTokenCount": 50, "candidatesTokenCount": out, "totalTokenCount": 150 + out},
            "modelVersion": "gemini-mock", "responseId": "gem_mock"});
        Chunk::Data(format!("data: {chunk}\r\n\r\n"))
    };
    let mut chunks: Vec<Chunk> = pieces(text, 6)
        .into_iter()
        .map(|p| frame(json!([{"text": p}]), None, 5))
        .collect();
    let parts: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (id, name, args))| {
            let mut part = json!({"functionCall": {"name": name, "args": args, "id": id}});
            if i == 0 {
                part["thoughtSignature"] = json!("c2lnbmF0dXJl");
            }
            part
        })
        .collect();
    if !parts.is_empty() {
        chunks.push(frame(Value::Array(parts), None, 15));
    }
    chunks.push(frame(json!([{"text": ""}]), Some("STOP"), 20));
    chunks
}
