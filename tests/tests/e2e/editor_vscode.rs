//! The VS Code extension (`editors/vscode`): its socket client and transcript model under
//! `node --test` (`npm test`) against the real daemon and a scripted mock provider, its sources
//! type-checked by `tsc` against `@types/vscode`, and a `.vsix` built by `@vscode/vsce`.
//! Node and the extension's `node_modules` are prerequisites: `.ci/run` installs them.
//!
//! The mock answers from the prompt itself, so the Node scenarios script their own turns:
//! `run: CMD` asks for a `shell` call running CMD, `call: TOOL {JSON}` for any tool call,
//! `think: X` streams reasoning before its answer, anything else is echoed; after tool results the answer quotes them, and any
//! steering text the request carries.

use agentd_tests::mock::{Chunk, MockProvider, Reply};
use agentd_tests::{RawClient, TestDaemon, bin_dir, prerequisite, program, sse};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Serializes the runs that write the extension's `out/` (tsc in `npm test` and `vsce package`).
pub(crate) static OUT_DIR: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A guard against a hung Node process, far above what any step takes on a loaded machine.
pub(crate) const NPM_BOUND: Duration = Duration::from_secs(600);

fn extension_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../editors/vscode")
}

/// The extension's directory once node, npm and its `node_modules` are there.
pub(crate) fn toolchain() -> Option<PathBuf> {
    program("node")?;
    program("npm")?;
    let dir = extension_dir();
    prerequisite(
        "editors/vscode/node_modules (run `npm ci` in editors/vscode)",
        dir.join("node_modules/.bin/tsc").is_file() && dir.join("node_modules/.bin/vsce").is_file(),
    )
    .then_some(dir)
}

/// The text of every `text` block (or string content) and every `tool_result` of the
/// request's last message.
fn last_message(body: &Value) -> (Vec<String>, Vec<String>) {
    let mut texts = Vec::new();
    let mut results = Vec::new();
    let content = &body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_default()["content"];
    if let Some(text) = content.as_str() {
        texts.push(text.to_owned());
    }
    for block in content.as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("text") => texts.push(block["text"].as_str().unwrap_or_default().to_owned()),
            Some("tool_result") => results.push(match &block["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }),
            _ => {}
        }
    }
    (texts, results)
}

/// A thinking block at index 0: the reasoning in two deltas, then its signature.
fn thinking_block(text: &str) -> Vec<Chunk> {
    let event = |data: Value| {
        let kind = data["type"].as_str().unwrap_or_default().to_owned();
        Chunk::Data(format!("event: {kind}\ndata: {data}\n\n"))
    };
    let half = text.len() / 2;
    vec![
        event(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        ),
        event(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": &text[..half]}}),
        ),
        event(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": &text[half..]}}),
        ),
        event(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig-mock"}}),
        ),
        event(json!({"type": "content_block_stop", "index": 0})),
    ]
}

/// The scripted provider: the reply follows from the last message (see the module doc).
pub(crate) fn scripted(body: &Value) -> Reply {
    static CALLS: AtomicU64 = AtomicU64::new(1);
    let (texts, results) = last_message(body);
    if !results.is_empty() {
        let mut answer = format!("result: {}", results.join(" | ").trim());
        for steer in &texts {
            answer.push_str(&format!(" | steered: {steer}"));
        }
        return Reply::Stream(sse::text(&answer));
    }
    let prompt = texts.join("\n");
    if let Some(command) = prompt.strip_prefix("run: ") {
        let id = format!("toolu_vscode{:04}", CALLS.fetch_add(1, Ordering::Relaxed));
        return Reply::Stream(sse::shell(&id, command));
    }
    if let Some((name, args)) = prompt
        .strip_prefix("call: ")
        .and_then(|c| c.split_once(' '))
    {
        let id = format!("toolu_vscode{:04}", CALLS.fetch_add(1, Ordering::Relaxed));
        let args: Value = serde_json::from_str(args).unwrap_or(Value::Null);
        return Reply::Stream(sse::tools("", &[(&id, name, args)]));
    }
    if let Some(topic) = prompt.strip_prefix("think: ") {
        let mut chunks = vec![sse::message_start()];
        chunks.extend(thinking_block(&format!("pondering {topic}")));
        chunks.extend(sse::text_block(1, &format!("thought about {topic}")));
        chunks.extend(sse::message_end("end_turn"));
        return Reply::Stream(chunks);
    }
    Reply::Stream(sse::text(&format!("echo: {prompt}")))
}

/// Runs `cmd` in the extension's directory to completion.
pub(crate) async fn run_in(dir: &Path, mut cmd: Command) -> Output {
    let what = format!("{cmd:?}");
    cmd.current_dir(dir).stdin(std::process::Stdio::null());
    let child = tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(NPM_BOUND, child)
        .await
        .unwrap_or_else(|_| panic!("{what} hung"))
        .unwrap_or_else(|e| panic!("{what} did not run: {e}"))
}

