//! `agentctl mcp-server` driven by the official MCP Python client (`mcp` on PyPI, `.ci/run`
//! installs it in `target/mcp-py`; the driver is `mcp_client.py`) against the real daemon and
//! the mock provider, and by raw lines for what no SDK sends.

use agentd_tests::TestDaemon;
use agentd_tests::mock::{Chunk, Gate, MockProvider, Reply};
use agentd_tests::sse;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// How long one answer of the driver may take (it includes starting Python).
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// The Python client's interpreter, if `.ci/run` installed it; the test fails without it
/// under CI=true.
fn python() -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/mcp-py/bin/python");
    agentd_tests::prerequisite(
        "the MCP Python SDK (target/mcp-py, installed by .ci/run)",
        python.is_file(),
    )
    .then_some(python)
}

/// `mcp_client.py` running `agentctl mcp-server` against `daemon`.
struct Driver {
    _child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    /// Answers read while waiting for another, by call id.
    answers: HashMap<String, Value>,
}

impl Driver {
    /// Starts the driver with the SDK's `mode` handshake (`legacy`: initialize, as Claude Code
    /// and Cursor do; `auto`: the 2026 discovery, falling back).
    fn start(python: &Path, daemon: &TestDaemon, mode: &str, env: &[(&str, &str)]) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/mcp_client.py");
        let mut cmd = tokio::process::Command::from(daemon.program(python));
        cmd.arg(script)
            .arg(mode)
            .arg(agentd_tests::bin_dir().join("agentctl"))
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("the Python driver starts");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            _child: child,
            stdin,
            lines,
            answers: HashMap::new(),
        }
    }

    async fn send(&mut self, command: Value) {
        let line = format!("{command}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
    }

    async fn line(&mut self) -> Value {
        let line = tokio::time::timeout(ANSWER_WITHIN, self.lines.next_line())
            .await
            .expect("the driver answers in time")
            .unwrap()
            .expect("the driver is still running (its stderr says why not)");
        serde_json::from_str(&line).unwrap()
    }

    /// Sends an `op` without a call id and returns its answer.
    async fn ask(&mut self, command: Value) -> Value {
        self.send(command).await;
        let answer = self.line().await;
        assert!(answer.get("id").is_none(), "{answer}");
        answer
    }

    /// Starts a tool call `id` without waiting for it.
    async fn start_call(&mut self, id: &str, name: &str, arguments: Value) {
        let command =
            json!({"op": "call", "id": id, "name": name, "arguments": arguments, "progress": true});
        self.send(command).await;
    }

    /// The answer to call `id`: `{"result", "progress"}`, `{"exception"}` or `{"cancelled"}`.
    async fn answer(&mut self, id: &str) -> Value {
        loop {
            if let Some(answer) = self.answers.remove(id) {
                return answer;
            }
            let answer = self.line().await;
            let of = answer["id"].as_str().expect("a call's answer").to_owned();
            self.answers.insert(of, answer);
        }
    }

    /// Calls tool `name` and returns its result.
    async fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.start_call(name, name, arguments).await;
        let answer = self.answer(name).await;
        answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{name}: {answer}"))
    }
}

/// How the first work of the daemon's only session ended: its `processing_end`'s reason,
/// waited for.
async fn the_only_work_ended(daemon: &TestDaemon) -> String {
    let mut client = daemon.client().await.unwrap();
    let list = client.call("session/list", json!({})).await.unwrap();
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1, "{list}");
    let session = list["sessions"][0]["session_id"].as_str().unwrap();
    client.subscribe(session, Some(0)).await.unwrap();
    let events = client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    events.last().unwrap()["data"]["reason"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A result's text content.
fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {result}"))
        .to_owned()
}

async fn daemon(mock: &MockProvider) -> TestDaemon {
    TestDaemon::start(&mock.url).await.expect("daemon starts")
}

/// A daemon on the mock with this config file.
async fn daemon_with(mock: &MockProvider, config: &str) -> TestDaemon {
    let env = [
        ("ANTHROPIC_BASE_URL", mock.url.as_str()),
        ("ANTHROPIC_API_KEY", "test-key"),
    ];
    TestDaemon::start_with_config(&env, Some(config))
        .await
        .expect("daemon starts")
}

