//! Sessions whose commands run in a container of their own, on the real engines
//! (`agentd_tests::engine`: dockerd and Podman's API service, both started by `.ci/run`) with
//! a busybox image: the daemon, the mock provider, the engine and the tools are real. Each
//! test runs on both (`docker::NAME`, `podman::NAME`: [`on_each_engine`]). The container's
//! processes are this kernel's, so the test finds them in `/proc` as it does local ones.

use crate::Setup;
use agentd_tests::engine::{Engine, IMAGE};
use agentd_tests::mock::MockProvider;
use agentd_tests::{TestDaemon, sse};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A daemon whose engine is the test engine (`DOCKER_HOST`), with `config` as its config file.
async fn daemon(engine: &Engine, mock: &MockProvider, config: &str) -> TestDaemon {
    TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("DOCKER_HOST", &engine.host)
        .env("AGENTD_TEST_SECRET_TOKEN", "must-not-leak")
        .config(config)
        .start()
        .await
        .expect("daemon starts")
}

/// A container session of the test image, with `environment`'s extra keys.
async fn container_setup(engine: &Engine, environment: Value) -> Setup {
    let mock = MockProvider::start().await.expect("mock starts");
    let daemon = daemon(engine, &mock, "").await;
    let mut client = daemon.client().await.expect("client connects");
    let workdir = tempfile::tempdir().expect("tempdir");
    let mut env = json!({"kind": "container", "image": IMAGE});
    env.as_object_mut()
        .unwrap()
        .extend(environment.as_object().unwrap().clone());
    let snapshot = client
        .call(
            "session/create",
            json!({"cwd": workdir.path().display().to_string(), "environment": env}),
        )
        .await
        .expect("the container session is created");
    assert_eq!(snapshot["environment"]["kind"], "container", "{snapshot}");
    Setup {
        mock,
        daemon,
        session: snapshot["session_id"].as_str().unwrap().to_owned(),
        client,
        workdir,
    }
}

/// The `sleep` processes whose command line holds `marker`.
fn live_with(marker: &str) -> Vec<i32> {
    crate::live_processes(|args| {
        let text = args.join(" ");
        text.starts_with("sleep") && text.contains(marker)
    })
}

async fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + agentd_tests::WAIT;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A marker no other test's process carries: busybox's `sleep 600 0.<marker>` sleeps 600 s.
fn marker() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("0.{:07}{n:03}3", std::process::id())
}

async fn ten_shell_rounds_and_the_file_tools_run_in_the_container(engine: &Engine) {
    let mut s = container_setup(engine, json!({})).await;
    let dir = s.workdir.path().to_owned();
    let containers = engine.session_containers(&s.session).unwrap();
    assert_eq!(
        containers.len(),
        1,
        "one container per session: {containers:?}"
    );
    std::fs::write(dir.join("notes.txt"), "old notes\n").unwrap();
    push_ten_rounds(&mut s);
    s.mock.push_stream(sse::shell(
        "env",
        "pwd; { test -e /.dockerenv || test -e /run/.containerenv; } && echo in-a-container; \
         echo \"pid1=$(cat /proc/1/comm)\"; grep NoNewPrivs /proc/self/status; \
         command -v bash || echo no-bash; \
         echo \"secret=${AGENTD_TEST_SECRET_TOKEN:-absent} key=${ANTHROPIC_API_KEY:-absent}\"; \
         echo made-in-the-container > shell.txt; exit 3",
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[("r", "read_file", json!({"file_path": "shell.txt"}))],
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "e",
            "edit_file",
            json!({"file_path": "notes.txt", "old_string": "old", "new_string": "new"}),
        )],
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "w",
            "write_file",
            json!({"file_path": "deep/er/made.txt", "content": "written\n"}),
        )],
    ));
    s.mock
        .push_stream(sse::shell("c", "cat deep/er/made.txt notes.txt"));
    s.mock.push_stream(sse::tools(
        "",
        &[("x", "read_file", json!({"file_path": "/etc/passwd"}))],
    ));
    s.mock.push_stream(sse::text("done"));
    let events = s.run("work in the container").await;
    let outputs = crate::tool_outputs(&events);
    assert_eq!(outputs.len(), 16, "{outputs:?}");
    check_ten_rounds(&outputs);
    let env = &outputs[10];
    assert!(
        env.contains(&dir.display().to_string()),
        "the workspace at its own path: {env}"
    );
    assert!(
        env.contains("in-a-container") && env.contains("no-bash"),
        "{env}"
    );
    assert!(
        env.contains("NoNewPrivs:\t1"),
        "commands cannot gain privileges: {env}"
    );
    // dockerd's docker-init, Podman's catatonit (as podman-init): orphans are reaped.
    assert!(
        env.lines()
            .any(|l| l.starts_with("pid1=") && l.ends_with("-init")),
        "the engine's init is PID 1: {env}"
    );
    assert!(
        env.contains("secret=absent key=absent"),
        "nothing of the daemon's environment reaches the container: {env}"
    );
    assert!(env.contains('3'), "the exit code is reported: {env}");
    assert!(
        outputs[11].contains("made-in-the-container"),
        "{}",
        outputs[11]
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "new notes\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("deep/er/made.txt")).unwrap(),
        "written\n"
    );
    assert!(
        outputs[14].contains("written") && outputs[14].contains("new notes"),
        "{}",
        outputs[14]
    );
    assert!(
        outputs[15].contains("reach the workspace") && !outputs[15].contains("root:"),
        "the file tools stay on the mount: {}",
        outputs[15]
    );
    let system = s.mock.requests()[0].body["system"].to_string();
    assert!(
        system.contains(IMAGE),
        "the prompt names the container: {system}"
    );
}

