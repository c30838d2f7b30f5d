//! Recording the workspace as a tree: one walk that honours `.gitignore` (in git
//! repositories and elsewhere alike), `lstat`s each file and reads only those whose stat
//! changed since the last walk, as git's index does; directories whose entries did not change
//! keep their tree without encoding it again.

use super::objects::{Entry, Objects};
use gix_hash::ObjectId;
use gix_object::tree::{self, EntryKind};
use gix_object::{Kind, bstr::BString};
use std::collections::{BTreeMap, HashMap};
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

/// What the last walk found, so the next one reads only what changed.
#[derive(Default)]
pub(super) struct Cache {
    files: HashMap<Vec<u8>, (Stat, Entry)>,
    dirs: HashMap<Vec<u8>, (Vec<tree::Entry>, ObjectId)>,
    pub(super) last: Option<Snap>,
}

/// The walk's settings.
pub(super) struct Walk<'a> {
    pub(super) root: &'a Path,
    /// Directories never recorded (agentd's own state, when it lies in the workspace).
    pub(super) exclude: &'a [PathBuf],
    pub(super) max_file_bytes: u64,
}

/// Records the workspace; returns what it recorded and the bytes the store grew by.
pub(super) fn take(
    walk: &Walk<'_>,
    objects: &Objects,
    cache: &mut Cache,
) -> Result<(Snap, u64), String> {
    let started = SystemTime::now();
    let exclude: Vec<PathBuf> = walk.exclude.to_vec();
    let walker = ignore::WalkBuilder::new(walk.root)
        .hidden(false)
        .ignore(false)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(move |e| {
            e.file_name() != ".git" && !exclude.iter().any(|x| x.as_path() == e.path())
        })
        .build();
    // Files not kept in the cache (read just now, and racy): with `next`, every file found.
    let mut fresh = Vec::new();
    let mut skipped = BTreeMap::new();
    let mut next = HashMap::with_capacity(cache.files.len());
    let mut changed = false;
    let mut grew = 0;
    for item in walker {
        let Ok(item) = item else { continue };
        let Some(file_type) = item.file_type() else {
            continue;
        };
        if !(file_type.is_file() || file_type.is_symlink()) {
            continue;
        }
        let Ok(rel) = item.path().strip_prefix(walk.root) else {
            continue;
        };
        let rel = rel.as_os_str().as_bytes();
        if next.len() + fresh.len() + skipped.len() >= MAX_FILES {
            return Err(format!(
                "the workspace has more than {MAX_FILES} files that are not ignored; \
                 checkpoints are off for it (ignore what need not be recorded in .gitignore)"
            ));
        }
        let Ok(meta) = item.metadata() else { continue };
        let stat = Stat::of(&meta);
        // An unchanged file costs its `lstat` and a move of its cache entry, nothing else.
        if let Some((rel, (cached, entry))) = cache.files.remove_entry(rel)
            && cached == stat
        {
            next.insert(rel, (stat, entry));
            continue;
        }
        let rel = rel.to_vec();
        changed = true;
        let recorded = if file_type.is_symlink() {
            std::fs::read_link(item.path())
                .ok()
                .map(|target| (EntryKind::Link, target.as_os_str().as_bytes().to_vec()))
        } else if meta.len() > walk.max_file_bytes {
            None
        } else {
            read_regular(item.path(), walk.max_file_bytes).map(|data| {
                let kind = if stat.mode & 0o111 != 0 {
                    EntryKind::BlobExecutable
                } else {
                    EntryKind::Blob
                };
                (kind, data)
            })
        };
        let Some((kind, data)) = recorded else {
            skipped.insert(rel, (stat.size, stat.mtime.0, stat.mtime.1));
            continue;
        };
        let (id, n) = objects.write(Kind::Blob, &data)?;
        grew += n;
        let entry = Entry { kind, id };
        if stat.racy(started) {
            fresh.push((rel, entry));
        } else {
            next.insert(rel, (stat, entry));
        }
    }
    // A path the last walk had and this one did not find was removed.
    changed |= !cache.files.is_empty();
    if let Some(last) = &cache.last
        && !changed
        && *last.skipped == skipped
    {
        cache.files = next;
        return Ok((last.clone(), grew));
    }
    let mut items: Vec<(Vec<u8>, Entry)> = fresh;
    items.extend(next.iter().map(|(p, (_, e))| (p.clone(), *e)));
    items.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    cache.files = next;
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
    items: &[(Vec<u8>, Entry)],
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
