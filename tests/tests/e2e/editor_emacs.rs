//! The Emacs package (`editors/emacs`) in real Emacs, headless, against the real daemon and the
//! mock provider: the ERT suite of `editors/emacs/test/agentd-test.el` (create, a tool round
//! trip, the transcript, steer, abort, attach, reconnect after a restart, approvals and
//! questions answered, a lagged stream resumed, undo, redo and the agent's diff, agentctl's refusals), its autostart test
//! on a socket where nothing answers, and the package's byte-compilation, checkdoc and
//! package-lint. The package speaks through Emacs' own jsonrpc.el and finds the socket with
//! `agentctl socket-path`.

use agentd_tests::mock::{Chunk, MockProvider, Reply};
use agentd_tests::{RawClient, TestDaemon, bin_dir, sse};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// Upper bound on one whole Emacs run: a guard against hangs, not a timing assertion.
const RUN_BOUND: std::time::Duration = std::time::Duration::from_secs(600);

fn emacs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../editors/emacs")
}

/// The text of a tool result's content (a string, or text blocks).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// A response that reasons (in two deltas) before answering.
fn thinking(thought: (&str, &str), answer: &str) -> Vec<Chunk> {
    let event = |data: Value| {
        Chunk::Data(format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap_or_default()
        ))
    };
    let mut chunks = vec![
        sse::message_start(),
        event(json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""}})),
        event(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": thought.0}})),
        event(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": thought.1}})),
        event(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "signature_delta", "signature": "sig"}})),
        event(json!({"type": "content_block_stop", "index": 0})),
    ];
    chunks.extend(sse::text_block(1, answer));
    chunks.extend(sse::message_end("end_turn"));
    chunks
}

/// The scripted model the ERT suite talks to (its commentary lists the prompts).
fn scripted(body: &Value) -> Reply {
    static CALLS: AtomicU64 = AtomicU64::new(1);
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_default();
    let blocks = match &last["content"] {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    };
    let texts: Vec<&str> = blocks
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect();
    let results: Vec<String> = blocks
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| content_text(&b["content"]))
        .collect();
    if let Some(result) = results.first() {
        let mut answer = format!(
            "The tool said: {}",
            result.lines().next().unwrap_or_default().trim()
        );
        if !texts.is_empty() {
            answer.push_str(&format!(" Heard: {}", texts.join(" ")));
        }
        return Reply::Stream(sse::text(&answer));
    }
    let prompt = texts.join("\n");
    let call = format!("toolu_emacs{:04}", CALLS.fetch_add(1, Ordering::Relaxed));
    if let Some(command) = prompt.strip_prefix("PLEASE-RUN ") {
        return Reply::Stream(sse::tools(
            "Running it.",
            &[(&call, "shell", json!({"command": command}))],
        ));
    }
    if let Some(file) = prompt.strip_prefix("PLEASE-EDIT ") {
        return Reply::Stream(sse::tools(
            "",
            &[(
                &call,
                "edit_file",
                json!({"file_path": file, "old_string": "old line", "new_string": "new line"}),
            )],
        ));
    }
    if prompt == "PLEASE-ASK" {
        return Reply::Stream(sse::tools(
            "",
            &[(
                &call,
                "ask_user",
                json!({"question": "Which database?", "options": ["postgres", "sqlite"]}),
            )],
        ));
    }
    if prompt == "PLEASE-FLOOD" {
        // Far more events than the daemon buffers for a subscriber that reads nothing.
        return Reply::Stream(sse::text(&vec!["w"; 6000].join(" ")));
    }
    if prompt == "PLEASE-THINK" {
        return Reply::Stream(thinking(
            ("Let me think ", "about it carefully."),
            "Thought it through.",
        ));
    }
    Reply::Stream(sse::text(&format!("Echo: {prompt}")))
}

/// What an Emacs run printed and how it ended.
struct Run {
    success: bool,
    output: String,
    requests: usize,
}