/// The whole round with the client Claude Code and Cursor speak (the initialize handshake):
/// the tools and their schemas, a session started with a tool round and its final text,
/// progress on the way, a reply to it, and the list; the session is an ordinary one
/// afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_starts_replies_to_and_lists_sessions() {
    let Some(python) = python() else { return };
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    std::fs::write(cwd.join("notes.txt"), "remember this line\n").unwrap();
    mock.push_stream(sse::tools(
        "",
        &[("t1", "read_file", json!({"file_path": "notes.txt"}))],
    ));
    mock.push_stream(sse::text("It says remember."));
    mock.push_stream(sse::text("Still remember."));
    let mut mcp = Driver::start(&python, &daemon, "legacy", &[]);

    let info = mcp.ask(json!({"op": "info"})).await;
    assert_eq!(info["server_name"], "agentd");
    assert!(
        info["instructions"]
            .as_str()
            .unwrap()
            .contains("agentctl respond")
    );
    let tools = mcp.ask(json!({"op": "tools"})).await;
    let tools = tools["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["session_list", "session_reply", "session_start"]);
    let start = &tools[2];
    assert_eq!(start["inputSchema"]["required"], json!(["prompt"]));
    assert_eq!(
        start["inputSchema"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["prompt", "cwd", "provider", "model"]
    );
    assert!(start["outputSchema"]["properties"]["session_id"].is_object());
    assert_eq!(tools[0]["annotations"]["readOnlyHint"], true);

    let cwd_text = cwd.display().to_string();
    mcp.start_call(
        "start",
        "session_start",
        json!({"prompt": "What does notes.txt say?", "cwd": cwd_text}),
    )
    .await;
    let started = mcp.answer("start").await;
    let result = &started["result"];
    let out = &result["structuredContent"];
    assert_eq!(out["status"], "completed", "{started}");
    assert_eq!(out["text"], "It says remember.");
    let session = out["session_id"].as_str().unwrap().to_owned();
    assert_eq!(result["isError"], false);
    let said = text(result);
    assert!(said.starts_with("It says remember.\n\n["), "{said}");
    assert!(said.contains(&session), "{said}");
    let progress: Vec<&str> = started["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert!(
        progress.iter().any(|m| m.starts_with("read_file ")),
        "{progress:?}"
    );

    let replied = mcp
        .call(
            "session_reply",
            json!({"session_id": session, "prompt": "Still?"}),
        )
        .await;
    assert_eq!(replied["structuredContent"]["status"], "completed");
    assert_eq!(replied["structuredContent"]["text"], "Still remember.");
    assert_eq!(replied["structuredContent"]["session_id"], session.as_str());
    // The reply continued the conversation: the model saw the first exchange.
    let third = mock.requests()[2].body.to_string();
    assert!(third.contains("It says remember."), "{third}");

    let listed = mcp.call("session_list", json!({})).await;
    assert_eq!(
        listed["structuredContent"]["sessions"],
        json!([{
            "session_id": session,
            "title": "What does notes.txt say?",
            "cwd": cwd_text,
            "state": "idle",
            "updated": listed["structuredContent"]["sessions"][0]["updated"],
        }])
    );
    assert_eq!(listed["structuredContent"]["total"], 1);

    // An ordinary session of the daemon: the terminal sees both inputs.
    let history = daemon.agentctl(&["history", &session], None).await.unwrap();
    let history = String::from_utf8_lossy(&history.stdout);
    assert!(
        history.contains("What does notes.txt say?") && history.contains("Still?"),
        "{history}"
    );
}

/// The 2026 handshake (the SDK's `auto` mode discovers the server first) runs a session too,
/// and `cwd` defaults to the MCP server's own directory (a relative one is taken from there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_2026_handshake_runs_a_session_in_the_servers_directory() {
    let Some(python) = python() else { return };
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    mock.push_stream(sse::text("Done."));
    let mut mcp = Driver::start(&python, &daemon, "auto", &[]);
    let info = mcp.ask(json!({"op": "info"})).await;
    assert_eq!(info["protocol_version"], "2026-07-28");
    let result = mcp.call("session_start", json!({"prompt": "hi"})).await;
    assert_eq!(
        result["structuredContent"]["status"], "completed",
        "{result}"
    );
    // The driver runs in the test's directory, and so does the server it starts; `cwd`
    // filters are taken from there too.
    let here = std::env::current_dir().unwrap().display().to_string();
    let listed = mcp.call("session_list", json!({"cwd": "."})).await;
    assert_eq!(listed["structuredContent"]["total"], 1, "{listed}");
    assert_eq!(listed["structuredContent"]["sessions"][0]["cwd"], here);
    let elsewhere = mcp.call("session_list", json!({"cwd": "/"})).await;
    assert_eq!(elsewhere["structuredContent"]["total"], 0, "{elsewhere}");
}

