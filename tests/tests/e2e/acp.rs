//! `agentctl acp` driven by real ACP clients (the official Rust SDK's `Client`, and raw JSON
//! lines for what an SDK will not send) against the real daemon and the mock provider.

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Agent, Client};
use agentd_tests::TestDaemon;
use agentd_tests::family::Family;
use agentd_tests::mock::{Chunk, Gate, MockProvider};
use agentd_tests::sse;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// The bridge's updates as the client received them.
struct Updates(mpsc::UnboundedReceiver<acp::SessionNotification>);

impl Updates {
    /// Every update received so far.
    fn drain(&mut self) -> Vec<acp::SessionUpdate> {
        std::iter::from_fn(|| self.0.try_recv().ok())
            .map(|n| n.update)
            .collect()
    }

    /// Waits for the next update matching `want`, returning those before it too.
    async fn until(
        &mut self,
        want: impl Fn(&acp::SessionUpdate) -> bool,
    ) -> Vec<acp::SessionUpdate> {
        let mut seen = Vec::new();
        loop {
            let n = tokio::time::timeout(Duration::from_secs(60), self.0.recv())
                .await
                .expect("an update in time")
                .expect("the bridge is running");
            let hit = want(&n.update);
            seen.push(n.update);
            if hit {
                return seen;
            }
        }
    }
}

/// `agentctl acp` with the daemon's environment (never starting a daemon of its own).
fn agent(daemon: &TestDaemon) -> AcpAgent {
    let cmd = daemon.command("agentctl");
    let mut config = AcpAgentConfig::new(cmd.get_program()).arg("acp");
    for (k, v) in cmd.get_envs() {
        if let (Some(v), Some(k)) = (v.and_then(|v| v.to_str()), k.to_str()) {
            config = config.env(k, v);
        }
    }
    AcpAgent::new(config.env("AGENTD_NO_AUTOSTART", "1"))
}

/// Runs `body` with an initialized ACP connection to `agentctl acp`.
async fn with_acp<R>(
    daemon: &TestDaemon,
    body: impl AsyncFnOnce(ConnectionTo<Agent>, Updates) -> Result<R, agent_client_protocol::Error>,
) -> R {
    with_acp_answering(
        daemon,
        |r| panic!("unexpected permission request {r:?}"),
        body,
    )
    .await
}

