//! The session task: the single owner of a session's state ([`Core`]). It runs one piece of
//! work at a time (an input and the follow-ups after it, a compaction, an abort's cleanup, the
//! close sequence) while it keeps answering commands, and it is supervised: a panic anywhere
//! becomes an `error` event, the session goes back to idle, and the task goes on serving.
//!
//! `Core` sits in a `Mutex` only because the work and the command handler are two futures of
//! this one task (polled by the same `select!`): no other task ever locks it, no lock is held
//! across an `.await` (so it is never contended: [`Task::core`] checks), and nothing under it
//! waits or touches the disk: an event or an entry is
//! handed to the [`Writer`](crate::store::Writer) without waiting, and the agent loop waits for
//! room in the writer's backlog at its own await points, with the lock released (see
//! `store/writer.rs`).
//!
//! One job per file: `start` builds the task, `restore` brings a stored session back, `run` is
//! the loop, `commands` answers commands, `work` runs work, `state` is the state machine and
//! what it publishes, `inputs` the submits and queues, `idempotency` the client input ids,
//! `requests` what waits for a client's answer, `supervise` turns panics into events, and
//! `unload` decides eviction and writes the last record.

mod commands;
mod idempotency;
mod inputs;
mod requests;
mod restore;
mod run;
mod start;
mod state;
mod supervise;
mod unload;
mod work;

pub(super) use start::start;

use super::Family;
use super::events::EventLog;
use super::history::History;
use super::view::View;
use super::{Error, Info};
use crate::agent::Input;
use crate::config::Price;
use crate::llm::{ProviderSet, RetryPolicy};
use crate::profile::EnvironmentContext;
use crate::tools::ToolRegistry;
use agentd_proto::{
    AbortResponse, CompactResponse, DaemonEvent, InputId, ProcessingEndReason, RequestId,
    ResolvedBy, SessionEndReason, SessionState, Usage,
};
use idempotency::Submitted;
use requests::Pending;
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use tokio::sync::{OnceCell, broadcast, oneshot, watch};
use tokio_util::sync::CancellationToken;

/// A retry of failed writes, to await outside the task.
pub(super) type StorageRetry = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// Work the task runs while it keeps answering commands.
enum Work {
    /// An input, then the follow-ups queued meanwhile.
    Process(Input, CancellationToken),
    Compact(
        CancellationToken,
        oneshot::Sender<Result<CompactResponse, Error>>,
    ),
    /// An abort of an idle session: end what earlier commands left in the background.
    Terminate,
    /// The close sequence.
    Close,
    /// A rollback that puts the files back too (`session/rollback {files: true}`).
    Undo {
        turns: usize,
        force: bool,
        reply: oneshot::Sender<Result<agentd_proto::RollbackResponse, Error>>,
    },
    /// `session/redo`.
    Redo {
        force: bool,
        reply: oneshot::Sender<Result<agentd_proto::RedoResponse, Error>>,
    },
}

use crate::store::RedoPoint;

/// Everything the session task owns.
pub(super) struct Core {
    info: Arc<Info>,
    daemon_events: Option<broadcast::Sender<DaemonEvent>>,
    state: SessionState,
    /// Set once a close is requested: the reason, for `session_end`.
    closing: Option<SessionEndReason>,
    steering: VecDeque<Input>,
    follow_up: VecDeque<Input>,
    /// Cancels the current work.
    turn: Option<CancellationToken>,
    next: Option<Work>,
    submitted: Submitted,
    last_end: Option<ProcessingEndReason>,
    last_error: Option<String>,
    /// The input being processed, for `processing_end`.
    current_input: Option<InputId>,
    pub(super) config: Arc<agentd_proto::SessionConfig>,
    pub(super) usage: Usage,
    pub(super) history: History,
    pub(super) log: EventLog,
    /// The write failure last reported, until a write succeeds.
    storage_error: Option<String>,
    /// Abort calls waiting for the work to end, with whether work was running.
    aborts: Vec<(oneshot::Sender<Result<AbortResponse, Error>>, bool)>,
    closes: Vec<oneshot::Sender<()>>,
    view: watch::Sender<View>,
    /// The tools the model is offered; rebuilt when the config changes.
    pub(super) tools: Arc<ToolRegistry>,
    /// Requests waiting for a client's answer, oldest first.
    pending: Vec<Pending>,
    /// Recently settled requests and who settled them, so a late answer gets a clear error.
    settled: VecDeque<(RequestId, ResolvedBy)>,
    /// The skills active at a leaf of the history (see `make_view`).
    active_skills: std::cell::RefCell<(Option<agentd_proto::EntryId>, Arc<[String]>)>,
    /// What `session/redo` brings back.
    redo: Option<RedoPoint>,
}

/// The session task's state and everything its work needs.
pub(super) struct Task {
    pub(super) info: Arc<Info>,
    pub(super) providers: ProviderSet,
    pub(super) retry: RetryPolicy,
    pub(super) prices: Arc<BTreeMap<String, Price>>,
    pub(super) family: Option<Family>,
    /// The session's token: cancelled at daemon shutdown. Turns are its children.
    cancel: CancellationToken,
    /// Captured in the background from the start; the first LLM call waits for it.
    context: Arc<OnceCell<EnvironmentContext>>,
    /// Its MCP servers' owner; `None` where the host runs none.
    pub(super) mcp: Option<crate::mcp::Mcp>,
    /// Its hooks; `None` where the host runs none.
    pub(super) hooks: Option<Arc<crate::hooks::Hooks>>,
    core: Mutex<Core>,
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

impl Task {
    /// The task's state. Only this task locks it, and never across an `.await` (see the
    /// module docs), so the lock is always free: a debug build aborts when it is not, which
    /// makes every test that runs a session a check of that rule.
    pub(super) fn core(&self) -> MutexGuard<'_, Core> {
        match self.core.try_lock() {
            Ok(core) => core,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                if cfg!(debug_assertions) {
                    eprintln!(
                        "agentd bug: session {} state locked while locked (a guard held across \
                         an await, or a second task)",
                        self.info.id
                    );
                    std::process::abort();
                }
                self.core.lock().unwrap_or_else(|e| e.into_inner())
            }
        }
    }

    /// Why the current work was stopped (see `Host::stop_reason`).
    pub(super) fn stop_reason(&self) -> &'static str {
        // The session's own token fires only when the daemon shuts down; turns are its children.
        if self.cancel.is_cancelled() {
            "because the daemon is shutting down"
        } else if self.core().storage_error.is_some() {
            "because the session could not be saved to disk"
        } else {
            "by the user"
        }
    }

    pub(super) fn context(&self) -> Option<&EnvironmentContext> {
        self.context.get()
    }
}