/// Every failure is a tool error with a clear text, and the server goes on serving: an
/// unknown session, bad arguments, an empty prompt, an unknown provider, a provider without a
/// key, a directory that does not exist, a limit out of range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_tool_errors_and_the_server_goes_on() {
    let Some(python) = python() else { return };
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let mut mcp = Driver::start(&python, &daemon, "legacy", &[]);
    let cases = [
        (
            "session_reply",
            json!({"session_id": "no-such-session", "prompt": "hi"}),
            "session_list lists the sessions",
        ),
        ("session_start", json!({"prompt": 5}), "expected a string"),
        (
            "session_start",
            json!({"prompt": "hi", "colour": "red"}),
            "colour",
        ),
        (
            "session_start",
            json!({"prompt": "  "}),
            "the prompt is empty",
        ),
        (
            "session_start",
            json!({"prompt": "hi", "provider": "nope"}),
            "nope",
        ),
        (
            "session_start",
            json!({"prompt": "hi", "provider": "openai"}),
            "agentctl login",
        ),
        (
            "session_start",
            json!({"prompt": "hi", "cwd": "/no/such/dir"}),
            "/no/such/dir",
        ),
        (
            "session_list",
            json!({"limit": 0}),
            "limit must be 1 to 200",
        ),
    ];
    for (tool, arguments, says) in cases {
        let result = mcp.call(tool, arguments.clone()).await;
        assert_eq!(result["isError"], true, "{tool} {arguments}: {result}");
        assert!(text(&result).contains(says), "{tool} {arguments}: {result}");
    }
    let listed = mcp.call("session_list", json!({})).await;
    assert_eq!(listed["structuredContent"]["total"], 0, "{listed}");
    assert!(mock.requests().is_empty());
}

/// Without a daemon (and auto-start off) the server still starts and lists its tools, and
/// each call says the daemon cannot be reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_daemon_each_call_says_so() {
    let Some(python) = python() else { return };
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let nowhere = daemon.root.path().join("nobody-here.sock");
    let env = [
        ("AGENTD_NO_AUTOSTART", "1"),
        ("AGENTD_SOCKET", nowhere.to_str().unwrap()),
    ];
    let mut mcp = Driver::start(&python, &daemon, "legacy", &env);
    let tools = mcp.ask(json!({"op": "tools"})).await;
    assert_eq!(tools["tools"].as_array().unwrap().len(), 3);
    let result = mcp.call("session_start", json!({"prompt": "hi"})).await;
    assert_eq!(result["isError"], true);
    assert!(text(&result).contains("cannot reach agentd"), "{result}");
}

/// A call the client cancels (`notifications/cancelled`, sent by the SDK when the call is
/// abandoned) aborts the session's work: the model's stream, held open by the mock, is cut,
/// and the session is idle again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_aborts_the_sessions_work() {
    let Some(python) = python() else { return };
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let gate = Gate::new();
    let mut held = vec![sse::message_start()];
    held.extend(sse::text_block(0, "Thinking"));
    held.push(Chunk::Wait(gate.clone()));
    mock.push_stream(held);
    let mut mcp = Driver::start(&python, &daemon, "legacy", &[]);
    mcp.start_call("long", "session_start", json!({"prompt": "take your time"}))
        .await;
    mock.wait_requests(1).await;
    mcp.send(json!({"op": "cancel", "id": "long"})).await;
    assert_eq!(
        mcp.answer("long").await,
        json!({"id": "long", "cancelled": true})
    );

    assert_eq!(the_only_work_ended(&daemon).await, "aborted");
    gate.open();
    // The server goes on: the next call is answered, and the session is idle.
    let listed = mcp.call("session_list", json!({})).await;
    assert_eq!(listed["structuredContent"]["sessions"][0]["state"], "idle");
    assert_eq!(mock.requests().len(), 1, "nothing ran after the abort");
}

