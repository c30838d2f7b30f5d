//! The same scenarios against every provider family, each speaking its own wire format through
//! the mock: a tool round trip, retries, authentication failure, context overflow, a broken
//! stream; and one session switching provider and model between inputs.

use crate::{end_reasons, errors, setup_family, texts, warnings};
use agentd_proto::methods::SessionGet;
use agentd_proto::{EventBody, ProcessingEndReason, SessionParams};
use agentd_tests::family::Family;
use agentd_tests::mock::{Chunk, Gate, MockProvider, Reply};
use serde_json::{Value, json};

each_family!(
    tool_round_trip,
    retried_then_answered,
    authentication_failure_closes,
    context_overflow_warns,
    broken_stream_is_an_error,
    an_unfinished_stream_is_retried_before_any_text,
    an_absurd_retry_delay_is_ignored,
    a_response_cut_off_at_the_token_limit_ends_with_max_tokens,
    a_refusal_ends_the_input_with_refusal
);

async fn tool_round_trip(family: Family) {
    let s = setup_family(family, json!({})).await;
    let (mut c, id) = s.typed().await;
    s.mock.push_stream(family.tools(
        "Let me look.",
        &[("call_1", "shell", json!({"command": "echo hello"}))],
    ));
    s.mock.push_stream(family.text("All done."));
    let events = c.run(&id, "say hello").await.unwrap();

    let (call, output) = each!(events, EventBody::ToolCallEnd { call_id, output, .. } =>
        (call_id.as_str(), output.as_deref().unwrap()))[0];
    assert_eq!(call, "call_1");
    assert!(output.starts_with("hello\n[exit code: 0"), "{output}");
    assert_eq!(texts(&events), ["Let me look.", "All done."]);
    assert_eq!(end_reasons(&events)[0], ProcessingEndReason::Completed);
    let usage = each!(events, EventBody::Usage { total, .. } => total);
    assert_eq!(
        usage[1].cache_read_tokens, 100,
        "{family:?}: cached input counted apart"
    );
    assert_eq!(usage[1].input_tokens, 200);

    let requests = s.mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].path, family.path());
    let auth = match family {
        Family::Anthropic => requests[0].header("x-api-key"),
        Family::OpenAi => requests[0].header("authorization"),
        Family::Gemini => requests[0].header("x-goog-api-key"),
        Family::Chat => Some("none needed"),
    };
    assert!(
        matches!(auth, Some("test-key" | "Bearer test-key" | "none needed")),
        "{family:?}: {auth:?}"
    );
    // OpenAI keeps a session's prefix in one cache; a compatible server (the Chat family, on
    // 127.0.0.1 here) gets no field it might refuse.
    for request in &requests {
        let key = &request.body["prompt_cache_key"];
        match family {
            Family::OpenAi => assert_eq!(key, &json!(s.session), "{family:?}"),
            _ => assert!(key.is_null(), "{family:?}: {key}"),
        }
    }
    let results = family.results(&requests[1].body);
    assert_eq!(results.len(), 1, "{family:?}: {results:?}");
    assert_eq!(results[0].0, "call_1");
    assert!(
        results[0].1.starts_with("hello\n[exit code: 0"),
        "{family:?}: {results:?}"
    );
    if family == Family::Anthropic {
        assert_eq!(
            requests[0].header("anthropic-beta"),
            Some("interleaved-thinking-2025-05-14")
        );
    }
    if family == Family::Gemini {
        // The signature goes back on the very part it came with.
        let model_turn = &requests[1].body["contents"][1];
        assert_eq!(model_turn["role"], "model");
        assert_eq!(
            model_turn["parts"][1]["thoughtSignature"], "c2lnbmF0dXJl",
            "{model_turn}"
        );
    }
}

async fn retried_then_answered(family: Family) {
    let s = setup_family(family, json!({})).await;
    let (mut c, id) = s.typed().await;
    let reply = match family {
        // Gemini puts the delay in the body (RetryInfo), not in a header.
        Family::Gemini => Reply::Status(
            429,
            vec![],
            json!({"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED",
                "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.1s"}]}})
            .to_string(),
        ),
        _ => family.error(429, "slow down", vec![("retry-after".into(), "0.1".into())]),
    };
    s.mock.push(reply);
    s.mock
        .push(family.error(503, "busy", vec![("retry-after-ms".into(), "50".into())]));
    s.mock.push_stream(family.text("made it"));
    let events = c.run(&id, "hi").await.unwrap();
    let warnings = warnings(&events);
    assert_eq!(warnings.len(), 2, "{family:?}: {warnings:?}");
    assert!(
        warnings[0].contains("429")
            && warnings[0].ends_with("slow down; retrying in 0.1s (attempt 2)"),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[1].ends_with("busy; retrying in 0.1s (attempt 3)")
            || warnings[1].ends_with("busy; retrying in 0.0s (attempt 3)"),
        "{}",
        warnings[1]
    );
    assert_eq!(texts(&events), ["made it"]);
    assert_eq!(s.mock.requests().len(), 3);
}

