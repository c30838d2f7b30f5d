//! `containers.json` in the state directory: the session containers that may exist, each its
//! engine and name, written before the container is created and cleared once it is removed.
//! The next start sweeps only the engines named there (remote ones too), so a daemon that
//! never made a container never connects to an engine, and one killed with `kill -9` has
//! what it left removed wherever it was.
//!
//! Changes are rare (a container's creation and removal, each an engine request of tens of
//! milliseconds), so the file is rewritten whole, to a temporary name renamed over it, while
//! the list's lock is held (no await inside it).

use super::engine::EngineAddress;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Mutex;

const FILE: &str = "containers.json";
const FILE_TMP: &str = ".containers.json.tmp";
/// More entries than this in a record read at start are not trusted (a damaged file).
const MAX_ENTRIES: usize = 10_000;
/// A larger record is not read.
const MAX_BYTES: u64 = 4 << 20;

/// One container that may exist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// The engine it is on.
    pub(crate) engine: EngineAddress,
    /// Its name there (unique on the engine; given before it exists).
    pub(crate) name: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    containers: Vec<Entry>,
}

/// The record: the containers this daemon may have left, its earlier runs' until swept.
pub(crate) struct Record {
    /// `None`: sessions are not stored (an embedded registry), nothing is written.
    dir: Option<PathBuf>,
    entries: Mutex<Vec<Entry>>,
}

impl Record {
    /// The record in `dir`, holding what earlier runs left there; `None`: an empty one that
    /// is never written.
    pub(crate) fn open(dir: Option<PathBuf>) -> Self {
        let entries = dir
            .as_ref()
            .map(|d| read(&d.join(FILE)))
            .unwrap_or_default();
        Self {
            dir,
            entries: Mutex::new(entries),
        }
    }

    /// What the record holds now.
    pub(crate) fn entries(&self) -> Vec<Entry> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Adds `entry`, on disk before this returns: a container is created only once it is
    /// recorded.
    pub(crate) fn add(&self, entry: Entry) -> std::io::Result<()> {
        self.change(|entries| entries.push(entry))
    }

    /// Removes every entry `gone` says is gone.
    pub(crate) fn remove(&self, gone: impl Fn(&Entry) -> bool) {
        if let Err(e) = self.change(|entries| entries.retain(|e| !gone(e))) {
            tracing::warn!("cannot update the container record: {e}");
        }
    }

    fn change(&self, change: impl FnOnce(&mut Vec<Entry>)) -> std::io::Result<()> {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = entries.len();
        change(&mut entries);
        let Some(dir) = &self.dir else { return Ok(()) };
        if entries.is_empty() && before == 0 {
            return Ok(());
        }
        std::fs::create_dir_all(dir)?;
        let file = File {
            containers: entries.clone(),
        };
        let tmp = dir.join(FILE_TMP);
        std::fs::write(
            &tmp,
            serde_json::to_vec(&file).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(&tmp, dir.join(FILE))
    }
}

/// The entries of the record at `path`; a missing, oversized or damaged one holds none (and
/// says so in the log).
fn read(path: &std::path::Path) -> Vec<Entry> {
    use std::io::Read;
    let mut bytes = Vec::new();
    match std::fs::File::open(path) {
        Ok(file) => {
            if let Err(e) = file.take(MAX_BYTES + 1).read_to_end(&mut bytes) {
                tracing::warn!("cannot read {}: {e}", path.display());
                return Vec::new();
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            tracing::warn!("cannot read {}: {e}", path.display());
            return Vec::new();
        }
    }
    if bytes.len() as u64 > MAX_BYTES {
        tracing::warn!(
            "{} is larger than {MAX_BYTES} bytes: ignored",
            path.display()
        );
        return Vec::new();
    }
    match serde_json::from_slice::<File>(&bytes) {
        Ok(file) if file.containers.len() <= MAX_ENTRIES => file.containers,
        Ok(_) => {
            tracing::warn!("{} names too many containers: ignored", path.display());
            Vec::new()
        }
        Err(e) => {
            tracing::warn!("{} is damaged ({e}): ignored", path.display());
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> Entry {
        Entry {
            engine: EngineAddress {
                host: "tcp://example:2376".into(),
                certs: Some("/certs".into()),
                ssh: None,
            },
            name: name.into(),
        }
    }

    #[test]
    fn entries_outlive_the_daemon_until_removed() {
        let dir = tempfile::tempdir().unwrap();
        let record = Record::open(Some(dir.path().to_owned()));
        assert!(record.entries().is_empty());
        assert!(
            !dir.path().join(FILE).exists(),
            "nothing written while nothing happened"
        );
        record.add(entry("a")).unwrap();
        record.add(entry("b")).unwrap();
        let reopened = Record::open(Some(dir.path().to_owned()));
        assert_eq!(reopened.entries(), vec![entry("a"), entry("b")]);
        reopened.remove(|e| e.name == "a");
        assert_eq!(
            Record::open(Some(dir.path().to_owned())).entries(),
            vec![entry("b")]
        );
    }

    #[test]
    fn a_damaged_record_holds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        for bad in [&b"{not json"[..], b"{\"containers\": 5}", b"[]"] {
            std::fs::write(dir.path().join(FILE), bad).unwrap();
            assert!(
                Record::open(Some(dir.path().to_owned()))
                    .entries()
                    .is_empty()
            );
        }
    }
}
