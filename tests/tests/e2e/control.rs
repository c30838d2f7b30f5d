//! Controlling a working session: abort (process groups die), queues, idempotent submits,
//! busy rejection, close.

use crate::{of_kind, setup};
use agentd_tests::mock::{Chunk, Gate};
use agentd_tests::{live_group_members, sse};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_kills_the_whole_process_group_and_keeps_the_queue() {
    let mut s = setup().await;
    // A child that forks grandchildren; one ignores SIGTERM so SIGKILL must follow.
    let command =
        "echo PGID=$$; (sleep 1000 & sleep 1000 & trap '' TERM; sleep 1000; wait) & sleep 1000";
    s.mock.push_stream(sse::shell("t_sleep", command));
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    s.client
        .call(
            "session/submit",
            json!({"session_id": s.session, "text": "sleep"}),
        )
        .await
        .unwrap();
    let events = s
        .client
        .events_until("tool_call_output_delta", |e| {
            e["data"]["delta"].as_str().unwrap().contains("PGID=")
        })
        .await
        .unwrap();
    let delta = events.last().unwrap()["data"]["delta"].as_str().unwrap();
    let pgid: i32 = delta.trim().trim_start_matches("PGID=").parse().unwrap();
    // Let the subshell fork its children before aborting.
    let deadline = std::time::Instant::now() + agentd_tests::WAIT;
    while live_group_members(pgid).len() < 5 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        live_group_members(pgid).len() >= 5,
        "the command's processes are running"
    );
    s.client
        .call(
            "session/follow_up",
            json!({"session_id": s.session, "text": "later"}),
        )
        .await
        .unwrap();

    let aborted = s
        .client
        .call("session/abort", json!({"session_id": s.session}))
        .await
        .unwrap();
    assert_eq!(aborted["aborted"], true);
    assert_eq!(aborted["state"], "idle");
    assert_eq!(aborted["queue"]["follow_up"][0]["text"], "later");
    assert_eq!(
        live_group_members(pgid),
        Vec::<i32>::new(),
        "no process of the group survives"
    );

    let events = s
        .client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    assert_eq!(
        of_kind(&events, "processing_end")[0]["data"]["reason"],
        "aborted"
    );
    let end = of_kind(&events, "tool_call_end")[0];
    assert!(
        end["data"]["error"]
            .as_str()
            .unwrap()
            .contains("[Command aborted by the user.]"),
        "{end}"
    );
    // The queued follow-up did not run by itself.
    let snapshot = s
        .client
        .call("session/get", json!({"session_id": s.session}))
        .await
        .unwrap();
    assert_eq!(snapshot["state"], "idle");
    assert_eq!(snapshot["queue"]["follow_up"].as_array().unwrap().len(), 1);
    assert_eq!(s.mock.requests().len(), 1);

    // The next submit runs, then the kept follow-up; the history records the abort so the
    // conversation stays valid for the provider.
    s.mock.push_stream(sse::text("resumed"));
    s.mock.push_stream(sse::text("and later"));
    s.client
        .call(
            "session/submit",
            json!({"session_id": s.session, "text": "go on"}),
        )
        .await
        .unwrap();
    let events = s
        .client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    let inputs: Vec<&str> = of_kind(&events, "user_input")
        .iter()
        .map(|e| e["data"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(inputs, ["go on", "later"]);
    let request = &s.mock.requests()[1].body;
    let messages = request["messages"].as_array().unwrap();
    assert_eq!(
        messages[2]["content"][0]["type"], "tool_result",
        "the aborted call has a result"
    );
    assert_eq!(messages[2]["content"][0]["is_error"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_during_the_model_stream_and_with_close() {
    let mut s = setup().await;
    let gate = Gate::new();
    let mut chunks = sse::text("partial words here");
    chunks.insert(4, Chunk::Wait(gate.clone()));
    s.mock.push_stream(chunks);
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    s.client
        .call(
            "session/submit",
            json!({"session_id": s.session, "text": "talk"}),
        )
        .await
        .unwrap();
    s.client
        .events_until("assistant_text_delta", |_| true)
        .await
        .unwrap();
    let aborted = s
        .client
        .call("session/abort", json!({"session_id": s.session}))
        .await
        .unwrap();
    assert_eq!(aborted["aborted"], true);
    let events = s
        .client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    assert_eq!(
        of_kind(&events, "processing_end")[0]["data"]["reason"],
        "aborted"
    );
    let history = s
        .client
        .call("session/history", json!({"session_id": s.session}))
        .await
        .unwrap();
    let last = history["entries"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["type"], "system");
    gate.open();

    let idle = s
        .client
        .call("session/abort", json!({"session_id": s.session}))
        .await
        .unwrap();
    assert_eq!(idle["aborted"], false);
    let closed = s
        .client
        .call(
            "session/abort",
            json!({"session_id": s.session, "close": true}),
        )
        .await
        .unwrap();
    assert_eq!(closed["state"], "closed");
    let rest = s
        .client
        .events_until("session_end", |_| true)
        .await
        .unwrap();
    assert_eq!(rest.last().unwrap()["data"]["state"], "closed");
    let end = s.client.item().await.unwrap();
    assert_eq!(
        end,
        json!({"type": "end", "reason": "session_closed", "last_seq": rest.last().unwrap()["seq"]})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_sessions_queue_steer_or_reject() {
    let mut s = setup().await;
    let gate = Gate::new();
    let mut chunks = sse::text("slow");
    chunks.insert(1, Chunk::Wait(gate.clone()));
    s.mock.push_stream(chunks);
    s.mock
        .respond_with(|_| agentd_tests::mock::Reply::Stream(sse::text("ok")));
    let first = s
        .client
        .call(
            "session/submit",
            json!({"session_id": s.session, "text": "a", "client_input_id": "k1"}),
        )
        .await
        .unwrap();
    assert_eq!(first["disposition"], "started");
    let again = s
        .client
        .call(
            "session/submit",
            json!({"session_id": s.session, "text": "a", "client_input_id": "k1"}),
        )
        .await
        .unwrap();
    assert_eq!(
        again, first,
        "a repeated client_input_id returns the first result"
    );

    let rejected = s
        .client
        .request(
            "session/submit",
            json!({"session_id": s.session, "text": "b", "when_busy": "reject"}),
        )
        .await
        .unwrap();
    assert_eq!(rejected["error"]["code"], -32011);
    assert_eq!(rejected["error"]["data"]["kind"], "session_busy");
    s.client
        .call(
            "session/submit",
            json!({"session_id": s.session, "text": "c", "when_busy": "steer"}),
        )
        .await
        .unwrap();
    s.client
        .call(
            "session/submit",
            json!({"session_id": s.session, "text": "d"}),
        )
        .await
        .unwrap();
    let queue = s
        .client
        .call("session/queue", json!({"session_id": s.session}))
        .await
        .unwrap();
    assert_eq!(queue["steering"][0]["text"], "c");
    assert_eq!(queue["follow_up"][0]["text"], "d");
    let cleared = s
        .client
        .call("session/queue_clear", json!({"session_id": s.session}))
        .await
        .unwrap();
    assert_eq!(cleared, queue);
    let empty = s
        .client
        .call("session/queue", json!({"session_id": s.session}))
        .await
        .unwrap();
    assert_eq!(empty, json!({"steering": [], "follow_up": []}));
    gate.open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_and_unknown_sessions_get_clear_errors() {
    let mut s = setup().await;
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    let closed = s
        .client
        .call("session/close", json!({"session_id": s.session}))
        .await
        .unwrap();
    assert_eq!(closed["state"], "closed");
    let events = s
        .client
        .events_until("session_end", |_| true)
        .await
        .unwrap();
    assert_eq!(events.last().unwrap()["data"]["reason"], "closed by client");
    assert_eq!(s.client.item().await.unwrap()["reason"], "session_closed");

    let late = s
        .client
        .request(
            "session/submit",
            json!({"session_id": s.session, "text": "x"}),
        )
        .await
        .unwrap();
    assert_eq!(late["error"]["code"], -32012);
    assert_eq!(
        late["error"]["data"],
        json!({"kind": "session_closed", "retryable": false, "session_id": s.session})
    );
    let unknown = s
        .client
        .request("session/get", json!({"session_id": "nope"}))
        .await
        .unwrap();
    assert_eq!(unknown["error"]["code"], -32010);
    assert_eq!(unknown["error"]["message"], "session nope not found");
    let unknown_sub = s
        .client
        .request("session/subscribe", json!({"session_id": "nope"}))
        .await
        .unwrap();
    assert_eq!(unknown_sub["error"]["data"]["kind"], "session_not_found");
    // A closed session still replays its log.
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    let replay = s
        .client
        .events_until("session_end", |_| true)
        .await
        .unwrap();
    assert_eq!(replay[0]["kind"], "session_start");
    assert_eq!(s.client.item().await.unwrap()["type"], "end");
}