/// Like [`with_acp`], answering each permission request with the option `choose` picks
/// (`None`: the client cancels it).
async fn with_acp_answering<R>(
    daemon: &TestDaemon,
    choose: impl Fn(&acp::RequestPermissionRequest) -> Option<&'static str> + Send + Sync + 'static,
    body: impl AsyncFnOnce(ConnectionTo<Agent>, Updates) -> Result<R, agent_client_protocol::Error>,
) -> R {
    let (tx, rx) = mpsc::unbounded_channel();
    let asked = tx.clone();
    let run = Client
        .v1()
        .on_receive_request(
            async move |r: acp::RequestPermissionRequest, responder, _cx| {
                let outcome = match choose(&r) {
                    Some(id) => acp::RequestPermissionOutcome::Selected(
                        acp::SelectedPermissionOutcome::new(id),
                    ),
                    None => acp::RequestPermissionOutcome::Cancelled,
                };
                // Recorded among the updates, as a tool call update of its own kind.
                let _ = asked.send(acp::SessionNotification::new(
                    r.session_id.clone(),
                    acp::SessionUpdate::ToolCallUpdate(r.tool_call.clone().meta(
                        serde_json::Map::from_iter([(
                            "permission_options".to_owned(),
                            json!(
                                r.options
                                    .iter()
                                    .map(|o| o.option_id.0.to_string())
                                    .collect::<Vec<_>>()
                            ),
                        )]),
                    )),
                ));
                responder.respond(acp::RequestPermissionResponse::new(outcome))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: acp::SessionNotification, _cx| {
                let _ = tx.send(n);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(agent(daemon), async move |cx: ConnectionTo<Agent>| {
            cx.send_request(acp::InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            body(cx, Updates(rx)).await
        });
    tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the ACP session ends in time")
        .expect("the ACP session succeeds")
}

async fn new_session(cx: &ConnectionTo<Agent>, cwd: &Path) -> acp::SessionId {
    cx.send_request(acp::NewSessionRequest::new(cwd))
        .block_task()
        .await
        .expect("session/new")
        .session_id
}

fn prompt(session: &acp::SessionId, text: &str) -> acp::PromptRequest {
    acp::PromptRequest::new(
        session.clone(),
        vec![acp::ContentBlock::Text(acp::TextContent::new(text))],
    )
}

/// A short tag per update, to compare sequences.
fn tag(u: &acp::SessionUpdate) -> &'static str {
    match u {
        acp::SessionUpdate::UserMessageChunk(_) => "user",
        acp::SessionUpdate::AgentMessageChunk(_) => "agent",
        acp::SessionUpdate::AgentThoughtChunk(_) => "thought",
        acp::SessionUpdate::ToolCall(_) => "tool_call",
        acp::SessionUpdate::ToolCallUpdate(_) => "tool_call_update",
        acp::SessionUpdate::UsageUpdate(_) => "usage",
        acp::SessionUpdate::AvailableCommandsUpdate(_) => "commands",
        _ => "other",
    }
}

fn text_of(updates: &[acp::SessionUpdate], which: &str) -> String {
    updates
        .iter()
        .filter(|u| tag(u) == which)
        .filter_map(|u| match u {
            acp::SessionUpdate::AgentMessageChunk(c) | acp::SessionUpdate::UserMessageChunk(c) => {
                match &c.content {
                    acp::ContentBlock::Text(t) => Some(t.text.clone()),
                    _ => None,
                }
            }
            _ => None,
        })
        .collect()
}

/// Tags without usage updates (whose number depends on the provider's stream) and the
/// commands offered (sent after session/new and session/load, in their own time).
fn shape(updates: &[acp::SessionUpdate]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for t in updates
        .iter()
        .map(tag)
        .filter(|t| !["usage", "commands"].contains(t))
    {
        // Text arrives in as many chunks as the provider sends deltas.
        if !(t == "agent" && out.last() == Some(&"agent")) {
            out.push(t);
        }
    }
    out
}

/// The current value of the select option `id`.
fn current(options: &[acp::SessionConfigOption], id: &str) -> String {
    let option = options
        .iter()
        .find(|o| o.id.0.as_ref() == id)
        .unwrap_or_else(|| panic!("no option {id} in {options:?}"));
    match &option.kind {
        acp::SessionConfigKind::Select(s) => s.current_value.0.to_string(),
        other => panic!("{other:?}"),
    }
}

/// Runs another ACP client, `cmd` (made with the daemon's environment; it never starts a
/// daemon), to its end; what it printed, as the JSON lines it printed.
async fn client_output(mut cmd: tokio::process::Command, what: &str) -> Vec<Value> {
    cmd.env("AGENTD_NO_AUTOSTART", "1").kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{what} ends in time"))
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

async fn daemon(mock: &MockProvider) -> TestDaemon {
    TestDaemon::start(&mock.url).await.expect("daemon starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_advertises_load_list_resume_close_delete_and_an_auth_method() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let init = with_acp(&daemon, async |cx, _updates| {
        cx.send_request(acp::InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await
    })
    .await;
    assert_eq!(init.protocol_version, ProtocolVersion::V1);
    assert!(init.agent_capabilities.load_session);
    assert!(init.agent_capabilities.prompt_capabilities.embedded_context);
    assert!(init.agent_capabilities.prompt_capabilities.image);
    let sessions = &init.agent_capabilities.session_capabilities;
    assert!(sessions.list.is_some());
    assert!(sessions.resume.is_some());
    assert!(sessions.close.is_some());
    assert!(sessions.delete.is_some());
    assert!(init.agent_capabilities.mcp_capabilities.http);
    let auth = &init.auth_methods;
    assert_eq!(auth.len(), 1, "{auth:?}");
    assert!(
        auth[0]
            .description()
            .unwrap_or_default()
            .contains("ANTHROPIC_API_KEY")
    );
    assert_eq!(init.agent_info.map(|i| i.name), Some("agentd".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_with_a_tool_round_streams_calls_diffs_text_and_ends_the_turn() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    mock.push_stream(sse::tools(
        "",
        &[
            ("t1", "shell", json!({"command": "echo from-the-shell"})),
            (
                "t2",
                "write_file",
                json!({"file_path": "notes.txt", "content": "new text\n"}),
            ),
        ],
    ));
    mock.push_stream(sse::text("All done."));
    let cwd = dir.path().to_owned();
    let (stop, updates) = with_acp(&daemon, async |cx, mut updates| {
        let session = new_session(&cx, &cwd).await;
        let r = cx
            .send_request(prompt(&session, "run it"))
            .block_task()
            .await?;
        Ok((r.stop_reason, updates.drain()))
    })
    .await;
    assert_eq!(stop, acp::StopReason::EndTurn);
    assert_eq!(
        shape(&updates),
        [
            "tool_call",
            "tool_call",
            "tool_call_update",
            "tool_call_update",
            "agent"
        ],
        "{updates:#?}"
    );
    assert_eq!(text_of(&updates, "agent"), "All done.");
    assert!(updates.iter().any(|u| tag(u) == "usage"), "{updates:#?}");
    let calls: Vec<&acp::ToolCall> = updates
        .iter()
        .filter_map(|u| match u {
            acp::SessionUpdate::ToolCall(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(calls[0].kind, acp::ToolKind::Execute);
    assert_eq!(calls[0].title, "echo from-the-shell");
    assert_eq!(calls[0].status, acp::ToolCallStatus::InProgress);
    assert_eq!(
        calls[0].raw_input,
        Some(json!({"command": "echo from-the-shell"}))
    );
    let file = dir.path().join("notes.txt");
    assert_eq!(calls[1].kind, acp::ToolKind::Edit);
    assert_eq!(calls[1].locations, vec![acp::ToolCallLocation::new(&file)]);
    assert_eq!(
        calls[1].content,
        vec![acp::ToolCallContent::Diff(acp::Diff::new(
            &file,
            "new text\n"
        ))]
    );
    let ends: Vec<&acp::ToolCallUpdate> = updates
        .iter()
        .filter_map(|u| match u {
            acp::SessionUpdate::ToolCallUpdate(c) => Some(c),
            _ => None,
        })
        .collect();
    let shell = ends
        .iter()
        .find(|u| u.tool_call_id.0.as_ref() == "t1")
        .unwrap();
    assert_eq!(shell.fields.status, Some(acp::ToolCallStatus::Completed));
    let output = format!("{:?}", shell.fields.content);
    assert!(output.contains("from-the-shell"), "{output}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "new text\n");
}

/// A model that declines to answer ends the prompt with `refusal`, its words shown as the
/// agent's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_ends_the_prompt_with_refusal() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    mock.push_stream(Family::Anthropic.refused("I won't do that."));
    let cwd = dir.path().to_owned();
    let (stop, updates) = with_acp(&daemon, async |cx, mut updates| {
        let session = new_session(&cx, &cwd).await;
        let r = cx
            .send_request(prompt(&session, "do it"))
            .block_task()
            .await?;
        Ok((r.stop_reason, updates.drain()))
    })
    .await;
    assert_eq!(stop, acp::StopReason::Refusal);
    assert_eq!(text_of(&updates, "agent"), "I won't do that.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_during_a_tool_kills_it_and_answers_cancelled() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    mock.push_stream(sse::shell("t1", "echo started; sleep 600"));
    let cwd = dir.path().to_owned();
    let (stop, after) = with_acp(&daemon, async |cx, mut updates| {
        let session = new_session(&cx, &cwd).await;
        let pending = cx.send_request(prompt(&session, "wait"));
        updates
            .until(|u| matches!(u, acp::SessionUpdate::ToolCall(_)))
            .await;
        cx.send_notification(acp::CancelNotification::new(session.clone()))?;
        let r = pending.block_task().await?;
        Ok((r.stop_reason, updates.drain()))
    })
    .await;
    assert_eq!(stop, acp::StopReason::Cancelled);
    // The call was stopped, not left running: its end was reported before the answer.
    assert!(
        after.iter().any(|u| tag(u) == "tool_call_update"),
        "{after:#?}"
    );
    assert_eq!(mock.requests().len(), 1, "nothing ran after the cancel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_sent_while_busy_is_queued_and_both_answer_in_order() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::new();
    let mut first = vec![Chunk::Wait(gate.clone())];
    first.extend(sse::text("one"));
    mock.push_stream(first);
    mock.push_stream(sse::text("two"));
    let cwd = dir.path().to_owned();
    let (a, b, updates) = with_acp(&daemon, async |cx, mut updates| {
        let session = new_session(&cx, &cwd).await;
        let a = cx.send_request(prompt(&session, "first"));
        mock.wait_requests(1).await;
        let b = cx.send_request(prompt(&session, "second"));
        // The second is queued before the first may finish.
        agentd_tests::eventually("the second prompt to be queued", async || {
            daemon_queue_len(&daemon, &session.0).await > 0
        })
        .await;
        gate.open();
        let a = a.block_task().await?.stop_reason;
        let b = b.block_task().await?.stop_reason;
        Ok((a, b, updates.drain()))
    })
    .await;
    assert_eq!((a, b), (acp::StopReason::EndTurn, acp::StopReason::EndTurn));
    assert_eq!(text_of(&updates, "agent"), "onetwo");
}

async fn daemon_queue_len(daemon: &TestDaemon, session: &str) -> usize {
    let mut client = daemon.client().await.unwrap();
    let q = client
        .call("session/queue", json!({"session_id": session}))
        .await
        .unwrap();
    q["follow_up"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_replays_a_session_started_with_agentctl_then_continues_live() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    mock.push_stream(sse::shell("t1", "echo replayed-output"));
    mock.push_stream(sse::text("first answer"));
    let cwd = dir.path().display().to_string();
    let out = daemon
        .agentctl(
            &[
                "--json",
                "submit",
                "--new",
                "--follow",
                "--cwd",
                &cwd,
                "hello there",
            ],
            None,
        )
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut client = daemon.client().await.unwrap();
    let list = client.call("session/list", json!({})).await.unwrap();
    let id = list["sessions"][0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    mock.push_stream(sse::text("second answer"));
    let (replay, live, stop) = with_acp(&daemon, async |cx, mut updates| {
        cx.send_request(acp::LoadSessionRequest::new(id.clone(), dir.path()))
            .block_task()
            .await?;
        let replay = updates.drain();
        let r = cx
            .send_request(prompt(&acp::SessionId::new(id.clone()), "again"))
            .block_task()
            .await?;
        Ok((replay, updates.drain(), r.stop_reason))
    })
    .await;
    assert_eq!(
        shape(&replay),
        ["user", "tool_call", "tool_call_update", "agent"],
        "{replay:#?}"
    );
    assert_eq!(text_of(&replay, "user"), "hello there");
    assert_eq!(text_of(&replay, "agent"), "first answer");
    assert!(format!("{replay:?}").contains("replayed-output"));
    assert_eq!(stop, acp::StopReason::EndTurn);
    assert_eq!(shape(&live), ["agent"], "{live:#?}");
    assert_eq!(text_of(&live, "agent"), "second answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_the_daemons_sessions_filtered_by_cwd() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let one = tempfile::tempdir().unwrap();
    let two = tempfile::tempdir().unwrap();
    let (a, all, only_one) = with_acp(&daemon, async |cx, _updates| {
        let a = new_session(&cx, one.path()).await;
        new_session(&cx, two.path()).await;
        let all = cx
            .send_request(acp::ListSessionsRequest::new())
            .block_task()
            .await?;
        let only_one = cx
            .send_request(acp::ListSessionsRequest::new().cwd(one.path().to_owned()))
            .block_task()
            .await?;
        Ok((a, all.sessions, only_one.sessions))
    })
    .await;
    assert_eq!(all.len(), 2);
    assert_eq!(only_one.len(), 1);
    assert_eq!(only_one[0].session_id, a);
    assert_eq!(only_one[0].cwd, one.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_specific_errors() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    let errors = with_acp(&daemon, async |cx, _updates| {
        let unknown = acp::SessionId::new("no-such-session");
        let load = cx
            .send_request(acp::LoadSessionRequest::new(unknown.clone(), dir.path()))
            .block_task()
            .await
            .err();
        let prompt = cx
            .send_request(prompt(&unknown, "hi"))
            .block_task()
            .await
            .err();
        let mcp = cx
            .send_request(acp::NewSessionRequest::new(dir.path()).mcp_servers(vec![
                acp::McpServer::Sse(acp::McpServerSse::new("old", "http://127.0.0.1:1/sse")),
            ]))
            .block_task()
            .await
            .err();
        let relative = cx
            .send_request(acp::NewSessionRequest::new("relative/dir"))
            .block_task()
            .await
            .err();
        let session = new_session(&cx, dir.path()).await;
        let image = cx
            .send_request(acp::PromptRequest::new(
                session,
                vec![acp::ContentBlock::Image(acp::ImageContent::new(
                    "AAAA",
                    "image/png",
                ))],
            ))
            .block_task()
            .await
            .err();
        Ok([load, prompt, mcp, relative, image])
    })
    .await;
    let [load, prompt, mcp, relative, image] = errors.map(|e| e.expect("an error"));
    assert_eq!(i32::from(load.code), -32002, "{load:?}");
    assert!(
        format!("{:?}", load.data).contains("session_not_found"),
        "{load:?}"
    );
    assert_eq!(i32::from(prompt.code), -32002, "{prompt:?}");
    assert_eq!(i32::from(mcp.code), -32602, "{mcp:?}");
    assert!(
        format!("{:?}", mcp.data).contains("SSE transport"),
        "{mcp:?}"
    );
    assert_eq!(i32::from(relative.code), -32602, "{relative:?}");
    assert!(
        format!("{:?}", relative.data).contains("absolute"),
        "{relative:?}"
    );
    assert_eq!(i32::from(image.code), -32602, "{image:?}");
    assert!(
        format!("{:?}", image.data).contains(
            "images[0]: media type is image/png but the bytes are not a png, jpeg, gif or webp"
        ),
        "{image:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_prompt_reaches_the_provider_and_load_replays_it() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    // A PNG's magic number, then anything: the bytes need only survive the trip.
    let data = "iVBORw0KGgoAAAANSUhEUnBpeGVscw==";
    mock.push_stream(sse::text("A red square."));
    let (id, stop) = with_acp(&daemon, async |cx, _updates| {
        let session = new_session(&cx, dir.path()).await;
        let r = cx
            .send_request(acp::PromptRequest::new(
                session.clone(),
                vec![
                    acp::ContentBlock::Text(acp::TextContent::new("what is this?")),
                    acp::ContentBlock::Image(acp::ImageContent::new(data, "image/png")),
                ],
            ))
            .block_task()
            .await?;
        Ok((session, r.stop_reason))
    })
    .await;
    assert_eq!(stop, acp::StopReason::EndTurn);
    let body = &mock.requests()[0].body;
    let user = &body["messages"][0];
    assert_eq!(user["role"], "user", "{body}");
    let image = &user["content"][0];
    assert_eq!(
        (
            &image["type"],
            &image["source"]["media_type"],
            &image["source"]["data"]
        ),
        (&json!("image"), &json!("image/png"), &json!(data)),
        "{user}"
    );

    let replay = with_acp(&daemon, async |cx, mut updates| {
        cx.send_request(acp::LoadSessionRequest::new(id.clone(), dir.path()))
            .block_task()
            .await?;
        Ok(updates.drain())
    })
    .await;
    assert_eq!(shape(&replay), ["user", "user", "agent"], "{replay:#?}");
    assert_eq!(text_of(&replay, "user"), "what is this?");
    let acp::SessionUpdate::UserMessageChunk(chunk) = &replay[1] else {
        panic!("{replay:#?}")
    };
    assert_eq!(
        chunk.content,
        acp::ContentBlock::Image(acp::ImageContent::new(data, "image/png"))
    );
}

/// What an SDK will not send: string ids, an unknown method, malformed params. Every line on
/// stdout is JSON-RPC, and each answer carries its request's id verbatim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_lines_string_ids_unknown_methods_and_bad_params() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let mut cmd = tokio::process::Command::from(daemon.command("agentctl"));
    let mut child = cmd
        .arg("acp")
        .env("AGENTD_NO_AUTOSTART", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = async |line: Value| -> Value {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let text = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("an answer in time")
            .unwrap()
            .expect("a line");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    };
    let init = ask(
        json!({"jsonrpc": "2.0", "id": "init-1", "method": "initialize",
        "params": {"protocolVersion": 1}}),
    )
    .await;
    assert_eq!(init["id"], "init-1");
    assert_eq!(init["result"]["protocolVersion"], 1);
    let unknown = ask(
        json!({"jsonrpc": "2.0", "id": 7, "method": "session/frobnicate",
        "params": {}}),
    )
    .await;
    assert_eq!(unknown["id"], 7);
    assert_eq!(unknown["error"]["code"], -32601);
    let bad = ask(json!({"jsonrpc": "2.0", "id": "x", "method": "session/new",
        "params": {"cwd": 5, "mcpServers": []}}))
    .await;
    assert_eq!(bad["id"], "x");
    assert_eq!(bad["error"]["code"], -32602);
}

/// The official Python SDK's client (`.ci/run` installs it in `target/acp-py`) against the
/// bridge: a second implementation of the protocol agrees with ours.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_client_runs_a_session_with_options_resume_close_and_delete() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join("target/acp-py/bin/python");
    if !agentd_tests::prerequisite(
        "the ACP Python SDK (target/acp-py, installed by .ci/run)",
        python.is_file(),
    ) {
        return;
    }
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    mock.push_stream(sse::tools(
        "",
        &[("t1", "read_file", json!({"file_path": "notes.txt"}))],
    ));
    mock.push_stream(sse::text("It says remember."));
    std::fs::write(cwd.join("notes.txt"), "remember this line\n").unwrap();
    let script = root.join("tests/tests/e2e/acp_client.py");
    let agentctl = agentd_tests::bin_dir().join("agentctl");
    let mut cmd = tokio::process::Command::from(daemon.program(&python));
    cmd.arg(&script).arg(&agentctl).arg(&cwd);
    let seen = client_output(cmd, "the Python client").await.remove(0);
    assert_eq!(seen["protocol_version"], 1);
    assert_eq!(seen["load_session"], true);
    assert_eq!(seen["stop_reason"], "end_turn");
    assert_eq!(
        seen["live"],
        json!(["tool_call", "tool_call_update", "agent_message_chunk"])
    );
    assert_eq!(seen["live_text"], "It says remember.");
    assert_eq!(seen["listed"], json!([seen["session"]]));
    assert_eq!(
        seen["replayed"],
        json!([
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk"
        ])
    );
    assert_eq!(seen["usage"], json!([{"used": 170, "size": 200_000}]));
    assert_eq!(
        seen["capabilities"],
        json!(["close", "delete", "list", "resume"])
    );
    assert_eq!(seen["options"]["created"]["mode"], "auto");
    assert_eq!(seen["options"]["mode"]["mode"], "read-only");
    assert_eq!(
        seen["options"]["model"]["model"],
        "anthropic/claude-from-python"
    );
    assert_eq!(seen["resumed_mode"], "read-only");
    assert_eq!(seen["after_load"], json!(["current_mode_update"]));
    assert_eq!(seen["after_delete"], json!([]));
    // The embedded file reached the model as part of the input.
    let first = mock.requests()[0].body.to_string();
    assert!(first.contains("remember this line"), "{first}");
}

/// No daemon and autostart off: `agentctl acp` says so on stderr and exits 69, with nothing on
/// stdout (an editor shows the message from stderr).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_daemon_it_exits_69_and_keeps_stdout_clean() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let mut cmd = tokio::process::Command::from(daemon.command("agentctl"));
    let out = cmd
        .arg("acp")
        .env("AGENTD_NO_AUTOSTART", "1")
        .env("AGENTD_SOCKET", daemon.root.path().join("nobody-here.sock"))
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(69));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!out.stderr.is_empty());
}

/// `session/new`'s `_meta` is checked where the bridge reads it (an unknown profile is refused
/// naming the profiles), and the daemon's `invalid_config` (an unknown provider) reaches the
/// editor as invalid params with the daemon's kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_session_meta_errors_name_what_is_accepted() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    let errors = with_acp(&daemon, async |cx, _updates| {
        let mut errors = Vec::new();
        for meta in [json!({"profile": "claude"}), json!({"provider": "nope"})] {
            let meta = meta.as_object().cloned().unwrap();
            let request = acp::NewSessionRequest::new(dir.path()).meta(meta);
            errors.push(cx.send_request(request).block_task().await.err());
        }
        Ok(errors)
    })
    .await;
    let [profile, provider] = [&errors[0], &errors[1]].map(|e| e.clone().expect("an error"));
    assert_eq!(i32::from(profile.code), -32602, "{profile:?}");
    assert_eq!(
        profile.data,
        Some(json!(
            "_meta.profile: unknown profile \"claude\"; use openai, anthropic, gemini or bash"
        ))
    );
    assert_eq!(i32::from(provider.code), -32602, "{provider:?}");
    assert_eq!(
        provider.data.as_ref().map(|d| &d["kind"]),
        Some(&json!("invalid_config")),
        "{provider:?}"
    );
}

/// A provider without a key: `session/new` answers "auth required" (ACP's -32000) with the
/// daemon's hint, which is what editors turn into a sign-in prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_without_a_key_is_auth_required() {
    let daemon = TestDaemon::start_with(&[]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let err = with_acp(&daemon, async |cx, _updates| {
        Ok(cx
            .send_request(acp::NewSessionRequest::new(dir.path()))
            .block_task()
            .await
            .err())
    })
    .await
    .expect("an error");
    assert_eq!(i32::from(err.code), -32000, "{err:?}");
    assert!(
        format!("{:?}", err.data).contains("provider_not_configured"),
        "{err:?}"
    );
}

/// The model is a config option listing the configured models; choosing one changes the
/// model of the next LLM call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_option_switches_the_sessions_model() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    mock.push_stream(sse::text("ok"));
    let (offered, after) = with_acp(&daemon, async |cx, _updates| {
        let created = cx
            .send_request(acp::NewSessionRequest::new(dir.path()))
            .block_task()
            .await?;
        let offered = created.config_options.unwrap_or_default();
        let set = cx
            .send_request(acp::SetSessionConfigOptionRequest::new(
                created.session_id.clone(),
                "model",
                acp::SessionConfigOptionValue::value_id("anthropic/claude-picked"),
            ))
            .block_task()
            .await?;
        cx.send_request(prompt(&created.session_id, "hi"))
            .block_task()
            .await?;
        Ok((offered, set.config_options))
    })
    .await;
    let ids: Vec<&str> = offered.iter().map(|o| o.id.0.as_ref()).collect();
    assert_eq!(ids, ["mode", "model"]);
    assert!(
        current(&offered, "model").starts_with("anthropic/"),
        "{offered:?}"
    );
    assert_eq!(current(&after, "model"), "anthropic/claude-picked");
    assert_eq!(mock.requests()[0].body["model"], "claude-picked");
}

/// In mode `ask`, each writing or running call waits for the editor's answer: the allowed
/// one runs, the rejected one is reported failed and never runs, and a cancelled request is
/// a refusal too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_mode_sends_permission_requests_and_obeys_them() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    mock.push_stream(sse::shell("t1", "echo granted-run"));
    mock.push_stream(sse::tools(
        "",
        &[(
            "t2",
            "write_file",
            json!({"file_path": "refused.txt", "content": "x"}),
        )],
    ));
    mock.push_stream(sse::shell("t3", "touch cancelled.txt"));
    mock.push_stream(sse::text("done"));
    let choose = |r: &acp::RequestPermissionRequest| match r.tool_call.tool_call_id.0.as_ref() {
        "t1" => Some("allow_once"),
        "t2" => Some("reject_once"),
        _ => None,
    };
    let (modes, stop, updates) = with_acp_answering(&daemon, choose, async |cx, mut updates| {
        let created = cx
            .send_request(acp::NewSessionRequest::new(dir.path()))
            .block_task()
            .await?;
        cx.send_request(acp::SetSessionModeRequest::new(
            created.session_id.clone(),
            "ask",
        ))
        .block_task()
        .await?;
        let r = cx
            .send_request(prompt(&created.session_id, "go"))
            .block_task()
            .await?;
        Ok((created.modes, r.stop_reason, updates.drain()))
    })
    .await;
    let modes = modes.expect("modes");
    assert_eq!(modes.current_mode_id.0.as_ref(), "auto");
    let ids: Vec<&str> = modes
        .available_modes
        .iter()
        .map(|m| m.id.0.as_ref())
        .collect();
    assert_eq!(ids, ["ask", "auto", "read-only"]);
    assert_eq!(stop, acp::StopReason::EndTurn);
    let asked: Vec<&acp::ToolCallUpdate> = updates
        .iter()
        .filter_map(|u| match u {
            acp::SessionUpdate::ToolCallUpdate(c) if c.meta.is_some() => Some(c),
            _ => None,
        })
        .collect();
    let asked_ids: Vec<&str> = asked.iter().map(|u| u.tool_call_id.0.as_ref()).collect();
    assert_eq!(asked_ids, ["t1", "t2", "t3"], "{updates:#?}");
    assert_eq!(
        asked[0].meta.as_ref().unwrap()["permission_options"],
        json!(["allow_once", "allow_always", "reject_once"])
    );
    assert_eq!(asked[1].fields.kind, Some(acp::ToolKind::Edit));
    let status = |id: &str| {
        updates
            .iter()
            .filter_map(|u| match u {
                acp::SessionUpdate::ToolCallUpdate(c)
                    if c.meta.is_none() && c.tool_call_id.0.as_ref() == id =>
                {
                    c.fields.status
                }
                _ => None,
            })
            .next_back()
    };
    assert_eq!(status("t1"), Some(acp::ToolCallStatus::Completed));
    assert_eq!(status("t2"), Some(acp::ToolCallStatus::Failed));
    assert_eq!(status("t3"), Some(acp::ToolCallStatus::Failed));
    assert!(format!("{updates:?}").contains("granted-run"));
    assert!(!dir.path().join("refused.txt").exists());
    assert!(!dir.path().join("cancelled.txt").exists());
}

/// `read-only` refuses file writes without asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_mode_refuses_writes() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    mock.push_stream(sse::tools(
        "",
        &[(
            "t1",
            "write_file",
            json!({"file_path": "no.txt", "content": "x"}),
        )],
    ));
    mock.push_stream(sse::text("ok"));
    let updates = with_acp(&daemon, async |cx, mut updates| {
        let session = new_session(&cx, dir.path()).await;
        cx.send_request(acp::SetSessionModeRequest::new(
            session.clone(),
            "read-only",
        ))
        .block_task()
        .await?;
        let bad = cx
            .send_request(acp::SetSessionModeRequest::new(session.clone(), "yolo"))
            .block_task()
            .await
            .expect_err("an unknown mode is an error");
        assert_eq!(i32::from(bad.code), -32602);
        cx.send_request(prompt(&session, "write"))
            .block_task()
            .await?;
        Ok(updates.drain())
    })
    .await;
    let failed = updates.iter().any(|u| {
        matches!(u, acp::SessionUpdate::ToolCallUpdate(c)
            if c.fields.status == Some(acp::ToolCallStatus::Failed))
    });
    assert!(failed, "{updates:#?}");
    assert!(!dir.path().join("no.txt").exists());
}

/// A question from the model (`ask_user`) shows as the agent's text; the next prompt answers
/// it rather than starting new work, and both prompts end with the input that asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_prompt_answers_the_models_question() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    mock.push_stream(sse::tools(
        "",
        &[(
            "q1",
            "ask_user",
            json!({"question": "Which color?", "options": ["red", "blue"]}),
        )],
    ));
    mock.push_stream(sse::text("Blue it is."));
    let (first, second, updates) = with_acp(&daemon, async |cx, mut updates| {
        let session = new_session(&cx, dir.path()).await;
        cx.send_request(acp::SetSessionModeRequest::new(session.clone(), "ask"))
            .block_task()
            .await?;
        let first = cx.send_request(prompt(&session, "pick a color"));
        let mut seen = updates
            .until(|u| format!("{u:?}").contains("your next message answers"))
            .await;
        let second = cx
            .send_request(prompt(&session, "blue"))
            .block_task()
            .await?
            .stop_reason;
        let first = first.block_task().await?.stop_reason;
        seen.extend(updates.drain());
        Ok((first, second, seen))
    })
    .await;
    assert_eq!(first, acp::StopReason::EndTurn);
    assert_eq!(second, acp::StopReason::EndTurn);
    assert!(
        text_of(&updates, "agent").contains("(red / blue)"),
        "{updates:#?}"
    );
    assert!(text_of(&updates, "agent").ends_with("Blue it is."));
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "the answer started no new work");
    assert!(requests[1].body.to_string().contains("blue"));
}

