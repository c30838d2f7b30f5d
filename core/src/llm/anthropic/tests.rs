//! Replays the recorded Anthropic streams in `core/testdata/providers/anthropic` through the
//! decoder, split into small chunks so that lines and code points break across reads.

use super::*;
use crate::llm::fixtures::{self, Framing};
use serde_json::json;

fn fixture(name: &str) -> Vec<u8> {
    fixtures::load("anthropic", name, Framing::Typed).remove(0)
}

fn decode(bytes: Vec<u8>) -> (Result<Response, Error>, Vec<Delta>) {
    fixtures::decode(
        bytes,
        &Anthropic::new(fixtures::http(), "http://unused", None),
    )
}

fn check(name: &str, expect: Response) {
    let bytes = fixture(name);
    let (got, deltas) = decode(bytes);
    let got = got.unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(got, expect, "{name}");
    assert_eq!(
        fixtures::streamed_text(&deltas),
        expect.text,
        "{name}: deltas add up to the text"
    );
}

fn usage(input: u64, output: u64, read: u64, write: u64) -> Option<Usage> {
    Some(Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: read,
        cache_write_tokens: write,
        ..Usage::default()
    })
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: ToolCallId(id.into()),
        name: name.into(),
        arguments,
        signature: None,
    }
}

fn response(
    text: &str,
    calls: Vec<ToolCall>,
    usage: Option<Usage>,
    stop: StopReason,
    id: &str,
    model: &str,
) -> Response {
    Response {
        text: text.into(),
        reasoning: vec![],
        tool_calls: calls,
        usage,
        stop_reason: Some(stop),
        response_id: Some(id.into()),
        model: Some(model.into()),
    }
}

#[test]
fn basic_text() {
    check(
        "anthropic-sdk-python__basic_response.sse.txt",
        response(
            "Hello there!",
            vec![],
            usage(11, 6, 0, 0),
            StopReason::EndTurn,
            "msg_4QpJur2dWWDjF6C758FbBw5vm12BaVipnK",
            "claude-3-opus-latest",
        ),
    );
}

#[test]
fn tool_use_split_mid_key() {
    check(
        "anthropic-sdk-python__tool_use_response.sse.txt",
        response(
            "I'll check the current weather in Paris for you.",
            vec![call(
                "toolu_01NRLabsLyVHZPKxbKvkfSMn",
                "get_weather",
                json!({"location": "Paris"}),
            )],
            usage(377, 65, 0, 0),
            StopReason::ToolUse,
            "msg_019Q1hrJbZG26Fb9BQhrkHEr",
            "claude-sonnet-4-20250514",
        ),
    );
}

#[test]
fn truncated_tool_input_is_kept_as_raw_text() {
    let bytes = fixture("anthropic-sdk-python__incomplete_partial_json_response.sse.txt");
    let got = decode(bytes).0.unwrap();
    assert_eq!(got.stop_reason, Some(StopReason::MaxTokens));
    assert_eq!(got.tool_calls.len(), 1);
    assert_eq!(got.tool_calls[0].name, "make_file");
    let raw = got.tool_calls[0]
        .arguments
        .as_str()
        .expect("unparseable input stays a string");
    assert!(raw.starts_with("{\"filename\": \"taxes.txt\""), "{raw}");
    assert_eq!(got.usage, usage(450, 124, 0, 0));
}

#[test]
fn thinking_block_keeps_its_signature() {
    let bytes = fixture("vercel-ai__anthropic-clear-thinking.1.chunks.txt");
    let (got, deltas) = decode(bytes);
    let got = got.unwrap();
    assert_eq!(got.text, "925 ÷ 5 = 185");
    assert_eq!(got.reasoning.len(), 1);
    assert_eq!(
        got.reasoning[0].text,
        "The previous result was 925. Now I need to divide that by 5.\n\n925 ÷ 5 = 185"
    );
    let sig = got.reasoning[0].signature.as_deref().unwrap();
    assert!(
        sig.starts_with("EvQBCkYICxgCKkAxhD4NUKFzudtZ6N") && sig.len() == 332,
        "{sig}"
    );
    assert!(deltas.iter().any(|d| matches!(d, Delta::Reasoning(_))));
    assert_eq!(got.usage, usage(69, 53, 0, 0));
}

