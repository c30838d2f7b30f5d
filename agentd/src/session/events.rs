//! A session's event log: every event gets the next `seq`, is appended to the session's
//! `events.jsonl` (when it has one), kept in memory for replay, and broadcast to live
//! subscribers. Replay and live delivery are joined under one lock, so a subscriber sees every
//! event exactly once and in order. Events from before the session was loaded are replayed
//! from the file.

use crate::store::SessionFiles;
use agentd_proto::{Event, EventBody, SessionId};
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// How many events a live subscriber may fall behind before it is dropped with a `lagged`
/// notice. The buffer holds shared pointers, so its memory does not grow per subscriber.
pub const LIVE_BUFFER: usize = 1024;

struct Inner {
    /// Events since the log was opened (seq `stored + 1` on).
    events: Vec<Arc<Event>>,
    updated: String,
    /// Exists only while someone subscribes: the ring is allocated up front, and most sessions
    /// are idle and unwatched.
    live: Option<broadcast::Sender<Arc<Event>>>,
}

/// The event log of one session.
pub struct EventLog {
    session_id: SessionId,
    files: Option<Arc<SessionFiles>>,
    /// Events up to this seq were stored before the log was opened and are read from the file.
    stored: u64,
    inner: Mutex<Inner>,
}

/// Replayed events and the live receiver that continues right after them.
pub struct Subscription {
    /// Events with `seq > since_seq`, oldest first.
    pub replay: Vec<Arc<Event>>,
    /// Every later event.
    pub live: broadcast::Receiver<Arc<Event>>,
}

/// Now, as RFC 3339 with milliseconds.
pub fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

impl EventLog {
    /// An empty log kept in memory only.
    pub fn new(session_id: SessionId) -> Self {
        Self::open(session_id, None, 0, now())
    }

    /// A log that appends to `files` and continues after `stored` events already there.
    pub fn open(
        session_id: SessionId,
        files: Option<Arc<SessionFiles>>,
        stored: u64,
        updated: String,
    ) -> Self {
        Self {
            session_id,
            files,
            stored,
            inner: Mutex::new(Inner {
                events: Vec::new(),
                updated,
                live: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records an event and returns it. A failed write leaves the event pending in the
    /// session's files (see [`SessionFiles::has_pending`]); it is delivered all the same.
    pub fn emit(&self, body: EventBody) -> Arc<Event> {
        let mut inner = self.lock();
        let ts = now();
        let event = Arc::new(Event {
            session_id: self.session_id.clone(),
            seq: self.stored + inner.events.len() as u64 + 1,
            ts: ts.clone(),
            body,
        });
        if let Some(files) = &self.files
            && let Err(e) = files.append_event(&event)
        {
            tracing::warn!(session = %self.session_id, "cannot store an event: {e}");
        }
        inner.events.push(event.clone());
        inner.updated = ts;
        if inner
            .live
            .as_ref()
            .is_some_and(|live| live.send(event.clone()).is_err())
        {
            // The last subscriber left.
            inner.live = None;
        }
        event
    }

    /// Replay from `since_seq` (none: live only) plus the live stream after it.
    pub fn subscribe(&self, since_seq: Option<u64>) -> Subscription {
        // Stored events never change, so they are read without holding the lock.
        let mut replay: Vec<Arc<Event>> = match (since_seq, &self.files) {
            (Some(since), Some(files)) if since < self.stored => files
                .read_events(since, self.stored)
                .unwrap_or_else(|e| {
                    tracing::warn!(session = %self.session_id, "cannot replay stored events: {e}");
                    Vec::new()
                })
                .into_iter()
                .map(Arc::new)
                .collect(),
            _ => Vec::new(),
        };
        let mut inner = self.lock();
        if let Some(since) = since_seq {
            let skip = since.saturating_sub(self.stored) as usize;
            replay.extend(inner.events.iter().skip(skip).cloned());
        }
        let live = inner
            .live
            .get_or_insert_with(|| broadcast::channel(LIVE_BUFFER).0)
            .subscribe();
        Subscription { replay, live }
    }

    /// The seq of the newest event (0 when empty).
    pub fn last_seq(&self) -> u64 {
        self.stored + self.lock().events.len() as u64
    }

    /// When the newest event was emitted.
    pub fn updated(&self) -> String {
        self.lock().updated.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warn(n: u32) -> EventBody {
        EventBody::Warning {
            message: n.to_string(),
        }
    }

    #[test]
    fn replay_then_live_is_gapless() {
        let log = EventLog::new(SessionId::from("s"));
        log.emit(warn(1));
        log.emit(warn(2));
        let mut sub = log.subscribe(Some(1));
        log.emit(warn(3));
        assert_eq!(sub.replay.iter().map(|e| e.seq).collect::<Vec<_>>(), [2]);
        assert_eq!(sub.live.try_recv().unwrap().seq, 3);
        assert_eq!(log.subscribe(Some(0)).replay.len(), 3);
        assert!(log.subscribe(None).replay.is_empty());
        assert!(log.subscribe(Some(99)).replay.is_empty());
    }
}
