//! Replays the recorded Anthropic streams in `shared/fixtures/providers/anthropic` through the
//! decoder, split into small chunks so that lines and code points break across reads.

use super::*;
use serde_json::json;
use std::path::PathBuf;

fn fixture(name: &str) -> Option<Vec<u8>> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/providers/anthropic");
    if !dir.is_dir() {
        eprintln!("fixtures not present at {}; skipping {name}", dir.display());
        return None;
    }
    let raw = std::fs::read_to_string(dir.join(name)).expect("fixture is readable");
    if name.ends_with(".sse.txt") {
        return Some(raw.into_bytes());
    }
    // chunks.txt: one data payload per line; frame it as Anthropic does.
    let mut sse = String::new();
    for line in raw.lines().filter(|l| !l.trim().is_empty()) {
        let kind = serde_json::from_str::<Value>(line).expect("chunk is JSON")["type"]
            .as_str()
            .unwrap()
            .to_owned();
        sse.push_str(&format!("event: {kind}\ndata: {line}\n\n"));
    }
    Some(sse.into_bytes())
}

fn decode(bytes: Vec<u8>) -> (Result<Response, Error>, Vec<Delta>) {
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = bytes
        .chunks(7)
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    let mut deltas = Vec::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let result = rt.block_on(decode_stream(futures::stream::iter(chunks), &mut |d| {
        deltas.push(d)
    }));
    (result, deltas)
}

fn check(name: &str, expect: Response) {
    let Some(bytes) = fixture(name) else { return };
    let (got, deltas) = decode(bytes);
    let got = got.unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(got, expect, "{name}");
    let streamed: String = deltas
        .iter()
        .filter_map(|d| {
            if let Delta::Text(t) = d {
                Some(t.as_str())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(streamed, expect.text, "{name}: deltas add up to the text");
}

fn usage(input: u64, output: u64, read: u64, write: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: read,
        cache_write_tokens: write,
        reasoning_tokens: 0,
    }
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: ToolCallId(id.into()),
        name: name.into(),
        arguments,
    }
}

fn response(
    text: &str,
    calls: Vec<ToolCall>,
    usage: Usage,
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
    let Some(bytes) = fixture("anthropic-sdk-python__incomplete_partial_json_response.sse.txt")
    else {
        return;
    };
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
    let Some(bytes) = fixture("vercel-ai__anthropic-clear-thinking.1.chunks.txt") else {
        return;
    };
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
    let Some(bytes) = fixture("vercel-ai__anthropic-json-tool.2.chunks.txt") else {
        return;
    };
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
    let Some(bytes) = fixture("vercel-ai__anthropic-message-delta-input-tokens.chunks.txt") else {
        return;
    };
    let got = decode(bytes).0.unwrap();
    assert_eq!(got.text, "pong");
    assert_eq!(got.usage, usage(61, 2, 0, 0));
}

#[test]
fn server_tool_blocks_are_skipped_and_cache_counts_reported() {
    let Some(bytes) =
        fixture("vercel-ai__anthropic-code-execution-20260120-prompt-cache.1.chunks.txt")
    else {
        return;
    };
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
    let Some(bytes) = fixture("vercel-ai__anthropic-tool-search-deferred-bm25.chunks.txt") else {
        return;
    };
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
    let Some(mut bytes) = fixture("anthropic-sdk-python__basic_response.sse.txt") else {
        return;
    };
    let text = String::from_utf8(bytes.clone()).unwrap();
    bytes.truncate(text.find("event: message_stop").unwrap());
    let err = decode(bytes).0.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Stream);
    assert!(
        err.message.contains("before message_stop"),
        "{}",
        err.message
    );
}

#[test]
fn mid_stream_error_event_is_reported_not_retried() {
    let sse = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{}}}\n\n\
               event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let err = decode(sse.as_bytes().to_vec()).0.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Stream);
    assert_eq!(err.message, "Anthropic stream error: Overloaded");
}

#[test]
fn http_errors_are_classified() {
    let body =
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
    let e = http_error(401, body);
    assert_eq!(
        (e.kind, e.is_retryable()),
        (ErrorKind::Authentication, false)
    );
    assert_eq!(
        e.message,
        "Anthropic API error 401 authentication_error: invalid x-api-key"
    );
    assert_eq!(http_error(529, "{}").kind, ErrorKind::Overloaded);
    assert!(http_error(529, "").is_retryable());
    assert_eq!(
        http_error(413, "<html>Request Entity Too Large</html>").kind,
        ErrorKind::InvalidRequest
    );
    let long = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
    assert_eq!(http_error(400, long).kind, ErrorKind::ContextLength);
    let spend = r#"{"type":"error","error":{"type":"rate_limit_error","message":"cap","details":{"error_code":"enforced_spend_limit_reached"}}}"#;
    assert!(!http_error(429, spend).is_retryable());
    assert!(http_error(429, "").is_retryable());
}

#[test]
fn history_maps_to_alternating_messages_with_results_first() {
    use agentd_proto::{InputId, ToolResult};
    let turns = [
        Turn::User {
            text: "go".into(),
            input_id: InputId("i1".into()),
        },
        Turn::Assistant {
            text: "ok".into(),
            reasoning: vec![ReasoningBlock {
                text: "hm".into(),
                signature: Some("sig".into()),
                redacted: None,
            }],
            tool_calls: vec![call("t1", "shell", json!({"command": "ls"}))],
            usage: Usage::default(),
            response_id: None,
            model: "m".into(),
        },
        Turn::ToolResults {
            results: vec![ToolResult {
                call_id: ToolCallId("t1".into()),
                content: "a\n".into(),
                is_error: false,
            }],
        },
        Turn::Steering {
            text: "also b".into(),
            input_id: None,
        },
    ];
    let refs: Vec<&Turn> = turns.iter().collect();
    assert_eq!(
        messages(&refs),
        vec![
            json!({"role": "user", "content": [{"type": "text", "text": "go"}]}),
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "sig"},
                {"type": "text", "text": "ok"},
                {"type": "tool_use", "id": "t1", "name": "shell", "input": {"command": "ls"}}]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a\n", "is_error": false},
                {"type": "text", "text": "also b"}]}),
        ]
    );
}
