//! `[checkpoints] max_total_bytes`: the disk all sessions' checkpoint stores take together.
//! When a checkpoint grows the total past it, the oldest rounds go first, whichever session
//! (loaded or not) they belong to, and the objects nothing else needs are removed.

use super::{Inner, Round, Store};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// One per daemon, shared by every session's checkpoints.
pub(crate) struct Budget {
    /// The store's sessions directory: each session's checkpoints are in `ID/checkpoints`.
    sessions: PathBuf,
    state: Mutex<State>,
}

struct State {
    max: u64,
    /// Every store's size once the sessions directory was scanned.
    stores: Option<HashMap<PathBuf, Use>>,
}

struct Use {
    bytes: u64,
    /// Its session's checkpoints while it is loaded.
    live: Weak<Inner>,
}

impl Budget {
    /// The budget of the stores under `sessions` (the store's sessions directory).
    pub(crate) fn new(sessions: PathBuf, max: u64) -> Arc<Self> {
        Arc::new(Self {
            sessions,
            state: Mutex::new(State { max, stores: None }),
        })
    }

    /// The cap, as the config says now.
    pub(crate) fn set_max(&self, max: u64) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .max = max;
    }

    /// Where session `id`'s checkpoints are.
    pub(super) fn dir_of(&self, id: &str) -> PathBuf {
        self.sessions.join(id).join("checkpoints")
    }

    /// Notes that `inner`'s store (at `dir`) holds `bytes`, then removes the oldest rounds
    /// while the total is over the cap. Called with no store locked (it may lock any of
    /// them, without waiting: a busy store is passed over).
    pub(super) fn charge(&self, dir: &Path, bytes: u64, inner: &Arc<Inner>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let max = state.max;
        let stores = state.stores.get_or_insert_with(|| scan(&self.sessions));
        stores.insert(
            dir.to_owned(),
            Use {
                bytes,
                live: Arc::downgrade(inner),
            },
        );
        while stores.values().map(|u| u.bytes).sum::<u64>() > max {
            let Some((dir, freed)) = prune_oldest(stores) else {
                break;
            };
            if let Some(store) = stores.get_mut(&dir) {
                store.bytes = store.bytes.saturating_sub(freed);
            }
        }
    }

    /// Forgets a store (its session was deleted).
    pub(crate) fn forget(&self, id: &str) {
        let dir = self.dir_of(id);
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(stores) = &mut state.stores {
            stores.remove(&dir);
        }
    }
}

/// The size of every session's store.
fn scan(sessions: &Path) -> HashMap<PathBuf, Use> {
    std::fs::read_dir(sessions)
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join("checkpoints"))
        .filter(|dir| dir.is_dir())
        .filter_map(|dir| {
            let store = Store::open(&dir).ok()?;
            Some((
                dir,
                Use {
                    bytes: store.bytes,
                    live: Weak::new(),
                },
            ))
        })
        .collect()
}

/// Removes the oldest round of all stores; returns whose it was and the bytes freed, or
/// `None` when no store has a round it can give up.
fn prune_oldest(stores: &HashMap<PathBuf, Use>) -> Option<(PathBuf, u64)> {
    let mut oldest: Option<(u64, &PathBuf)> = None;
    for (dir, store) in stores {
        let first = match store.live.upgrade() {
            Some(inner) => inner
                .state
                .try_lock()
                .ok()
                .and_then(|s| s.as_ref().and_then(|s| s.rounds.first().map(|r| r.at))),
            None => Store::first_round(dir).map(|r: Round| r.at),
        };
        if let Some(at) = first
            && oldest.is_none_or(|(o, _)| at < o)
        {
            oldest = Some((at, dir));
        }
    }
    let (_, dir) = oldest?;
    let freed = match stores[dir].live.upgrade() {
        Some(inner) => {
            let mut state = inner.state.try_lock().ok()?;
            state.as_mut()?.prune_first()
        }
        None => Store::open(dir).ok()?.prune_first(),
    };
    Some((dir.clone(), freed))
}
