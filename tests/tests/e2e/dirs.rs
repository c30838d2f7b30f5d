//! The fixture of the escape tests: a workspace beside a directory outside it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A workspace (a session's cwd) beside a directory outside it holding `victim.txt`; both
/// real paths (no symlinked temp dir).
pub(crate) struct Dirs {
    pub(crate) root: tempfile::TempDir,
    pub(crate) ws: PathBuf,
    pub(crate) outside: PathBuf,
}

impl Dirs {
    pub(crate) fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(root.path()).unwrap();
        let (ws, outside) = (real.join("ws"), real.join("outside"));
        std::fs::create_dir(&ws).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("victim.txt"), "original\n").unwrap();
        Self { root, ws, outside }
    }

    /// Every file directly in `dir` with its content.
    pub(crate) fn files(dir: &Path) -> BTreeMap<String, String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read_to_string(e.path()).unwrap(),
                )
            })
            .collect()
    }

    /// Every entry under `dir` (recursively, symlinks not followed), with a file's content.
    pub(crate) fn tree(dir: &Path) -> BTreeMap<String, String> {
        let mut found = BTreeMap::new();
        let mut stack = vec![dir.to_owned()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let path = e.path();
                let name = path.strip_prefix(dir).unwrap().display().to_string();
                let kind = e.file_type().unwrap();
                if kind.is_dir() {
                    stack.push(path);
                    found.insert(name, "<dir>".into());
                } else if kind.is_file() {
                    found.insert(name, std::fs::read_to_string(&path).unwrap());
                } else {
                    found.insert(name, "<other>".into());
                }
            }
        }
        found
    }
}

/// What the outside directory holds when nothing reached it.
pub(crate) fn untouched() -> BTreeMap<String, String> {
    BTreeMap::from([("victim.txt".to_owned(), "original\n".to_owned())])
}
