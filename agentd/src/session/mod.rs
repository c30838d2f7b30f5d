//! Sessions: each is one tokio task (the actor) that owns the running loop, plus a shared
//! [`Session`] handle through which clients submit, steer, queue, abort, close and subscribe
//! while the task works. The [`Registry`] holds every session of the daemon.
//!
//! This is the library boundary (spec 1.2): a host program can [`Session::spawn`] a session
//! with a profile, an execution environment and a provider, submit input, and read events,
//! without the server.

mod actor;
mod events;
mod history;
mod registry;
mod subagents;
#[cfg(test)]
mod tests;

pub use events::{EventLog, LIVE_BUFFER, Subscription, now};
pub use history::History;
pub use registry::Registry;

use crate::agent::Host;
use crate::config::Price;
use crate::exec::ExecutionEnvironment;
use crate::llm::{ProviderSet, RetryPolicy};
use crate::profile::{EnvironmentContext, Profile};
use crate::store::{ParentLink, SessionFiles, SessionRecord};
use agentd_proto::{
    AbortResponse, CompactResponse, DaemonEvent, Disposition, EntryId, EventBody, ForkOrigin,
    HistoryEntry, InputId, ProcessingEndReason, QueueContents, QueuedInput, RollbackResponse,
    SessionConfig, SessionId, SessionSnapshot, SessionState, SessionSummary, SubmitResponse,
    ToolResult, Turn, Usage, WhenBusy,
};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

/// What a session operation can fail with; the server maps each to a protocol error kind.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// No session has this id.
    #[error("session {0} not found")]
    NotFound(SessionId),
    /// The session is processing and the request asked not to queue.
    #[error("session {0} is busy processing; retry with when_busy \"queue\" or \"steer\"")]
    Busy(SessionId),
    /// The session is closed.
    #[error("session {0} is closed")]
    Closed(SessionId),
    /// A configuration value is invalid.
    #[error("{0}")]
    InvalidConfig(String),
    /// The provider cannot be used.
    #[error("{0}")]
    ProviderNotConfigured(String),
    /// The daemon is stopping.
    #[error("the daemon is shutting down")]
    ShuttingDown,
    /// The session's state cannot be written to disk.
    #[error("cannot save the session: {0}")]
    Storage(String),
    /// The provider failed a request made for the client.
    #[error("{0}")]
    Provider(String),
    /// A parameter names something that does not exist or cannot be done.
    #[error("{0}")]
    InvalidParams(String),
}

/// How long control calls wait for the session task to reach the requested state.
const STATE_WAIT: Duration = Duration::from_secs(15);
/// Client input ids remembered per session for idempotent submits.
const IDEMPOTENCY_KEYS: usize = 1024;

/// Everything needed to start a session.
pub struct SessionSpec {
    /// Its id.
    pub id: SessionId,
    /// Working directory.
    pub cwd: PathBuf,
    /// Title for lists.
    pub title: Option<String>,
    /// Tools and prompt.
    pub profile: Profile,
    /// Where tools run.
    pub env: Arc<dyn ExecutionEnvironment>,
    /// The APIs the session may use; its config names the current one.
    pub providers: ProviderSet,
    /// Initial settings.
    pub config: SessionConfig,
    /// User instructions appended last to the system prompt.
    pub instructions: Option<String>,
    /// Retry policy for LLM calls.
    pub retry: RetryPolicy,
    /// Prices by model, to report costs (may be empty).
    pub prices: Arc<BTreeMap<String, Price>>,
    /// Whether the environment only reads (recorded so a restored session keeps it).
    pub read_only: bool,
    /// Where the session is stored; `None` keeps it in memory only.
    pub files: Option<Arc<SessionFiles>>,
    /// The history to start with (a fork's copy, or what a restored session stored).
    pub history: History,
    /// The session this one was forked from.
    pub forked_from: Option<ForkOrigin>,
    /// Set when the session was stored by an earlier run of the daemon.
    pub restored: Option<Restored>,
    /// The session that spawned this one as a subagent.
    pub parent: Option<ParentLink>,
    /// The registry, through which the session spawns and finds its subagents; `None`: the
    /// subagent tools report that subagents are not available.
    pub registry: Option<std::sync::Weak<Registry>>,
}

