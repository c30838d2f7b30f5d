//! Replays the recorded Gemini streams (CRLF-framed) through the decoder.

use super::*;
use crate::llm::fixtures::{self, Framing};
use serde_json::json;
use std::time::Duration;

fn decode(name: &str) -> (Result<Response, Error>, Vec<Delta>) {
    let bytes = fixtures::load("gemini", name, Framing::Crlf).remove(0);
    fixtures::decode(bytes, &Gemini::new(fixtures::http(), "http://unused", None))
}

#[test]
fn a_complete_function_call_with_its_signature() {
    for name in [
        "vercel-ai__google-tool-call.chunks.txt",
        "vercel-ai__google-tool-call-gemini3.chunks.txt",
    ] {
        let (got, _) = decode(name);
        let got = got.unwrap();
        assert_eq!(got.tool_calls.len(), 1, "{name}");
        let call = &got.tool_calls[0];
        assert_eq!(
            (call.name.as_str(), &call.arguments),
            ("weather", &json!({"location": "San Francisco"})),
            "{name}"
        );
        assert!(
            call.id.as_str().starts_with(LOCAL_ID),
            "Gemini sent no id: {}",
            call.id
        );
        let (again, _) = decode(name);
        assert_ne!(
            again.unwrap().tool_calls[0].id,
            call.id,
            "made-up ids differ between responses: {name}"
        );
        assert!(
            call.signature
                .as_ref()
                .is_some_and(|s| s.starts_with("Ep") || s.starts_with("Eq")),
            "{name}"
        );
        assert_eq!(
            got.stop_reason,
            Some(StopReason::ToolUse),
            "STOP with calls is a tool turn: {name}"
        );
        assert_eq!(got.model.as_deref(), Some("gemini-3-pro-preview"));
    }
}

#[test]
fn text_with_a_trailing_signature_and_cumulative_usage() {
    let (got, deltas) = decode("vercel-ai__google-reasoning.chunks.txt");
    let got = got.unwrap();
    let text =
        "There are **3** \"r\"s in strawberry.\n\nHere is the breakdown: st**r**awbe**rr**y.";
    assert_eq!(got.text, text);
    assert_eq!(fixtures::streamed_text(&deltas), text);
    assert!(
        got.reasoning[0]
            .signature
            .as_ref()
            .unwrap()
            .starts_with("Eo0HCooHAb4+")
    );
    assert_eq!(
        got.usage,
        Some(Usage {
            input_tokens: 9,
            output_tokens: 29 + 256,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            reasoning_tokens: 256,
            ..Usage::default()
        })
    );
    assert_eq!(got.response_id.as_deref(), Some("dX6LadKVC7SZ28oPr9yJoQs"));
}

