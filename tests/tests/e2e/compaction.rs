//! Compaction requests and results (issue 11): the summary request is one user message with
//! no tools in every wire format, and a summary that would not shrink the context is
//! discarded with a warning.

use crate::{Setup, data_of, of_kind, setup_family, setup_with};
use agentd_tests::family::Family;
use agentd_tests::mock::Reply;
use agentd_tests::sse;
use serde_json::{Value, json};

fn is_summary_request(body: &Value) -> bool {
    body.to_string().contains("summaries of coding-agent")
}

/// The roles of a request's conversation, system messages left out.
fn roles(family: Family, body: &Value) -> Vec<String> {
    let key = match family {
        Family::Anthropic | Family::Chat => "messages",
        Family::OpenAi => "input",
        Family::Gemini => "contents",
    };
    body[key]
        .as_array()
        .expect("a conversation")
        .iter()
        .filter_map(|m| m["role"].as_str())
        .filter(|r| *r != "system")
        .map(str::to_owned)
        .collect()
}

each_family!(the_summary_request_is_one_user_message_without_tools);

async fn the_summary_request_is_one_user_message_without_tools(family: Family) {
    let mut s = setup_family(family, json!({"config": {"context_window_tokens": 1000}})).await;
    s.mock.push_stream(family.tools(
        "Checking.",
        &[("call_1", "shell", json!({"command": "echo from-the-tool"}))],
    ));
    s.mock.respond_with(move |body| {
        Reply::Stream(family.text(if is_summary_request(body) {
            "SHORT-SUMMARY"
        } else {
            "ok"
        }))
    });
    s.run(&format!("oldest question {}", "x".repeat(600))).await;
    s.run(&format!("middle question {}", "y".repeat(800))).await;
    s.run("newest question").await;

    let compacted = s.call("session/compact", json!({})).await;
    assert!(
        compacted["tokens_after"].as_u64() < compacted["tokens_before"].as_u64(),
        "{family:?}: {compacted}"
    );
    let requests = s.mock.requests();
    let summary: Vec<&Value> = requests
        .iter()
        .map(|r| &r.body)
        .filter(|b| is_summary_request(b))
        .collect();
    assert_eq!(summary.len(), 1, "{family:?}");
    let body = summary[0];
    assert_eq!(roles(family, body), ["user"], "{family:?}: {body}");
    assert!(
        body.get("tools").is_none() && body.get("tool_choice").is_none(),
        "{family:?}: no tools offered: {body}"
    );
    let text = body.to_string();
    assert!(
        text.contains("oldest question")
            && text.contains("(calls shell with")
            && text.contains("from-the-tool"),
        "{family:?}: the older turns, tool round included, are in the transcript: {text}"
    );

    s.run("after compaction").await;
    let sent = s.mock.requests().last().unwrap().body.to_string();
    assert!(sent.contains("SHORT-SUMMARY"), "{family:?}: {sent}");
    assert!(!sent.contains("oldest question"), "{family:?}: {sent}");
}

/// A summary longer than what it replaces (a small local model once turned ~398 tokens into
/// ~593).
fn verbose_mock(s: &Setup) {
    let long = "a very long summary ".repeat(400);
    s.mock.respond_with(move |body| {
        let text = body.to_string();
        Reply::Stream(if is_summary_request(body) {
            sse::text(&long)
        } else if text.contains("tool_result") {
            sse::text("done")
        } else if text.contains("next question") {
            sse::shell("c1", "echo round")
        } else {
            sse::text("ok")
        })
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summary_that_does_not_shrink_the_context_is_discarded() {
    let mut s =
        setup_with(json!({"config": {"context_window_tokens": 1000, "auto_compact_percent": 0}}))
            .await;
    verbose_mock(&s);
    s.run(&format!("oldest question {}", "x".repeat(600))).await;
    s.run(&format!("middle question {}", "y".repeat(800))).await;
    s.run("newest question").await;
    let before = s.call("session/history", json!({})).await["total"].clone();

    s.client.subscribe(&s.session, None).await.unwrap();
    let refused = s.request("session/compact", json!({})).await;
    assert_eq!(
        refused["error"]["message"],
        "nothing to compact: the summary would not make the context smaller",
        "{refused}"
    );
    let events = s.until("warning").await;
    let warning = data_of(&events, "warning", "message");
    assert!(
        warning[0].starts_with("compaction discarded: the summary would leave ~")
            && warning[0].contains("no fewer than the ~"),
        "{warning:?}"
    );
    assert_eq!(
        s.call("session/history", json!({})).await["total"],
        before,
        "nothing was appended"
    );
    s.run("after").await;
    let sent = s.mock.requests().last().unwrap().body.to_string();
    assert!(sent.contains("oldest question"), "{sent}");
    assert!(!sent.contains("a very long summary"), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discarded_automatic_summary_is_not_retried_every_round() {
    let mut s = setup_with(json!({"config": {"context_window_tokens": 1000}})).await;
    verbose_mock(&s);
    s.run(&format!("oldest question {}", "x".repeat(4000)))
        .await;
    let events = s.run("next question").await;
    assert_eq!(
        of_kind(&events, "processing_end")[0]["data"]["reason"],
        "completed"
    );
    assert_eq!(of_kind(&events, "tool_call_end").len(), 1, "{events:?}");
    assert!(of_kind(&events, "compaction").is_empty(), "{events:?}");
    let discarded: Vec<String> = data_of(&events, "warning", "message")
        .into_iter()
        .filter(|w| w.starts_with("compaction discarded"))
        .collect();
    assert_eq!(discarded.len(), 1, "{events:?}");
    let summary_requests = s
        .mock
        .requests()
        .iter()
        .filter(|r| is_summary_request(&r.body))
        .count();
    assert_eq!(summary_requests, 1, "one attempt for the whole input");
    let sent = s.mock.requests().last().unwrap().body.to_string();
    assert!(sent.contains("oldest question"), "the full context went on");
}

/// A model that declines to summarize gives no summary, however short its refusal: the
/// compaction fails with that reason and the history is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_summary_is_no_summary() {
    let mut s =
        setup_with(json!({"config": {"context_window_tokens": 1000, "auto_compact_percent": 0}}))
            .await;
    s.mock.respond_with(|body| {
        Reply::Stream(if is_summary_request(body) {
            Family::Anthropic.refused("No.")
        } else {
            sse::text("ok")
        })
    });
    s.run(&format!("oldest question {}", "x".repeat(600))).await;
    s.run(&format!("middle question {}", "y".repeat(800))).await;
    s.run("newest question").await;
    let before = s.call("session/history", json!({})).await["total"].clone();
    let refused = s.request("session/compact", json!({})).await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("the model declined to summarize the conversation"),
        "{refused}"
    );
    assert_eq!(s.call("session/history", json!({})).await["total"], before);
}