async fn output_streams_as_it_comes_and_the_exit_status_follows(engine: &Engine) {
    let mut s = container_setup(engine, json!({})).await;
    crate::output_streams_then_the_exit_status_follows(&mut s).await;
}

/// A symlink the container's shell makes to a host file does not let the file tools read or
/// write the host's file: they resolve it on this side and stay beneath the workspace.
async fn a_symlink_out_of_the_workspace_reaches_no_host_file(engine: &Engine) {
    let mut s = container_setup(engine, json!({})).await;
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), "host secret\n").unwrap();
    let link = format!("ln -s {} leak", secret.path().display());
    s.mock.push_stream(sse::shell("l", &link));
    s.mock.push_stream(sse::tools(
        "",
        &[("r", "read_file", json!({"file_path": "leak"}))],
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "w",
            "write_file",
            json!({"file_path": "leak", "content": "owned"}),
        )],
    ));
    s.mock.push_stream(sse::text("done"));
    let outputs = crate::tool_outputs(&s.run("leak").await);
    assert_eq!(outputs.len(), 3, "{outputs:?}");
    assert!(!outputs[1].contains("host secret"), "{}", outputs[1]);
    assert_eq!(
        std::fs::read_to_string(secret.path()).unwrap(),
        "host secret\n"
    );
}

async fn an_abort_ends_the_process_tree_and_a_timeout_stops_a_command(engine: &Engine) {
    let mut s = container_setup(engine, json!({})).await;
    let m = marker();
    let command = format!(
        "sh -c 'sleep 600 {m}1 & sleep 600 {m}2 & wait' & (trap '' TERM; sleep 600 {m}3) & echo ready; wait"
    );
    s.mock.push_stream(sse::shell("t1", &command));
    s.start("tree").await;
    wait_for("the tree in the container", || live_with(&m).len() == 3).await;
    let aborted = s.call("session/abort", json!({})).await;
    assert_eq!(aborted["state"], "idle", "{aborted}");
    assert_eq!(
        live_with(&m),
        Vec::<i32>::new(),
        "the abort returns once the whole group is gone, TERM-ignoring member included"
    );
    let outputs = crate::tool_outputs(&s.until("processing_end").await);
    assert!(outputs[0].contains("ready"), "{outputs:?}");

    let t = marker();
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "t2",
            "shell",
            json!({"command": format!("echo started; sleep 600 {t}"), "timeout_ms": 500}),
        )],
    ));
    s.mock.push_stream(sse::text("done"));
    let events = s.run("slow").await;
    let end = &crate::of_kind(&events, "tool_call_end")[0]["data"];
    let text = end.to_string();
    assert!(text.contains("started"), "{text}");
    assert!(text.contains("timed out"), "{text}");
    assert_eq!(live_with(&t), Vec::<i32>::new());
}

async fn network_is_off_and_memory_is_capped(engine: &Engine) {
    let mut s = container_setup(engine, json!({"memory_mb": 64})).await;
    s.mock.push_stream(sse::shell(
        "n",
        "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '",
    ));
    s.mock.push_stream(sse::shell(
        "m",
        "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived ${#x}",
    ));
    s.mock.push_stream(sse::text("done"));
    let events = s.run("limits").await;
    let outputs = crate::tool_outputs(&events);
    assert_eq!(
        outputs[0].lines().next(),
        Some("lo"),
        "only the loopback interface: {}",
        outputs[0]
    );
    assert!(
        outputs[0]
            .lines()
            .nth(1)
            .unwrap_or_default()
            .starts_with("[exit code"),
        "{}",
        outputs[0]
    );
    assert!(!outputs[1].contains("survived"), "{}", outputs[1]);
    assert!(
        outputs[1].contains("137"),
        "killed by the OOM killer: {}",
        outputs[1]
    );
    let container = &engine.session_containers(&s.session).unwrap()[0];
    let limits = engine
        .docker(&[
            "inspect",
            "--format",
            "{{.HostConfig.Memory}} {{.HostConfig.PidsLimit}} {{.HostConfig.NetworkMode}}",
            container,
        ])
        .unwrap();
    assert_eq!(limits.trim(), format!("{} 1024 none", 64 << 20));
}

