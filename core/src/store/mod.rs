//! Persistence: the state directory and nothing else touches it. Each session is a directory
//! under `sessions/`:
//!
//! - `session.json`: a [`SessionRecord`] (metadata, config, state, queue, leaf), replaced
//!   atomically (write a private temporary file, sync it, rename it over, sync the directory);
//! - `log.jsonl`: the session's journal, append only: one `Event` per line in `seq` order,
//!   with the history tree's entries (`{"entry": HistoryEntry}`) between them. One file, so
//!   one data sync makes a step's events and history durable together.
//!
//! Files are written by a session's [`Writer`] task, off the async workers, in order. Lines
//! that do not parse (a torn last line after a crash, a corrupt line) are skipped with a
//! warning on load; a torn tail is cut before the next append. Nothing here decides *when* to
//! write: the session does (see ARCHITECTURE.md, "What is persisted when").
//!
//! The format has a version ([`FORMAT_VERSION`]). Records and lines are the protocol's own
//! types, so `format.rs` pins their serialized form with a golden test: a protocol change that
//! would change what is on disk fails it, and must come with a new version and an explicit
//! conversion (as `convert_v1` does for the two-file layout of version 1).

mod files;
mod groups;
mod jsonl;
mod writer;

pub(crate) use files::{EventReader, SessionFiles, event_line};
pub(crate) use groups::ProcessRecords;
pub use groups::{RecordedGroup, RecordedProcesses};
pub(crate) use writer::{BACKLOG_LINES, Backlog, Writer, WriterStatus};

use agentd_proto::{
    DamageKind, DamagedSession, EntryId, Environment, ForkOrigin, QueueContents, SessionConfig,
    SessionId, SessionState, SessionSummary, Usage,
};
use serde::{Deserialize, Serialize};
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The on-disk format this daemon writes. 1: `history.jsonl` and `events.jsonl`; 2: one
/// `log.jsonl`, records with `format_version` and `open`.
pub(crate) const FORMAT_VERSION: u32 = 2;

const RECORD: &str = "session.json";

/// What `session.json` holds: everything about a session except its history and events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SessionRecord {
    /// The format this record and its journal are written in (absent: 1).
    #[serde(default = "version_1")]
    pub(crate) format_version: u32,
    /// Its id (also the directory's name).
    pub(crate) id: SessionId,
    /// Title given at creation.
    pub(crate) title: Option<String>,
    /// Working directory.
    pub(crate) cwd: PathBuf,
    /// Tool profile name.
    pub(crate) profile: String,
    /// User instructions for the system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) instructions: Option<String>,
    /// Whether tools may only read.
    #[serde(default)]
    pub(crate) read_only: bool,
    /// Where its tools run (absent: locally); a daemon restart reconnects to it.
    #[serde(default, skip_serializing_if = "Environment::is_local")]
    pub(crate) environment: Environment,
    /// The worktree it owns, removed with it when nothing there would be lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) worktree: Option<agentd_proto::Worktree>,
    /// Creation time (RFC 3339).
    pub(crate) created: String,
    /// Time of the last change written here (RFC 3339).
    pub(crate) updated: String,
    /// State when written; `processing` on load means the daemon stopped mid-work.
    pub(crate) state: SessionState,
    /// Configuration.
    pub(crate) config: SessionConfig,
    /// Tokens used so far (the journal's last `usage` event may be newer).
    pub(crate) usage: Usage,
    /// The newest entry of the current branch.
    pub(crate) leaf: Option<EntryId>,
    /// How many entries the journal had when this was written. Entries after them were
    /// appended later (a crash came before this file was rewritten) and extend the branch.
    pub(crate) history_len: usize,
    /// Queued steering and follow-ups.
    pub(crate) queue: QueueContents,
    /// The session this one was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) forked_from: Option<ForkOrigin>,
    /// The session that spawned this one as a subagent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) parent: Option<ParentLink>,
    /// True while a daemon has the session loaded. Events reach clients before the disk, so a
    /// record still saying `open` at start-up means the last daemon died with events that
    /// clients may have seen but the journal lacks: their seqs are never reused.
    #[serde(default)]
    pub(crate) open: bool,
    /// What `session/redo` would bring back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) redo: Option<RedoPoint>,
}

/// Where the last rollback moved the branch, for a redo (kept in the record, so a redo
/// works after the daemon restarts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RedoPoint {
    /// The leaf it left (a redo is possible while the branch is still there).
    pub(crate) from: Option<EntryId>,
    /// The leaf it took the branch from.
    pub(crate) to: Option<EntryId>,
    /// Whether it put files back too.
    pub(crate) files: bool,
}

fn version_1() -> u32 {
    1
}

impl SessionRecord {
    /// The record's line for `session/list`.
    pub(crate) fn summary(&self) -> SessionSummary {
        SessionSummary {
            session_id: self.id.clone(),
            title: self.title.clone(),
            cwd: self.cwd.display().to_string(),
            // A stored session is worked on by no one: one stored mid-work (the daemon died)
            // is idle again as soon as it loads (the interrupted work ends then), and so it
            // is listed.
            state: match self.state {
                SessionState::Processing | SessionState::AwaitingInput => SessionState::Idle,
                state => state,
            },
            provider: self.config.provider.clone(),
            model: self.config.model.clone(),
            created: self.created.clone(),
            updated: self.updated.clone(),
            usage: self.usage,
            parent_id: self.parent.as_ref().map(|p| p.session_id.clone()),
        }
    }

