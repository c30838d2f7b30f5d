//! docs/protocol.md's "Conversation" section against the real daemon. Every exchange it shows
//! (`proto/conversation/transcript.json`, rendered by `agentd schema --markdown`) is replayed
//! here with a mock provider, and what the daemon answers must be what the document shows,
//! once ids, timestamps, durations and the working directory are normalised. The section's
//! client (`proto/conversation/client.py`, copied to `examples/minimal_client.py`) runs too.
//!
//! After a deliberate protocol change, rewrite the transcript from a run:
//! `AGENTD_RECORD_CONVERSATION=1 cargo test -p agentd-tests --test e2e conversation::`, then
//! `agentd schema --markdown > docs/protocol.md`.

use agentd_tests::mock::{Chunk, Gate, MockProvider};
use agentd_tests::{RawClient, TestDaemon, sse};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const RECORD: &str = "AGENTD_RECORD_CONVERSATION";
/// The working directory the document shows.
const DOC_CWD: &str = "/home/me/project";

fn transcript_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto/conversation/transcript.json")
}

/// Replaces what changes from run to run with stable stand-ins: each distinct id becomes
/// `<session-1>`, `<input-2>`..., in order of first appearance; times `<ts>`; durations
/// `<ms>` (in a command's output too); the test's directory the document's.
struct Normaliser {
    cwd: String,
    /// Subscription ids, which arrive as a bare `result`.
    subscriptions: Vec<String>,
    ids: BTreeMap<String, String>,
    counts: BTreeMap<&'static str, usize>,
}

