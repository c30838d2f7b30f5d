//! What discovery learnt from each skill and command file, kept per root directory so that
//! the next session's discovery stats a file instead of opening, checking and parsing it.
//! A file is known by its identity and times (device, inode, size, mtime, ctime): a write,
//! a rename over it or a symlink pointed elsewhere changes them. A file changed within the
//! last [`RACY`] is not kept, as git does: two writes within one tick of the filesystem's
//! clock leave the same times.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// Roots kept at most (workspaces of many sessions): past it, the cache starts afresh.
const MAX_ROOTS: usize = 16;
/// How recent a change must be for its file not to be kept.
const RACY: Duration = Duration::from_secs(2);

/// A file's identity and times, as `stat` gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileKey {
    pub(super) fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Whether the file changed so recently that a change to come could keep its times.
    fn racy(&self, now: SystemTime) -> bool {
        let Ok(now) = now.duration_since(SystemTime::UNIX_EPOCH) else {
            return true;
        };
        let changed = |(s, ns): (i64, i64)| {
            Duration::new(
                u64::try_from(s).unwrap_or(0),
                u32::try_from(ns).unwrap_or(0),
            )
        };
        now.saturating_sub(changed(self.mtime.max(self.ctime))) < RACY
    }
}

/// What reading one file gave: the item (a skill or a command) or none, and the warnings.
#[derive(Debug, Clone)]
pub(super) struct Outcome<T> {
    pub(super) item: Option<T>,
    pub(super) warnings: Vec<String>,
}

/// One root's files by entry name.
pub(super) type RootFiles<T> = HashMap<String, (FileKey, Outcome<T>)>;

/// The files of the roots discovery went through lately.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    skills: Mutex<HashMap<PathBuf, RootFiles<super::Skill>>>,
    commands: Mutex<HashMap<PathBuf, RootFiles<super::Command>>>,
}

impl Cache {
    pub(super) fn take_skills(&self, root: &Path) -> RootFiles<super::Skill> {
        take(&self.skills, root)
    }

    pub(super) fn put_skills(&self, root: PathBuf, files: RootFiles<super::Skill>) {
        put(&self.skills, root, files);
    }

    pub(super) fn take_commands(&self, root: &Path) -> RootFiles<super::Command> {
        take(&self.commands, root)
    }

    pub(super) fn put_commands(&self, root: PathBuf, files: RootFiles<super::Command>) {
        put(&self.commands, root, files);
    }
}

/// A root's files, taken out while it is gone through (a discovery of the same root at the
/// same time reads its files itself).
fn take<T>(map: &Mutex<HashMap<PathBuf, RootFiles<T>>>, root: &Path) -> RootFiles<T> {
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    map.remove(root).unwrap_or_default()
}

/// Puts back what a root holds now: files gone from it are forgotten with the old map.
fn put<T>(map: &Mutex<HashMap<PathBuf, RootFiles<T>>>, root: PathBuf, files: RootFiles<T>) {
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    if map.len() >= MAX_ROOTS {
        map.clear();
    }
    map.insert(root, files);
}

/// What a root keeps after a pass: the files seen, or, when it had none (it is gone for a
/// while, say), what it held (each file is checked against its key when it comes back).
pub(super) fn kept<T>(before: RootFiles<T>, now: RootFiles<T>) -> RootFiles<T> {
    if now.is_empty() { before } else { now }
}

/// The outcome kept for `file` if it is unchanged since, read by `read` otherwise (and kept
/// in `now` when its times are safe to trust).
pub(super) fn lookup<T: Clone>(
    file: &Path,
    name: &str,
    before: &mut RootFiles<T>,
    now: &mut RootFiles<T>,
    read: impl FnOnce() -> (Option<FileKey>, Outcome<T>),
) -> Outcome<T> {
    let key = std::fs::metadata(file).ok().map(|m| FileKey::of(&m));
    if let Some(key) = key
        && let Some((kept, outcome)) = before.remove(name)
        && kept == key
    {
        now.insert(name.to_owned(), (key, outcome.clone()));
        return outcome;
    }
    let (key, outcome) = read();
    if let Some(key) = key
        && !key.racy(SystemTime::now())
    {
        now.insert(name.to_owned(), (key, outcome.clone()));
    }
    outcome
}
