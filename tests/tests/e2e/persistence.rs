//! Durable sessions: restarts (graceful and `kill -9`), replay across restarts, torn files,
//! fork, rollback, compaction, delete and gc, and a disk that cannot be written.

use crate::{Setup, data_of, of_kind, setup, setup_with};
use agentd_tests::mock::{Chunk, Gate, Reply};
use agentd_tests::{RawClient, sse};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use std::path::PathBuf;

fn session_dir(s: &Setup) -> PathBuf {
    s.daemon.sessions_dir().join(&s.session)
}

/// Every line of a stored JSON Lines file (panics on a line that does not parse).
fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path:?}: {e}: {l}")))
        .collect()
}

/// A session's journal: its events and its history entries, in the order written.
fn journal(dir: &std::path::Path) -> (Vec<Value>, Vec<Value>) {
    let (entries, events): (Vec<Value>, Vec<Value>) = lines(&dir.join("log.jsonl"))
        .into_iter()
        .partition(|line| line.get("entry").is_some());
    (
        events,
        entries.into_iter().map(|e| e["entry"].clone()).collect(),
    )
}

fn seqs(events: &[Value]) -> Vec<u64> {
    events.iter().map(|e| e["seq"].as_u64().unwrap()).collect()
}

/// An event as stored: the stream item without its `type`.
fn event(mut item: Value) -> Value {
    item.as_object_mut().unwrap().remove("type");
    item
}

/// Reads a subscription's replay up to `last` (inclusive).
async fn replay(client: &mut RawClient, session: &str, since: u64, last: u64) -> Vec<Value> {
    client.subscribe(session, Some(since)).await.unwrap();
    let mut events: Vec<Value> = Vec::new();
    while events.last().is_none_or(|e| e["seq"].as_u64() < Some(last)) && since < last {
        let item = client.item().await.unwrap();
        assert_eq!(item["type"], "event", "{item}");
        events.push(event(item));
    }
    events
}

/// Every text a request sent to the model, joined.
fn request_text(body: &Value) -> String {
    body["messages"].to_string()
}

