//! What a real OpenAI-compatible server (llama.cpp's Python server) found (issue 11): the
//! request shapes it rejects, the streams it sends that are not a complete answer, and a
//! response without usage.

use crate::{data_of, of_kind, setup_family};
use agentd_tests::family::Family;
use agentd_tests::mock::Chunk;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assistant_tool_turn_is_sent_with_empty_string_content() {
    let mut s = setup_family(Family::Chat, json!({})).await;
    s.mock
        .push_stream(Family::Chat.tools("", &[("call_1", "shell", json!({"command": "echo hi"}))]));
    s.mock.push_stream(Family::Chat.text("done"));
    let events = s.run("say hi").await;
    assert_eq!(data_of(&events, "assistant_text_end", "text"), ["", "done"]);
    let requests = s.mock.requests();
    assert_eq!(requests.len(), 2);
    let assistant = &requests[1].body["messages"][2];
    assert_eq!(
        *assistant,
        json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{\"command\":\"echo hi\"}"}}]}),
        "llama-cpp-python answers 500 to null content"
    );
    assert!(of_kind(&events, "error").is_empty(), "{events:?}");
}

/// A server that keeps ending its streams after the role chunk: retried, then a clear error,
/// and no empty answer in the history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_never_finishes_is_an_error_not_an_empty_answer() {
    let mut s = setup_family(Family::Chat, json!({})).await;
    for _ in 0..5 {
        s.mock.push_stream(Family::Chat.unfinished());
    }
    let events = s.run("hi").await;
    assert_eq!(data_of(&events, "warning", "message").len(), 4);
    assert_eq!(
        data_of(&events, "error", "message"),
        ["the response stream ended without a finish_reason (incomplete response)"]
    );
    assert_eq!(
        of_kind(&events, "processing_end")[0]["data"]["reason"],
        "error"
    );
    assert!(
        of_kind(&events, "assistant_text_end").is_empty(),
        "{events:?}"
    );
    let history = s.call("session/history", json!({})).await;
    let types: Vec<&str> = history["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["user"]);
    s.mock.push_stream(Family::Chat.text("now complete"));
    let events = s.run("again").await;
    assert_eq!(
        data_of(&events, "assistant_text_end", "text"),
        ["now complete"]
    );
}

/// A Chat Completions reply without the usage chunk, as llama-cpp-python sends it.
fn without_usage(text: &str) -> Vec<Chunk> {
    let mut chunks = Family::Chat.text(text);
    let before = chunks.len();
    chunks.retain(|c| !matches!(c, Chunk::Data(d) if d.contains("prompt_tokens")));
    assert_eq!(chunks.len(), before - 1, "the mock's usage chunk is gone");
    chunks
}

/// Issue 11: a server that reports no usage was shown as 0 tokens. Unknown is not zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_a_server_does_not_report_is_unknown_not_zero() {
    let mut s = setup_family(Family::Chat, json!({})).await;
    s.mock.push_stream(without_usage("no usage here"));
    let events = s.run("hi").await;
    let usage = &of_kind(&events, "usage")[0]["data"];
    assert_eq!(
        usage["call"],
        json!({"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0,
               "reasoning_tokens": 0, "unreported_calls": 1}),
        "{usage}"
    );
    assert_eq!(usage["total"]["unreported_calls"], 1, "{usage}");

    s.mock.push_stream(Family::Chat.text("with usage"));
    let events = s.run("again").await;
    let usage = &of_kind(&events, "usage")[0]["data"];
    assert!(usage["call"].get("unreported_calls").is_none(), "{usage}");
    assert_eq!(usage["call"]["input_tokens"], 100);
    assert_eq!(usage["total"]["unreported_calls"], 1, "{usage}");
    assert_eq!(usage["total"]["input_tokens"], 100);
    let snapshot = s.call("session/get", json!({})).await;
    assert_eq!(snapshot["usage"]["unreported_calls"], 1, "{snapshot}");

    s.mock.push_stream(without_usage("still none"));
    let out = s
        .daemon
        .agentctl(&["submit", "--follow", &s.session, "third"], None)
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("tokens: unknown (the server reported no usage)"),
        "{stderr}"
    );
}
