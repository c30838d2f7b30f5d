//! Hooks (`[[hooks.EVENT]]`) through the real daemon and mock provider: a `pre_tool_use`
//! hook written for Claude Code (its stdin fields, exit 2) blocking `rm` with its reason
//! reaching the model; a `post_tool_use` formatter; a `stop` hook keeping the agent working
//! once; `user_prompt_submit` adding context or refusing; hooks that hang, flood or crash; a
//! `notification` hook on an approval; `pre_compact` before a compaction and
//! `subagent_stop` keeping a child working; and the trust attacks: a model writing the workspace's
//! `.agents/hooks.toml` or the user's config file never gets a hook run.

use crate::processes::{live_with_marker, marker, wait_for};
use crate::{Setup, of_kind, setup_on};
use agentd_tests::mock::{MockProvider, Reply};
use agentd_tests::{TestDaemon, sse};
use serde_json::{Value, json};
use std::path::Path;

/// A session on a daemon whose config file is `config`, in a fresh directory.
async fn with_config(config: &str, create: Value) -> Setup {
    with_config_in(config, create, tempfile::tempdir().expect("tempdir")).await
}

/// [`with_config`] with the session in `workdir`.
async fn with_config_in(config: &str, create: Value, workdir: tempfile::TempDir) -> Setup {
    let mock = MockProvider::start().await.expect("mock starts");
    let daemon = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .config(config)
        .start()
        .await
        .expect("daemon starts");
    setup_on(mock, daemon, workdir, create).await
}

