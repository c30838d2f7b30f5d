//! Controlling a working session: abort (process groups die), queues, idempotent submits,
//! busy rejection, close. Events are read typed ([`agentd_tests::Client`]); the error
//! answers' JSON is checked as sent.

use crate::{end_reasons, eventually, setup};
use agentd_proto::{
    EventBody, ProcessingEndReason, SessionEndReason, SessionState, StreamEnd, StreamEndReason,
    StreamItem,
};
use agentd_tests::mock::{Chunk, Gate};
use agentd_tests::{live_group_members, sse};
use serde_json::json;

fn is_end(e: &EventBody) -> bool {
    matches!(e, EventBody::ProcessingEnd { .. })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_kills_the_whole_process_group_and_keeps_the_queue() {
    let mut s = setup().await;
    let (mut c, id) = s.typed().await;
    // A child that forks grandchildren; one ignores SIGTERM so SIGKILL must follow.
    let command =
        "echo PGID=$$; (sleep 1000 & sleep 1000 & trap '' TERM; sleep 1000; wait) & sleep 1000";
    s.mock.push_stream(sse::shell("t_sleep", command));
    c.start(&id, "sleep").await.unwrap();
    let events = c
        .until(|e| matches!(e, EventBody::ToolCallOutputDelta { delta, .. } if delta.contains("PGID=")))
        .await
        .unwrap();
    let EventBody::ToolCallOutputDelta { delta, .. } = &events.last().unwrap().body else {
        unreachable!()
    };
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

    let events = c.until(is_end).await.unwrap();
    assert_eq!(end_reasons(&events), [ProcessingEndReason::Aborted]);
    let error = each!(events, EventBody::ToolCallEnd { error, .. } => error.as_deref())[0];
    assert!(
        error.unwrap().contains("[Command aborted by the user.]"),
        "{error:?}"
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
    let events = c.until(is_end).await.unwrap();
    let inputs = each!(events, EventBody::UserInput { text, .. } => text.as_str());
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
    let (mut c, id) = s.typed().await;
    let gate = Gate::new();
    let mut chunks = sse::text("partial words here");
    chunks.insert(4, Chunk::Wait(gate.clone()));
    s.mock.push_stream(chunks);
    c.start(&id, "talk").await.unwrap();
    c.until(|e| matches!(e, EventBody::AssistantTextDelta { .. }))
        .await
        .unwrap();
    let aborted = s.call("session/abort", json!({})).await;
    assert_eq!(aborted["aborted"], true);
    let events = c.until(is_end).await.unwrap();
    assert_eq!(end_reasons(&events), [ProcessingEndReason::Aborted]);
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
    let rest = c
        .until(|e| matches!(e, EventBody::SessionEnd { .. }))
        .await
        .unwrap();
    let last = rest.last().unwrap();
    assert!(
        matches!(
            last.body,
            EventBody::SessionEnd {
                state: SessionState::Closed,
                ..
            }
        ),
        "{last:?}"
    );
    assert_eq!(
        c.item().await.unwrap(),
        StreamItem::End(StreamEnd {
            session_id: id,
            reason: StreamEndReason::SessionClosed,
            last_seq: last.seq,
        })
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
    let (mut c, id) = s.typed().await;
    c.subscribe(&id, Some(0)).await.unwrap();
    let closed = s.call("session/close", json!({})).await;
    assert_eq!(closed["state"], "closed");
    let events = c
        .until(|e| matches!(e, EventBody::SessionEnd { .. }))
        .await
        .unwrap();
    let reasons = each!(events, EventBody::SessionEnd { reason, .. } => *reason);
    assert_eq!(reasons, [SessionEndReason::ClosedByClient]);
    assert!(matches!(
        c.item().await.unwrap(),
        StreamItem::End(StreamEnd {
            reason: StreamEndReason::SessionClosed,
            ..
        })
    ));

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