/// `text` with each `duration: <digits>ms` (a command result's footer) as `duration: <ms>`.
fn without_durations(text: &str) -> String {
    const MARK: &str = "duration: ";
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        let (before, after) = rest.split_at(at + MARK.len());
        out.push_str(before);
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after[digits..].starts_with("ms") {
            out.push_str("<ms>");
            rest = &after[digits..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Keys whose string values are ids, and the stand-in's stem.
const ID_KEYS: [(&str, &str); 7] = [
    ("session_id", "session"),
    ("subscription", "subscription"),
    ("input_id", "input"),
    ("entry_id", "entry"),
    ("leaf", "entry"),
    ("parent_id", "entry"),
    ("client_input_id", "client-input"),
];
const TIME_KEYS: [&str; 3] = ["ts", "created", "updated"];
const DURATION_KEYS: [&str; 3] = ["duration_ms", "uptime_ms", "elapsed_ms"];

impl Normaliser {
    fn id(&mut self, stem: &'static str, value: &str) -> String {
        if let Some(known) = self.ids.get(value) {
            return known.clone();
        }
        let n = self.counts.entry(stem).or_default();
        *n += 1;
        let name = format!("<{stem}-{n}>");
        self.ids.insert(value.to_owned(), name.clone());
        name
    }

    fn value(&mut self, key: Option<&str>, v: &Value) -> Value {
        match v {
            Value::Object(map) => {
                let mut out = Map::new();
                for (k, v) in map {
                    out.insert(k.clone(), self.value(Some(k), v));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(|i| self.value(key, i)).collect()),
            Value::String(s) => {
                if self.subscriptions.contains(s) {
                    return json!(self.id("subscription", s));
                }
                if let Some((_, stem)) = ID_KEYS.iter().find(|(k, _)| Some(*k) == key) {
                    return json!(self.id(stem, s));
                }
                if TIME_KEYS.iter().any(|k| Some(*k) == key) {
                    return json!("<ts>");
                }
                json!(without_durations(&s.replace(&self.cwd, DOC_CWD)))
            }
            Value::Number(_) if DURATION_KEYS.iter().any(|k| Some(*k) == key) => json!("<ms>"),
            other => other.clone(),
        }
    }
}

/// One exchange as the document shows it.
struct Step {
    title: &'static str,
    messages: Vec<Value>,
}

/// Drives one connection, recording what it sends and receives, step by step.
struct Recorder {
    client: RawClient,
    next_id: u64,
    steps: Vec<Step>,
    /// The subscription ids the daemon gave.
    subscriptions: Vec<String>,
}

/// A message a step waits for.
type Wanted = Box<dyn Fn(&Value) -> bool>;

fn response(id: u64) -> Wanted {
    Box::new(move |m| m["id"] == id)
}

fn event(kind: &'static str) -> Wanted {
    Box::new(move |m| m["params"]["result"]["kind"] == kind)
}

/// The `state_changed` to `idle` that follows every cycle's `processing_end`.
fn idle_again() -> Wanted {
    Box::new(|m| {
        let item = &m["params"]["result"];
        item["kind"] == "state_changed" && item["data"]["state"] == "idle"
    })
}

fn stream_end() -> Wanted {
    Box::new(|m| m["params"]["result"]["type"] == "end")
}

impl Recorder {
    fn step(&mut self, title: &'static str) {
        self.steps.push(Step {
            title,
            messages: Vec::new(),
        });
    }

    fn record(&mut self, message: Value) {
        self.steps
            .last_mut()
            .expect("a step is open")
            .messages
            .push(message);
    }

    async fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.client
            .send_raw(format!("{request}\n").as_bytes())
            .await
            .unwrap();
        self.record(json!({ "send": request }));
        id
    }

    /// Reads messages until each of `wanted` has matched one; returns them all.
    async fn receive(&mut self, wanted: Vec<Wanted>) -> Vec<Value> {
        let mut open: Vec<Wanted> = wanted;
        let mut got = Vec::new();
        while !open.is_empty() {
            let message = tokio::time::timeout(agentd_tests::WAIT, self.client.read_message())
                .await
                .expect("the daemon answers")
                .unwrap();
            open.retain(|w| !w(&message));
            self.record(json!({ "receive": message.clone() }));
            got.push(message);
        }
        got
    }
}

/// A step as compared: responses by id (a response may come before or after the
/// notifications its request caused), notifications in the order they came.
fn canonical(messages: &[Value]) -> Value {
    let mut sent = Vec::new();
    let mut responses = BTreeMap::new();
    let mut notifications = Vec::new();
    for m in messages {
        if let Some(s) = m.get("send") {
            sent.push(s.clone());
        } else if m["receive"].get("method").is_some() {
            notifications.push(m["receive"].clone());
        } else {
            responses.insert(m["receive"]["id"].to_string(), m["receive"].clone());
        }
    }
    json!({"sent": sent, "responses": responses, "notifications": notifications})
}

/// Runs every exchange of the document against a real daemon; returns the steps, normalised.
async fn converse() -> Vec<(String, Vec<Value>)> {
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::start(&mock.url).await.unwrap();
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().canonicalize().unwrap().display().to_string();
    let mut r = Recorder {
        client: daemon.client().await.unwrap(),
        next_id: 0,
        steps: Vec::new(),
        subscriptions: Vec::new(),
    };

    r.step("Create a session");
    let id = r
        .send("session/create", json!({"cwd": cwd, "title": "demo"}))
        .await;
    let created = r.receive(vec![response(id)]).await;
    let session = created[0]["result"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let last_seq = created[0]["result"]["last_seq"].as_u64().unwrap();

    r.step("Subscribe to its events");
    let id = r
        .send(
            "session/subscribe",
            json!({"session_id": session, "since_seq": 0}),
        )
        .await;
    let mut wanted = vec![response(id)];
    // Replayed: every event up to the snapshot's `last_seq`.
    for _ in 0..last_seq {
        wanted.push(Box::new(|m: &Value| m.get("method").is_some()));
    }
    let got = r.receive(wanted).await;
    assert_eq!(
        got[0]["id"], id,
        "the subscribe response comes before its replay"
    );
    let subscription = got[0]["result"].as_str().unwrap().to_owned();
    r.subscriptions.push(subscription.clone());

    r.step("Submit input: one tool round, then the answer");
    mock.push_stream(sse::tools(
        "Let me look.",
        &[("toolu_1", "shell", json!({"command": "echo hi"}))],
    ));
    mock.push_stream(sse::text("It printed hi."));
    let id = r
        .send(
            "session/submit",
            json!({"session_id": session, "text": "Run echo hi"}),
        )
        .await;
    r.receive(vec![response(id), event("processing_end"), idle_again()])
        .await;

    r.step("Steer while it works");
    let gate = Gate::new();
    let mut held = vec![sse::message_start()];
    held.extend(sse::text_block(0, "Counting."));
    held.push(Chunk::Wait(gate.clone()));
    held.extend(sse::message_end("end_turn"));
    mock.push_stream(held);
    mock.push_stream(sse::text("3 of them are Rust files."));
    let id = r
        .send(
            "session/submit",
            json!({"session_id": session, "text": "How many files are here?"}),
        )
        .await;
    r.receive(vec![response(id), event("assistant_text_delta")])
        .await;
    let id = r
        .send(
            "session/steer",
            json!({"session_id": session, "text": "Only count Rust files"}),
        )
        .await;
    r.receive(vec![response(id), event("queue_changed")]).await;
    gate.open();
    r.receive(vec![event("processing_end"), idle_again()]).await;

    r.step("Abort");
    let mut stuck = vec![sse::message_start()];
    stuck.extend(sse::text_block(0, "Once upon"));
    stuck.push(Chunk::Wait(Gate::new()));
    mock.push_stream(stuck);
    let id = r
        .send(
            "session/submit",
            json!({"session_id": session, "text": "Write a long story"}),
        )
        .await;
    r.receive(vec![response(id), event("assistant_text_delta")])
        .await;
    let id = r
        .send("session/abort", json!({"session_id": session}))
        .await;
    let got = r.receive(vec![response(id)]).await;
    assert!(
        got.iter()
            .any(|m| m["params"]["result"]["kind"] == "processing_end"),
        "an abort's response follows the processing_end it caused: {got:?}"
    );

    r.step("Errors");
    let id = r
        .send(
            "session/submit",
            json!({"session_id": "no-such-session", "text": "hi"}),
        )
        .await;
    r.receive(vec![response(id)]).await;
    let id = r
        .send("session/create", json!({"cwd": "relative/dir"}))
        .await;
    r.receive(vec![response(id)]).await;
    let id = r
        .send("session/submit", json!({"session_id": session}))
        .await;
    r.receive(vec![response(id)]).await;

    r.step("Unsubscribe");
    let id = r
        .send("session/unsubscribe", json!({"subscription": subscription}))
        .await;
    r.receive(vec![response(id), stream_end()]).await;

    r.step("Daemon-wide events");
    let id = r.send("daemon/subscribe", json!({})).await;
    let got = r.receive(vec![response(id)]).await;
    r.subscriptions
        .push(got[0]["result"].as_str().unwrap().to_owned());
    let id = r
        .send("session/close", json!({"session_id": session}))
        .await;
    r.receive(vec![
        response(id),
        Box::new(|m: &Value| m["params"]["result"]["state"] == "closed"),
    ])
    .await;

    let mut norm = Normaliser {
        cwd,
        subscriptions: r.subscriptions,
        // Not an id the daemon made: the document shows it as sent.
        ids: BTreeMap::from([("no-such-session".to_owned(), "no-such-session".to_owned())]),
        counts: BTreeMap::new(),
    };
    r.steps
        .into_iter()
        .map(|s| {
            let messages = s.messages.iter().map(|m| norm.value(None, m)).collect();
            (s.title.to_owned(), messages)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_exchanges_are_what_the_daemon_does() {
    let steps = converse().await;
    let path = transcript_path();
    let committed: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let committed = committed.as_array().unwrap();
    if std::env::var(RECORD).is_ok_and(|v| v == "1") {
        // Keep each step's prose; take its messages from this run.
        let prose: BTreeMap<&str, &Value> = committed
            .iter()
            .map(|s| (s["title"].as_str().unwrap_or_default(), &s["text"]))
            .collect();
        let out: Vec<Value> = steps
            .iter()
            .map(|(title, messages)| {
                json!({
                    "title": title,
                    "text": prose.get(title.as_str()).cloned().cloned().unwrap_or(json!("")),
                    "messages": messages,
                })
            })
            .collect();
        std::fs::write(&path, serde_json::to_string_pretty(&out).unwrap() + "\n").unwrap();
        return;
    }
    let regenerate = format!(
        "the daemon no longer does what docs/protocol.md shows; if the change is meant, \
         rewrite the transcript with `{RECORD}=1 cargo test -p agentd-tests --test e2e \
         conversation::` and regenerate the docs with `agentd schema --markdown > docs/protocol.md`"
    );
    assert_eq!(
        committed
            .iter()
            .map(|s| s["title"].clone())
            .collect::<Vec<_>>(),
        steps.iter().map(|(t, _)| json!(t)).collect::<Vec<_>>(),
        "{regenerate}"
    );
    for ((title, messages), doc) in steps.iter().zip(committed) {
        assert!(
            !doc["text"].as_str().unwrap_or_default().is_empty(),
            "step {title:?} has no prose"
        );
        let documented: Vec<Value> = doc["messages"].as_array().unwrap().clone();
        assert_eq!(
            canonical(messages),
            canonical(&documented),
            "step {title:?}: {regenerate}"
        );
    }
}

/// The client the section prints, run against a real daemon: the same file as
/// `examples/minimal_client.py`, and it completes a task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_client_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let source = std::fs::read_to_string(root.join("proto/conversation/client.py")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/minimal_client.py")).unwrap();
    assert!(
        source == example,
        "examples/minimal_client.py differs from proto/conversation/client.py: copy it"
    );
    let doc = std::fs::read_to_string(root.join("docs/protocol.md")).unwrap();
    assert!(
        doc.contains(&format!("```python\n{source}```")),
        "docs/protocol.md does not show the client: regenerate it"
    );
    assert!(source.lines().count() <= 40, "the short client grew");
    let Some(python) = agentd_tests::program("python3") else {
        return;
    };
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::start(&mock.url).await.unwrap();
    mock.push_stream(sse::tools(
        "",
        &[("toolu_1", "shell", json!({"command": "echo from-the-tool"}))],
    ));
    mock.push_stream(sse::text("All done."));
    let work = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::from(daemon.program(python))
        .arg(root.join("examples/minimal_client.py"))
        .arg("Run the tool")
        .current_dir(work.path())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim_end(), "All done.", "{stderr}");
    assert!(stderr.contains("[shell]"), "{stderr}");
}
