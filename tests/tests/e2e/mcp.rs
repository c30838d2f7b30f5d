//! MCP servers as tool sources, with real servers from the registries (`.ci/run` installs
//! them under target/): `@modelcontextprotocol/server-everything` over stdio and over
//! Streamable HTTP (text, image, resource and structured results, a long call withdrawn by
//! an abort, the environment a stdio server gets); a session's servers never outlive it,
//! nor the daemon, even one killed with `kill -9`.

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

/// server-everything serving Streamable HTTP on a free port of 127.0.0.1; ended when dropped.
struct HttpServer {
    _child: tokio::process::Child,
    url: String,
}

async fn everything_http() -> Option<HttpServer> {
    let index = everything()?;
    Some(
        serve_http(|port| {
            let mut node = tokio::process::Command::new("node");
            node.arg(index)
                .arg("streamableHttp")
                .env("PORT", port.to_string());
            node
        })
        .await,
    )
}

/// tests/mcp/http_server.py serving Streamable HTTP (both protocol versions), refusing
/// requests without `Authorization: Bearer TOKEN` and `X-Team: TEAM` when given them.
async fn python_http(credentials: Option<(&str, &str)>) -> Option<HttpServer> {
    let python = mcp_python("python")?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/http_server.py");
    Some(
        serve_http(|port| {
            let mut server = tokio::process::Command::new(python);
            server.arg(script).arg(port.to_string());
            if let Some((token, team)) = credentials {
                server
                    .env("AGENTD_TEST_EXPECT_TOKEN", token)
                    .env("AGENTD_TEST_EXPECT_TEAM", team);
            }
            server
        })
        .await,
    )
}

