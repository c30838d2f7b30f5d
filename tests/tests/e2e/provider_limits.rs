//! Hostile and broken providers (issue 12), through the real daemon: an 8 MiB line, a line or
//! a response past its cap, a server that trickles, one that stalls mid-body, one that never
//! sends its headers; Gemini call ids that never repeat; text events that always pair. Every
//! one ends with a specific error that names the config key, in bounded time: the limits are
//! set small in the daemon's config file, and no test asserts on a duration.

use crate::{Setup, data_of, of_kind};
use agentd_tests::TestDaemon;
use agentd_tests::family::Family;
use agentd_tests::mock::{Chunk, Gate, MockProvider, Reply};
use agentd_tests::{kinds, sse};
use serde_json::{Value, json};
use std::time::Duration;

/// Like `Family::daemon`, with `limits` (lines of `[providers.NAME]` keys) set on every
/// provider.
async fn daemon_with_limits(mock: &MockProvider, limits: &str) -> TestDaemon {
    let config = format!(
        "[providers.anthropic]\n{limits}\n\n\
         [providers.openai]\n{limits}\n\n\
         [providers.local]\nkind = \"openai_chat\"\nbase_url = \"{}/v1\"\ndefault_model = \"local-model\"\n{limits}\n\n\
         [providers.gemini]\ndefault_model = \"gemini-mock\"\n{limits}\n",
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
    .expect("daemon starts")
}

/// A daemon with `limits` on every provider and a session on `family`'s.
async fn setup_limited(family: Family, limits: &str) -> Setup {
    let mock = MockProvider::start().await.expect("mock starts");
    let daemon = daemon_with_limits(&mock, limits).await;
    let mut client = daemon.client().await.expect("client connects");
    let workdir = tempfile::tempdir().expect("tempdir");
    let session = daemon
        .create_session(
            &mut client,
            workdir.path(),
            json!({"provider": family.provider()}),
        )
        .await
        .expect("session created");
    Setup {
        mock,
        daemon,
        client,
        session,
        workdir,
    }
}

/// The family's API as error messages name it.
fn api(family: Family) -> &'static str {
    match family {
        Family::Anthropic => "Anthropic",
        Family::OpenAi => "OpenAI",
        Family::Chat => "OpenAI-compatible",
        Family::Gemini => "Gemini",
    }
}

/// One SSE comment line of `n` bytes: every decoder must scan it, none may act on it.
fn comment_line(n: usize) -> String {
    let mut line = String::with_capacity(n + 3);
    line.push_str(": ");
    line.extend(std::iter::repeat_n('x', n));
    line.push('\n');
    line
}

fn processing_end(events: &[Value]) -> &Value {
    &of_kind(events, "processing_end")[0]["data"]["reason"]
}

each_family!(
    an_8_mib_line_is_decoded_and_the_answer_after_it_arrives,
    a_line_past_its_cap_ends_the_call_with_an_error_naming_the_limit,
    a_response_past_its_cap_ends_the_call_with_an_error_naming_the_limit,
    a_tool_only_response_opens_its_text_events_before_closing_them,
);

/// Issue 12: one 8 MiB line cost 7 s of CPU (quadratic decoding); now it is one linear scan.
/// Under the default caps (16 MiB per line) the line is read and the answer after it arrives.
async fn an_8_mib_line_is_decoded_and_the_answer_after_it_arrives(family: Family) {
    let mut s = crate::setup_family(family, json!({})).await;
    // Written in 8 KiB pieces, as a network delivers it: the old decoder re-parsed the whole
    // line for each one.
    let line = comment_line(8 << 20);
    let mut chunks: Vec<Chunk> = line
        .as_bytes()
        .chunks(8192)
        .map(|piece| Chunk::Data(String::from_utf8_lossy(piece).into_owned()))
        .collect();
    chunks.extend(family.text("after the long line"));
    s.mock.push_stream(chunks);
    let events = s.run("hi").await;
    assert_eq!(
        data_of(&events, "assistant_text_end", "text"),
        ["after the long line"]
    );
    assert_eq!(processing_end(&events), "completed");
}