/// A tool call that needs a person's approval ends the MCP call at once, saying how to
/// answer it; a reply meanwhile is refused the same way; once a person answered in the
/// terminal and the work ended, replies work again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_ends_the_call_and_says_how_to_answer_it() {
    let Some(python) = python() else { return };
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon_with(&mock, "[session.approval]\nmode = \"ask\"\n").await;
    let dir = tempfile::tempdir().unwrap();
    mock.push_stream(sse::shell("t1", "echo approved > out.txt"));
    mock.push_stream(sse::text("Wrote it."));
    mock.push_stream(sse::text("Yes."));
    let mut mcp = Driver::start(&python, &daemon, "legacy", &[]);
    let cwd = dir.path().display().to_string();
    let result = mcp
        .call("session_start", json!({"prompt": "write it", "cwd": cwd}))
        .await;
    let out = &result["structuredContent"];
    assert_eq!(out["status"], "awaiting_approval", "{result}");
    let session = out["session_id"].as_str().unwrap().to_owned();
    let request = out["waiting"]["request_id"].as_str().unwrap().to_owned();
    assert!(
        out["waiting"]["what"]
            .as_str()
            .unwrap()
            .contains("echo approved > out.txt")
    );
    assert!(out["waiting"]["expires"].is_string(), "{out}");
    let said = text(&result);
    assert!(
        said.contains(&format!("agentctl respond {session} {request} allow")),
        "{said}"
    );

    let refused = mcp
        .call(
            "session_reply",
            json!({"session_id": session, "prompt": "and?"}),
        )
        .await;
    assert_eq!(refused["isError"], true);
    assert!(
        text(&refused).contains(&format!("agentctl respond {session} {request}")),
        "{refused}"
    );

    let mut client = daemon.client().await.unwrap();
    let snapshot = client
        .call("session/get", json!({"session_id": session}))
        .await
        .unwrap();
    client
        .subscribe(&session, snapshot["last_seq"].as_u64())
        .await
        .unwrap();
    let answered = daemon
        .agentctl(&["respond", &session, &request, "allow"], None)
        .await
        .unwrap();
    assert!(answered.status.success(), "{answered:?}");
    let events = client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    assert_eq!(events.last().unwrap()["data"]["reason"], "completed");
    assert!(dir.path().join("out.txt").exists());

    let replied = mcp
        .call(
            "session_reply",
            json!({"session_id": session, "prompt": "Done?"}),
        )
        .await;
    assert_eq!(replied["structuredContent"]["status"], "completed");
    assert_eq!(replied["structuredContent"]["text"], "Yes.");
}

/// The model's question (`ask_user`) ends the call with status `question`; the next
/// `session_reply` answers it, and answers with the end of the input that asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_answers_the_models_question() {
    let Some(python) = python() else { return };
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon_with(&mock, "[session.approval]\nask_user = true\n").await;
    mock.push_stream(sse::tools(
        "Let me ask.",
        &[(
            "q1",
            "ask_user",
            json!({"question": "Which color?", "options": ["red", "blue"]}),
        )],
    ));
    mock.push_stream(sse::text("Blue it is."));
    let mut mcp = Driver::start(&python, &daemon, "legacy", &[]);
    let asked = mcp
        .call("session_start", json!({"prompt": "pick a color"}))
        .await;
    let out = &asked["structuredContent"];
    assert_eq!(out["status"], "question", "{asked}");
    assert_eq!(out["waiting"]["what"], "Which color?");
    assert_eq!(out["waiting"]["options"], json!(["red", "blue"]));
    assert!(text(&asked).contains("session_reply"), "{asked}");
    let session = out["session_id"].as_str().unwrap();
    let answered = mcp
        .call(
            "session_reply",
            json!({"session_id": session, "prompt": "blue"}),
        )
        .await;
    assert_eq!(answered["structuredContent"]["status"], "completed");
    assert_eq!(answered["structuredContent"]["text"], "Blue it is.");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "the answer started no new work");
    assert!(requests[1].body.to_string().contains("blue"));
}

/// `agentctl mcp-server` on raw pipes, for what no SDK sends, after the initialize handshake.
struct Raw {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Raw {
    async fn start(daemon: &TestDaemon) -> Self {
        let mut cmd = tokio::process::Command::from(daemon.command("agentctl"));
        let mut child = cmd
            .arg("mcp-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut raw = Self {
            child,
            stdin,
            lines,
        };
        raw.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        )
        .await;
        assert_eq!(raw.next().await["result"]["serverInfo"]["name"], "agentd");
        raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        raw
    }

    async fn send(&mut self, message: &Value) {
        self.bytes(format!("{message}\n").as_bytes()).await;
    }

