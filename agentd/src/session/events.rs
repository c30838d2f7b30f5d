//! A session's event log: every event gets the next `seq`, is kept for replay, and is
//! broadcast to live subscribers. Replay and live delivery are joined under one lock, so a
//! subscriber sees every event exactly once and in order.

use agentd_proto::{Event, EventBody, SessionId};
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// How many events a live subscriber may fall behind before it is dropped with a `lagged`
/// notice. The buffer holds shared pointers, so its memory does not grow per subscriber.
pub const LIVE_BUFFER: usize = 1024;

struct Inner {
    events: Vec<Arc<Event>>,
    updated: String,
    /// Exists only while someone subscribes: the ring is allocated up front, and most sessions
    /// are idle and unwatched.
    live: Option<broadcast::Sender<Arc<Event>>>,
}

/// The event log of one session.
pub struct EventLog {
    session_id: SessionId,
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
    /// An empty log.
    pub fn new(session_id: SessionId) -> Self {
        Self {
            session_id,
            inner: Mutex::new(Inner {
                events: Vec::new(),
                updated: now(),
                live: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records an event and returns it.
    pub fn emit(&self, body: EventBody) -> Arc<Event> {
        let mut inner = self.lock();
        let ts = now();
        let event = Arc::new(Event {
            session_id: self.session_id.clone(),
            seq: inner.events.len() as u64 + 1,
            ts: ts.clone(),
            body,
        });
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
        let mut inner = self.lock();
        let replay = match since_seq {
            Some(since) => inner.events.iter().skip(since as usize).cloned().collect(),
            None => Vec::new(),
        };
        let live = inner
            .live
            .get_or_insert_with(|| broadcast::channel(LIVE_BUFFER).0)
            .subscribe();
        Subscription { replay, live }
    }

    /// The seq of the newest event (0 when empty).
    pub fn last_seq(&self) -> u64 {
        self.lock().events.len() as u64
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