#[test]
fn tool_without_arguments_gets_an_empty_object() {
    check(
        "vercel-ai__anthropic-tool-no-args.chunks.txt",
        response(
            "I'll update the issue list for you.",
            vec![call(
                "toolu_01QE1WLsSVp5hy5Q3GmGTmjP",
                "updateIssueList",
                json!({}),
            )],
            usage(565, 48, 0, 0),
            StopReason::ToolUse,
            "msg_01GE2RKp1VYsPzdFs3sS9z5S",
            "claude-sonnet-4-5-20250929",
        ),
    );
}

#[test]
fn json_tool_with_ping_between_deltas() {
    let bytes = fixture("vercel-ai__anthropic-json-tool.2.chunks.txt");
    let got = decode(bytes).0.unwrap();
    assert_eq!(got.text, "I'll invoke the JSON response tool.");
    assert_eq!(
        got.tool_calls,
        vec![call(
            "toolu_01KFbKqPYSuAKujiL6mTfzYA",
            "json",
            json!({"elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]})
        )]
    );
    assert_eq!(got.usage, usage(849, 47, 0, 0));
}

#[test]
fn message_delta_usage_replaces_message_start() {
    let bytes = fixture("vercel-ai__anthropic-message-delta-input-tokens.chunks.txt");
    let got = decode(bytes).0.unwrap();
    assert_eq!(got.text, "pong");
    assert_eq!(got.usage, usage(61, 2, 0, 0));
}

#[test]
fn server_tool_blocks_are_skipped_and_cache_counts_reported() {
    let bytes = fixture("vercel-ai__anthropic-code-execution-20260120-prompt-cache.1.chunks.txt");
    let got = decode(bytes).0.unwrap();
    assert_eq!(
        got.text,
        "The sum of the squares of the numbers 1 through 12 is **650**."
    );
    assert!(got.tool_calls.is_empty());
    assert_eq!(got.usage, usage(6, 198, 6289, 3337));
}

#[test]
fn first_message_of_a_multi_turn_recording() {
    let bytes = fixture("vercel-ai__anthropic-tool-search-deferred-bm25.chunks.txt");
    let got = decode(bytes).0.unwrap();
    assert_eq!(
        got.tool_calls,
        vec![call(
            "toolu_01U8pzAHj2vNdPCA2Kf8JjeN",
            "readNoteTree",
            json!({"noteId": "d10aa585-982b-4bd9-984e-420f9b3717f7"})
        )]
    );
    assert_eq!(got.stop_reason, Some(StopReason::ToolUse));
}

#[test]
fn eof_before_message_stop_is_an_error() {
    let mut bytes = fixture("anthropic-sdk-python__basic_response.sse.txt");
    let text = String::from_utf8(bytes.clone()).unwrap();
    bytes.truncate(text.find("event: message_stop").unwrap());
    let err = decode(bytes).0.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Incomplete);
    assert!(
        err.message.contains("before message_stop"),
        "{}",
        err.message
    );
}

#[test]
fn message_stop_without_a_stop_reason_is_incomplete() {
    let sse = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{}}}\n\n\
               event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let err = decode(sse.as_bytes().to_vec()).0.unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (
            ErrorKind::Incomplete,
            "the response stream ended without a stop_reason (incomplete response)"
        )
    );
}

/// The error keeps its kind; `llm::complete` retries it only before any delta.
#[test]
fn mid_stream_error_event_keeps_its_kind() {
    let sse = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{}}}\n\n\
               event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let err = decode(sse.as_bytes().to_vec()).0.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Overloaded);
    assert_eq!(err.message, "Anthropic stream error: Overloaded");
}

#[test]
fn error_bodies_are_read_leniently() {
    let auth = parse_error(
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    );
    assert_eq!(
        (auth.kind.as_deref(), auth.message.as_deref(), auth.quota),
        (
            Some("authentication_error"),
            Some("invalid x-api-key"),
            false
        )
    );
    let spend = parse_error(
        r#"{"type":"error","error":{"type":"rate_limit_error","message":"cap","details":{"error_code":"enforced_spend_limit_reached"}}}"#,
    );
    assert!(spend.quota);
    let html = parse_error("<html>Request Entity Too Large</html>");
    assert_eq!((html.kind, html.message), (None, None));
}

