//! Persistence. Each session is a directory under the state directory's `sessions/`:
//!
//! - `session.json`: a [`SessionRecord`] (metadata, config, state, queue, leaf), replaced
//!   atomically (write a temporary file, sync it, rename it over, sync the directory);
//! - `history.jsonl`: the history tree, one [`HistoryEntry`] per line, append only;
//! - `events.jsonl`: the event log, one [`Event`] per line in `seq` order, append only.
//!
//! Lines that do not parse (a torn last line after a crash, a corrupt line) are skipped with a
//! warning on load; a torn tail is cut before the next append. Nothing here decides *when* to
//! write: the session does (see ARCHITECTURE.md, "What is persisted when").

mod jsonl;

use jsonl::Appender;

use agentd_proto::{
    EntryId, Event, ForkOrigin, HistoryEntry, QueueContents, SessionConfig, SessionId,
    SessionState, SessionSummary, Usage,
};
use serde::{Deserialize, Serialize};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const RECORD: &str = "session.json";
const HISTORY: &str = "history.jsonl";
const EVENTS: &str = "events.jsonl";

/// What `session.json` holds: everything about a session except its history and events.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Its id (also the directory's name).
    pub id: SessionId,
    /// Title given at creation.
    pub title: Option<String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Tool profile name.
    pub profile: String,
    /// User instructions for the system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Whether tools may only read.
    #[serde(default)]
    pub read_only: bool,
    /// Creation time (RFC 3339).
    pub created: String,
    /// Time of the last change written here (RFC 3339).
    pub updated: String,
    /// State when written; `processing` on load means the daemon stopped mid-work.
    pub state: SessionState,
    /// Configuration.
    pub config: SessionConfig,
    /// Tokens used so far.
    pub usage: Usage,
    /// The newest entry of the current branch.
    pub leaf: Option<EntryId>,
    /// How many lines `history.jsonl` had when this was written. Entries after them were
    /// appended later (a crash came before this file was rewritten) and extend the branch.
    pub history_len: usize,
    /// Queued steering and follow-ups.
    pub queue: QueueContents,
    /// The session this one was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkOrigin>,
    /// The session that spawned this one as a subagent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentLink>,
}

impl SessionRecord {
    /// The record's line for `session/list`.
    pub fn summary(&self) -> SessionSummary {
        SessionSummary {
            session_id: self.id.clone(),
            title: self.title.clone(),
            cwd: self.cwd.display().to_string(),
            state: self.state,
            provider: self.config.provider.clone(),
            model: self.config.model.clone(),
            created: self.created.clone(),
            updated: self.updated.clone(),
            usage: self.usage,
            parent_id: self.parent.as_ref().map(|p| p.session_id.clone()),
        }
    }
}

/// A subagent's place under the session that spawned it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ParentLink {
    /// The parent session.
    pub session_id: SessionId,
    /// 1 for a child of a top-level session, 2 for its child, ...
    pub depth: u32,
}

/// The sessions directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

/// A failed store operation, naming the path.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct Error {
    /// The file or directory.
    pub path: PathBuf,
    /// What the OS said.
    pub source: io::Error,
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |source| Error {
        path: path.to_owned(),
        source,
    }
}

/// What [`Store::load`] found: the records, and a warning per directory it skipped.
pub struct Loaded {
    /// Every readable session record.
    pub records: Vec<SessionRecord>,
    /// One line per unreadable session directory.
    pub warnings: Vec<String>,
}

impl Store {
    /// The store under `state_dir` (`<state_dir>/sessions`). Nothing is created until a
    /// session is.
    pub fn new(state_dir: &Path) -> Self {
        Self {
            dir: state_dir.join("sessions"),
        }
    }

