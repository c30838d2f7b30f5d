//! What durability costs, counted through the real daemon running under `strace` (issue 11):
//! a task's journal is synced at most once per LLM turn and per tool round (group commit), and
//! `session.json` is replaced only when the session's state changes, never per round.
//!
//! Only upper bounds are asserted: a slow or loaded machine makes group commit merge syncs,
//! never add them.

use agentd_tests::mock::{MockProvider, Reply};
use agentd_tests::strace::{self, SessionSyncs};
use agentd_tests::{TestDaemon, sse};
use nix::sys::signal::Signal;
use serde_json::{Value, json};

/// Tool rounds in the task; with the final answer it is `ROUNDS + 1` LLM turns.
const ROUNDS: usize = 10;

/// Journal syncs allowed beyond one per LLM turn and per tool round: the sync that closes the
/// session cleanly at shutdown (the user's input rides with the first turn's).
const EXTRA_JOURNAL_SYNCS: usize = 1;

/// `session.json` replacements allowed beyond one per state change: the first record, written
/// when the session is created, and the clean-close record at shutdown.
const EXTRA_RECORD_WRITES: usize = 2;

/// How many tool results a request sends back: the rounds done so far.
fn tool_results(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_syncs_its_journal_once_per_step_and_its_record_only_on_state_changes() {
    // Under `CI=true` a missing strace fails (`.ci/run` installs it).
    let found = strace::find();
    if !agentd_tests::prerequisite("strace", found.is_some()) {
        return;
    }
    let Some(program) = found else { return };
    let traces = tempfile::tempdir().unwrap();
    let trace_file = traces.path().join("syncs.txt");
    let mock = MockProvider::start().await.unwrap();
    let mut daemon = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .wrap(program, strace::args(&trace_file, None))
        .start()
        .await
        .unwrap();
    mock.respond_with(|body| {
        let done = tool_results(body);
        if done < ROUNDS {
            Reply::Stream(sse::shell(
                &format!("t{done}"),
                &format!("echo round-{done}"),
            ))
        } else {
            Reply::Stream(sse::text("done"))
        }
    });
    let workdir = tempfile::tempdir().unwrap();
    let mut client = daemon.client().await.unwrap();
    let session = daemon
        .create_session(&mut client, workdir.path(), json!({}))
        .await
        .unwrap();
    client.subscribe(&session, Some(0)).await.unwrap();
    client
        .call(
            "session/submit",
            json!({"session_id": session, "text": "go"}),
        )
        .await
        .unwrap();
    // The move to idle follows `processing_end`.
    let events = client
        .events_until("state_changed", |e| e["data"]["state"] == "idle")
        .await
        .unwrap();
    assert_eq!(mock.requests().len(), ROUNDS + 1);
    let state_changes = events
        .iter()
        .filter(|e| e["kind"] == "state_changed")
        .count();
    assert_eq!(state_changes, 2, "processing, then idle");
    drop(client);
    daemon.stop_with(Signal::SIGTERM).await.unwrap();

    let trace = std::fs::read_to_string(&trace_file).unwrap();
    let counts = SessionSyncs::count(&trace, &session);
    eprintln!("{} LLM turns, {ROUNDS} tool rounds: {counts:?}", ROUNDS + 1);
    // A trace that names no files would make every bound below hold trivially.
    assert!(
        counts.journal_syncs >= 1 && counts.record_writes >= 1,
        "{counts:?}\n{trace}"
    );
    assert!(
        counts.journal_syncs <= (ROUNDS + 1) + ROUNDS + EXTRA_JOURNAL_SYNCS,
        "{} journal syncs for {} LLM turns and {ROUNDS} tool rounds:\n{trace}",
        counts.journal_syncs,
        ROUNDS + 1
    );
    assert!(
        counts.record_writes <= state_changes + EXTRA_RECORD_WRITES,
        "session.json was replaced {} times for {state_changes} state changes:\n{trace}",
        counts.record_writes
    );
}