#[test]
fn history_maps_to_alternating_messages_with_results_first_and_user_images() {
    use agentd_proto::{InputId, ToolResult, Turn};
    let turns = [
        Turn::User {
            text: "go".into(),
            input_id: InputId("i1".into()),
            images: vec![agentd_proto::ImageData {
                media_type: "image/png".into(),
                data: "iVBORw0K".into(),
            }],
            expanded: None,
        },
        Turn::Assistant {
            text: "ok".into(),
            reasoning: vec![ReasoningBlock {
                id: None,
                text: "hm".into(),
                signature: Some("sig".into()),
                redacted: None,
            }],
            tool_calls: vec![call("t1", "shell", json!({"command": "ls"}))],
            usage: Usage::default(),
            response_id: None,
            model: "m".into(),
            api: Some(ProviderKind::Anthropic),
        },
        Turn::ToolResults {
            results: vec![ToolResult {
                call_id: ToolCallId("t1".into()),
                content: "a\n".into(),
                is_error: false,
                images: vec![],
            }],
        },
        Turn::Steering {
            text: "also b".into(),
            input_id: None,
            images: vec![],
        },
    ];
    let refs: Vec<&Turn> = turns.iter().collect();
    assert_eq!(
        serde_json::to_value(request::messages(&refs)).unwrap(),
        json!([
            {"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}},
                {"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "sig"},
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "t1", "name": "shell", "input": {"command": "ls"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a\n", "is_error": false},
                {"type": "text", "text": "also b"}]},
        ])
    );
}

/// The whole body: the system prompt, the last tool and the last block of the last user
/// message are cache breakpoints; a tool result with images sends them as blocks; arguments
/// that are not an object go as `{}`; the reasoning effort becomes a thinking budget.
#[test]
fn the_request_body_carries_the_cache_breakpoints_and_the_thinking_budget() {
    use crate::tools::ToolDefinition;
    use agentd_proto::{ImageData, InputId, ReasoningEffort, ToolResult, Turn};
    let turns = [
        Turn::User {
            text: "go".into(),
            input_id: InputId("i1".into()),
            images: vec![],
            expanded: None,
        },
        Turn::Assistant {
            text: String::new(),
            reasoning: vec![],
            tool_calls: vec![call("t1", "read_file", json!("not an object"))],
            usage: Usage::default(),
            response_id: None,
            model: "m".into(),
            api: Some(ProviderKind::Anthropic),
        },
        Turn::ToolResults {
            results: vec![ToolResult {
                call_id: ToolCallId("t1".into()),
                content: "an image".into(),
                is_error: true,
                images: vec![ImageData {
                    media_type: "image/png".into(),
                    data: "iVBORw0K".into(),
                }],
            }],
        },
    ];
    let history: Vec<&Turn> = turns.iter().collect();
    let tools = [
        ToolDefinition {
            name: "a".into(),
            description: "first".into(),
            parameters: json!({"type": "object"}),
        },
        ToolDefinition {
            name: "b".into(),
            description: "second".into(),
            parameters: json!({"type": "object", "properties": {}}),
        },
    ];
    let request = Request {
        model: "claude-x",
        system: "be brief",
        history: &history,
        tools: tools.iter().collect(),
        reasoning_effort: Some(ReasoningEffort::High),
        max_output_tokens: 32_000,
        cache_key: Some("s1"),
    };
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(
        serde_json::to_value(request::body(&request)).unwrap(),
        json!({
            "model": "claude-x",
            "max_tokens": 32_000,
            "stream": true,
            "system": [{"type": "text", "text": "be brief", "cache_control": ephemeral}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "go"}]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "is_error": true, "content": [
                        {"type": "text", "text": "an image"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}}],
                     "cache_control": ephemeral}]},
            ],
            "tools": [
                {"name": "a", "description": "first", "input_schema": {"type": "object"}},
                {"name": "b", "description": "second", "input_schema": {"type": "object", "properties": {}},
                 "cache_control": ephemeral},
            ],
            "tool_choice": {"type": "auto"},
            "thinking": {"type": "enabled", "budget_tokens": 24_576},
        })
    );
    // Without tools or an effort, neither the tool choice nor thinking is sent.
    let bare = Request {
        tools: Vec::new(),
        reasoning_effort: None,
        ..request
    };
    let body = serde_json::to_value(request::body(&bare)).unwrap();
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    assert!(body.get("thinking").is_none());
}

/// `stop_reason: refusal` ends the response as a refusal, with whatever text came before.
#[test]
fn a_refusal_stop_reason_is_a_refusal() {
    let ev = |v: Value| format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap());
    let sse: String = [
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "model": "claude-mock", "content": [], "stop_reason": null, "usage": {"input_tokens": 9, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "I won't"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "refusal"}, "usage": {"output_tokens": 3}}),
        json!({"type": "message_stop"}),
    ]
    .into_iter()
    .map(ev)
    .collect();
    let got = decode(sse.into_bytes()).0.unwrap();
    assert_eq!(got.stop_reason, Some(StopReason::Refusal));
    assert_eq!(got.text, "I won't");
}