    /// The sessions directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads every session's record (not its history or events, which load on first use).
    pub fn load(&self) -> Result<Loaded, Error> {
        let mut loaded = Loaded {
            records: Vec::new(),
            warnings: Vec::new(),
        };
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(loaded),
            Err(e) => return Err(at(&self.dir)(e)),
        };
        for entry in entries {
            let dir = entry.map_err(at(&self.dir))?.path();
            let path = dir.join(RECORD);
            let record = fs::read(&path).map_err(|e| e.to_string()).and_then(|b| {
                serde_json::from_slice::<SessionRecord>(&b).map_err(|e| e.to_string())
            });
            match record {
                Ok(r) if dir.file_name() == Some(r.id.0.as_ref()) => loaded.records.push(r),
                Ok(r) => loaded.warnings.push(format!(
                    "{}: holds session {}; skipped",
                    path.display(),
                    r.id
                )),
                // A directory without a record is a creation that did not finish.
                Err(_) if !path.exists() => {}
                Err(e) => loaded
                    .warnings
                    .push(format!("{}: {e}; skipped", path.display())),
            }
        }
        Ok(loaded)
    }

    /// Creates the directory of a new session, writes its record, and returns its files.
    pub fn create(&self, record: &SessionRecord) -> Result<SessionFiles, Error> {
        let dir = self.dir.join(&record.id.0);
        fs::create_dir_all(&self.dir).map_err(at(&self.dir))?;
        fs::create_dir(&dir).map_err(at(&dir))?;
        let files = SessionFiles::new(dir);
        files.write_record(record)?;
        Ok(files)
    }

    /// The files of an existing session, with any torn tail cut. Lines skipped on the way are
    /// reported through `warn`.
    pub fn open(&self, id: &SessionId, mut warn: impl FnMut(String)) -> SessionFiles {
        let files = SessionFiles::new(self.dir.join(&id.0));
        for name in [HISTORY, EVENTS] {
            let path = files.dir.join(name);
            match jsonl::repair_tail(&path) {
                Ok(true) => warn(format!("{}: cut a torn last line", path.display())),
                Ok(false) => {}
                Err(e) => warn(format!("{}: {e}", path.display())),
            }
        }
        files
    }

    /// Deletes a session's directory.
    pub fn delete(&self, id: &SessionId) -> Result<(), Error> {
        let dir = self.dir.join(&id.0);
        match fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(at(&dir)(e)),
            _ => Ok(()),
        }
    }
}

/// One session's files. Appends go straight to the kernel (a killed daemon loses nothing);
/// [`SessionFiles::append_history`] also syncs both logs to the disk.
#[derive(Debug)]
pub struct SessionFiles {
    dir: PathBuf,
    history: Mutex<Appender>,
    events: Mutex<Appender>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Just the `seq` of an event line, to find the last one cheaply.
#[derive(Deserialize)]
struct Seq {
    seq: u64,
}

impl SessionFiles {
    fn new(dir: PathBuf) -> Self {
        Self {
            history: Mutex::new(Appender::new(dir.join(HISTORY))),
            events: Mutex::new(Appender::new(dir.join(EVENTS))),
            dir,
        }
    }

    /// Replaces `session.json` atomically.
    pub fn write_record(&self, record: &SessionRecord) -> Result<(), Error> {
        let tmp = self.dir.join(".session.json.tmp");
        let path = self.dir.join(RECORD);
        let json = serde_json::to_vec_pretty(record).map_err(|e| at(&tmp)(e.into()))?;
        let mut file = File::create(&tmp).map_err(at(&tmp))?;
        file.write_all(&json)
            .and_then(|_| file.sync_data())
            .map_err(at(&tmp))?;
        fs::rename(&tmp, &path).map_err(at(&path))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(at(&self.dir))
    }

    /// Appends an event (not synced; see [`SessionFiles::append_history`]).
    pub fn append_event(&self, event: &Event) -> Result<(), Error> {
        let path = self.dir.join(EVENTS);
        let line = serde_json::to_vec(event).map_err(|e| at(&path)(e.into()))?;
        lock(&self.events).append(&line, false).map_err(at(&path))
    }