/// `npx --no-install TOOL args` (the extension's pinned devDependencies, never a download).
pub(crate) fn npx(args: &[&str]) -> Command {
    let mut cmd = Command::new("npx");
    cmd.arg("--no-install").args(args);
    cmd
}

pub(crate) fn text(output: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// How many `test(...)` the Node test files declare.
fn tests_written(dir: &Path) -> u32 {
    let sources = std::fs::read_dir(dir.join("src/test")).expect("src/test");
    let mut count = 0;
    for entry in sources.flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        count += text.lines().filter(|l| l.starts_with("test(\"")).count();
    }
    u32::try_from(count).expect("a sane number of tests")
}

/// Stops a daemon that agentctl started on `socket` during the scenarios, if one answers.
pub(crate) async fn shut_down(socket: &Path) {
    if let Ok(mut client) = RawClient::connect(socket).await {
        let _ = client.call("daemon/shutdown", json!({})).await;
    }
}

/// `npm test`: the client's framing, routing and drift checks, then every scenario against
/// the real daemon (create, a tool round trip, the transcript, reasoning, steer, follow-up,
/// abort with the process gone, attach to a session agentctl started, typed errors,
/// autostart, reconnect after a daemon restart without loss or duplicates).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_against_the_real_daemon() {
    let Some(dir) = toolchain() else { return };
    let mock = MockProvider::start().await.expect("mock starts");
    mock.respond_with(scripted);
    let daemon = TestDaemon::start(&mock.url).await.expect("daemon starts");
    let output = {
        let _out = OUT_DIR.lock().await;
        let mut npm = daemon.program("npm");
        npm.arg("test")
            .env("AGENTCTL", bin_dir().join("agentctl"))
            .env("CI", std::env::var("CI").unwrap_or_default())
            .env("NPM_CONFIG_UPDATE_NOTIFIER", "false");
        run_in(&dir, npm).await
    };
    // The restart scenario leaves a daemon agentctl started; the autostart one may too.
    shut_down(&daemon.socket).await;
    shut_down(&daemon.root.path().join("run/autostart/agentd.sock")).await;
    let report = text(&output);
    assert!(
        output.status.success(),
        "npm test failed:\n{report}\n--- agentd log\n{}",
        daemon.log_text()
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let count = |label: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# {label} ")))
            .and_then(|n| n.trim().parse::<u32>().ok())
            .unwrap_or_else(|| panic!("no `# {label}` line in:\n{report}"))
    };
    assert_eq!(
        (count("fail"), count("skipped"), count("todo")),
        (0, 0, 0),
        "{report}"
    );
    assert_eq!(
        count("pass"),
        tests_written(&dir),
        "every test written ran:\n{report}"
    );
    let summary: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("# ") && !l.starts_with("# Subtest"))
        .collect();
    println!("npm test: {}", summary.join("; "));
}

/// `tsc --noEmit` against `@types/vscode` (strict; the extension and its webview page), then
/// `vsce package`: a `.vsix` holding the manifest, the compiled extension and `vscode-jsonrpc`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typechecks_and_packages_a_vsix() {
    let Some(dir) = toolchain() else { return };
    let mut npm = Command::new("npm");
    npm.args(["run", "typecheck"]);
    let typecheck = run_in(&dir, npm).await;
    assert!(
        typecheck.status.success(),
        "tsc --noEmit failed:\n{}",
        text(&typecheck)
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let vsix = tmp.path().join("agentd.vsix");
    let vsix_arg = vsix.display().to_string();
    let package = {
        let _out = OUT_DIR.lock().await;
        run_in(&dir, npx(&["vsce", "package", "--out", &vsix_arg])).await
    };
    assert!(
        package.status.success(),
        "vsce package failed:\n{}",
        text(&package)
    );
    let bytes = std::fs::read(&vsix).expect("the .vsix exists");
    assert!(bytes.starts_with(b"PK"), "a .vsix is a zip archive");
    let listing = String::from_utf8_lossy(&bytes);
    for entry in [
        "extension/package.json",
        "extension/out/extension.js",
        "extension/out/client.js",
        "extension/out/webview/chat.js",
        "extension/media/chat.css",
        // The one runtime dependency, shipped (vsce includes production dependencies).
        "extension/node_modules/vscode-jsonrpc/lib/node/main.js",
    ] {
        assert!(listing.contains(entry), "{entry} is not in the .vsix");
    }
    assert!(
        !listing.contains("extension/src/"),
        "sources are not shipped"
    );
}