/// The server `command` makes for a free port of 127.0.0.1, once it listens.
async fn serve_http(command: impl FnOnce(u16) -> tokio::process::Command) -> HttpServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = command(port)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    crate::eventually("the HTTP MCP server to listen", async || {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await;
    HttpServer {
        _child: child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

/// Every kind of result, through `server` (a stdio or an HTTP one), as the model gets it.
async fn results_of_every_kind(server: Value) {
    let mut s = setup_with(json!({"config": {"mcp_servers": {"everything": server}}})).await;
    let results = round(
        &mut s,
        &[
            ("t", "mcp__everything__echo", json!({"message": "hi"})),
            ("i", "mcp__everything__get-tiny-image", json!({})),
            ("l", "mcp__everything__get-resource-links", json!({"count": 2})),
            ("j", "mcp__everything__get-structured-content", json!({"location": "New York"})),
            ("r", "read_mcp_resource", json!({"server": "everything", "uri": "demo://resource/static/document/architecture.md"})),
            ("e", "mcp__everything__echo", json!({})),
        ],
    )
    .await;
    assert_eq!(results["t"], (false, "Echo: hi".to_owned()));
    assert!(
        results["l"].1.contains("[resource demo://"),
        "{:?}",
        results["l"]
    );
    assert!(results["j"].1.contains("temperature"), "{:?}", results["j"]);
    assert!(!results["r"].0, "{:?}", results["r"]);
    // Arguments the schema refuses never reach the server.
    assert!(
        results["e"].0 && results["e"].1.contains("Invalid arguments"),
        "{:?}",
        results["e"]
    );
    // The image went to the model with the result, as read_file's do.
    let requests = s.mock.requests();
    let image_result = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == "i")
        .unwrap();
    let blocks = image_result["content"].as_array().unwrap();
    assert!(
        blocks.iter().any(|b| b["type"] == "image")
            && blocks.iter().any(|b| b["text"]
                .as_str()
                .is_some_and(|t| t.contains("[image image/png attached]"))),
        "{image_result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_of_every_kind_over_stdio() {
    let Some(index) = everything() else {
        return;
    };
    results_of_every_kind(json!({"command": "node", "args": [index, "stdio"]})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_of_every_kind_over_streamable_http() {
    let Some(server) = everything_http().await else {
        return;
    };
    results_of_every_kind(json!({"url": server.url, "headers": {"X-Test": "1"}})).await;
}

/// An abort withdraws a long call at once, over either transport; the session goes on.
async fn abort_withdraws_a_long_call(server: Value) {
    let mut s = setup_with(json!({"config": {"mcp_servers": {"everything": server}}})).await;
    s.mock.push_stream(agentd_tests::sse::tools(
        "",
        &[(
            "long",
            "mcp__everything__trigger-long-running-operation",
            json!({"duration": 600, "steps": 2}),
        )],
    ));
    s.start("go").await;
    s.until("tool_call_start").await;
    s.call("session/abort", json!({})).await;
    let events = s.until("processing_end").await;
    let end = of_kind(&events, "tool_call_end")[0];
    let error = end["data"]["error"].as_str().unwrap();
    assert!(
        error.contains("cancelled") || error.contains("aborted"),
        "{error}"
    );
    // The server still serves the session.
    let results = round(
        &mut s,
        &[("t", "mcp__everything__echo", json!({"message": "again"}))],
    )
    .await;
    assert_eq!(results["t"], (false, "Echo: again".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_withdraws_a_long_call_over_stdio() {
    let Some(index) = everything() else {
        return;
    };
    abort_withdraws_a_long_call(json!({"command": "node", "args": [index, "stdio"]})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_withdraws_a_long_call_over_streamable_http() {
    let Some(server) = everything_http().await else {
        return;
    };
    abort_withdraws_a_long_call(json!({"url": server.url})).await;
}

/// A stdio server gets the session's filtered environment plus its own `env`: no secret of
/// the daemon's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_sees_the_filtered_environment_and_its_own() {
    let Some(index) = everything() else {
        return;
    };
    let mock = agentd_tests::mock::MockProvider::start().await.unwrap();
    let daemon = agentd_tests::TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("SERVICE_TOKEN", "daemon-secret-value")
        .env("PLAIN_SETTING", "plain-value")
        .start()
        .await
        .unwrap();
    let server =
        json!({"command": "node", "args": [index, "stdio"], "env": {"GIVEN": "given-value"}});
    let mut s = crate::setup_on(
        mock,
        daemon,
        tempfile::tempdir().unwrap(),
        json!({"config": {"mcp_servers": {"everything": server}}}),
    )
    .await;
    let results = round(&mut s, &[("v", "mcp__everything__get-env", json!({}))]).await;
    let env = &results["v"].1;
    assert!(
        env.contains("given-value") && env.contains("plain-value"),
        "{env}"
    );
    assert!(
        !env.contains("daemon-secret-value") && !env.contains("test-key"),
        "{env}"
    );
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
    // agentctl shows the server and its tools.
    let listed = s
        .daemon
        .agentctl(&["--json", "mcp", "list", &s.session[..8]], None)
        .await
        .unwrap();
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed[0]["server"], "everything", "{listed}");
    assert_eq!(listed[0]["state"], "ready", "{listed}");
    assert!(
        listed[0]["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("mcp__everything__echo")),
        "{listed}"
    );

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

/// A session's servers start at its first input: none runs after `session/create`, and
/// none after the session is loaded again by a restarted daemon, until it gets input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_start_at_the_first_input_not_at_create_or_load() {
    let tag = marker();
    let Some(mut s) = with_everything(&tag).await else {
        return;
    };
    let last_seq = s.call("session/get", json!({})).await["last_seq"]
        .as_u64()
        .unwrap();
    assert!(live_with_marker(&tag).is_empty());
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    let mut created = Vec::new();
    while created
        .last()
        .is_none_or(|e: &Value| e["seq"].as_u64() < Some(last_seq))
    {
        created.push(s.client.item().await.unwrap());
    }
    assert!(
        of_kind(&created, "mcp_server_state").is_empty(),
        "{created:?}"
    );
    // The first LLM call waits for the server the input started.
    round(
        &mut s,
        &[("c1", "mcp__everything__echo", json!({"message": "x"}))],
    )
    .await;
    assert_eq!(live_with_marker(&tag).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_server_survives_daemon_shutdown_or_kill_9_and_restart() {
    let tag = marker();
    let Some(mut s) = with_everything(&tag).await else {
        return;
    };
    round(
        &mut s,
        &[("c1", "mcp__everything__echo", json!({"message": "x"}))],
    )
    .await;
    let left = live_with_marker(&tag);
    assert_eq!(left.len(), 1);
    s.daemon
        .stop_with(nix::sys::signal::Signal::SIGKILL)
        .await
        .unwrap();
    assert_eq!(
        live_with_marker(&tag),
        left,
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
    // Loading the session starts nothing; its next input starts the server again.
    s.client = client;
    let loaded = s.call("session/get", json!({})).await;
    assert_eq!(loaded["state"], "idle", "{loaded}");
    assert!(live_with_marker(&tag).is_empty());
    let results = round(
        &mut s,
        &[("c2", "mcp__everything__echo", json!({"message": "y"}))],
    )
    .await;
    assert_eq!(results["c2"], (false, "Echo: y".to_owned()));
    let restarted = live_with_marker(&tag);
    assert!(restarted.len() == 1 && restarted != left, "{restarted:?}");
    let mut client = s.daemon.client().await.unwrap();

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
    s.session = session;
    s.client = client;
    round(&mut s, &[("c3", "mcp__e__echo", json!({"message": "z"}))]).await;
    assert_eq!(live_with_marker(&tag).len(), 1);
    s.daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    wait_for("the shut-down daemon's server to end", || {
        live_with_marker(&tag).is_empty()
    })
    .await;
}

/// The Python of `target/mcp-py` (the `mcp` SDK and mcp-server-time), where `.ci/run` puts it.
pub(crate) fn mcp_python(what: &str) -> Option<PathBuf> {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/mcp-py/bin");
    prerequisite(what, bin.join(what).is_file()).then(|| bin.join(what))
}

/// The hostile server (tests/mcp/hostile_server.py), with `args` after the script.
fn hostile(args: &[&str]) -> Option<Value> {
    let python = mcp_python("python")?;
    let has_sdk = std::process::Command::new(&python)
        .args(["-c", "import mcp.server.mcpserver"])
        .status()
        .is_ok_and(|s| s.success());
    if !prerequisite("the mcp Python SDK (target/mcp-py)", has_sdk) {
        return None;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/hostile_server.py");
    let mut all = vec![json!(script)];
    all.extend(args.iter().map(|a| json!(a)));
    Some(json!({"command": python, "args": all, "tool_timeout_secs": 5}))
}

/// Each misbehaviour costs its own call only, with an error the model reads; the session and
/// the daemon go on, and a crashed server is started again by its next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_server_costs_its_own_calls_only() {
    let Some(server) = hostile(&[]) else {
        return;
    };
    let mut s = setup_with(json!({"config": {"mcp_servers": {"h": server}}})).await;
    let one = async |s: &mut Setup, tool: &str| {
        let results = round(s, &[("c", &format!("mcp__h__{tool}"), json!({}))]).await;
        results["c"].clone()
    };
    let (error, text) = one(&mut s, "hang").await;
    assert!(
        error && text.contains("did not answer within 5 s"),
        "{text}"
    );
    assert_eq!(one(&mut s, "ok").await, (false, "fine".to_owned()));
    let (error, text) = one(&mut s, "failing").await;
    assert!(
        error && text.contains("Error executing tool failing"),
        "{text}"
    );
    let (error, text) = one(&mut s, "huge").await;
    assert!(!error && text.len() < 100_000, "{}", text.len());
    let (error, text) = one(&mut s, "garbage").await;
    assert_eq!((error, text.as_str()), (false, "after garbage"));
    // A 20 MB line is dropped unread; the call's answer still arrives.
    let (error, text) = one(&mut s, "flood").await;
    assert_eq!((error, text.as_str()), (false, "flooded"));
    let (error, text) = one(&mut s, "crash").await;
    assert!(
        error && text.contains("started again on the next call"),
        "{text}"
    );
    assert_eq!(one(&mut s, "ok").await, (false, "fine".to_owned()));
    // The crash was reported, and the daemon still serves other clients.
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    let events = s
        .client
        .events_until("mcp_server_state", |e| e["data"]["state"] == "failed")
        .await
        .unwrap();
    let reason = events.last().unwrap()["data"]["reason"].as_str().unwrap();
    assert!(reason.contains("started again on its next use"), "{reason}");
    let mut other = s.daemon.client().await.unwrap();
    other.call("daemon/info", json!({})).await.unwrap();
}

/// A server declaring thousands of tools gets 128 offered; an event names the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_tools_are_cut_to_128_and_the_rest_named() {
    let Some(mut server) = hostile(&["many"]) else {
        return;
    };
    // Declaring 5,000 tools takes the Python SDK seconds, more on a loaded machine.
    server["startup_timeout_secs"] = json!(120);
    let mut s = setup_with(json!({"config": {"mcp_servers": {"h": server}}})).await;
    let results = round(&mut s, &[("c", "mcp__h__ok", json!({}))]).await;
    assert_eq!(results["c"], (false, "fine".to_owned()));
    let tools = s.mock.requests()[0].body["tools"].as_array().unwrap().len();
    assert!((128..200).contains(&tools), "{tools}");
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    let events = s
        .client
        .events_until("mcp_server_state", |e| e["data"]["state"] == "ready")
        .await
        .unwrap();
    let ready = &events.last().unwrap()["data"];
    assert_eq!(ready["tools"].as_array().unwrap().len(), 128, "{ready}");
    assert_eq!(ready["left_out"].as_array().unwrap().len(), 256, "{ready}");
    let reason = ready["reason"].as_str().unwrap();
    // A listing stops at 4,096 tools: 3,968 of those are past the 128.
    assert!(
        reason.starts_with("3968 of its tools are not offered"),
        "{reason}"
    );
}

/// `notifications/tools/list_changed` refreshes the tools from the next LLM call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_offered_from_the_next_call() {
    let Some(server) = hostile(&[]) else {
        return;
    };
    let mut s = setup_with(json!({"config": {"mcp_servers": {"h": server}}})).await;
    let names = |body: &Value| -> Vec<String> {
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    round(&mut s, &[("g", "mcp__h__grow", json!({}))]).await;
    assert!(!names(&s.mock.requests()[0].body).contains(&"mcp__h__added".to_owned()));
    // The server is listed again as soon as it says its list changed.
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    s.client
        .events_until("mcp_server_state", |e| {
            e["data"]["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|n| n == "mcp__h__added"))
        })
        .await
        .unwrap();
    let before = s.mock.requests().len();
    let results = round(&mut s, &[("a", "mcp__h__added", json!({}))]).await;
    assert_eq!(results["a"], (false, "added here".to_owned()));
    assert!(names(&s.mock.requests()[before].body).contains(&"mcp__h__added".to_owned()));
}

/// mcp-server-time from PyPI answers through the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_time_from_pypi_answers() {
    let Some(time) = mcp_python("mcp-server-time") else {
        return;
    };
    let server = json!({"command": time, "args": ["--local-timezone", "UTC"]});
    let mut s = setup_with(json!({"config": {"mcp_servers": {"time": server}}})).await;
    let results = round(
        &mut s,
        &[(
            "t",
            "mcp__time__get_current_time",
            json!({"timezone": "UTC"}),
        )],
    )
    .await;
    assert!(
        !results["t"].0 && results["t"].1.contains("UTC"),
        "{:?}",
        results["t"]
    );
}

/// A prompt-injected model cannot reach a disabled server, a filtered tool, or a server's
/// tool through a built-in's name; a client cannot claim `mcp__` names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_model_cannot_reach_what_the_config_leaves_out() {
    let (Some(on), Some(off)) = (hostile(&[]), hostile(&[])) else {
        return;
    };
    let mut off = off;
    off["enabled"] = json!(false);
    let mut on = on;
    on["disabled_tools"] = json!(["crash"]);
    let mut s = setup_with(json!({"config": {"mcp_servers": {"h": on, "off": off}}})).await;
    let results = round(
        &mut s,
        &[
            ("a", "mcp__off__ok", json!({})),
            ("b", "mcp__h__crash", json!({})),
            ("c", "shell", json!({"command": "echo builtin-shell"})),
            ("d", "mcp__h__shell", json!({"command": "x"})),
        ],
    )
    .await;
    for id in ["a", "b"] {
        assert!(
            results[id].0 && results[id].1.contains("Unknown tool"),
            "{:?}",
            results[id]
        );
    }
    assert!(
        results["c"].1.contains("builtin-shell"),
        "{:?}",
        results["c"]
    );
    assert_eq!(
        results["d"],
        (false, "the hostile server's shell".to_owned())
    );
    let offered = s.mock.requests()[0].body["tools"].to_string();
    assert!(!offered.contains("mcp__off__") && !offered.contains("mcp__h__crash"));
    // Only one server started: the disabled one never ran.
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    let events = s
        .client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    assert!(
        of_kind(&events, "mcp_server_state")
            .iter()
            .all(|e| e["data"]["server"] == "h")
    );

    let mut client = s.daemon.client().await.unwrap();
    let refused = client
        .request(
            "session/create",
            json!({"cwd": s.workdir.path(), "config": {"client_tools": [
                {"name": "mcp__h__ok", "description": "smuggled", "parameters": {"type": "object"}}
            ]}}),
        )
        .await
        .unwrap();
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("only MCP servers' tools may"), "{refused}");
}

/// In `ask` mode: a tool its server calls read-only runs without asking, one it calls
/// destructive is asked about though an allow rule covers it, a deny rule refuses, and the
/// request names the server and the tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_follow_mcp_rules_and_hints() {
    let Some(server) = hostile(&[]) else {
        return;
    };
    let mut s = setup_with(json!({"config": {
        "mcp_servers": {"h": server},
        "approval": {"mode": "ask", "allow": ["mcp(h/*)"], "deny": ["mcp(h/fail*)"]}
    }}))
    .await;
    s.mock.push_stream(agentd_tests::sse::tools(
        "",
        &[
            ("p", "mcp__h__peek", json!({})),
            ("o", "mcp__h__ok", json!({})),
            ("f", "mcp__h__failing", json!({})),
            ("w", "mcp__h__wipe", json!({})),
        ],
    ));
    s.mock.push_stream(agentd_tests::sse::text("done"));
    s.start("go").await;
    let before = s.until("approval_requested").await;
    let asked = &before.last().unwrap()["data"].clone();
    assert_eq!(asked["tool"], "mcp__h__wipe");
    let summary = asked["summary"].as_str().unwrap();
    assert!(summary.contains("MCP server h tool wipe"), "{summary}");
    s.call(
        "session/respond",
        json!({"request_id": asked["request_id"], "decision": "deny"}),
    )
    .await;
    let after = s.until("processing_end").await;
    let all: Vec<Value> = [before, after].concat();
    let ends: std::collections::BTreeMap<String, Value> = of_kind(&all, "tool_call_end")
        .iter()
        .map(|e| {
            (
                e["data"]["call_id"].as_str().unwrap().to_owned(),
                e["data"].clone(),
            )
        })
        .collect();
    assert_eq!(ends["p"]["output"], "peeked");
    assert_eq!(ends["o"]["output"], "fine");
    assert!(
        ends["f"]["error"]
            .as_str()
            .unwrap()
            .contains("mcp(h/fail*)"),
        "{:?}",
        ends["f"]
    );
    assert!(
        ends["w"]["error"]
            .as_str()
            .unwrap()
            .contains("Refused by the user"),
        "{:?}",
        ends["w"]
    );
}

/// A server still starting when its session closes is ended with it, not at its startup
/// timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_still_starting_ends_with_its_session() {
    let tag = marker();
    let server = json!({"command": "sleep", "args": ["600", tag], "startup_timeout_secs": 3600});
    let mut s = setup_with(json!({"config": {"mcp_servers": {"slow": server}}})).await;
    // The input starts it; its LLM call waits for it.
    s.start("go").await;
    wait_for("the server to start", || live_with_marker(&tag).len() == 1).await;
    s.call("session/close", json!({})).await;
    wait_for("the starting server to end with its session", || {
        live_with_marker(&tag).is_empty()
    })
    .await;
}

/// `agentctl doctor` starts the config file's servers and names those that fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_starts_the_configured_servers_and_names_the_failures() {
    let Some(index) = everything() else {
        return;
    };
    let mock = agentd_tests::mock::MockProvider::start().await.unwrap();
    let config = format!(
        "[mcp_servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\n\
         [mcp_servers.missing]\ncommand = \"agentd-no-such-mcp-server\"\n\n\
         [mcp_servers.off]\ncommand = \"agentd-no-such-mcp-server\"\nenabled = false\n",
        index.display().to_string()
    );
    let daemon = agentd_tests::TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .config(&config)
        .start()
        .await
        .unwrap();
    let out = daemon.agentctl(&["--json", "doctor"], None).await.unwrap();
    assert!(!out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = report["mcp_check"]["output"].as_str().unwrap();
    assert!(check.contains("mcp everything: ok, "), "{check}");
    assert!(
        check.contains("mcp missing: FAILED: cannot start agentd-no-such-mcp-server"),
        "{check}"
    );
    assert!(!check.contains("mcp off"), "{check}");
    let human = daemon.agentctl(&["doctor"], None).await.unwrap();
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(human.contains("mcp      missing: FAILED"), "{human}");
}

/// The files under `root` whose bytes hold `needle`.
fn files_holding(root: &std::path::Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => dirs.push(path),
                Ok(t) if t.is_file() => {
                    let bytes = std::fs::read(&path).unwrap_or_default();
                    if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                        found.push(path);
                    }
                }
                _ => {}
            }
        }
    }
    found
}

/// An HTTP server's bearer token, read from the daemon's environment, reaches the server as
/// `Authorization: Bearer ...` on every request, with the configured `headers` (the server
/// refuses requests without both); it appears in no event, snapshot, log line or stored file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_reaches_the_server_and_never_shows() {
    let token = "tok-3f9a1c77e2d54b6b";
    let Some(server) = python_http(Some((token, "core"))).await else {
        return;
    };
    let mock = agentd_tests::mock::MockProvider::start().await.unwrap();
    let daemon = agentd_tests::TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("PYTHON_SERVER_TOKEN", token)
        .env("AGENTD_LOG", "debug")
        .start()
        .await
        .unwrap();
    let config = json!({
        "url": server.url,
        "bearer_token_env_var": "PYTHON_SERVER_TOKEN",
        "headers": {"X-Team": "core"}
    });
    let mut s = crate::setup_on(
        mock,
        daemon,
        tempfile::tempdir().unwrap(),
        json!({"config": {"mcp_servers": {"p": config}}}),
    )
    .await;
    let results = round(&mut s, &[("t", "mcp__p__protocol", json!({}))]).await;
    assert!(
        !results["t"].0 && results["t"].1.starts_with("protocol "),
        "{:?}",
        results["t"]
    );
    // Without the header, or with another token, the server refuses the start.
    let no_header = json!({"url": server.url, "bearer_token_env_var": "PYTHON_SERVER_TOKEN"});
    let wrong_token = json!({"url": server.url, "bearer_token_env_var": "ANTHROPIC_API_KEY", "headers": {"X-Team": "core"}});
    s.call(
        "session/set_config",
        json!({"config": {"mcp_servers": {"p": config, "h": no_header, "w": wrong_token}}}),
    )
    .await;
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    let mut failed = std::collections::BTreeSet::new();
    let mut events = Vec::new();
    while failed.len() < 2 {
        let more = s
            .client
            .events_until("mcp_server_state", |e| e["data"]["state"] == "failed")
            .await
            .unwrap();
        failed.insert(more.last().unwrap()["data"]["server"].to_string());
        events.extend(more);
    }
    for e in of_kind(&events, "mcp_server_state") {
        if e["data"]["state"] == "failed" {
            let reason = e["data"]["reason"].as_str().unwrap();
            assert!(reason.contains("401"), "{reason}");
        }
    }
    let snapshot = s.call("session/get", json!({})).await;
    for (what, text) in [
        ("events", serde_json::to_string(&events).unwrap()),
        ("snapshot", snapshot.to_string()),
        ("log", s.daemon.log_text()),
    ] {
        assert!(!text.contains(token), "the token is in the {what}");
    }
    assert_eq!(
        files_holding(s.daemon.root.path(), token),
        Vec::<PathBuf>::new(),
        "the token is stored"
    );
    assert!(snapshot.to_string().contains("PYTHON_SERVER_TOKEN"));

    // A variable that is not set fails the server, naming the variable.
    let unset = json!({"url": server.url, "bearer_token_env_var": "AGENTD_TEST_UNSET_TOKEN"});
    s.call(
        "session/set_config",
        json!({"config": {"mcp_servers": {"u": unset}}}),
    )
    .await;
    let failed = s
        .client
        .events_until("mcp_server_state", |e| {
            e["data"]["server"] == "u" && e["data"]["state"] == "failed"
        })
        .await
        .unwrap();
    let reason = failed.last().unwrap()["data"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("AGENTD_TEST_UNSET_TOKEN") && reason.contains("not set"),
        "{reason}"
    );
}

/// A server whose process group holds a child that ignores SIGTERM and outlives the server:
/// the group is ended with its session, and after a `kill -9` of the daemon by the next start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stubborn_servers_group_ends_with_its_session_and_after_kill_9() {
    let first = marker();
    let Some(server) = hostile(&["stubborn", &first]) else {
        return;
    };
    let mut s = setup_with(json!({"config": {"mcp_servers": {"h": server}}})).await;
    // Ready (started by the input): its child ignores SIGTERM by then.
    s.mock.push_stream(agentd_tests::sse::text("ok"));
    s.start("go").await;
    s.client
        .events_until("mcp_server_state", |e| e["data"]["state"] == "ready")
        .await
        .unwrap();
    // The server and its child both carry the tag.
    assert_eq!(live_with_marker(&first).len(), 2);
    s.call("session/close", json!({})).await;
    wait_for("the stubborn child to end with its session", || {
        live_with_marker(&first).is_empty()
    })
    .await;

    let second = marker();
    let server = hostile(&["stubborn", &second]).unwrap();
    let mut client = s.daemon.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    s.daemon.give(dir.path()).unwrap();
    let id = s
        .daemon
        .create_session(
            &mut client,
            dir.path(),
            json!({"config": {"mcp_servers": {"h": server}}}),
        )
        .await
        .unwrap();
    s.mock.push_stream(agentd_tests::sse::text("ok"));
    client.subscribe(&id, Some(0)).await.unwrap();
    client
        .call("session/submit", json!({"session_id": id, "text": "go"}))
        .await
        .unwrap();
    client
        .events_until("mcp_server_state", |e| e["data"]["state"] == "ready")
        .await
        .unwrap();
    let left = live_with_marker(&second);
    assert_eq!(left.len(), 2);
    s.daemon
        .stop_with(nix::sys::signal::Signal::SIGKILL)
        .await
        .unwrap();
    s.daemon.restart().await.unwrap();
    s.daemon
        .client()
        .await
        .unwrap()
        .call("daemon/info", json!({}))
        .await
        .unwrap();
    // The restarted daemon starts no server for the session until it gets input.
    wait_for("the restarted daemon to end the stubborn group", || {
        live_with_marker(&second).is_empty()
    })
    .await;
}

/// In a session whose sandbox is read-only, only the tools a server marks `readOnlyHint` (and
/// not `destructiveHint`) are offered: the others are named left out with the reason, and a
/// prompt-injected model calling one finds no such tool. A sandbox that may write offers
/// them again from the next LLM call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_session_is_offered_only_read_only_tools() {
    let Some(server) = hostile(&[]) else {
        return;
    };
    let mut s =
        setup_with(json!({"config": {"sandbox": "read_only", "mcp_servers": {"h": server}}})).await;
    let results = round(
        &mut s,
        &[
            ("p", "mcp__h__peek", json!({})),
            ("o", "mcp__h__ok", json!({})),
            ("w", "mcp__h__wipe", json!({})),
        ],
    )
    .await;
    assert_eq!(results["p"], (false, "peeked".to_owned()));
    for id in ["o", "w"] {
        assert!(
            results[id].0 && results[id].1.contains("Unknown tool"),
            "{:?}",
            results[id]
        );
    }
    let offered = |body: &Value| -> Vec<String> {
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .filter(|n| n.starts_with("mcp__"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(offered(&s.mock.requests()[0].body), ["mcp__h__peek"]);
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    let events = s
        .client
        .events_until("mcp_server_state", |e| e["data"]["state"] == "ready")
        .await
        .unwrap();
    let ready = &events.last().unwrap()["data"];
    assert_eq!(ready["tools"], json!(["mcp__h__peek"]), "{ready}");
    let left_out: Vec<&str> = ready["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for tool in ["ok", "wipe", "crash", "shell", "grow"] {
        assert!(left_out.contains(&tool), "{ready}");
    }
    let reason = ready["reason"].as_str().unwrap();
    assert!(reason.contains("read-only"), "{reason}");

    s.call(
        "session/set_config",
        json!({"config": {"sandbox": "workspace_write"}}),
    )
    .await;
    let before = s.mock.requests().len();
    let results = round(&mut s, &[("o", "mcp__h__ok", json!({}))]).await;
    assert_eq!(results["o"], (false, "fine".to_owned()));
    assert!(offered(&s.mock.requests()[before].body).contains(&"mcp__h__wipe".to_owned()));
}

/// `agentctl mcp list` without a session starts each server of the config file (as
/// `agentctl doctor` does) and shows its state and the tools a session would be offered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_list_without_a_session_starts_the_configured_servers() {
    let Some(index) = everything() else {
        return;
    };
    let config = format!(
        "[mcp_servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\
         disabled_tools = [\"echo\"]\n\n\
         [mcp_servers.missing]\ncommand = \"agentd-no-such-mcp-server\"\n\n\
         [mcp_servers.off]\ncommand = \"agentd-no-such-mcp-server\"\nenabled = false\n",
        index.display().to_string()
    );
    let daemon = agentd_tests::TestDaemon::builder()
        .config(&config)
        .start()
        .await
        .unwrap();
    let out = daemon
        .agentctl(&["--json", "mcp", "list"], None)
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let servers: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let by_name = |name: &str| servers.iter().find(|s| s["server"] == name).unwrap();
    let everything = by_name("everything");
    assert_eq!(everything["state"], "ready", "{everything}");
    let tools = everything["tools"].as_array().unwrap();
    assert!(
        tools.contains(&json!("mcp__everything__get-sum")),
        "{everything}"
    );
    assert!(
        !tools.contains(&json!("mcp__everything__echo")),
        "{everything}"
    );
    let missing = by_name("missing");
    assert_eq!(missing["state"], "failed");
    assert!(
        missing["reason"]
            .as_str()
            .unwrap()
            .contains("cannot start agentd-no-such-mcp-server"),
        "{missing}"
    );
    assert_eq!(by_name("off")["state"], "disabled");

    let human = daemon.agentctl(&["mcp", "list"], None).await.unwrap();
    let human = String::from_utf8_lossy(&human.stdout);
    let row = human
        .lines()
        .find(|l| l.starts_with("everything"))
        .unwrap_or_else(|| panic!("{human}"));
    assert!(
        row.contains("ready") && row.contains("mcp__everything__get-sum"),
        "{human}"
    );
    assert!(
        human
            .lines()
            .any(|l| l.starts_with("off") && l.contains("disabled")),
        "{human}"
    );
}

/// A server that speaks the 2026-07-28 stateless protocol is spoken to in it, over stdio and
/// over Streamable HTTP (the `mcp` Python SDK serves both eras, and its tool says which a
/// call came by); server-everything, which predates it, gets the 2025-11-25 handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stateless_protocol_is_spoken_where_the_server_knows_it() {
    let (Some(stdio), Some(http), Some(index)) =
        (hostile(&[]), python_http(None).await, everything())
    else {
        return;
    };
    let legacy = json!({"command": "node", "args": [index, "stdio"]});
    let mut s = setup_with(json!({"config": {"mcp_servers": {
        "s": stdio, "h": {"url": http.url}, "e": legacy
    }}}))
    .await;
    let results = round(
        &mut s,
        &[
            ("s", "mcp__s__protocol", json!({})),
            ("h", "mcp__h__protocol", json!({})),
            ("e", "mcp__e__echo", json!({"message": "old"})),
        ],
    )
    .await;
    assert_eq!(results["s"], (false, "protocol 2026-07-28".to_owned()));
    assert_eq!(results["h"], (false, "protocol 2026-07-28".to_owned()));
    assert_eq!(results["e"], (false, "Echo: old".to_owned()));
    let log = s.daemon.log_text();
    for (server, protocol) in [
        ("s", "2026-07-28"),
        ("h", "2026-07-28"),
        ("e", "2025-11-25"),
    ] {
        assert!(
            log.lines().any(|l| l.contains("MCP protocol")
                && (l.contains(&format!("server={server} "))
                    || l.contains(&format!("server=\"{server}\"")))
                && l.contains(protocol)),
            "{server}: {log}"
        );
    }
}
