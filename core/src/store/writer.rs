//! A session's writer: a task that owns the session's files and writes what the session sends
//! it, in order, each batch on the blocking pool so no async worker waits for the disk.
//!
//! **Group commit.** Event lines are written as they come but not synced; a history entry
//! that ends a step (a model response, a tool round), or an explicit [`Writer::sync`], makes
//! the batch it lands in end with one `fdatasync` of the journal. Whatever arrived while a
//! sync ran shares the next one, so a slow disk means fewer, larger syncs, never a slower agent
//! loop. `session.json` is rewritten only when its bytes change. [`Writer::written`] waits for
//! the kernel only (no sync): replies to clients wait for it, so what a client was told
//! survives `kill -9`.
//!
//! **Back-pressure.** The lines waiting for the disk are bounded by a [`Backlog`]: a
//! semaphore whose permits are bytes ([`BACKLOG_BYTES`], each line costing at least
//! [`BACKLOG_BYTES`]` / `[`BACKLOG_LINES`]). Sending a line never waits: it takes its permits
//! when they are there and owes them otherwise, and the agent loop pays what is owed at its
//! await points ([`Backlog::room`]), waiting there, asynchronously, while the disk is behind.
//! No thread ever blocks, on any runtime flavor, and memory stays bounded when output outruns
//! the disk.

use super::files::{EventReader, SessionFiles, entry_line};
use super::jsonl::Appender;
use agentd_proto::HistoryEntry;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};

/// Bytes of lines that may wait for the disk before the agent loop waits.
pub(crate) const BACKLOG_BYTES: usize = 16 * 1024 * 1024;
/// Lines that may wait for the disk before the agent loop waits. Also about the most events
/// a crash can lose, which is why a session reopened after one skips more seqs than this.
pub(crate) const BACKLOG_LINES: usize = 8192;
/// What a line costs at least, so that no more than [`BACKLOG_LINES`] fit.
const LINE_COST: usize = BACKLOG_BYTES / BACKLOG_LINES;
/// Operations written in one blocking call at most.
const MAX_BATCH: usize = 4096;

/// Whether the writer's last attempt reached the disk.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum WriterStatus {
    /// Everything sent so far is written (synced at its commit points).
    #[default]
    Ok,
    /// Writes fail; what could not be written stays pending and is retried with the next
    /// operation.
    Failing(String),
}

enum Op {
    /// An event's line (its JSON, shared with the session's subscribers) and what it cost.
    Event {
        seq: u64,
        line: Arc<str>,
        cost: usize,
    },
    Entry {
        line: Vec<u8>,
        commit: bool,
        cost: usize,
    },
    Record(Vec<u8>),
    Sync(oneshot::Sender<Result<(), String>>),
    Written(oneshot::Sender<()>),
    Saved(oneshot::Sender<()>),
}

/// The room left for lines waiting for the disk: a semaphore whose permits are bytes. A
/// line's permits are taken when it is sent (or owed, when they are not there) and given back
/// once it is written. Permits owed make the semaphore show that much more room than there
/// is, until [`Backlog::room`] pays them: the payer waits until the backlog is within its
/// bound again. Clones share the backlog.
#[derive(Clone)]
pub(crate) struct Backlog {
    room: Arc<Semaphore>,
    owed: Arc<AtomicUsize>,
}

impl Default for Backlog {
    fn default() -> Self {
        Self {
            room: Arc::new(Semaphore::new(BACKLOG_BYTES)),
            owed: Arc::default(),
        }
    }
}

impl Backlog {
    /// Charges a line of `len` bytes, without waiting; returns its cost.
    fn charge(&self, len: usize) -> usize {
        let cost = len.clamp(LINE_COST, BACKLOG_BYTES);
        // The cost fits in u32: it is at most BACKLOG_BYTES.
        match self.room.try_acquire_many(cost as u32) {
            Ok(permits) => permits.forget(),
            Err(_) => {
                self.owed.fetch_add(cost, Ordering::AcqRel);
            }
        }
        cost
    }

    /// Gives back the permits of written lines.
    fn release(&self, cost: usize) {
        if cost > 0 {
            self.room.add_permits(cost);
        }
    }

    /// Whether a line sent now would not fit: for output that can be held back instead.
    pub(crate) fn is_full(&self) -> bool {
        // Owed permits show as room there is not (see above).
        self.room.available_permits() < self.owed.load(Ordering::Acquire) + LINE_COST
    }

