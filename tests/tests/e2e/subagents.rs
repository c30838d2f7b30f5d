//! Subagents through the socket: concurrent children, wait, send_input, the depth limit,
//! abort cascading to children's processes, a failing child, and `agentctl ls --tree`.

use crate::{of_kind, setup};
use agentd_tests::live_group_members;
use agentd_tests::mock::Reply;
use agentd_tests::sse;
use serde_json::{Value, json};

/// The first user message of a request (who is asking: the parent or which child).
pub(crate) fn first_user(body: &Value) -> String {
    body["messages"][0]["content"].to_string()
}

/// How many tool results a request carries.
pub(crate) fn results(body: &Value) -> usize {
    body.to_string().matches("\"tool_result\"").count()
}

/// The agent ids in a request's `spawn_agent` results.
pub(crate) fn spawned(body: &Value) -> Vec<String> {
    let text = body.to_string();
    text.match_indices("spawned agent ")
        .map(|(i, m)| text[i + m.len()..i + m.len() + 36].to_owned())
        .collect()
}

pub(crate) fn call(id: &str, name: &str, input: Value) -> (String, String, Value) {
    (id.into(), name.into(), input)
}

pub(crate) fn tools(calls: Vec<(String, String, Value)>) -> Reply {
    let calls: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(i, n, v)| (i.as_str(), n.as_str(), v.clone()))
        .collect();
    Reply::Stream(sse::tools("", &calls))
}

pub(crate) fn text(t: &str) -> Reply {
    Reply::Stream(sse::text(t))
}