/// What a stored session brings back besides its history.
pub struct Restored {
    /// Seq of its last stored event.
    pub last_seq: u64,
    /// Creation time.
    pub created: String,
    /// Time of its last change.
    pub updated: String,
    /// Its state when stored; `processing` means the daemon stopped mid-work.
    pub state: SessionState,
    /// Tokens used.
    pub usage: Usage,
    /// Queued steering and follow-ups.
    pub queue: QueueContents,
    /// Problems met while loading (skipped lines), reported as `warning` events.
    pub warnings: Vec<String>,
}

pub(crate) enum Command {
    Process(QueuedInput, CancellationToken),
    Compact(
        CancellationToken,
        tokio::sync::oneshot::Sender<Result<CompactResponse, Error>>,
    ),
    Close(String),
}

/// State guarded together so that every transition and queue change is atomic.
struct Control {
    state: SessionState,
    closing: bool,
    steering: VecDeque<QueuedInput>,
    follow_up: VecDeque<QueuedInput>,
    /// Cancels the current processing cycle.
    turn: Option<CancellationToken>,
    submitted: HashMap<String, SubmitResponse>,
    submitted_order: VecDeque<String>,
    /// How the last processing cycle ended, and the last error it reported.
    last_end: Option<ProcessingEndReason>,
    last_error: Option<String>,
}

impl Control {
    fn queue(&self) -> QueueContents {
        QueueContents {
            steering: self.steering.iter().cloned().collect(),
            follow_up: self.follow_up.iter().cloned().collect(),
        }
    }
}

/// A running session. Cheap to share; every method may be called while the session works.
pub struct Session {
    id: SessionId,
    cwd: PathBuf,
    title: Option<String>,
    profile: Profile,
    instructions: Option<String>,
    created: String,
    /// Captured by the session task before it takes its first command.
    context: std::sync::OnceLock<EnvironmentContext>,
    env: Arc<dyn ExecutionEnvironment>,
    prices: Arc<BTreeMap<String, Price>>,
    read_only: bool,
    forked_from: Option<ForkOrigin>,
    parent: Option<ParentLink>,
    registry: Option<std::sync::Weak<Registry>>,
    files: Option<Arc<SessionFiles>>,
    /// Set from a failed write until a write succeeds; the failure is reported once.
    storage_failed: AtomicBool,
    events: EventLog,
    control: Mutex<Control>,
    config: Mutex<SessionConfig>,
    usage: Mutex<Usage>,
    history: RwLock<History>,
    state: watch::Sender<SessionState>,
    commands: mpsc::Sender<Command>,
    daemon_events: Option<broadcast::Sender<DaemonEvent>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

impl Session {
    /// Starts the session's task and emits `session_start`. `daemon_events` receives state
    /// changes for `daemon/subscribe`; `tasks` tracks the task for shutdown.
    ///
    /// A restored session continues its event log; one that was processing when the daemon
    /// stopped comes back idle, with its unanswered tool calls marked interrupted and a
    /// `warning` event. A closed one takes no commands.
    pub fn spawn(
        spec: SessionSpec,
        daemon_events: Option<broadcast::Sender<DaemonEvent>>,
        tasks: &tokio_util::task::TaskTracker,
    ) -> Arc<Self> {
        let (commands, rx) = mpsc::channel(8);
        let restored_state = spec.restored.as_ref().map(|r| r.state);
        let mut warnings = Vec::new();
        let (created, usage, queue, events) = match spec.restored {
            Some(r) => {
                warnings = r.warnings;
                (
                    r.created,
                    r.usage,
                    r.queue,
                    EventLog::open(spec.id.clone(), spec.files.clone(), r.last_seq, r.updated),
                )
            }
            None => (
                now(),
                Usage::default(),
                QueueContents::default(),
                EventLog::open(spec.id.clone(), spec.files.clone(), 0, now()),
            ),
        };
        let state = match restored_state {
            Some(s @ (SessionState::Closed | SessionState::Processing)) => s,
            _ => SessionState::Idle,
        };
        let session = Arc::new(Self {
            events,
            id: spec.id,
            cwd: spec.cwd,
            title: spec.title,
            profile: spec.profile,
            instructions: spec.instructions,
            created,
            context: std::sync::OnceLock::new(),
            env: spec.env,
            prices: spec.prices,
            read_only: spec.read_only,
            forked_from: spec.forked_from,
            parent: spec.parent,
            registry: spec.registry,
            files: spec.files,
            storage_failed: AtomicBool::new(false),
            control: Mutex::new(Control {
                state,
                closing: false,
                steering: queue.steering.into(),
                follow_up: queue.follow_up.into(),
                turn: None,
                submitted: HashMap::new(),
                submitted_order: VecDeque::new(),
                last_end: None,
                last_error: None,
            }),
            config: Mutex::new(spec.config),
            usage: Mutex::new(usage),
            history: RwLock::new(spec.history),
            state: watch::channel(state).0,
            commands,
            daemon_events,
        });
        match restored_state {
            None => {
                session.events.emit(EventBody::SessionStart {
                    cwd: session.cwd.display().to_string(),
                    profile: session.profile.id.to_owned(),
                    config: Box::new(session.config()),
                    title: session.title.clone(),
                });
                if !session
                    .history
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_empty()
                {
                    // A fork's copied history.
                    session
                        .store_history(&session.history().iter().map(|e| &**e).collect::<Vec<_>>());
                }
            }
            Some(state) => {
                for message in warnings {
                    session.events.emit(EventBody::Warning { message });
                }
                match state {
                    SessionState::Processing => session.recover_interrupted(),
                    SessionState::Closed => return session,
                    _ => {}
                }
            }
        }
        let actor = actor::Actor {
            session: session.clone(),
            providers: spec.providers,
            retry: spec.retry,
        };
        tasks.spawn(actor.run(rx));
        session
    }