async fn authentication_failure_closes(family: Family) {
    let s = setup_family(family, json!({})).await;
    let (mut c, id) = s.typed().await;
    let status = if family == Family::Gemini { 403 } else { 401 };
    s.mock.push(family.error(status, "bad key", vec![]));
    c.start(&id, "hi").await.unwrap();
    let events = c
        .until(|e| matches!(e, EventBody::SessionEnd { .. }))
        .await
        .unwrap();
    let (message, fatal) = errors(&events)[0];
    assert!(fatal);
    assert!(message.contains("bad key"), "{message}");
    assert_eq!(s.mock.requests().len(), 1, "not retried");
}

async fn context_overflow_warns(family: Family) {
    let s = setup_family(family, json!({})).await;
    let (mut c, id) = s.typed().await;
    s.mock.push(family.error(
        400,
        "This model's maximum context length is 8192 tokens",
        vec![],
    ));
    let events = c.run(&id, "huge").await.unwrap();
    let warnings = warnings(&events);
    assert!(
        warnings[0].starts_with("context window exceeded"),
        "{family:?}: {warnings:?}"
    );
    s.mock.push_stream(family.text("fits now"));
    let events = c.run(&id, "small").await.unwrap();
    assert_eq!(texts(&events), ["fits now"]);
}

/// Keeps `chunks` up to and including the first that carries text starting with `"this`.
fn through_first_text(mut chunks: Vec<Chunk>) -> Vec<Chunk> {
    let n = chunks
        .iter()
        .position(|c| matches!(c, Chunk::Data(d) if d.contains("\"this")))
        .expect("a text chunk");
    chunks.truncate(n + 1);
    chunks
}

/// Once text has reached clients, a broken or truncated stream is an error, never replayed.
async fn broken_stream_is_an_error(family: Family) {
    let s = setup_family(family, json!({})).await;
    let (mut c, id) = s.typed().await;
    // The cut waits until the text has reached the client: a connection dropped right after
    // a write may lose that write, and then nothing was shown and a retry is right.
    let gate = Gate::new();
    let mut cut = through_first_text(family.text("this reply will be cut off before its end"));
    cut.extend([Chunk::Wait(gate.clone()), Chunk::Cut]);
    s.mock.push_stream(cut);
    s.mock
        .push_stream(through_first_text(family.text("this one just stops")));
    c.start(&id, "one").await.unwrap();
    c.until(|e| matches!(e, EventBody::AssistantTextDelta { .. }))
        .await
        .unwrap();
    gate.open();
    let events = c
        .until(|e| matches!(e, EventBody::ProcessingEnd { .. }))
        .await
        .unwrap();
    let message = errors(&events).iter().map(|e| e.0).collect::<Vec<_>>();
    assert!(
        message[0].starts_with("the response stream broke"),
        "{family:?}: {message:?}"
    );
    assert!(!errors(&events)[0].1);
    assert_eq!(end_reasons(&events)[0], ProcessingEndReason::Error);
    let events = c.run(&id, "two").await.unwrap();
    let message = errors(&events).iter().map(|e| e.0).collect::<Vec<_>>();
    assert!(
        message[0].contains("ended before") && message[0].ends_with("(truncated response)"),
        "{family:?}: {message:?}"
    );
    s.mock.push_stream(family.text("recovered"));
    let events = c.run(&id, "three").await.unwrap();
    assert_eq!(texts(&events).last(), Some(&"recovered"));
    assert_eq!(
        s.mock.requests().len(),
        3,
        "{family:?}: nothing was replayed"
    );
}

/// Issue 11: a stream that ends without a stop reason is not an answer. Before any delta has
/// reached a client, it is retried like a failed request.
async fn an_unfinished_stream_is_retried_before_any_text(family: Family) {
    let s = setup_family(family, json!({})).await;
    let (mut c, id) = s.typed().await;
    s.mock.push_stream(family.unfinished());
    s.mock.push_stream(family.text("the whole answer"));
    let events = c.run(&id, "hi").await.unwrap();
    let warnings = warnings(&events);
    assert_eq!(warnings.len(), 1, "{family:?}: {warnings:?}");
    assert!(
        warnings[0].contains("(truncated response); retrying in")
            || warnings[0].contains("(incomplete response); retrying in"),
        "{family:?}: {warnings:?}"
    );
    assert_eq!(texts(&events), ["the whole answer"]);
    assert_eq!(end_reasons(&events)[0], ProcessingEndReason::Completed);
    assert_eq!(s.mock.requests().len(), 2);
}

