//! The agentic loop through the socket: tool round trips, streaming, steering, follow-ups,
//! tool errors the model can recover from, limits and loop detection. Requests go through the
//! typed client's method table and events are read as `EventBody` ([`agentd_tests::Client`]).

use crate::{end_reasons, last_user_blocks, setup, setup_with, texts, warnings};
use agentd_proto::methods::{
    SessionFollowUp, SessionGet, SessionSetConfig, SessionSteer, SessionSubmit,
};
use agentd_proto::{
    ConfigPatch, Disposition, ErrorKind, Event, EventBody, LimitKind, ProcessingEndReason,
    SessionId, SessionParams, SessionState, SetConfigParams, TextParams,
};
use agentd_tests::client::submit;
use agentd_tests::mock::{Chunk, Gate};
use agentd_tests::sse;
use serde_json::json;

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.body.kind()).collect()
}

/// Each `tool_call_end`'s call id, output and error.
fn tool_ends(events: &[Event]) -> Vec<(&str, Option<&str>, Option<&str>)> {
    each!(events, EventBody::ToolCallEnd { call_id, output, error, .. } =>
        (call_id.as_str(), output.as_deref(), error.as_deref()))
}

fn get(id: &SessionId) -> SessionParams {
    SessionParams {
        session_id: id.clone(),
    }
}