    /// Waits until the lines sent so far fit the bound, paying the permits they owe. Returns
    /// at once when nothing is owed; cancelling it leaves the debt for the next call.
    pub(crate) async fn room(&self) {
        loop {
            let Ok(owed) = self
                .owed
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| {
                    (o > 0).then(|| o - o.min(BACKLOG_BYTES))
                })
            else {
                return;
            };
            let debt = Debt {
                owed: &self.owed,
                amount: owed.min(BACKLOG_BYTES),
            };
            match self.room.acquire_many(debt.amount as u32).await {
                Ok(permits) => {
                    permits.forget();
                    std::mem::forget(debt);
                }
                // Closed: the writer is gone, nothing waits for the disk any more.
                Err(_) => return,
            }
        }
    }
}

/// Permits taken out of the debt to pay; put back if the payment is cancelled.
struct Debt<'a> {
    owed: &'a AtomicUsize,
    amount: usize,
}

impl Drop for Debt<'_> {
    fn drop(&mut self) {
        self.owed.fetch_add(self.amount, Ordering::AcqRel);
    }
}

/// The handle the session writes through. Dropping it ends the task once everything sent
/// has been written.
pub(crate) struct Writer {
    tx: mpsc::UnboundedSender<Op>,
    backlog: Backlog,
    written: Arc<AtomicU64>,
    status: watch::Receiver<WriterStatus>,
    reader: EventReader,
}

/// What the blocking part owns between batches.
struct Files {
    files: SessionFiles,
    journal: Appender,
    /// The record as last written, and the newest one not yet written.
    record: Option<Vec<u8>>,
    next_record: Option<Vec<u8>>,
}

/// What one batch did.
struct Applied {
    result: Result<(), String>,
    /// What the lines written cost in the backlog.
    cost: usize,
    replies: Vec<oneshot::Sender<Result<(), String>>>,
}

impl Writer {
    /// Starts the writer of `files`, whose journal holds events up to `last_seq`; `reader`
    /// is the journal's reader, whose index the writer extends.
    pub(crate) fn start(files: SessionFiles, reader: EventReader, last_seq: u64) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let (status_tx, status) = watch::channel(WriterStatus::Ok);
        let writer = Self {
            tx,
            backlog: Backlog::default(),
            written: Arc::new(AtomicU64::new(last_seq)),
            status,
            reader: reader.clone(),
        };
        let state = Files {
            journal: files.appender(),
            files,
            record: None,
            next_record: None,
        };
        tokio::spawn(run(
            state,
            rx,
            writer.backlog.clone(),
            writer.written.clone(),
            reader,
            status_tx,
        ));
        writer
    }

    /// Queues event `seq`, whose JSON is `line`. Never waits (see [`Backlog`]).
    pub(crate) fn event(&self, seq: u64, line: Arc<str>) {
        let cost = self.backlog.charge(line.len());
        let _ = self.tx.send(Op::Event { seq, line, cost });
    }

    /// Queues a history entry; with `commit`, the batch it lands in ends with a sync. Never
    /// waits (see [`Backlog`]).
    pub(crate) fn entry(&self, entry: &HistoryEntry, commit: bool) {
        let line = entry_line(entry);
        let cost = self.backlog.charge(line.len());
        let _ = self.tx.send(Op::Entry { line, commit, cost });
    }

    /// The backlog of lines waiting for the disk, for the agent loop to wait for room in.
    pub(crate) fn backlog(&self) -> &Backlog {
        &self.backlog
    }

    /// Queues `session.json`'s new content (written only if it differs from the last).
    pub(crate) fn record(&self, json: Vec<u8>) {
        let _ = self.tx.send(Op::Record(json));
    }

    /// Waits until everything queued before is written and synced (or the write failed).
    pub(crate) fn sync(&self) -> impl Future<Output = Result<(), String>> + use<> {
        let (reply, done) = oneshot::channel();
        let sent = self.tx.send(Op::Sync(reply)).is_ok();
        async move {
            if !sent {
                return Err("the session's writer has stopped".to_owned());
            }
            done.await
                .unwrap_or_else(|_| Err("the session's writer has stopped".to_owned()))
        }
    }

    /// Waits until everything queued before has been handed to the kernel (not synced): what
    /// a reply confirms then survives the daemon being killed. Also resolves when the write
    /// failed, and when the writer is gone.
    pub(crate) fn written(&self) -> impl Future<Output = ()> + use<> {
        let (reply, done) = oneshot::channel();
        let _ = self.tx.send(Op::Written(reply));
        async move {
            let _ = done.await;
        }
    }

    /// Waits until everything queued before is in the kernel, `session.json` included (its
    /// replacement is synced before the rename, so this waits for the disk): for changes only
    /// the record holds (config, the leaf after a rollback).
    pub(crate) fn saved(&self) -> impl Future<Output = ()> + use<> {
        let (reply, done) = oneshot::channel();
        let _ = self.tx.send(Op::Saved(reply));
        async move {
            let _ = done.await;
        }
    }

    /// The seq of the newest event in the journal file (readable by [`EventReader`]).
    pub(crate) fn written_seq(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// Whether writes reach the disk; changes when a write fails or a retry succeeds.
    pub(crate) fn status(&self) -> watch::Receiver<WriterStatus> {
        self.status.clone()
    }

    /// Why writes fail, while they do.
    pub(crate) fn failure(&self) -> Option<String> {
        match &*self.status.borrow() {
            WriterStatus::Ok => None,
            WriterStatus::Failing(e) => Some(e.clone()),
        }
    }

    /// Reads the stored events.
    pub(crate) fn reader(&self) -> &EventReader {
        &self.reader
    }
}

