//! The examples in `examples/` run against a real daemon, so the documentation stays true.

use crate::{eventually, setup};
use agentd_tests::sse;
use serde_json::{Value, json};
use std::path::PathBuf;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_example_runs_a_task() {
    if agentd_tests::program("python3").is_none() {
        return;
    }
    let s = setup().await;
    s.mock.push_stream(sse::tools(
        "Looking.",
        &[("t1", "shell", json!({"command": "echo hi"}))],
    ));
    s.mock.push_stream(sse::text("It says hi."));
    let out = tokio::process::Command::from(s.daemon.program("python3"))
        .arg(example("python_client.py"))
        .arg("what does echo say?")
        .arg(s.workdir.path())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout, "Looking.\nIt says hi.\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("[shell] {\"command\": \"echo hi\"}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socat_example_talks_to_the_daemon() {
    if agentd_tests::program("socat").is_none() {
        return;
    }
    let mut s = setup().await;
    let out = s
        .daemon
        .program("bash")
        .arg(example("socat.sh"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let info = lines.iter().find(|l| l["id"] == 1).unwrap();
    assert_eq!(info["result"]["protocol"], 2);
    let list = lines.iter().find(|l| l["id"] == 2).unwrap();
    assert_eq!(
        list["result"]["sessions"][0]["session_id"],
        s.session.as_str()
    );

    s.call("session/close", json!({})).await;
    let out = s
        .daemon
        .program("bash")
        .arg(example("socat.sh"))
        .arg(&s.session)
        .output()
        .unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines.first().unwrap()["id"],
        1,
        "the subscription id comes first"
    );
    assert_eq!(
        lines.last().unwrap()["params"]["result"]["type"],
        "end",
        "then the log, then the end"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_loses_nothing_when_it_steers_while_reading() {
    if agentd_tests::program("python3").is_none() {
        return;
    }
    let s = setup().await;
    let mark = s.workdir.path().join("steered");
    s.mock.push_stream(sse::shell(
        "t1",
        &format!(
            "while [ ! -e '{}' ]; do sleep 0.02; done; echo hi",
            mark.display()
        ),
    ));
    s.mock
        .respond_with(|_| agentd_tests::mock::Reply::Stream(sse::text("done")));
    // The script imports the example's client, reads the stream from seq 1 and steers after
    // `session_start`, `user_input` and `tool_call_start`, while later events may already
    // wait in its read buffer.
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/steer_while_reading.py");
    let out = tokio::process::Command::from(s.daemon.program("python3"))
        .arg(script)
        .arg(example("python_client.py"))
        .arg(s.workdir.path())
        .arg(&mark)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let seqs: Vec<u64> = serde_json::from_value(report["seqs"].clone()).unwrap();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "every event, in order: {report}");
    let kinds = report["kinds"].to_string();
    assert!(
        kinds.contains("session_start")
            && kinds.contains("steering_injected")
            && kinds.contains("processing_end"),
        "{kinds}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_xdg_runtime_dir_the_examples_find_the_binaries_socket() {
    let (Some(_), Some(_)) = (
        agentd_tests::program("python3"),
        agentd_tests::program("socat"),
    ) else {
        return;
    };
    let s = setup().await;
    // A daemon started with neither AGENTD_SOCKET nor XDG_RUNTIME_DIR picks its default path
    // under TMPDIR; the examples, given the same environment, must find it there.
    let tmp = tempfile::Builder::new()
        .prefix("tx")
        .tempdir_in("/tmp")
        .unwrap();
    let plain = |mut cmd: std::process::Command| {
        cmd.env_remove("AGENTD_SOCKET")
            .env_remove("XDG_RUNTIME_DIR")
            .env("TMPDIR", tmp.path())
            .env("XDG_STATE_HOME", tmp.path().join("state"));
        cmd
    };
    /// Kills the daemon however the test ends.
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _daemon = Kill(
        plain(s.daemon.command("agentd"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let socket = tmp
        .path()
        .join(format!("agentd-{}/agentd.sock", nix::unistd::geteuid()));
    eventually(&format!("a socket at {}", socket.display()), async || {
        socket.exists()
    })
    .await;
    let status = plain(s.daemon.command("agentctl"))
        .args(["--json", "daemon", "status"])
        .output()
        .unwrap();
    assert!(status.status.success(), "agentctl finds it: {:?}", status);

    let socat = plain(s.daemon.program("bash"))
        .arg(example("socat.sh"))
        .output()
        .unwrap();
    assert!(
        socat.status.success(),
        "{}",
        String::from_utf8_lossy(&socat.stderr)
    );
    assert!(String::from_utf8_lossy(&socat.stdout).contains("\"protocol\":2"));
    let python = plain(s.daemon.program("python3"))
        .args(["-c", "import importlib.util,sys; s=importlib.util.spec_from_file_location('c',sys.argv[1]); m=importlib.util.module_from_spec(s); s.loader.exec_module(m); print(m.socket_path())"])
        .arg(example("python_client.py"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&python.stdout).trim(),
        socket.display().to_string()
    );
    let python_info = plain(s.daemon.program("python3"))
        .args(["-c", "import importlib.util,sys; s=importlib.util.spec_from_file_location('c',sys.argv[1]); m=importlib.util.module_from_spec(s); s.loader.exec_module(m); print(m.Client(m.socket_path()).call('daemon/info', {})['protocol'])"])
        .arg(example("python_client.py"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&python_info.stdout).trim(),
        "2",
        "{}",
        String::from_utf8_lossy(&python_info.stderr)
    );
}
