//! Container sessions on an `ssh://` engine: the Engine API over `docker system dial-stdio`
//! run on "the remote machine" (this one, through the test's sshd on 127.0.0.1) over the
//! daemon's verified SSH connection. The remote's `docker` is a wrapper pointing the real
//! CLI at the test engine, or a hostile stand-in (garbage, silence), or missing.

use crate::Setup;
use agentd_tests::engine::{Engine, IMAGE};
use agentd_tests::mock::MockProvider;
use agentd_tests::sshd::{SshServer, docker_stand_in, path_without};
use agentd_tests::{TestDaemon, sse};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

async fn ssh_daemon(server: &SshServer, mock: &MockProvider, docker_host: &str) -> TestDaemon {
    TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("DOCKER_HOST", docker_host)
        .config(&server.host_entry("box"))
        .start()
        .await
        .expect("daemon starts")
}

/// `session/create` of a container session in `cwd` on `engine`: the answer, error or not.
async fn create(daemon: &TestDaemon, cwd: &Path, engine: &str) -> Value {
    let mut client = daemon.client().await.unwrap();
    client
        .request(
            "session/create",
            json!({"cwd": cwd.display().to_string(),
                "environment": {"kind": "container", "image": IMAGE, "engine": engine}}),
        )
        .await
        .unwrap()
}

fn error_message(answer: &Value) -> String {
    assert_eq!(
        answer["error"]["data"]["kind"], "environment_unavailable",
        "{answer}"
    );
    answer["error"]["message"].as_str().unwrap().to_owned()
}

async fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + agentd_tests::WAIT;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ssh_engine_runs_shell_rounds_and_file_tools_and_its_container_goes_with_the_session() {
    let Some(engine) = Engine::get() else { return };
    let bin = engine.remote_cli().unwrap();
    let Some(server) = SshServer::start_with_first(bin.path()).expect("sshd starts") else {
        return;
    };
    let mock = MockProvider::start().await.unwrap();
    // The engine named by `DOCKER_HOST`, as docker reads it, through `[hosts.box]`.
    let daemon = ssh_daemon(&server, &mock, "ssh://box").await;
    let mut client = daemon.client().await.unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let snapshot = client
        .call(
            "session/create",
            json!({"cwd": workdir.path().display().to_string(),
                "environment": {"kind": "container", "image": IMAGE}}),
        )
        .await
        .expect("the container session is created on the ssh engine");
    let mut s = Setup {
        mock,
        daemon,
        session: snapshot["session_id"].as_str().unwrap().to_owned(),
        client,
        workdir,
    };
    let dir = s.workdir.path().to_owned();
    let containers = engine.session_containers(&s.session).unwrap();
    assert_eq!(containers.len(), 1, "{containers:?}");
    let mounts = engine
        .docker(&[
            "inspect",
            "--format",
            "{{range .Mounts}}{{.Destination}} {{end}}",
            &containers[0],
        ])
        .unwrap();
    assert_eq!(
        mounts.trim(),
        dir.display().to_string(),
        "a remote engine's container: the workspace only, no control directory"
    );
    std::fs::write(dir.join("notes.txt"), "old notes\n").unwrap();
    crate::container::push_ten_rounds(&mut s);
    let tool = |id: &str, name: &str, args: Value| sse::tools("", &[(id, name, args)]);
    s.mock
        .push_stream(sse::shell("x", "echo made > shell.txt; exit 3"));
    s.mock
        .push_stream(tool("r", "read_file", json!({"file_path": "shell.txt"})));
    s.mock.push_stream(tool(
        "e",
        "edit_file",
        json!({"file_path": "notes.txt", "old_string": "old", "new_string": "new"}),
    ));
    s.mock.push_stream(tool(
        "w",
        "write_file",
        json!({"file_path": "written.txt", "content": "written\n"}),
    ));
    s.mock.push_stream(sse::shell("c", "cat written.txt"));
    s.mock.push_stream(sse::text("done"));
    let outputs = crate::tool_outputs(&s.run("work on the ssh engine").await);
    assert_eq!(outputs.len(), 15, "{outputs:?}");
    crate::container::check_ten_rounds(&outputs);
    assert!(outputs[10].contains("[exit code: 3"), "{}", outputs[10]);
    assert!(outputs[11].contains("made"), "{}", outputs[11]);
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "new notes\n",
        "{}",
        outputs[12]
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("written.txt")).unwrap(),
        "written\n"
    );
    assert!(outputs[14].contains("written"), "{}", outputs[14]);

    s.call("session/close", json!({})).await;
    wait_for("the container to go with the session", || {
        engine.session_containers(&s.session).unwrap().is_empty()
    })
    .await;
}

