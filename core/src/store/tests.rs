//! The store's format, loading and writer, on real files.

use super::*;
use agentd_proto::{Event, EventBody, HistoryEntry, Turn};

fn record(id: &str) -> SessionRecord {
    SessionRecord {
        format_version: FORMAT_VERSION,
        id: SessionId::from(id),
        title: None,
        cwd: "/".into(),
        profile: "anthropic".into(),
        instructions: None,
        read_only: false,
        environment: agentd_proto::Environment::Local,
        worktree: None,
        created: "2026-01-01T00:00:00.000Z".into(),
        updated: "2026-01-01T00:00:00.000Z".into(),
        state: SessionState::Idle,
        config: crate::config::default_session_config("anthropic", "m"),
        usage: Usage::default(),
        leaf: None,
        history_len: 0,
        queue: QueueContents::default(),
        forked_from: None,
        parent: None,
        open: false,
        redo: None,
    }
}

fn event(seq: u64) -> Event {
    Event {
        session_id: SessionId::from("a"),
        seq,
        ts: "2026-01-01T00:00:00.000Z".into(),
        body: EventBody::warning(seq.to_string()),
    }
}

fn entry(id: &str) -> HistoryEntry {
    HistoryEntry {
        id: EntryId(id.into()),
        parent_id: None,
        ts: "2026-01-01T00:00:00.000Z".into(),
        turn: Turn::System { text: id.into() },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_journals_events_and_entries_and_replays_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert!(store.load().unwrap().records.is_empty());
    let files = store.create(&SessionId::from("a")).unwrap();
    let loaded = files.load().unwrap();
    let writer = Writer::start(store.files(&SessionId::from("a")), loaded.reader, 0);
    for seq in 1..=3000 {
        let line = String::from_utf8(files::event_line(&event(seq))).unwrap();
        writer.event(seq, line.into());
        if seq % 1000 == 0 {
            writer.entry(&entry(&format!("e{seq}")), true);
        }
    }
    let mut r = record("a");
    r.history_len = 3;
    writer.record(r.to_json());
    writer.sync().await.unwrap();
    assert_eq!(writer.written_seq(), 3000);
    let seqs: Vec<u64> = writer
        .reader()
        .read(2500, 2502)
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [2501, 2502]);
    drop(writer);

    fs::create_dir(store.dir().join("half-created")).unwrap();
    fs::create_dir(store.dir().join("broken")).unwrap();
    fs::write(store.dir().join("broken").join(RECORD), "{").unwrap();
    let listed = store.load().unwrap();
    assert_eq!(listed.records, [r]);
    assert_eq!(listed.damaged.len(), 1, "{:?}", listed.damaged);
    assert_eq!(listed.damaged[0].session_id, SessionId::from("broken"));
    assert_eq!(listed.damaged[0].damage, DamageKind::Invalid);

    let loaded = store.files(&SessionId::from("a")).load().unwrap();
    assert_eq!(loaded.last_seq, 3000);
    assert_eq!(
        loaded.entries,
        [entry("e1000"), entry("e2000"), entry("e3000")]
    );
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.reader.read(0, 3).unwrap().len(), 3);
    store.delete(&SessionId::from("a")).unwrap();
    assert!(store.load().unwrap().records.is_empty());
}

#[test]
fn loading_reports_torn_tails_missing_seqs_and_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::unlocked(dir.path());
    let files = store.create(&SessionId::from("a")).unwrap();
    let line = |seq| String::from_utf8(files::event_line(&event(seq))).unwrap();
    let text = format!(
        "{}\n{}\nnot json\n{}\n{}",
        line(1),
        line(2),
        line(5),
        &line(6)[..10]
    );
    fs::write(store.dir().join("a/log.jsonl"), text).unwrap();
    let loaded = files.load().unwrap();
    assert!(loaded.repaired);
    assert_eq!(loaded.last_seq, 5);
    assert_eq!(loaded.warnings.len(), 3, "{:?}", loaded.warnings);
    assert!(loaded.warnings[2].starts_with("events 3..4 are missing"));
}

#[test]
fn a_version_1_session_is_converted() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::unlocked(dir.path());
    let files = store.create(&SessionId::from("a")).unwrap();
    files.write_record(&record("a").to_json()).unwrap();
    let session = store.dir().join("a");
    let v1_record = fs::read_to_string(session.join(RECORD))
        .unwrap()
        .replace("\"format_version\": 2,", "");
    fs::write(session.join(RECORD), v1_record).unwrap();
    let lines = |items: Vec<String>| items.join("\n") + "\n";
    fs::write(
        session.join("history.jsonl"),
        lines(vec![
            serde_json::to_string(&entry("e1")).unwrap(),
            serde_json::to_string(&entry("e2")).unwrap(),
        ]),
    )
    .unwrap();
    fs::write(
        session.join("events.jsonl"),
        lines(
            (1..=3)
                .map(|s| serde_json::to_string(&event(s)).unwrap())
                .collect(),
        ),
    )
    .unwrap();
    assert_eq!(store.load().unwrap().records[0].format_version, 1);
    let loaded = files.load().unwrap();
    assert_eq!(loaded.entries, [entry("e1"), entry("e2")]);
    assert_eq!(loaded.last_seq, 3);
    assert!(!session.join("history.jsonl").exists());
    assert!(!session.join("events.jsonl").exists());
    // Converting again finds nothing to do and loses nothing.
    assert_eq!(files.load().unwrap().entries.len(), 2);
}