/// acpx (npm, pinned, on Node 22; `.ci/run` installs both in `target/acpx`), a headless ACP
/// client built on the TypeScript SDK, runs a prompt with a tool call through the bridge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acpx_runs_a_prompt() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = root.join("target/acpx/node_modules/.bin");
    if !agentd_tests::prerequisite(
        "acpx with Node 22 (target/acpx, installed by .ci/run)",
        bin.join("acpx").is_file() && bin.join("node").is_file(),
    ) {
        return;
    }
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    mock.push_stream(sse::shell("t1", "echo via-acpx"));
    mock.push_stream(sse::text("Ran it."));
    let agentctl = agentd_tests::bin_dir().join("agentctl");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = tokio::process::Command::from(daemon.program(bin.join("acpx")));
    cmd.env("PATH", path)
        .args(["--agent", &format!("{} acp", agentctl.display())])
        .args(["--approve-all", "--format", "json", "--cwd"])
        .arg(dir.path())
        .args(["exec", "run the command"]);
    let messages = client_output(cmd, "acpx").await;
    let stdout = format!("{messages:?}");
    let kinds: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["params"]["update"]["sessionUpdate"].as_str())
        .collect();
    assert!(kinds.contains(&"tool_call"), "{stdout}");
    assert!(kinds.contains(&"tool_call_update"), "{stdout}");
    assert!(stdout.contains("via-acpx"), "{stdout}");
    let text: String = messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "Ran it.");
    assert!(
        messages
            .iter()
            .any(|m| m["result"]["stopReason"] == "end_turn"),
        "{stdout}"
    );
}