    /// Its id.
    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// The event log (subscribe, last seq).
    pub fn events(&self) -> &EventLog {
        &self.events
    }

    /// The current state.
    pub fn state(&self) -> SessionState {
        lock(&self.control).state
    }

    /// The current configuration.
    pub fn config(&self) -> SessionConfig {
        lock(&self.config).clone()
    }

    /// The current branch of the history, oldest first.
    pub fn history(&self) -> Vec<Arc<HistoryEntry>> {
        self.read_history().branch()
    }

    fn read_history(&self) -> std::sync::RwLockReadGuard<'_, History> {
        self.history.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The session's directory record as it is now.
    fn record(&self, c: &Control) -> SessionRecord {
        let history = self.read_history();
        SessionRecord {
            id: self.id.clone(),
            title: self.title.clone(),
            cwd: self.cwd.clone(),
            profile: self.profile.id.to_owned(),
            instructions: self.instructions.clone(),
            read_only: self.read_only,
            created: self.created.clone(),
            updated: self.events.updated(),
            state: c.state,
            config: self.config(),
            usage: *lock(&self.usage),
            leaf: history.leaf().cloned(),
            history_len: history.len(),
            queue: c.queue(),
            forked_from: self.forked_from.clone(),
            parent: self.parent.clone(),
        }
    }

    /// Rewrites `session.json`.
    fn save(&self) {
        let c = lock(&self.control);
        self.save_with(&c);
    }

    fn save_with(&self, c: &Control) {
        if let Some(files) = &self.files {
            let result = files.write_record(&self.record(c));
            self.check_stored(c, result);
        }
    }

    /// Appends history entries to the store (synced, with the events before them).
    fn store_history(&self, entries: &[&HistoryEntry]) {
        if let Some(files) = &self.files {
            let result = files.append_history(entries.iter().copied());
            let c = lock(&self.control);
            self.check_stored(&c, result);
            self.save_with(&c);
        }
    }