/// Issue 11: `retry-after: 1e30` panicked in `Duration::from_secs_f64` and crashed the loop.
/// A delay no `Duration` holds (or past the policy's bound) is ignored for the usual backoff.
async fn an_absurd_retry_delay_is_ignored(family: Family) {
    let s = setup_family(family, json!({})).await;
    let (mut c, id) = s.typed().await;
    let hostile = match family {
        Family::Gemini => Reply::Status(
            429,
            vec![],
            json!({"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED",
                "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1e30s"}]}})
            .to_string(),
        ),
        _ => family.error(429, "slow down", vec![("retry-after".into(), "1e30".into())]),
    };
    s.mock.push(hostile);
    s.mock.push(family.error(
        429,
        "slow down",
        vec![("retry-after-ms".into(), "-5".into())],
    ));
    s.mock.push_stream(family.text("made it"));
    let events = c.run(&id, "hi").await.unwrap();
    assert!(errors(&events).is_empty(), "{family:?}: {events:?}");
    let warnings = warnings(&events);
    assert_eq!(warnings.len(), 2, "{family:?}: {warnings:?}");
    for (warning, attempt) in warnings.iter().zip([2, 3]) {
        let delay: f64 = warning
            .rsplit_once("; retrying in ")
            .and_then(|(_, rest)| rest.strip_suffix(&format!("s (attempt {attempt})")))
            .and_then(|d| d.parse().ok())
            .unwrap_or_else(|| panic!("{family:?}: {warning}"));
        // The backoff's first two steps: 0.5 s and 1 s, each ±25%.
        assert!(delay <= 1.25, "{family:?}: {warning}");
    }
    assert_eq!(texts(&events), ["made it"]);
    assert_eq!(end_reasons(&events)[0], ProcessingEndReason::Completed);
    s.mock.push_stream(family.text("still here"));
    let events = c.run(&id, "again").await.unwrap();
    assert_eq!(texts(&events), ["still here"]);
    assert_eq!(s.mock.requests().len(), 4);
}

/// Issue 11: a response cut off at the output-token limit ended as `completed`. It ends as
/// `max_tokens` after a warning naming the limit; its half-written tool call never runs, and
/// the next request carries a valid history.
async fn a_response_cut_off_at_the_token_limit_ends_with_max_tokens(family: Family) {
    let s = setup_family(family, json!({"config": {"max_output_tokens": 64}})).await;
    let (mut c, id) = s.typed().await;
    s.mock.push_stream(family.cut_off(
        "Here is the first part",
        &[("call_1", "shell", json!({"command": "echo never"}))],
    ));
    let events = c.run(&id, "write a lot").await.unwrap();
    assert_eq!(
        end_reasons(&events)[0],
        ProcessingEndReason::MaxTokens,
        "{family:?}"
    );
    assert_eq!(
        warnings(&events),
        [
            "the response was cut off at the output token limit (max_output_tokens = 64); \
          raise it with session/set_config or ask for a shorter answer"
        ]
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.body, EventBody::ToolCallStart { .. })),
        "{events:?}"
    );
    assert_eq!(texts(&events), ["Here is the first part"]);

    s.mock.push_stream(family.text("short answer"));
    let events = c.run(&id, "shorter please").await.unwrap();
    assert_eq!(end_reasons(&events)[0], ProcessingEndReason::Completed);
    let requests = s.mock.requests();
    assert_eq!(requests.len(), 2);
    let sent = requests[1].body.to_string();
    assert!(
        sent.contains("Here is the first part")
            && sent.contains("cut off at the output token limit (64 tokens)"),
        "{family:?}: {sent}"
    );
    assert!(!sent.contains("echo never"), "{family:?}: {sent}");
}