/// A throwaway session: on this kernel a container that hit its pids limit may start nothing
/// after, so no other test's container is used.
async fn the_pids_limit_holds(engine: &Engine) {
    let mut s = container_setup(engine, json!({"pids_limit": 24})).await;
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "p",
            "shell",
            json!({"command": "i=0; while [ $i -lt 60 ]; do sleep 2 & i=$((i+1)); done; echo forked-all", "timeout_ms": 20000}),
        )],
    ));
    s.mock.push_stream(sse::text("done"));
    let outputs = crate::tool_outputs(&s.run("fork").await);
    assert!(!outputs[0].contains("forked-all"), "{}", outputs[0]);
    assert!(
        outputs[0].contains("fork"),
        "the shell says it cannot fork: {}",
        outputs[0]
    );
}

async fn the_container_goes_with_close_shutdown_and_a_restart_after_kill_9(engine: &Engine) {
    let mut s = container_setup(engine, json!({})).await;
    let first = s.session.clone();
    assert_eq!(engine.session_containers(&first).unwrap().len(), 1);
    s.call("session/close", json!({})).await;
    assert_eq!(
        engine.session_containers(&first).unwrap(),
        Vec::<String>::new(),
        "removed when the session closes"
    );

    let create = |s: &Setup| {
        json!({"cwd": s.workdir.path().display().to_string(),
            "environment": {"kind": "container", "image": IMAGE}})
    };
    let params = create(&s);
    let second = s.client.call("session/create", params).await.unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(engine.session_containers(&second).unwrap().len(), 1);
    s.daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    assert_eq!(
        engine.session_containers(&second).unwrap(),
        Vec::<String>::new(),
        "removed when the daemon shuts down"
    );

    s.daemon.restart().await.unwrap();
    let mut client = s.daemon.client().await.unwrap();
    let params = create(&s);
    let third = client.call("session/create", params).await.unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(engine.session_containers(&third).unwrap().len(), 1);
    s.daemon
        .stop_with(nix::sys::signal::Signal::SIGKILL)
        .await
        .unwrap();
    // The worker stops everything when the dead daemon's end of its exec closes, and the
    // engine removes the stopped container; one it could not stop (here one made by hand with
    // the daemon's labels, as a run that died before its worker started leaves) goes with the
    // next start's sweep.
    let state = s.daemon.root.path().join("state/agentd");
    let leftover = engine
        .docker(&[
            "run",
            "-d",
            "--label",
            &format!("dev.agentd.daemon={}", state.display()),
            "--label",
            "dev.agentd.run=1-1",
            "--label",
            &format!("{}=left-by-a-crash", agentd_tests::engine::SESSION_LABEL),
            IMAGE,
            "sleep",
            "600",
        ])
        .unwrap();
    assert_eq!(
        engine.session_containers("left-by-a-crash").unwrap().len(),
        1,
        "{leftover}"
    );
    s.daemon.restart().await.unwrap();
    wait_for("the next start to remove the leftover containers", || {
        engine.session_containers(&third).unwrap().is_empty()
            && engine
                .session_containers("left-by-a-crash")
                .unwrap()
                .is_empty()
    })
    .await;
}

