//! `agentctl` against a real daemon.

use crate::{eventually, setup};
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
        text(&status.stdout).contains("sessions 1 (0 processing"),
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
        text(&busy.stderr).contains("(session_busy)")
            && text(&busy.stderr).contains("--when-busy steer")
            && !text(&busy.stderr).contains("when_busy"),
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
    // What an editor plugin calls to find the daemon: the path, once a daemon answers there.
    let out = s.daemon.agentctl(&["socket-path"], None).await.unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("{}\n", s.daemon.socket.display())
    );
    let out = s.daemon.agentctl(&["status"], None).await.unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("sessions 1 (0 processing"),
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
        report.lines().any(|l| l.starts_with("provider anthropic")
            && l.contains("ready (key from ANTHROPIC_API_KEY)")),
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
    let script = agentd_tests::program("script")?;
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

/// Runs agentctl; returns its exit code, stdout and stderr.
async fn run(s: &crate::Setup, args: &[&str]) -> (i32, String, String) {
    let out = s.daemon.agentctl(args, None).await.unwrap();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// The one JSON object agentctl prints on stderr for an error under `--json`.
fn json_error(stderr: &str) -> Value {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    serde_json::from_str(lines[0]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_takes_the_session_options_and_config_changes_them() {
    let s = setup().await;
    let cwd = s.workdir.path().display().to_string();
    let (code, out, err) = run(
        &s,
        &[
            "--json",
            "new",
            "--cwd",
            &cwd,
            "--provider",
            "anthropic",
            "--model",
            "m1",
            "--effort",
            "high",
            "--max-turns",
            "7",
            "--max-rounds",
            "3",
            "--timeout",
            "90s",
            "--read-only",
            "--title",
            "opts",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let snapshot: Value = serde_json::from_str(out.trim()).unwrap();
    let id = snapshot["session_id"].as_str().unwrap().to_owned();
    assert_eq!(snapshot["title"], "opts");
    let c = &snapshot["config"];
    assert_eq!(
        (
            &c["provider"],
            &c["model"],
            &c["reasoning_effort"],
            &c["max_turns"],
            &c["max_tool_rounds_per_input"],
            &c["default_command_timeout_ms"]
        ),
        (
            &json!("anthropic"),
            &json!("m1"),
            &json!("high"),
            &json!(7),
            &json!(3),
            &json!(90000)
        )
    );

    let (code, out, _) = run(&s, &["config", &id]).await;
    assert_eq!(code, 0);
    let line = |key: &str| -> String {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("no {key} in {out}"))
            .to_owned()
    };
    assert!(line("max-turns").contains(" 7 "), "{out}");
    assert!(line("effort").contains(" high "), "{out}");
    assert!(line("timeout").contains(" 1m 30s "), "{out}");

    let (code, out, err) = run(
        &s,
        &["config", &id, "max-turns=9", "effort=default", "timeout=2m"],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let changed: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        changed,
        vec![
            vec!["effort", "default"],
            vec!["max-turns", "9"],
            vec!["timeout", "2m"]
        ]
    );
    let (_, out, _) = run(&s, &["--json", "config", &id]).await;
    let config: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (
            &config["max_turns"],
            &config["reasoning_effort"],
            &config["default_command_timeout_ms"]
        ),
        (&json!(9), &Value::Null, &json!(120000))
    );

    // Bad pairs change nothing and name the key.
    let (code, _, err) = run(&s, &["config", &id, "model=m2", "colour=red"]).await;
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown setting \"colour\"; known: provider, model, effort"),
        "{err}"
    );
    let (code, _, err) = run(&s, &["--json", "config", &id, "max-turns=many"]).await;
    assert_eq!(code, 2);
    assert_eq!(
        json_error(&err),
        json!({"code": null, "kind": "usage", "exit_code": 2,
            "message": "bad value for max-turns: \"many\": not a whole number from 0 to 4294967295"})
    );
    let (_, out, _) = run(&s, &["--json", "config", &id]).await;
    assert_eq!(
        serde_json::from_str::<Value>(out.trim()).unwrap()["model"],
        "m1"
    );

    // A timeout above the cap raises the cap, or it would do nothing.
    let (_, out, _) = run(&s, &["config", &id, "timeout=20m"]).await;
    let changed: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        changed,
        vec![vec!["timeout", "20m"], vec!["max-timeout", "20m"]]
    );
    let (_, out, _) = run(&s, &["--json", "new", "--cwd", &cwd, "--timeout", "15m"]).await;
    let snapshot: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (
            &snapshot["config"]["default_command_timeout_ms"],
            &snapshot["config"]["max_command_timeout_ms"]
        ),
        (&json!(900_000), &json!(900_000))
    );

    // The daemon's refusals come back in the words typed, not protocol fields.
    let (code, _, err) = run(&s, &["config", &id, "loop-window=1"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("loop-window must be at least 2") && !err.contains("loop_detection"),
        "{err}"
    );
    let (_, _, err) = run(&s, &["new", "--cwd", "/no/such/dir"]).await;
    assert!(
        err.contains("--cwd \"/no/such/dir\" is not a directory"),
        "{err}"
    );
    let (_, _, err) = run(&s, &["new", "--provider", "anthropc"]).await;
    assert!(
        err.contains("unknown provider \"anthropc\"")
            && err.contains("write [providers.anthropc] in")
            && err.contains("`agentctl daemon reload`"),
        "{err}"
    );

    // A bad flag value names the flag.
    let (code, _, err) = run(&s, &["new", "--timeout", "30"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("--timeout <DURATION>"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turn_and_round_limits_exit_with_their_own_codes() {
    let s = setup().await;
    let cwd = s.workdir.path().display().to_string();
    for (flag, code, words) in [
        ("--max-rounds", 4, "round limit for one input (max-rounds)"),
        ("--max-turns", 3, "turn limit (max-turns)"),
    ] {
        // Each run makes one LLM call: the limit stops it before a second.
        s.mock.push_stream(sse::shell("t1", "echo one"));
        let out = s
            .daemon
            .agentctl(
                &[
                    "--json", "submit", "--new", "--follow", "--cwd", &cwd, flag, "1", "go",
                ],
                None,
            )
            .await
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(code),
            "{flag}: {}",
            text(&out.stderr)
        );
        let events: Vec<Value> = text(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            events[0]["kind"], "session_start",
            "a new session's stream is whole"
        );
        assert_eq!(events[0]["seq"], 1);
        let limit = events.iter().find(|e| e["kind"] == "turn_limit").unwrap();
        assert_eq!(limit["data"]["count"], 1);

        // Without --json, the reason is said in the flag's words.
        s.mock.push_stream(sse::shell("t2", "echo two"));
        let out = s
            .daemon
            .agentctl(
                &[
                    "submit", "--new", "--follow", "--cwd", &cwd, flag, "1", "go",
                ],
                None,
            )
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(code));
        assert!(text(&out.stderr).contains(words), "{}", text(&out.stderr));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_says_what_happened_and_what_was_wrong() {
    let s = setup().await;
    let gate = Gate::new();
    let mut chunks = sse::text("slow");
    chunks.insert(1, Chunk::Wait(gate.clone()));
    s.mock.push_stream(chunks);
    s.mock
        .respond_with(|_| agentd_tests::mock::Reply::Stream(sse::text("ok")));
    let id = s.session.as_str();
    let (code, out, _) = run(&s, &["submit", id, "first"]).await;
    assert_eq!(code, 0);
    assert!(out.trim_end().ends_with(" started"), "{out}");
    let (_, out, _) = run(&s, &["submit", id, "second"]).await;
    assert!(
        out.trim_end()
            .ends_with(" queued as a follow-up (the session is busy)"),
        "{out}"
    );
    let (_, out, _) = run(&s, &["submit", "--when-busy", "steer", id, "third"]).await;
    assert!(out.contains(" queued as steering"), "{out}");

    let (code, _, err) = run(&s, &["submit", "fix the bug"]).await;
    assert_eq!(code, 2);
    assert!(
        err.contains("no session \"fix the bug\"")
            && err.contains("agentctl submit --new \"fix the bug\""),
        "{err}"
    );
    let (code, _, err) = run(&s, &["submit", "--new", &id[..8], "more", "text"]).await;
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!("is session {id}, but --new creates a session")),
        "{err}"
    );
    let (code, _, err) = run(&s, &["submit"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("no session and no prompt"), "{err}");
    let before = s.daemon.agentctl(&["--json", "ls"], None).await.unwrap();
    assert_eq!(
        text(&before.stdout).lines().count(),
        1,
        "no session was created"
    );

    // A daemon error under --json: the JSON-RPC code and the kind, on stderr.
    let (code, out, err) = run(&s, &["--json", "show", "no-such-session"]).await;
    assert_eq!(code, 1);
    assert_eq!(out, "");
    let e = json_error(&err);
    assert_eq!(
        (&e["code"], &e["kind"], &e["exit_code"]),
        (&json!(-32010), &json!("session_not_found"), &json!(1))
    );
    assert!(e["message"].as_str().unwrap().contains("no-such-session"));
    let (code, _, err) = run(&s, &["--json", "submit", "--when-busy", "later", id, "x"]).await;
    assert_eq!(code, 2);
    let e = json_error(&err);
    assert_eq!(e["kind"], "usage");
    assert!(
        e["message"].as_str().unwrap().contains("--when-busy"),
        "{e}"
    );
    gate.open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_history_abort_and_gc_speak_to_people() {
    let mut s = setup().await;
    s.mock.push_stream(sse::tools(
        "Looking.",
        &[("t1", "shell", json!({"command": "echo hi"}))],
    ));
    s.mock.push_stream(sse::text("It says hi."));
    s.run("what does echo say?").await;
    let id = s.session.clone();

    let (code, out, _) = run(&s, &["show", &id]).await;
    assert_eq!(code, 0);
    assert!(
        out.lines().any(|l| l == format!("session    {id}")),
        "{out}"
    );
    assert!(out.lines().any(|l| l == "state      idle"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("max-turns ")), "{out}");
    assert!(!out.contains('{'), "no JSON: {out}");

    let (code, out, _) = run(&s, &["history", &id]).await;
    assert_eq!(code, 0);
    let kinds: Vec<String> = out
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap_or_default().to_owned())
        .collect();
    assert_eq!(kinds, ["user", "assistant", "tools", "assistant"], "{out}");
    assert!(out.contains("user       what does echo say?"), "{out}");
    assert!(out.contains("assistant  Looking. [calls shell]"), "{out}");
    assert!(out.contains("tools      1 result(s): hi"), "{out}");
    let (_, out, err) = run(&s, &["history", &id, "--limit", "1"]).await;
    assert_eq!(out.lines().count(), 1);
    assert!(
        err.contains("(1 of 4 entries; more with --offset 1)"),
        "{err}"
    );

    let (code, _, err) = run(&s, &["fork", &id, "--at", "no-such-entry"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("--at: ")
            && err.contains(&format!("`agentctl history {id}` lists the entries"))
            && !err.contains("session/history"),
        "{err}"
    );

    let (_, out, _) = run(&s, &["gc", "--older-than", "7d"]).await;
    assert_eq!(
        out,
        "nothing to delete: no closed session was last updated more than 7days ago\n"
    );
    let (code, out, _) = run(&s, &["abort", "--close", &id]).await;
    assert_eq!(code, 0);
    assert_eq!(out, "closed (nothing was running)\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_command_streams_its_output() {
    let s = setup().await;
    let mark = s.workdir.path().join("go-on");
    s.mock.push_stream(sse::shell(
        "t1",
        &format!(
            "echo first; while [ ! -e {} ]; do sleep 0.05; done; echo second",
            mark.display()
        ),
    ));
    s.mock.push_stream(sse::text("done"));
    let mut cmd = tokio::process::Command::from(s.daemon.command("agentctl"));
    let mut child = cmd
        .args(["submit", "--follow", &s.session, "run it"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
    // The first line shows while the command still waits for the mark: it is live.
    let mut seen = Vec::new();
    loop {
        let line = tokio::time::timeout(agentd_tests::WAIT, lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap_or_else(|| panic!("stderr ended: {seen:?}"));
        let live = line == "  │ first";
        seen.push(line);
        if live {
            break;
        }
    }
    assert!(
        !seen.iter().any(|l| l.contains('✓')),
        "the call has not ended: {seen:?}"
    );
    std::fs::write(&mark, "").unwrap();
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push(line);
    }
    let status = tokio::time::timeout(agentd_tests::WAIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{seen:?}");
    let second = seen.iter().position(|l| l == "  │ second").unwrap();
    let end = seen.iter().position(|l| l.contains("✓ shell")).unwrap();
    assert!(second < end, "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_shutdown_while_following_is_not_a_user_abort() {
    let s = setup().await;
    s.mock
        .push_stream(sse::shell("t", "echo running; sleep 1000"));
    let mut watcher = RawClient::connect(&s.daemon.socket).await.unwrap();
    watcher.subscribe(&s.session, Some(0)).await.unwrap();
    let submit = tokio::process::Command::from(s.daemon.command("agentctl"))
        .args(["submit", "--follow", &s.session, "run it"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    watcher
        .events_until("tool_call_output_delta", |_| true)
        .await
        .unwrap();
    let mut events = tokio::process::Command::from(s.daemon.command("agentctl"))
        .args(["events", "--follow", &s.session])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `events --follow` is subscribed (it printed the replay's first event) before the daemon
    // stops; else it would start a new daemon.
    let mut replay =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(events.stdout.take().unwrap()));
    let first = tokio::time::timeout(agentd_tests::WAIT, replay.next_line())
        .await
        .unwrap()
        .unwrap();
    assert!(first.is_some_and(|l| l.contains("session_start")));
    let mut other = RawClient::connect(&s.daemon.socket).await.unwrap();
    let (code, out, err) = run(&s, &["daemon", "stop"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("stopped agentd (pid "), "{out}");
    assert!(
        other.call("daemon/info", json!({})).await.is_err(),
        "the daemon is gone"
    );

    let out = tokio::time::timeout(agentd_tests::WAIT, submit.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{err}");
    assert!(err.contains("agentd shut down (daemon_shutdown)"), "{err}");
    assert!(
        !err.contains("aborting") && !err.contains("another client"),
        "{err}"
    );
    // Nor does the command's result say a person stopped it (issue 28).
    let shown = format!("{}{err}", text(&out.stdout));
    assert!(
        shown.contains("[Command aborted because the daemon is shutting down.]")
            && !shown.contains("by the user"),
        "{shown}"
    );
    let out = tokio::time::timeout(agentd_tests::WAIT, events.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{err}");
    assert!(
        err.contains("(stream ended: agentd shut down (daemon_shutdown) after seq"),
        "{err}"
    );
    assert!(!err.contains("DaemonShutdown"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_status_stop_and_restart() {
    let s = setup().await;
    let (code, out, _) = run(&s, &["daemon", "status"]).await;
    assert_eq!(code, 0);
    assert!(out.contains(&format!("pid {}", s.daemon.pid())), "{out}");
    let (code, out, err) = run(&s, &["daemon", "restart"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("stopped agentd (pid {}", s.daemon.pid())),
        "{out}"
    );
    assert!(out.contains("started agentd"), "{out}");
    let (code, out, _) = run(&s, &["--json", "status"]).await;
    assert_eq!(code, 0);
    let info: Value = serde_json::from_str(out.trim()).unwrap();
    assert_ne!(info["pid"], s.daemon.pid());
    assert_eq!(info["sessions"], 1, "the new daemon has the stored session");
    let (code, out, _) = run(&s, &["daemon", "stop"]).await;
    assert_eq!(code, 0);
    assert!(
        out.starts_with(&format!("stopped agentd (pid {}", info["pid"])),
        "{out}"
    );
    let (code, out, _) = run(&s, &["daemon", "status"]).await;
    assert_eq!(code, 69);
    assert!(out.starts_with("agentd is not running"), "{out}");
    assert!(!s.daemon.socket.exists(), "daemon status started nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_restart_under_systemd_says_to_use_systemctl() {
    let mock = agentd_tests::mock::MockProvider::start().await.unwrap();
    let daemon = agentd_tests::TestDaemon::start_with(&[
        ("ANTHROPIC_BASE_URL", &mock.url),
        ("INVOCATION_ID", "0123456789abcdef"),
    ])
    .await
    .unwrap();
    let out = daemon.agentctl(&["daemon", "restart"], None).await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(
            "runs under systemd: restart it with `systemctl --user restart agentd.service`"
        ),
        "{}",
        text(&out.stderr)
    );
    let out = daemon.agentctl(&["daemon", "status"], None).await.unwrap();
    assert!(out.status.success(), "it still runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_agrees_with_check_config_and_checks_the_config_without_a_daemon() {
    let mock = agentd_tests::mock::MockProvider::start().await.unwrap();
    // openai: a base URL and no key (ready); gemini: neither (no key).
    let mut daemon = agentd_tests::TestDaemon::start_with(&[
        ("ANTHROPIC_BASE_URL", &mock.url),
        ("ANTHROPIC_API_KEY", "test-key"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
    ])
    .await
    .unwrap();
    let check = daemon
        .command("agentd")
        .arg("--check-config")
        .output()
        .unwrap();
    let check = text(&check.stdout);
    let out = daemon.agentctl(&["--json", "doctor"], None).await.unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(report["reachable"], true);
    assert_eq!(report["config_check"]["ok"], true);
    for p in report["providers"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        let line = check
            .lines()
            .find(|l| l.contains(&format!("provider {name}:")))
            .unwrap();
        let status = p["status"].as_str().unwrap();
        assert!(
            line.contains(&format!("provider {name}: {status};")),
            "{name}: {p} vs {line}"
        );
        assert_eq!(p["ready"], status.starts_with("ready"), "{p}");
    }
    let statuses: Vec<(&str, &str)> = report["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["status"].as_str().unwrap()))
        .collect();
    assert!(
        statuses.contains(&("openai", "ready (no key needed)")),
        "{statuses:?}"
    );
    assert!(statuses.contains(&("gemini", "no key")), "{statuses:?}");
    assert!(
        statuses.contains(&("anthropic", "ready (key from ANTHROPIC_API_KEY)")),
        "{statuses:?}"
    );

    // Columns line up: every provider line has its base URL at the same offset.
    let human = daemon.agentctl(&["doctor"], None).await.unwrap();
    let human = text(&human.stdout);
    let offsets: Vec<usize> = human
        .lines()
        .filter(|l| l.starts_with("provider "))
        .map(|l| l.find("http").unwrap())
        .collect();
    assert_eq!(offsets.len(), 3, "{human}");
    assert!(offsets.iter().all(|o| *o == offsets[0]), "{human}");

    daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    let out = daemon.agentctl(&["doctor"], None).await.unwrap();
    assert_eq!(out.status.code(), Some(69));
    let report = text(&out.stdout);
    assert!(
        report.contains("config   ok, as a daemon started from here would see it"),
        "{report}"
    );
    std::fs::create_dir_all(daemon.root.path().join("config/agentd")).unwrap();
    std::fs::write(
        daemon.root.path().join("config/agentd/config.toml"),
        "defualt_provider = \"openai\"\n",
    )
    .unwrap();
    let out = daemon.agentctl(&["doctor"], None).await.unwrap();
    let report = text(&out.stdout);
    assert!(
        report.contains("config   BAD: ") && report.contains("defualt_provider"),
        "{report}"
    );
    assert!(!daemon.socket.exists(), "doctor started no daemon");

    // Autostart with that config says what is wrong at once.
    let out = daemon.agentctl(&["ls"], None).await.unwrap();
    assert_eq!(out.status.code(), Some(69));
    let err = text(&out.stderr);
    assert!(
        err.contains("agentd could not start: ")
            && err.contains("defualt_provider")
            && err.contains("agentd --check-config"),
        "{err}"
    );
    assert!(!err.contains("agentd &"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_falls_behind_resubscribes_and_loses_nothing() {
    let mut s = setup().await;
    // Far more events than the daemon buffers for one subscriber (its connection queue, the
    // socket's buffer and the 1024-event live ring together).
    let words = vec!["w"; 6000].join(" ");
    s.mock.push_stream(sse::text(&words));
    let mut follower = tokio::process::Command::from(s.daemon.command("agentctl"))
        .args(["events", "--follow", &s.session])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(
        follower.stdout.take().unwrap(),
    ));
    let first = tokio::time::timeout(agentd_tests::WAIT, out.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.contains("session_start"), "{first}");
    // Stopped, it reads nothing while the whole input runs.
    let pid = nix::unistd::Pid::from_raw(follower.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    // Not subscribed itself: on a loaded machine the test's own stream could lag too.
    s.call("session/submit", json!({"text": "talk a lot"}))
        .await;
    let mut snapshot = json!(null);
    eventually("the input to finish", async || {
        snapshot = s.call("session/get", json!({})).await;
        snapshot["state"] == "idle" && snapshot["last_seq"].as_u64() > Some(6000)
    })
    .await;
    let last = snapshot["last_seq"].as_u64().unwrap();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();

    let mut seqs = vec![1u64];
    while seqs.last() != Some(&last) {
        let line = tokio::time::timeout(agentd_tests::WAIT, out.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seqs.push(line.split_whitespace().next().unwrap().parse().unwrap());
    }
    assert_eq!(
        seqs,
        (1..=last).collect::<Vec<_>>(),
        "every event once, in order"
    );
    follower.kill().await.unwrap();
    let rest = follower.wait_with_output().await.unwrap();
    assert!(
        text(&rest.stderr).contains("(lagged); resubscribed after seq "),
        "the stream was dropped and resumed: {}",
        text(&rest.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_a_running_command_shows_its_newest_line_in_place() {
    let Some(script) = agentd_tests::program("script") else {
        return;
    };
    let s = setup().await;
    let mark = s.workdir.path().join("go-on");
    s.mock.push_stream(sse::shell(
        "t1",
        &format!(
            "echo compiling one; echo compiling two; while [ ! -e {} ]; do sleep 0.05; done",
            mark.display()
        ),
    ));
    s.mock.push_stream(sse::text("done"));
    let agentctl = agentd_tests::bin_dir().join("agentctl");
    let mut child = tokio::process::Command::from(s.daemon.program(script))
        .args([
            "-qfec",
            &format!("{} submit --follow {} go", agentctl.display(), s.session),
            "/dev/null",
        ])
        .env("TERM", "xterm")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    // The spinner row shows the newest output line while the command still runs.
    while !String::from_utf8_lossy(&seen).contains("│ compiling two (") {
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout(
            agentd_tests::WAIT,
            tokio::io::AsyncReadExt::read(&mut stdout, &mut buf),
        )
        .await
        .unwrap()
        .unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    std::fs::write(&mark, "").unwrap();
    tokio::io::AsyncReadExt::read_to_end(&mut stdout, &mut seen)
        .await
        .unwrap();
    assert!(child.wait().await.unwrap().success());
    let screen = String::from_utf8_lossy(&seen);
    assert!(
        !screen.contains("  │ compiling"),
        "on a terminal the lines are a tail, not a log: {screen:?}"
    );
    assert!(screen.contains("✓ shell"), "{screen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_error_says_how_to_fix_it_and_restart_does() {
    let s = setup().await;
    let cwd = s.workdir.path().display().to_string();
    let (code, _, err) = run(
        &s,
        &[
            "submit",
            "--new",
            "--cwd",
            &cwd,
            "--provider",
            "gemini",
            "hi",
        ],
    )
    .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("(provider_not_configured)")
            && err.contains("run `agentctl login gemini`")
            && err.contains("or export GEMINI_API_KEY and run `agentctl daemon restart`"),
        "{err}"
    );
    // Doing just that works: the restarted daemon has the key exported here.
    let with_key = |args: &[&str]| {
        let mut cmd = s.daemon.command("agentctl");
        cmd.env("GEMINI_API_KEY", "k").args(args);
        cmd.output().unwrap()
    };
    let restart = with_key(&["daemon", "restart"]);
    assert!(restart.status.success(), "{}", text(&restart.stderr));
    let new = with_key(&["new", "--cwd", &cwd, "--provider", "gemini"]);
    assert!(new.status.success(), "{}", text(&new.stderr));
    let stop = with_key(&["daemon", "stop"]);
    assert!(stop.status.success(), "{}", text(&stop.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_speaks_json() {
    let mut s = setup().await;
    s.mock
        .respond_with(|_| agentd_tests::mock::Reply::Stream(sse::text("ok")));
    s.run("hello").await;
    let id = s.session.clone();
    let (_, fork, _) = run(&s, &["--json", "fork", &id]).await;
    let forked: Value = serde_json::from_str(fork.trim()).unwrap();
    let other = forked["session_id"].as_str().unwrap().to_owned();
    let cwd = s.workdir.path().display().to_string();
    for args in [
        vec!["status"],
        vec!["socket-path"],
        vec!["models"],
        vec!["doctor"],
        vec!["daemon", "status"],
        vec!["new", "--cwd", &cwd],
        vec!["ls"],
        vec!["show", &id],
        vec!["config", &id],
        vec!["config", &id, "max-turns=5"],
        vec!["history", &id],
        vec!["events", &id],
        vec!["queue", &id],
        vec!["rollback", &other],
        vec!["submit", &id, "again"],
        vec!["steer", &id, "left"],
        vec!["follow-up", &id, "then"],
        vec!["abort", &id],
        vec!["close", &other],
        vec!["rm", &other],
        vec!["gc", "--older-than", "1s", "--dry-run"],
    ] {
        let mut all = vec!["--json"];
        all.extend(&args);
        let (code, out, err) = run(&s, &all).await;
        assert_eq!(code, 0, "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}: nothing but errors on stderr");
        for line in out.lines() {
            assert!(
                serde_json::from_str::<Value>(line).is_ok(),
                "{args:?}: not JSON: {line}"
            );
        }
    }
    // The key commands read stdin; reload answers with the providers.
    for (args, stdin) in [
        (vec!["--json", "login", "gemini"], Some("gem-key")),
        (vec!["--json", "logout", "gemini"], None),
        (vec!["--json", "daemon", "reload"], None),
    ] {
        let out = s.daemon.agentctl(&args, stdin).await.unwrap();
        let (stdout, err) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}");
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {stdout}");
        assert!(serde_json::from_str::<Value>(lines[0]).is_ok(), "{stdout}");
    }
}