/// A host whose key is not in the known-hosts file is refused at `session/create`, and its
/// key is not added; a remote without docker or podman, one whose `docker` answers garbage
/// and one whose `docker` never answers are clear errors there too, in bounded time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_host_key_a_missing_docker_and_a_hostile_dial_stdio_are_clear_errors() {
    let garbage = docker_stand_in("head -c 70000 /dev/urandom; cat >/dev/null").unwrap();
    let silent = docker_stand_in("exec cat >/dev/null").unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let mock = MockProvider::start().await.unwrap();

    let Some(server) = SshServer::start_with_first(garbage.path()).expect("sshd starts") else {
        return;
    };
    let unknown = server.dir.path().join("empty_known_hosts");
    std::fs::write(&unknown, "").unwrap();
    let daemon = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .config(&server.host_entry_with("box", &unknown, server.port))
        .start()
        .await
        .unwrap();
    let message = error_message(&create(&daemon, workdir.path(), "ssh://box").await);
    assert!(
        message.contains("cannot reach the container engine at ssh://box")
            && message.contains("Host key verification failed"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_to_string(&unknown).unwrap(),
        "",
        "the unknown key is not added"
    );
    drop(daemon);

    let started = Instant::now();
    let daemon = ssh_daemon(&server, &mock, "unix:///nonexistent").await;
    let message = error_message(&create(&daemon, workdir.path(), "ssh://box").await);
    assert!(
        message.contains("cannot reach the container engine at ssh://box"),
        "{message}"
    );
    drop(daemon);
    drop(server);

    let Some(server) = SshServer::start_with_first(silent.path()).expect("sshd starts") else {
        return;
    };
    let daemon = ssh_daemon(&server, &mock, "unix:///nonexistent").await;
    let message = error_message(&create(&daemon, workdir.path(), "ssh://box").await);
    assert!(message.contains("no answer"), "{message}");
    assert!(
        started.elapsed() < agentd_tests::WAIT,
        "a hostile peer costs a bounded time"
    );
    drop(daemon);
    drop(server);

    let without = path_without(&["docker", "podman"]).unwrap();
    let Some(server) = SshServer::start_with_path(Some(&without.path().display().to_string()))
        .expect("sshd starts")
    else {
        return;
    };
    let daemon = ssh_daemon(&server, &mock, "unix:///nonexistent").await;
    let message = error_message(&create(&daemon, workdir.path(), "ssh://box").await);
    assert!(
        message.contains("neither docker nor podman is on the remote PATH"),
        "{message}"
    );
    // A password in the address is refused without being repeated.
    let message = error_message(&create(&daemon, workdir.path(), "ssh://me:hunter2@box").await);
    assert!(
        message.contains("password") && !message.contains("hunter2"),
        "{message}"
    );
}