/// An editor's `mcpServers` (stdio here) reach the session: the model gets their tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editors_mcp_servers_give_the_session_their_tools() {
    let index = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../target/mcp-npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    if !agentd_tests::prerequisite("server-everything (target/mcp-npm)", index.is_file()) {
        return;
    }
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    mock.push_stream(sse::tools(
        "",
        &[(
            "e",
            "mcp__everything__echo",
            json!({"message": "from the editor"}),
        )],
    ));
    mock.push_stream(sse::text("Echoed."));
    let cwd = dir.path().to_owned();
    let stop = with_acp(&daemon, async |cx, _updates| {
        let server = acp::McpServerStdio::new("everything", "node")
            .args(vec![index.display().to_string(), "stdio".into()]);
        let session = cx
            .send_request(
                acp::NewSessionRequest::new(&cwd).mcp_servers(vec![acp::McpServer::Stdio(server)]),
            )
            .block_task()
            .await?
            .session_id;
        let r = cx
            .send_request(prompt(&session, "echo"))
            .block_task()
            .await?;
        Ok(r.stop_reason)
    })
    .await;
    assert_eq!(stop, acp::StopReason::EndTurn);
    let requests = mock.requests();
    let results = agentd_tests::family::Family::Anthropic.results(&requests[1].body);
    assert_eq!(
        results,
        [("e".to_owned(), "Echo: from the editor".to_owned())]
    );
}

