//! Recording the workspace as a tree: a walk that honours `.gitignore` (in git repositories
//! and elsewhere alike), `lstat`s each file and reads only those whose stat changed since the
//! last walk, as git's index does. After the first walk only the directories inotify saw
//! change are scanned again (`watch`); nothing changed, nothing is built; directories whose
//! entries did not change keep their tree without encoding it again.

use super::objects::{Entry, Objects};
use super::watch::{Changes, Watch};
use gix_hash::ObjectId;
use gix_object::tree::{self, EntryKind};
use gix_object::{Kind, bstr::BString};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Most files one checkpoint records: a workspace with more (a home directory) fails the
/// checkpoint with a reason, rather than walking without end.
pub(super) const MAX_FILES: usize = 200_000;

/// A file whose mtime is this close to the walk may change again within the clock's
/// granularity without its stat changing: it is read again on the next walk.
const RACY: Duration = Duration::from_secs(2);

/// What a checkpoint recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Snap {
    pub(super) tree: ObjectId,
    /// Files over `max_file_bytes` (or unreadable): not recorded, so never restored; with
    /// their size and mtime, to tell whether a round changed them.
    pub(super) skipped: Arc<BTreeMap<Vec<u8>, (u64, i64, i64)>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    mtime: (i64, i64),
    ctime: (i64, i64),
    size: u64,
    ino: u64,
    mode: u32,
}

impl Stat {
    fn of(m: &std::fs::Metadata) -> Self {
        Self {
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            size: m.size(),
            ino: m.ino(),
            mode: m.mode(),
        }
    }

    fn racy(&self, walk: SystemTime) -> bool {
        let at = walk.duration_since(UNIX_EPOCH).unwrap_or_default();
        let mtime = Duration::new(self.mtime.0.max(0) as u64, self.mtime.1.max(0) as u32);
        mtime + RACY >= at
    }
}

/// A file as the last scan found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cached {
    stat: Stat,
    /// Changed within the clock's granularity of the scan: read again whenever its directory
    /// is scanned, whatever its stat says.
    racy: bool,
    /// Its content, or `None` when it was not recorded (too large, unreadable).
    entry: Option<Entry>,
    /// The scan that last found it.
    seen: u64,
}

impl Cached {
    /// What a checkpoint shows of it: its content, or the size and mtime of a skipped file.
    fn shown(&self) -> Result<Entry, (u64, i64, i64)> {
        self.entry
            .ok_or((self.stat.size, self.stat.mtime.0, self.stat.mtime.1))
    }
}

/// What the last scans found, so the next one reads only what changed.
#[derive(Default)]
pub(super) struct Cache {
    /// Every file found, by path (sorted, so a directory's files are one range).
    files: BTreeMap<Vec<u8>, Cached>,
    dirs: HashMap<Vec<u8>, (Vec<tree::Entry>, ObjectId)>,
    /// The directories watched for changes; `None` before the first walk or when given up.
    watch: Option<Watch>,
    /// Watching failed (inotify's limits): every checkpoint walks.
    unwatched: bool,
    /// Directories to scan on the next checkpoint whatever the watch says (something in them
    /// changed within the clock's granularity of the last scan, or while it ran).
    again: BTreeSet<Vec<u8>>,
    scans: u64,
    pub(super) last: Option<Snap>,
}

impl Cache {
    /// Whether a checkpoint now would scan only what the watch saw change.
    pub(super) fn watched(&self) -> bool {
        self.watch.is_some() && self.last.is_some()
    }
}

/// The walk's settings.
pub(super) struct Walk<'a> {
    pub(super) root: &'a Path,
    /// Directories never recorded (agentd's own state, when it lies in the workspace).
    pub(super) exclude: &'a [PathBuf],
    pub(super) max_file_bytes: u64,
}