    /// Reacts to a write: the first failure stops the current work and tells subscribers;
    /// a success after failures ends the episode.
    fn check_stored(&self, c: &Control, result: Result<(), crate::store::Error>) {
        match result {
            Ok(()) => {
                if self.files.as_ref().is_some_and(|f| !f.has_pending()) {
                    self.storage_failed.store(false, Ordering::Relaxed);
                }
            }
            Err(e) => {
                tracing::error!(session = %self.id, "cannot save the session: {e}");
                if !self.storage_failed.swap(true, Ordering::Relaxed) {
                    if let Some(turn) = &c.turn {
                        turn.cancel();
                    }
                    self.events.emit(EventBody::Error {
                        message: format!(
                            "cannot save the session to disk ({e}); the work is stopped, and new input is refused until the disk can be written again. Nothing already saved is lost."
                        ),
                        fatal: false,
                    });
                }
            }
        }
    }

    /// Whether the last write failed; a retry of what is pending clears it when it succeeds.
    fn storage_error(&self, c: &Control) -> Option<Error> {
        if !self.storage_failed.load(Ordering::Relaxed) {
            return None;
        }
        let files = self.files.as_ref()?;
        let retried = files
            .flush()
            .and_then(|()| files.write_record(&self.record(c)));
        match retried {
            Ok(()) => {
                self.storage_failed.store(false, Ordering::Relaxed);
                None
            }
            Err(e) => Some(Error::Storage(e.to_string())),
        }
    }

    /// Whether the session's storage is failing.
    pub(crate) fn storage_failing(&self) -> bool {
        self.storage_failed.load(Ordering::Relaxed)
    }

    /// After a daemon stopped mid-work: answers the tool calls left open, notes the
    /// interruption for the model, and ends the processing cycle the log had begun.
    fn recover_interrupted(&self) {
        let open_calls = self.history().last().and_then(|e| match &e.turn {
            Turn::Assistant { tool_calls, .. } if !tool_calls.is_empty() => Some(
                tool_calls
                    .iter()
                    .map(|call| ToolResult {
                        call_id: call.id.clone(),
                        content: "The daemon stopped before this tool call finished; its effects are unknown.".into(),
                        is_error: true,
                        images: Vec::new(),
                    })
                    .collect(),
            ),
            _ => None,
        });
        if let Some(results) = open_calls {
            self.append(Turn::ToolResults { results });
        }
        self.append(Turn::System {
            text: "[The daemon restarted while this input was being processed; the work was interrupted.]".into(),
        });
        self.events.emit(EventBody::Warning {
            message:
                "the daemon restarted while this session was processing; its work was interrupted"
                    .into(),
        });
        self.events.emit(EventBody::ProcessingEnd {
            reason: ProcessingEndReason::Aborted,
        });
        let mut c = lock(&self.control);
        self.set_state(&mut c, SessionState::Idle);
    }

    fn set_state(&self, control: &mut Control, state: SessionState) {
        self.transition(control, state, None);
    }

    /// Changes state: the event (and `last`, when given) is logged and the record saved
    /// before anyone waiting for the state wakes, so a waiter sees everything written.
    fn transition(&self, control: &mut Control, state: SessionState, last: Option<EventBody>) {
        if control.state == state {
            return;
        }
        control.state = state;
        self.events.emit(EventBody::StateChanged { state });
        if let Some(body) = last {
            self.events.emit(body);
        }
        self.save_with(control);
        if let Some(tx) = &self.daemon_events {
            let _ = tx.send(DaemonEvent::StateChanged {
                session_id: self.id.clone(),
                state,
            });
        }
        self.state.send_replace(state);
    }

    fn queue_changed(&self, control: &Control) {
        self.events.emit(EventBody::QueueChanged {
            queue: control.queue(),
        });
        self.save_with(control);
    }

    fn check_open(&self, control: &Control) -> Result<(), Error> {
        if control.state == SessionState::Closed || control.closing {
            return Err(Error::Closed(self.id.clone()));
        }
        Ok(())
    }