/// The session's skills and prompt commands reach the editor as `available_commands_update`
/// after `session/new` and `session/load`, and a `/name args` prompt is expanded by the daemon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_and_commands_are_offered_as_available_commands() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    let skill = dir.path().join(".agents/skills/lint/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(
        &skill,
        "---\nname: lint\ndescription: Lints code.\n---\nRun the linter.\n",
    )
    .unwrap();
    let command = daemon.root.path().join("config/agentd/commands/fix.md");
    std::fs::create_dir_all(command.parent().unwrap()).unwrap();
    std::fs::write(
        &command,
        "---\ndescription: Fix an issue\nargument-hint: ISSUE\n---\nFix issue #$1.\n",
    )
    .unwrap();
    mock.push_stream(sse::text("Fixing."));
    let cwd = dir.path().to_owned();
    let commands = |u: &acp::SessionUpdate| match u {
        acp::SessionUpdate::AvailableCommandsUpdate(c) => Some(c.available_commands.clone()),
        _ => None,
    };
    let (offered, reoffered) = with_acp(&daemon, async |cx, mut updates| {
        let session = new_session(&cx, &cwd).await;
        let offered = updates
            .until(|u| commands(u).is_some())
            .await
            .iter()
            .find_map(commands)
            .unwrap();
        cx.send_request(prompt(&session, "/fix 7"))
            .block_task()
            .await?;
        cx.send_request(acp::LoadSessionRequest::new(session.clone(), &cwd))
            .block_task()
            .await?;
        let reoffered = updates
            .until(|u| commands(u).is_some())
            .await
            .iter()
            .find_map(commands)
            .unwrap();
        Ok((offered, reoffered))
    })
    .await;
    let shown: Vec<(String, String, Option<String>)> = offered
        .iter()
        .map(|c| {
            let hint = c.input.as_ref().map(|i| match i {
                acp::AvailableCommandInput::Unstructured(u) => u.hint.clone(),
                _ => String::new(),
            });
            (c.name.clone(), c.description.clone(), hint)
        })
        .collect();
    assert_eq!(
        shown[3..],
        [
            ("fix".into(), "Fix an issue".into(), Some("ISSUE".into())),
            ("lint".into(), "Lints code.".into(), None),
        ]
    );
    let names: Vec<&str> = shown[..3].iter().map(|c| c.0.as_str()).collect();
    assert_eq!(names, ["undo", "redo", "diff"]);
    assert_eq!(offered, reoffered);
    let requests = mock.wait_requests(1).await;
    assert!(
        requests[0].body["messages"]
            .to_string()
            .contains("Fix issue #7."),
        "{}",
        requests[0].body
    );
}

