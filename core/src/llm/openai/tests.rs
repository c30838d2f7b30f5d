//! Replays the recorded Responses streams (OpenAI with encrypted reasoning, a mid-stream quota
//! error, two messages in one response, LM Studio) through the decoder.

use super::*;
use crate::llm::fixtures::{self, Framing};
use serde_json::json;

fn responses(name: &str) -> Vec<Result<Response, Error>> {
    fixtures::load("openai-responses", name, Framing::Typed)
        .into_iter()
        .map(|bytes| {
            fixtures::decode(bytes, &OpenAi::new(fixtures::http(), "http://unused", None)).0
        })
        .collect()
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: ToolCallId(id.into()),
        name: name.into(),
        arguments,
        signature: None,
    }
}

#[test]
fn a_four_request_agent_loop_with_encrypted_reasoning() {
    let all = responses("vercel-ai__openai-reasoning-encrypted-content.1.chunks.txt");
    let all: Vec<Response> = all.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(all.len(), 4);
    let first = &all[0];
    assert_eq!(
        first.tool_calls,
        vec![call(
            "call_AB6AaRZ1FYZB2RwS6A5vbdqn",
            "calculator",
            json!({"a": 12, "b": 7, "op": "add"})
        )]
    );
    assert_eq!(first.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(first.reasoning.len(), 1);
    let r = &first.reasoning[0];
    assert_eq!(
        r.id.as_deref(),
        Some("rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9")
    );
    assert_eq!(r.redacted.as_ref().map(String::len), Some(1060));
    assert!(
        r.text
            .starts_with("**Calculating step-by-step using calcula"),
        "{}",
        r.text
    );
    assert_eq!(
        first.usage,
        Some(Usage {
            input_tokens: 134,
            output_tokens: 28,
            ..Usage::default()
        })
    );
    assert_eq!(
        all[1].tool_calls,
        vec![call(
            "call_Q6pW65MUgW9vF59BmItYGos3",
            "calculator",
            json!({"a": 19, "b": 3, "op": "multiply"})
        )]
    );
    assert_eq!(
        all[2].tool_calls,
        vec![call(
            "call_Zl5vIMnD7dVAjgU6FkhmiCZh",
            "calculator",
            json!({"a": 57, "b": 10, "op": "multiply"})
        )]
    );
    assert_eq!(all[3].text, "The final result is **570**.");
    assert!(all[3].tool_calls.is_empty());
    assert_eq!(all[3].stop_reason, Some(StopReason::EndTurn));
    assert_eq!(
        all[3].response_id.as_deref(),
        Some("resp_01830d662ab3856501693c3217ba4c8190a3ddf6c839d4f12a")
    );
}

#[test]
fn a_nested_error_event_fails_the_call() {
    let mut all = responses("vercel-ai__openai-error.1.chunks.txt");
    let err = all.remove(0).unwrap_err();
    assert_eq!(err.kind, ErrorKind::QuotaExceeded);
    assert!(
        err.message
            .starts_with("OpenAI stream error insufficient_quota: You exceeded your current quota"),
        "{}",
        err.message
    );
}

#[test]
fn two_messages_in_one_response() {
    let mut all = responses("vercel-ai__openai-phase.1.chunks.txt");
    let got = all.remove(0).unwrap();
    assert!(
        got.text
            .starts_with("Got it — I’ll quickly check reliable, up-to-date sources"),
        "{}",
        got.text
    );
    assert!(
        got.text.contains(
            "\n\nHere are a few **AI headlines for today (Wednesday, February 25, 2026)**"
        ),
        "{}",
        got.text
    );
    assert_eq!(
        got.usage,
        Some(Usage {
            input_tokens: 4040,
            output_tokens: 463,
            cache_read_tokens: 3072,
            cache_write_tokens: 0,
            reasoning_tokens: 64,
            ..Usage::default()
        })
    );
}

#[test]
fn lm_studio_sends_arguments_only_when_done() {
    let mut all = responses("vercel-ai__open-responses__lmstudio-tool-call.1.chunks.txt");
    let got = all.remove(0).unwrap();
    assert_eq!(
        got.text,
        "I'll get the current weather information for San Francisco for you."
    );
    assert_eq!(
        got.tool_calls,
        vec![call(
            "call_2025306790300011",
            "weather",
            json!({"location": "San Francisco"})
        )]
    );
    assert!(
        got.reasoning[0]
            .text
            .starts_with("The user is asking for the weather in Sa")
    );
    assert_eq!(
        got.usage,
        Some(Usage {
            input_tokens: 180,
            output_tokens: 61,
            cache_read_tokens: 2,
            cache_write_tokens: 0,
            reasoning_tokens: 48,
            ..Usage::default()
        })
    );
}

#[test]
fn eof_before_a_terminal_event_is_truncation() {
    let sse = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\"}}\n\n";
    let err = fixtures::decode(
        sse.as_bytes().to_vec(),
        &OpenAi::new(fixtures::http(), "http://unused", None),
    )
    .0
    .unwrap_err();
    assert_eq!(
        err.message,
        "the response stream ended before response.completed (truncated response)"
    );
    let flat = "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}\n\n";
    let err = fixtures::decode(
        flat.as_bytes().to_vec(),
        &OpenAi::new(fixtures::http(), "http://unused", None),
    )
    .0
    .unwrap_err();
    assert_eq!(err.message, "OpenAI stream error server_error: boom");
}

#[test]
fn stateless_input_replays_reasoning_only_to_openai() {
    use agentd_proto::{InputId, ToolResult};
    let assistant = |api| Turn::Assistant {
        text: "Let me add.".into(),
        reasoning: vec![ReasoningBlock {
            id: Some("rs_1".into()),
            text: "think".into(),
            signature: None,
            redacted: Some("enc".into()),
        }],
        tool_calls: vec![call("call_1", "calculator", json!({"a": 1}))],
        usage: Usage::default(),
        response_id: None,
        model: "m".into(),
        api,
    };
    let turns = [
        Turn::User {
            text: "add".into(),
            input_id: InputId("i".into()),
            images: vec![],
            expanded: None,
        },
        assistant(Some(ProviderKind::Openai)),
        Turn::ToolResults {
            results: vec![ToolResult {
                call_id: ToolCallId("call_1".into()),
                content: "2".into(),
                is_error: false,
                images: vec![],
            }],
        },
    ];
    let refs: Vec<&Turn> = turns.iter().collect();
    assert_eq!(
        input(&refs),
        vec![
            json!({"role": "user", "content": [{"type": "input_text", "text": "add"}]}),
            json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}], "encrypted_content": "enc"}),
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me add."}]}),
            json!({"type": "function_call", "call_id": "call_1", "name": "calculator", "arguments": "{\"a\":1}"}),
            json!({"type": "function_call_output", "call_id": "call_1", "output": "2"}),
        ]
    );
    let foreign = [assistant(Some(ProviderKind::Anthropic))];
    let refs: Vec<&Turn> = foreign.iter().collect();
    assert!(input(&refs).iter().all(|i| i["type"] != "reasoning"));
}