#[test]
fn a_record_from_a_newer_daemon_is_damaged_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::unlocked(dir.path());
    let mut r = record("a");
    r.format_version = FORMAT_VERSION + 1;
    store
        .create(&r.id)
        .unwrap()
        .write_record(&r.to_json())
        .unwrap();
    let loaded = store.load().unwrap();
    assert!(loaded.records.is_empty());
    assert_eq!(loaded.damaged.len(), 1);
    assert_eq!(loaded.damaged[0].damage, DamageKind::NewerFormat);
    assert!(
        loaded.damaged[0].reason.contains("newer agentd"),
        "{:?}",
        loaded.damaged
    );
}

#[test]
fn one_daemon_per_state_directory() {
    let dir = tempfile::tempdir().unwrap();
    let first = Store::open(dir.path()).unwrap();
    let second = Store::open(dir.path()).unwrap_err();
    assert!(second.to_string().contains("another agentd"), "{second}");
    drop(first);
    Store::open(dir.path()).unwrap();
}

#[test]
fn state_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let store = Store::open(&state).unwrap();
    let files = store.create(&SessionId::from("a")).unwrap();
    files.write_record(&record("a").to_json()).unwrap();
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(store.dir()), 0o700);
    assert_eq!(mode(&store.dir().join("a")), 0o700);
    assert_eq!(mode(&store.dir().join("a").join(RECORD)), 0o600);
}

/// The serialized form of what the store writes, pinned: if this fails, a protocol or record
/// change altered the on-disk format. If files written before the change no longer read the
/// same (a renamed or retyped field), bump `FORMAT_VERSION` and add a conversion from the old
/// version; only an addition that old files still parse as (an optional field) may simply
/// update `testdata/format-v2.txt` (run with `AGENTD_BLESS=1`).
#[test]
fn the_format_is_pinned() {
    let mut r = record("a");
    r.open = true;
    let (input, images) = user_input_with_an_image();
    let lines = [
        String::from_utf8(r.to_json()).unwrap(),
        String::from_utf8(files::event_line(&event(1))).unwrap(),
        String::from_utf8(files::entry_line(&entry("e1"))).unwrap(),
        String::from_utf8(files::entry_line(&input)).unwrap(),
        String::from_utf8(files::event_line(&images)).unwrap(),
    ];
    let got = lines.join("\n") + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store/testdata/format-v2.txt");
    if std::env::var_os("AGENTD_BLESS").is_some() {
        fs::write(&path, &got).unwrap();
    }
    let want = fs::read_to_string(&path).unwrap();
    assert_eq!(
        got, want,
        "the on-disk format changed (see this test's doc)"
    );
}

/// A user entry with an image, and the event that says the input started.
fn user_input_with_an_image() -> (HistoryEntry, Event) {
    let image = agentd_proto::ImageData {
        media_type: "image/png".into(),
        data: "iVBORw0KGgo=".into(),
    };
    let entry = HistoryEntry {
        id: EntryId("e2".into()),
        parent_id: Some(EntryId("e1".into())),
        ts: "2026-01-01T00:00:00.000Z".into(),
        turn: Turn::User {
            text: "what is this?".into(),
            input_id: agentd_proto::InputId("in_1".into()),
            images: vec![image],
            expanded: None,
        },
    };
    let event = Event {
        session_id: SessionId::from("a"),
        seq: 2,
        ts: "2026-01-01T00:00:00.000Z".into(),
        body: EventBody::UserInput {
            input_id: agentd_proto::InputId("in_1".into()),
            text: "what is this?".into(),
            images: vec![agentd_proto::ImageInfo {
                media_type: "image/png".into(),
                bytes: 8,
            }],
        },
    };
    (entry, event)
}

/// Lines written before inputs had images load as inputs without images.
#[test]
fn a_user_entry_from_before_images_loads() {
    let line = r#"{"entry":{"id":"e2","parent_id":null,"ts":"2026-01-01T00:00:00.000Z","type":"user","text":"hi","input_id":"in_1"}}"#;
    let old: serde_json::Value = serde_json::from_str(line).unwrap();
    let entry: HistoryEntry = serde_json::from_value(old["entry"].clone()).unwrap();
    assert_eq!(
        entry.turn,
        Turn::User {
            text: "hi".into(),
            input_id: agentd_proto::InputId("in_1".into()),
            images: vec![],
            expanded: None,
        }
    );
    let event = r#"{"session_id":"a","seq":2,"ts":"2026-01-01T00:00:00.000Z","kind":"user_input","data":{"input_id":"in_1","text":"hi"}}"#;
    let old: Event = serde_json::from_str(event).unwrap();
    assert!(matches!(old.body, EventBody::UserInput { images, .. } if images.is_empty()));
}

/// Records written before sessions had sandboxes load with the default sandbox.
#[test]
fn a_record_from_before_sandboxes_loads() {
    let mut value: serde_json::Value = serde_json::from_slice(&record("a").to_json()).unwrap();
    let config = value["config"].as_object_mut().unwrap();
    for key in ["sandbox", "sandbox_writable_roots", "sandbox_network"] {
        assert!(config.remove(key).is_some(), "{key}");
    }
    let old: SessionRecord = serde_json::from_value(value).unwrap();
    assert_eq!(old.config, record("a").config);
}
