//! `agentctl` against a real daemon.

use crate::setup;
use agentd_tests::mock::{Chunk, Gate};
use agentd_tests::{RawClient, sse};
use serde_json::{Value, json};
use std::process::Stdio;

/// Runs agentctl and asserts it succeeded.
async fn ok(s: &crate::Setup, args: &[&str]) -> std::process::Output {
    let out = s.daemon.agentctl(args, None).await.unwrap();
    assert!(
        out.status.success(),
        "agentctl {args:?}: {}",
        text(&out.stderr)
    );
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_new_follow_streams_the_answer() {
    let s = setup().await;
    s.mock.push_stream(sse::tools(
        "Checking.",
        &[("t1", "shell", json!({"command": "echo from-tool"}))],
    ));
    s.mock.push_stream(sse::text("All good."));
    let cwd = s.workdir.path().display().to_string();
    let out = s
        .daemon
        .agentctl(
            &[
                "submit", "--new", "--follow", "--cwd", &cwd, "--title", "cli", "do", "it",
            ],
            None,
        )
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Checking.\nAll good.\n");
    let err = text(&out.stderr);
    assert!(err.contains("● shell echo from-tool"), "{err}");
    assert!(err.contains("  ✓ shell ("), "{err}");
    assert_eq!(
        s.mock.requests()[0].body["messages"][0]["content"][0]["text"],
        "do it"
    );

    let ls = s.daemon.agentctl(&["ls"], None).await.unwrap();
    assert!(
        text(&ls.stdout)
            .lines()
            .any(|l| l.contains("idle") && l.ends_with("cli")),
        "{}",
        text(&ls.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_from_stdin_and_json_output() {
    let s = setup().await;
    s.mock.push_stream(sse::text("from stdin"));
    let out = s
        .daemon
        .agentctl(
            &["--json", "submit", "--follow", &s.session[..8]],
            Some("the prompt\n"),
        )
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.first().unwrap()["kind"], "state_changed");
    assert_eq!(lines.last().unwrap()["kind"], "processing_end");
    assert_eq!(
        s.mock.requests()[0].body["messages"][0]["content"][0]["text"],
        "the prompt\n"
    );

    let events = s
        .daemon
        .agentctl(&["--json", "events", &s.session], None)
        .await
        .unwrap();
    let all: Vec<Value> = text(&events.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(all[0]["seq"], 1);
    assert_eq!(all.last().unwrap()["data"], json!({"state": "idle"}));
    let since = s
        .daemon
        .agentctl(&["--json", "events", &s.session, "--since", "3"], None)
        .await
        .unwrap();
    let later: Vec<Value> = text(&since.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(later[0]["seq"], 4);
    assert_eq!(later.len(), all.len() - 3);

    let history = s
        .daemon
        .agentctl(&["--json", "history", &s.session], None)
        .await
        .unwrap();
    assert_eq!(text(&history.stdout).lines().count(), 2);
    let show = s
        .daemon
        .agentctl(&["--json", "show", &s.session], None)
        .await
        .unwrap();
    let snapshot: Value = serde_json::from_str(text(&show.stdout).trim()).unwrap();
    assert_eq!(snapshot["state"], "idle");
    let status = s.daemon.agentctl(&["status"], None).await.unwrap();
    assert!(
        text(&status.stdout).contains("sessions 1 (0 processing)"),
        "{}",
        text(&status.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_commands() {
    let s = setup().await;
    let gate = Gate::new();
    let mut chunks = sse::text("slow answer");
    chunks.insert(1, Chunk::Wait(gate.clone()));
    s.mock.push_stream(chunks);
    s.mock
        .respond_with(|_| agentd_tests::mock::Reply::Stream(sse::text("ok")));
    let id = s.session.as_str();
    ok(&s, &["submit", id, "first"]).await;
    // Steering sent before the first LLM call would be drained into it (spec 2.5).
    s.mock.wait_requests(1).await;
    ok(&s, &["steer", id, "turn", "left"]).await;
    ok(&s, &["follow-up", id, "then", "this"]).await;
    let queue = s.daemon.agentctl(&["queue", id], None).await.unwrap();
    assert_eq!(
        text(&queue.stdout).lines().count(),
        2,
        "{}",
        text(&queue.stdout)
    );
    assert!(text(&queue.stdout).contains("steer") && text(&queue.stdout).contains("then this"));
    let busy = s
        .daemon
        .agentctl(&["submit", "--when-busy", "reject", id, "x"], None)
        .await
        .unwrap();
    assert_eq!(busy.status.code(), Some(1));
    assert!(
        text(&busy.stderr).contains("(session_busy)"),
        "{}",
        text(&busy.stderr)
    );
    let abort = s.daemon.agentctl(&["abort", id], None).await.unwrap();
    assert_eq!(
        text(&abort.stdout),
        "aborted\n2 queued item(s) kept; see `agentctl queue`\n"
    );
    let cleared = s
        .daemon
        .agentctl(&["--json", "queue", "--clear", id], None)
        .await
        .unwrap();
    let cleared: Value = serde_json::from_str(text(&cleared.stdout).trim()).unwrap();
    assert_eq!(cleared["follow_up"][0]["text"], "then this");
    ok(&s, &["close", id]).await;
    let after = s
        .daemon
        .agentctl(&["submit", id, "late"], None)
        .await
        .unwrap();
    assert_eq!(after.status.code(), Some(1));
    assert!(text(&after.stderr).contains("is closed (session_closed)"));
    let unknown = s
        .daemon
        .agentctl(&["show", "does-not-exist"], None)
        .await
        .unwrap();
    assert!(text(&unknown.stderr).contains("session does-not-exist not found (session_not_found)"));
    gate.open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_follow_aborts_the_work() {
    let s = setup().await;
    s.mock
        .push_stream(sse::shell("t", "echo running; sleep 1000"));
    let mut watcher = RawClient::connect(&s.daemon.socket).await.unwrap();
    watcher.subscribe(&s.session, Some(0)).await.unwrap();
    let mut cmd = tokio::process::Command::from(s.daemon.command("agentctl"));
    let child = cmd
        .args(["submit", "--follow", &s.session, "run it"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    watcher
        .events_until("tool_call_output_delta", |_| true)
        .await
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = tokio::time::timeout(agentd_tests::WAIT, child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("■ aborted"),
        "{}",
        text(&out.stderr)
    );
    let events = watcher
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    assert_eq!(events.last().unwrap()["data"]["reason"], "aborted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_daemon_exits_69() {
    let s = setup().await;
    let mut cmd = s.daemon.command("agentctl");
    cmd.env("AGENTD_NO_AUTOSTART", "1");
    let out = cmd
        .args(["--socket", "/tmp/agentd-test-no-such.sock", "status"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69));
    assert!(
        text(&out.stderr).contains("cannot reach agentd at /tmp/agentd-test-no-such.sock"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentctl_starts_the_daemon_when_none_answers() {
    let mut s = setup().await;
    s.daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    let out = s.daemon.agentctl(&["status"], None).await.unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("sessions 1 (0 processing)"),
        "a new daemon with the stored session: {}",
        text(&out.stdout)
    );
    let log = s.daemon.root.path().join("state/agentd/agentd.log");
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("agentd ready"),
        "it logs to the state directory"
    );
    let mut c = RawClient::connect(&s.daemon.socket).await.unwrap();
    c.call("daemon/shutdown", json!({})).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reports_without_starting_anything() {
    let mut s = setup().await;
    let out = s.daemon.agentctl(&["doctor"], None).await.unwrap();
    let report = text(&out.stdout);
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains(&format!("socket   {} (ok)", s.daemon.socket.display())),
        "{report}"
    );
    assert!(
        report.contains("config   built-in defaults (no config file)"),
        "{report}"
    );
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("provider anthropic") && l.contains("key set")),
        "{report}"
    );
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("provider openai") && l.contains("no key")),
        "{report}"
    );
    assert!(!report.contains("test-key"), "keys are never printed");
    s.daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    let out = s.daemon.agentctl(&["doctor"], None).await.unwrap();
    assert_eq!(out.status.code(), Some(69));
    assert!(text(&out.stdout).contains("(nothing answers)"));
    assert!(!s.daemon.socket.exists(), "doctor started no daemon");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_and_man_pages_come_from_the_cli_definition() {
    let s = setup().await;
    for shell in ["bash", "zsh", "fish"] {
        let out = s
            .daemon
            .agentctl(&["completions", shell], None)
            .await
            .unwrap();
        assert!(out.status.success());
        let script = text(&out.stdout);
        assert!(
            script.contains("agentctl")
                && script.contains("follow-up")
                && script.contains("submit"),
            "{shell}"
        );
    }
    let man = s.daemon.agentctl(&["man"], None).await.unwrap();
    let page = text(&man.stdout);
    assert!(
        page.contains(".TH agentctl 1") && page.contains("SUBCOMMANDS") && page.contains("doctor"),
        "{page}"
    );
    let dir = s.daemon.root.path().join("man");
    let out = s
        .daemon
        .agentctl(&["man", "--dir", dir.to_str().unwrap()], None)
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    for page in ["agentctl.1", "agentctl-submit.1", "agentctl-doctor.1"] {
        assert!(
            std::fs::read_to_string(dir.join(page))
                .unwrap()
                .contains(".TH"),
            "{page}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_pipe_ends_agentctl_quietly() {
    let s = setup().await;
    // A pipe whose reader is already gone, as when `| head` has exited.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut cmd = s.daemon.command("agentctl");
    let out = cmd
        .args(["completions", "bash"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(13),
        "ended by SIGPIPE"
    );
    assert!(
        !text(&out.stderr).contains("panicked"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packaged_completions_and_man_pages_match_the_cli() {
    let s = setup().await;
    let packaging = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging");
    let regenerate = "regenerate with: agentctl completions bash > packaging/completions/agentctl.bash (zsh: _agentctl, fish: agentctl.fish) and agentctl man --dir packaging/man";
    for (shell, file) in [
        ("bash", "agentctl.bash"),
        ("zsh", "_agentctl"),
        ("fish", "agentctl.fish"),
    ] {
        let out = s
            .daemon
            .agentctl(&["completions", shell], None)
            .await
            .unwrap();
        let committed = std::fs::read_to_string(packaging.join("completions").join(file)).unwrap();
        assert!(
            text(&out.stdout) == committed,
            "packaging/completions/{file} is stale; {regenerate}"
        );
    }
    let dir = s.daemon.root.path().join("man");
    s.daemon
        .agentctl(&["man", "--dir", dir.to_str().unwrap()], None)
        .await
        .unwrap();
    let mut generated: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    generated.sort();
    let mut committed: Vec<String> = std::fs::read_dir(packaging.join("man"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    committed.sort();
    assert_eq!(generated, committed, "{regenerate}");
    for page in generated {
        let (a, b) = (
            std::fs::read_to_string(dir.join(&page)).unwrap(),
            std::fs::read_to_string(packaging.join("man").join(&page)).unwrap(),
        );
        assert!(a == b, "packaging/man/{page} is stale; {regenerate}");
    }
}

/// Runs `agentctl args` on a pseudo-terminal (util-linux `script`) with extra environment.
fn on_a_terminal(s: &crate::Setup, args: &str, env: &[(&str, &str)]) -> Option<String> {
    let script = ["/usr/bin/script", "/bin/script"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())?;
    let agentctl = agentd_tests::bin_dir().join("agentctl");
    let mut cmd = s.daemon.program(script);
    cmd.args([
        "-qec",
        &format!("{} {args}", agentctl.display()),
        "/dev/null",
    ])
    .env("TERM", "xterm");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stdout));
    Some(text(&out.stdout))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colours_on_a_terminal_unless_no_color() {
    let s = setup().await;
    s.mock.push_stream(sse::tools(
        "",
        &[("t1", "shell", json!({"command": "echo hi"}))],
    ));
    s.mock.push_stream(sse::text("done"));
    s.mock.push_stream(sse::tools(
        "",
        &[("t2", "shell", json!({"command": "echo hi"}))],
    ));
    s.mock.push_stream(sse::text("done"));
    let follow = format!("submit --follow {} go", s.session);
    let Some(coloured) = on_a_terminal(&s, &follow, &[]) else {
        eprintln!("script(1) is not installed; skipping");
        return;
    };
    assert!(
        coloured.contains("\u{1b}[32m✓\u{1b}[0m shell"),
        "{coloured:?}"
    );
    assert!(
        coloured.contains("\u{1b}[1;36m● shell\u{1b}[0m"),
        "{coloured:?}"
    );
    let plain = on_a_terminal(&s, &follow, &[("NO_COLOR", "1")]).unwrap();
    assert!(plain.contains("✓ shell ("), "{plain:?}");
    assert!(
        !plain.contains("\u{1b}[32m") && !plain.contains("\u{1b}[1;36m"),
        "NO_COLOR: {plain:?}"
    );
}