async fn a_missing_image_and_a_stopped_engine_are_clear_errors(engine: &Engine) {
    let mock = MockProvider::start().await.expect("mock starts");
    let daemon = daemon(
        engine,
        &mock,
        "[containers.box]\nimage = \"agentd-test/busybox:2\"\nmemory_mb = 128\n",
    )
    .await;
    let mut client = daemon.client().await.unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let cwd = workdir.path().display().to_string();
    let err = client
        .call(
            "session/create",
            json!({"cwd": cwd, "environment": {"kind": "container", "image": "agentd-test/missing:0"}}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("agentd-test/missing:0") && err.contains("not on the container engine"),
        "{err}"
    );
    let stopped = tempfile::tempdir().unwrap();
    let address = format!("unix://{}/docker.sock", stopped.path().display());
    let err = client
        .call(
            "session/create",
            json!({"cwd": cwd, "environment": {"kind": "container", "image": IMAGE, "engine": address}}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot reach the container engine") && err.contains(&address),
        "{err}"
    );
    // A configured entry by name, from agentctl: its image and limits.
    let out = daemon
        .agentctl(
            &["--json", "new", "--container", "box", "--cwd", &cwd],
            None,
        )
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let snapshot: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(snapshot["environment"]["image"], "box", "{snapshot}");
    let id = snapshot["session_id"].as_str().unwrap();
    let container = &engine.session_containers(id).unwrap()[0];
    let memory = engine
        .docker(&["inspect", "--format", "{{.HostConfig.Memory}}", container])
        .unwrap();
    assert_eq!(memory.trim(), (128u64 << 20).to_string());
}

/// The engine's API version is asked once per engine (`/version`: about 350 ms on Podman, which
/// runs its OCI runtime and conmon to answer); later sessions there only ping it. The requests
/// are counted on a socket in front of the engine's.
async fn the_api_version_is_asked_once_per_engine(engine: &Engine) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("engine.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    let behind = engine.host.trim_start_matches("unix://").to_owned();
    let asked = Arc::new(AtomicUsize::new(0));
    let counted = asked.clone();
    let proxy = tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (behind, counted) = (behind.clone(), counted.clone());
            tokio::spawn(async move {
                let Ok(engine) = tokio::net::UnixStream::connect(&behind).await else {
                    return;
                };
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_engine, mut to_engine) = engine.into_split();
                let back =
                    tokio::spawn(
                        async move { tokio::io::copy(&mut from_engine, &mut to_client).await },
                    );
                const ASK: &[u8] = b"/version HTTP/";
                let (mut seen, mut chunk) = (Vec::new(), vec![0; 64 * 1024]);
                while let Ok(n @ 1..) = from_client.read(&mut chunk).await {
                    seen.extend_from_slice(&chunk[..n]);
                    let asks = seen.windows(ASK.len()).filter(|w| *w == ASK).count();
                    counted.fetch_add(asks, Ordering::SeqCst);
                    seen.drain(..seen.len().saturating_sub(ASK.len() - 1));
                    if to_engine.write_all(&chunk[..n]).await.is_err() {
                        break;
                    }
                }
                let _ = to_engine.shutdown().await;
                let _ = back.await;
            });
        }
    });
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(engine, &mock, "").await;
    let mut client = daemon.client().await.unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let address = format!("unix://{}", socket.display());
    for _ in 0..3 {
        let created = client
            .call(
                "session/create",
                json!({"cwd": workdir.path().display().to_string(),
                    "environment": {"kind": "container", "image": IMAGE, "engine": address}}),
            )
            .await
            .expect("a container session through the counting socket");
        let session = created["session_id"].as_str().unwrap().to_owned();
        client
            .call("session/close", json!({"session_id": session}))
            .await
            .unwrap();
        assert_eq!(
            engine.session_containers(&session).unwrap(),
            Vec::<String>::new()
        );
    }
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "three sessions on one engine, one version negotiation"
    );
    proxy.abort();
}

/// Scripts ten shell rounds, each writing its number to stdout and to stderr.
pub(crate) fn push_ten_rounds(s: &mut Setup) {
    for n in 0..10 {
        s.mock.push_stream(sse::shell(
            &format!("s{n}"),
            &format!("echo round-{n}; echo err-{n} >&2"),
        ));
    }
}

/// The first ten `outputs` are [`push_ten_rounds`]'s, both streams of each.
pub(crate) fn check_ten_rounds(outputs: &[String]) {
    for (n, output) in outputs[..10].iter().enumerate() {
        assert!(output.contains(&format!("round-{n}")), "{output}");
        assert!(output.contains(&format!("err-{n}")), "{output}");
    }
}

/// Runs each named test once per engine: `docker::NAME` on dockerd, `podman::NAME` on
/// Podman's API service (`agentd_tests::engine`), so both pass the same bodies.
macro_rules! on_each_engine {
    ($($test:ident),* $(,)?) => {
        mod docker {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    let Some(engine) = agentd_tests::engine::Engine::get() else { return };
                    super::$test(engine).await;
                }
            )*
        }
        mod podman {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    let Some(engine) = agentd_tests::engine::Engine::podman() else { return };
                    super::$test(engine).await;
                }
            )*
        }
    };
}
pub(crate) use on_each_engine;

on_each_engine!(
    ten_shell_rounds_and_the_file_tools_run_in_the_container,
    output_streams_as_it_comes_and_the_exit_status_follows,
    a_symlink_out_of_the_workspace_reaches_no_host_file,
    an_abort_ends_the_process_tree_and_a_timeout_stops_a_command,
    network_is_off_and_memory_is_capped,
    the_pids_limit_holds,
    the_container_goes_with_close_shutdown_and_a_restart_after_kill_9,
    a_missing_image_and_a_stopped_engine_are_clear_errors,
    the_api_version_is_asked_once_per_engine,
);