/// Records the workspace; returns what it recorded and the bytes the store grew by. `whole`
/// walks all of it (an undo's or a redo's view); otherwise only the directories the watch
/// saw change are scanned.
pub(super) fn take(
    walk: &Walk<'_>,
    objects: &Objects,
    cache: &mut Cache,
    whole: bool,
) -> Result<(Snap, u64), String> {
    let result = scan(walk, objects, cache, whole);
    if result.is_err() {
        // A half-done scan leaves nothing to build on.
        *cache = Cache::default();
    }
    result
}

fn scan(
    walk: &Walk<'_>,
    objects: &Objects,
    cache: &mut Cache,
    whole: bool,
) -> Result<(Snap, u64), String> {
    cache.scans += 1;
    let mut scan = Scan {
        walk,
        objects,
        started: SystemTime::now(),
        seen: cache.scans,
        changed: false,
        grew: 0,
        again: BTreeSet::new(),
    };
    // Read before the scan: what changes while it runs is queued for the next one.
    let changes = cache.watch.as_mut().map(Watch::changes);
    match changes {
        Some(Changes::Dirs(mut dirs)) if !whole && cache.last.is_some() => {
            dirs.append(&mut cache.again);
            for dir in dirs {
                scan.dir(cache, &dir)?;
            }
        }
        _ => {
            if cache.watch.is_none() && !cache.unwatched {
                cache.watch = Watch::new();
                cache.unwatched = cache.watch.is_none();
            }
            let mut found = HashSet::new();
            scan.tree(cache, b"", &mut found)?;
            if let Some(watch) = &mut cache.watch {
                watch.retain(&found);
            }
        }
    }
    cache.again = scan.again;
    let grew = scan.grew;
    if let Some(last) = &cache.last
        && !scan.changed
    {
        return Ok((last.clone(), grew));
    }
    let mut grew = grew;
    let mut items = Vec::with_capacity(cache.files.len());
    let mut skipped = BTreeMap::new();
    for (path, file) in &cache.files {
        match file.shown() {
            Ok(entry) => items.push((path.as_slice(), entry)),
            Err(stat) => {
                skipped.insert(path.clone(), stat);
            }
        }
    }
    let mut dirs = HashMap::with_capacity(cache.dirs.len());
    let tree = build(objects, &cache.dirs, &mut dirs, b"", &items, &mut grew)?;
    cache.dirs = dirs;
    let snap = Snap {
        tree,
        skipped: Arc::new(skipped),
    };
    cache.last = Some(snap.clone());
    Ok((snap, grew))
}

/// One scan's work.
struct Scan<'a> {
    walk: &'a Walk<'a>,
    objects: &'a Objects,
    started: SystemTime,
    seen: u64,
    /// Whether any file's content (or a skipped file's stat) changed, or a file came or went.
    changed: bool,
    grew: u64,
    again: BTreeSet<Vec<u8>>,
}

/// A directory's entries as one walk found them.
struct Listing {
    files: Vec<(Vec<u8>, PathBuf, std::fs::FileType, std::fs::Metadata)>,
    /// Directories below it (paths relative to the workspace), with whether each changed
    /// within the clock's granularity.
    dirs: Vec<(Vec<u8>, PathBuf, bool)>,
}

