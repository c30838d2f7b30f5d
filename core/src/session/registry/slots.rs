//! The map of sessions: each slot holds a session stored and not loaded, one being loaded or
//! unloaded, a live one, or a damaged one. Loading and unloading happen outside the map's
//! locks: the slot is marked busy, the disk work runs in its own task, and lookups of a busy
//! slot wait for it. Idle, unwatched sessions are unloaded after a while.
//!
//! A stored session whose record cannot be read stays in the map as *damaged*: listed with
//! the reason, refused with `session_damaged` by every lookup, never loaded or written, and
//! removed only by [`Registry::delete`].

use super::{Registry, crashed, storage};
use crate::session::{Error, Session};
use crate::store::SessionRecord;
use agentd_proto::{
    DaemonEvent, DamagedSession, SessionEndReason, SessionId, SessionState, SessionSummary,
};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// Set when a busy slot's load or unload is over: `Some(Err)` if a load failed.
type Done = watch::Receiver<Option<Result<(), Error>>>;

/// A session as the registry holds it.
pub(super) enum Slot {
    /// Stored and not loaded: only its record is in memory.
    Stored(Box<SessionRecord>),
    /// Being loaded or unloaded; look again when it is done.
    Busy(Box<SessionRecord>, Done),
    /// Loaded and running.
    Live(Arc<Session>),
    /// Stored with a record that cannot be read: nothing but a delete touches it.
    Damaged(Box<DamagedSession>),
}

/// Unloads sessions idle for `after`, checking a few times per period, until shutdown.
pub(super) async fn evict_idle(registry: Weak<Registry>, after: Duration) {
    let period = (after / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
    let Some(cancel) = registry.upgrade().map(|r| r.cancel.clone()) else {
        return;
    };
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(period) => {}
        }
        let Some(registry) = registry.upgrade() else {
            return;
        };
        for id in registry.idle_for(after) {
            registry.evict(&id).await;
        }
    }
}

