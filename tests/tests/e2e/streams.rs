//! Event streams: replay with `since_seq`, several watchers, many sessions at once, and the
//! daemon-wide stream.

use crate::{of_kind, setup};
use agentd_tests::mock::Reply;
use agentd_tests::{RawClient, sse};
use serde_json::{Value, json};

fn seqs(events: &[Value]) -> Vec<u64> {
    events.iter().map(|e| e["seq"].as_u64().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnecting_with_since_seq_replays_exactly_the_missed_events() {
    let mut s = setup().await;
    s.mock.push_stream(sse::tools(
        "first",
        &[("t1", "shell", json!({"command": "echo one"}))],
    ));
    s.mock.push_stream(sse::text("done one"));
    let first = s.run("one").await;
    let last_seen = first.last().unwrap()["seq"].as_u64().unwrap();
    drop(s.client);

    // While no one watches, more work happens.
    let mut other = s.daemon.client().await.unwrap();
    s.mock.push_stream(sse::text("done two"));
    other
        .call(
            "session/submit",
            json!({"session_id": s.session, "text": "two"}),
        )
        .await
        .unwrap();
    let mut watcher = s.daemon.client().await.unwrap();
    watcher.subscribe(&s.session, Some(0)).await.unwrap();
    // From seq 0: the first input's processing_end, then the second's.
    let mut everything = watcher
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    everything.extend(
        watcher
            .events_until("processing_end", |_| true)
            .await
            .unwrap(),
    );

    let mut back = RawClient::connect(&s.daemon.socket).await.unwrap();
    back.subscribe(&s.session, Some(last_seen)).await.unwrap();
    let missed = back.events_until("processing_end", |_| true).await.unwrap();
    let expected: Vec<Value> = everything
        .into_iter()
        .filter(|e| e["seq"].as_u64().unwrap() > last_seen)
        .collect();
    assert_eq!(missed, expected, "exactly the missed events, in order");
    assert_eq!(seqs(&missed)[0], last_seen + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_watch_one_session() {
    let mut s = setup().await;
    let mut second = s.daemon.client().await.unwrap();
    second.subscribe(&s.session, None).await.unwrap();
    s.mock.push_stream(sse::shell("t", "printf 'a\\nb\\n'"));
    s.mock.push_stream(sse::text("both see this"));
    let first_view = s.run("watch").await;
    let second_view = second
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    assert_eq!(first_view, second_view);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_sessions_run_concurrently() {
    let s = setup().await;
    s.mock.respond_with(|body| {
        let last = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .cloned()
            .unwrap_or_default();
        let has_result = last["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"));
        if has_result {
            Reply::Stream(sse::text("finished"))
        } else {
            Reply::Stream(sse::shell("t", "sleep 0.3; echo $PWD"))
        }
    });
    let mut tasks = Vec::new();
    for i in 0..20 {
        let socket = s.daemon.socket.clone();
        let dir = s.workdir.path().join(format!("w{i}"));
        std::fs::create_dir(&dir).unwrap();
        tasks.push(tokio::spawn(async move {
            let mut c = RawClient::connect(&socket).await.unwrap();
            let snapshot = c
                .call(
                    "session/create",
                    json!({"cwd": dir.display().to_string(), "title": format!("s{i}")}),
                )
                .await
                .unwrap();
            let id = snapshot["session_id"].as_str().unwrap().to_owned();
            c.subscribe(&id, Some(0)).await.unwrap();
            c.call("session/submit", json!({"session_id": id, "text": "work"}))
                .await
                .unwrap();
            let events = c.events_until("processing_end", |_| true).await.unwrap();
            let output = of_kind(&events, "tool_call_end")[0]["data"]["output"]
                .as_str()
                .unwrap()
                .to_owned();
            assert!(output.starts_with(&dir.display().to_string()), "{output}");
            assert_eq!(
                of_kind(&events, "processing_end")[0]["data"]["reason"],
                "completed"
            );
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut c = s.daemon.client().await.unwrap();
    let list = c
        .call("session/list", json!({"state": "idle"}))
        .await
        .unwrap();
    assert_eq!(list["sessions"].as_array().unwrap().len(), 21);
    let info = c.call("daemon/info", json!({})).await.unwrap();
    assert_eq!(
        (
            info["sessions"].as_u64(),
            info["sessions_processing"].as_u64()
        ),
        (Some(21), Some(0))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_stream_reports_sessions_and_states() {
    let mut s = setup().await;
    let mut watcher = s.daemon.client().await.unwrap();
    watcher.call("daemon/subscribe", json!({})).await.unwrap();
    let id = s
        .daemon
        .create_session(&mut s.client, s.workdir.path(), json!({}))
        .await
        .unwrap();
    let created = watcher.notification().await.unwrap();
    assert_eq!(created["method"], "daemon/event");
    assert_eq!(
        created["params"]["result"],
        json!({"kind": "session_created", "session_id": id})
    );
    s.mock.push_stream(sse::text("hi"));
    s.client
        .call("session/submit", json!({"session_id": id, "text": "x"}))
        .await
        .unwrap();
    let processing = watcher.notification().await.unwrap();
    assert_eq!(
        processing["params"]["result"],
        json!({"kind": "state_changed", "session_id": id, "state": "processing"})
    );
    let idle = watcher.notification().await.unwrap();
    assert_eq!(idle["params"]["result"]["state"], "idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_stops_reading_is_dropped_and_resumes_without_loss() {
    let mut s = setup().await;
    // Up to 4,000 output deltas of 1 kB (fewer on a loaded machine, where a read may take
    // several lines): far more than the socket buffer, the connection queue and the live
    // buffer hold for a client that does not read.
    s.mock.push_stream(sse::shell(
        "t",
        "for i in $(seq 1 4000); do printf '%01000d\\n' $i; sleep 0.001; done",
    ));
    s.mock.push_stream(sse::text("done"));
    let mut stalled = s.daemon.client().await.unwrap();
    stalled.subscribe(&s.session, Some(0)).await.unwrap();
    let events = s.run("flood").await;
    let last = events.last().unwrap()["seq"].as_u64().unwrap();
    assert!(last > 2000, "the flood produced {last} events");

    let mut got: Vec<Value> = Vec::new();
    let end = loop {
        let item = stalled.item().await.unwrap();
        if item["type"] == "end" {
            break item;
        }
        got.push(item);
    };
    assert_eq!(end["reason"], "lagged");
    assert_eq!(
        end["last_seq"],
        got.last().map_or(json!(0), |e| e["seq"].clone())
    );
    let resume_from = end["last_seq"].as_u64().unwrap();
    assert!(resume_from < last);
    stalled
        .subscribe(&s.session, Some(resume_from))
        .await
        .unwrap();
    got.extend(
        stalled
            .events_until("processing_end", |_| true)
            .await
            .unwrap(),
    );
    assert_eq!(
        seqs(&got),
        (1..=last).collect::<Vec<_>>(),
        "nothing lost across the resubscribe"
    );
}
