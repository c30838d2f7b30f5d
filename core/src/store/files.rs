//! One session's files: the record, the journal's line format, loading the journal in one
//! pass, replaying events through a sparse seq → offset index, and the conversion from the
//! version 1 layout.

use super::jsonl::{self, Appender};
use super::{Error, at};
use agentd_proto::{Event, EventBody, HistoryEntry, QueueContents, SessionState, Usage};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

const LOG: &str = "log.jsonl";
const RECORD_TMP: &str = ".session.json.tmp";
/// Version 1 kept the history and the events in two files.
const V1_HISTORY: &str = "history.jsonl";
const V1_EVENTS: &str = "events.jsonl";

/// A history entry's journal line is `{"entry": ...}`; every other line is an [`Event`]
/// (whose first field is `session_id`), so a line's kind is known from its first bytes.
const ENTRY_PREFIX: &[u8] = b"{\"entry\":";

#[derive(Serialize)]
struct EntryLineRef<'a> {
    entry: &'a HistoryEntry,
}

#[derive(Deserialize)]
struct EntryLine {
    entry: HistoryEntry,
}

/// Just what loading needs of most event lines, without their data.
#[derive(Deserialize)]
struct EventHead<'a> {
    seq: u64,
    #[serde(borrow)]
    kind: &'a str,
}

/// The journal line of an event.
pub(crate) fn event_line(event: &Event) -> Vec<u8> {
    // Protocol types are plain data: serializing them cannot fail.
    serde_json::to_vec(event).unwrap_or_default()
}

/// The journal line of a history entry.
pub(super) fn entry_line(entry: &HistoryEntry) -> Vec<u8> {
    serde_json::to_vec(&EntryLineRef { entry }).unwrap_or_default()
}

/// Where some events start in the journal, about every 256 KB, so a
/// replay from any seq reads only from the nearest point before it.
#[derive(Debug, Default)]
pub(crate) struct EventIndex {
    /// `(seq, offset)`, both increasing.
    points: Vec<(u64, u64)>,
}

impl EventIndex {
    const SPACING: u64 = 256 * 1024;

    /// Notes that the event `seq` starts at `offset`.
    pub(super) fn note(&mut self, seq: u64, offset: u64) {
        if self
            .points
            .last()
            .is_none_or(|&(s, o)| seq > s && offset >= o + Self::SPACING)
        {
            self.points.push((seq, offset));
        }
    }

    /// The offset to read from to find every event after `after`.
    fn start_after(&self, after: u64) -> u64 {
        let i = self.points.partition_point(|&(seq, _)| seq <= after + 1);
        i.checked_sub(1).map_or(0, |i| self.points[i].1)
    }
}

/// Reads a session's stored events; cheap to clone, usable while the session writes.
#[derive(Debug, Clone)]
pub(crate) struct EventReader {
    path: PathBuf,
    index: Arc<Mutex<EventIndex>>,
}

impl EventReader {
    /// Events with `after < seq <= until`, oldest first. Blocking: call it off the async
    /// workers.
    pub(crate) fn read(&self, after: u64, until: u64) -> Result<Vec<Event>, Error> {
        let from = self
            .index
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .start_after(after);
        let mut events: Vec<Event> = Vec::new();
        jsonl::scan(&self.path, from, |n, _, line| {
            if line.starts_with(ENTRY_PREFIX) {
                return true;
            }
            let seq = match serde_json::from_slice::<EventHead<'_>>(line) {
                Ok(head) => head.seq,
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), line = n, "skipped an event line: {e}");
                    return true;
                }
            };
            if seq > after
                && seq <= until
                // A line written twice (a retried append after a crash) must not replay twice.
                && events.last().is_none_or(|last| last.seq < seq)
            {
                match serde_json::from_slice::<Event>(line) {
                    Ok(event) => events.push(event),
                    Err(e) => tracing::warn!(path = %self.path.display(), "skipped an event line: {e}"),
                }
            }
            seq < until
        })
        .map_err(at(&self.path))?;
        Ok(events)
    }

    pub(super) fn index(&self) -> &Arc<Mutex<EventIndex>> {
        &self.index
    }
}

/// What [`SessionFiles::load`] read from a journal.
pub(crate) struct LoadedLog {
    /// Every history entry, in the order written.
    pub(crate) entries: Vec<HistoryEntry>,
    /// The seq of the newest stored event (0 when there is none).
    pub(crate) last_seq: u64,
    /// The newest cumulative usage a `usage` event reported.
    pub(crate) usage: Option<Usage>,
    /// The state the newest `state_changed` event set.
    pub(crate) state: Option<SessionState>,
    /// The queue the newest `queue_changed` event reported.
    pub(crate) queue: Option<QueueContents>,
    /// Replays the stored events.
    pub(crate) reader: EventReader,
    /// Whether a torn last line was cut: an event or entry may be lost.
    pub(crate) repaired: bool,
    /// Problems met: lines skipped, seqs missing.
    pub(crate) warnings: Vec<String>,
}

/// One session's directory.
#[derive(Debug)]
pub(crate) struct SessionFiles {
    dir: PathBuf,
    /// While it says `false`, the writer writes nothing: a disk that stalls, for tests.
    #[cfg(test)]
    hold: Option<tokio::sync::watch::Receiver<bool>>,
}