/// The parent spawns one child per task, then waits for all of them, then answers.
pub(crate) fn parent_script(body: &Value, tasks: &[&str]) -> Reply {
    match results(body) {
        0 => tools(
            tasks
                .iter()
                .enumerate()
                .map(|(i, t)| call(&format!("s{i}"), "spawn_agent", json!({"task": t})))
                .collect(),
        ),
        n if n == tasks.len() => tools(
            spawned(body)
                .iter()
                .enumerate()
                .map(|(i, id)| call(&format!("w{i}"), "wait", json!({"agent_id": id})))
                .collect(),
        ),
        _ => text("parent done"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_children_run_concurrently_and_their_outputs_reach_the_parent() {
    let mut s = setup().await;
    s.mock.respond_with(|body| {
        let who = first_user(body);
        for child in ["child-A", "child-B"] {
            if who.contains(child) {
                return match results(body) {
                    // A rendezvous proves the two ran at the same time: each marks that it
                    // started and waits for the other's mark (60 s at most), so run one
                    // after the other, neither meets the other, however slow the machine.
                    0 => {
                        let other = if child == "child-A" {
                            "child-B"
                        } else {
                            "child-A"
                        };
                        tools(vec![call(
                            "c1",
                            "shell",
                            json!({"command": format!(
                                "touch {child}.ready; for i in $(seq 600); do \
                                 if [ -e {other}.ready ]; then echo met > {child}.met; exit 0; fi; \
                                 sleep 0.1; done; exit 1"
                            ), "timeout_ms": 120_000}),
                        )])
                    }
                    _ => text(&format!("{child}-OUTPUT")),
                };
            }
        }
        parent_script(
            body,
            &["child-A: time a command", "child-B: time a command"],
        )
    });
    let events = s.run("parent task").await;
    let spawned = of_kind(&events, "subagent_spawned");
    assert_eq!(spawned.len(), 2, "{events:?}");
    let finished = of_kind(&events, "subagent_finished");
    assert_eq!(finished.len(), 2);
    assert!(finished.iter().all(|e| e["data"]["success"] == true));

    for child in ["child-A", "child-B"] {
        assert!(
            s.workdir.path().join(format!("{child}.met")).exists(),
            "{child} met the other while both ran"
        );
    }

    let last = s.mock.requests().last().unwrap().body.to_string();
    assert!(
        last.contains("child-A-OUTPUT") && last.contains("child-B-OUTPUT"),
        "{last}"
    );
    assert_eq!(
        of_kind(&events, "assistant_text_end").last().unwrap()["data"]["text"],
        "parent done"
    );

    // Children are sessions: listed under their parent, with their own history.
    let child = spawned[0]["data"]["agent_id"].as_str().unwrap().to_owned();
    let snapshot = s
        .client
        .call("session/get", json!({"session_id": child}))
        .await
        .unwrap();
    assert_eq!(snapshot["parent_id"], s.session.as_str());
    assert_eq!(
        snapshot["turns"], 4,
        "its own user, call, results and answer"
    );
    let out = s.daemon.agentctl(&["ls", "--tree"], None).await.unwrap();
    let listing = String::from_utf8(out.stdout).unwrap();
    let parent_line = listing
        .lines()
        .position(|l| l.starts_with(&s.session))
        .unwrap();
    let child_line = listing
        .lines()
        .position(|l| l.starts_with(&format!("  {child}")))
        .unwrap_or_else(|| panic!("{listing}"));
    assert!(child_line > parent_line, "{listing}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_cannot_spawn_past_the_depth_limit() {
    let mut s = setup().await;
    s.mock.respond_with(|body| {
        if first_user(body).contains("child-deep") {
            return match results(body) {
                0 => tools(vec![call(
                    "g1",
                    "spawn_agent",
                    json!({"task": "grandchild"}),
                )]),
                _ => text("could not delegate"),
            };
        }
        parent_script(body, &["child-deep: delegate further"])
    });
    s.run("parent task").await;
    let child_second = s
        .mock
        .requests()
        .into_iter()
        .find(|r| first_user(&r.body).contains("child-deep") && results(&r.body) == 1)
        .unwrap();
    let text = child_second.body.to_string();
    assert!(text.contains("max_subagent_depth is 1"), "{text}");
    assert!(text.contains("\"is_error\":true"), "{text}");
    let sessions = s.client.call("session/list", json!({})).await.unwrap();
    assert_eq!(
        sessions["sessions"].as_array().unwrap().len(),
        2,
        "no grandchild"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_input_reaches_a_running_child() {
    let mut s = setup().await;
    s.mock.respond_with(|body| {
        if first_user(body).contains("child-S") {
            return match results(body) {
                0 => tools(vec![call("c1", "shell", json!({"command": "sleep 1"}))]),
                _ => text("child saw the note"),
            };
        }
        match results(body) {
            0 => tools(vec![call(
                "s0",
                "spawn_agent",
                json!({"task": "child-S: work"}),
            )]),
            1 => {
                let id = spawned(body).remove(0);
                tools(vec![
                    call(
                        "n0",
                        "send_input",
                        json!({"agent_id": id, "message": "EXTRA-NOTE"}),
                    ),
                    call("w0", "wait", json!({"agent_id": id})),
                ])
            }
            _ => text("parent done"),
        }
    });
    s.run("parent task").await;
    let child_second = s
        .mock
        .requests()
        .into_iter()
        .find(|r| first_user(&r.body).contains("child-S") && results(&r.body) == 1)
        .unwrap();
    assert!(child_second.body.to_string().contains("EXTRA-NOTE"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_the_parent_kills_every_child_process() {
    let mut s = setup().await;
    s.mock.respond_with(|body| {
        let who = first_user(body);
        for child in ["child-X", "child-Y"] {
            if who.contains(child) {
                return tools(vec![call(
                    "c1",
                    "shell",
                    json!({"command": format!("echo $$ > {child}.pid; sleep 1000")}),
                )]);
            }
        }
        parent_script(body, &["child-X: sleep", "child-Y: sleep"])
    });
    s.start("parent task").await;
    let dir = s.workdir.path().to_owned();
    let pid = |name: &str| -> Option<i32> {
        std::fs::read_to_string(dir.join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let deadline = std::time::Instant::now() + agentd_tests::WAIT;
    while (pid("child-X.pid").is_none() || pid("child-Y.pid").is_none())
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let groups = [pid("child-X.pid").unwrap(), pid("child-Y.pid").unwrap()];
    assert!(groups.iter().all(|g| !live_group_members(*g).is_empty()));

    let aborted = s.call("session/abort", json!({})).await;
    assert_eq!(aborted["state"], "idle");
    for g in groups {
        assert_eq!(
            live_group_members(g),
            Vec::<i32>::new(),
            "group {g} is gone"
        );
    }
    let list = s.client.call("session/list", json!({})).await.unwrap();
    for summary in list["sessions"].as_array().unwrap() {
        assert_eq!(summary["state"], "idle", "{summary}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_child_is_a_failed_result_not_a_hang() {
    let mut s = setup().await;
    s.mock.respond_with(|body| {
        if first_user(body).contains("child-F") {
            return Reply::Status(
                400,
                vec![],
                json!({"type": "error", "error": {"type": "invalid_request_error", "message": "CHILD-BROKE"}}).to_string(),
            );
        }
        parent_script(body, &["child-F: fail"])
    });
    let events = s.run("parent task").await;
    let finished = of_kind(&events, "subagent_finished");
    assert_eq!(finished[0]["data"]["success"], false);
    let last = s.mock.requests().last().unwrap().body.to_string();
    assert!(
        last.contains("failed") && last.contains("CHILD-BROKE"),
        "{last}"
    );
    assert!(last.contains("\"is_error\":true"), "{last}");
}