    /// Submits input: starts processing when idle; otherwise queues it as `when_busy` says.
    /// A repeated `client_input_id` returns the first result and does nothing else.
    pub fn submit(
        &self,
        text: String,
        client_input_id: Option<String>,
        when_busy: WhenBusy,
    ) -> Result<SubmitResponse, Error> {
        let mut c = lock(&self.control);
        self.check_open(&c)?;
        if let Some(previous) = client_input_id.as_ref().and_then(|k| c.submitted.get(k)) {
            return Ok(previous.clone());
        }
        if let Some(e) = self.storage_error(&c) {
            return Err(e);
        }
        let input = QueuedInput {
            input_id: InputId(new_id("in_")),
            text,
        };
        let input_id = input.input_id.clone();
        let disposition = if c.state == SessionState::Idle {
            let token = CancellationToken::new();
            self.commands
                .try_send(Command::Process(input, token.clone()))
                .map_err(|_| Error::Closed(self.id.clone()))?;
            c.turn = Some(token);
            self.set_state(&mut c, SessionState::Processing);
            Disposition::Started
        } else {
            match when_busy {
                WhenBusy::Queue => c.follow_up.push_back(input),
                WhenBusy::Steer => c.steering.push_back(input),
                WhenBusy::Reject => return Err(Error::Busy(self.id.clone())),
            }
            self.queue_changed(&c);
            if when_busy == WhenBusy::Steer {
                Disposition::Steering
            } else {
                Disposition::FollowUp
            }
        };
        let response = SubmitResponse {
            input_id,
            disposition,
            queued: disposition != Disposition::Started,
        };
        if let Some(key) = client_input_id {
            if c.submitted_order.len() >= IDEMPOTENCY_KEYS
                && let Some(old) = c.submitted_order.pop_front()
            {
                c.submitted.remove(&old);
            }
            c.submitted.insert(key.clone(), response.clone());
            c.submitted_order.push_back(key);
        }
        Ok(response)
    }

    /// Queues a steering message (spec 2.6); delivered after the current tool round, or with
    /// the next submit when idle.
    pub fn steer(&self, text: String) -> Result<SubmitResponse, Error> {
        self.enqueue(text, Disposition::Steering)
    }

    /// Queues a follow-up (spec 2.6), processed after the current input completes. When the
    /// session is idle it starts processing at once.
    pub fn follow_up(&self, text: String) -> Result<SubmitResponse, Error> {
        self.submit(text, None, WhenBusy::Queue)
    }

    fn enqueue(&self, text: String, disposition: Disposition) -> Result<SubmitResponse, Error> {
        let mut c = lock(&self.control);
        self.check_open(&c)?;
        if let Some(e) = self.storage_error(&c) {
            return Err(e);
        }
        let input = QueuedInput {
            input_id: InputId(new_id("in_")),
            text,
        };
        let input_id = input.input_id.clone();
        c.steering.push_back(input);
        self.queue_changed(&c);
        Ok(SubmitResponse {
            input_id,
            disposition,
            queued: true,
        })
    }

    /// The queued items.
    pub fn queue(&self) -> QueueContents {
        lock(&self.control).queue()
    }

    /// Removes and returns every queued item.
    pub fn queue_clear(&self) -> QueueContents {
        let mut c = lock(&self.control);
        let removed = c.queue();
        if !c.steering.is_empty() || !c.follow_up.is_empty() {
            c.steering.clear();
            c.follow_up.clear();
            self.queue_changed(&c);
        }
        removed
    }

    /// Interrupts the current work: cancels the LLM stream, kills every process group the
    /// session started, records the interruption, and returns once the session is idle.
    /// Queued items stay queued and are returned. With `close`, the session then closes.
    pub async fn abort(&self, close: bool) -> Result<AbortResponse, Error> {
        let (was_processing, queue) = {
            let c = lock(&self.control);
            if c.state == SessionState::Closed {
                if close {
                    return Ok(AbortResponse {
                        aborted: false,
                        state: SessionState::Closed,
                        queue: QueueContents::default(),
                    });
                }
                return Err(Error::Closed(self.id.clone()));
            }
            if let Some(turn) = &c.turn {
                turn.cancel();
            }
            (c.state == SessionState::Processing, c.queue())
        };
        self.abort_children().await;
        if was_processing {
            self.wait_for(|s| s != SessionState::Processing).await;
        }
        // Background processes left by earlier commands go too.
        self.env.terminate_all().await;
        if close {
            self.close("aborted").await;
        }
        Ok(AbortResponse {
            aborted: was_processing,
            state: self.state(),
            queue,
        })
    }