    async fn bytes(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).await.unwrap();
    }

    /// The next message from the server, which must be JSON.
    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(ANSWER_WITHIN, self.lines.next_line())
            .await
            .expect("an answer in time")
            .unwrap()
            .expect("the server still runs");
        serde_json::from_str(&line).unwrap()
    }
}

/// Raw lines no SDK sends: garbage, a JSON value that is no message, and a request far
/// larger than the daemon takes are dropped or answered with an error, with memory bounded
/// by the line cap (not by what was sent), and the server keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_lines_are_dropped_with_bounded_memory_and_serving_goes_on() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let mut raw = Raw::start(&daemon).await;
    let pid = raw.child.id().unwrap();
    raw.bytes(b"not json at all\n{\"half\":\n").await;
    raw.bytes(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":7}\n")
        .await;
    // 64 MiB in one line, in pieces, then its newline.
    raw.bytes(br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"session_start","arguments":{"prompt":""#).await;
    let piece = vec![b'x'; 1 << 20];
    for _ in 0..64 {
        raw.bytes(&piece).await;
    }
    raw.bytes(b"\"}}}\n").await;
    raw.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}))
        .await;
    // Lines are read in order: the value that is no message got an error; the garbage and
    // the huge line nothing.
    let refused = raw.next().await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let listed = raw.next().await;
    assert_eq!(listed["id"], 4);
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 3);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    eprintln!("peak resident memory after a 64 MiB line: {peak_kib} KiB");
    assert!(
        peak_kib < 48 << 10,
        "the server peaked at {peak_kib} KiB for a 64 MiB line"
    );
    assert!(mock.requests().is_empty());
}

/// Calls in flight are bounded: with 32 sessions working (their model streams held open by
/// the mock until the test ends), one more call, even a `session_list`, is refused at once as
/// a tool error rather than queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_flight_are_bounded() {
    let mock = MockProvider::start().await.unwrap();
    let gate = Gate::new();
    mock.respond_with(move |_| {
        Reply::Stream(vec![sse::message_start(), Chunk::Wait(gate.clone())])
    });
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().display().to_string();
    let mut raw = Raw::start(&daemon).await;
    for id in 0..32 {
        raw.send(
            &json!({"jsonrpc": "2.0", "id": 100 + id, "method": "tools/call",
            "params": {"name": "session_start", "arguments": {"prompt": "wait", "cwd": cwd}}}),
        )
        .await;
    }
    mock.wait_requests(32).await;
    raw.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "session_list", "arguments": {}}}))
        .await;
    let refused = raw.next().await;
    assert_eq!(refused["id"], 2, "{refused}");
    assert_eq!(refused["result"]["isError"], true);
    assert!(
        refused["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("at most 32 calls at once"),
        "{refused}"
    );
}

/// A client that goes away (stdin closed) while a call runs abandons it: the session's work
/// is aborted before the server exits, so nothing runs on unattended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_going_away_aborts_the_work_of_its_calls() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let gate = Gate::new();
    mock.push_stream(vec![sse::message_start(), Chunk::Wait(gate.clone())]);
    let mut raw = Raw::start(&daemon).await;
    raw.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "session_start", "arguments": {"prompt": "wait"}}}))
        .await;
    mock.wait_requests(1).await;
    drop(raw.stdin);
    let status = tokio::time::timeout(ANSWER_WITHIN, raw.child.wait())
        .await
        .expect("the server exits once its client is gone")
        .unwrap();
    assert!(status.success(), "{status}");

    assert_eq!(the_only_work_ended(&daemon).await, "aborted");
    gate.open();
}

/// The server outlives the daemon: while it is down a call says so, and once it is back the
/// next call reaches it, without restarting the MCP client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_reconnects_to_a_restarted_daemon() {
    let Some(python) = python() else { return };
    let mock = MockProvider::start().await.unwrap();
    let mut daemon = daemon(&mock).await;
    let mut mcp = Driver::start(&python, &daemon, "legacy", &[("AGENTD_NO_AUTOSTART", "1")]);
    mock.push_stream(sse::text("Before."));
    let before = mcp.call("session_start", json!({"prompt": "one"})).await;
    assert_eq!(before["structuredContent"]["status"], "completed");
    daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    let down = mcp.call("session_list", json!({})).await;
    assert_eq!(down["isError"], true, "{down}");
    assert!(text(&down).contains("agentd"), "{down}");
    daemon.restart().await.unwrap();
    let listed = mcp.call("session_list", json!({})).await;
    assert_eq!(listed["structuredContent"]["total"], 1, "{listed}");
}