async fn a_line_past_its_cap_ends_the_call_with_an_error_naming_the_limit(family: Family) {
    let mut s = setup_limited(family, "max_line_bytes = 65536").await;
    // The 8 MiB line is refused once 64 KiB of it are buffered.
    let mut chunks = vec![Chunk::Data(comment_line(8 << 20))];
    chunks.extend(family.text("never read"));
    s.mock.push_stream(chunks);
    let events = s.run("hi").await;
    assert_eq!(
        data_of(&events, "error", "message"),
        [
            "the response stream is malformed: a line of the response stream is longer than 65536 bytes \
          (the limit is max_line_bytes in the provider's config)"
        ]
    );
    assert_eq!(processing_end(&events), "error");
    assert_eq!(
        s.mock.requests().len(),
        1,
        "a hostile stream is not retried"
    );
    // The session goes on.
    s.mock.push_stream(family.text("fine again"));
    let events = s.run("again").await;
    assert_eq!(
        data_of(&events, "assistant_text_end", "text"),
        ["fine again"]
    );
}

async fn a_response_past_its_cap_ends_the_call_with_an_error_naming_the_limit(family: Family) {
    let mut s = setup_limited(family, "max_response_bytes = 1048576").await;
    // Short lines, each well within the line cap, 2 MiB in all.
    let mut chunks: Vec<Chunk> = (0..2048).map(|_| Chunk::Data(comment_line(1021))).collect();
    chunks.extend(family.text("never read"));
    s.mock.push_stream(chunks);
    let events = s.run("hi").await;
    assert_eq!(
        data_of(&events, "error", "message"),
        [format!(
            "the {} API response is larger than 1048576 bytes (max_response_bytes)",
            api(family)
        )]
    );
    assert_eq!(processing_end(&events), "error");
    assert_eq!(
        s.mock.requests().len(),
        1,
        "a hostile stream is not retried"
    );
}

/// Issue 12: a response with tool calls and no text sent `assistant_text_end` without
/// `assistant_text_start`. Each response's text events now pair up, the start first.
async fn a_tool_only_response_opens_its_text_events_before_closing_them(family: Family) {
    let mut s = crate::setup_family(family, json!({})).await;
    s.mock
        .push_stream(family.tools("", &[("call_1", "shell", json!({"command": "echo hi"}))]));
    s.mock.push_stream(family.text("done"));
    let events = s.run("say hi").await;
    let text_events: Vec<String> = kinds(&events)
        .into_iter()
        .filter(|k| {
            (k.starts_with("assistant_text_") && k != "assistant_text_delta") || k == "usage"
        })
        .collect();
    assert_eq!(
        text_events,
        [
            "assistant_text_start",
            "usage",
            "assistant_text_end",
            "assistant_text_start",
            "usage",
            "assistant_text_end"
        ]
    );
    assert_eq!(data_of(&events, "assistant_text_end", "text"), ["", "done"]);
    assert_eq!(processing_end(&events), "completed");
}

/// Issue 12: a provider sending one byte per second never timed out. The bytes keep coming
/// (so the idle timeout never fires), and the call ends at its deadline, not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_provider_ends_at_the_call_deadline() {
    let mut s = setup_limited(
        Family::Anthropic,
        "idle_timeout_secs = 60\nrequest_timeout_secs = 2",
    )
    .await;
    let mut chunks = vec![sse::message_start(), Chunk::Data(":".into())];
    // Far longer than the deadline: 50 minutes of one byte every 50 ms.
    for _ in 0..60_000 {
        chunks.push(Chunk::Pause(Duration::from_millis(50)));
        chunks.push(Chunk::Data("x".into()));
    }
    s.mock.push_stream(chunks);
    let events = s.run("hi").await;
    assert_eq!(
        data_of(&events, "error", "message"),
        ["the Anthropic API call did not complete within 2 s (request_timeout_secs)"]
    );
    assert!(of_kind(&events, "warning").is_empty(), "{events:?}");
    assert_eq!(processing_end(&events), "error");
    assert_eq!(s.mock.requests().len(), 1);
}

/// Issue 12: a provider that never sent its headers was retried after 300 s, five times. The
/// wait for headers is idle time: each attempt ends at the idle timeout and is retried like any
/// transient failure, with the attempts bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_never_sends_headers_is_retried_then_fails() {
    let mut s = setup_limited(
        Family::Gemini,
        "idle_timeout_secs = 1\nrequest_timeout_secs = 600",
    )
    .await;
    s.mock.respond_with(|_| Reply::NoHeaders);
    let events = s.run("hi").await;
    let idle = "the Gemini API sent no response headers for 1 s (idle_timeout_secs)";
    let warnings = data_of(&events, "warning", "message");
    assert_eq!(warnings.len(), 4, "{warnings:?}");
    for (i, w) in warnings.iter().enumerate() {
        assert!(w.starts_with(&format!("{idle}; retrying in")), "{w}");
        assert!(w.ends_with(&format!("(attempt {})", i + 2)), "{w}");
    }
    assert_eq!(data_of(&events, "error", "message"), [idle]);
    assert_eq!(processing_end(&events), "error");
    assert_eq!(s.mock.requests().len(), 5);
}

