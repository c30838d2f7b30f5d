//! A session's event log, owned by its task: every event gets the next `seq`, is serialized
//! once ([`SharedEvent`]), goes to the session's [`Writer`] (when it has one), joins a bounded
//! in-memory tail, and is broadcast to live subscribers at once; no subscriber waits for the
//! disk, and recording never waits for it either (see `store/writer.rs`, back-pressure).
//! Replay takes what the tail holds and reads anything older from the journal; since the task
//! owns both the tail and the broadcast, a subscriber's replay and its live stream meet with no
//! gap and no repeat.

use crate::store::{EventReader, Writer, event_line};
use agentd_proto::{Event, EventBody, SessionId};
use std::collections::VecDeque;
use std::ops::Deref;
use std::sync::Arc;
use tokio::sync::broadcast;

/// How many events a live subscriber may fall behind before it is dropped with a `lagged`
/// notice. The buffer holds shared pointers, so its memory does not grow per subscriber.
pub const LIVE_BUFFER: usize = 1024;
/// The in-memory tail holds at most this many events...
pub(crate) const TAIL_EVENTS: usize = 4096;
/// ...and this many bytes of them (as journal lines); older ones replay from the journal.
pub(crate) const TAIL_BYTES: usize = 4 * 1024 * 1024;

/// Now, as RFC 3339 with milliseconds.
pub(crate) fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// An event with its JSON, serialized once: the journal line and every subscriber's
/// notification are these bytes. Clones share both.
#[derive(Debug, Clone)]
pub struct SharedEvent {
    event: Arc<Event>,
    json: Arc<str>,
}

impl SharedEvent {
    /// Serializes `event`.
    pub(crate) fn new(event: Event) -> Self {
        // The journal's own serialization (`serde_json`, UTF-8 by construction).
        let json = String::from_utf8(event_line(&event)).unwrap_or_default();
        Self {
            event: Arc::new(event),
            json: json.into(),
        }
    }

    /// The event as JSON, exactly as the journal holds it.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The event as the item of a `session/event` notification (`StreamItem::Event`), made
    /// from the same JSON: the item's tag, then the event's own fields.
    pub fn stream_item_json(&self) -> String {
        const TAG: &str = "{\"type\":\"event\",";
        let fields = self.json.get(1..).unwrap_or_default();
        // Sized exactly: the server boxes it as it is, with no reallocation.
        let mut item = String::with_capacity(TAG.len() + fields.len());
        item.push_str(TAG);
        item.push_str(fields);
        item
    }

    /// The event.
    pub fn event(&self) -> &Arc<Event> {
        &self.event
    }
}

impl Deref for SharedEvent {
    type Target = Event;

    fn deref(&self) -> &Event {
        &self.event
    }
}

/// The event log of one session.
pub(super) struct EventLog {
    session_id: SessionId,
    /// The seq the next event gets.
    next_seq: u64,
    /// The newest events, oldest first, ending at `next_seq - 1`.
    tail: VecDeque<SharedEvent>,
    tail_bytes: usize,
    updated: String,
    /// Exists only while someone subscribes: the ring is allocated up front, and most
    /// sessions are idle and unwatched.
    live: Option<broadcast::Sender<SharedEvent>>,
    writer: Option<Writer>,
}

/// What a subscriber gets from the log: replay and live receiver, joined.
pub(super) struct Joined {
    /// Events older than the tail, to read from the journal: `(reader, after, until)`.
    pub(super) stored: Option<(EventReader, u64, u64)>,
    /// Events from the tail with `seq > since_seq`.
    pub(super) tail: Vec<SharedEvent>,
    /// Every later event.
    pub(super) live: broadcast::Receiver<SharedEvent>,
    /// The seq of the newest event when the subscriber joined.
    pub(super) last_seq: u64,
}

impl EventLog {
    /// A log whose first event gets seq `last_seq + 1`, written through `writer` (none: kept
    /// in memory only, and replay reaches back only as far as the tail).
    pub(super) fn new(
        session_id: SessionId,
        writer: Option<Writer>,
        last_seq: u64,
        updated: String,
    ) -> Self {
        Self {
            session_id,
            next_seq: last_seq + 1,
            tail: VecDeque::new(),
            tail_bytes: 0,
            updated,
            live: None,
            writer,
        }
    }

    /// Skips `count` seqs that stored events may have had (see `EventBody::EventsMissing`).
    pub(super) fn skip(&mut self, count: u64) -> SharedEvent {
        let first_seq = self.next_seq;
        self.next_seq += count;
        self.emit(EventBody::EventsMissing {
            first_seq,
            last_seq: first_seq + count - 1,
        })
    }

    /// Records an event and broadcasts it.
    pub(super) fn emit(&mut self, body: EventBody) -> SharedEvent {
        let event = self.record(body);
        self.broadcast(&event);
        event
    }