impl SessionFiles {
    pub(super) fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            #[cfg(test)]
            hold: None,
        }
    }

    /// These files, written only while `open` says `true`.
    #[cfg(test)]
    pub(crate) fn held(mut self, open: tokio::sync::watch::Receiver<bool>) -> Self {
        self.hold = Some(open);
        self
    }

    /// Waits until the test holding the writer lets it write.
    #[cfg(test)]
    pub(super) async fn wait_while_held(&mut self) {
        if let Some(open) = &mut self.hold {
            let _ = open.wait_for(|open| *open).await;
        }
    }

    /// The journal's path (hooks get it as Claude Code's `transcript_path`).
    pub(crate) fn log(&self) -> PathBuf {
        self.dir.join(LOG)
    }

    /// A reader of a journal the session has just created (nothing indexed yet).
    pub(crate) fn reader(&self) -> EventReader {
        EventReader {
            path: self.log(),
            index: Arc::default(),
        }
    }

    /// An appender to the journal.
    pub(super) fn appender(&self) -> Appender {
        Appender::new(self.log())
    }

    /// Replaces `session.json` with `json` atomically: a private temporary file (never
    /// through a symlink), synced, renamed over, and the directory synced.
    pub(crate) fn write_record(&self, json: &[u8]) -> Result<(), Error> {
        let tmp = self.dir.join(RECORD_TMP);
        let path = self.dir.join(super::RECORD);
        let mut file = super::create_replacement(&tmp)?;
        file.write_all(json)
            .and_then(|_| file.sync_data())
            .map_err(at(&tmp))?;
        fs::rename(&tmp, &path).map_err(at(&path))?;
        fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(at(&self.dir))
    }

    /// Reads the journal in one pass (converting a version 1 layout first): the history
    /// entries, the last seq, the newest usage and state, and the index for replays. A torn
    /// last line is cut first.
    pub(crate) fn load(&self) -> Result<LoadedLog, Error> {
        let mut warnings = Vec::new();
        self.convert_v1()?;
        let path = self.log();
        let repaired = jsonl::repair_tail(&path).map_err(at(&path))?;
        if repaired {
            warnings.push(format!("{}: cut a torn last line", path.display()));
        }
        let mut loaded = LoadedLog {
            entries: Vec::new(),
            last_seq: 0,
            usage: None,
            state: None,
            queue: None,
            reader: EventReader {
                path: path.clone(),
                index: Arc::default(),
            },
            repaired,
            warnings: Vec::new(),
        };
        let mut index = EventIndex::default();
        jsonl::scan(&path, 0, |n, offset, line| {
            if line.starts_with(ENTRY_PREFIX) {
                match serde_json::from_slice::<EntryLine>(line) {
                    Ok(l) => loaded.entries.push(l.entry),
                    Err(e) => warnings.push(format!("{} line {n} skipped: {e}", path.display())),
                }
                return true;
            }
            let head = match serde_json::from_slice::<EventHead<'_>>(line) {
                Ok(h) => h,
                Err(e) => {
                    warnings.push(format!("{} line {n} skipped: {e}", path.display()));
                    return true;
                }
            };
            if head.seq <= loaded.last_seq {
                // A duplicate from a retried append.
                return true;
            }
            if head.seq > loaded.last_seq + 1 {
                warnings.push(format!(
                    "events {}..{} are missing from {}",
                    loaded.last_seq + 1,
                    head.seq - 1,
                    path.display()
                ));
            }
            index.note(head.seq, offset);
            loaded.last_seq = head.seq;
            if matches!(head.kind, "usage" | "state_changed" | "queue_changed") {
                match serde_json::from_slice::<Event>(line).map(|e| e.body) {
                    Ok(EventBody::Usage { total, .. }) => loaded.usage = Some(total),
                    Ok(EventBody::StateChanged { state }) => loaded.state = Some(state),
                    Ok(EventBody::QueueChanged { queue }) => loaded.queue = Some(queue),
                    _ => {}
                }
            }
            true
        })
        .map_err(at(&path))?;
        *loaded
            .reader
            .index
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = index;
        loaded.warnings = warnings;
        Ok(loaded)
    }

    /// Moves a version 1 session (`history.jsonl` + `events.jsonl`) to one journal. Each
    /// step can be repeated after a crash: the events file becomes the journal by a rename,
    /// and history entries appended twice are the same entries (loading keeps the first).
    fn convert_v1(&self) -> Result<(), Error> {
        let (history, events, log) = (
            self.dir.join(V1_HISTORY),
            self.dir.join(V1_EVENTS),
            self.log(),
        );
        if !history.exists() && !events.exists() {
            return Ok(());
        }
        for path in [&history, &events] {
            jsonl::repair_tail(path).map_err(at(path))?;
        }
        if events.exists() {
            fs::rename(&events, &log).map_err(at(&events))?;
        }
        if history.exists() {
            let mut appender = Appender::new(log.clone());
            jsonl::scan(&history, 0, |_, _, line| {
                match serde_json::from_slice::<HistoryEntry>(line) {
                    Ok(entry) => appender.push(&entry_line(&entry), None),
                    Err(e) => {
                        tracing::warn!(path = %history.display(), "skipped a history line: {e}")
                    }
                }
                true
            })
            .map_err(at(&history))?;
            appender.flush(true).map_err(at(&log))?;
            fs::remove_file(&history).map_err(at(&history))?;
        }
        tracing::info!(dir = %self.dir.display(), "converted a session to format 2");
        Ok(())
    }
}
