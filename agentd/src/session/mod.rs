//! Sessions: each is one tokio task (the actor) that owns the running loop, plus a shared
//! [`Session`] handle through which clients submit, steer, queue, abort, close and subscribe
//! while the task works. The [`Registry`] holds every session of the daemon.
//!
//! This is the library boundary (spec 1.2): a host program can [`Session::spawn`] a session
//! with a profile, an execution environment and a provider, submit input, and read events,
//! without the server.

mod actor;
mod events;
mod registry;
#[cfg(test)]
mod tests;

pub use events::{EventLog, LIVE_BUFFER, Subscription, now};
pub use registry::Registry;

use crate::agent::Host;
use crate::config::Price;
use crate::exec::ExecutionEnvironment;
use crate::llm::{ProviderSet, RetryPolicy};
use crate::profile::{EnvironmentContext, Profile};
use agentd_proto::{
    AbortResponse, DaemonEvent, Disposition, EntryId, EventBody, HistoryEntry, InputId,
    QueueContents, QueuedInput, SessionConfig, SessionId, SessionSnapshot, SessionState,
    SessionSummary, SubmitResponse, Turn, Usage, WhenBusy,
};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
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
}

pub(crate) enum Command {
    Process(QueuedInput, CancellationToken),
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
    events: EventLog,
    control: Mutex<Control>,
    config: Mutex<SessionConfig>,
    usage: Mutex<Usage>,
    history: RwLock<Vec<Arc<HistoryEntry>>>,
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
    pub fn spawn(
        spec: SessionSpec,
        daemon_events: Option<broadcast::Sender<DaemonEvent>>,
        tasks: &tokio_util::task::TaskTracker,
    ) -> Arc<Self> {
        let (commands, rx) = mpsc::channel(8);
        let session = Arc::new(Self {
            events: EventLog::new(spec.id.clone()),
            id: spec.id,
            cwd: spec.cwd,
            title: spec.title,
            profile: spec.profile,
            instructions: spec.instructions,
            created: now(),
            context: std::sync::OnceLock::new(),
            env: spec.env,
            prices: spec.prices,
            control: Mutex::new(Control {
                state: SessionState::Idle,
                closing: false,
                steering: VecDeque::new(),
                follow_up: VecDeque::new(),
                turn: None,
                submitted: HashMap::new(),
                submitted_order: VecDeque::new(),
            }),
            config: Mutex::new(spec.config),
            usage: Mutex::new(Usage::default()),
            history: RwLock::new(Vec::new()),
            state: watch::channel(SessionState::Idle).0,
            commands,
            daemon_events,
        });
        session.events.emit(EventBody::SessionStart {
            cwd: session.cwd.display().to_string(),
            profile: session.profile.id.to_owned(),
            config: Box::new(session.config()),
            title: session.title.clone(),
        });
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

    /// The history entries, oldest first.
    pub fn history(&self) -> Vec<Arc<HistoryEntry>> {
        self.history
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_state(&self, control: &mut Control, state: SessionState) {
        if control.state == state {
            return;
        }
        control.state = state;
        self.state.send_replace(state);
        self.events.emit(EventBody::StateChanged { state });
        if let Some(tx) = &self.daemon_events {
            let _ = tx.send(DaemonEvent::StateChanged {
                session_id: self.id.clone(),
                state,
            });
        }
    }

    fn queue_changed(&self, control: &Control) {
        self.events.emit(EventBody::QueueChanged {
            queue: control.queue(),
        });
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
        self.set_state(c, SessionState::Closed);
        self.events.emit(EventBody::SessionEnd {
            state: SessionState::Closed,
            reason: reason.to_owned(),
        });
    }

    async fn wait_for(&self, done: impl Fn(SessionState) -> bool) {
        let mut rx = self.state.subscribe();
        let _ = tokio::time::timeout(STATE_WAIT, rx.wait_for(|s| done(*s))).await;
    }

    /// Applies `patch` from the next LLM call on.
    pub fn set_config(&self, patch: &agentd_proto::ConfigPatch) -> Result<SessionConfig, Error> {
        let mut config = lock(&self.config);
        let mut next = config.clone();
        next.apply(patch);
        crate::config::validate_session_config(&next)
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        *config = next.clone();
        Ok(next)
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
            turns: self.history.read().unwrap_or_else(|e| e.into_inner()).len(),
            last_seq: self.events.last_seq(),
            created: self.created.clone(),
            updated: self.events.updated(),
        }
    }

    /// The line for `session/list`.
    pub fn summary(&self) -> SessionSummary {
        let config = self.config();
        SessionSummary {
            session_id: self.id.clone(),
            title: self.title.clone(),
            cwd: self.cwd.display().to_string(),
            state: self.state(),
            provider: config.provider,
            model: config.model,
            created: self.created.clone(),
            updated: self.events.updated(),
            usage: *lock(&self.usage),
        }
    }
}

impl Host for Session {
    fn emit(&self, body: EventBody) {
        self.events.emit(body);
    }

    fn append(&self, turn: Turn) {
        let mut history = self.history.write().unwrap_or_else(|e| e.into_inner());
        let parent_id = history.last().map(|e| e.id.clone());
        history.push(Arc::new(HistoryEntry {
            id: EntryId(new_id("")),
            parent_id,
            ts: now(),
            turn,
        }));
    }

    fn history(&self) -> Vec<Arc<HistoryEntry>> {
        Session::history(self)
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
