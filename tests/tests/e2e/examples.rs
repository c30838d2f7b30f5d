//! The examples in `examples/` run against a real daemon, so the documentation stays true.

use crate::setup;
use agentd_tests::sse;
use serde_json::{Value, json};
use std::path::PathBuf;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

fn have(program: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_example_runs_a_task() {
    if !have("python3") {
        eprintln!("python3 is not installed; skipping");
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
    if !have("socat") {
        eprintln!("socat is not installed; skipping");
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
    assert_eq!(info["result"]["protocol"], 1);
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
