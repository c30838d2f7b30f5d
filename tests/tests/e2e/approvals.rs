//! Clients taking part in the work, through the real daemon and mock provider: approvals
//! (asked, allowed, denied, always, by rule, timed out, aborted, answered by another or a
//! reconnected client, several at once), `ask_user` questions and client tools.

use crate::{Setup, eventually, of_kind, setup_with};
use agentd_proto::methods::SessionRespond;
use agentd_proto::{Decision, EventBody, ResolvedBy, RespondParams, SessionId};
use agentd_tests::{Client, sse};
use serde_json::{Value, json};

fn ask(extra: Value) -> Value {
    let mut approval = json!({"mode": "ask"});
    if let (Some(a), Some(e)) = (approval.as_object_mut(), extra.as_object()) {
        a.extend(e.clone());
    }
    json!({"config": {"approval": approval}})
}

fn shell(id: &str, command: &str) -> (String, String, Value) {
    (id.into(), "shell".into(), json!({"command": command}))
}

fn push_calls(s: &Setup, calls: &[(String, String, Value)]) {
    let calls: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(i, n, a)| (i.as_str(), n.as_str(), a.clone()))
        .collect();
    s.mock.push_stream(sse::tools("", &calls));
}

/// The text of every tool result the model was sent in the last recorded request.
fn results_sent(s: &Setup) -> Vec<String> {
    let requests = s.mock.requests();
    let last = requests.last().expect("a request");
    let messages = last.body["messages"].as_array().unwrap();
    messages.last().unwrap()["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| match &b["content"] {
            Value::String(t) => t.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// Subscribes from the newest event, submits, and reads up to the first `kind`.
async fn submit_until(s: &mut Setup, text: &str, kind: &str) -> Vec<Value> {
    let since = s.call("session/get", json!({})).await["last_seq"].as_u64();
    s.client.subscribe(&s.session, since).await.unwrap();
    s.call("session/submit", json!({"text": text})).await;
    s.until(kind).await
}

fn request_id(event: &Value) -> String {
    event["data"]["request_id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_command_runs_after_the_answer() {
    let mut s = setup_with(ask(json!({}))).await;
    push_calls(&s, &[shell("c1", "echo approved > out.txt")]);
    s.mock.push_stream(sse::text("done"));
    let events = submit_until(&mut s, "write it", "approval_requested").await;
    let asked = events.last().unwrap();
    assert_eq!(asked["data"]["tool"], "shell");
    assert_eq!(asked["data"]["call_id"], "c1");
    assert_eq!(asked["data"]["summary"], "$ echo approved > out.txt");
    let state = s.until("state_changed").await;
    assert_eq!(state.last().unwrap()["data"]["state"], "awaiting_input");

    // Nothing ran yet, and session/get shows what waits.
    assert!(!s.workdir.path().join("out.txt").exists());
    let snapshot = s.call("session/get", json!({})).await;
    assert_eq!(snapshot["state"], "awaiting_input");
    let pending = snapshot["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0]["request_id"], asked["data"]["request_id"]);
    assert_eq!(pending[0]["type"], "approval");
    assert_eq!(pending[0]["summary"], "$ echo approved > out.txt");

    let answer = s
        .call(
            "session/respond",
            json!({"request_id": request_id(asked), "decision": "allow"}),
        )
        .await;
    assert_eq!(answer["pending"], 0);
    let rest = s.until("processing_end").await;
    let resolved = of_kind(&rest, "approval_resolved");
    assert_eq!(resolved[0]["data"]["decision"], "allow");
    assert_eq!(resolved[0]["data"]["by"], "client");
    let states: Vec<&Value> = of_kind(&rest, "state_changed")
        .iter()
        .map(|e| &e["data"]["state"])
        .collect();
    // `idle` comes right after `processing_end`.
    assert_eq!(states, [&json!("processing")]);
    assert_eq!(
        std::fs::read_to_string(s.workdir.path().join("out.txt")).unwrap(),
        "approved\n"
    );
    assert_eq!(
        of_kind(&rest, "processing_end")[0]["data"]["reason"],
        "completed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_is_not_run_and_the_model_reads_the_message() {
    let mut s = setup_with(ask(json!({}))).await;
    push_calls(
        &s,
        &[(
            "w1".into(),
            "write_file".into(),
            json!({"file_path": "notes.txt", "content": "one\ntwo\n"}),
        )],
    );
    s.mock.push_stream(sse::text("understood"));
    let events = submit_until(&mut s, "write notes", "approval_requested").await;
    let asked = events.last().unwrap();
    let summary = asked["data"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("+++ notes.txt") && summary.contains("+one\n+two"),
        "{summary}"
    );
    s.call(
        "session/respond",
        json!({"request_id": request_id(asked), "decision": "deny", "message": "use docs/ instead"}),
    )
    .await;
    let rest = s.until("processing_end").await;
    let resolved = of_kind(&rest, "approval_resolved")[0];
    assert_eq!(resolved["data"]["decision"], "deny");
    assert_eq!(resolved["data"]["message"], "use docs/ instead");
    let end = of_kind(&rest, "tool_call_end")[0];
    let error = end["data"]["error"].as_str().unwrap();
    assert!(
        error.contains("Refused by the user") && error.contains("use docs/ instead"),
        "{error}"
    );
    assert!(!s.workdir.path().join("notes.txt").exists());
    let sent = results_sent(&s);
    assert!(sent[0].contains("use docs/ instead"), "{sent:?}");
    // The loop went on: the model answered after the refusal.
    assert_eq!(
        of_kind(&rest, "processing_end")[0]["data"]["reason"],
        "completed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_asks_once_for_ten_identical_commands() {
    let mut s = setup_with(ask(json!({}))).await;
    push_calls(&s, &[shell("a0", "echo same >> log.txt")]);
    let nine: Vec<_> = (1..10)
        .map(|i| shell(&format!("a{i}"), "echo same >> log.txt"))
        .collect();
    push_calls(&s, &nine);
    s.mock.push_stream(sse::text("ten times"));
    let events = submit_until(&mut s, "append ten times", "approval_requested").await;
    s.call(
        "session/respond",
        json!({"request_id": request_id(events.last().unwrap()), "decision": "allow_always"}),
    )
    .await;
    let rest = s.until("processing_end").await;
    assert!(
        of_kind(&rest, "approval_requested").is_empty(),
        "asked again"
    );
    let by_rule = of_kind(&rest, "approval_resolved")
        .iter()
        .filter(|e| e["data"]["by"] == "rule")
        .count();
    assert_eq!(by_rule, 9);
    let log = std::fs::read_to_string(s.workdir.path().join("log.txt")).unwrap();
    assert_eq!(log.lines().count(), 10);
    let config = s.call("session/get", json!({})).await["config"].clone();
    assert_eq!(
        config["approval"]["allow"],
        json!(["shell(echo same >> log.txt)"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_allow_and_deny_without_a_question() {
    let mut s = setup_with(ask(json!({
        "allow": ["shell(echo *)"],
        "deny": ["shell(rm *)", "write_file(secrets/**)"],
    })))
    .await;
    std::fs::write(s.workdir.path().join("keep.txt"), "x").unwrap();
    push_calls(
        &s,
        &[
            shell("r1", "echo ruled > ok.txt"),
            shell("r2", "rm keep.txt"),
            (
                "r3".into(),
                "write_file".into(),
                json!({"file_path": "./secrets/../secrets/k", "content": "k"}),
            ),
        ],
    );
    s.mock.push_stream(sse::text("ok"));
    let events = s.run("go").await;
    assert!(of_kind(&events, "approval_requested").is_empty());
    let resolved: Vec<(String, String, String)> = of_kind(&events, "approval_resolved")
        .iter()
        .map(|e| {
            (
                e["data"]["call_id"].as_str().unwrap().to_owned(),
                e["data"]["decision"].as_str().unwrap().to_owned(),
                e["data"]["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut resolved = resolved;
    resolved.sort();
    assert_eq!(
        resolved,
        [
            ("r1".into(), "allow".into(), "shell(echo *)".into()),
            ("r2".into(), "deny".into(), "shell(rm *)".into()),
            ("r3".into(), "deny".into(), "write_file(secrets/**)".into()),
        ]
    );
    assert!(s.workdir.path().join("ok.txt").exists());
    assert!(s.workdir.path().join("keep.txt").exists());
    assert!(!s.workdir.path().join("secrets").exists());
    let sent = results_sent(&s);
    assert!(sent[1].contains("`shell(rm *)`"), "{sent:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_request_is_denied_at_its_timeout_and_the_loop_goes_on() {
    let mut s = setup_with(ask(json!({"timeout_ms": 300}))).await;
    push_calls(&s, &[shell("t1", "touch never.txt")]);
    s.mock.push_stream(sse::text("nobody answered"));
    let events = s.run("try").await;
    let resolved = of_kind(&events, "approval_resolved")[0];
    assert_eq!(resolved["data"]["by"], "timeout");
    assert_eq!(resolved["data"]["decision"], "deny");
    assert!(!s.workdir.path().join("never.txt").exists());
    assert!(results_sent(&s)[0].contains("nobody approved this call"));
    assert_eq!(
        of_kind(&events, "processing_end")[0]["data"]["reason"],
        "completed"
    );
    // A late answer is told what happened.
    let late = s
        .request(
            "session/respond",
            json!({"request_id": request_id(resolved), "decision": "allow"}),
        )
        .await;
    assert_eq!(late["error"]["data"]["kind"], "request_not_found");
    let message = late["error"]["message"].as_str().unwrap();
    assert!(message.contains("settled by its timeout"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_settles_waiting_requests_and_runs_nothing() {
    let mut s = setup_with(ask(json!({}))).await;
    push_calls(&s, &[shell("x1", "touch aborted.txt")]);
    let events = submit_until(&mut s, "go", "approval_requested").await;
    let id = request_id(events.last().unwrap());
    let aborted = s.call("session/abort", json!({})).await;
    assert_eq!(aborted["aborted"], true);
    assert_eq!(aborted["state"], "idle");
    let rest = s.until("processing_end").await;
    let resolved = of_kind(&rest, "approval_resolved")[0];
    assert_eq!(resolved["data"]["by"], "abort");
    assert_eq!(
        of_kind(&rest, "processing_end")[0]["data"]["reason"],
        "aborted"
    );
    assert!(!s.workdir.path().join("aborted.txt").exists());
    assert!(
        s.call("session/get", json!({})).await["pending"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let late = s
        .request(
            "session/respond",
            json!({"request_id": id, "decision": "allow"}),
        )
        .await;
    assert_eq!(late["error"]["data"]["kind"], "request_not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_client_answers_after_the_first_left_and_a_reconnected_one_finds_it() {
    let mut s = setup_with(ask(json!({}))).await;
    push_calls(
        &s,
        &[
            shell("p1", "echo one > one.txt"),
            shell("p2", "echo two > two.txt"),
        ],
    );
    s.mock.push_stream(sse::text("both"));
    submit_until(&mut s, "two things", "approval_requested").await;
    // The first client leaves while both calls of the round wait.
    let session = s.session.clone();
    drop(std::mem::replace(
        &mut s.client,
        s.daemon.client().await.unwrap(),
    ));
    let mut pending = Vec::new();
    eventually("both calls to wait for an answer", async || {
        let snapshot = s.call("session/get", json!({})).await;
        pending = snapshot["pending"].as_array().unwrap().clone();
        pending.len() == 2 && snapshot["state"] == "awaiting_input"
    })
    .await;
    let since = s.call("session/get", json!({})).await["last_seq"].as_u64();
    s.client.subscribe(&session, since).await.unwrap();
    // A second client answers one, a third (reconnected) the other.
    let mut other = s.daemon.client().await.unwrap();
    other
        .call(
            "session/respond",
            json!({"session_id": session, "request_id": pending[0]["request_id"], "decision": "allow"}),
        )
        .await
        .unwrap();
    let left = other
        .call("session/get", json!({"session_id": session}))
        .await
        .unwrap();
    assert_eq!(left["pending"].as_array().unwrap().len(), 1);
    assert_eq!(left["state"], "awaiting_input");
    s.call(
        "session/respond",
        json!({"request_id": pending[1]["request_id"], "decision": "allow"}),
    )
    .await;
    // The first answer wins; a second one is refused clearly.
    let again = other
        .request(
            "session/respond",
            json!({"session_id": session, "request_id": pending[0]["request_id"], "decision": "deny"}),
        )
        .await
        .unwrap();
    assert_eq!(again["error"]["data"]["kind"], "request_not_found");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already answered")
    );
    s.until("processing_end").await;
    assert!(s.workdir.path().join("one.txt").exists());
    assert!(s.workdir.path().join("two.txt").exists());
}

/// Written with the typed client ([`agentd_tests::Client`]): events are matched as
/// `EventBody` variants and requests go through the method table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_user_is_answered() {
    let s = setup_with(json!({"config": {"approval": {"ask_user": true}}})).await;
    let question = json!({"question": "Which database?", "options": ["postgres", "sqlite"]});
    push_calls(&s, &[("q1".into(), "ask_user".into(), question)]);
    s.mock.push_stream(sse::text("ok"));
    let session = SessionId::from(s.session.as_str());
    let mut client = Client::from(s.daemon.client().await.unwrap());
    client.start(&session, "set up storage").await.unwrap();
    let events = client
        .until(|e| matches!(e, EventBody::QuestionRequested { .. }))
        .await
        .unwrap();
    let EventBody::QuestionRequested {
        request_id,
        question,
        options,
        ..
    } = &events.last().unwrap().body
    else {
        unreachable!()
    };
    assert_eq!(question, "Which database?");
    assert_eq!(options, &["postgres", "sqlite"]);
    let respond = |decision, answer: Option<&str>| RespondParams {
        session_id: session.clone(),
        request_id: request_id.clone(),
        decision,
        message: None,
        answer: answer.map(str::to_owned),
        output: None,
        is_error: None,
    };
    // A decision does not answer a question.
    let wrong = client
        .request::<SessionRespond>(respond(Some(Decision::Allow), None))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        wrong
            .message
            .contains("`decision` does not answer it; send `answer`"),
        "{wrong}"
    );
    client
        .call::<SessionRespond>(respond(None, Some("sqlite")))
        .await
        .unwrap();
    let rest = client
        .until(|e| matches!(e, EventBody::ProcessingEnd { .. }))
        .await
        .unwrap();
    let resolved: Vec<_> = rest
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::QuestionResolved { answer, by, .. } => Some((answer.as_deref(), *by)),
            _ => None,
        })
        .collect();
    assert_eq!(resolved, [(Some("sqlite"), ResolvedBy::Client)]);
    let requests = s.mock.requests();
    let second = &requests[1].body["messages"];
    assert!(second.to_string().contains("The user answered: sqlite"));
    // ask_user is offered only when enabled.
    let tools: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"ask_user"), "{tools:?}");
}

/// A question nobody answers is withdrawn after `timeout_ms`, and the model is told. (Apart
/// from the answered one: no round trip has to fit in this short timeout.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_question_times_out() {
    let s =
        setup_with(json!({"config": {"approval": {"ask_user": true, "timeout_ms": 400}}})).await;
    let question = json!({"question": "Which database?", "options": ["postgres", "sqlite"]});
    push_calls(&s, &[("q2".into(), "ask_user".into(), question)]);
    s.mock.push_stream(sse::text("ok"));
    let session = SessionId::from(s.session.as_str());
    let mut client = Client::from(s.daemon.client().await.unwrap());
    let events = client.run(&session, "set up storage").await.unwrap();
    assert!(
        events.iter().any(|e| matches!(
            e.body,
            EventBody::QuestionResolved {
                by: ResolvedBy::Timeout,
                ..
            }
        )),
        "{events:?}"
    );
    assert!(results_sent(&s)[0].contains("nobody answered within"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_tools_are_answered_with_output_or_an_error() {
    let diagnostics = json!({
        "name": "editor_diagnostics",
        "description": "Diagnostics of the open buffers.",
        "parameters": {"type": "object", "properties": {"file": {"type": "string"}}, "required": ["file"]}
    });
    let mut s = setup_with(json!({"config": {"client_tools": [diagnostics]}})).await;
    push_calls(
        &s,
        &[(
            "d1".into(),
            "editor_diagnostics".into(),
            json!({"file": "src/a.rs"}),
        )],
    );
    push_calls(
        &s,
        &[(
            "d2".into(),
            "editor_diagnostics".into(),
            json!({"file": "src/b.rs"}),
        )],
    );
    s.mock.push_stream(sse::text("seen"));
    let events = submit_until(&mut s, "check", "client_tool_requested").await;
    let first = events.last().unwrap();
    assert_eq!(first["data"]["tool"], "editor_diagnostics");
    assert_eq!(first["data"]["arguments"], json!({"file": "src/a.rs"}));
    s.call(
        "session/respond",
        json!({"request_id": request_id(first), "output": "a.rs:3: unused variable"}),
    )
    .await;
    let events = s.until("client_tool_requested").await;
    let second = events.last().unwrap();
    s.call(
        "session/respond",
        json!({"request_id": request_id(second), "output": "no buffer for src/b.rs", "is_error": true}),
    )
    .await;
    let rest = s.until("processing_end").await;
    let ends = of_kind(&rest, "tool_call_end");
    assert_eq!(
        ends[0]["data"]["error"],
        "Tool error (editor_diagnostics): no buffer for src/b.rs"
    );
    let requests = s.mock.requests();
    assert!(
        requests[1].body["messages"]
            .to_string()
            .contains("a.rs:3: unused variable")
    );
    let tools: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"editor_diagnostics"), "{tools:?}");
    assert!(!tools.contains(&"ask_user"), "{tools:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_settings_and_unknown_requests_get_clear_errors() {
    let mut s = setup_with(json!({})).await;
    let shadow = s
        .request(
            "session/set_config",
            json!({"config": {"client_tools": [{"name": "shell", "description": "x", "parameters": {"type": "object"}}]}}),
        )
        .await;
    assert_eq!(shadow["error"]["data"]["kind"], "invalid_config");
    assert!(
        shadow["error"]["message"]
            .as_str()
            .unwrap()
            .contains("may not shadow")
    );
    let rule = s
        .request(
            "session/set_config",
            json!({"config": {"approval": {"allow": ["shell(git status"]}}}),
        )
        .await;
    assert_eq!(rule["error"]["data"]["kind"], "invalid_config");
    assert!(
        rule["error"]["message"]
            .as_str()
            .unwrap()
            .contains("must end with `)`")
    );
    let mode = s
        .request(
            "session/set_config",
            json!({"config": {"approval": {"mode": "sometimes"}}}),
        )
        .await;
    assert_eq!(mode["error"]["code"], -32602);
    let unknown = s
        .request(
            "session/respond",
            json!({"request_id": "req_nope", "decision": "allow"}),
        )
        .await;
    assert_eq!(unknown["error"]["data"]["kind"], "request_not_found");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("session/get lists")
    );
    let no_id = s
        .request("session/respond", json!({"decision": "allow"}))
        .await;
    assert_eq!(no_id["error"]["code"], -32602);
    assert!(
        no_id["error"]["message"]
            .as_str()
            .unwrap()
            .contains("request_id")
    );
    // A bad client tool at creation is refused too, and nothing is created.
    let created = s
        .client
        .request(
            "session/create",
            json!({"cwd": s.workdir.path(), "config": {"client_tools": [{"name": "has space", "description": "", "parameters": {"type": "object"}}]}}),
        )
        .await
        .unwrap();
    assert_eq!(created["error"]["data"]["kind"], "invalid_config");
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentctl_lists_and_answers_pending_requests() {
    let mut s = setup_with(json!({})).await;
    let cwd = s.workdir.path().to_str().unwrap().to_owned();
    let new = s
        .daemon
        .agentctl(
            &[
                "new",
                "--cwd",
                &cwd,
                "--approval",
                "ask",
                "--allow",
                "shell(ls*)",
                "--deny",
                "shell(rm *)",
            ],
            None,
        )
        .await
        .unwrap();
    assert!(new.status.success(), "{}", text(&new));
    s.session = String::from_utf8_lossy(&new.stdout).trim().to_owned();
    let config = s.call("session/get", json!({})).await["config"]["approval"].clone();
    assert_eq!(config["mode"], "ask");
    assert_eq!(config["allow"], json!(["shell(ls*)"]));
    assert_eq!(config["deny"], json!(["shell(rm *)"]));

    push_calls(&s, &[shell("g1", "touch denied.txt")]);
    s.mock.push_stream(sse::text("fine"));
    let events = submit_until(&mut s, "touch it", "approval_requested").await;
    let id = request_id(events.last().unwrap());
    let pending = s
        .daemon
        .agentctl(&["pending", &s.session], None)
        .await
        .unwrap();
    let listed = text(&pending);
    assert!(
        listed.contains(&id) && listed.contains("shell: $ touch denied.txt"),
        "{listed}"
    );
    let answered = s
        .daemon
        .agentctl(
            &[
                "respond",
                &s.session,
                &id[..10],
                "deny",
                "--message",
                "not now",
            ],
            None,
        )
        .await
        .unwrap();
    assert!(answered.status.success(), "{}", text(&answered));
    let rest = s.until("processing_end").await;
    assert_eq!(
        of_kind(&rest, "approval_resolved")[0]["data"]["message"],
        "not now"
    );
    assert!(!s.workdir.path().join("denied.txt").exists());
    // Too late now: a clear error and a failing exit.
    let late = s
        .daemon
        .agentctl(&["respond", &s.session, &id, "allow"], None)
        .await
        .unwrap();
    assert_eq!(late.status.code(), Some(1), "{}", text(&late));
    assert!(text(&late).contains("already answered"), "{}", text(&late));
    // The setting reads back, and changes, with `config`.
    let shown = s
        .daemon
        .agentctl(&["config", &s.session], None)
        .await
        .unwrap();
    assert!(text(&shown).contains("approval"), "{}", text(&shown));
    let changed = s
        .daemon
        .agentctl(
            &["config", &s.session, "approval=auto", "approval-timeout=2m"],
            None,
        )
        .await
        .unwrap();
    assert!(changed.status.success(), "{}", text(&changed));
    let config = s.call("session/get", json!({})).await["config"]["approval"].clone();
    assert_eq!(config["mode"], "auto");
    assert_eq!(config["timeout_ms"], 120_000);
    assert_eq!(config["allow"], json!(["shell(ls*)"]), "other fields kept");
    let bad = s
        .daemon
        .agentctl(&["config", &s.session, "approval=maybe"], None)
        .await
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad).contains("use auto or ask"), "{}", text(&bad));
}

/// `submit --follow` on a terminal asks, and the answer typed there decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_on_a_terminal_asks_and_takes_the_typed_answer() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Some(script) = agentd_tests::program("script") else {
        agentd_tests::prerequisite("script (util-linux) for a pseudo-terminal", false);
        return;
    };
    let s = setup_with(ask(json!({}))).await;
    push_calls(&s, &[shell("i1", "echo typed > typed.txt")]);
    s.mock.push_stream(sse::text("all done"));
    let agentctl = agentd_tests::bin_dir().join("agentctl");
    let line = format!(
        "{} submit --follow {} 'do it'",
        agentctl.display(),
        s.session
    );
    let mut cmd = s.daemon.program(script);
    cmd.args(["-qfec", &line, "/dev/null"])
        .env("NO_COLOR", "1")
        .current_dir(s.workdir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = tokio::process::Command::from(cmd).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let deadline = std::time::Duration::from_secs(60);
    tokio::time::timeout(deadline, async {
        while !seen.contains("allow? [y]es") {
            let n = stdout.read(&mut buf).await.unwrap();
            assert!(n > 0, "agentctl ended before asking: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no prompt; saw {seen}"));
    assert!(seen.contains("? approve shell"), "{seen}");
    assert!(seen.contains("$ echo typed > typed.txt"), "{seen}");
    stdin.write_all(b"y\n").await.unwrap();
    let status = tokio::time::timeout(deadline, async {
        loop {
            let n = stdout.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        child.wait().await.unwrap()
    })
    .await
    .unwrap_or_else(|_| panic!("agentctl did not finish; saw {seen}"));
    assert!(status.success(), "{seen}");
    assert!(seen.contains("✓ allowed shell (by a client)"), "{seen}");
    assert!(seen.contains("all done"), "{seen}");
    assert_eq!(
        std::fs::read_to_string(s.workdir.path().join("typed.txt")).unwrap(),
        "typed\n"
    );
}