/// A model that declines to answer ends the input with `refusal` after a warning naming the
/// provider and model; its refusal is the answer, and the next input is sent a valid history
/// that says so.
async fn a_refusal_ends_the_input_with_refusal(family: Family) {
    let s = setup_family(family, json!({})).await;
    let (mut c, id) = s.typed().await;
    s.mock
        .push_stream(family.refused("I can't help with that."));
    let events = c.run(&id, "something it will not do").await.unwrap();
    assert_eq!(
        end_reasons(&events)[0],
        ProcessingEndReason::Refusal,
        "{family:?}: {events:?}"
    );
    let warnings = warnings(&events);
    assert_eq!(warnings.len(), 1, "{family:?}: {warnings:?}");
    assert!(
        warnings[0].starts_with(&format!(
            "the model declined to answer ({}/",
            family.provider()
        )),
        "{family:?}: {warnings:?}"
    );
    let answer = if family == Family::Gemini {
        ""
    } else {
        "I can't help with that."
    };
    assert_eq!(texts(&events), [answer]);

    s.mock.push_stream(family.text("Sure."));
    let events = c.run(&id, "something else").await.unwrap();
    assert_eq!(end_reasons(&events)[0], ProcessingEndReason::Completed);
    let sent = s.mock.requests()[1].body.to_string();
    assert!(
        sent.contains("declined to answer the previous request"),
        "{family:?}: {sent}"
    );
}

/// A follow-up queued while the model refuses waits for the next input, as after a cut-off
/// answer: the refused request is still in the context, and a client that queued it is told
/// `refusal`, not the follow-up's outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_queued_during_a_refusal_waits_for_the_next_input() {
    let mut s = setup_family(Family::Anthropic, json!({})).await;
    let (mut c, id) = s.typed().await;
    let gate = Gate::new();
    let mut refused = vec![Chunk::Wait(gate.clone())];
    refused.extend(Family::Anthropic.refused("I won't."));
    s.mock.push_stream(refused);
    c.start(&id, "refused").await.unwrap();
    s.mock.wait_requests(1).await;
    s.call("session/follow_up", json!({"text": "queued"})).await;
    gate.open();
    let events = c
        .until(|e| matches!(e, EventBody::ProcessingEnd { .. }))
        .await
        .unwrap();
    assert_eq!(end_reasons(&events)[0], ProcessingEndReason::Refusal);
    let queue = s.call("session/queue", json!({})).await;
    assert_eq!(queue["follow_up"][0]["text"], "queued", "{queue}");
    assert_eq!(s.mock.requests().len(), 1, "the follow-up did not run");
    let warning = &warnings(&events)[0];
    assert!(warning.contains("session/rollback"), "{warning}");
}

/// `agentctl submit --follow` exits 6 when the model declined to answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentctl_exits_6_when_the_model_refuses() {
    let s = setup_family(Family::Anthropic, json!({})).await;
    s.mock
        .push_stream(Family::Anthropic.refused("I won't do that."));
    let out = s
        .daemon
        .agentctl(&["submit", "--follow", &s.session, "do it"], None)
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "I won't do that.\n");
    assert!(stderr.contains("the model declined to answer"), "{stderr}");
}