async fn restart(s: &mut Setup, signal: Signal) {
    s.daemon.stop_with(signal).await.unwrap();
    s.daemon.restart().await.unwrap();
    s.client = s.daemon.client().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_sessions_and_replays_exactly_the_missed_events() {
    let mut s = setup().await;
    s.mock.push_stream(sse::shell("t1", "echo FIRST-OUTPUT"));
    s.mock.push_stream(sse::text("first done"));
    s.run("first task").await;
    let seen = s.call("session/get", json!({})).await["last_seq"]
        .as_u64()
        .unwrap();
    // More happens after this client stopped reading.
    s.mock.push_stream(sse::text("second done"));
    s.run("second task").await;
    let before = s.call("session/get", json!({})).await;
    let last = before["last_seq"].as_u64().unwrap();
    let mut other = s.daemon.client().await.unwrap();
    let missed_before = replay(&mut other, &s.session, seen, last).await;

    restart(&mut s, Signal::SIGTERM).await;

    let list = s.client.call("session/list", json!({})).await.unwrap();
    assert_eq!(list["sessions"][0]["session_id"], s.session.as_str());
    let after = s.call("session/get", json!({})).await;
    assert_eq!(after["state"], "idle");
    assert_eq!(after["last_seq"], before["last_seq"]);
    assert_eq!(after["turns"], before["turns"]);
    assert_eq!(after["config"], before["config"]);
    assert_eq!(after["usage"], before["usage"]);

    let missed = replay(&mut s.client, &s.session, seen, last).await;
    assert_eq!(missed, missed_before, "the same events, byte for byte");
    assert_eq!(seqs(&missed), ((seen + 1)..=last).collect::<Vec<_>>());

    // The conversation goes on with its history, and seq continues.
    s.mock.push_stream(sse::text("third done"));
    s.call("session/submit", json!({"text": "third task"}))
        .await;
    let events = s.until("processing_end").await;
    assert_eq!(events[0]["seq"].as_u64().unwrap(), last + 1);
    let request = s.mock.wait_requests(4).await.pop().unwrap();
    let sent = request_text(&request.body);
    for earlier in ["first task", "FIRST-OUTPUT", "second done", "third task"] {
        assert!(sent.contains(earlier), "{earlier} in {sent}");
    }
}

/// Regression (issue 28): right after a restart that followed a `kill -9` during a tool call,
/// `session/list` showed the session as processing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_killed_in_a_tool_call_is_listed_idle_after_the_restart() {
    let mut s = setup().await;
    s.mock.push_stream(sse::shell(
        "t1",
        "echo STARTED; sleep 600 # killed with the daemon",
    ));
    s.start("work").await;
    s.client
        .events_until("tool_call_output_delta", |e| {
            e["data"]["delta"]
                .as_str()
                .unwrap_or("")
                .contains("STARTED")
        })
        .await
        .unwrap();
    s.daemon.stop_with(Signal::SIGKILL).await.unwrap();
    s.daemon.restart().await.unwrap();
    s.client = s.daemon.client().await.unwrap();
    let listed = s.client.call("session/list", json!({})).await.unwrap();
    let id = s.session.clone();
    let state = |listed: &Value| {
        listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["session_id"] == id.as_str())
            .map(|l| l["state"].clone())
            .unwrap()
    };
    assert_eq!(state(&listed), "idle", "{listed}");
    assert_eq!(s.call("session/get", json!({})).await["state"], "idle");
    let listed = s.client.call("session/list", json!({})).await.unwrap();
    assert_eq!(state(&listed), "idle", "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_turn_loses_nothing_and_the_session_recovers() {
    let mut s = setup().await;
    let gate = Gate::new();
    s.mock.push_stream(sse::tools(
        "",
        &[
            ("t1", "shell", json!({"command": "echo STORED-RESULT"})),
            ("t2", "shell", json!({"command": "echo SECOND"})),
        ],
    ));
    // The second call hangs mid-stream: the daemon dies in the middle of it.
    let mut hanging = vec![sse::message_start()];
    hanging.extend(sse::text_block(0, "partial answer"));
    hanging.push(Chunk::Wait(gate.clone()));
    s.mock.push_stream(hanging);
    s.start("work").await;
    let seen = s
        .client
        .events_until("assistant_text_delta", |e| {
            e["data"]["delta"]
                .as_str()
                .unwrap_or("")
                .contains("partial")
        })
        .await
        .unwrap();
    s.call("session/follow_up", json!({"text": "queued for later"}))
        .await;
    let seen = s
        .client
        .events_until("queue_changed", |_| true)
        .await
        .map(|tail| seen.into_iter().chain(tail).map(event).collect::<Vec<_>>())
        .unwrap();
    s.daemon.stop_with(Signal::SIGKILL).await.unwrap();

    let dir = session_dir(&s);
    let (stored, history) = journal(&dir);
    // Events reach clients before the disk: what is stored is what was seen, in order; the
    // rest is announced after the restart, and its seqs are never reused.
    assert!(!stored.is_empty() && stored.len() <= seen.len());
    assert_eq!(
        stored[..],
        seen[..stored.len()],
        "stored events are what was seen"
    );
    let results = history
        .iter()
        .find(|e| e["type"] == "tool_results")
        .unwrap();
    assert!(results.to_string().contains("STORED-RESULT"), "{results}");

    s.daemon.restart().await.unwrap();
    s.client = s.daemon.client().await.unwrap();
    let snapshot = s.call("session/get", json!({})).await;
    assert_eq!(snapshot["state"], "idle");
    assert_eq!(
        snapshot["queue"]["follow_up"][0]["text"], "queued for later",
        "the queue survives"
    );
    let last = snapshot["last_seq"].as_u64().unwrap();
    let tail = replay(&mut s.client, &s.session, seen.len() as u64, last).await;
    let missing = &tail[0];
    assert_eq!(missing["kind"], "events_missing", "{missing}");
    assert_eq!(missing["data"]["first_seq"], stored.len() as u64 + 1);
    assert!(missing["data"]["last_seq"].as_u64().unwrap() >= seen.len() as u64);
    let warnings = data_of(&tail, "warning", "message");
    assert!(
        warnings.iter().any(|w| w.contains("interrupted")),
        "{warnings:?}"
    );
    assert_eq!(
        of_kind(&tail, "processing_end")[0]["data"]["reason"],
        "aborted"
    );

    s.mock.push_stream(sse::text("recovered"));
    s.mock.push_stream(sse::text("follow-up done"));
    s.call("session/submit", json!({"text": "go on"})).await;
    let events = s.until("processing_end").await;
    assert_eq!(
        of_kind(&events, "processing_end")[0]["data"]["reason"],
        "completed"
    );
    let requests = s.mock.wait_requests(4).await;
    assert!(request_text(&requests[3].body).contains("queued for later"));
    let sent = request_text(&requests[2].body);
    assert!(sent.contains("STORED-RESULT"), "{sent}");
    assert!(sent.contains("interrupted"), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_last_line_is_skipped_and_appends_continue_cleanly() {
    let mut s = setup().await;
    s.mock.push_stream(sse::text("done"));
    s.run("task").await;
    // `state_changed` (idle) follows `processing_end`: the log's last event.
    s.until("state_changed").await;
    let last = s.call("session/get", json!({})).await["last_seq"]
        .as_u64()
        .unwrap();
    s.daemon.stop_with(Signal::SIGTERM).await.unwrap();
    let dir = session_dir(&s);
    let torn = format!(
        "{{\"session_id\":\"{}\",\"seq\":{},\"ts\"",
        s.session,
        last + 1
    );
    let path = dir.join("log.jsonl");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&torn);
    std::fs::write(&path, text).unwrap();

    s.daemon.restart().await.unwrap();
    s.client = s.daemon.client().await.unwrap();
    // The cut line may have been an event a client saw: its seq is skipped, said so, and a
    // warning names the cut.
    let now = s.call("session/get", json!({})).await["last_seq"]
        .as_u64()
        .unwrap();
    let after = replay(&mut s.client, &s.session, last, now).await;
    assert_eq!(after[0]["kind"], "events_missing", "{after:?}");
    assert_eq!(after[0]["data"]["first_seq"], last + 1);
    assert!(
        data_of(&after, "warning", "message")
            .iter()
            .any(|w| w.contains("torn last line")),
        "{after:?}"
    );
    s.mock.push_stream(sse::text("again"));
    s.run("more").await;
    let (all, _) = journal(&dir);
    let skipped = after[0]["data"]["last_seq"].as_u64().unwrap();
    let now = all.last().unwrap()["seq"].as_u64().unwrap();
    assert_eq!(
        seqs(&all),
        (1..=last).chain(skipped + 1..=now).collect::<Vec<_>>(),
        "no torn line, and no seq used twice"
    );
    let history = s.call("session/history", json!({})).await;
    assert_eq!(history["total"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_and_rollback_branch_the_history() {
    let mut s = setup().await;
    for answer in ["answer one", "answer two"] {
        s.mock.push_stream(sse::text(answer));
    }
    s.run("question one").await;
    s.run("question two").await;
    let history = s.call("session/history", json!({})).await;
    let first_answer = history["entries"][1]["id"].as_str().unwrap().to_owned();

    // A fork at the first answer continues from there, in a new session.
    let out = s
        .daemon
        .agentctl(&["fork", &s.session, "--at", &first_answer], None)
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fork = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let snapshot = s
        .client
        .call("session/get", json!({"session_id": fork}))
        .await
        .unwrap();
    assert_eq!(snapshot["forked_from"]["session_id"], s.session.as_str());
    assert_eq!(snapshot["turns"], 2);
    s.mock.push_stream(sse::text("fork answer"));
    s.client.subscribe(&fork, Some(0)).await.unwrap();
    s.client
        .call(
            "session/submit",
            json!({"session_id": fork, "text": "fork question"}),
        )
        .await
        .unwrap();
    s.until("processing_end").await;
    let sent = request_text(&s.mock.wait_requests(3).await[2].body);
    assert!(
        sent.contains("answer one") && sent.contains("fork question"),
        "{sent}"
    );
    assert!(!sent.contains("question two"), "{sent}");

    // Rollback moves the original's branch back one input; nothing is deleted.
    let rolled = s.call("session/rollback", json!({"turns": 1})).await;
    assert_eq!(rolled["removed"], 2);
    assert_eq!(rolled["entries"], 2);
    assert_eq!(rolled["leaf"], first_answer.as_str());
    let too_far = s.request("session/rollback", json!({"turns": 5})).await;
    assert_eq!(too_far["error"]["code"], -32602, "{too_far}");
    assert!(
        too_far["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1 user inputs"),
        "{too_far}"
    );
    s.mock.push_stream(sse::text("answer three"));
    s.run("question three").await;
    let sent = request_text(&s.mock.wait_requests(4).await[3].body);
    assert!(
        sent.contains("answer one") && sent.contains("question three"),
        "{sent}"
    );
    assert!(!sent.contains("question two"), "{sent}");
    // A reply that confirms a change comes once everything before it is written.
    s.call("session/set_config", json!({"config": {}})).await;
    let (_, stored) = journal(&session_dir(&s));
    assert_eq!(stored.len(), 6, "the rolled-back entries stay stored");

    // The branch survives a restart.
    restart(&mut s, Signal::SIGTERM).await;
    let history = s.call("session/history", json!({})).await;
    assert_eq!(history["total"], 4);
    assert_eq!(history["entries"][3]["text"], "answer three");
    let missing = s
        .request("session/fork", json!({"entry_id": "no-such-entry"}))
        .await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
}

/// Replies to summary requests with `summary` and to everything else with "ok".
fn summarizing_mock(s: &Setup, summary: &'static str) {
    s.mock.respond_with(move |body| {
        if body["system"]
            .to_string()
            .contains("summaries of coding-agent")
        {
            Reply::Stream(sse::text(summary))
        } else {
            Reply::Stream(sse::text("ok"))
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_compaction_sends_the_summary_and_the_recent_turns() {
    let mut s = setup_with(json!({"config": {"context_window_tokens": 1000}})).await;
    summarizing_mock(&s, "SUMMARY-OF-EARLY-WORK");
    let old = format!("oldest question {}", "x".repeat(600));
    s.run(&old).await;
    s.run(&format!("middle question {}", "y".repeat(800))).await;
    s.run("newest question").await;
    let before = s.call("session/history", json!({})).await["total"].clone();

    s.client.subscribe(&s.session, None).await.unwrap();
    let compacted = s.call("session/compact", json!({})).await;
    assert!(
        compacted["entries_summarized"].as_u64().unwrap() >= 2,
        "{compacted}"
    );
    assert!(
        compacted["tokens_after"].as_u64() < compacted["tokens_before"].as_u64(),
        "{compacted}"
    );
    let events = s.until("compaction").await;
    assert_eq!(
        of_kind(&events, "compaction")[0]["data"]["automatic"],
        false
    );

    s.run("after compaction").await;
    let sent = request_text(&s.mock.requests().last().unwrap().body);
    assert!(sent.contains("SUMMARY-OF-EARLY-WORK"), "{sent}");
    assert!(sent.contains("newest question"), "{sent}");
    assert!(!sent.contains("oldest question"), "{sent}");
    let after = s.call("session/history", json!({})).await["total"].clone();
    assert_eq!(
        after.as_u64().unwrap(),
        before.as_u64().unwrap() + 3,
        "the full history stays: compaction, input, answer added"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automatic_compaction_runs_past_the_threshold_unless_turned_off() {
    let mut s = setup_with(json!({"config": {"context_window_tokens": 1000}})).await;
    summarizing_mock(&s, "AUTO-SUMMARY");
    s.run(&format!("oldest question {}", "x".repeat(4000)))
        .await;
    let events = s.run("next question").await;
    let compaction = of_kind(&events, "compaction");
    assert_eq!(compaction.len(), 1, "{events:?}");
    assert_eq!(compaction[0]["data"]["automatic"], true);
    let sent = request_text(&s.mock.requests().last().unwrap().body);
    assert!(
        sent.contains("AUTO-SUMMARY") && sent.contains("next question"),
        "{sent}"
    );
    assert!(!sent.contains("oldest question"), "{sent}");

    let mut off =
        setup_with(json!({"config": {"context_window_tokens": 1000, "auto_compact_percent": 0}}))
            .await;
    summarizing_mock(&off, "AUTO-SUMMARY");
    off.run(&format!("oldest question {}", "x".repeat(4000)))
        .await;
    let events = off.run("next question").await;
    assert!(of_kind(&events, "compaction").is_empty());
    let sent = request_text(&off.mock.requests().last().unwrap().body);
    assert!(sent.contains("oldest question"), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rm_and_gc_delete_stored_sessions() {
    let mut s = setup().await;
    let dir = session_dir(&s);
    assert!(dir.join("session.json").exists());
    let keep = s
        .daemon
        .create_session(&mut s.client, s.workdir.path(), json!({}))
        .await
        .unwrap();
    let closed = s
        .daemon
        .create_session(&mut s.client, s.workdir.path(), json!({}))
        .await
        .unwrap();
    s.client
        .call("session/close", json!({"session_id": closed}))
        .await
        .unwrap();

    let out = s.daemon.agentctl(&["rm", &s.session], None).await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dir.exists());
    let gone = s.request("session/get", json!({})).await;
    assert_eq!(gone["error"]["data"]["kind"], "session_not_found");

    let out = s
        .daemon
        .agentctl(&["gc", "--older-than", "1h"], None)
        .await
        .unwrap();
    assert!(out.status.success());
    assert!(s.daemon.sessions_dir().join(&closed).exists(), "too recent");
    let out = s
        .daemon
        .agentctl(&["gc", "--older-than", "0s"], None)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains(&closed));
    assert!(!s.daemon.sessions_dir().join(&closed).exists());
    assert!(
        s.daemon.sessions_dir().join(&keep).exists(),
        "open sessions stay"
    );

    restart(&mut s, Signal::SIGTERM).await;
    let list = s.client.call("session/list", json!({})).await.unwrap();
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_state_directory_is_a_clear_error() {
    let mut s = setup().await;
    // The sessions directory cannot be used (a file is in its way; as root, permissions would
    // not stop the daemon).
    let sessions = s.daemon.sessions_dir();
    std::fs::rename(&sessions, sessions.with_extension("moved")).unwrap();
    std::fs::write(&sessions, "not a directory").unwrap();
    let workdir = s.workdir.path().display().to_string();
    let failed = s
        .client
        .request("session/create", json!({"cwd": workdir}))
        .await
        .unwrap();
    assert_eq!(failed["error"]["code"], -32030, "{failed}");
    assert_eq!(failed["error"]["data"]["kind"], "storage_failed");
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sessions"),
        "{failed}"
    );
    s.client.call("daemon/info", json!({})).await.unwrap();
}

/// `/dev/full` bind-mounted over a file: every write to it fails with ENOSPC, as on a full
/// disk (the tests run as root, so permissions would not stop the daemon, and the daemon
/// refuses to write through a symlink). Unmounted on drop.
struct FullFile(PathBuf);

impl FullFile {
    fn at(path: &std::path::Path) -> Self {
        std::fs::write(path, "").unwrap();
        nix::mount::mount(
            Some("/dev/full"),
            path,
            None::<&str>,
            nix::mount::MsFlags::MS_BIND,
            None::<&str>,
        )
        .expect("bind-mounting /dev/full needs root (the tests run as root in CI)");
        Self(path.to_owned())
    }
}

impl Drop for FullFile {
    fn drop(&mut self) {
        let _ = nix::mount::umount(&self.0);
        let _ = std::fs::remove_file(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_stops_the_work_and_loses_nothing_once_it_recovers() {
    let mut s = setup().await;
    s.mock.push_stream(sse::text("stored answer"));
    s.run("before").await;
    let other = s
        .daemon
        .create_session(&mut s.client, s.workdir.path(), json!({}))
        .await
        .unwrap();

    let dir = session_dir(&s);
    let journal_path = dir.join("log.jsonl");
    std::fs::rename(&journal_path, journal_path.with_extension("saved")).unwrap();
    let full = FullFile::at(&journal_path);
    let events = s.run("during").await;
    let errors = data_of(&events, "error", "message");
    assert!(
        errors.iter().any(|e| e.contains("cannot save the session")),
        "{errors:?}"
    );
    assert_eq!(
        of_kind(&events, "processing_end")[0]["data"]["reason"],
        "error"
    );
    let refused = s.request("session/submit", json!({"text": "again"})).await;
    assert_eq!(
        refused["error"]["data"]["kind"], "storage_failed",
        "{refused}"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("No space left"),
        "{refused}"
    );
    // Everyone else is served.
    s.mock.push_stream(sse::text("other answer"));
    s.client.subscribe(&other, Some(0)).await.unwrap();
    s.client
        .call("session/submit", json!({"session_id": other, "text": "hi"}))
        .await
        .unwrap();
    s.client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();

    drop(full);
    std::fs::rename(journal_path.with_extension("saved"), &journal_path).unwrap();
    s.mock.push_stream(sse::text("after answer"));
    s.run("after").await;
    let last = s.call("session/get", json!({})).await["last_seq"]
        .as_u64()
        .unwrap();
    // A graceful stop writes everything out.
    s.daemon.stop_with(Signal::SIGTERM).await.unwrap();
    let (stored, history) = journal(&dir);
    assert_eq!(seqs(&stored), (1..=last).collect::<Vec<_>>());
    let texts: Vec<String> = history
        .iter()
        .filter_map(|e| e["text"].as_str().map(str::to_owned))
        .collect();
    assert!(texts.contains(&"during".to_owned()), "{texts:?}");
    assert!(texts.contains(&"after answer".to_owned()), "{texts:?}");
}

/// Regression (issue 12): a session whose `session.json` could not be read vanished from
/// `session/list` and `session/get` (only a log line said why). Now it is listed as damaged
/// with the reason, every call on it answers `session_damaged` naming the reason, nothing
/// writes to it, every other session loads and works, and `agentctl rm` removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_session_records_are_listed_with_the_reason_while_the_others_load() {
    let mut s = setup().await;
    s.mock.push_stream(sse::text("kept answer"));
    s.run("kept question").await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(
            s.daemon
                .create_session(&mut s.client, s.workdir.path(), json!({}))
                .await
                .unwrap(),
        );
    }
    s.daemon.stop_with(Signal::SIGTERM).await.unwrap();

    let sessions = s.daemon.sessions_dir();
    let record = |id: &str| sessions.join(id).join("session.json");
    let good = std::fs::read(record(&s.session)).unwrap();
    let mut wrong_types: Value = serde_json::from_slice(&good).unwrap();
    wrong_types["state"] = json!(42);
    wrong_types["cwd"] = json!(["not", "a", "path"]);
    let damage: [(&str, Option<Vec<u8>>); 5] = [
        ("invalid", Some(b"{ this is not json".to_vec())),
        ("invalid", Some(good[..good.len() / 2].to_vec())),
        ("invalid", Some(wrong_types.to_string().into_bytes())),
        // What cannot be read at all (the tests run as root, whom permissions do not stop).
        ("unreadable", None),
        // A directory copied under another name.
        ("wrong_id", Some(good.clone())),
    ];
    for (id, (_, bytes)) in ids.iter().zip(&damage) {
        match bytes {
            Some(bytes) => std::fs::write(record(id), bytes).unwrap(),
            None => {
                std::fs::remove_file(record(id)).unwrap();
                std::fs::create_dir(record(id)).unwrap();
            }
        }
    }
    s.daemon.restart().await.unwrap();
    s.client = s.daemon.client().await.unwrap();

    let list = s.client.call("session/list", json!({})).await.unwrap();
    let listed: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [s.session.as_str()], "{list}");
    let damaged = list["damaged"].as_array().unwrap();
    assert_eq!(damaged.len(), ids.len(), "{list}");
    for (id, (kind, _)) in ids.iter().zip(&damage) {
        let entry = damaged
            .iter()
            .find(|d| d["session_id"] == id.as_str())
            .unwrap_or_else(|| panic!("{id} is not listed as damaged: {list}"));
        assert_eq!(entry["damage"], *kind, "{entry}");
        assert_eq!(entry["path"], record(id).display().to_string());
        let reason = entry["reason"].as_str().unwrap();
        assert!(!reason.is_empty(), "{entry}");

        // Every call on it says what is wrong, with the same details.
        for (method, params) in [
            ("session/get", json!({"session_id": id})),
            ("session/submit", json!({"session_id": id, "text": "x"})),
            (
                "session/subscribe",
                json!({"session_id": id, "since_seq": 0}),
            ),
            ("session/fork", json!({"session_id": id})),
        ] {
            let answer = s.client.request(method, params).await.unwrap();
            let error = &answer["error"];
            assert_eq!(error["code"], -32014, "{method}: {answer}");
            assert_eq!(error["data"]["kind"], "session_damaged");
            assert_eq!(error["data"]["damaged"], *entry);
            let message = error["message"].as_str().unwrap();
            assert!(
                message.contains(reason) && message.contains("session.json"),
                "{message}"
            );
        }
    }
    let reasons: Vec<&str> = damaged
        .iter()
        .map(|d| d["reason"].as_str().unwrap())
        .collect();
    assert!(
        reasons.iter().any(|r| r.contains("EOF")),
        "the truncated file says so: {reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("invalid type")),
        "the wrong types are named: {reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains(&format!("holds session {}", s.session))),
        "{reasons:?}"
    );
    // A filter selects by what a damaged session does not have.
    let idle = s
        .client
        .call("session/list", json!({"state": "idle"}))
        .await
        .unwrap();
    assert!(idle.get("damaged").is_none(), "{idle}");

    // The intact session loads and works.
    let snapshot = s.call("session/get", json!({})).await;
    assert_eq!(snapshot["state"], "idle");
    s.mock.push_stream(sse::text("still working"));
    let events = s.run("after the restart").await;
    assert_eq!(
        data_of(&events, "assistant_text_delta", "delta").concat(),
        "still working"
    );
    // A new session never takes a damaged one's place, and nothing touched the damaged files.
    let fresh = s
        .daemon
        .create_session(&mut s.client, s.workdir.path(), json!({}))
        .await
        .unwrap();
    assert!(!ids.contains(&fresh));
    for (id, (_, bytes)) in ids.iter().zip(&damage) {
        if let Some(bytes) = bytes {
            assert_eq!(
                &std::fs::read(record(id)).unwrap(),
                bytes,
                "{id} was rewritten"
            );
        }
    }

    // agentctl shows them and removes them.
    let ls = s.daemon.agentctl(&["ls"], None).await.unwrap();
    let ls_text = String::from_utf8_lossy(&ls.stdout);
    assert!(
        ls.status.success(),
        "{}",
        String::from_utf8_lossy(&ls.stderr)
    );
    for (id, entry) in ids.iter().map(|id| {
        (
            id,
            damaged
                .iter()
                .find(|d| d["session_id"] == id.as_str())
                .unwrap(),
        )
    }) {
        let line = ls_text
            .lines()
            .find(|l| l.starts_with(id.as_str()))
            .unwrap_or_else(|| panic!("{id} missing from agentctl ls:\n{ls_text}"));
        assert!(
            line.contains("damaged") && line.contains(entry["reason"].as_str().unwrap()),
            "{line}"
        );
    }
    let only = s
        .daemon
        .agentctl(&["ls", "--state", "damaged"], None)
        .await
        .unwrap();
    let only_text = String::from_utf8_lossy(&only.stdout);
    assert_eq!(only_text.lines().count(), ids.len(), "{only_text}");
    let show = s
        .daemon
        .agentctl(&["show", &ids[0][..8]], None)
        .await
        .unwrap();
    let show_err = String::from_utf8_lossy(&show.stderr);
    assert_eq!(show.status.code(), Some(1), "{show_err}");
    let first = damaged
        .iter()
        .find(|d| d["session_id"] == ids[0].as_str())
        .unwrap();
    assert!(
        show_err.contains(&format!("session {} is damaged", ids[0]))
            && show_err.contains(first["reason"].as_str().unwrap())
            && show_err.contains("agentctl rm")
            && show_err.contains("session_damaged"),
        "{show_err}"
    );
    let rm = s
        .daemon
        .agentctl(&["rm", &ids[0][..8]], None)
        .await
        .unwrap();
    assert!(
        rm.status.success(),
        "{}",
        String::from_utf8_lossy(&rm.stderr)
    );
    assert!(!sessions.join(&ids[0]).exists());
    let gone = s
        .client
        .request("session/get", json!({"session_id": ids[0]}))
        .await
        .unwrap();
    assert_eq!(gone["error"]["data"]["kind"], "session_not_found", "{gone}");
    s.client
        .call("session/delete", json!({"session_id": ids[3]}))
        .await
        .unwrap();
    assert!(!sessions.join(&ids[3]).exists());

    // The others stay visible across another restart.
    s.daemon.stop_with(Signal::SIGTERM).await.unwrap();
    s.daemon.restart().await.unwrap();
    s.client = s.daemon.client().await.unwrap();
    let list = s.client.call("session/list", json!({})).await.unwrap();
    let mut still: Vec<&str> = list["damaged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["session_id"].as_str().unwrap())
        .collect();
    still.sort_unstable();
    let mut expected = vec![ids[1].as_str(), ids[2].as_str(), ids[4].as_str()];
    expected.sort_unstable();
    assert_eq!(still, expected, "{list}");
    assert_eq!(list["sessions"].as_array().unwrap().len(), 2, "{list}");
}

/// Regression (issue 12): session files (tool output, file contents) were written 0644 in
/// 0755 directories, and a `.session.json.tmp` symlink planted in a session's directory made
/// the next record write overwrite its target. Under umask 000 every directory is 0700 and
/// every file 0600, and a planted link is replaced, never written through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_files_are_private_under_any_umask_and_links_are_not_followed() {
    let mock = agentd_tests::mock::MockProvider::start().await.unwrap();
    let daemon = agentd_tests::TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .wrap("sh", ["-c", "umask 000; exec \"$0\""])
        .start()
        .await
        .unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let mut client = daemon.client().await.unwrap();
    let session = daemon
        .create_session(&mut client, workdir.path(), json!({}))
        .await
        .unwrap();
    mock.push_stream(sse::shell("t_private", "echo private"));
    mock.push_stream(sse::text("done"));
    client.run(&session, "write something").await.unwrap();

    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| {
        std::fs::symlink_metadata(p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .permissions()
            .mode()
            & 0o777
    };
    let sessions = daemon.sessions_dir();
    let state = sessions.parent().unwrap().to_owned();
    let dir = sessions.join(&session);
    for d in [&state, &sessions, &dir] {
        assert_eq!(mode(d), 0o700, "{}", d.display());
    }
    for f in [
        dir.join("session.json"),
        dir.join("log.jsonl"),
        state.join("lock"),
        state.join("groups.json"),
    ] {
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }

    // Once a change the record alone holds is stored, no write of the record is under way.
    client
        .call(
            "session/set_config",
            json!({"session_id": session, "config": {"max_turns": 6}}),
        )
        .await
        .unwrap();
    // A link where the record's temporary file goes, pointing at a file of the user's.
    let target = workdir.path().join("precious.txt");
    std::fs::write(&target, "precious").unwrap();
    std::os::unix::fs::symlink(&target, dir.join(".session.json.tmp")).unwrap();
    client
        .call(
            "session/set_config",
            json!({"session_id": session, "config": {"max_turns": 7}}),
        )
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
    let record: Value =
        serde_json::from_slice(&std::fs::read(dir.join("session.json")).unwrap()).unwrap();
    assert_eq!(record["config"]["max_turns"], 7, "{record}");
    assert_eq!(mode(&dir.join("session.json")), 0o600);
}

/// Regression (issue 12): an event line that could not be read was skipped on load with only
/// a log line, leaving a gap in the seqs that no event explained. The restarted session says
/// which line was skipped and which seqs are missing, in `warning` events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_event_line_is_reported_in_a_warning_event() {
    let mut s = setup().await;
    s.mock.push_stream(sse::text("first"));
    s.run("one").await;
    s.mock.push_stream(sse::text("second"));
    s.run("two").await;
    s.daemon.stop_with(Signal::SIGTERM).await.unwrap();
    let path = session_dir(&s).join("log.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    // An event in the middle (not the last line, which would be a torn tail) turns to garbage.
    let (victim, _) = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with("{\"entry\""))
        .nth(4)
        .unwrap();
    let lost: Value = serde_json::from_str(text.lines().nth(victim).unwrap()).unwrap();
    let lost_seq = lost["seq"].as_u64().unwrap();
    let damaged: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i == victim {
                "{\"session_id\": garbage".to_owned()
            } else {
                l.to_owned()
            }
        })
        .collect();
    std::fs::write(&path, damaged.join("\n") + "\n").unwrap();

    s.daemon.restart().await.unwrap();
    s.client = s.daemon.client().await.unwrap();
    let now = s.call("session/get", json!({})).await["last_seq"]
        .as_u64()
        .unwrap();
    let all = replay(&mut s.client, &s.session, 0, now).await;
    assert!(
        all.iter().all(|e| e["seq"] != lost_seq),
        "the lost event is not replayed"
    );
    let warnings = data_of(&all, "warning", "message");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(&format!("line {} skipped", victim + 1))),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(&format!("events {lost_seq}..{lost_seq} are missing"))),
        "{warnings:?}"
    );
}
