//! Controlling a working session: abort (process groups die), queues, idempotent submits,
//! busy rejection, close.

use crate::{data_of, eventually, of_kind, setup};
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
    s.start("sleep").await;
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
    eventually("the command's processes to be running", async || {
        live_group_members(pgid).len() >= 5
    })
    .await;
    s.call("session/follow_up", json!({"text": "later"})).await;

    let aborted = s.call("session/abort", json!({})).await;
    assert_eq!(aborted["aborted"], true);
    assert_eq!(aborted["state"], "idle");
    assert_eq!(aborted["queue"]["follow_up"][0]["text"], "later");
    assert_eq!(
        live_group_members(pgid),
        Vec::<i32>::new(),
        "no process of the group survives"
    );

    let events = s.until("processing_end").await;
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
    let snapshot = s.call("session/get", json!({})).await;
    assert_eq!(snapshot["state"], "idle");
    assert_eq!(snapshot["queue"]["follow_up"].as_array().unwrap().len(), 1);
    assert_eq!(s.mock.requests().len(), 1);

    // The next submit runs, then the kept follow-up; the history records the abort so the
    // conversation stays valid for the provider.
    s.mock.push_stream(sse::text("resumed"));
    s.mock.push_stream(sse::text("and later"));
    s.call("session/submit", json!({"text": "go on"})).await;
    let events = s.until("processing_end").await;
    let inputs = data_of(&events, "user_input", "text");
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
    s.start("talk").await;
    s.until("assistant_text_delta").await;
    let aborted = s.call("session/abort", json!({})).await;
    assert_eq!(aborted["aborted"], true);
    let events = s.until("processing_end").await;
    assert_eq!(
        of_kind(&events, "processing_end")[0]["data"]["reason"],
        "aborted"
    );
    let history = s.call("session/history", json!({})).await;
    let last = history["entries"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["type"], "system");
    gate.open();

    let idle = s.call("session/abort", json!({})).await;
    assert_eq!(idle["aborted"], false);
    let closed = s.call("session/abort", json!({"close": true})).await;
    assert_eq!(closed["state"], "closed");
    let rest = s.until("session_end").await;
    assert_eq!(rest.last().unwrap()["data"]["state"], "closed");
    let end = s.client.item().await.unwrap();
    assert_eq!(
        end,
        json!({"type": "end", "session_id": s.session, "reason": "session_closed",
            "last_seq": rest.last().unwrap()["seq"]})
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
        .call(
            "session/submit",
            json!({"text": "a", "client_input_id": "k1"}),
        )
        .await;
    assert_eq!(first["disposition"], "started");
    let again = s
        .call(
            "session/submit",
            json!({"text": "a", "client_input_id": "k1"}),
        )
        .await;
    assert_eq!(
        again, first,
        "a repeated client_input_id returns the first result"
    );

    let rejected = s
        .request(
            "session/submit",
            json!({"text": "b", "when_busy": "reject"}),
        )
        .await;
    assert_eq!(rejected["error"]["code"], -32011);
    assert_eq!(rejected["error"]["data"]["kind"], "session_busy");
    // Steering queued before the first LLM call is drained into it (spec 2.5); wait until the
    // call is out, held at the gate, so these stay queued.
    s.mock.wait_requests(1).await;
    s.call("session/submit", json!({"text": "c", "when_busy": "steer"}))
        .await;
    s.call("session/submit", json!({"text": "d"})).await;
    let queue = s.call("session/queue", json!({})).await;
    assert_eq!(queue["steering"][0]["text"], "c");
    assert_eq!(queue["follow_up"][0]["text"], "d");
    let cleared = s.call("session/queue_clear", json!({})).await;
    assert_eq!(cleared, queue);
    let empty = s.call("session/queue", json!({})).await;
    assert_eq!(empty, json!({"steering": [], "follow_up": []}));
    gate.open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_and_unknown_sessions_get_clear_errors() {
    let mut s = setup().await;
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    let closed = s.call("session/close", json!({})).await;
    assert_eq!(closed["state"], "closed");
    let events = s.until("session_end").await;
    assert_eq!(events.last().unwrap()["data"]["reason"], "closed by client");
    assert_eq!(s.client.item().await.unwrap()["reason"], "session_closed");

    let late = s.request("session/submit", json!({"text": "x"})).await;
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
    let replay = s.until("session_end").await;
    assert_eq!(replay[0]["kind"], "session_start");
    assert_eq!(s.client.item().await.unwrap()["type"], "end");
}
