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
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const FILE: &str = "groups.json";
const FILE_TMP: &str = ".groups.json.tmp";

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

/// The running daemon's `groups.json`. Changes are written in the order they are made.
#[derive(Debug)]
pub struct ProcessRecords {
    dir: PathBuf,
    /// The file's contents; held while it is written, so writes land in order. The file is a
    /// few hundred bytes in the page cache (no sync), so the lock is held for microseconds.
    current: Mutex<RecordedProcesses>,
}

impl Store {
    /// The state directory (the parent of the sessions directory).
    fn state_dir(&self) -> &Path {
        self.dir.parent().unwrap_or(&self.dir)
    }

    /// What the previous daemon run recorded (nothing when it stopped cleanly or never ran).
    /// Read it before [`Store::process_records`] starts this run's records over it.
    pub fn leftover_processes(&self) -> Result<RecordedProcesses, Error> {
        let path = self.state_dir().join(FILE);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| at(&path)(io::Error::new(io::ErrorKind::InvalidData, e))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(RecordedProcesses::default()),
            Err(e) => Err(at(&path)(e)),
        }
    }

    /// Starts this run's records (marker prefix `run`, no groups yet), replacing the last
    /// run's.
    pub fn process_records(&self, run: &str) -> Result<ProcessRecords, Error> {
        let records = ProcessRecords {
            dir: self.state_dir().to_owned(),
            current: Mutex::new(RecordedProcesses {
                run: run.to_owned(),
                groups: Vec::new(),
            }),
        };
        records.change(|_| true)?;
        Ok(records)
    }
}

impl ProcessRecords {
    /// Records a group that started.
    pub fn add(&self, group: RecordedGroup) -> Result<(), Error> {
        self.change(|r| {
            let new = !r.groups.contains(&group);
            if new {
                r.groups.push(group);
            }
            new
        })
    }

    /// Forgets a group that ended.
    pub fn remove(&self, group: RecordedGroup) -> Result<(), Error> {
        self.change(|r| {
            let before = r.groups.len();
            r.groups.retain(|g| *g != group);
            r.groups.len() != before
        })
    }

    /// Applies `edit` and, when it changed something, writes the file.
    fn change(&self, edit: impl FnOnce(&mut RecordedProcesses) -> bool) -> Result<(), Error> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if !edit(&mut current) {
            return Ok(());
        }
        // Plain data: serializing cannot fail.
        let json = serde_json::to_vec(&*current).unwrap_or_default();
        let (tmp, path) = (self.dir.join(FILE_TMP), self.dir.join(FILE));
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(at(&tmp)(e)),
            _ => {}
        }
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&tmp)
            .map_err(at(&tmp))?;
        file.write_all(&json).map_err(at(&tmp))?;
        fs::rename(&tmp, &path).map_err(at(&path))
    }
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
        records.add(a).unwrap();
        records.add(b).unwrap();
        records.add(b).unwrap();
        records.remove(a).unwrap();
        assert_eq!(
            store.leftover_processes().unwrap(),
            RecordedProcesses {
                run: "1-2".into(),
                groups: vec![b]
            }
        );
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
    fn a_damaged_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        fs::write(dir.path().join(FILE), b"{not json").unwrap();
        let err = store.leftover_processes().unwrap_err().to_string();
        assert!(err.contains("groups.json"), "{err}");
    }
}