    /// Appends history entries and syncs them, and the events before them, to the disk.
    pub fn append_history<'a>(
        &self,
        entries: impl IntoIterator<Item = &'a HistoryEntry>,
    ) -> Result<(), Error> {
        let path = self.dir.join(HISTORY);
        let mut history = lock(&self.history);
        let mut line = Vec::new();
        for entry in entries {
            line.clear();
            serde_json::to_writer(&mut line, entry).map_err(|e| at(&path)(e.into()))?;
            history.append(&line, false).map_err(at(&path))?;
        }
        history.flush(true).map_err(at(&path))?;
        lock(&self.events)
            .flush(true)
            .map_err(at(&self.dir.join(EVENTS)))
    }

    /// Writes whatever earlier appends left pending.
    pub fn flush(&self) -> Result<(), Error> {
        lock(&self.history)
            .flush(false)
            .map_err(at(&self.dir.join(HISTORY)))?;
        lock(&self.events)
            .flush(false)
            .map_err(at(&self.dir.join(EVENTS)))
    }

    /// Whether appends are waiting for the disk.
    pub fn has_pending(&self) -> bool {
        lock(&self.history).has_pending() || lock(&self.events).has_pending()
    }

    /// Every history entry, in the order written.
    pub fn load_history(
        &self,
        warn: impl FnMut(usize, String),
    ) -> Result<Vec<HistoryEntry>, Error> {
        let path = self.dir.join(HISTORY);
        jsonl::read(&path, |_| true, warn).map_err(at(&path))
    }

    /// Events with `after < seq <= until`, oldest first.
    pub fn read_events(&self, after: u64, until: u64) -> Result<Vec<Event>, Error> {
        let path = self.dir.join(EVENTS);
        let mut events: Vec<Event> = jsonl::read(
            &path,
            |e: &Event| e.seq > after && e.seq <= until,
            |n, e| tracing::warn!(path = %path.display(), line = n, "skipped an event line: {e}"),
        )
        .map_err(at(&path))?;
        // A line written twice (a retried append after a crash) must not replay twice.
        events.dedup_by_key(|e| e.seq);
        Ok(events)
    }

    /// The seq of the newest stored event (0 when there is none).
    pub fn last_seq(&self) -> Result<u64, Error> {
        let path = self.dir.join(EVENTS);
        Ok(jsonl::last::<Seq>(&path)
            .map_err(at(&path))?
            .map_or(0, |s| s.seq))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_proto::{EventBody, Turn};

    fn record(id: &str) -> SessionRecord {
        SessionRecord {
            id: SessionId::from(id),
            title: None,
            cwd: "/".into(),
            profile: "anthropic".into(),
            instructions: None,
            read_only: false,
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
        }
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        assert!(store.load().unwrap().records.is_empty());
        let files = store.create(&record("a")).unwrap();
        let entry = HistoryEntry {
            id: EntryId("e1".into()),
            parent_id: None,
            ts: "t".into(),
            turn: Turn::System { text: "x".into() },
        };
        files.append_history([&entry]).unwrap();
        for seq in 1..=3 {
            files
                .append_event(&Event {
                    session_id: SessionId::from("a"),
                    seq,
                    ts: "t".into(),
                    body: EventBody::Warning {
                        message: seq.to_string(),
                    },
                })
                .unwrap();
        }
        fs::create_dir(store.dir().join("half-created")).unwrap();
        fs::create_dir(store.dir().join("broken")).unwrap();
        fs::write(store.dir().join("broken").join(RECORD), "{").unwrap();

        let loaded = store.load().unwrap();
        assert_eq!(loaded.records.len(), 1);
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        let files = store.open(&SessionId::from("a"), |w| panic!("{w}"));
        assert_eq!(files.load_history(|_, _| {}).unwrap(), [entry]);
        assert_eq!(files.last_seq().unwrap(), 3);
        let seqs: Vec<u64> = files
            .read_events(1, 2)
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, [2]);
        store.delete(&SessionId::from("a")).unwrap();
        assert!(store.load().unwrap().records.is_empty());
    }
}
