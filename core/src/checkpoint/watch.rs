//! Which directories changed since the last checkpoint, from inotify (as watchman and git's
//! fsmonitor do), so that a checkpoint re-reads those only instead of walking the workspace.
//! Every directory the walk records is watched; the kernel queues one event per change, in
//! order, whoever made it (the shell's children included: a watch is on the inode, so the
//! sandbox's view of the same files is seen too). Whatever the events cannot say exactly (a
//! queue overflow, a directory moved, a `.gitignore` changed, more events than we read)
//! asks for a whole walk, which also runs for every undo and redo: a change inotify never
//! reports (another host's write on a network filesystem, a write through a mapping) is
//! found there, and an undo refuses a file it finds changed that way rather than
//! overwriting it.

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Most directories one session watches (each costs the kernel about 1 KiB, and the user has
/// `fs.inotify.max_user_watches` for all programs); a larger workspace is walked each time.
const MAX_WATCHES: usize = 20_000;
/// Most events one checkpoint reads: a process writing without pause cannot keep it reading.
const MAX_EVENTS: usize = 100_000;

/// One session's watches: a directory by its path relative to the workspace (`""` is the
/// workspace, `a/b` below it).
pub(super) struct Watch {
    fd: Inotify,
    by_wd: HashMap<WatchDescriptor, Vec<u8>>,
    by_path: HashMap<Vec<u8>, WatchDescriptor>,
}

/// What the events since the last read say.
pub(super) enum Changes {
    /// Only these directories' entries (files added, removed or changed in them) changed.
    Dirs(BTreeSet<Vec<u8>>),
    /// Something a directory list cannot say: walk everything.
    Unknown,
}

fn mask() -> AddWatchFlags {
    AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_ONLYDIR
        | AddWatchFlags::IN_DONT_FOLLOW
}

/// `child`'s path in `dir`.
pub(super) fn join(dir: &[u8], child: &[u8]) -> Vec<u8> {
    if dir.is_empty() {
        child.to_vec()
    } else {
        [dir, b"/", child].concat()
    }
}

impl Watch {
    /// A new watch with nothing watched yet; `None` when inotify is unavailable.
    pub(super) fn new() -> Option<Self> {
        let fd = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
        Some(Self {
            fd,
            by_wd: HashMap::new(),
            by_path: HashMap::new(),
        })
    }

    /// Whether directory `rel` is watched.
    pub(super) fn has(&self, rel: &[u8]) -> bool {
        self.by_path.contains_key(rel)
    }

    /// Watches directory `path` (`rel` in the workspace); false when it cannot be watched
    /// (the limits), and then the watch should be given up.
    pub(super) fn add(&mut self, path: &Path, rel: &[u8]) -> bool {
        if self.by_path.len() >= MAX_WATCHES && !self.by_path.contains_key(rel) {
            return false;
        }
        match self.fd.add_watch(path.as_os_str().as_bytes(), mask()) {
            Ok(wd) => {
                if let Some(old) = self.by_wd.insert(wd, rel.to_vec())
                    && old != rel
                {
                    self.by_path.remove(&old);
                }
                self.by_path.insert(rel.to_vec(), wd);
                true
            }
            // Gone already (or no longer a directory): its parent's event says so.
            Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => true,
            Err(_) => false,
        }
    }

    /// Stops watching every directory not in `kept` (after a whole walk: those it did not
    /// find any more).
    pub(super) fn retain(&mut self, kept: &HashSet<Vec<u8>>) {
        let gone: Vec<Vec<u8>> = self
            .by_path
            .keys()
            .filter(|p| !kept.contains(*p))
            .cloned()
            .collect();
        for path in gone {
            self.forget(&path);
        }
    }

    fn forget(&mut self, rel: &[u8]) {
        if let Some(wd) = self.by_path.remove(rel) {
            self.by_wd.remove(&wd);
            let _ = self.fd.rm_watch(wd);
        }
    }

    /// Reads every event queued since the last call.
    pub(super) fn changes(&mut self) -> Changes {
        let mut dirs = BTreeSet::new();
        let mut unknown = false;
        let mut read = 0;
        loop {
            let events = match self.fd.read_events() {
                Ok(events) if !events.is_empty() => events,
                Ok(_) | Err(nix::errno::Errno::EAGAIN) => break,
                Err(_) => return Changes::Unknown,
            };
            read += events.len();
            for event in events {
                if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    unknown = true;
                    continue;
                }
                let Some(dir) = self.by_wd.get(&event.wd).cloned() else {
                    // A directory no longer watched.
                    continue;
                };
                if event.mask.contains(AddWatchFlags::IN_IGNORED) {
                    self.by_wd.remove(&event.wd);
                    if self.by_path.get(&dir) == Some(&event.wd) {
                        self.by_path.remove(&dir);
                    }
                    continue;
                }
                let Some(name) = event.name else {
                    // The directory itself was moved or removed: the workspace's own is
                    // unknown ground; another's parent has an event of its own.
                    unknown |= dir.is_empty()
                        && event.mask.intersects(
                            AddWatchFlags::IN_DELETE_SELF | AddWatchFlags::IN_MOVE_SELF,
                        );
                    continue;
                };
                let name = name.as_bytes();
                let is_dir = event.mask.contains(AddWatchFlags::IN_ISDIR);
                // A moved directory takes the watches below it along, under paths that no
                // longer hold; a new ignore file changes what is recorded anywhere below.
                unknown |= is_dir && event.mask.intersects(AddWatchFlags::IN_MOVE)
                    || name == b".gitignore";
                if is_dir {
                    // A directory made or removed here: the next scan walks what is there
                    // now as new (watching it anew).
                    self.forget(&join(&dir, name));
                }
                dirs.insert(dir);
            }
            if unknown || read > MAX_EVENTS {
                // What is still queued is read with the next checkpoint, after this walk.
                return Changes::Unknown;
            }
        }
        if unknown {
            Changes::Unknown
        } else {
            Changes::Dirs(dirs)
        }
    }
}