async fn run(
    mut state: Files,
    mut rx: mpsc::UnboundedReceiver<Op>,
    backlog: Backlog,
    written: Arc<AtomicU64>,
    reader: EventReader,
    status: watch::Sender<WriterStatus>,
) {
    let mut batch = Vec::new();
    while let Some(op) = rx.recv().await {
        batch.push(op);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        #[cfg(test)]
        state.files.wait_while_held().await;
        let ops = std::mem::take(&mut batch);
        let (written, reader) = (written.clone(), reader.clone());
        let joined = tokio::task::spawn_blocking(move || {
            let applied = apply(&mut state, ops, &written, &reader);
            (state, applied)
        })
        .await;
        let applied;
        (state, applied) = match joined {
            Ok(done) => done,
            Err(e) => {
                // Only a bug can get here; nothing more can be written for this session.
                tracing::error!("a session writer crashed: {e}");
                status.send_replace(WriterStatus::Failing(
                    "internal error: the session's writer crashed".into(),
                ));
                backlog.room.close();
                return;
            }
        };
        backlog.release(applied.cost);
        let next = match &applied.result {
            Ok(()) => WriterStatus::Ok,
            Err(e) => WriterStatus::Failing(e.clone()),
        };
        status.send_if_modified(|s| {
            let changed = *s != next;
            *s = next;
            changed
        });
        for reply in applied.replies {
            let _ = reply.send(applied.result.clone());
        }
    }
}

fn apply(state: &mut Files, ops: Vec<Op>, written: &AtomicU64, reader: &EventReader) -> Applied {
    let mut applied = Applied {
        result: Ok(()),
        cost: 0,
        replies: Vec::new(),
    };
    let (mut written_waiters, mut saved_waiters) = (Vec::new(), Vec::new());
    let mut sync = false;
    for op in ops {
        match op {
            Op::Event { seq, line, cost } => {
                applied.cost += cost;
                state.journal.push(line.as_bytes(), Some(seq));
            }
            Op::Entry { line, commit, cost } => {
                applied.cost += cost;
                state.journal.push(&line, None);
                sync |= commit;
            }
            Op::Record(json) => state.next_record = Some(json),
            Op::Sync(reply) => {
                sync = true;
                applied.replies.push(reply);
            }
            Op::Written(reply) => written_waiters.push(reply),
            Op::Saved(reply) => saved_waiters.push(reply),
        }
    }
    applied.result = (|| {
        let stored = state.journal.flush(false).map_err(|e| e.to_string())?;
        if let Some(&(seq, _)) = stored.last() {
            let mut index = reader.index().lock().unwrap_or_else(|e| e.into_inner());
            for &(seq, offset) in &stored {
                index.note(seq, offset);
            }
            written.store(seq, Ordering::Release);
        }
        // In the kernel now: a killed daemon loses none of it. Only a power loss could.
        for reply in written_waiters.drain(..) {
            let _ = reply.send(());
        }
        if sync {
            state.journal.flush(true).map_err(|e| e.to_string())?;
        }
        let dropped = state.journal.take_dropped();
        if dropped > 0 {
            return Err(format!(
                "{dropped} journal lines were dropped: the disk refused writes for too long"
            ));
        }
        if let Some(json) = state.next_record.take()
            && state.record.as_ref() != Some(&json)
        {
            if let Err(e) = state.files.write_record(&json) {
                state.next_record = Some(json);
                return Err(e.to_string());
            }
            state.record = Some(json);
        }
        Ok(())
    })();
    // A failed write answers too: the caller learns of it through the writer's status.
    for reply in written_waiters.into_iter().chain(saved_waiters) {
        let _ = reply.send(());
    }
    applied
}