/// A stream that goes quiet before any text is retried (nothing reached a client); one that
/// goes quiet after text has reached clients is an error, never replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_stalls_is_retried_only_before_text() {
    let mut s = setup_limited(
        Family::OpenAi,
        "idle_timeout_secs = 1\nrequest_timeout_secs = 600",
    )
    .await;
    let never = Gate::new();
    let mut stalled = Family::OpenAi.text("never sent");
    stalled.truncate(2);
    stalled.push(Chunk::Wait(never.clone()));
    s.mock.push_stream(stalled);
    s.mock.push_stream(Family::OpenAi.text("made it"));
    let events = s.run("one").await;
    let warnings = data_of(&events, "warning", "message");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            "the OpenAI API sent nothing for 1 s in the middle of its response (idle_timeout_secs); retrying in"
        ),
        "{warnings:?}"
    );
    assert_eq!(data_of(&events, "assistant_text_end", "text"), ["made it"]);

    let mut late = Family::OpenAi.text("half of it, then silence");
    late.truncate(5);
    late.push(Chunk::Wait(never));
    s.mock.push_stream(late);
    let events = s.run("two").await;
    assert_eq!(
        data_of(&events, "error", "message"),
        ["the OpenAI API sent nothing for 1 s in the middle of its response (idle_timeout_secs)"]
    );
    assert_eq!(processing_end(&events), "error");
    assert_eq!(s.mock.requests().len(), 3, "the late one was not replayed");
}

/// A Gemini reply whose `functionCall` parts carry no id (as Gemini 2.x sends them).
fn gemini_call_without_id(name: &str, args: Value) -> Vec<Chunk> {
    let frame = |parts: Value, finish: Option<&str>| {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(f) = finish {
            candidate["finishReason"] = json!(f);
        }
        let chunk = json!({"candidates": [candidate],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": "gemini-mock"});
        Chunk::Data(format!("data: {chunk}\r\n\r\n"))
    };
    vec![
        frame(
            json!([{"functionCall": {"name": name, "args": args}}]),
            None,
        ),
        frame(json!([{"text": ""}]), Some("STOP")),
    ]
}

/// Issue 12: Gemini sends calls without ids, and agentd named each `agentd-call-0`, so ids
/// repeated within a session. Made-up ids now differ per response, and are still not sent back
/// to Gemini (it pairs calls and responses by name and order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_calls_without_ids_get_ids_unique_in_the_session() {
    let mut s = crate::setup_family(Family::Gemini, json!({})).await;
    s.mock.push_stream(gemini_call_without_id(
        "shell",
        json!({"command": "echo one"}),
    ));
    s.mock.push_stream(gemini_call_without_id(
        "shell",
        json!({"command": "echo two"}),
    ));
    s.mock.push_stream(Family::Gemini.text("done"));
    let events = s.run("twice").await;
    assert_eq!(processing_end(&events), "completed");
    let ids = data_of(&events, "tool_call_start", "call_id");
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1], "call ids repeat: {ids:?}");
    assert!(
        ids.iter().all(|id| id.starts_with("agentd-call-")),
        "{ids:?}"
    );
    assert_eq!(
        data_of(&events, "tool_call_end", "call_id"),
        ids,
        "each result belongs to its call"
    );
    // The history sent back is valid Gemini: calls and responses by name, no made-up ids.
    let last = &s.mock.requests()[2].body;
    let parts: Vec<Value> = last["contents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .filter(|p| p.get("functionCall").is_some() || p.get("functionResponse").is_some())
        .collect();
    assert_eq!(parts.len(), 4, "{parts:#?}");
    assert_eq!(
        parts[0],
        json!({"functionCall": {"name": "shell", "args": {"command": "echo one"}}})
    );
    assert_eq!(parts[1]["functionResponse"]["name"], "shell");
    assert!(parts[1]["functionResponse"].get("id").is_none());
    assert!(
        parts[1]["functionResponse"]["response"]["output"]
            .as_str()
            .unwrap()
            .starts_with("one\n"),
        "{parts:#?}"
    );
    assert_eq!(
        parts[2],
        json!({"functionCall": {"name": "shell", "args": {"command": "echo two"}}})
    );
    assert!(parts[3]["functionResponse"].get("id").is_none());
}