/// Writes an executable script.
fn script(dir: &Path, name: &str, text: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// The text of every tool result in the last request the model got.
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

fn outcomes(events: &[Value]) -> Vec<String> {
    of_kind(events, "hook_finished")
        .iter()
        .map(|e| e["data"]["outcome"].as_str().unwrap().to_owned())
        .collect()
}

/// Claude Code's documented Bash validator, in its own words: the JSON on stdin, exit 2 with
/// the reason on stderr. It also keeps what it was given, and the first line of the
/// transcript it was pointed at.
const CLAUDE_BASH_VALIDATOR: &str = r#"#!/usr/bin/env python3
import json, sys, os
input_data = json.load(sys.stdin)
with open(os.environ["SEEN"], "a") as f, open(input_data["transcript_path"]) as t:
    f.write(json.dumps(dict(input_data, transcript_head=t.readline())) + "\n")
tool_name = input_data.get("tool_name", "")
if tool_name != "Bash":
    sys.exit(0)
command = input_data.get("tool_input", {}).get("command", "")
if "rm " in command:
    print("rm is not allowed here: move files to ./trash instead", file=sys.stderr)
    sys.exit(2)
sys.exit(0)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_code_pre_tool_use_hook_blocks_rm_and_the_model_reads_why() {
    let bin = tempfile::tempdir().unwrap();
    // The hook runs in the session's sandbox: it may write the workspace.
    let workdir = tempfile::tempdir().unwrap();
    let seen = workdir.path().join("seen.jsonl");
    let validator = script(
        bin.path(),
        "validator.py",
        &CLAUDE_BASH_VALIDATOR.replace(
            "os.environ[\"SEEN\"]",
            &format!("{:?}", seen.display().to_string()),
        ),
    );
    let config = format!("[[hooks.pre_tool_use]]\nmatcher = \"Bash\"\ncommand = {validator:?}\n");
    let mut s = with_config_in(&config, json!({}), workdir).await;
    std::fs::write(s.workdir.path().join("keep.txt"), "x").unwrap();
    s.mock.push_stream(sse::tools(
        "",
        &[
            ("c1", "shell", json!({"command": "rm -f keep.txt"})),
            ("c2", "shell", json!({"command": "echo fine"})),
            ("c3", "read_file", json!({"file_path": "keep.txt"})),
        ],
    ));
    s.mock.push_stream(sse::text("ok"));
    let events = s.run("tidy up").await;

    assert!(s.workdir.path().join("keep.txt").exists(), "rm never ran");
    let results = results_sent(&s);
    assert!(
        results[0].contains("Blocked by the user's pre_tool_use hook")
            && results[0].contains("rm is not allowed here: move files to ./trash instead"),
        "{results:?}"
    );
    assert!(results[1].contains("fine"), "{results:?}");
    // The matcher `Bash` takes `shell` only; the two commands run side by side, so their
    // hooks end in either order.
    let mut ended = outcomes(&events);
    ended.sort();
    assert_eq!(ended, ["blocked", "ok"]);
    let started = of_kind(&events, "hook_started");
    let rm = started
        .iter()
        .find(|e| e["data"]["call_id"] == "c1")
        .expect("a hook for the rm");
    assert_eq!(rm["data"]["event"], "pre_tool_use");
    assert_eq!(rm["data"]["hook"], "hooks.pre_tool_use[0]");
    assert_eq!(rm["data"]["program"], validator);
    let finished = of_kind(&events, "hook_finished");
    let rm_end = finished
        .iter()
        .find(|e| e["data"]["hook_run"] == rm["data"]["hook_run"])
        .expect("the rm's hook ended");
    assert_eq!(rm_end["data"]["exit_code"], 2);

    // What it read is Claude Code's document.
    let first: Value = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["tool_use_id"] == "c1")
        .expect("the hook saw the rm");
    assert_eq!(first["session_id"], s.session.as_str());
    assert_eq!(first["hook_event_name"], "PreToolUse");
    assert_eq!(first["tool_name"], "Bash");
    assert_eq!(first["tool_input"]["command"], "rm -f keep.txt");
    assert_eq!(first["tool_use_id"], "c1");
    assert_eq!(first["cwd"], s.workdir.path().display().to_string());
    // The journal, which the sandbox hides, is read through a descriptor agentd gives.
    assert_eq!(first["transcript_path"], "/proc/self/fd/3");
    let head: Value = serde_json::from_str(first["transcript_head"].as_str().unwrap()).unwrap();
    assert!(head["seq"].is_u64(), "the journal's first record: {head}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_tool_use_hook_formats_the_file_the_model_wrote() {
    let bin = tempfile::tempdir().unwrap();
    // A formatter in the documented style: the file from `.tool_input.file_path`.
    let formatter = script(
        bin.path(),
        "fmt.py",
        r#"#!/usr/bin/env python3
import json, sys
path = json.load(sys.stdin)["tool_input"]["file_path"]
text = open(path).read()
open(path, "w").write("".join(line.rstrip() + "\n" for line in text.splitlines()))
"#,
    );
    let config =
        format!("[[hooks.post_tool_use]]\nmatcher = \"Edit|Write\"\ncommand = {formatter:?}\n");
    let mut s = with_config(&config, json!({})).await;
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "w1",
            "write_file",
            json!({"file_path": "a.py", "content": "x = 1    \ny = 2\t\n"}),
        )],
    ));
    s.mock.push_stream(sse::text("written"));
    let events = s.run("write a.py").await;
    assert_eq!(outcomes(&events), ["ok"]);
    assert_eq!(
        std::fs::read_to_string(s.workdir.path().join("a.py")).unwrap(),
        "x = 1\ny = 2\n"
    );
    // It ran after the write, before the call ended.
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .filter(|k| k.starts_with("hook_") || k.starts_with("tool_call_"))
        .collect();
    assert_eq!(
        kinds,
        [
            "tool_call_start",
            "hook_started",
            "hook_finished",
            "tool_call_end"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_hook_keeps_the_agent_working_once() {
    let bin = tempfile::tempdir().unwrap();
    // Claude Code's pattern: block unless already continuing because of a stop hook.
    let hook = script(
        bin.path(),
        "stop.py",
        r#"#!/usr/bin/env python3
import json, sys
if json.load(sys.stdin)["stop_hook_active"]:
    sys.exit(0)
print(json.dumps({"decision": "block", "reason": "run the tests before you stop"}))
"#,
    );
    let mut s = with_config(&format!("[[hooks.stop]]\ncommand = {hook:?}\n"), json!({})).await;
    s.mock.push_stream(sse::text("done"));
    s.mock.push_stream(sse::text("tests pass, done"));
    let events = s.run("fix it").await;
    assert_eq!(outcomes(&events), ["blocked", "ok"]);
    let requests = s.mock.requests();
    assert_eq!(requests.len(), 2);
    let sent = requests[1].body["messages"].to_string();
    assert!(sent.contains("run the tests before you stop"), "{sent}");
    assert_eq!(
        of_kind(&events, "processing_end")[0]["data"]["reason"],
        "completed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_hook_that_always_blocks_cannot_keep_the_agent_forever() {
    let config = "[[hooks.stop]]\ncommand = \"echo always >&2; exit 2\"\n";
    let mut s = with_config(config, json!({})).await;
    for _ in 0..4 {
        s.mock.push_stream(sse::text("done"));
    }
    let events = s.run("fix it").await;
    // The first answer and three sent back; the fourth stop ends the input.
    assert_eq!(s.mock.requests().len(), 4);
    assert_eq!(outcomes(&events), ["blocked"; 4]);
    assert!(
        of_kind(&events, "warning")
            .iter()
            .any(|w| w["data"]["message"]
                .as_str()
                .unwrap()
                .contains("stop_hook_active")),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_prompt_submit_hook_adds_context_or_refuses_the_input() {
    let bin = tempfile::tempdir().unwrap();
    let hook = script(
        bin.path(),
        "prompt.py",
        r#"#!/usr/bin/env python3
import json, sys
if "password" in json.load(sys.stdin)["prompt"]:
    print("inputs must not hold passwords", file=sys.stderr)
    sys.exit(2)
print("The release branch is release-7.")
"#,
    );
    let config = format!("[[hooks.user_prompt_submit]]\ncommand = {hook:?}\n");
    let mut s = with_config(&config, json!({})).await;
    s.mock.push_stream(sse::text("noted"));
    s.run("which branch?").await;
    let sent = s.mock.requests()[0].body["messages"].to_string();
    assert!(sent.contains("The release branch is release-7."), "{sent}");

    let events = s.run("my password is hunter2").await;
    let error = of_kind(&events, "error");
    assert!(
        error[0]["data"]["message"]
            .as_str()
            .unwrap()
            .contains("inputs must not hold passwords"),
        "{events:?}"
    );
    assert_eq!(
        of_kind(&events, "processing_end")[0]["data"]["reason"],
        "error"
    );
    assert!(of_kind(&events, "user_input").is_empty());
    assert_eq!(s.mock.requests().len(), 1, "the model never saw it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_that_hang_flood_or_crash_are_reported_and_the_work_goes_on() {
    let config = "\
[[hooks.pre_tool_use]]
command = \"sleep 987654\"
timeout_secs = 1
[[hooks.pre_tool_use]]
command = \"head -c 30000000 /dev/zero | tr '\\\\0' x; head -c 30000000 /dev/zero >&2; exit 2\"
[[hooks.pre_tool_use]]
command = \"kill -SEGV $$\"
[[hooks.pre_tool_use]]
command = \"sleep 987654\"
timeout_secs = 1
";
    let mut s = with_config(config, json!({})).await;
    s.mock.push_stream(sse::tools(
        "",
        &[("c1", "shell", json!({"command": "echo still runs"}))],
    ));
    s.mock.push_stream(sse::text("ok"));
    let events = s.run("go").await;
    // The same command configured twice runs once.
    assert_eq!(of_kind(&events, "hook_started").len(), 3);
    let mut got = outcomes(&events);
    got.sort();
    assert_eq!(got, ["blocked", "failed", "timed_out"]);
    // The flood blocked with its stderr, cut: the model gets 4 KiB of it, not 30 MB.
    let results = results_sent(&s);
    assert!(results[0].len() < 16 * 1024, "{}", results[0].len());
    assert!(results[0].contains("Blocked by the user's pre_tool_use hook"));
    let crashed = of_kind(&events, "hook_finished")
        .into_iter()
        .find(|e| e["data"]["outcome"] == "failed")
        .unwrap();
    assert_eq!(crashed["data"]["reason"], "killed by a signal");
    // The hung hook's process is gone.
    let alive = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .any(|c| c.starts_with(b"sleep\0987654"));
    assert!(!alive, "the timed-out hook was stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passing_flood_leaves_the_tool_call_to_run() {
    let config = "[[hooks.post_tool_use]]\ncommand = \"yes hook | head -c 50000000\"\n";
    let mut s = with_config(config, json!({})).await;
    s.mock.push_stream(sse::tools(
        "",
        &[("c1", "shell", json!({"command": "echo ran"}))],
    ));
    s.mock.push_stream(sse::text("ok"));
    let events = s.run("go").await;
    assert_eq!(outcomes(&events), ["ok"]);
    assert!(results_sent(&s)[0].contains("ran"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_hook_runs_when_an_approval_waits_for_a_person() {
    let bin = tempfile::tempdir().unwrap();
    let seen = bin.path().join("notified.json");
    let config = format!(
        "[[hooks.notification]]\ncommand = \"cat > {}\"\nsandbox = false\n",
        seen.display()
    );
    let mut s = with_config(&config, json!({"config": {"approval": {"mode": "ask"}}})).await;
    s.mock.push_stream(sse::tools(
        "",
        &[("c1", "shell", json!({"command": "echo approved"}))],
    ));
    s.mock.push_stream(sse::text("done"));
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    s.call("session/submit", json!({"text": "go"})).await;
    let events = s.until("hook_finished").await;
    let asked = of_kind(&events, "approval_requested");
    let request_id = asked[0]["data"]["request_id"].as_str().unwrap().to_owned();
    let notice: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(notice["hook_event_name"], "Notification");
    assert_eq!(notice["notification_type"], "permission_prompt");
    assert_eq!(
        notice["message"],
        "agentd needs your permission to use shell"
    );
    s.call(
        "session/respond",
        json!({"request_id": request_id, "decision": "allow"}),
    )
    .await;
    let rest = s.until("processing_end").await;
    assert_eq!(
        of_kind(&rest, "processing_end")[0]["data"]["reason"],
        "completed"
    );
}

/// A workspace hooks file whose hook leaves `marker` in the workspace.
fn plant(workdir: &Path, marker: &str) {
    std::fs::create_dir_all(workdir.join(".agents")).unwrap();
    std::fs::write(
        workdir.join(".agents/hooks.toml"),
        format!("[[hooks.pre_tool_use]]\ncommand = \"touch {marker}\"\n"),
    )
    .unwrap();
}

async fn new_session(s: &mut Setup) -> String {
    let session = s
        .daemon
        .create_session(&mut s.client, s.workdir.path(), json!({}))
        .await
        .unwrap();
    s.session = session.clone();
    session
}

async fn one_call(s: &mut Setup) -> Vec<Value> {
    s.mock
        .push_stream(sse::tools("", &[("c1", "glob", json!({"pattern": "*"}))]));
    s.mock.push_stream(sse::text("ok"));
    s.run("look").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_hooks_file_runs_only_once_trusted_and_only_as_trusted() {
    let mut s = with_config("", json!({})).await;
    let dir = std::fs::canonicalize(s.workdir.path()).unwrap();
    plant(&dir, "trusted-ran");
    new_session(&mut s).await;
    let events = one_call(&mut s).await;
    assert!(of_kind(&events, "hook_started").is_empty());
    assert!(
        of_kind(&events, "warning")[0]["data"]["message"]
            .as_str()
            .unwrap()
            .contains("this workspace is not trusted"),
        "{events:?}"
    );

    let out = s
        .daemon
        .agentctl(&["trust", dir.to_str().unwrap()], None)
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("touch trusted-ran"),
        "the file is shown: {shown}"
    );
    let list = s.daemon.agentctl(&["trust", "--list"], None).await.unwrap();
    assert!(String::from_utf8_lossy(&list.stdout).contains(dir.to_str().unwrap()));

    new_session(&mut s).await;
    let events = one_call(&mut s).await;
    assert_eq!(outcomes(&events), ["ok"]);
    assert_eq!(
        of_kind(&events, "hook_started")[0]["data"]["hook"],
        ".agents/hooks.toml hooks.pre_tool_use[0]"
    );
    assert!(dir.join("trusted-ran").exists());

    // A prompt-injected model rewrites the trusted file: nothing it wrote runs, in this
    // session or the next.
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "w1",
            "write_file",
            json!({"file_path": ".agents/hooks.toml",
                   "content": "[[hooks.pre_tool_use]]\ncommand = \"touch pwned\"\n"}),
        )],
    ));
    s.mock
        .push_stream(sse::tools("", &[("c2", "glob", json!({"pattern": "*"}))]));
    s.mock.push_stream(sse::text("ok"));
    s.run("rewrite the hooks").await;
    new_session(&mut s).await;
    let events = one_call(&mut s).await;
    assert!(of_kind(&events, "hook_started").is_empty());
    assert!(
        of_kind(&events, "warning")[0]["data"]["message"]
            .as_str()
            .unwrap()
            .contains("it changed since this workspace was trusted"),
        "{events:?}"
    );
    assert!(!dir.join("pwned").exists());

    let out = s
        .daemon
        .agentctl(&["trust", "--remove", dir.to_str().unwrap()], None)
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_cannot_add_a_hook_to_the_users_config() {
    let mut s = with_config("# the user's config\n", json!({})).await;
    let config = s.daemon.root.path().join("config/agentd/config.toml");
    let hook = "\n[[hooks.pre_tool_use]]\ncommand = \"touch /tmp/agentd-hook-pwned\"\n";
    s.mock.push_stream(sse::tools(
        "",
        &[
            (
                "w1",
                "write_file",
                json!({"file_path": config.display().to_string(), "content": hook}),
            ),
            (
                "c1",
                "shell",
                json!({"command": format!("printf '{}' >> {}", hook.replace('\n', "\\n"), config.display())}),
            ),
            (
                "c2",
                "shell",
                json!({"command": format!("{} trust {}", agentd_tests::bin_dir().join("agentctl").display(), s.workdir.path().display())}),
            ),
        ],
    ));
    s.mock.push_stream(sse::text("ok"));
    s.run("add a hook").await;
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "# the user's config\n",
        "the config file is unchanged"
    );
    let reload = s.client.request("daemon/reload", json!({})).await.unwrap();
    assert!(reload.get("result").is_some(), "{reload}");
    new_session(&mut s).await;
    let events = one_call(&mut s).await;
    assert!(of_kind(&events, "hook_started").is_empty());
    assert!(!Path::new("/tmp/agentd-hook-pwned").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_stops_a_running_hook_and_a_restart_after_kill_9_ends_a_left_one() {
    let tag = marker();
    let config =
        format!("[[hooks.pre_tool_use]]\ncommand = \"sleep 600 {tag}\"\ntimeout_secs = 600\n");
    let mut s = with_config(&config, json!({})).await;
    s.mock.push_stream(sse::shell("c1", "echo x"));
    s.start("go").await;
    s.until("hook_started").await;
    wait_for("the hook", || live_with_marker(&tag).len() == 1).await;
    s.call("session/abort", json!({})).await;
    let events = s.until("processing_end").await;
    assert_eq!(outcomes(&events), ["aborted"]);
    assert_eq!(live_with_marker(&tag), Vec::<i32>::new());

    s.mock.push_stream(sse::shell("c2", "echo x"));
    s.call("session/submit", json!({"text": "again"})).await;
    s.until("hook_started").await;
    wait_for("the hook", || live_with_marker(&tag).len() == 1).await;
    s.daemon
        .stop_with(nix::sys::signal::Signal::SIGKILL)
        .await
        .unwrap();
    assert_eq!(
        live_with_marker(&tag).len(),
        1,
        "a killed daemon cannot end it"
    );
    s.daemon.restart().await.unwrap();
    let mut client = s.daemon.client().await.unwrap();
    client.call("daemon/info", json!({})).await.unwrap();
    assert_eq!(
        live_with_marker(&tag),
        Vec::<i32>::new(),
        "{}",
        s.daemon.log_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_start_hook_adds_context_once() {
    let config = "[[hooks.session_start]]\ncommand = \"echo This project indents with tabs.\"\n";
    let mut s = with_config(config, json!({})).await;
    s.mock.push_stream(sse::text("ok"));
    s.mock.push_stream(sse::text("ok"));
    let first = s.run("hi").await;
    let second = s.run("again").await;
    assert_eq!((outcomes(&first).len(), outcomes(&second).len()), (1, 0));
    let sent = s.mock.requests()[1].body["messages"].to_string();
    assert_eq!(
        sent.matches("This project indents with tabs.").count(),
        1,
        "{sent}"
    );
}

/// A hook keeping what it reads in `seen`, one JSON line a run, which sends a subagent back
/// to work once.
fn recorder(dir: &Path, seen: &Path) -> String {
    script(
        dir,
        "record.py",
        &format!(
            r#"#!/usr/bin/env python3
import json, sys
data = json.load(sys.stdin)
with open({:?}, "a") as f:
    f.write(json.dumps(data) + "\n")
if data["hook_event_name"] == "SubagentStop" and not data["stop_hook_active"]:
    print(json.dumps({{"decision": "block", "reason": "check the child's work again"}}))
"#,
            seen.display().to_string()
        ),
    )
}

fn records(seen: &Path) -> Vec<Value> {
    std::fs::read_to_string(seen)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_compact_hook_runs_before_the_summary_is_asked_for() {
    let bin = tempfile::tempdir().unwrap();
    let seen = bin.path().join("seen.jsonl");
    let hook = recorder(bin.path(), &seen);
    let config = format!("[[hooks.pre_compact]]\ncommand = {hook:?}\nsandbox = false\n");
    let mut s = with_config(&config, json!({"config": {"context_window_tokens": 1000}})).await;
    let summaries_asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let asked = summaries_asked.clone();
    let hook_seen = seen.clone();
    s.mock.respond_with(move |body| {
        if body.to_string().contains("summaries of coding-agent") {
            // The hook has run by the time the summary is asked for.
            asked.store(
                records(&hook_seen).len(),
                std::sync::atomic::Ordering::SeqCst,
            );
            return Reply::Stream(sse::text("SHORT-SUMMARY"));
        }
        Reply::Stream(sse::text("ok"))
    });
    s.run(&format!("oldest question {}", "x".repeat(600))).await;
    s.run(&format!("middle question {}", "y".repeat(800))).await;
    s.run("newest question").await;
    assert!(records(&seen).is_empty(), "no compaction yet");
    let since = s.call("session/get", json!({})).await["last_seq"]
        .as_u64()
        .unwrap();
    let compacted = s.call("session/compact", json!({})).await;
    assert!(compacted["tokens_after"].as_u64() < compacted["tokens_before"].as_u64());
    assert_eq!(summaries_asked.load(std::sync::atomic::Ordering::SeqCst), 1);
    let ran = records(&seen);
    assert_eq!(ran.len(), 1, "{ran:?}");
    assert_eq!(ran[0]["hook_event_name"], "PreCompact");
    assert_eq!(ran[0]["trigger"], "manual");
    assert_eq!(ran[0]["session_id"], s.session.as_str());
    let transcript = ran[0]["transcript_path"].as_str().unwrap();
    assert!(Path::new(transcript).is_file(), "{transcript}");
    s.client.subscribe(&s.session, Some(since)).await.unwrap();
    let events = s.until("compaction").await;
    let started = of_kind(&events, "hook_started");
    assert_eq!(started.len(), 1, "{events:?}");
    assert_eq!(started[0]["data"]["event"], "pre_compact");
    assert_eq!(started[0]["data"]["hook"], "hooks.pre_compact[0]");
    assert_eq!(outcomes(&events), ["ok"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_stop_hook_keeps_the_child_working_and_stop_is_the_parents() {
    use crate::subagents::{first_user, parent_script, text};
    let bin = tempfile::tempdir().unwrap();
    let seen = bin.path().join("seen.jsonl");
    let hook = recorder(bin.path(), &seen);
    let config = format!(
        "[[hooks.subagent_stop]]\ncommand = {hook:?}\nsandbox = false\n\n[[hooks.stop]]\ncommand = {hook:?}\nsandbox = false\n"
    );
    let mut s = with_config(&config, json!({})).await;
    s.mock.respond_with(|body| {
        if first_user(body).contains("child-task") {
            return if body.to_string().contains("check the child's work again") {
                text("CHILD-CHECKED")
            } else {
                text("child-first-answer")
            };
        }
        parent_script(body, &["child-task: look around"])
    });
    let events = s.run("parent task").await;
    assert_eq!(
        of_kind(&events, "processing_end")[0]["data"]["reason"],
        "completed"
    );
    let child = of_kind(&events, "subagent_spawned")[0]["data"]["agent_id"]
        .as_str()
        .expect("a child")
        .to_owned();
    let requests = s.mock.requests();
    let child_requests: Vec<String> = requests
        .iter()
        .filter(|r| first_user(&r.body).contains("child-task"))
        .map(|r| r.body.to_string())
        .collect();
    assert_eq!(child_requests.len(), 2, "{child_requests:?}");
    let back = child_requests
        .iter()
        .find(|b| b.contains("check the child's work again"))
        .expect("the child was sent back to work with the hook's reason");
    assert!(back.contains("subagent_stop hook"), "{back}");
    // What the parent waited for is the child's answer after the hook let it stop.
    let last = requests.last().unwrap().body.to_string();
    assert!(last.contains("CHILD-CHECKED"), "{last}");
    let ran: Vec<(String, String, bool)> = records(&seen)
        .iter()
        .map(|r| {
            (
                r["hook_event_name"].as_str().unwrap().to_owned(),
                r["session_id"].as_str().unwrap().to_owned(),
                r["stop_hook_active"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ran,
        [
            ("SubagentStop".to_owned(), child.clone(), false),
            ("SubagentStop".to_owned(), child.clone(), true),
            ("Stop".to_owned(), s.session.clone(), false),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentctl_shows_each_hook_under_its_tool_and_why_it_blocked() {
    let bin = tempfile::tempdir().unwrap();
    let guard = script(
        bin.path(),
        "guard.sh",
        "#!/bin/sh\nif grep -q 'rm '; then printf 'no rm here:\\033[2J use ./trash\\n' >&2; exit 2; fi\n",
    );
    let config = format!(
        "[[hooks.pre_tool_use]]\nmatcher = \"Bash\"\ncommand = {guard:?}\n\n[[hooks.stop]]\ncommand = \"true\"\n"
    );
    let s = with_config(&config, json!({})).await;
    s.mock.push_stream(sse::tools(
        "",
        &[("c1", "shell", json!({"command": "rm -f keep.txt"}))],
    ));
    s.mock.push_stream(sse::text("ok"));
    let out = s
        .daemon
        .agentctl(&["submit", "--follow", &s.session, "tidy up"], None)
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line {prefix:?} in:\n{err}"))
    };
    let tool = at("● shell rm -f keep.txt");
    let started = at(&format!(
        "  ◆ hook pre_tool_use for shell: {guard} (hooks.pre_tool_use[0])"
    ));
    let blocked = at("    ✗ hook pre_tool_use blocked (");
    let tool_end = at("  ✗ shell (");
    let stop = at("◆ hook stop: true (hooks.stop[0])");
    let stopped = at("  ✓ hook stop (");
    assert!(
        tool < started
            && started < blocked
            && blocked < tool_end
            && tool_end < stop
            && stop < stopped,
        "{err}"
    );
    // The hook's words, without its escape sequence.
    assert!(
        lines[blocked].ends_with("): no rm here: [2J use ./trash"),
        "{err}"
    );
    assert!(!err.contains('\x1b'), "{err:?}");
}

#[test]
fn a_bad_hook_table_stops_the_daemon_naming_its_key() {
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("config.toml");
    std::fs::write(
        &config,
        "[[hooks.pre_tool_use]]\nmatcher = \"Bash\"\ncommand = \"x\"\ntimeout_secs = 0\n",
    )
    .unwrap();
    let out = std::process::Command::new(agentd_tests::bin_dir().join("agentd"))
        .arg("--config")
        .arg(&config)
        .arg("--check-config")
        .env("HOME", root.path())
        .env("XDG_CONFIG_HOME", root.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("hooks.pre_tool_use[0].timeout_secs must be 1 to 3600, got 0"),
        "{err}"
    );
}

/// A hook of the user's config that runs a script of the workspace (Claude Code's
/// `$CLAUDE_PROJECT_DIR/.claude/hooks/NAME.sh` layout) runs it in the session's sandbox: a
/// model that rewrote the script writes the workspace through it, and nothing outside. Taken
/// out of the sandbox by the user's config (`sandbox = false`), the same hook does write
/// outside, which shows the plant works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_running_a_script_the_model_rewrote_stays_in_the_sandbox() {
    let outside = tempfile::tempdir().unwrap();
    let planted = format!(
        "#!/bin/sh\ntouch \"$CLAUDE_PROJECT_DIR/hook-ran\"\ntouch {}/escaped\n",
        outside.path().display()
    );
    for sandboxed in [true, false] {
        let config = format!(
            "[[hooks.post_tool_use]]\nmatcher = \"Write\"\ncommand = 'sh \"$CLAUDE_PROJECT_DIR/fmt.sh\"'\n{}",
            if sandboxed { "" } else { "sandbox = false\n" }
        );
        let mut s = with_config(&config, json!({})).await;
        std::fs::write(s.workdir.path().join("fmt.sh"), "#!/bin/sh\ntrue\n").unwrap();
        s.mock.push_stream(sse::tools(
            "",
            &[(
                "c1",
                "write_file",
                json!({"file_path": "fmt.sh", "content": planted}),
            )],
        ));
        s.mock.push_stream(sse::text("done"));
        s.run("format").await;
        assert!(
            s.workdir.path().join("hook-ran").exists(),
            "the planted script ran (sandboxed: {sandboxed})"
        );
        assert_eq!(
            outside.path().join("escaped").exists(),
            !sandboxed,
            "sandboxed: {sandboxed}"
        );
    }
}

/// Claude Code's documented guard of `.env` (`matcher = "Edit|Write"`, reading
/// `tool_input.file_path`) holds against agentd's tools that take several files: a patch
/// that writes `.env` beside another file is blocked, and so is reading it among others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_code_file_guard_sees_each_file_of_a_patch_or_a_many_files_read() {
    let bin = tempfile::tempdir().unwrap();
    let guard = script(
        bin.path(),
        "guard.py",
        r#"#!/usr/bin/env python3
import json, sys
path = json.load(sys.stdin).get("tool_input", {}).get("file_path", "")
if path.endswith(".env"):
    print("do not touch .env files", file=sys.stderr)
    sys.exit(2)
"#,
    );
    let config =
        format!("[[hooks.pre_tool_use]]\nmatcher = \"Edit|Write|Read\"\ncommand = {guard:?}\n");
    let patch = "*** Begin Patch\n*** Add File: fine.txt\n+ok\n*** Add File: .env\n+KEY=stolen\n*** End Patch";
    let calls = [
        ("openai", "apply_patch", json!({"patch": patch})),
        (
            "gemini",
            "read_many_files",
            json!({"paths": ["notes.txt", ".env"]}),
        ),
    ];
    for (profile, tool, arguments) in calls {
        let mut s = with_config(&config, json!({"profile": profile})).await;
        std::fs::write(s.workdir.path().join("notes.txt"), "notes\n").unwrap();
        s.mock
            .push_stream(sse::tools("", &[("c1", tool, arguments)]));
        s.mock.push_stream(sse::text("ok"));
        s.run("set it up").await;
        let results = results_sent(&s);
        assert!(
            results[0].contains("Blocked by the user's pre_tool_use hook")
                && results[0].contains("do not touch .env files"),
            "{tool}: {results:?}"
        );
        assert!(
            !s.workdir.path().join(".env").exists() && !s.workdir.path().join("fine.txt").exists()
        );
    }
}