    /// Closes the session (spec appendix B): aborts running work, kills its processes, emits
    /// `session_end`. Closing a closed session does nothing.
    pub async fn close(&self, reason: &str) {
        let already = {
            let mut c = lock(&self.control);
            let already = c.state == SessionState::Closed || c.closing;
            c.closing = true;
            if let Some(turn) = &c.turn {
                turn.cancel();
            }
            already
        };
        if already {
            self.wait_for(|s| s == SessionState::Closed).await;
            return;
        }
        self.close_children().await;
        if self
            .commands
            .send(Command::Close(reason.to_owned()))
            .await
            .is_err()
        {
            // The task is gone (it can only end by closing); record the end here.
            let mut c = lock(&self.control);
            self.finish_close(&mut c, reason);
        }
        self.wait_for(|s| s == SessionState::Closed).await;
    }

    fn finish_close(&self, c: &mut Control, reason: &str) {
        if c.state == SessionState::Closed {
            return;
        }
        c.turn = None;
        let end = EventBody::SessionEnd {
            state: SessionState::Closed,
            reason: reason.to_owned(),
        };
        self.transition(c, SessionState::Closed, Some(end));
    }

    async fn wait_for(&self, done: impl Fn(SessionState) -> bool) {
        let mut rx = self.state.subscribe();
        let _ = tokio::time::timeout(STATE_WAIT, rx.wait_for(|s| done(*s))).await;
    }

    /// Applies `patch` from the next LLM call on.
    pub fn set_config(&self, patch: &agentd_proto::ConfigPatch) -> Result<SessionConfig, Error> {
        let next = {
            let mut config = lock(&self.config);
            let mut next = config.clone();
            next.apply(patch);
            crate::config::validate_session_config(&next)
                .map_err(|e| Error::InvalidConfig(e.to_string()))?;
            *config = next.clone();
            next
        };
        self.save();
        Ok(next)
    }

    /// Moves the current branch back before the `turns`-th newest user input (an idle
    /// session only). Nothing is deleted: a fork at an entry reaches the rest.
    pub fn rollback(&self, turns: usize) -> Result<RollbackResponse, Error> {
        let c = lock(&self.control);
        self.check_open(&c)?;
        if c.state != SessionState::Idle {
            return Err(Error::Busy(self.id.clone()));
        }
        let (removed, leaf, entries) = {
            let mut history = self.history.write().unwrap_or_else(|e| e.into_inner());
            let users = history
                .branch()
                .iter()
                .filter(|e| matches!(e.turn, Turn::User { .. }))
                .count();
            let removed = history.rollback(turns).ok_or_else(|| {
                Error::InvalidParams(format!(
                    "cannot roll back {turns} turns: the branch has {users} user inputs (turns must be 1 to {users})"
                ))
            })?;
            (removed, history.leaf().cloned(), history.branch().len())
        };
        self.events.emit(EventBody::Rollback {
            leaf: leaf.clone(),
            removed,
        });
        self.save_with(&c);
        Ok(RollbackResponse {
            leaf,
            entries,
            removed,
        })
    }