    /// The record as `session.json` holds it.
    pub(crate) fn to_json(&self) -> Vec<u8> {
        // A record is plain data: serializing it cannot fail.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }
}

/// A subagent's place under the session that spawned it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ParentLink {
    /// The parent session.
    pub(crate) session_id: SessionId,
    /// 1 for a child of a top-level session, 2 for its child, ...
    pub(crate) depth: u32,
}

/// The sessions directory, held by one daemon at a time. Clones share the lock.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    /// The state directory's `flock`, held while any clone lives (released on drop).
    _lock: Option<std::sync::Arc<nix::fcntl::Flock<File>>>,
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

/// What [`Store::load`] found: the records, and the sessions whose record cannot be read.
pub(crate) struct Loaded {
    /// Every readable session record.
    pub(crate) records: Vec<SessionRecord>,
    /// Every session directory whose record cannot be read, and why.
    pub(crate) damaged: Vec<DamagedSession>,
}

/// Creates `tmp` afresh, to be renamed over the file it replaces: private to the user, never
/// through a symlink (a link planted there must not redirect the write), a stale one removed.
fn create_replacement(tmp: &Path) -> Result<File, Error> {
    match fs::remove_file(tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(at(tmp)(e)),
        _ => {}
    }
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(tmp)
        .map_err(at(tmp))
}

/// Creates `dir` (and its parents) private to the user.
fn create_private_dir(dir: &Path) -> Result<(), Error> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(at(dir))
}

impl Store {
    /// The store under `state_dir` (`<state_dir>/sessions`), locked for this process: a second
    /// daemon on the same state directory would append to the same journals, so it is refused.
    pub fn open(state_dir: &Path) -> Result<Self, Error> {
        create_private_dir(state_dir)?;
        let path = state_dir.join("lock");
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
            .map_err(at(&path))?;
        let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|(_, errno)| Error {
                path: path.clone(),
                source: if errno == nix::errno::Errno::EWOULDBLOCK {
                    io::Error::other(
                        "another agentd is using this state directory; stop it, or give this one its own --state-dir",
                    )
                } else {
                    errno.into()
                },
            })?;
        Ok(Self {
            dir: state_dir.join("sessions"),
            _lock: Some(std::sync::Arc::new(lock)),
        })
    }

    /// A store under `state_dir` without the lock, for tools that only read it.
    pub fn unlocked(state_dir: &Path) -> Self {
        Self {
            dir: state_dir.join("sessions"),
            _lock: None,
        }
    }

    /// The sessions directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads every session's record (not its journal, which loads on first use). A record
    /// that cannot be read is reported as damaged, never skipped in silence.
    pub(crate) fn load(&self) -> Result<Loaded, Error> {
        let mut loaded = Loaded {
            records: Vec::new(),
            damaged: Vec::new(),
        };
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(loaded),
            Err(e) => return Err(at(&self.dir)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(at(&self.dir))?;
            // Only directories are sessions; the store writes nothing else here.
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let dir = entry.path();
            let path = dir.join(RECORD);
            let name = entry.file_name().to_string_lossy().into_owned();
            let damaged = |damage, reason: String| DamagedSession {
                session_id: SessionId(name.clone()),
                damage,
                reason,
                path: path.display().to_string(),
            };
            let bytes = match fs::read(&path) {
                Ok(b) => b,
                // A directory without a record is a creation that did not finish: the
                // client was never told about it.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    loaded
                        .damaged
                        .push(damaged(DamageKind::Unreadable, e.to_string()));
                    continue;
                }
            };
            match serde_json::from_slice::<SessionRecord>(&bytes) {
                Ok(r) if r.format_version > FORMAT_VERSION => loaded.damaged.push(damaged(
                    DamageKind::NewerFormat,
                    format!(
                        "written by a newer agentd (format {}; this one reads up to {FORMAT_VERSION})",
                        r.format_version
                    ),
                )),
                Ok(r) if r.id.0 == name => loaded.records.push(r),
                Ok(r) => loaded.damaged.push(damaged(
                    DamageKind::WrongId,
                    format!("the record holds session {}", r.id),
                )),
                Err(e) => loaded
                    .damaged
                    .push(damaged(DamageKind::Invalid, e.to_string())),
            }
        }
        Ok(loaded)
    }

    /// Creates the directory of a new session and returns its files. The session's writer
    /// writes its record with its first events; until then, loading skips the directory.
    pub(crate) fn create(&self, id: &SessionId) -> Result<SessionFiles, Error> {
        let dir = self.dir.join(&id.0);
        create_private_dir(&self.dir)?;
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(at(&dir))?;
        Ok(SessionFiles::new(dir))
    }

    /// The files of an existing session.
    pub(crate) fn files(&self, id: &SessionId) -> SessionFiles {
        SessionFiles::new(self.dir.join(&id.0))
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

#[cfg(test)]
mod tests;