/// Runs `emacs --batch` with `args`, in the daemon's environment plus the suite's variables,
/// answering the suite's `AGENTD-TEST-REQUEST`s (see agentd-test.el) until it exits.
async fn emacs(daemon: &mut TestDaemon, workdir: &Path, emacs: &Path, args: &[&str]) -> Run {
    let dir = emacs_dir();
    let mut cmd = daemon.program(emacs);
    cmd.arg("--batch")
        .arg("-Q")
        .arg("-L")
        .arg(&dir)
        .args(args)
        .current_dir(workdir)
        .env("AGENTD_TEST_WORKDIR", workdir)
        .env("AGENTD_TEST_AGENTCTL", bin_dir().join("agentctl"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // A ready MCP server for the suite's MCP scenario (a prerequisite under CI).
    if let Some(time) = crate::mcp::mcp_python("mcp-server-time") {
        cmd.env("AGENTD_TEST_MCP_TIME", time);
    }
    let mut child = tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn()
        .expect("emacs starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let out = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text).await;
        text
    });
    let mut output = String::new();
    let mut requests = 0;
    let finished = tokio::time::timeout(RUN_BOUND, async {
        while let Some(line) = lines.next_line().await.expect("emacs's stderr") {
            output.push_str(&line);
            output.push('\n');
            let Some(request) = line.strip_prefix("AGENTD-TEST-REQUEST ") else {
                continue;
            };
            requests += 1;
            let words: Vec<&str> = request.splitn(3, ' ').collect();
            match words.as_slice() {
                ["restart-and-submit", session, text] => {
                    daemon
                        .stop_with(nix::sys::signal::Signal::SIGTERM)
                        .await
                        .expect("the daemon stops");
                    daemon.restart().await.expect("the daemon starts again");
                    let mut client = RawClient::connect(&daemon.socket).await.unwrap();
                    client.run(session, text).await.expect("the turn runs");
                }
                // Emacs reads nothing while it waits for the answer. This client does not
                // subscribe (it could lag too on a loaded machine): it waits for idle.
                ["submit", session, text] => {
                    let mut client = RawClient::connect(&daemon.socket).await.unwrap();
                    let params = json!({"session_id": session});
                    let turns = |s: &Value| s["turns"].as_u64().unwrap_or_default();
                    let before = turns(&client.call("session/get", params.clone()).await.unwrap());
                    client
                        .call(
                            "session/submit",
                            json!({"session_id": session, "text": text}),
                        )
                        .await
                        .expect("the submit is taken");
                    crate::eventually("the turn to end", async || {
                        let s = client.call("session/get", params.clone()).await.unwrap();
                        s["state"] == "idle" && turns(&s) > before
                    })
                    .await;
                }
                _ => panic!("unknown request from the suite: {request}"),
            }
            stdin.write_all(b"done\n").await.expect("emacs reads");
        }
        child.wait().await.expect("emacs exits")
    })
    .await;
    let status = finished.unwrap_or_else(|_| panic!("emacs did not finish:\n{output}"));
    output.push_str(&out.await.unwrap_or_default());
    output.push_str(&format!("(emacs exited: {status})\n"));
    Run {
        success: status.success(),
        output,
        requests,
    }
}

/// Whether ERT's batch output says `test` passed (`   passed  3/11  NAME (0.1 sec)`).
fn passed(output: &str, test: &str) -> bool {
    output.lines().any(|l| {
        let words: Vec<&str> = l.split_whitespace().collect();
        words.first() == Some(&"passed") && words.get(2) == Some(&test)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_emacs_package_passes_its_suite_against_the_daemon() {
    let Some(program) = agentd_tests::program("emacs") else {
        return;
    };
    let mock = MockProvider::start().await.unwrap();
    mock.respond_with(scripted);
    let mut daemon = TestDaemon::start(&mock.url).await.unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let suite = emacs_dir().join("test/agentd-test.el");
    let run = emacs(
        &mut daemon,
        workdir.path(),
        &program,
        &[
            "-l",
            suite.to_str().unwrap(),
            "--eval",
            "(ert-run-tests-batch-and-exit '(not (tag autostart)))",
        ],
    )
    .await;
    assert!(
        run.success,
        "{}\n--- daemon log ---\n{}",
        run.output,
        daemon.log_text()
    );
    // Every scenario ran (a suite that loaded nothing would also exit 0).
    for scenario in [
        "framing-survives-partial-messages",
        "a-message-past-the-cap-ends-the-connection",
        "submit-with-a-tool-round-trip",
        "skills-and-commands-complete-after-a-slash",
        "reasoning-and-long-output-are-folded",
        "an-edit-opens-as-a-diff",
        "steer-and-follow-up-while-working",
        "abort-ends-the-process",
        "attach-to-a-session-started-by-agentctl",
        "reconnect-after-a-restart-loses-nothing",
        "context-from-a-region-and-a-file",
        "fork-rollback-and-close",
        "daemon-errors-are-user-errors",
        "approvals-and-questions-are-answered",
        "a-socket-others-could-reach-is-refused",
        "mcp-server-states-are-shown",
        "undo-redo-and-the-agents-changes",
        "a-lagged-stream-resumes-without-loss",
    ] {
        assert!(
            passed(&run.output, &format!("agentd-test-{scenario}")),
            "agentd-test-{scenario} did not pass:\n{}",
            run.output
        );
    }
    assert_eq!(
        run.requests, 2,
        "the restart and the flood were asked for once each"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_emacs_package_starts_the_daemon_through_agentctl() {
    let Some(program) = agentd_tests::program("emacs") else {
        return;
    };
    let mock = MockProvider::start().await.unwrap();
    mock.respond_with(scripted);
    // A daemon's directories and environment, with no daemon answering on its socket.
    let mut daemon = TestDaemon::start(&mock.url).await.unwrap();
    daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let suite = emacs_dir().join("test/agentd-test.el");
    let run = emacs(
        &mut daemon,
        workdir.path(),
        &program,
        &[
            "-l",
            suite.to_str().unwrap(),
            "--eval",
            "(ert-run-tests-batch-and-exit '(tag autostart))",
        ],
    )
    .await;
    // The suite shuts the daemon it started down; one still answering is a leak to end here.
    let left = match RawClient::connect(&daemon.socket).await {
        Ok(mut client) => client.call("daemon/info", json!({})).await.ok(),
        Err(_) => None,
    };
    if let Some(pid) = left.as_ref().and_then(|info| info["pid"].as_i64()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(run.success, "{}", run.output);
    assert!(
        passed(&run.output, "agentd-test-autostart-through-agentctl"),
        "{}",
        run.output
    );
    assert!(
        left.is_none(),
        "the daemon agentctl started was left running"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_emacs_package_compiles_without_warnings_and_passes_its_linters() {
    let Some(program) = agentd_tests::program("emacs") else {
        return;
    };
    // A copy, so the .elc does not land in the source tree.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("agentd.el");
    std::fs::copy(emacs_dir().join("agentd.el"), &copy).unwrap();
    let out = std::process::Command::new(program)
        .args(["--batch", "-Q", "-l"])
        .arg(emacs_dir().join("test/agentd-lint.el"))
        .arg(&copy)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("byte-compile: clean"), "{text}");
    assert!(text.contains("checkdoc: clean"), "{text}");
    // Exit 2: everything else was clean, but package-lint (Debian's elpa-package-lint) is absent.
    if out.status.code() == Some(2)
        && !agentd_tests::prerequisite("package-lint (elpa-package-lint)", false)
    {
        return;
    }
    assert!(out.status.success(), "{text}");
    assert!(text.contains("package-lint: clean"), "{text}");
}