    /// Summarizes older turns with the session's model (an idle session only); see
    /// `agent::compaction`.
    pub async fn compact(&self) -> Result<CompactResponse, Error> {
        let (reply, response) = tokio::sync::oneshot::channel();
        {
            let mut c = lock(&self.control);
            self.check_open(&c)?;
            if c.state != SessionState::Idle {
                return Err(Error::Busy(self.id.clone()));
            }
            if let Some(e) = self.storage_error(&c) {
                return Err(e);
            }
            let token = CancellationToken::new();
            self.commands
                .try_send(Command::Compact(token.clone(), reply))
                .map_err(|_| Error::Closed(self.id.clone()))?;
            c.turn = Some(token);
            self.set_state(&mut c, SessionState::Processing);
        }
        response.await.map_err(|_| Error::Closed(self.id.clone()))?
    }

    /// The directory-independent parts a fork copies: cwd, profile, config, instructions.
    pub(crate) fn fork_spec(&self) -> (PathBuf, Profile, SessionConfig, Option<String>, bool) {
        (
            self.cwd.clone(),
            self.profile.clone(),
            self.config(),
            self.instructions.clone(),
            self.read_only,
        )
    }

    /// The current branch up to and including `id`, or `None` when `id` is not on it.
    pub fn history_until(&self, id: &EntryId) -> Option<Vec<Arc<HistoryEntry>>> {
        self.read_history().branch_until(id)
    }

    /// Its title.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// The full snapshot.
    pub fn snapshot(&self) -> SessionSnapshot {
        let (state, queue) = {
            let c = lock(&self.control);
            (c.state, c.queue())
        };
        SessionSnapshot {
            session_id: self.id.clone(),
            title: self.title.clone(),
            cwd: self.cwd.display().to_string(),
            profile: self.profile.id.to_owned(),
            state,
            config: self.config(),
            queue,
            usage: *lock(&self.usage),
            turns: self.history().len(),
            last_seq: self.events.last_seq(),
            created: self.created.clone(),
            updated: self.events.updated(),
            leaf: self.read_history().leaf().cloned(),
            forked_from: self.forked_from.clone(),
            parent_id: self.parent_id().cloned(),
        }
    }

    /// The line for `session/list`.
    pub fn summary(&self) -> SessionSummary {
        let record = self.record(&lock(&self.control));
        record.summary()
    }

    /// The session that spawned this one as a subagent.
    pub fn parent_id(&self) -> Option<&SessionId> {
        self.parent.as_ref().map(|p| &p.session_id)
    }
}

impl Host for Session {
    fn emit(&self, body: EventBody) {
        if let EventBody::Error { message, .. } = &body {
            lock(&self.control).last_error = Some(message.clone());
        }
        self.events.emit(body);
    }

    fn subagents(&self) -> Option<&dyn crate::tools::Subagents> {
        self.registry
            .as_ref()
            .map(|_| self as &dyn crate::tools::Subagents)
    }

    fn append(&self, turn: Turn) {
        let entry = self
            .history
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(EntryId(new_id("")), now(), turn);
        self.store_history(&[&entry]);
    }

    fn history(&self) -> Vec<Arc<HistoryEntry>> {
        Session::history(self)
    }

    fn context(&self) -> Vec<Arc<HistoryEntry>> {
        self.read_history().context()
    }

    fn config(&self) -> SessionConfig {
        Session::config(self)
    }

    fn drain_steering(&self) -> Vec<QueuedInput> {
        let mut c = lock(&self.control);
        if c.steering.is_empty() {
            return Vec::new();
        }
        let drained = c.steering.drain(..).collect();
        self.queue_changed(&c);
        drained
    }

    fn add_usage(&self, usage: &mut Usage) -> Usage {
        if let Some(price) = self.prices.get(&self.config().model) {
            usage.cost_usd = Some(price.cost(usage));
        }
        let mut total = lock(&self.usage);
        total.add(usage);
        *total
    }

    fn system_prompt(&self, model: &str) -> String {
        let fallback;
        let context = match self.context.get() {
            Some(c) => c,
            None => {
                fallback = EnvironmentContext {
                    git: None,
                    os_version: self.env.os_version(),
                    date: now()[..10].to_owned(),
                    project_docs: String::new(),
                };
                &fallback
            }
        };
        self.profile.system_prompt(
            self.env.as_ref(),
            context,
            model,
            self.instructions.as_deref(),
        )
    }
}