/// `agentctl submit --follow` exits 3 when the answer was cut off, so scripts can tell a
/// partial answer from a whole one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentctl_exits_5_when_the_answer_is_cut_off() {
    let s = setup_family(Family::Chat, json!({})).await;
    s.mock
        .push_stream(Family::Chat.cut_off("the beginning of a long", &[]));
    let out = s
        .daemon
        .agentctl(&["submit", "--follow", &s.session, "write a lot"], None)
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "the beginning of a long\n"
    );
    assert!(
        stderr.contains("cut off at the output token limit (max_output_tokens = "),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_session_switches_provider_model_and_effort_between_inputs() {
    let mut s = setup_family(Family::Anthropic, json!({})).await;
    let (mut c, id) = s.typed().await;
    s.mock.push_stream(Family::Anthropic.text("from claude"));
    c.run(&id, "first").await.unwrap();

    let snapshot = s
        .client
        .call(
            "session/set_config",
            json!({"session_id": s.session, "config": {"provider": "gemini"}}),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            snapshot["config"]["provider"].as_str(),
            snapshot["config"]["model"].as_str()
        ),
        (Some("gemini"), Some("gemini-mock"))
    );
    s.mock.push_stream(Family::Gemini.text("from gemini"));
    c.run(&id, "second").await.unwrap();

    s.client
        .call("session/set_config", json!({"session_id": s.session, "config": {"provider": "openai", "model": "gpt-mock-2", "reasoning_effort": "low"}}))
        .await
        .unwrap();
    s.mock.push_stream(Family::OpenAi.text("from gpt"));
    let events = c.run(&id, "third").await.unwrap();
    assert_eq!(texts(&events), ["from gpt"]);

    let requests = s.mock.requests();
    let paths: Vec<&str> = requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            Family::Anthropic.path(),
            Family::Gemini.path(),
            Family::OpenAi.path()
        ]
    );
    // Each provider gets the whole conversation in its own format.
    let gemini = &requests[1].body["contents"];
    assert_eq!(
        gemini[0],
        json!({"role": "user", "parts": [{"text": "first"}]})
    );
    assert_eq!(
        gemini[1],
        json!({"role": "model", "parts": [{"text": "from claude"}]})
    );
    let openai = &requests[2].body;
    assert_eq!(openai["model"], "gpt-mock-2");
    assert_eq!(
        openai["reasoning"],
        json!({"effort": "low", "summary": "auto"})
    );
    assert_eq!(
        openai["input"][3],
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "from gemini"}]})
    );

    let unknown = s
        .client
        .request(
            "session/set_config",
            json!({"session_id": s.session, "config": {"provider": "nope"}}),
        )
        .await
        .unwrap();
    assert_eq!(unknown["error"]["data"]["kind"], "invalid_config");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ollama_endpoint_from_three_lines_of_config_is_listed() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = Family::daemon(&mock).await.unwrap();
    let out = daemon.agentctl(&["models"], None).await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        text.lines().any(|l| l.starts_with("local")
            && l.contains("openai_chat")
            && l.contains("local-model")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("gemini") && l.contains("gemini-mock")),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_price_table_turns_usage_into_cost() {
    let s = setup_family(Family::Gemini, json!({})).await;
    let (mut c, id) = s.typed().await;
    s.mock.push_stream(Family::Gemini.text("priced"));
    s.mock.push_stream(Family::Gemini.text("again"));
    c.run(&id, "one").await.unwrap();
    let events = c.run(&id, "two").await.unwrap();
    // 100 uncached input at $1/M, 50 cached at the input price, 20 output at $2/M.
    let usage = each!(events, EventBody::Usage { call, total } => (call, total))[0];
    assert!(
        (usage.0.cost_usd.unwrap() - 0.000_19).abs() < 1e-12,
        "{usage:?}"
    );
    assert!(
        (usage.1.cost_usd.unwrap() - 0.000_38).abs() < 1e-12,
        "{usage:?}"
    );
    let snapshot = c
        .call::<SessionGet>(SessionParams { session_id: id })
        .await
        .unwrap();
    assert!((snapshot.usage.cost_usd.unwrap() - 0.000_38).abs() < 1e-12);
}

each_family!(an_image_reaches_models_that_take_images);

async fn an_image_reaches_models_that_take_images(family: Family) {
    let s = setup_family(family, json!({})).await;
    let (mut c, id) = s.typed().await;
    // Not a real picture: the bytes only need to survive the trip, base64-encoded.
    std::fs::write(s.workdir.path().join("shot.png"), b"\x89PNG\r\n\x1a\nfake").unwrap();
    s.mock
        .push_stream(family.tools("", &[("i1", "read_file", json!({"file_path": "shot.png"}))]));
    s.mock.push_stream(family.text("I see it."));
    let events = c.run(&id, "look at shot.png").await.unwrap();
    let (output, error) = each!(events, EventBody::ToolCallEnd { output, error, .. } =>
        (output.as_deref(), error.as_deref()))[0];
    let request = serde_json::to_string(&s.mock.requests()[1].body).unwrap();
    let encoded = "iVBORw0KGgpmYWtl";
    if family == Family::Chat {
        assert_eq!(
            error,
            Some(
                "Tool error (read_file): shot.png is an image, and the current model does not take images"
            )
        );
        assert!(!request.contains(encoded));
    } else {
        assert_eq!(
            output,
            Some("Image shot.png (image/png, 12 bytes) is attached."),
            "{family:?}"
        );
        let placed = match family {
            Family::Anthropic => {
                json!({"data": encoded, "media_type": "image/png", "type": "base64"})
            }
            Family::OpenAi => json!({"image_url": format!("data:image/png;base64,{encoded}")}),
            _ => json!({"inlineData": {"data": encoded, "mimeType": "image/png"}}),
        };
        assert!(
            holds(&s.mock.requests()[1].body, &placed),
            "{family:?}: {request}"
        );
    }
}

/// Whether some object in `value` has every field of `part` with the same value (`part`'s
/// nested objects matched the same way), whatever the order of keys.
pub(crate) fn holds(value: &Value, part: &Value) -> bool {
    fn matches(v: &Value, p: &Value) -> bool {
        match (v, p) {
            (Value::Object(v), Value::Object(p)) => p
                .iter()
                .all(|(k, pv)| v.get(k).is_some_and(|vv| matches(vv, pv))),
            _ => v == p,
        }
    }
    matches(value, part)
        || match value {
            Value::Object(o) => o.values().any(|v| holds(v, part)),
            Value::Array(a) => a.iter().any(|v| holds(v, part)),
            _ => false,
        }
}