/// After a `kill -9` of the daemon, the next start reaches the ssh engine its record names
/// (over a new connection made from the recorded `[hosts.NAME]` values) and removes what the
/// dead run left there: its session's container, and one recorded but never labelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_after_kill_9_reaches_the_ssh_engine() {
    let Some(engine) = Engine::get() else { return };
    let bin = engine.remote_cli().unwrap();
    let Some(server) = SshServer::start_with_first(bin.path()).expect("sshd starts") else {
        return;
    };
    let mock = MockProvider::start().await.unwrap();
    let mut daemon = ssh_daemon(&server, &mock, "unix:///nonexistent").await;
    let workdir = tempfile::tempdir().unwrap();
    let answer = create(&daemon, workdir.path(), "ssh://box").await;
    let session = answer["result"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_owned();
    let left = engine.session_containers(&session).unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
    let state = daemon.root.path().join("state/agentd");
    daemon
        .stop_with(nix::sys::signal::Signal::SIGKILL)
        .await
        .unwrap();
    let recorded: Value =
        serde_json::from_slice(&std::fs::read(state.join("containers.json")).unwrap()).unwrap();
    let entry = &recorded["containers"][0];
    assert_eq!(entry["engine"]["host"], "ssh://box", "{recorded}");
    let orphan = format!("agentd-ssh-orphan-{}", std::process::id());
    engine
        .docker(&["run", "-d", "--name", &orphan, IMAGE, "sleep", "600"])
        .unwrap();
    let record = json!({"containers": [entry, {"engine": entry["engine"], "name": orphan}]});
    std::fs::write(state.join("containers.json"), record.to_string()).unwrap();
    daemon.restart().await.unwrap();
    // By id: the restored session makes a container of its own when it is next used.
    let gone = |name: &str| {
        engine
            .docker(&["ps", "-aq", "--no-trunc", "--filter", &format!("id={name}")])
            .unwrap()
            .trim()
            .is_empty()
    };
    wait_for("the next start to sweep the ssh engine", || {
        gone(&left[0])
            && engine
                .docker(&["ps", "-aq", "--filter", &format!("name=^{orphan}$")])
                .unwrap()
                .trim()
                .is_empty()
    })
    .await;
    wait_for("the record to be cleared", || {
        std::fs::read_to_string(state.join("containers.json"))
            .is_ok_and(|r| !r.contains(&orphan) && !r.contains(entry["name"].as_str().unwrap()))
    })
    .await;
}

/// The link to the engine's host dropping under a session (its sshd gone): the next command
/// fails with a clear error in bounded time instead of hanging, and so does a new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_link_to_the_engine_is_a_clear_error_not_a_hang() {
    let Some(engine) = Engine::get() else { return };
    let bin = engine.remote_cli().unwrap();
    let Some(server) = SshServer::start_with_first(bin.path()).expect("sshd starts") else {
        return;
    };
    let mock = MockProvider::start().await.unwrap();
    let daemon = ssh_daemon(&server, &mock, "unix:///nonexistent").await;
    let workdir = tempfile::tempdir().unwrap();
    let answer = create(&daemon, workdir.path(), "ssh://box").await;
    let mut s = Setup {
        mock,
        client: daemon.client().await.unwrap(),
        daemon,
        session: answer["result"]["session_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_owned(),
        workdir,
    };
    s.mock.push_stream(sse::shell("a", "echo alive"));
    s.mock.push_stream(sse::text("done"));
    let outputs = crate::tool_outputs(&s.run("before").await);
    assert!(outputs[0].contains("alive"), "{outputs:?}");

    // The server and its connections gone, its keys and configuration kept.
    let mut server = server;
    let _files = std::mem::replace(&mut server.dir, tempfile::tempdir().unwrap());
    drop(server);
    s.mock.push_stream(sse::shell("b", "echo unreachable"));
    s.mock.push_stream(sse::text("done"));
    let outputs = crate::tool_outputs(&s.run("after").await);
    assert!(
        outputs[0].contains("cannot connect to ssh host box")
            && outputs[0].contains("Connection refused"),
        "{outputs:?}"
    );
    let message = error_message(&create(&s.daemon, s.workdir.path(), "ssh://box").await);
    assert!(
        message.contains("cannot reach the container engine at ssh://box")
            && message.contains("Connection refused"),
        "{message}"
    );
}