fn text(id: &SessionId, text: &str) -> TextParams {
    TextParams {
        session_id: id.clone(),
        text: text.into(),
        images: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_round_trip_completes() {
    let mut s = setup().await;
    let (mut c, id) = s.typed().await;
    s.mock.push_stream(sse::tools(
        "Let me look.",
        &[(
            "toolu_1",
            "shell",
            json!({"command": "echo hello-from-shell"}),
        )],
    ));
    s.mock.push_stream(sse::text("The shell said hello."));
    let events = c.run(&id, "say hello").await.unwrap();

    assert_eq!(
        kinds(&events),
        [
            "state_changed",
            "user_input",
            "assistant_text_start",
            "assistant_text_delta",
            "assistant_text_delta",
            "assistant_text_delta",
            "usage",
            "assistant_text_end",
            "tool_call_start",
            "tool_call_output_delta",
            "tool_call_end",
            "assistant_text_start",
            "assistant_text_delta",
            "assistant_text_delta",
            "assistant_text_delta",
            "assistant_text_delta",
            "usage",
            "assistant_text_end",
            "processing_end",
        ]
    );
    let end = tool_ends(&events)[0];
    assert_eq!(end.0, "toolu_1");
    assert!(
        end.1
            .unwrap()
            .starts_with("hello-from-shell\n[exit code: 0"),
        "{end:?}"
    );
    assert_eq!(texts(&events)[1], "The shell said hello.");
    assert_eq!(end_reasons(&events), [ProcessingEndReason::Completed]);
    // seq is gapless.
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");

    let requests = s.mock.requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0];
    assert_eq!(first.header("x-api-key"), Some("test-key"));
    assert_eq!(first.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(first.body["stream"], true);
    assert_eq!(
        first.body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "say hello", "cache_control": {"type": "ephemeral"}}]}])
    );
    let tool_names: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tool_names,
        [
            "read_file",
            "write_file",
            "edit_file",
            "shell",
            "grep",
            "glob",
            "spawn_agent",
            "send_input",
            "wait",
            "close_agent"
        ]
    );
    assert!(
        first.body["system"][0]["text"]
            .as_str()
            .unwrap()
            .contains(&format!(
                "Working directory: {}",
                s.workdir.path().display()
            ))
    );
    let result = &last_user_blocks(&requests[1].body)[0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_1");
    assert_eq!(result["is_error"], false);
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .starts_with("hello-from-shell\n")
    );

    let snapshot = c.call::<SessionGet>(get(&id)).await.unwrap();
    assert_eq!(snapshot.state, SessionState::Idle);
    assert_eq!(
        serde_json::to_value(snapshot.usage).unwrap(),
        json!({"input_tokens": 200, "output_tokens": 40, "cache_read_tokens": 100, "cache_write_tokens": 0, "reasoning_tokens": 0})
    );
    let history = s.call("session/history", json!({})).await;
    let types: Vec<&str> = history["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["user", "assistant", "tool_results", "assistant"]);
    assert_eq!(history["total"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_deltas_arrive_before_the_turn_ends() {
    let s = setup().await;
    let (mut c, id) = s.typed().await;
    let gate = Gate::new();
    let mut chunks = vec![sse::message_start()];
    let block = sse::text_block(0, "first part, then more");
    chunks.extend(block[..3].iter().cloned());
    chunks.push(Chunk::Wait(gate.clone()));
    chunks.extend(block[3..].iter().cloned());
    chunks.extend(sse::message_end("end_turn"));
    s.mock.push_stream(chunks);

    c.start(&id, "go").await.unwrap();
    let early = c
        .until(|e| matches!(e, EventBody::AssistantTextDelta { .. }))
        .await
        .unwrap();
    assert_eq!(
        early.last().unwrap().body,
        EventBody::AssistantTextDelta {
            delta: "first".into()
        }
    );
    // The model is still mid-response: the session is processing and no text_end exists.
    let snapshot = c.call::<SessionGet>(get(&id)).await.unwrap();
    assert_eq!(snapshot.state, SessionState::Processing);
    gate.open();
    let rest = c
        .until(|e| matches!(e, EventBody::ProcessingEnd { .. }))
        .await
        .unwrap();
    assert_eq!(texts(&rest)[0], "first part, then more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_during_a_tool_call_reaches_the_next_request() {
    let s = setup().await;
    let (mut c, id) = s.typed().await;
    let flag = s.workdir.path().join("go");
    s.mock.push_stream(sse::shell(
        "toolu_wait",
        &format!(
            "while [ ! -f {} ]; do sleep 0.02; done; echo released",
            flag.display()
        ),
    ));
    s.mock.push_stream(sse::text("Adjusted."));
    c.start(&id, "long task").await.unwrap();
    c.until(|e| matches!(e, EventBody::ToolCallStart { .. }))
        .await
        .unwrap();

    let steered = c
        .call::<SessionSteer>(text(&id, "use the short path"))
        .await
        .unwrap();
    assert_eq!(steered.disposition, Disposition::Steering);
    std::fs::write(&flag, "").unwrap();
    let events = c
        .until(|e| matches!(e, EventBody::ProcessingEnd { .. }))
        .await
        .unwrap();
    let order = kinds(&events);
    let end = order.iter().position(|k| *k == "tool_call_end").unwrap();
    let injected = order
        .iter()
        .position(|k| *k == "steering_injected")
        .unwrap();
    assert!(
        end < injected,
        "steering is injected after the tool round: {order:?}"
    );

    let requests = s.mock.wait_requests(2).await;
    let blocks = last_user_blocks(&requests[1].body);
    assert_eq!(blocks[0]["type"], "tool_result");
    assert_eq!(blocks[1]["text"], "use the short path");
    assert!(
        last_user_blocks(&requests[0].body)
            .iter()
            .all(|b| b["text"] != "use the short path")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_up_runs_after_completion() {
    let s = setup().await;
    let (mut c, id) = s.typed().await;
    let gate = Gate::new();
    let mut first = sse::text("one");
    first.insert(1, Chunk::Wait(gate.clone()));
    s.mock.push_stream(first);
    s.mock.push_stream(sse::text("two"));
    c.start(&id, "first").await.unwrap();
    c.until(|e| matches!(e, EventBody::UserInput { .. }))
        .await
        .unwrap();
    let queued = c
        .call::<SessionSubmit>(submit(&id, "second"))
        .await
        .unwrap();
    assert_eq!(
        (queued.disposition, queued.queued),
        (Disposition::FollowUp, true)
    );
    let by_method = c.call::<SessionFollowUp>(text(&id, "third")).await.unwrap();
    assert_eq!(by_method.disposition, Disposition::FollowUp);
    s.mock.push_stream(sse::text("three"));
    gate.open();

    let events = c
        .until(|e| matches!(e, EventBody::ProcessingEnd { .. }))
        .await
        .unwrap();
    let inputs = each!(events, EventBody::UserInput { text, .. } => text.as_str());
    assert_eq!(inputs, ["second", "third"]);
    assert_eq!(
        end_reasons(&events).len(),
        1,
        "one processing cycle covers the follow-ups"
    );
    assert_eq!(texts(&events), ["one", "two", "three"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_errors_go_back_to_the_model() {
    let s = setup().await;
    let (mut c, id) = s.typed().await;
    s.mock.push_stream(sse::tools(
        "",
        &[
            ("t_unknown", "web_search", json!({"q": "x"})),
            ("t_invalid", "shell", json!({"command": 42})),
            (
                "t_failing",
                "shell",
                json!({"command": "echo oops >&2; exit 3"}),
            ),
            (
                "t_missing",
                "read_file",
                json!({"file_path": "no/such/file.txt"}),
            ),
        ],
    ));
    s.mock.push_stream(sse::text("Recovered."));
    let events = c.run(&id, "break things").await.unwrap();

    // Calls run in parallel, so their end events come in completion order; look them up by id.
    let ends = tool_ends(&events);
    let error = |id: &str| ends.iter().find(|e| e.0 == id).unwrap().2.unwrap();
    let errors = [
        error("t_unknown"),
        error("t_invalid"),
        error("t_failing"),
        error("t_missing"),
    ];
    assert_eq!(
        errors[0],
        "Unknown tool: web_search. Available tools: read_file, write_file, edit_file, shell, grep, glob, spawn_agent, send_input, wait, close_agent"
    );
    assert_eq!(
        errors[1],
        "Invalid arguments for tool shell: /command: 42 is not of type \"string\""
    );
    assert!(
        errors[2].starts_with("Tool error (shell): oops\n[exit code: 3, duration: "),
        "{}",
        errors[2]
    );
    assert!(
        errors[3].starts_with("Tool error (read_file): file not found: "),
        "{}",
        errors[3]
    );

    let requests = s.mock.wait_requests(2).await;
    let results = last_user_blocks(&requests[1].body);
    assert_eq!(results.len(), 4);
    assert!(results.iter().all(|r| r["is_error"] == true));
    let ids: Vec<&str> = results
        .iter()
        .map(|r| r["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["t_unknown", "t_invalid", "t_failing", "t_missing"],
        "results keep call order"
    );
    assert_eq!(end_reasons(&events), [ProcessingEndReason::Completed]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_file_numbers_lines_and_keeps_the_full_output_in_the_event() {
    let s = setup().await;
    let (mut c, id) = s.typed().await;
    let big = "x".repeat(120_000);
    std::fs::write(s.workdir.path().join("small.txt"), "alpha\nbeta\ngamma\n").unwrap();
    std::fs::write(s.workdir.path().join("big.txt"), &big).unwrap();
    s.mock.push_stream(sse::tools(
        "",
        &[
            (
                "r1",
                "read_file",
                json!({"file_path": "small.txt", "offset": 2, "limit": 1}),
            ),
            (
                "r2",
                "read_file",
                json!({"file_path": s.workdir.path().join("big.txt")}),
            ),
        ],
    ));
    s.mock.push_stream(sse::text("done"));
    let events = c.run(&id, "read").await.unwrap();
    let ends = tool_ends(&events);
    let output = |id: &str| ends.iter().find(|e| e.0 == id).unwrap().1.unwrap();
    assert_eq!(
        output("r1"),
        "  2 | beta\n(1 more lines; continue with offset 3)\n"
    );
    assert_eq!(output("r2"), format!("  1 | {big}\n"));
    let results = last_user_blocks(&s.mock.wait_requests(2).await[1].body);
    let truncated = results[1]["content"].as_str().unwrap();
    assert!(
        truncated.len() < 51_000,
        "the model gets the truncated output"
    );
    assert!(
        truncated.contains(
            "[WARNING: Tool output was truncated. 70007 characters were removed from the middle."
        ),
        "{}",
        &truncated[24_000..25_500]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_limit_stops_the_loop() {
    let s = setup_with(json!({"config": {"max_tool_rounds_per_input": 2}})).await;
    let (mut c, id) = s.typed().await;
    s.mock
        .respond_with(|_| agentd_tests::mock::Reply::Stream(sse::shell("t", "true")));
    let events = c.run(&id, "loop forever").await.unwrap();
    let limit = each!(events, EventBody::TurnLimit { limit, count } => (*limit, *count));
    assert_eq!(limit[0], (LimitKind::MaxToolRoundsPerInput, 2));
    assert_eq!(end_reasons(&events), [ProcessingEndReason::TurnLimit]);
    assert_eq!(s.mock.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_turn_limit_applies_across_inputs() {
    let s = setup_with(json!({"config": {"max_turns": 1}})).await;
    let (mut c, id) = s.typed().await;
    s.mock.push_stream(sse::text("first answer"));
    c.run(&id, "one").await.unwrap();
    let events = c.run(&id, "two").await.unwrap();
    let limit = each!(events, EventBody::TurnLimit { limit, count } => (*limit, *count));
    assert_eq!(limit[0], (LimitKind::MaxTurns, 1));
    assert_eq!(s.mock.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeating_calls_trigger_loop_detection() {
    let s =
        setup_with(json!({"config": {"loop_detection_window": 4, "max_tool_rounds_per_input": 5}}))
            .await;
    let (mut c, id) = s.typed().await;
    s.mock
        .respond_with(|_| agentd_tests::mock::Reply::Stream(sse::shell("t", "echo same")));
    let events = c.run(&id, "repeat").await.unwrap();
    let detections = each!(events, EventBody::LoopDetection { message } => message.as_str());
    assert!(!detections.is_empty());
    assert_eq!(
        detections[0],
        "Loop detected: the last 4 tool calls follow a repeating pattern. Try a different approach."
    );
    // The warning reaches the model as a user message after the tool results.
    let requests = s.mock.requests();
    let blocks = last_user_blocks(&requests[4].body);
    assert!(
        blocks.iter().any(|b| b["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Loop detected"))),
        "{blocks:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_config_applies_from_the_next_call() {
    let s = setup().await;
    let (mut c, id) = s.typed().await;
    s.mock.push_stream(sse::text("a"));
    c.run(&id, "one").await.unwrap();
    let patch = |patch: serde_json::Value| SetConfigParams {
        session_id: id.clone(),
        config: serde_json::from_value::<ConfigPatch>(patch).unwrap(),
    };
    let snapshot = c
        .call::<SessionSetConfig>(patch(
            json!({"model": "claude-other", "reasoning_effort": "high", "max_output_tokens": 32000}),
        ))
        .await
        .unwrap();
    assert_eq!(snapshot.config.model, "claude-other");
    s.mock.push_stream(sse::text("b"));
    c.run(&id, "two").await.unwrap();
    let requests = s.mock.requests();
    assert_eq!(requests[0].body["model"], "claude-sonnet-4-5");
    assert!(requests[0].body.get("thinking").is_none());
    assert_eq!(requests[1].body["model"], "claude-other");
    assert_eq!(
        requests[1].body["thinking"],
        json!({"type": "enabled", "budget_tokens": 24576})
    );
    let bad = c
        .request::<SessionSetConfig>(patch(json!({"loop_detection_window": 1})))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(bad.data.unwrap().kind, ErrorKind::InvalidConfig);
    assert!(bad.message.contains("loop_detection_window"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_not_in_the_command_environment() {
    let mock = agentd_tests::mock::MockProvider::start().await.unwrap();
    let daemon = agentd_tests::TestDaemon::start_with(&[
        ("ANTHROPIC_BASE_URL", &mock.url),
        ("ANTHROPIC_API_KEY", "sk-secret-value"),
        ("GITHUB_TOKEN", "ghp-secret"),
        ("DB_PASSWORD", "pw"),
        ("CARGO_HOME", "/opt/cargo"),
    ])
    .await
    .unwrap();
    let mut client = daemon.client().await.unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let session = daemon
        .create_session(&mut client, workdir.path(), json!({}))
        .await
        .unwrap();
    mock.push_stream(sse::shell("env", "env | sort"));
    mock.push_stream(sse::text("ok"));
    let mut client = agentd_tests::Client::from(client);
    let events = client.run(&SessionId(session), "env").await.unwrap();
    let output = tool_ends(&events)[0].1.unwrap().to_owned();
    assert!(
        output.contains("PATH=")
            && output.contains("HOME=")
            && output.contains("CARGO_HOME=/opt/cargo"),
        "{output}"
    );
    for secret in [
        "ANTHROPIC_API_KEY",
        "GITHUB_TOKEN",
        "DB_PASSWORD",
        "sk-secret-value",
    ] {
        assert!(!output.contains(secret), "{secret} leaked: {output}");
    }
    let all = serde_json::to_string(&events).unwrap();
    assert!(!all.contains("sk-secret-value"), "the key is in no event");
    assert!(
        !daemon.log_text().contains("sk-secret-value"),
        "the key is in no log line"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_usage_past_80_percent_warns() {
    let s = setup_with(json!({"config": {"context_window_tokens": 100}})).await;
    let (mut c, id) = s.typed().await;
    s.mock.push_stream(sse::text("short"));
    let prompt = "word ".repeat(100); // ~500 characters, ~125 tokens
    let events = c.run(&id, &prompt).await.unwrap();
    assert_eq!(
        warnings(&events)[0],
        "Context usage at ~125% of context window"
    );
    assert_eq!(
        end_reasons(&events),
        [ProcessingEndReason::Completed],
        "the warning is informational"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_command_is_killed_with_its_children() {
    let s = setup().await;
    let (mut c, id) = s.typed().await;
    // The main process ignores SIGTERM, so only the SIGKILL two seconds later ends it.
    let command = "echo PGID=$$; sleep 1000 & trap '' TERM; echo partial; sleep 1000";
    s.mock.push_stream(sse::tools(
        "",
        &[("t", "shell", json!({"command": command, "timeout_ms": 300}))],
    ));
    s.mock.push_stream(sse::text("understood"));
    let events = c.run(&id, "slow").await.unwrap();
    let (error, duration_ms) = each!(events, EventBody::ToolCallEnd { error, duration_ms, .. } =>
        (error.as_deref().unwrap(), *duration_ms))[0];
    assert!(error.contains("partial\n"), "{error}");
    assert!(
        error.ends_with("[ERROR: Command timed out after 300ms. Partial output is shown above. You can retry with a longer timeout by setting the timeout_ms parameter.]"),
        "{error}"
    );
    assert!(
        duration_ms >= 2000,
        "SIGKILL came after the 2 s grace: {duration_ms} ms"
    );
    let pgid: i32 = error
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("Tool error (shell): PGID=")
        .parse()
        .unwrap();
    assert_eq!(agentd_tests::live_group_members(pgid), Vec::<i32>::new());
    let result = &last_user_blocks(&s.mock.requests()[1].body)[0];
    assert_eq!(result["is_error"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_megabyte_single_line_is_truncated_for_the_model_only() {
    let s = setup().await;
    let (mut c, id) = s.typed().await;
    let line = "y".repeat(10 * 1024 * 1024);
    std::fs::write(s.workdir.path().join("huge.csv"), &line).unwrap();
    s.mock.push_stream(sse::tools(
        "",
        &[("h", "read_file", json!({"file_path": "huge.csv"}))],
    ));
    s.mock.push_stream(sse::text("too big to read whole"));
    let events = c.run(&id, "read huge.csv").await.unwrap();
    let output = tool_ends(&events)[0].1.unwrap().len();
    assert_eq!(
        output,
        line.len() + "  1 | \n".len(),
        "the event carries all of it"
    );
    let results = last_user_blocks(&s.mock.requests()[1].body);
    let content = results[0]["content"].as_str().unwrap();
    assert!(
        content.len() < 51_000,
        "the model gets at most the read_file limit"
    );
    assert!(content.contains(&format!(
        "[WARNING: Tool output was truncated. {} characters were removed from the middle.",
        line.len() + 7 - 50_000
    )));
}
