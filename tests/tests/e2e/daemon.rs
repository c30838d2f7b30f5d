//! The daemon process: single instance, stale sockets, peer credentials, graceful shutdown,
//! systemd socket activation and readiness.

use crate::{eventually, of_kind, setup};
use agentd_tests::{TestDaemon, bin_dir, sse};
use nix::sys::signal::Signal;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_refuses_to_start() {
    let s = setup().await;
    let out = s
        .daemon
        .command("agentd")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another agentd already serves"), "{err}");
    // The first one is unharmed.
    let mut c = s.daemon.client().await.unwrap();
    c.call("daemon/info", json!({})).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_and_directory_are_private_and_a_stale_socket_is_replaced() {
    let mut d = TestDaemon::start_with(&[("ANTHROPIC_API_KEY", "k")])
        .await
        .unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&d.socket), 0o600);
    assert_eq!(mode(d.socket.parent().unwrap()), 0o700);
    d.stop_with(Signal::SIGKILL).await.unwrap();
    assert!(d.socket.exists(), "SIGKILL leaves the socket file behind");
    let mut restarted = d
        .command("agentd")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    eventually(
        "the restarted daemon to answer",
        async || match agentd_tests::RawClient::connect(&d.socket).await {
            Ok(mut c) => c.call("daemon/info", json!({})).await.is_ok(),
            Err(_) => false,
        },
    )
    .await;
    restarted.kill().unwrap();
    restarted.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_of_another_user_is_refused() {
    // Only root can run a client as another uid; elsewhere the socket's 0600 mode covers it.
    if !agentd_tests::prerequisite(
        "root (to connect as another uid)",
        nix::unistd::geteuid().is_root(),
    ) {
        return;
    }
    let s = setup().await;
    // Open the file permissions so only the SO_PEERCRED check stands in the way.
    let mut dir = s.daemon.socket.parent().unwrap().to_path_buf();
    std::fs::set_permissions(&s.daemon.socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    while dir.starts_with(s.daemon.root.path()) {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir.pop();
    }
    let as_other = |mut cmd: std::process::Command| {
        std::os::unix::process::CommandExt::uid(&mut cmd, 65534);
        std::os::unix::process::CommandExt::gid(&mut cmd, 65534);
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        cmd
    };
    // agentctl refuses first: the server is not its user's.
    let mut cmd = as_other(s.daemon.command("agentctl"));
    cmd.args(["--json", "status"]);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(77), "{err}");
    assert!(
        err.contains("runs as uid 0, not as you (uid 65534)"),
        "{err}"
    );
    // A raw client of that user is refused by the daemon.
    let Some(socat) = agentd_tests::program("socat") else {
        return;
    };
    let mut cmd = as_other(s.daemon.program(socat));
    cmd.arg("-")
        .arg(format!("UNIX-CONNECT:{}", s.daemon.socket.display()));
    let mut child = cmd.spawn().unwrap();
    let request = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon/info\"}\n";
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), request).unwrap();
    let out = child.wait_with_output().unwrap();
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(
        answer.contains("permission denied: the daemon serves only its own user"),
        "{answer}"
    );
    let mut c = s.daemon.client().await.unwrap();
    c.call("daemon/info", json!({})).await.unwrap();
    assert!(
        s.daemon
            .log_text()
            .contains("refused a connection from another user")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_aborts_work_ends_streams_and_removes_the_socket() {
    let mut s = setup().await;
    s.mock
        .push_stream(sse::shell("t", "echo started; sleep 1000"));
    s.start("x").await;
    s.until("tool_call_output_delta").await;
    let status = s.daemon.stop_with(Signal::SIGTERM).await.unwrap();
    assert!(status.success(), "{status}: {}", s.daemon.log_text());
    let events = s.until("processing_end").await;
    assert_eq!(
        of_kind(&events, "processing_end")[0]["data"]["reason"],
        "aborted"
    );
    let mut end = s.client.item().await.unwrap();
    while end["type"] == "event" {
        end = s.client.item().await.unwrap();
    }
    assert_eq!(end["reason"], "daemon_shutdown");
    assert!(!s.daemon.socket.exists(), "the socket file is removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_shutdown_method_stops_the_daemon() {
    let mut s = setup().await;
    let r = s.client.call("daemon/shutdown", json!({})).await.unwrap();
    assert_eq!(r, json!({"aborted": 0}));
    eventually("the daemon to stop", async || !s.daemon.socket.exists()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_socket_activation_and_readiness() {
    let Some(activate) = agentd_tests::program("systemd-socket-activate") else {
        return;
    };
    let root = tempfile::Builder::new()
        .prefix("sd")
        .tempdir_in("/tmp")
        .unwrap();
    let socket = root.path().join("agentd.sock");
    let notify_path = root.path().join("notify");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(agentd_tests::WAIT)).unwrap();
    let mut child = std::process::Command::new(activate)
        .arg("-l")
        .arg(&socket)
        .arg("-E")
        .arg("ANTHROPIC_API_KEY=k")
        .arg("-E")
        .arg(format!("NOTIFY_SOCKET={}", notify_path.display()))
        .arg(bin_dir().join("agentd"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", root.path())
        .env("XDG_RUNTIME_DIR", root.path())
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The socket exists before agentd runs; the first connection starts it.
    eventually("systemd-socket-activate's socket", async || socket.exists()).await;
    let mut c = agentd_tests::RawClient::connect(&socket).await.unwrap();
    let info = c.call("daemon/info", json!({})).await.unwrap();
    assert_eq!(info["socket"], socket.display().to_string());
    let mut buf = [0u8; 256];
    let n = notify.recv(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("READY=1"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success());
    let mut log = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut log).unwrap();
    assert!(
        log.contains("adopting the socket passed by systemd"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_config_names_the_bad_key() {
    let d = TestDaemon::start_with(&[("ANTHROPIC_API_KEY", "k")])
        .await
        .unwrap();
    let config = d.root.path().join("config.toml");
    std::fs::write(&config, "[session]\nmax_turns = 3\n").unwrap();
    let good = d
        .command("agentd")
        .arg("--config")
        .arg(&config)
        .arg("--check-config")
        .output()
        .unwrap();
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    let out = String::from_utf8_lossy(&good.stdout);
    assert!(
        out.starts_with(&format!("config ok: {}", config.display())),
        "{out}"
    );
    assert!(
        out.contains("provider anthropic: ready (key from ANTHROPIC_API_KEY); anthropic https://api.anthropic.com"),
        "{out}"
    );

    std::fs::write(&config, "[session]\nmax_turnz = 3\n").unwrap();
    let bad = d
        .command("agentd")
        .arg("--config")
        .arg(&config)
        .arg("--check-config")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(78));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("unknown field `max_turnz`"), "{err}");
    let missing = d
        .command("agentd")
        .arg("--config")
        .arg(d.root.path().join("nope.toml"))
        .arg("--check-config")
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read config file"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_systemd_units_pass_systemd_analyze() {
    let Some(analyze) = agentd_tests::program("systemd-analyze") else {
        return;
    };
    let units = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/systemd");
    let dir = tempfile::tempdir().unwrap();
    for unit in ["agentd.socket", "agentd.service"] {
        let text = std::fs::read_to_string(units.join(unit)).unwrap();
        // verify checks that ExecStart exists: point it at the binary just built.
        let text = text.replace(
            "ExecStart=%h/.cargo/bin/agentd",
            &format!("ExecStart={}", bin_dir().join("agentd").display()),
        );
        std::fs::write(dir.path().join(unit), text).unwrap();
    }
    let runtime = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(analyze)
        .args([
            "verify",
            "--user",
            "--man=no",
            "agentd.socket",
            "agentd.service",
        ])
        .current_dir(dir.path())
        .env("XDG_RUNTIME_DIR", runtime.path())
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    // Unknown keys only warn, so any output is a failure.
    assert_eq!(said.trim(), "", "systemd-analyze complained");
}

#[test]
fn the_launchd_plist_is_a_valid_property_list() {
    let Some(python) = agentd_tests::program("python3") else {
        return;
    };
    let plist = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../packaging/launchd/dev.agentd.plist");
    let check = "import plistlib,sys; d=plistlib.load(open(sys.argv[1],'rb')); \
                 assert d['Label']=='dev.agentd'; assert d['ProgramArguments'][0].endswith('/agentd'); \
                 assert d['RunAtLoad'] is True; assert d['KeepAlive']=={'SuccessfulExit': False}; print('ok')";
    let out = std::process::Command::new(python)
        .args(["-c", check])
        .arg(&plist)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A response the daemon's shutdown cuts off is noted in the conversation as that, not as the
/// user stopping it (issue 28): the model reads the note when the work is resumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_cut_off_by_shutdown_is_not_noted_as_the_users() {
    use agentd_proto::methods::SessionHistory;
    use agentd_proto::{EventBody, HistoryParams, SessionId, Turn};
    use agentd_tests::mock::{Chunk, Gate};
    let mut s = setup().await;
    // The answer starts, then the stream waits at a gate nobody opens.
    let mut chunks = vec![sse::message_start()];
    chunks.extend(sse::text_block(0, "Half an ans"));
    chunks.push(Chunk::Wait(Gate::new()));
    s.mock.push_stream(chunks);
    let session = SessionId::from(s.session.as_str());
    let mut client = agentd_tests::Client::from(s.daemon.client().await.unwrap());
    client.start(&session, "hi").await.unwrap();
    client
        .until(|e| matches!(e, EventBody::AssistantTextDelta { .. }))
        .await
        .unwrap();
    s.daemon.stop_with(Signal::SIGTERM).await.unwrap();
    s.daemon.restart().await.unwrap();

    let mut client = agentd_tests::Client::from(s.daemon.client().await.unwrap());
    let history = client
        .call::<SessionHistory>(HistoryParams {
            session_id: session,
            offset: 0,
            limit: None,
            input_id: None,
        })
        .await
        .unwrap();
    let notes: Vec<&str> = history
        .entries
        .iter()
        .filter_map(|e| match &e.turn {
            Turn::System { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        notes,
        ["[The previous response was interrupted because the daemon is shutting down.]"]
    );
}