/// The mode and the model are config options; the mode set either way moves the other view
/// with it (`current_mode_update`, `config_option_update`), the daemon's session follows, and
/// the usage updates give the context used against the new model's window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_options_set_mode_and_model_and_keep_the_modes_in_step() {
    let mock = MockProvider::start().await.unwrap();
    // A second provider with a key, to switch to (it is never called).
    let daemon = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("OPENAI_API_KEY", "test-key")
        .start()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    mock.push_stream(sse::text("ok"));
    let (id, by_option, mode_update, config_update, by_model, unknown, usage) =
        with_acp(&daemon, async |cx, mut updates| {
            let id = new_session(&cx, dir.path()).await;
            let set = |option: &str, value: &str| {
                cx.send_request(acp::SetSessionConfigOptionRequest::new(
                    id.clone(),
                    option.to_owned(),
                    acp::SessionConfigOptionValue::value_id(value.to_owned()),
                ))
                .block_task()
            };
            let by_option = set("mode", "read-only").await?.config_options;
            let mode_update = updates
                .until(|u| matches!(u, acp::SessionUpdate::CurrentModeUpdate(_)))
                .await
                .pop();
            cx.send_request(acp::SetSessionModeRequest::new(id.clone(), "ask"))
                .block_task()
                .await?;
            let config_update = updates
                .until(|u| matches!(u, acp::SessionUpdate::ConfigOptionUpdate(_)))
                .await
                .pop();
            let by_model = set("model", "openai/gpt-picked").await?.config_options;
            let unknown = set("colour", "blue").await.map(|_| ()).unwrap_err();
            set("model", "anthropic/claude-picked").await?;
            cx.send_request(prompt(&id, "hi")).block_task().await?;
            let usage = updates
                .until(|u| tag(u) == "usage")
                .await
                .pop()
                .and_then(|u| match u {
                    acp::SessionUpdate::UsageUpdate(u) => Some(u),
                    _ => None,
                });
            Ok((
                id,
                by_option,
                mode_update,
                config_update,
                by_model,
                unknown,
                usage,
            ))
        })
        .await;
    assert_eq!(current(&by_option, "mode"), "read-only");
    let Some(acp::SessionUpdate::CurrentModeUpdate(m)) = mode_update else {
        panic!("{mode_update:?}")
    };
    assert_eq!(m.current_mode_id.0.as_ref(), "read-only");
    let Some(acp::SessionUpdate::ConfigOptionUpdate(c)) = config_update else {
        panic!("{config_update:?}")
    };
    assert_eq!(current(&c.config_options, "mode"), "ask");
    assert_eq!(current(&by_model, "mode"), "ask");
    assert_eq!(current(&by_model, "model"), "openai/gpt-picked");
    assert_eq!(i32::from(unknown.code), -32602, "{unknown:?}");
    let mut client = daemon.client().await.unwrap();
    let snapshot = client
        .call("session/get", json!({"session_id": id.0.as_ref()}))
        .await
        .unwrap();
    assert_eq!(snapshot["config"]["approval"]["mode"], "ask");
    assert_eq!(snapshot["config"]["model"], "claude-picked");
    assert_eq!(mock.requests()[0].body["model"], "claude-picked");
    // The mock's call: 100 input, 50 read from the cache, 20 output.
    let usage = usage.expect("a usage update");
    assert_eq!(usage.used, 170);
    assert_eq!(
        usage.size,
        snapshot["config"]["context_window_tokens"]
            .as_u64()
            .unwrap()
    );
}

