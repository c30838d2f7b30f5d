//! `groups.json` in the state directory: the process groups the running daemon's commands
//! started and that may still be alive, so that a daemon started after a crash (`kill -9`,
//! OOM) can end what the dead one left behind.
//!
//! Each group is its pgid and its leader's start time, so a pid reused by an unrelated process
//! is never taken for a leftover; `run` is the dead daemon's marker prefix, which finds the
//! processes that left their groups (see `exec::MARKER_VAR`). The file is replaced atomically
//! (a private temporary file renamed over it) on every change, without a sync: it only has to
//! survive the daemon's death, not the machine's, and a reboot ends the processes anyway.

use super::{Error, Store, at};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::sync::mpsc;

const FILE: &str = "groups.json";
const FILE_TMP: &str = ".groups.json.tmp";
/// How long the end of a group may wait to be written with the next change.
const REMOVAL_DELAY: std::time::Duration = std::time::Duration::from_millis(200);

/// One recorded process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedGroup {
    /// The group's id: its leader's pid.
    pub pgid: i32,
    /// The leader's start time (`/proc/PID/stat` field 22, clock ticks since boot).
    pub start_time: u64,
}

/// What `groups.json` holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedProcesses {
    /// The marker prefix of the daemon run that wrote it (empty: unknown).
    pub run: String,
    /// Its groups that may still be alive.
    pub groups: Vec<RecordedGroup>,
}

/// The running daemon's `groups.json`. Changes are sent to a thread of its own that writes them
/// in order, coalescing what arrived meanwhile, so a command never waits for the disk (a
/// hanging disk would otherwise stall the async workers that start commands). Ends of groups
/// are written up to [`REMOVAL_DELAY`] late, with the next start.
#[derive(Debug)]
pub(crate) struct ProcessRecords {
    changes: mpsc::Sender<Change>,
}

#[derive(Debug)]
enum Change {
    Add(RecordedGroup),
    Remove(RecordedGroup),
}

impl Store {
    /// Where `groups.json` lives: the state directory (the parent of the sessions directory).
    fn records_dir(&self) -> &Path {
        self.dir.parent().unwrap_or(&self.dir)
    }

    /// What the previous daemon run recorded (nothing when it never ran).
    /// Read it before this daemon records its own groups over it.
    pub fn leftover_processes(&self) -> Result<RecordedProcesses, Error> {
        let path = self.records_dir().join(FILE);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| at(&path)(io::Error::new(io::ErrorKind::InvalidData, e))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(RecordedProcesses::default()),
            Err(e) => Err(at(&path)(e)),
        }
    }

    /// Starts this run's records (marker prefix `run`, no groups yet), replacing the last
    /// run's before it returns, and the thread that writes the changes.
    pub(crate) fn process_records(&self, run: &str) -> Result<ProcessRecords, Error> {
        let dir = self.records_dir().to_owned();
        let mut current = RecordedProcesses {
            run: run.to_owned(),
            groups: Vec::new(),
        };
        write(&dir, &current)?;
        let (tx, rx) = mpsc::channel();
        let thread_dir = dir.clone();
        std::thread::Builder::new()
            .name("agentd-groups".into())
            .spawn(move || {
                // A group that started is written at once, with whatever arrived meanwhile;
                // one that ended waits for the next start or a quiet moment (a stale entry is
                // harmless: the next run checks its leader's start time), so a run of short
                // commands costs one write each, not two.
                let mut unwritten = false;
                loop {
                    let next = if unwritten {
                        match rx.recv_timeout(REMOVAL_DELAY) {
                            Ok(change) => Some(change),
                            Err(mpsc::RecvTimeoutError::Timeout) => None,
                            Err(mpsc::RecvTimeoutError::Disconnected) => break,
                        }
                    } else {
                        // Ends when the last sender (the registry's) is dropped.
                        match rx.recv() {
                            Ok(change) => Some(change),
                            Err(_) => break,
                        }
                    };
                    let mut now = next.is_none();
                    let arrived = next
                        .into_iter()
                        .chain(std::iter::from_fn(|| rx.try_recv().ok()));
                    for change in arrived {
                        now |= matches!(change, Change::Add(_));
                        unwritten |= apply(&mut current, change);
                    }
                    if unwritten && now {
                        if let Err(e) = write(&thread_dir, &current) {
                            tracing::warn!("cannot update the process group records: {e}");
                        }
                        unwritten = false;
                    }
                }
                if unwritten && let Err(e) = write(&thread_dir, &current) {
                    tracing::warn!("cannot update the process group records: {e}");
                }
            })
            .map_err(at(&dir))?;
        Ok(ProcessRecords { changes: tx })
    }
}

impl ProcessRecords {
    /// Records a group that started.
    pub(crate) fn add(&self, group: RecordedGroup) {
        self.send(Change::Add(group));
    }

    /// Forgets a group that ended.
    pub(crate) fn remove(&self, group: RecordedGroup) {
        self.send(Change::Remove(group));
    }

    fn send(&self, change: Change) {
        // The thread only ends with this sender, so a send cannot fail while it is alive.
        let _ = self.changes.send(change);
    }
}

/// Applies one change; whether it changed anything.
fn apply(records: &mut RecordedProcesses, change: Change) -> bool {
    match change {
        Change::Add(group) if !records.groups.contains(&group) => {
            records.groups.push(group);
            true
        }
        Change::Add(_) => false,
        Change::Remove(group) => {
            let before = records.groups.len();
            records.groups.retain(|g| *g != group);
            records.groups.len() != before
        }
    }
}

/// Replaces `dir/groups.json` with `records`: a private temporary file (never through a
/// symlink) renamed over it.
fn write(dir: &Path, records: &RecordedProcesses) -> Result<(), Error> {
    // Plain data: serializing cannot fail.
    let json = serde_json::to_vec(records).unwrap_or_default();
    let (tmp, path) = (dir.join(FILE_TMP), dir.join(FILE));
    let mut file = super::create_replacement(&tmp)?;
    file.write_all(&json).map_err(at(&tmp))?;
    fs::rename(&tmp, &path).map_err(at(&path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn records_survive_for_the_next_run_and_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(
            store.leftover_processes().unwrap(),
            RecordedProcesses::default()
        );
        let records = store.process_records("1-2").unwrap();
        let (a, b) = (
            RecordedGroup {
                pgid: 10,
                start_time: 5,
            },
            RecordedGroup {
                pgid: 11,
                start_time: 6,
            },
        );
        records.add(a);
        records.add(b);
        records.add(b);
        records.remove(a);
        let expect = RecordedProcesses {
            run: "1-2".into(),
            groups: vec![b],
        };
        // Written by the records' thread, soon.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while store.leftover_processes().unwrap() != expect {
            assert!(std::time::Instant::now() < deadline, "never written");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mode = fs::metadata(dir.path().join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // The next run starts over.
        store.process_records("3-4").unwrap();
        assert_eq!(store.leftover_processes().unwrap().groups, []);
    }

    #[test]
    fn the_end_of_a_group_is_written_without_a_later_change() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let records = store.process_records("1-2").unwrap();
        let group = RecordedGroup {
            pgid: 10,
            start_time: 5,
        };
        let written = |groups: &[RecordedGroup]| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while store.leftover_processes().unwrap().groups != groups {
                assert!(std::time::Instant::now() < deadline, "never written");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        };
        records.add(group);
        written(&[group]);
        records.remove(group);
        written(&[]);
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        fs::write(dir.path().join(FILE), b"{not json").unwrap();
        let err = store.leftover_processes().unwrap_err().to_string();
        assert!(err.contains("groups.json"), "{err}");
    }
}