impl Scan<'_> {
    /// Walks directory `rel` (`""`: the workspace): its entries, and every directory below it
    /// when `deep`. `None` when it is no directory now.
    fn list(&self, rel: &[u8], deep: bool) -> Option<Listing> {
        let start = self.walk.root.join(OsStr::from_bytes(rel));
        // The walker follows a starting symlink: a directory swapped for one is not entered.
        let meta = std::fs::symlink_metadata(&start).ok()?;
        if !meta.is_dir() {
            return None;
        }
        let exclude: Vec<PathBuf> = self.walk.exclude.to_vec();
        let walker = ignore::WalkBuilder::new(&start)
            .hidden(false)
            .ignore(false)
            .git_global(false)
            .require_git(false)
            .follow_links(false)
            .max_depth((!deep).then_some(1))
            .filter_entry(move |e| {
                e.file_name() != ".git" && !exclude.iter().any(|x| x.as_path() == e.path())
            })
            .build();
        let mut listing = Listing {
            files: Vec::new(),
            dirs: vec![(
                rel.to_vec(),
                start.clone(),
                Stat::of(&meta).racy(self.started),
            )],
        };
        for item in walker {
            let Ok(item) = item else { continue };
            let Some(file_type) = item.file_type() else {
                continue;
            };
            if item.depth() == 0 {
                continue;
            }
            let Ok(path) = item.path().strip_prefix(self.walk.root) else {
                continue;
            };
            let path = path.as_os_str().as_bytes().to_vec();
            let Ok(meta) = item.metadata() else { continue };
            if file_type.is_dir() {
                let racy = Stat::of(&meta).racy(self.started);
                listing.dirs.push((path, item.into_path(), racy));
            } else if file_type.is_file() || file_type.is_symlink() {
                listing
                    .files
                    .push((path, item.into_path(), file_type, meta));
            }
        }
        Some(listing)
    }

    /// Scans every file under directory `rel` (watching each directory), and forgets the
    /// files that are gone; adds the directories found to `found`.
    fn tree(
        &mut self,
        cache: &mut Cache,
        rel: &[u8],
        found: &mut HashSet<Vec<u8>>,
    ) -> Result<(), String> {
        let listing = self.list(rel, true);
        for (dir, path, racy) in listing.iter().flat_map(|l| &l.dirs) {
            // Watched before its files are looked at; what the walk missed since it listed
            // the directory changed its mtime, which `racy` catches.
            if let Some(watch) = &mut cache.watch
                && !watch.add(path, dir)
            {
                cache.watch = None;
                cache.unwatched = true;
            }
            if *racy {
                self.again.insert(dir.clone());
            }
            found.insert(dir.clone());
        }
        for (path, full, file_type, meta) in listing.into_iter().flat_map(|l| l.files) {
            self.file(cache, path, &full, file_type, &meta)?;
        }
        let prefix = if rel.is_empty() {
            Vec::new()
        } else {
            [rel, b"/"].concat()
        };
        self.sweep(cache, &prefix, |_| false);
        Ok(())
    }

    /// Scans directory `rel`'s own files, and walks the directories in it that are new.
    fn dir(&mut self, cache: &mut Cache, rel: &[u8]) -> Result<(), String> {
        let listing = self.list(rel, false);
        let mut subdirs = HashSet::new();
        if let Some(listing) = listing {
            if listing.dirs.first().is_some_and(|(_, _, racy)| *racy) {
                self.again.insert(rel.to_vec());
            }
            for (path, full, file_type, meta) in listing.files {
                self.file(cache, path, &full, file_type, &meta)?;
            }
            for (dir, _, _) in listing.dirs.into_iter().skip(1) {
                let name =
                    dir[dir.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1)..].to_vec();
                if !cache.watch.as_ref().is_some_and(|w| w.has(&dir)) {
                    let mut found = HashSet::new();
                    self.tree(cache, &dir, &mut found)?;
                }
                subdirs.insert(name);
            }
        }
        let prefix = if rel.is_empty() {
            Vec::new()
        } else {
            [rel, b"/"].concat()
        };
        // Kept: what lies in a directory still here (scanned by its own events).
        self.sweep(cache, &prefix, |rest| {
            rest.iter()
                .position(|&b| b == b'/')
                .is_some_and(|i| subdirs.contains(&rest[..i]))
        });
        Ok(())
    }

    /// Forgets the files under `prefix` this scan did not find, but those `keep` (given the
    /// path after `prefix`) says.
    fn sweep(&mut self, cache: &mut Cache, prefix: &[u8], keep: impl Fn(&[u8]) -> bool) {
        let gone: Vec<Vec<u8>> = cache
            .files
            .range(prefix.to_vec()..)
            .take_while(|(p, _)| p.starts_with(prefix))
            .filter(|(p, f)| f.seen != self.seen && !keep(&p[prefix.len()..]))
            .map(|(p, _)| p.clone())
            .collect();
        self.changed |= !gone.is_empty();
        for path in gone {
            cache.files.remove(&path);
        }
    }

    /// Looks at one file: read (and stored) only when its stat changed.
    fn file(
        &mut self,
        cache: &mut Cache,
        rel: Vec<u8>,
        path: &Path,
        file_type: std::fs::FileType,
        meta: &std::fs::Metadata,
    ) -> Result<(), String> {
        let stat = Stat::of(meta);
        let old = cache.files.get_mut(&rel);
        // An unchanged file costs its `lstat`, nothing else.
        if let Some(old) = old {
            if old.stat == stat && !old.racy {
                old.seen = self.seen;
                return Ok(());
            }
        } else if cache.files.len() >= MAX_FILES {
            return Err(format!(
                "the workspace has more than {MAX_FILES} files that are not ignored; \
                 checkpoints are off for it (ignore what need not be recorded in .gitignore)"
            ));
        }
        let recorded = if file_type.is_symlink() {
            std::fs::read_link(path)
                .ok()
                .map(|target| (EntryKind::Link, target.as_os_str().as_bytes().to_vec()))
        } else if meta.len() > self.walk.max_file_bytes {
            None
        } else {
            read_regular(path, self.walk.max_file_bytes).map(|data| {
                let kind = if stat.mode & 0o111 != 0 {
                    EntryKind::BlobExecutable
                } else {
                    EntryKind::Blob
                };
                (kind, data)
            })
        };
        let entry = match recorded {
            Some((kind, data)) => {
                let (id, n) = self.objects.write(Kind::Blob, &data)?;
                self.grew += n;
                Some(Entry { kind, id })
            }
            None => None,
        };
        let racy = stat.racy(self.started);
        if racy {
            let dir = rel[..rel.iter().rposition(|&b| b == b'/').unwrap_or(0)].to_vec();
            self.again.insert(dir);
        }
        let new = Cached {
            stat,
            racy,
            entry,
            seen: self.seen,
        };
        if let Some(old) = cache.files.insert(rel, new) {
            self.changed |= old.shown() != new.shown();
        } else {
            self.changed = true;
        }
        Ok(())
    }
}