#[test]
fn vertex_streamed_partial_arguments() {
    let (got, deltas) = decode("vercel-ai__google-stream-no-args-tool-call.chunks.txt");
    let got = got.unwrap();
    let calls: Vec<(&str, &Value)> = got
        .tool_calls
        .iter()
        .map(|c| (c.name.as_str(), &c.arguments))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("read_theme", &json!({})),
            ("read_screen", &json!({"id": "A"})),
            ("read_screen", &json!({"id": "B"})),
            ("read_screen", &json!({"id": "C"}))
        ]
    );
    assert!(
        got.tool_calls[0]
            .signature
            .as_ref()
            .unwrap()
            .starts_with("AY89a18a8/Lo")
    );
    let thoughts: String = deltas
        .iter()
        .filter_map(|d| {
            if let Delta::Reasoning(t) = d {
                Some(t.as_str())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(thoughts.chars().count(), 320);
    assert_eq!(
        got.usage,
        Some(Usage {
            input_tokens: 249,
            output_tokens: 58 + 183,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            reasoning_tokens: 183,
            ..Usage::default()
        })
    );
}

#[test]
fn retry_info_in_a_429_body_sets_the_delay() {
    let dir = fixtures::dir("gemini");
    let body = std::fs::read_to_string(dir.join("vercel-ai__google-429-retry-info.json")).unwrap();
    let parsed = parse_error(&body);
    assert_eq!(parsed.retry_after, Some(Duration::from_secs_f64(34.4)));
    assert_eq!(parsed.kind.as_deref(), Some("RESOURCE_EXHAUSTED"));
    let e = http::classify("Gemini", 429, &body, parsed, None);
    assert!(e.is_retryable());
    assert_eq!(
        e.message,
        "Gemini API error 429 RESOURCE_EXHAUSTED: You exceeded your current quota, please check your plan."
    );
}

#[test]
fn hostile_retry_delays_never_panic_and_count_as_absent() {
    let body = |delay: &str| {
        json!({"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}]}})
        .to_string()
    };
    for delay in ["1e30s", "-5s", "NaNs", "infs", "s", "3", "later", "1e400s"] {
        assert_eq!(parse_error(&body(delay)).retry_after, None, "{delay}");
    }
    assert_eq!(
        parse_error(&body("0.5s")).retry_after,
        Some(Duration::from_millis(500))
    );
}

#[test]
fn eof_before_a_finish_reason_is_truncation() {
    let sse = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"half\"}],\"role\":\"model\"}}]}\r\n\r\n";
    let err = fixtures::decode(
        sse.as_bytes().to_vec(),
        &Gemini::new(fixtures::http(), "http://unused", None),
    )
    .0
    .unwrap_err();
    assert_eq!(
        err.message,
        "the response stream ended before a finishReason (truncated response)"
    );
}

#[test]
fn history_echoes_signatures_on_the_same_parts() {
    use agentd_proto::{InputId, ToolResult};
    let turns = [
        Turn::User {
            text: "weather?".into(),
            input_id: InputId("i".into()),
            images: vec![],
            expanded: None,
        },
        Turn::Assistant {
            text: "Checking.".into(),
            reasoning: vec![],
            tool_calls: vec![
                ToolCall {
                    id: ToolCallId("g1".into()),
                    name: "weather".into(),
                    arguments: json!({"city": "SF"}),
                    signature: Some("sig".into()),
                },
                ToolCall {
                    id: ToolCallId(format!("{LOCAL_ID}0123456789abcdef-1")),
                    name: "time".into(),
                    arguments: json!({}),
                    signature: None,
                },
            ],
            usage: Usage::default(),
            response_id: None,
            model: "m".into(),
            api: Some(ProviderKind::Gemini),
        },
        Turn::ToolResults {
            results: vec![
                ToolResult {
                    call_id: ToolCallId("g1".into()),
                    content: "sunny".into(),
                    is_error: false,
                    images: vec![],
                },
                ToolResult {
                    call_id: ToolCallId(format!("{LOCAL_ID}0123456789abcdef-1")),
                    content: "no clock".into(),
                    is_error: true,
                    images: vec![],
                },
            ],
        },
    ];
    let refs: Vec<&Turn> = turns.iter().collect();
    assert_eq!(
        contents(&refs),
        vec![
            json!({"role": "user", "parts": [{"text": "weather?"}]}),
            json!({"role": "model", "parts": [
                {"text": "Checking."},
                {"functionCall": {"name": "weather", "args": {"city": "SF"}, "id": "g1"}, "thoughtSignature": "sig"},
                {"functionCall": {"name": "time", "args": {}}}]}),
            json!({"role": "user", "parts": [
                {"functionResponse": {"name": "weather", "id": "g1", "response": {"output": "sunny"}}},
                {"functionResponse": {"name": "time", "response": {"error": "no clock"}}}]}),
        ]
    );
}

/// A candidate stopped for its content (`SAFETY` and the like, often without any content)
/// and a prompt blocked before any candidate (`promptFeedback.blockReason`) are refusals.
#[test]
fn a_safety_stop_or_a_blocked_prompt_is_a_refusal() {
    let gemini = Gemini::new(fixtures::http(), "http://unused", None);
    for reason in ["SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII"] {
        let sse = format!(
            "data: {}\r\n\r\n",
            json!({"candidates": [{"finishReason": reason, "index": 0,
                "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": true}]}]})
        );
        let got = fixtures::decode(sse.into_bytes(), &gemini).0.unwrap();
        assert_eq!(got.stop_reason, Some(StopReason::Refusal), "{reason}");
        assert_eq!(got.text, "");
    }
    let blocked = format!(
        "data: {}\r\n\r\n",
        json!({"promptFeedback": {"blockReason": "SAFETY"},
            "usageMetadata": {"promptTokenCount": 7, "totalTokenCount": 7}})
    );
    let got = fixtures::decode(blocked.into_bytes(), &gemini).0.unwrap();
    assert_eq!(got.stop_reason, Some(StopReason::Refusal));
    // A later candidate's STOP does not undo the block.
    let then_stop = format!(
        "data: {}\r\n\r\ndata: {}\r\n\r\n",
        json!({"promptFeedback": {"blockReason": "OTHER"}}),
        json!({"candidates": [{"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": "STOP", "index": 0}]})
    );
    let got = fixtures::decode(then_stop.into_bytes(), &gemini).0.unwrap();
    assert_eq!(got.stop_reason, Some(StopReason::Refusal));
}
