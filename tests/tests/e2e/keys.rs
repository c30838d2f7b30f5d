//! Keys and config without restarts (issue 13): `agentctl login`/`logout` and the credentials
//! file, `daemon/reload` and SIGHUP, and errors that say what works for the way the daemon
//! was started. Everything runs the real binaries against a mock provider.

use agentd_tests::mock::MockProvider;
use agentd_tests::{TestDaemon, WAIT, eventually, sse};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Instant;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs agentctl with `stdin`; returns its exit code, stdout and stderr.
async fn run(daemon: &TestDaemon, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let out = daemon.agentctl(args, stdin).await.unwrap();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

fn credentials(daemon: &TestDaemon) -> PathBuf {
    daemon.root.path().join("config/agentd/credentials.json")
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The key the mock was last called with.
fn last_key(mock: &MockProvider) -> String {
    let requests = mock.requests();
    let last = requests.last().expect("the provider was called");
    last.header("x-api-key").unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_stores_a_key_that_works_at_once_and_wins_over_the_environment() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::start_with(&[
        ("ANTHROPIC_BASE_URL", &mock.url),
        ("ANTHROPIC_API_KEY", "env-key"),
    ])
    .await
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().display().to_string();

    // No key for gemini: the error says what works, and doing it works without a restart.
    let (code, _, err) = run(
        &daemon,
        &["new", "--cwd", &cwd, "--provider", "gemini"],
        None,
    )
    .await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("(provider_not_configured)") && err.contains("run `agentctl login gemini`"),
        "{err}"
    );
    let (code, out, err) = run(&daemon, &["login", "gemini"], Some("gem-secret-1\n")).await;
    assert_eq!(code, 0, "{err}");
    let file = credentials(&daemon);
    assert!(
        out.contains(&format!("stored the key for gemini in {}", file.display())),
        "{out}"
    );
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);
    let (code, _, err) = run(
        &daemon,
        &["new", "--cwd", &cwd, "--provider", "gemini"],
        None,
    )
    .await;
    assert_eq!(code, 0, "the key works at once: {err}");

    // The file's key wins over the environment's, and is what the provider receives.
    let (code, _, err) = run(&daemon, &["login", "anthropic"], Some("sk-login-secret")).await;
    assert_eq!(code, 0, "{err}");
    mock.push_stream(sse::text("hello"));
    let (code, _, err) = run(
        &daemon,
        &["submit", "--new", "--cwd", &cwd, "--follow", "hi"],
        None,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(last_key(&mock), "sk-login-secret");
    let (_, doctor, _) = run(&daemon, &["--json", "doctor"], None).await;
    let report: Value = serde_json::from_str(doctor.trim()).unwrap();
    let anthropic = report["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "anthropic")
        .unwrap()
        .clone();
    assert_eq!(anthropic["key_source"], "credentials", "{anthropic}");
    assert_eq!(anthropic["status"], "ready (key from agentctl login)");

    // logout: the environment's key is used again, from the next session.
    let (code, out, _) = run(&daemon, &["logout", "anthropic"], None).await;
    assert_eq!(code, 0);
    assert!(out.starts_with("removed the key for anthropic"), "{out}");
    assert!(
        out.contains("the running agentd still has ANTHROPIC_API_KEY from its environment"),
        "{out}"
    );
    mock.push_stream(sse::text("hello again"));
    let (code, out, err) = run(
        &daemon,
        &["--json", "submit", "--new", "--cwd", &cwd, "--follow", "hi"],
        None,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(last_key(&mock), "env-key");
    let (_, again, _) = run(&daemon, &["logout", "anthropic"], None).await;
    assert!(
        again.starts_with("no key was stored for anthropic"),
        "{again}"
    );

    // The keys appear nowhere a user or a log reader sees: events, the log, doctor, errors.
    let (_, human_doctor, _) = run(&daemon, &["doctor"], None).await;
    let (_, status, _) = run(&daemon, &["--json", "status"], None).await;
    let (_, list, _) = run(&daemon, &["--json", "ls"], None).await;
    let mut seen = vec![daemon.log_text(), doctor, human_doctor, status, out, err];
    for line in list.lines() {
        let id = serde_json::from_str::<Value>(line).unwrap()["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
        seen.push(run(&daemon, &["--json", "events", &id], None).await.1);
    }
    for secret in ["sk-login-secret", "gem-secret-1"] {
        for (i, output) in seen.iter().enumerate() {
            assert!(!output.contains(secret), "{secret} in output {i}: {output}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_takes_no_key_from_argv_and_refuses_bad_input_and_files() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::start_with(&[("ANTHROPIC_BASE_URL", &mock.url)])
        .await
        .unwrap();
    let (code, _, err) = run(&daemon, &["login", "gemini", "sk-on-argv"], None).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unexpected argument"), "{err}");
    for (stdin, why) in [
        ("", "the key is empty"),
        ("  \n", "the key is empty"),
        ("sk bad-secret\n", "the key has a space"),
        ("sk-1\nsk-2\n", "more than one line"),
    ] {
        let (code, _, err) = run(&daemon, &["login", "gemini"], Some(stdin)).await;
        assert_eq!(code, 2, "{stdin:?}: {err}");
        assert!(err.contains(why), "{stdin:?}: {err}");
        assert!(!err.contains("bad-secret"), "{err}");
    }
    assert!(!credentials(&daemon).exists(), "nothing stored");
    let (code, _, err) = run(&daemon, &["login", "nope"], Some("k")).await;
    assert_eq!(code, 2);
    assert!(
        err.contains("the running agentd has no provider \"nope\"")
            && err.contains("`agentctl daemon reload`"),
        "{err}"
    );

    // A credentials file others can read is refused, with the fix, by the daemon and by
    // --check-config alike.
    let (code, _, _) = run(&daemon, &["login", "gemini"], Some("gem-key")).await;
    assert_eq!(code, 0);
    let file = credentials(&daemon);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().display().to_string();
    let (code, _, err) = run(&daemon, &["new", "--cwd", &cwd], None).await;
    assert_eq!(code, 1);
    let fix = format!("fix it with `chmod 600 {}`", file.display());
    assert!(
        err.contains(&fix) && err.contains("(invalid_config)"),
        "{err}"
    );
    let check = daemon
        .command("agentd")
        .arg("--check-config")
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(78));
    assert!(
        text(&check.stderr).contains(&fix),
        "{}",
        text(&check.stderr)
    );
    // login rewrites it 0600.
    let (code, _, _) = run(&daemon, &["login", "gemini"], Some("gem-key-2")).await;
    assert_eq!(code, 0);
    assert_eq!(mode(&file), 0o600);
    let (code, _, err) = run(&daemon, &["new", "--cwd", &cwd], None).await;
    assert_eq!(code, 0, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_on_a_terminal_prompts_without_echo() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::start_with(&[("ANTHROPIC_BASE_URL", &mock.url)])
        .await
        .unwrap();
    let Some(script) = agentd_tests::program("script") else {
        return;
    };
    let agentctl = agentd_tests::bin_dir().join("agentctl");
    let mut cmd = daemon.program(script);
    cmd.args([
        "-qec",
        &format!("{} login gemini", agentctl.display()),
        "/dev/null",
    ])
    .env("TERM", "xterm")
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped());
    let mut child = tokio::process::Command::from(cmd).spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut screen = Vec::new();
    let deadline = Instant::now() + WAIT;
    // Echo is off before the prompt shows, so the key can be typed once it is seen.
    while !String::from_utf8_lossy(&screen).contains("(input is hidden): ") {
        assert!(Instant::now() < deadline, "no prompt: {screen:?}");
        let mut buf = [0u8; 256];
        let n = tokio::time::timeout(WAIT, stdout.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "ended before the prompt: {screen:?}");
        screen.extend_from_slice(&buf[..n]);
    }
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"typed-secret-7\n").await.unwrap();
    tokio::time::timeout(WAIT, stdout.read_to_end(&mut screen))
        .await
        .unwrap()
        .unwrap();
    drop(stdin);
    assert!(child.wait().await.unwrap().success());
    let screen = String::from_utf8_lossy(&screen);
    assert!(
        screen.contains("API key for gemini (input is hidden): "),
        "{screen:?}"
    );
    assert!(screen.contains("stored the key for gemini"), "{screen:?}");
    assert!(!screen.contains("typed-secret-7"), "echoed: {screen:?}");
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(credentials(&daemon)).unwrap()).unwrap();
    assert_eq!(stored, json!({"api_keys": {"gemini": "typed-secret-7"}}));
}

/// Writes the daemon's config file.
fn write_config(daemon: &TestDaemon, text: &str) {
    let dir = daemon.root.path().join("config/agentd");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// Waits until the daemon's log has `needle` `count` times.
async fn log_has(daemon: &TestDaemon, needle: &str, count: usize) -> String {
    eventually(
        &format!("{needle:?} {count} times in the log"),
        async || daemon.log_text().matches(needle).count() >= count,
    )
    .await;
    daemon.log_text()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_applies_to_new_sessions_and_refuses_a_bad_file() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "k")
        .config("[session]\nmax_turns = 3\n")
        .start()
        .await
        .unwrap();
    let mut client = daemon.client().await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let create = |provider: Option<&str>| {
        let mut p = json!({"cwd": work.path().display().to_string()});
        if let Some(name) = provider {
            p["provider"] = json!(name);
        }
        p
    };
    let first = client.call("session/create", create(None)).await.unwrap();
    assert_eq!(first["config"]["max_turns"], 3);

    // A provider added to the file and new session defaults, applied by `daemon reload`.
    write_config(
        &daemon,
        &format!(
            "[session]\nmax_turns = 5\n[providers.local]\nkind = \"openai_chat\"\n\
             base_url = \"{}/v1\"\ndefault_model = \"m\"\n",
            mock.url
        ),
    );
    let (code, out, err) = run(&daemon, &["daemon", "reload"], None).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("reloaded ") && out.contains("running sessions keep their settings"),
        "{out}"
    );
    assert!(out.contains("provider local"), "{out}");
    let second = client
        .call("session/create", create(Some("local")))
        .await
        .unwrap();
    assert_eq!(second["config"]["max_turns"], 5);
    let id = first["session_id"].as_str().unwrap();
    let kept = client
        .call("session/get", json!({"session_id": id}))
        .await
        .unwrap();
    assert_eq!(
        kept["config"]["max_turns"], 3,
        "a running session keeps its config"
    );
    // It can still switch to the provider added since it was made, and use it.
    let (code, _, err) = run(&daemon, &["config", id, "provider=local"], None).await;
    assert_eq!(code, 0, "{err}");
    mock.push_stream(agentd_tests::family::Family::Chat.text("from local"));
    let events = client.run(id, "hi").await.unwrap();
    let end = events.last().unwrap();
    assert_eq!(end["data"]["reason"], "completed", "{events:?}");
    assert!(
        mock.requests()
            .last()
            .unwrap()
            .path
            .ends_with("/chat/completions"),
        "the switched session called the new provider"
    );

    // A bad file is refused in --check-config's words, and the config in use stays.
    write_config(&daemon, "[session]\nmax_turnz = 9\n");
    let check = daemon
        .command("agentd")
        .arg("--check-config")
        .output()
        .unwrap();
    let checked = text(&check.stderr);
    let checked = checked.trim().trim_start_matches("agentd: ");
    let (code, _, err) = run(&daemon, &["--json", "daemon", "reload"], None).await;
    assert_eq!(code, 1);
    let failure: Value = serde_json::from_str(err.trim()).unwrap();
    assert_eq!(failure["kind"], "invalid_config");
    let message = failure["message"].as_str().unwrap();
    assert!(message.starts_with(checked), "{message}\nvs\n{checked}");
    assert!(
        message.contains("the daemon keeps the config it had"),
        "{message}"
    );
    let third = client
        .call("session/create", create(Some("local")))
        .await
        .unwrap();
    assert_eq!(third["config"]["max_turns"], 5);

    // SIGHUP does the same, and logs the outcome.
    let pid = nix::unistd::Pid::from_raw(daemon.pid() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    let log = log_has(&daemon, "reload refused: ", 2).await;
    assert!(log.contains(checked), "{log}");
    write_config(
        &daemon,
        "[session]\nmax_turns = 7\n[server]\nidle_timeout_secs = 5\n",
    );
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    let log = log_has(&daemon, "config reloaded", 2).await;
    assert!(
        log.contains("changed keys that apply only at the next start: server"),
        "{log}"
    );
    let fourth = client.call("session/create", create(None)).await.unwrap();
    assert_eq!(fourth["config"]["max_turns"], 7);
    let unknown = client
        .request("session/create", create(Some("local")))
        .await
        .unwrap();
    let message = unknown["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("unknown provider \"local\"")
            && message.contains("write [providers.local] in ")
            && message.contains("and run `agentctl daemon reload`"),
        "{message}"
    );
    let reply = client.call("daemon/reload", json!({})).await.unwrap();
    assert_eq!(
        reply["restart_needed"],
        json!([]),
        "unchanged since: {reply}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_say_what_works_for_how_the_daemon_was_started() {
    let mock = MockProvider::start().await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().display().to_string();
    let new_gemini = ["new", "--cwd", &cwd, "--provider", "gemini"];

    // Under systemd: the unit's EnvironmentFile and systemctl, never agentctl's restart.
    let systemd = TestDaemon::start_with(&[
        ("ANTHROPIC_BASE_URL", &mock.url),
        ("INVOCATION_ID", "0123456789abcdef"),
    ])
    .await
    .unwrap();
    let (_, status, _) = run(&systemd, &["--json", "status"], None).await;
    let info: Value = serde_json::from_str(status.trim()).unwrap();
    assert_eq!(info["started_by"], "systemd");
    let (code, _, err) = run(&systemd, &new_gemini, None).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("run `agentctl login gemini`")
            && err.contains("GEMINI_API_KEY=... in ~/.config/agentd/env")
            && err.contains("`systemctl --user restart agentd.service`")
            && !err.contains("agentctl daemon restart"),
        "{err}"
    );
    let gemini = info["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "gemini")
        .unwrap();
    assert_eq!(gemini["ready"], false);
    assert!(
        err.contains(gemini["not_ready"].as_str().unwrap()),
        "daemon/info gives the error's words: {gemini}"
    );
    drop(systemd);

    // Started by agentctl (nothing answered): `agentctl daemon restart` starts it again
    // with the shell's environment, which is what works.
    let mut daemon = TestDaemon::start_with(&[("ANTHROPIC_BASE_URL", &mock.url)])
        .await
        .unwrap();
    daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    let (code, _, err) = run(&daemon, &new_gemini, None).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("run `agentctl login gemini`")
            && err.contains("or export GEMINI_API_KEY and run `agentctl daemon restart`"),
        "{err}"
    );
    let (_, status, _) = run(&daemon, &["--json", "status"], None).await;
    let info: Value = serde_json::from_str(status.trim()).unwrap();
    assert_eq!(info["started_by"], "agentctl");
    let (code, _, _) = run(&daemon, &["daemon", "stop"], None).await;
    assert_eq!(code, 0);
}
