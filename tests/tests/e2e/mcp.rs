//! MCP servers as tool sources, with real servers from the registries (`.ci/run` installs
//! them under target/): `@modelcontextprotocol/server-everything` over stdio; a session's
//! servers never outlive it, nor the daemon, even one killed with `kill -9`.

use crate::processes::{live_with_marker, marker, wait_for};
use crate::{Setup, of_kind, round, setup_with};
use agentd_tests::prerequisite;
use serde_json::{Value, json};
use std::path::PathBuf;

/// server-everything's entry point, where `.ci/run` installs it.
fn everything() -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../target/mcp-npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    prerequisite(
        "@modelcontextprotocol/server-everything (target/mcp-npm)",
        path.is_file(),
    )
    .then_some(path)
}

/// A session with server-everything over stdio, its command line carrying `tag`.
async fn with_everything(tag: &str) -> Option<Setup> {
    let index = everything()?;
    let server = json!({"command": "node", "args": [index, "stdio", tag]});
    Some(setup_with(json!({"config": {"mcp_servers": {"everything": server}}})).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_servers_tools_are_offered_and_run() {
    let tag = marker();
    let Some(mut s) = with_everything(&tag).await else {
        return;
    };
    let results = round(
        &mut s,
        &[
            (
                "c1",
                "mcp__everything__echo",
                json!({"message": "hi there"}),
            ),
            ("c2", "list_mcp_resources", json!({"server": "everything"})),
        ],
    )
    .await;
    assert_eq!(results["c1"], (false, "Echo: hi there".to_owned()));
    assert!(!results["c2"].0, "{:?}", results["c2"]);
    // The model saw the server's tools from the first call, in a stable order.
    let first = &s.mock.requests()[0].body;
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| n.starts_with("mcp__"))
        .collect();
    assert!(names.contains(&"mcp__everything__echo"), "{names:?}");
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);

    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    let events = s
        .client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    let states: Vec<&Value> = of_kind(&events, "mcp_server_state");
    assert_eq!(states[0]["data"]["state"], "starting", "{states:?}");
    assert_eq!(states[1]["data"]["state"], "ready", "{states:?}");
    let start = &of_kind(&events, "tool_call_start")[0]["data"];
    assert_eq!(start["server"], "everything");
    assert_eq!(start["server_tool"], "echo");

    // Closing the session ends the server.
    assert_eq!(live_with_marker(&tag).len(), 1);
    s.call("session/close", json!({})).await;
    wait_for("the server to end with its session", || {
        live_with_marker(&tag).is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_is_reported_and_left_out() {
    let mut s = setup_with(json!({"config": {"mcp_servers": {
        "missing": {"command": "agentd-no-such-mcp-server", "startup_timeout_secs": 5}
    }}}))
    .await;
    let results = round(&mut s, &[("c1", "mcp__missing__x", json!({}))]).await;
    assert!(results["c1"].0, "{:?}", results["c1"]);
    assert!(
        results["c1"].1.contains("Unknown tool"),
        "{:?}",
        results["c1"]
    );
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    let events = s
        .client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    let failed = of_kind(&events, "mcp_server_state")
        .into_iter()
        .find(|e| e["data"]["state"] == "failed")
        .expect("a failed state");
    let reason = failed["data"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("not found in the server's PATH"),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_server_survives_daemon_shutdown_or_kill_9_and_restart() {
    let tag = marker();
    let Some(mut s) = with_everything(&tag).await else {
        return;
    };
    // The first LLM call waits for the server.
    round(
        &mut s,
        &[("c1", "mcp__everything__echo", json!({"message": "x"}))],
    )
    .await;
    assert_eq!(live_with_marker(&tag).len(), 1);
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
    // Ended before serving; a SIGKILL after the grace period takes the kernel a moment.
    wait_for("the restarted daemon to end the server", || {
        live_with_marker(&tag).is_empty()
    })
    .await;
    assert!(
        s.daemon
            .log_text()
            .contains("ended processes a previous agentd left running")
    );

    // A clean shutdown ends the servers of loaded sessions.
    let tag = marker();
    let index = everything().unwrap();
    let dir = tempfile::tempdir().unwrap();
    s.daemon.give(dir.path()).unwrap();
    let session = s
        .daemon
        .create_session(
            &mut client,
            dir.path(),
            json!({"config": {"mcp_servers": {"e": {"command": "node", "args": [index, "stdio", tag]}}}}),
        )
        .await
        .unwrap();
    wait_for("the server to start", || live_with_marker(&tag).len() == 1).await;
    let _ = session;
    s.daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    wait_for("the shut-down daemon's server to end", || {
        live_with_marker(&tag).is_empty()
    })
    .await;
}