#[test]
fn the_recorded_http_error_body_is_a_quota_error() {
    let dir = fixtures::dir("openai-responses");
    let body = std::fs::read_to_string(dir.join("vercel-ai__openai-error.1.json")).unwrap();
    let e = http::classify("OpenAI", 429, &body, parse_error(&body), None);
    assert_eq!(e.kind, ErrorKind::QuotaExceeded);
    assert!(!e.is_retryable(), "insufficient_quota is not retried");
    assert!(
        e.message.starts_with(
            "OpenAI API error 429 insufficient_quota: You exceeded your current quota"
        ),
        "{}",
        e.message
    );
}

/// A refusal is a part of its own (`refusal`, streamed as `response.refusal.delta`): it is
/// the answer's text and ends the response as a refusal; so does `content_filter`.
#[test]
fn a_refusal_part_or_a_content_filter_is_a_refusal() {
    let ev = |v: Value| format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap());
    let item = json!({"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
        "content": [{"type": "refusal", "refusal": "I can't help with that."}]});
    let refused: String = [
        json!({"type": "response.created", "response": {"id": "r1"}}),
        json!({"type": "response.output_item.added", "output_index": 0,
            "item": {"id": "msg_1", "type": "message", "content": []}}),
        json!({"type": "response.content_part.added", "output_index": 0, "content_index": 0,
            "part": {"type": "refusal", "refusal": ""}}),
        json!({"type": "response.refusal.delta", "output_index": 0, "content_index": 0, "delta": "I can't "}),
        json!({"type": "response.refusal.delta", "output_index": 0, "content_index": 0, "delta": "help with that."}),
        json!({"type": "response.refusal.done", "output_index": 0, "content_index": 0, "refusal": "I can't help with that."}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": {"id": "r1", "status": "completed", "output": [item]}}),
    ]
    .into_iter()
    .map(ev)
    .collect();
    let openai = OpenAi::new(fixtures::http(), "http://unused", None);
    let (got, deltas) = fixtures::decode(refused.into_bytes(), &openai);
    let got = got.unwrap();
    assert_eq!(got.stop_reason, Some(StopReason::Refusal));
    assert_eq!(got.text, "I can't help with that.");
    assert_eq!(fixtures::streamed_text(&deltas), got.text);

    let filtered = ev(
        json!({"type": "response.incomplete", "response": {"id": "r2",
        "status": "incomplete", "incomplete_details": {"reason": "content_filter"}, "output": []}}),
    );
    let got = fixtures::decode(filtered.into_bytes(), &openai).0.unwrap();
    assert_eq!(got.stop_reason, Some(StopReason::Refusal));
}