/// `session/resume` follows a session from its newest event: nothing is replayed, and the
/// approval it waits on is asked. `session/close` cancels the running prompt (answered
/// `cancelled`) and stops following; the session stays in the daemon, so it resumes again.
/// `session/delete` removes it from `session/list`, and deleting it again succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_close_and_delete_follow_the_stable_protocol() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().to_owned();
    // Started elsewhere, in mode `ask`, and waiting on an approval.
    mock.push_stream(sse::shell("t1", "echo approved-on-resume"));
    mock.push_stream(sse::text("ran it"));
    let mut client = daemon.client().await.unwrap();
    let id = daemon
        .create_session(
            &mut client,
            &cwd,
            json!({"config": {"approval": {"mode": "ask"}}}),
        )
        .await
        .unwrap();
    client.subscribe(&id, None).await.unwrap();
    client
        .call("session/submit", json!({"session_id": id, "text": "go"}))
        .await
        .unwrap();
    while client.item().await.unwrap()["kind"] != "approval_requested" {}
    let gate = Gate::new();
    let mut held = vec![Chunk::Wait(gate.clone())];
    held.extend(sse::text("never shown"));
    mock.push_stream(held);
    let session = acp::SessionId::new(id.clone());
    let choose = |r: &acp::RequestPermissionRequest| {
        (r.tool_call.tool_call_id.0.as_ref() == "t1").then_some("allow_once")
    };
    let (before, ran, stop, after_close, listed, gone) =
        with_acp_answering(&daemon, choose, async |cx, mut updates| {
            let resumed = cx
                .send_request(acp::ResumeSessionRequest::new(session.clone(), &cwd))
                .block_task()
                .await?;
            assert_eq!(current(&resumed.config_options.unwrap(), "mode"), "ask");
            let before = updates
                .until(|u| tag(u) == "commands")
                .await
                .into_iter()
                .map(|u| tag(&u))
                .collect::<Vec<_>>();
            // The approval was asked and allowed: the call runs and the work ends.
            let ran = updates
                .until(|u| {
                    tag(u) == "agent"
                        || matches!(u, acp::SessionUpdate::ToolCallUpdate(c)
                            if c.meta.is_none() && c.fields.status.is_some())
                })
                .await;
            let pending = cx.send_request(prompt(&session, "wait"));
            mock.wait_requests(3).await;
            cx.send_request(acp::CloseSessionRequest::new(session.clone()))
                .block_task()
                .await?;
            let stop = pending.block_task().await?.stop_reason;
            let after_close = cx
                .send_request(prompt(&session, "closed?"))
                .block_task()
                .await
                .map(|_| ())
                .unwrap_err();
            cx.send_request(acp::ResumeSessionRequest::new(session.clone(), &cwd))
                .block_task()
                .await?;
            let listed = cx
                .send_request(acp::ListSessionsRequest::new())
                .block_task()
                .await?
                .sessions;
            cx.send_request(acp::DeleteSessionRequest::new(session.clone()))
                .block_task()
                .await?;
            cx.send_request(acp::DeleteSessionRequest::new(session.clone()))
                .block_task()
                .await?;
            let gone = cx
                .send_request(acp::ListSessionsRequest::new())
                .block_task()
                .await?
                .sessions;
            Ok((before, ran, stop, after_close, listed, gone))
        })
        .await;
    gate.open();
    assert!(
        !before.iter().any(|t| ["user", "agent"].contains(t)),
        "{before:?}"
    );
    assert!(
        format!("{ran:?}").contains("approved-on-resume"),
        "{ran:#?}"
    );
    assert_eq!(stop, acp::StopReason::Cancelled);
    assert_eq!(i32::from(after_close.code), -32002, "{after_close:?}");
    assert_eq!(
        listed
            .iter()
            .map(|s| s.session_id.clone())
            .collect::<Vec<_>>(),
        [session]
    );
    assert!(gone.is_empty(), "{gone:?}");
    let mut client = daemon.client().await.unwrap();
    let got = client
        .request("session/get", json!({"session_id": id}))
        .await
        .unwrap();
    assert_eq!(got["error"]["data"]["kind"], "session_not_found", "{got}");
}

/// `/undo`, `/redo` and `/diff` are the bridge's own commands: the files the agent wrote go
/// back and forward, the diff is shown as the agent's text, and a refusal is a clear message
/// (naming the files the user changed, from the error's data) with the turn ended normally. None of them reaches the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_redo_and_diff_commands_answer_in_the_conversation() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "old line\n").unwrap();
    mock.push_stream(sse::tools(
        "",
        &[(
            "w",
            "write_file",
            json!({"file_path": "notes.txt", "content": "new line\n"}),
        )],
    ));
    mock.push_stream(sse::text("Wrote it."));
    let cwd = dir.path().to_owned();
    let said = with_acp(&daemon, async |cx, mut updates| {
        let session = new_session(&cx, &cwd).await;
        cx.send_request(prompt(&session, "write"))
            .block_task()
            .await?;
        let mut said = Vec::new();
        let commands = [
            "/diff", "/undo", "/undo 5", "/redo", "/redo", "/undo x", "/undo",
        ];
        for (i, command) in commands.into_iter().enumerate() {
            // Before the last, the user edits the agent's file: that undo is refused.
            if i == 6 {
                std::fs::write(&file, "mine\n").unwrap();
            }
            updates.drain();
            let stop = cx
                .send_request(prompt(&session, command))
                .block_task()
                .await?
                .stop_reason;
            assert_eq!(stop, acp::StopReason::EndTurn);
            let on_disk = std::fs::read_to_string(&file).unwrap();
            said.push((text_of(&updates.drain(), "agent"), on_disk));
        }
        Ok(said)
    })
    .await;
    let (diff, disk) = &said[0];
    assert!(diff.starts_with("```diff\n"), "{diff}");
    assert!(
        diff.contains("-old line") && diff.contains("+new line"),
        "{diff}"
    );
    assert_eq!(disk, "new line\n");
    let (undo, disk) = &said[1];
    assert!(undo.contains("restored `notes.txt`"), "{undo}");
    assert_eq!(disk, "old line\n");
    assert!(said[2].0.starts_with("Refused: "), "{:?}", said[2]);
    let (redo, disk) = &said[3];
    assert!(redo.starts_with("Redone: "), "{redo}");
    assert_eq!(disk, "new line\n");
    assert!(said[4].0.starts_with("Refused: "), "{:?}", said[4]);
    assert!(said[5].0.contains("not \"x\""), "{:?}", said[5]);
    let (refused, disk) = &said[6];
    assert!(
        refused.contains("\n- `notes.txt`\n") && refused.contains("`/undo force` restores them"),
        "{refused}"
    );
    assert_eq!(disk, "mine\n");
    assert_eq!(mock.requests().len(), 2, "no command reached the model");
}