impl Registry {
    /// Lists the stored sessions; returns those that were processing when the daemon stopped.
    pub(super) fn load_stored(&self) -> Vec<SessionId> {
        let Some(store) = &self.store else {
            return Vec::new();
        };
        let loaded = match store.load() {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("cannot list stored sessions: {e}");
                return Vec::new();
            }
        };
        for damaged in loaded.damaged {
            tracing::warn!(
                session = %damaged.session_id,
                "{}: {}; the session cannot be loaded (session/delete removes it)",
                damaged.path,
                damaged.reason
            );
            self.sessions
                .insert(damaged.session_id.clone(), Slot::Damaged(Box::new(damaged)));
        }
        let mut interrupted = Vec::new();
        for record in loaded.records {
            if record.state.is_working() || record.open {
                interrupted.push(record.id.clone());
            }
            self.sessions
                .insert(record.id.clone(), Slot::Stored(Box::new(record)));
        }
        interrupted
    }

    /// Closes a session if it is open and deletes it with everything stored about it, and
    /// its worktree when nothing there would be lost; returns why the worktree was kept. A
    /// damaged session's directory is removed as it is.
    pub async fn delete(&self, id: &SessionId) -> Result<Option<String>, Error> {
        if matches!(self.sessions.get(id).as_deref(), Some(Slot::Damaged(_))) {
            return self.remove(id).await.map(|()| None);
        }
        let session = self.get(id).await?;
        let worktree = session.worktree().cloned();
        session.close(SessionEndReason::Deleted).await;
        // Nothing may be written into the directory while it is removed: an unloaded session
        // has written everything; a watched one keeps its task for its subscribers, and
        // writes nothing after what it has queued.
        if session.evict().await.is_none() {
            session.saved().await;
        }
        drop(session);
        self.remove(id).await?;
        Ok(match worktree {
            Some(tree) => {
                let options = self.local_options(&self.current.load().config);
                crate::worktree::remove(&tree, options).await.err()
            }
            None => None,
        })
    }

    /// Removes the session's directory, then its slot, and says so on the daemon's stream.
    async fn remove(&self, id: &SessionId) -> Result<(), Error> {
        if let Some(store) = &self.store {
            let (store, id) = (store.clone(), id.clone());
            tokio::task::spawn_blocking(move || store.delete(&id))
                .await
                .map_err(crashed)?
                .map_err(storage)?;
        }
        // Its checkpoints went with its directory.
        if let Some(budget) = &self.checkpoints {
            budget.forget(&id.0);
        }
        self.sessions.remove(id);
        let _ = self.daemon_events.send(DaemonEvent::SessionDeleted {
            session_id: id.clone(),
        });
        Ok(())
    }

    /// The session with this id, loaded from the store on first use.
    pub async fn get(&self, id: &SessionId) -> Result<Arc<Session>, Error> {
        loop {
            let mut done = {
                let mut slot = self
                    .sessions
                    .get_mut(id)
                    .ok_or_else(|| Error::NotFound(id.clone()))?;
                match &*slot {
                    Slot::Live(s) => return Ok(s.clone()),
                    Slot::Damaged(d) => return Err(Error::Damaged(d.clone())),
                    Slot::Busy(_, done) => done.clone(),
                    Slot::Stored(record) => {
                        let record = record.clone();
                        let (tx, rx) = watch::channel(None);
                        *slot = Slot::Busy(record.clone(), rx.clone());
                        let me = self.me.upgrade().ok_or(Error::ShuttingDown)?;
                        // Its own task: a caller that goes away must not leave the slot busy.
                        tokio::spawn(async move { me.load(record, tx).await });
                        rx
                    }
                }
            };
            if let Ok(result) = done.wait_for(Option::is_some).await
                && let Some(Err(e)) = &*result
            {
                return Err(e.clone());
            }
        }
    }

    async fn load(
        &self,
        record: Box<SessionRecord>,
        done: watch::Sender<Option<Result<(), Error>>>,
    ) {
        let id = record.id.clone();
        let result = self.restore((*record).clone()).await;
        let outcome = result.as_ref().map(|_| ()).map_err(Clone::clone);
        if let Err(e) = &outcome {
            tracing::error!(session = %id, "cannot load the session: {e}");
        }
        if let Some(mut slot) = self.sessions.get_mut(&id) {
            *slot = match result {
                Ok(session) => Slot::Live(session),
                Err(_) => Slot::Stored(record),
            };
        }
        done.send_replace(Some(outcome));
    }

    /// Unloads `id` if nothing but the registry holds it and its task agrees (idle or closed,
    /// unwatched).
    async fn evict(&self, id: &SessionId) {
        let (session, done) = {
            let Some(mut slot) = self.sessions.get_mut(id) else {
                return;
            };
            let Slot::Live(session) = &*slot else {
                return;
            };
            if Arc::strong_count(session) != 1 {
                return;
            }
            let session = session.clone();
            let (tx, rx) = watch::channel(None);
            *slot = Slot::Busy(Box::new(session.record()), rx);
            (session, tx)
        };
        let unloaded = session.evict().await;
        if let Some(mut slot) = self.sessions.get_mut(id) {
            *slot = match unloaded {
                Some(record) => {
                    tracing::debug!(session = %id, "unloaded an idle session");
                    Slot::Stored(Box::new(record))
                }
                None => Slot::Live(session),
            };
        }
        drop(done);
    }

    /// Every session's summary, newest first.
    pub fn summaries(&self) -> Vec<SessionSummary> {
        let mut all: Vec<SessionSummary> = self
            .sessions
            .iter()
            .filter_map(|slot| match slot.value() {
                Slot::Live(s) => Some(s.summary()),
                Slot::Stored(r) | Slot::Busy(r, _) => Some(r.summary()),
                Slot::Damaged(_) => None,
            })
            .collect();
        all.sort_by(|a, b| b.created.cmp(&a.created));
        all
    }

    /// Every damaged session, by id.
    pub fn damaged(&self) -> Vec<DamagedSession> {
        let mut all: Vec<DamagedSession> = self
            .sessions
            .iter()
            .filter_map(|slot| match slot.value() {
                Slot::Damaged(d) => Some((**d).clone()),
                _ => None,
            })
            .collect();
        all.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        all
    }

    pub(super) fn live(&self) -> Vec<Arc<Session>> {
        self.sessions
            .iter()
            .filter_map(|slot| match slot.value() {
                Slot::Live(s) => Some(s.clone()),
                Slot::Stored(_) | Slot::Busy(..) | Slot::Damaged(_) => None,
            })
            .collect()
    }

    /// How many sessions there are, how many are processing, and how many are loaded.
    pub fn counts(&self) -> (usize, usize) {
        let processing = self
            .live()
            .iter()
            .filter(|s| s.state().is_working())
            .count();
        (self.sessions.len(), processing)
    }

    /// How many sessions are loaded (the rest cost only their record).
    pub fn loaded(&self) -> usize {
        self.sessions
            .iter()
            .filter(|slot| matches!(slot.value(), Slot::Live(_)))
            .count()
    }

    /// The unused sessions to unload: loaded, held only by the registry, idle or closed,
    /// untouched for `after`.
    fn idle_for(&self, after: Duration) -> Vec<SessionId> {
        self.sessions
            .iter()
            .filter_map(|slot| match slot.value() {
                Slot::Live(s)
                    if Arc::strong_count(s) == 1
                        && matches!(s.state(), SessionState::Idle | SessionState::Closed)
                        && s.view().active.elapsed() >= after =>
                {
                    Some(slot.key().clone())
                }
                _ => None,
            })
            .collect()
    }
}