/// Reads a regular file (never through a symlink, never blocking on a FIFO swapped in) of at
/// most `max` bytes; `None` when it cannot be read or grew past `max`.
fn read_regular(path: &Path, max: u64) -> Option<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut data = Vec::new();
    file.take(max + 1).read_to_end(&mut data).ok()?;
    (data.len() as u64 <= max).then_some(data)
}

/// The tree of `items` (sorted, all under `prefix`), and of each directory below it; a
/// directory whose entries equal the last walk's keeps its tree.
fn build(
    objects: &Objects,
    old: &HashMap<Vec<u8>, (Vec<tree::Entry>, ObjectId)>,
    new: &mut HashMap<Vec<u8>, (Vec<tree::Entry>, ObjectId)>,
    prefix: &[u8],
    items: &[(&[u8], Entry)],
    grew: &mut u64,
) -> Result<ObjectId, String> {
    let mut entries = Vec::new();
    let mut i = 0;
    while i < items.len() {
        let rest = &items[i].0[prefix.len()..];
        match rest.iter().position(|&b| b == b'/') {
            None => {
                entries.push(tree::Entry {
                    mode: items[i].1.kind.into(),
                    filename: BString::from(rest),
                    oid: items[i].1.id,
                });
                i += 1;
            }
            Some(slash) => {
                let sub = [prefix, &rest[..=slash]].concat();
                let end = i + items[i..].partition_point(|(p, _)| p.starts_with(&sub));
                let id = build(objects, old, new, &sub, &items[i..end], grew)?;
                entries.push(tree::Entry {
                    mode: EntryKind::Tree.into(),
                    filename: BString::from(&rest[..slash]),
                    oid: id,
                });
                i = end;
            }
        }
    }
    entries.sort();
    if let Some((was, id)) = old.get(prefix)
        && *was == entries
    {
        new.insert(prefix.to_vec(), (entries, *id));
        return Ok(*id);
    }
    let (id, n) = objects.write_tree(entries.clone())?;
    *grew += n;
    new.insert(prefix.to_vec(), (entries, id));
    Ok(id)
}
