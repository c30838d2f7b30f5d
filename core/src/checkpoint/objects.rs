//! The shadow object store: git's loose-object format (zlib, SHA-1 names) through gitoxide,
//! in a directory of agentd's own, so identical contents are stored once across checkpoints.
//! Nothing here ever opens the user's `.git`.

use gix_hash::ObjectId;
use gix_object::tree::EntryKind;
use gix_object::{Kind, Write as _, WriteTo as _};
use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

pub(super) const HASH: gix_hash::Kind = gix_hash::Kind::Sha1;

/// Trees nest at most this deep: a hostile workspace (or a damaged store) cannot make a
/// flatten recurse without end.
const MAX_DEPTH: usize = 256;

/// One recorded file: a regular file (executable or not) or a symlink (its target as the
/// blob), by content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) kind: EntryKind,
    pub(super) id: ObjectId,
}

/// A checkpoint's files by path (relative to the workspace, `/`-separated bytes).
pub(super) type Files = BTreeMap<Vec<u8>, Entry>;

pub(super) struct Objects {
    store: gix_odb::loose::Store,
    dir: PathBuf,
}

impl Objects {
    /// The store in `dir` (made private to the user when missing).
    pub(super) fn open(dir: &Path) -> Result<Self, String> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(Self {
            store: gix_odb::loose::Store::at(dir, HASH),
            dir: dir.to_owned(),
        })
    }

    /// Stores `data` as an object of `kind` unless it is there already; returns its id and
    /// the bytes the store grew by.
    pub(super) fn write(&self, kind: Kind, data: &[u8]) -> Result<(ObjectId, u64), String> {
        let id = gix_object::compute_hash(HASH, kind, data).map_err(|e| e.to_string())?;
        if self.store.contains(&id) {
            return Ok((id, 0));
        }
        self.store
            .write_buf_with_known_id(kind, data, id)
            .map_err(|e| format!("cannot write to the checkpoint store: {e}"))?;
        let grew = fs::metadata(self.store.object_path(&id)).map_or(0, |m| m.len());
        Ok((id, grew))
    }

    /// Stores a tree of `entries` (in any order).
    pub(super) fn write_tree(
        &self,
        mut entries: Vec<gix_object::tree::Entry>,
    ) -> Result<(ObjectId, u64), String> {
        entries.sort();
        let mut buf = Vec::new();
        gix_object::Tree { entries }
            .write_to(&mut buf)
            .map_err(|e| e.to_string())?;
        self.write(Kind::Tree, &buf)
    }

    /// The content of object `id`, which must be of `kind`.
    pub(super) fn read(&self, id: &ObjectId, kind: Kind) -> Result<Vec<u8>, String> {
        let mut buf = Vec::new();
        match self.store.try_find(id, &mut buf) {
            Ok(Some(data)) if data.kind == kind => Ok(data.data.to_vec()),
            Ok(Some(data)) => Err(format!("object {id} is a {}, not a {kind}", data.kind)),
            Ok(None) => Err(format!("object {id} is missing from the checkpoint store")),
            Err(e) => Err(format!("cannot read object {id}: {e}")),
        }
    }

    /// Every file of tree `id`, by path.
    pub(super) fn flatten(&self, id: &ObjectId) -> Result<Files, String> {
        let mut files = Files::new();
        self.flatten_into(id, &mut Vec::new(), &mut files, 0)?;
        Ok(files)
    }

    fn flatten_into(
        &self,
        id: &ObjectId,
        prefix: &mut Vec<u8>,
        files: &mut Files,
        depth: usize,
    ) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("the checkpoint's trees nest too deep".into());
        }
        let data = self.read(id, Kind::Tree)?;
        let tree = gix_object::TreeRef::from_bytes(&data, HASH).map_err(|e| e.to_string())?;
        for entry in tree.entries {
            let len = prefix.len();
            prefix.extend_from_slice(entry.filename);
            let kind = entry.mode.kind();
            if kind == EntryKind::Tree {
                prefix.push(b'/');
                self.flatten_into(&entry.oid.to_owned(), prefix, files, depth + 1)?;
            } else {
                files.insert(
                    prefix.clone(),
                    Entry {
                        kind,
                        id: entry.oid.to_owned(),
                    },
                );
            }
            prefix.truncate(len);
        }
        Ok(())
    }

    /// Adds tree `id` and every object under it to `keep`.
    pub(super) fn reach(&self, id: &ObjectId, keep: &mut HashSet<ObjectId>) -> Result<(), String> {
        if !keep.insert(*id) {
            return Ok(());
        }
        let data = self.read(id, Kind::Tree)?;
        let tree = gix_object::TreeRef::from_bytes(&data, HASH).map_err(|e| e.to_string())?;
        for entry in tree.entries {
            if entry.mode.kind() == EntryKind::Tree {
                self.reach(&entry.oid.to_owned(), keep)?;
            } else {
                keep.insert(entry.oid.to_owned());
            }
        }
        Ok(())
    }

    /// Removes every object not in `keep`; returns the bytes freed.
    pub(super) fn sweep(&self, keep: &HashSet<ObjectId>) -> u64 {
        let mut freed = 0;
        for (path, id, len) in self.each() {
            if id.is_none_or(|id| !keep.contains(&id)) && fs::remove_file(&path).is_ok() {
                freed += len;
            }
        }
        freed
    }

    /// The bytes the store holds.
    pub(super) fn size(&self) -> u64 {
        self.each().map(|(_, _, len)| len).sum()
    }

    /// Every file of the store: its path, the object it holds (`None`: a leftover temporary
    /// file) and its size.
    fn each(&self) -> impl Iterator<Item = (PathBuf, Option<ObjectId>, u64)> {
        fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|d| d.file_type().is_ok_and(|t| t.is_dir()))
            .flat_map(|d| {
                let prefix = d.file_name().to_string_lossy().into_owned();
                fs::read_dir(d.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(move |f| {
                        let hex = format!("{prefix}{}", f.file_name().to_string_lossy());
                        let len = f.metadata().map_or(0, |m| m.len());
                        (f.path(), ObjectId::from_hex(hex.as_bytes()).ok(), len)
                    })
            })
    }
}