/// A hook's run is shown as a tool call of its own (kind `other`, titled with its event and
/// program), ending completed, or failed with its reason when it blocked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_runs_are_shown_as_their_own_tool_calls() {
    let mock = MockProvider::start().await.unwrap();
    let bin = tempfile::tempdir().unwrap();
    let hook = bin.path().join("no-rm.sh");
    std::fs::write(
        &hook,
        "#!/bin/sh\ngrep -q 'rm ' && { echo 'rm is not allowed' >&2; exit 2; }\nexit 0\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let daemon = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .config(&format!(
            "[[hooks.pre_tool_use]]\ncommand = {:?}\n",
            hook.display().to_string()
        ))
        .start()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    mock.push_stream(sse::tools(
        "",
        &[
            ("ok", "shell", json!({"command": "echo fine"})),
            ("no", "shell", json!({"command": "rm -f x"})),
        ],
    ));
    mock.push_stream(sse::text("done"));
    let cwd = dir.path().to_owned();
    let updates = with_acp(&daemon, async |cx, mut updates| {
        let session = new_session(&cx, &cwd).await;
        cx.send_request(prompt(&session, "go")).block_task().await?;
        Ok(updates.drain())
    })
    .await;
    let hooks: Vec<&acp::ToolCall> = updates
        .iter()
        .filter_map(|u| match u {
            acp::SessionUpdate::ToolCall(c) if c.tool_call_id.0.starts_with("hook-") => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(hooks.len(), 2, "{updates:#?}");
    assert!(hooks.iter().all(|c| c.kind == acp::ToolKind::Other
        && c.title == "Hook pre_tool_use: ".to_owned() + &hook.display().to_string()));
    let ends: Vec<(Option<acp::ToolCallStatus>, String)> = updates
        .iter()
        .filter_map(|u| match u {
            acp::SessionUpdate::ToolCallUpdate(c) if c.tool_call_id.0.starts_with("hook-") => {
                Some((c.fields.status, format!("{:?}", c.fields.content)))
            }
            _ => None,
        })
        .collect();
    let statuses: Vec<_> = ends.iter().map(|e| e.0).collect();
    assert!(
        statuses.contains(&Some(acp::ToolCallStatus::Completed))
            && statuses.contains(&Some(acp::ToolCallStatus::Failed)),
        "{ends:?}"
    );
    assert!(
        ends.iter().any(|e| e.1.contains("rm is not allowed")),
        "{ends:?}"
    );
}

/// acpx's persistent sessions through the bridge: `sessions new`, the mode set both ways
/// (`set-mode`, `set mode`), the model chosen from the listed ones (`set model`), a prompt
/// in a later process that reconnects with `session/resume` and gets usage updates,
/// `sessions list` (ACP `session/list`) and `sessions close` (ACP `session/close` to the
/// process it left running).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acpx_persistent_sessions_set_options_resume_list_and_close() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = root.join("target/acpx/node_modules/.bin");
    if !agentd_tests::prerequisite(
        "acpx with Node 22 (target/acpx, installed by .ci/run)",
        bin.join("acpx").is_file() && bin.join("node").is_file(),
    ) {
        return;
    }
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .config("[providers.anthropic]\nmodels = [\"claude-acpx\"]\n")
        .start()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    mock.push_stream(sse::shell("t1", "echo via-acpx-session"));
    mock.push_stream(sse::text("Ran it."));
    let agentctl = agentd_tests::bin_dir().join("agentctl");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let acpx = async |args: &[&str]| -> Vec<Value> {
        let mut cmd = tokio::process::Command::from(daemon.program(bin.join("acpx")));
        cmd.env("PATH", &path)
            .args(["--agent", &format!("{} acp", agentctl.display())])
            .args(["--approve-all", "--format", "json", "--cwd"])
            .arg(dir.path())
            .args(args);
        client_output(cmd, &format!("acpx {args:?}")).await
    };
    let created = acpx(&["sessions", "new"]).await;
    let id = created
        .iter()
        .find_map(|m| m["acpxSessionId"].as_str())
        .expect("a session id")
        .to_owned();
    let by_mode = acpx(&["set-mode", "read-only"]).await;
    assert!(
        by_mode.iter().any(|m| m["modeId"] == "read-only"),
        "{by_mode:?}"
    );
    let by_model = acpx(&["set", "model", "anthropic/claude-acpx"]).await;
    let by_option = acpx(&["set", "mode", "auto"]).await;
    let options = |ms: &[Value]| -> Value {
        ms.iter()
            .find_map(|m| m["configOptions"].as_array().cloned())
            .map(|o| {
                o.iter()
                    .map(|o| {
                        (
                            o["id"].as_str().unwrap().to_owned(),
                            o["currentValue"].clone(),
                        )
                    })
                    .collect::<serde_json::Map<_, _>>()
                    .into()
            })
            .unwrap_or_default()
    };
    assert_eq!(options(&by_option)["mode"], "auto", "{by_option:?}");
    assert_eq!(
        options(&by_option)["model"],
        "anthropic/claude-acpx",
        "{by_model:?}"
    );
    let prompted = acpx(&["prompt", "run the command"]).await;
    let methods: Vec<&str> = prompted
        .iter()
        .filter_map(|m| m["method"].as_str())
        .collect();
    assert!(methods.contains(&"session/resume"), "{methods:?}");
    assert!(!methods.contains(&"session/load"), "{methods:?}");
    let kinds: Vec<&str> = prompted
        .iter()
        .filter_map(|m| m["params"]["update"]["sessionUpdate"].as_str())
        .collect();
    assert!(kinds.contains(&"usage_update"), "{kinds:?}");
    assert!(
        prompted
            .iter()
            .any(|m| m["result"]["stopReason"] == "end_turn"),
        "{prompted:?}"
    );
    assert!(format!("{prompted:?}").contains("via-acpx-session"));
    assert_eq!(mock.requests()[0].body["model"], "claude-acpx");
    let listed = acpx(&["sessions", "list"]).await;
    let ids: Vec<&str> = listed
        .iter()
        .flat_map(|m| m["sessions"].as_array().into_iter().flatten())
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert_eq!(ids, [id.as_str()], "{listed:?}");
    let closed = acpx(&["sessions", "close"]).await;
    assert!(
        closed.iter().any(|m| m["action"] == "session_closed"),
        "{closed:?}"
    );
    let mut client = daemon.client().await.unwrap();
    let snapshot = client
        .call("session/get", json!({"session_id": id}))
        .await
        .unwrap();
    assert_eq!(snapshot["config"]["approval"]["mode"], "auto");
    assert_eq!(snapshot["state"], "idle");
}

/// The official TypeScript SDK's client (the current release, which acpx does not bundle yet;
/// `.ci/run` installs it in `target/acpx`) against the bridge: config options, usage, resume,
/// close, list and delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_client_sets_options_resumes_closes_and_deletes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let modules = root.join("target/acpx/node_modules");
    let sdk = modules.join("@agentclientprotocol/sdk/dist/v1/stable/acp.js");
    if !agentd_tests::prerequisite(
        "the ACP TypeScript SDK with Node 22 (target/acpx, installed by .ci/run)",
        sdk.is_file() && modules.join(".bin/node").is_file(),
    ) {
        return;
    }
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    mock.push_stream(sse::text("hello from ts"));
    let mut cmd = tokio::process::Command::from(daemon.program(modules.join(".bin/node")));
    cmd.arg(root.join("tests/tests/e2e/acp_client.mjs"))
        .arg(format!("file://{}", sdk.canonicalize().unwrap().display()))
        .arg(agentd_tests::bin_dir().join("agentctl"))
        .arg(&cwd);
    let seen = client_output(cmd, "the TypeScript client").await.remove(0);
    assert_eq!(
        seen["capabilities"],
        json!(["close", "delete", "list", "resume"])
    );
    assert_eq!(seen["created"]["mode"], "auto");
    assert_eq!(seen["modes"], json!(["ask", "auto", "read-only"]));
    assert_eq!(seen["mode"]["mode"], "read-only");
    assert_eq!(seen["model"]["model"], "anthropic/claude-from-ts");
    assert_eq!(seen["stop_reason"], "end_turn");
    assert_eq!(seen["usage"], json!([{"used": 170, "size": 200_000}]));
    assert_eq!(seen["resumed"]["mode"], "read-only");
    // No replay on resume: nothing but the commands offered came.
    assert_eq!(seen["on_resume"], json!([]));
    assert_eq!(seen["listed"], json!([seen["session"]]));
    assert_eq!(seen["after_delete"], json!([]));
    assert_eq!(mock.requests()[0].body["model"], "claude-from-ts");
}

/// An editor ends the bridge by closing its pipes. A message the bridge is writing when the
/// editor stops reading fails (it no longer kills agentctl with SIGPIPE), and the bridge exits
/// 0 once stdin closes: the editor, which waits for its status, sees a clean end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_ends_the_bridge_cleanly() {
    let s = crate::setup().await;
    let mut cmd = tokio::process::Command::from(s.daemon.command("agentctl"));
    let mut child = cmd
        .arg("acp")
        .env("AGENTD_NO_AUTOSTART", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let init = |id: u32| {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"initialize\",\"params\":{{\"protocolVersion\":1}}}}\n"
        )
    };
    stdin.write_all(init(1).as_bytes()).await.unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).await.unwrap();
    assert!(line.contains("\"id\":1"), "{line}");
    // The editor stops reading; the bridge's next answer meets a closed pipe.
    drop(stdout);
    stdin.write_all(init(2).as_bytes()).await.unwrap();
    drop(stdin);
    let status = tokio::time::timeout(agentd_tests::WAIT, child.wait())
        .await
        .expect("the bridge ends")
        .unwrap();
    assert_eq!(status.code(), Some(0), "{status}");
}
