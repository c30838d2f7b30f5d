//! The Anthropic provider against the mock: recorded streams replayed over HTTP, retries,
//! authentication and context errors, broken streams, and a missing key. Events are read
//! typed ([`agentd_tests::Client`]).

use crate::{end_reasons, errors, setup, texts, warnings};
use agentd_proto::methods::{DaemonInfoMethod, SessionCreate, SessionGet};
use agentd_proto::{
    CreateParams, ErrorKind, EventBody, ProcessingEndReason, SessionParams, SessionState,
};
use agentd_tests::mock::{Chunk, Gate, Reply};
use agentd_tests::{TestDaemon, sse};
use serde_json::{Value, json};
use std::path::PathBuf;

/// A recorded stream from the repository's copy of the shared fixtures.
fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../core/testdata/providers/anthropic")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {} is readable: {e}", path.display()))
}

fn event_types(sse_text: &str) -> Vec<String> {
    sse_text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| {
            serde_json::from_str::<Value>(d.trim()).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_streams_replayed_through_the_mock_drive_a_session() {
    let tool_use = fixture("anthropic-sdk-python__tool_use_response.sse.txt");
    let basic = fixture("anthropic-sdk-python__basic_response.sse.txt");
    // The mock's own builder produces the same event sequence shape as the recording.
    let built: String = sse::tools(
        "I'll check the current weather in Paris for you.",
        &[("toolu_x", "get_weather", json!({"location": "Paris"}))],
    )
    .into_iter()
    .map(|c| match c {
        Chunk::Data(d) => d,
        _ => String::new(),
    })
    .collect();
    let dedup = |v: Vec<String>| {
        let mut v = v;
        v.dedup();
        v
    };
    assert_eq!(dedup(event_types(&built)), dedup(event_types(&tool_use)));

    let s = setup().await;
    let (mut c, id) = s.typed().await;
    s.mock.push_stream(vec![Chunk::Data(tool_use)]);
    s.mock.push_stream(vec![Chunk::Data(basic)]);
    let events = c.run(&id, "weather?").await.unwrap();
    let ends: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolCallEnd { call_id, error, .. } => {
                Some((call_id.as_str(), error.as_deref()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        ends[0],
        (
            "toolu_01NRLabsLyVHZPKxbKvkfSMn",
            Some(
                "Unknown tool: get_weather. Available tools: read_file, write_file, edit_file, shell, grep, glob, spawn_agent, send_input, wait, close_agent"
            )
        )
    );
    assert_eq!(
        texts(&events),
        [
            "I'll check the current weather in Paris for you.",
            "Hello there!"
        ]
    );
    let usage = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::Usage { call, .. } => Some(call),
            _ => None,
        })
        .expect("a usage event");
    assert_eq!((usage.input_tokens, usage.output_tokens), (377, 65));
    // The tool input assembled from fragments went back to the API as an object.
    let second = &s.mock.requests()[1].body;
    assert_eq!(
        second["messages"][1]["content"][1],
        json!({"type": "tool_use", "id": "toolu_01NRLabsLyVHZPKxbKvkfSMn", "name": "get_weather", "input": {"location": "Paris"}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_and_overload_are_retried() {
    let s = setup().await;
    let (mut c, id) = s.typed().await;
    let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
    s.mock.push(Reply::Status(
        429,
        vec![("retry-after".into(), "0.2".into())],
        body.into(),
    ));
    s.mock.push(Reply::Status(
        529,
        vec![("retry-after-ms".into(), "100".into())],
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#.into(),
    ));
    s.mock.push(Reply::Status(
        503,
        vec![("retry-after".into(), "0".into())],
        "upstream unavailable".into(),
    ));
    s.mock.push_stream(sse::text("made it"));
    let events = c.run(&id, "hi").await.unwrap();
    let warnings = warnings(&events);
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert_eq!(
        warnings[0],
        "Anthropic API error 429 rate_limit_error: slow down; retrying in 0.2s (attempt 2)"
    );
    assert_eq!(
        warnings[1],
        "Anthropic API error 529 overloaded_error: Overloaded; retrying in 0.1s (attempt 3)"
    );
    assert!(
        warnings[2].starts_with("Anthropic API error 503: upstream unavailable; retrying in 0.0s"),
        "{}",
        warnings[2]
    );
    assert_eq!(end_reasons(&events), [ProcessingEndReason::Completed]);
    assert_eq!(s.mock.requests().len(), 4);
}

/// Anthropic may answer 200 and then `error: overloaded_error`. Before any text that is
/// retried like a 529; once text has reached clients it is an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overloaded_stream_is_retried_only_before_text() {
    let s = setup().await;
    let (mut c, id) = s.typed().await;
    let overloaded = Chunk::Data(
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
            .into(),
    );
    s.mock
        .push_stream(vec![sse::message_start(), overloaded.clone()]);
    s.mock.push_stream(sse::text("made it"));
    let events = c.run(&id, "one").await.unwrap();
    let warnings = warnings(&events);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("Anthropic stream error: Overloaded; retrying in"),
        "{warnings:?}"
    );
    assert_eq!(texts(&events), ["made it"]);

    let mut late = sse::text("half of it");
    late.truncate(4);
    late.push(overloaded);
    s.mock.push_stream(late);
    let events = c.run(&id, "two").await.unwrap();
    let messages: Vec<&str> = errors(&events).iter().map(|e| e.0).collect();
    assert_eq!(messages, ["Anthropic stream error: Overloaded"]);
    assert_eq!(s.mock.requests().len(), 3, "the late one was not replayed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_failure_closes_the_session() {
    let s = setup().await;
    let (mut c, id) = s.typed().await;
    s.mock.push(Reply::Status(
        401,
        vec![],
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#
            .into(),
    ));
    c.start(&id, "hi").await.unwrap();
    let events = c
        .until(|e| matches!(e, EventBody::SessionEnd { .. }))
        .await
        .unwrap();
    let (message, fatal) = errors(&events)[0];
    assert!(fatal);
    assert!(message.starts_with("Anthropic API error 401 authentication_error: invalid x-api-key"));
    assert!(
        message.contains("store a valid key with `agentctl login anthropic`"),
        "{message}"
    );
    assert_eq!(s.mock.requests().len(), 1, "401 is not retried");
    let snapshot = c
        .call::<SessionGet>(SessionParams { session_id: id })
        .await
        .unwrap();
    assert_eq!(snapshot.state, SessionState::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_overflow_is_a_warning_and_the_session_continues() {
    let s = setup().await;
    let (mut c, id) = s.typed().await;
    s.mock.push(Reply::Status(400, vec![], r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}"#.into()));
    let events = c.run(&id, "huge").await.unwrap();
    assert!(warnings(&events)[0].starts_with("context window exceeded"));
    assert!(errors(&events).is_empty());
    s.mock.push_stream(sse::text("fine again"));
    let events = c.run(&id, "small").await.unwrap();
    assert_eq!(end_reasons(&events), [ProcessingEndReason::Completed]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_mid_response_is_an_error_and_the_session_stays_usable() {
    let mut s = setup().await;
    let (mut c, id) = s.typed().await;
    // The cut waits until the text has reached the client, so that it is a cut mid-response.
    let gate = Gate::new();
    let mut cut = sse::text("this will be cut off");
    cut.truncate(4);
    cut.extend([Chunk::Wait(gate.clone()), Chunk::Cut]);
    s.mock.push_stream(cut);
    let mut early_eof = sse::text("ends early");
    early_eof.pop(); // no message_stop: the server just closes
    s.mock.push_stream(early_eof);
    c.start(&id, "one").await.unwrap();
    c.until(|e| matches!(e, EventBody::AssistantTextDelta { .. }))
        .await
        .unwrap();
    gate.open();
    let events = c
        .until(|e| matches!(e, EventBody::ProcessingEnd { .. }))
        .await
        .unwrap();
    let (message, fatal) = errors(&events)[0];
    assert!(!fatal);
    assert!(
        message.starts_with("the response stream broke"),
        "{message}"
    );
    assert_eq!(end_reasons(&events), [ProcessingEndReason::Error]);
    let events = c.run(&id, "two").await.unwrap();
    assert_eq!(
        errors(&events)[0].0,
        "the response stream ended before message_stop (truncated response)"
    );
    s.mock.push_stream(sse::text("recovered"));
    let events = c.run(&id, "three").await.unwrap();
    assert_eq!(
        end_reasons(&events),
        [ProcessingEndReason::Completed],
        "{events:#?}"
    );
    // Text that arrived before the stream broke is kept in the history, marked as cut off.
    let history = s.call("session/history", json!({})).await;
    let entries = history["entries"].as_array().unwrap();
    let kept = entries
        .iter()
        .position(|e| e["type"] == "assistant" && e["text"] == "ends early")
        .expect("the partial text is kept");
    assert_eq!(
        entries[kept + 1],
        json!({"id": entries[kept + 1]["id"], "parent_id": entries[kept]["id"], "ts": entries[kept + 1]["ts"],
        "type": "system", "text": "[The previous response was cut off by an error.]"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_is_a_clear_error_at_create() {
    let daemon = TestDaemon::start_with(&[]).await.unwrap();
    let mut c = agentd_tests::Client::from(daemon.client().await.unwrap());
    let params = serde_json::from_value::<CreateParams>(json!({"cwd": "/"})).unwrap();
    let error = c
        .request::<SessionCreate>(params)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(error.code, -32021);
    assert_eq!(
        error.data.as_ref().unwrap().kind,
        ErrorKind::ProviderNotConfigured
    );
    assert!(
        error.message.contains("run `agentctl login anthropic`"),
        "{error}"
    );
    let info = c
        .call::<DaemonInfoMethod>(Default::default())
        .await
        .unwrap();
    assert!(!info.providers[0].has_key);
}