    /// Records an event (seq, writer, tail) without telling subscribers yet: the session
    /// updates its view in between, so a client that sees the event finds the view as new.
    /// Never waits: a writer that is behind is waited for at the agent loop's await points.
    pub(super) fn record(&mut self, body: EventBody) -> SharedEvent {
        let ts = now();
        let event = SharedEvent::new(Event {
            session_id: self.session_id.clone(),
            seq: self.next_seq,
            ts: ts.clone(),
            body,
        });
        self.next_seq += 1;
        if let Some(writer) = &self.writer {
            writer.event(event.seq, event.json.clone());
        }
        self.tail_bytes += event.json.len();
        self.tail.push_back(event.clone());
        self.trim();
        self.updated = ts;
        event
    }

    /// Sends a recorded event to the live subscribers.
    pub(super) fn broadcast(&mut self, event: &SharedEvent) {
        if self
            .live
            .as_ref()
            .is_some_and(|live| live.send(event.clone()).is_err())
        {
            // The last subscriber left.
            self.live = None;
        }
    }

    /// Drops the oldest events past the tail's bounds, once the journal has them.
    fn trim(&mut self) {
        let written = self.writer.as_ref().map_or(u64::MAX, Writer::written_seq);
        while self.tail.len() > TAIL_EVENTS || self.tail_bytes > TAIL_BYTES {
            match self.tail.front() {
                Some(event) if event.seq <= written => {
                    self.tail_bytes -= event.json.len();
                    self.tail.pop_front();
                }
                _ => break,
            }
        }
    }

    /// Replay from `since_seq` (none: live only) and the live stream after it.
    pub(super) fn subscribe(&mut self, since_seq: Option<u64>) -> Joined {
        let live = self
            .live
            .get_or_insert_with(|| broadcast::channel(LIVE_BUFFER).0)
            .subscribe();
        let last_seq = self.last_seq();
        let Some(since) = since_seq else {
            return Joined {
                stored: None,
                tail: Vec::new(),
                live,
                last_seq,
            };
        };
        let first_in_tail = self.tail.front().map_or(self.next_seq, |e| e.seq);
        let stored = match &self.writer {
            Some(writer) if since + 1 < first_in_tail => {
                Some((writer.reader().clone(), since, first_in_tail - 1))
            }
            _ => None,
        };
        let tail = self
            .tail
            .iter()
            .filter(|e| e.seq > since)
            .cloned()
            .collect();
        Joined {
            stored,
            tail,
            live,
            last_seq,
        }
    }

    /// The seq of the newest event (0 when empty).
    pub(super) fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// When the newest event was emitted.
    pub(super) fn updated(&self) -> &str {
        &self.updated
    }

    /// How many live subscribers there are.
    pub(super) fn subscribers(&self) -> usize {
        self.live
            .as_ref()
            .map_or(0, broadcast::Sender::receiver_count)
    }

    /// The session's writer, if it is stored.
    pub(super) fn writer(&self) -> Option<&Writer> {
        self.writer.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warn(n: usize) -> EventBody {
        EventBody::warning(n.to_string())
    }

    #[test]
    fn replay_then_live_is_gapless() {
        let mut log = EventLog::new(SessionId::from("s"), None, 0, now());
        log.emit(warn(1));
        log.emit(warn(2));
        let mut sub = log.subscribe(Some(1));
        log.emit(warn(3));
        assert_eq!(sub.tail.iter().map(|e| e.seq).collect::<Vec<_>>(), [2]);
        assert_eq!(sub.live.try_recv().unwrap().seq, 3);
        assert_eq!(log.subscribe(Some(0)).tail.len(), 3);
        assert!(log.subscribe(None).tail.is_empty());
        assert!(log.subscribe(Some(99)).tail.is_empty());
    }

    /// The journal line and the notification item are the serde forms of the event, made
    /// from one serialization.
    #[test]
    fn one_serialization_gives_the_journal_line_and_the_stream_item() {
        let mut log = EventLog::new(SessionId::from("s\"q"), None, 0, now());
        for body in [
            warn(1),
            EventBody::AssistantTextDelta {
                delta: "\u{1F600} \"quoted\"\n".into(),
            },
            EventBody::AssistantTextStart {},
        ] {
            let event = log.emit(body);
            assert_eq!(event.json(), serde_json::to_string(&*event).unwrap());
            let item = agentd_proto::StreamItem::Event((*event).clone());
            assert_eq!(
                event.stream_item_json(),
                serde_json::to_string(&item).unwrap()
            );
        }
    }

    #[test]
    fn the_tail_is_bounded() {
        let mut log = EventLog::new(SessionId::from("s"), None, 0, now());
        for n in 0..TAIL_EVENTS + 10 {
            log.emit(warn(n));
        }
        assert_eq!(log.tail.len(), TAIL_EVENTS);
        let big = "x".repeat(TAIL_BYTES / 2);
        for _ in 0..3 {
            log.emit(EventBody::warning(big.clone()));
        }
        assert!(log.tail_bytes <= TAIL_BYTES, "{}", log.tail_bytes);
        assert_eq!(log.last_seq(), TAIL_EVENTS as u64 + 13);
    }
}
