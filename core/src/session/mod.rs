//! Sessions. Each session is one tokio task (`task.rs`) that owns everything about it: the
//! queues, the state machine, the config, the history, the event log and its persistence.
//! Everyone else holds a [`Session`] handle and talks to the task through commands with
//! oneshot replies; the only things shared are a cancellation token and a `watch` view
//! ([`View`]) from which snapshots, summaries and the state are read without asking the task.
//! The [`Registry`] holds every session of the daemon.
//!
//! A host program (spec 1.2) builds a session with [`Session::builder`] from a profile, an
//! execution environment and a provider, submits input, and reads events, without the
//! server.

#[cfg(test)]
mod backlog_tests;
mod builder;
mod events;
mod history;
mod host;
mod registry;
mod task;
#[cfg(test)]
mod tests;
mod view;

pub use builder::SessionBuilder;
pub(crate) use events::now;
pub use events::{LIVE_BUFFER, SharedEvent};
pub(crate) use history::History;
use registry::Family;
pub use registry::Registry;
pub use view::View;

use crate::config::Price;
use crate::exec::ExecutionEnvironment;
use crate::llm::{ProviderSet, RetryPolicy};
use crate::profile::Profile;
use crate::store::{EventReader, ParentLink, SessionFiles, SessionRecord};
use crate::tools::SubagentResult;
use agentd_proto::{
    AbortResponse, CompactResponse, ConfigPatch, DaemonEvent, EntryId, Environment, EventBody,
    ForkOrigin, HistoryEntry, ImageData, InputId, QueueContents, RespondParams, RespondResponse,
    RollbackResponse, SessionConfig, SessionEndReason, SessionId, SessionSnapshot, SessionState,
    SessionSummary, SubmitResponse, Usage, WhenBusy,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
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
    /// The session's record cannot be read, so it cannot be loaded.
    #[error(
        "session {} is damaged: {}: {}; `agentctl rm` (session/delete) removes it",
        .0.session_id,
        .0.path,
        .0.reason
    )]
    Damaged(Box<agentd_proto::DamagedSession>),
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
    /// No pending request has this id (never raised, or already settled: the message says).
    #[error("{0}")]
    RequestNotFound(String),
    /// A bug stopped the request (a crashed task); the daemon goes on.
    #[error("internal error: {0}")]
    Internal(String),
    /// The execution environment cannot be reached.
    #[error("{0}")]
    EnvironmentUnavailable(String),
    /// An undo or a redo would overwrite files the user changed since: `files` (at most
    /// [`agentd_proto::MAX_LISTED_FILES`]) and `more` others. Nothing was restored.
    #[error(
        "files changed since the agent changed them (kept as they are; nothing was restored): \
         {}{}; pass force to restore anyway (their current versions are kept for a redo)",
        files.join(", "),
        if *more > 0 { format!(" and {more} more") } else { String::new() }
    )]
    FilesChanged {
        /// The files, as many as are listed.
        files: Vec<String>,
        /// How many more there are.
        more: usize,
    },
}

impl Error {
    /// The refusal naming `files`, the list cut to [`agentd_proto::MAX_LISTED_FILES`].
    pub(crate) fn files_changed(mut files: Vec<String>) -> Self {
        let more = files.len().saturating_sub(agentd_proto::MAX_LISTED_FILES);
        files.truncate(agentd_proto::MAX_LISTED_FILES);
        Self::FilesChanged { files, more }
    }
}

/// How long `abort` waits for the session to stop before saying it did not.
const ABORT_WAIT: Duration = Duration::from_secs(15);
/// How long a reply waits for subscribers to send on the events before it.
const DELIVERY_WAIT: Duration = Duration::from_secs(1);
/// Commands waiting for a busy session task before callers wait to send more.
const COMMAND_BUFFER: usize = 64;

/// Everything needed to start a session.
pub(crate) struct SessionSpec {
    /// Its id.
    pub(crate) id: SessionId,
    /// Working directory.
    pub(crate) cwd: PathBuf,
    /// Title for lists.
    pub(crate) title: Option<String>,
    /// Tools and prompt.
    pub(crate) profile: Profile,
    /// Where tools run.
    pub(crate) env: Arc<dyn ExecutionEnvironment>,
    /// What `env` is, as the session record and snapshots name it.
    pub(crate) environment: Environment,
    /// The worktree it owns.
    pub(crate) worktree: Option<agentd_proto::Worktree>,
    /// The APIs the session may use; its config names the current one.
    pub(crate) providers: ProviderSet,
    /// Initial settings.
    pub(crate) config: SessionConfig,
    /// User instructions appended last to the system prompt.
    pub(crate) instructions: Option<String>,
    /// Retry policy for LLM calls.
    pub(crate) retry: RetryPolicy,
    /// Prices by model, to report costs (may be empty).
    pub(crate) prices: Arc<BTreeMap<String, Price>>,
    /// Whether the environment only reads (recorded so a restored session keeps it).
    pub(crate) read_only: bool,
    /// Where the session is stored; `None` keeps it in memory only.
    pub(crate) files: Option<SessionFiles>,
    /// The history to start with (a fork's copy, or what a restored session stored).
    pub(crate) history: History,
    /// The session this one was forked from.
    pub(crate) forked_from: Option<ForkOrigin>,
    /// Set when the session was stored by an earlier run of the daemon.
    pub(crate) restored: Option<Restored>,
    /// The session that spawned this one as a subagent.
    pub(crate) parent: Option<ParentLink>,
    /// How its MCP servers start; `None`: it runs none (a host's session).
    pub(crate) mcp: Option<crate::mcp::Launcher>,
    /// Its hooks; `None`: it runs none (a host's session).
    pub(crate) hooks: Option<Arc<crate::hooks::Hooks>>,
    /// The Agent Skills and prompt commands it found.
    pub(crate) catalog: Arc<crate::skills::Catalog>,
    /// Its checkpoints, or why it has none.
    pub(crate) checkpoints: Result<crate::checkpoint::Checkpoints, String>,
    /// Its children and parent, through which it spawns, finds and stops its subagents and
    /// reports to its parent; `None`: the subagent tools report that subagents are not
    /// available.
    pub(crate) family: Option<Family>,
    /// Cancelled when the session must stop for good (daemon shutdown): its work is aborted
    /// and its task flushes and ends. The session's turns are children of it.
    pub(crate) cancel: CancellationToken,
}

/// What a stored session brings back besides its history.
pub(crate) struct Restored {
    /// Its record as stored.
    pub(crate) record: SessionRecord,
    /// Seq of its last stored event.
    pub(crate) last_seq: u64,
    /// Whether events may be missing from its journal (the last daemon died holding it, or a
    /// torn line was cut): their seqs are skipped.
    pub(crate) unclean: bool,
    /// Whether its journal says it was processing when the daemon stopped.
    pub(crate) interrupted: bool,
    /// Reads its stored events.
    pub(crate) reader: EventReader,
    /// Problems met while loading (skipped lines), reported as `warning` events.
    pub(crate) warnings: Vec<String>,
}

/// The parts of a session that never change while it is loaded.
pub(crate) struct Info {
    pub(crate) id: SessionId,
    pub(crate) cwd: PathBuf,
    pub(crate) title: Option<String>,
    pub(crate) profile: Profile,
    pub(crate) instructions: Option<String>,
    pub(crate) read_only: bool,
    pub(crate) created: String,
    pub(crate) forked_from: Option<ForkOrigin>,
    pub(crate) parent: Option<ParentLink>,
    pub(crate) env: Arc<dyn ExecutionEnvironment>,
    pub(crate) environment: Environment,
    pub(crate) catalog: Arc<crate::skills::Catalog>,
    pub(crate) worktree: Option<agentd_proto::Worktree>,
    /// Its checkpoints, or why it has none (for the error of an undo).
    pub(crate) checkpoints: Result<crate::checkpoint::Checkpoints, String>,
}

impl Info {
    /// The tools every config of the session starts from: its profile's, and
    /// `activate_skill` when it found skills.
    pub(crate) fn base_tools(&self) -> std::borrow::Cow<'_, crate::tools::ToolRegistry> {
        if self.catalog.skills.is_empty() {
            return std::borrow::Cow::Borrowed(&self.profile.tools);
        }
        std::borrow::Cow::Owned(
            self.profile
                .tools
                .with(crate::skills::ActivateSkill::registry()),
        )
    }
}

/// What a new session copies from another (a fork, or a subagent's parent).
pub(crate) struct Template {
    pub(crate) cwd: PathBuf,
    pub(crate) profile: Profile,
    pub(crate) config: SessionConfig,
    pub(crate) instructions: Option<String>,
    pub(crate) read_only: bool,
    /// Where its tools run; an ssh environment's `cwd` is `cwd` above.
    pub(crate) environment: Environment,
    /// The worktree it owns (`cwd` is in it); forks and subagents own none.
    pub(crate) worktree: Option<agentd_proto::Worktree>,
}

/// A request to the session task; each carries the sender of its reply.
enum Command {
    Submit {
        text: String,
        images: Vec<ImageData>,
        client_input_id: Option<String>,
        when_busy: WhenBusy,
        reply: oneshot::Sender<Result<SubmitResponse, Error>>,
    },
    Steer {
        text: String,
        images: Vec<ImageData>,
        reply: oneshot::Sender<Result<SubmitResponse, Error>>,
    },
    QueueClear(oneshot::Sender<QueueContents>),
    SetConfig {
        patch: Box<ConfigPatch>,
        /// A provider to add to the session's set first (one switched to).
        provider: Option<(String, Arc<dyn crate::llm::Provider>)>,
        reply: oneshot::Sender<Result<SessionConfig, Error>>,
    },
    Rollback {
        turns: usize,
        files: bool,
        force: bool,
        reply: oneshot::Sender<Result<RollbackResponse, Error>>,
    },
    Redo {
        force: bool,
        reply: oneshot::Sender<Result<agentd_proto::RedoResponse, Error>>,
    },
    Compact(oneshot::Sender<Result<CompactResponse, Error>>),
    History(oneshot::Sender<Vec<Arc<HistoryEntry>>>),
    InputEntry {
        input_id: InputId,
        reply: oneshot::Sender<Option<Arc<HistoryEntry>>>,
    },
    Subscribe {
        since_seq: Option<u64>,
        reply: oneshot::Sender<events::Joined>,
    },
    Abort(oneshot::Sender<Result<AbortResponse, Error>>),
    Close {
        reason: SessionEndReason,
        reply: oneshot::Sender<()>,
    },
    /// Unload if idle and unwatched: flush, mark the record closed cleanly, end the task.
    Evict(oneshot::Sender<Option<SessionRecord>>),
    /// Retry failed writes; the reply is the retry to await.
    RetryStorage(oneshot::Sender<task::StorageRetry>),
    /// An event from elsewhere (a subagent's report) for this session's stream.
    Emit(EventBody),
    Result(oneshot::Sender<SubagentResult>),
    /// Replies once everything so far, the record included, is stored.
    Saved(oneshot::Sender<()>),
    Respond {
        params: RespondParams,
        reply: oneshot::Sender<Result<RespondResponse, Error>>,
    },
}

/// Replayed events and the live receiver that continues right after them.
pub struct Subscription {
    /// Events with `seq > since_seq`, oldest first.
    pub replay: Vec<SharedEvent>,
    /// Every later event.
    pub live: broadcast::Receiver<SharedEvent>,
    /// The seq of the newest event the subscriber has sent on; the subscriber keeps it
    /// current (`send_replace`), so that [`Session::delivered`] can wait for it.
    pub delivered: watch::Sender<u64>,
}

/// A handle to a running session. Cheap to share; every method may be called while the
/// session works.
pub struct Session {
    info: Arc<Info>,
    commands: mpsc::Sender<Command>,
    view: watch::Receiver<View>,
    family: Option<Family>,
    /// How far each live subscription has delivered (see [`Session::delivered`]); a
    /// subscription that ended has dropped its sender.
    subscribers: Mutex<Vec<watch::Receiver<u64>>>,
}

impl Session {
    /// Starts the session's task and emits `session_start` (or, for a restored session,
    /// recovers it). `daemon_events` receives state changes for `daemon/subscribe`; `tasks`
    /// tracks the task for shutdown.
    pub(crate) fn spawn(
        spec: SessionSpec,
        daemon_events: Option<broadcast::Sender<DaemonEvent>>,
        tasks: &tokio_util::task::TaskTracker,
    ) -> Arc<Self> {
        let (commands, rx) = mpsc::channel(COMMAND_BUFFER);
        let family = spec.family.clone();
        let (info, view) = task::start(spec, daemon_events, (commands.downgrade(), rx), tasks);
        Arc::new(Self {
            info,
            commands,
            view,
            family,
            subscribers: Mutex::default(),
        })
    }

    /// Its id.
    pub fn id(&self) -> &SessionId {
        &self.info.id
    }

    /// What the session looks like now.
    pub fn view(&self) -> View {
        self.view.borrow().clone()
    }

    /// The current state.
    pub fn state(&self) -> SessionState {
        self.view.borrow().state
    }

    /// The current configuration.
    pub fn config(&self) -> SessionConfig {
        (*self.view.borrow().config).clone()
    }

    /// The queued items.
    pub fn queue(&self) -> QueueContents {
        (*self.view.borrow().queue).clone()
    }

    /// The full snapshot.
    pub fn snapshot(&self) -> SessionSnapshot {
        self.view.borrow().snapshot(&self.info)
    }

    /// The record `session.json` would hold now.
    pub(crate) fn record(&self) -> SessionRecord {
        self.view.borrow().record(&self.info)
    }

    /// The line for `session/list`.
    pub fn summary(&self) -> SessionSummary {
        self.view.borrow().record(&self.info).summary()
    }

    /// The skills and prompt commands a client can offer after `/`.
    pub fn commands(&self) -> agentd_proto::CommandsResponse {
        self.info.catalog.commands_response()
    }

    /// Its title.
    pub fn title(&self) -> Option<&str> {
        self.info.title.as_deref()
    }

    /// The session that spawned this one as a subagent.
    pub fn parent_id(&self) -> Option<&SessionId> {
        self.info.parent.as_ref().map(|p| &p.session_id)
    }

    /// What a fork or a subagent copies from this session.
    pub(crate) fn template(&self) -> Template {
        Template {
            cwd: self.info.cwd.clone(),
            profile: self.info.profile.clone(),
            config: self.config(),
            instructions: self.info.instructions.clone(),
            read_only: self.info.read_only,
            environment: self.info.environment.clone(),
            worktree: None,
        }
    }

    /// The worktree it owns, if any.
    pub(crate) fn worktree(&self) -> Option<&agentd_proto::Worktree> {
        self.info.worktree.as_ref()
    }

    /// Sends a command and waits for its reply. A task that is gone is a closed session if
    /// it closed, and an internal error otherwise.
    async fn call<T>(
        &self,
        command: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, Error> {
        let (reply, response) = oneshot::channel();
        let gone = || {
            if self.state() == SessionState::Closed {
                Error::Closed(self.id().clone())
            } else {
                Error::Internal(format!("session {} stopped unexpectedly", self.id()))
            }
        };
        self.commands
            .send(command(reply))
            .await
            .map_err(|_| gone())?;
        response.await.map_err(|_| gone())
    }

    /// Retries failed writes first when the session's storage is failing, so input is refused
    /// only while the disk still refuses it.
    async fn check_storage(&self) -> Result<(), Error> {
        if !self.view.borrow().storage_failing {
            return Ok(());
        }
        let retry = self.call(Command::RetryStorage).await?;
        retry.await.map_err(Error::Storage)
    }

    /// Submits input (text and images): starts processing when idle; otherwise queues it as
    /// `when_busy` says. A repeated `client_input_id` returns the first result and does
    /// nothing else. Images are checked (the error names the image at fault), and the session's
    /// provider must take them.
    pub async fn submit(
        &self,
        text: String,
        images: Vec<ImageData>,
        client_input_id: Option<String>,
        when_busy: WhenBusy,
    ) -> Result<SubmitResponse, Error> {
        crate::agent::check_images(&images).map_err(Error::InvalidParams)?;
        self.check_storage().await?;
        self.call(|reply| Command::Submit {
            text,
            images,
            client_input_id,
            when_busy,
            reply,
        })
        .await?
    }

    /// Queues a steering message (spec 2.6); delivered after the current tool round, or with
    /// the next submit when idle.
    pub async fn steer(
        &self,
        text: String,
        images: Vec<ImageData>,
    ) -> Result<SubmitResponse, Error> {
        crate::agent::check_images(&images).map_err(Error::InvalidParams)?;
        self.check_storage().await?;
        self.call(|reply| Command::Steer {
            text,
            images,
            reply,
        })
        .await?
    }

    /// Queues a follow-up (spec 2.6), processed after the current input completes. When the
    /// session is idle it starts processing at once.
    pub async fn follow_up(
        &self,
        text: String,
        images: Vec<ImageData>,
    ) -> Result<SubmitResponse, Error> {
        self.submit(text, images, None, WhenBusy::Queue).await
    }

    /// Answers a pending request (`session/respond`); the first answer wins.
    pub async fn respond(&self, params: RespondParams) -> Result<RespondResponse, Error> {
        self.call(|reply| Command::Respond { params, reply })
            .await?
    }

    /// Removes and returns every queued item.
    pub async fn queue_clear(&self) -> Result<QueueContents, Error> {
        self.call(Command::QueueClear).await
    }

    /// Applies `patch` from the next LLM call on, adding `provider` (its name and client) to
    /// the providers the session may use: a session keeps the set it was made with, so a
    /// switch to a provider usable only since then brings its client along.
    pub async fn set_config(
        &self,
        patch: ConfigPatch,
        provider: Option<(String, Arc<dyn crate::llm::Provider>)>,
    ) -> Result<SessionConfig, Error> {
        self.call(|reply| Command::SetConfig {
            patch: Box::new(patch),
            provider,
            reply,
        })
        .await?
    }

    /// Moves the current branch back before the `turns`-th newest user input (an idle
    /// session only). Nothing is deleted: a fork at an entry reaches the rest. With `files`,
    /// the files the agent changed in those inputs go back too (see `checkpoint`); `force`
    /// overwrites files the user changed since.
    pub async fn rollback(
        &self,
        turns: usize,
        files: bool,
        force: bool,
    ) -> Result<RollbackResponse, Error> {
        self.call(|reply| Command::Rollback {
            turns,
            files,
            force,
            reply,
        })
        .await?
    }

    /// Brings back what the last rollback took away (an idle session only).
    pub async fn redo(&self, force: bool) -> Result<agentd_proto::RedoResponse, Error> {
        self.call(|reply| Command::Redo { force, reply }).await?
    }

    /// What the agent changed in the files for `input_id` (default: the newest input on the
    /// branch), as a unified diff.
    pub async fn diff(
        &self,
        input_id: Option<InputId>,
    ) -> Result<agentd_proto::DiffResponse, Error> {
        let checkpoints = self
            .info
            .checkpoints
            .clone()
            .map_err(Error::InvalidParams)?;
        let input_id = match input_id {
            Some(id) => id,
            None => self
                .history()
                .await?
                .iter()
                .rev()
                .find_map(|e| match &e.turn {
                    agentd_proto::Turn::User { input_id, .. } => Some(input_id.clone()),
                    _ => None,
                })
                .ok_or_else(|| Error::InvalidParams("the session has no input yet".into()))?,
        };
        let diff = checkpoints
            .diff(input_id.clone())
            .await
            .map_err(Error::Internal)?;
        Ok(agentd_proto::DiffResponse { input_id, diff })
    }

    /// Summarizes older turns with the session's model (an idle session only); see
    /// `agent::compaction`.
    pub async fn compact(&self) -> Result<CompactResponse, Error> {
        self.check_storage().await?;
        self.call(Command::Compact).await?
    }

    /// The current branch of the history, oldest first.
    pub async fn history(&self) -> Result<Vec<Arc<HistoryEntry>>, Error> {
        self.call(Command::History).await
    }

    /// The user or steering entry of input `input_id`, on any branch (with its images).
    pub async fn input_entry(&self, input_id: InputId) -> Result<Option<Arc<HistoryEntry>>, Error> {
        self.call(|reply| Command::InputEntry { input_id, reply })
            .await
    }

    /// The current branch up to and including `id`, or `None` when `id` is not on it.
    pub async fn history_until(
        &self,
        id: &EntryId,
    ) -> Result<Option<Vec<Arc<HistoryEntry>>>, Error> {
        let mut branch = self.history().await?;
        Ok(branch.iter().position(|e| e.id == *id).map(|i| {
            branch.truncate(i + 1);
            branch
        }))
    }

    /// Replay from `since_seq` (none: live only; 0: everything) plus the live stream after
    /// it, with nothing missed or repeated in between.
    pub async fn subscribe(&self, since_seq: Option<u64>) -> Result<Subscription, Error> {
        let joined = self
            .call(|reply| Command::Subscribe { since_seq, reply })
            .await?;
        let mut replay = match joined.stored {
            Some((reader, after, until)) => {
                tokio::task::spawn_blocking(move || reader.read(after, until))
                    .await
                    .map_err(|e| Error::Internal(format!("replay failed: {e}")))?
                    .map_err(|e| Error::Storage(e.to_string()))?
                    .into_iter()
                    .map(SharedEvent::new)
                    .collect()
            }
            None => Vec::new(),
        };
        replay.extend(joined.tail);
        let (delivered, progress) = watch::channel(since_seq.unwrap_or(joined.last_seq));
        let mut subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        subscribers.retain(|s| s.has_changed().is_ok());
        subscribers.push(progress);
        Ok(Subscription {
            replay,
            live: joined.live,
            delivered,
        })
    }

    /// Waits (at most a second) until every live subscription has sent on the events
    /// up to `seq`, so that a reply sent next reaches a client after the events it follows
    /// (an abort's answer after the `processing_end` it caused).
    pub async fn delivered(&self, seq: u64) {
        // Copies of the receivers: the lock is not held while waiting.
        let mut subscribers = self
            .subscribers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        // A subscription that ended (its sender dropped) delivers nothing more: done.
        let all = futures::future::join_all(subscribers.iter_mut().map(|progress| async move {
            // The borrow `wait_for` returns is dropped at once: no guard lives across awaits.
            let _ = progress.wait_for(|&delivered| delivered >= seq).await;
        }));
        let _ = tokio::time::timeout(DELIVERY_WAIT, all).await;
    }

    /// Interrupts the current work: cancels the LLM stream, kills every process group the
    /// session started (its subagents' first), records the interruption, and returns once
    /// the session is idle. Queued items stay queued and are returned. With `close`, the
    /// session then closes.
    pub async fn abort(&self, close: bool) -> Result<AbortResponse, Error> {
        if self.state() == SessionState::Closed {
            if close {
                return Ok(AbortResponse {
                    aborted: false,
                    state: SessionState::Closed,
                    queue: QueueContents::default(),
                });
            }
            return Err(Error::Closed(self.id().clone()));
        }
        for generation in self.descendants().iter().rev() {
            futures::future::join_all(generation.iter().map(|c| c.abort_own())).await;
        }
        let response = self.abort_own().await?;
        if close {
            self.close(SessionEndReason::Aborted).await;
            return Ok(AbortResponse {
                state: SessionState::Closed,
                ..response
            });
        }
        Ok(response)
    }

    /// Aborts this session's own work (not its children's).
    async fn abort_own(&self) -> Result<AbortResponse, Error> {
        tokio::time::timeout(ABORT_WAIT, self.call(Command::Abort))
            .await
            .map_err(|_| {
                Error::Internal(format!(
                    "session {} did not stop within {}s of the abort",
                    self.id(),
                    ABORT_WAIT.as_secs()
                ))
            })??
    }

    /// Closes the session (spec appendix B): closes its subagents, aborts running work, kills
    /// its processes, emits `session_end`. Closing a closed session does nothing.
    pub async fn close(&self, reason: SessionEndReason) {
        for generation in self.descendants().iter().rev() {
            futures::future::join_all(
                generation
                    .iter()
                    .map(|c| c.close_own(SessionEndReason::ParentClosed)),
            )
            .await;
        }
        self.close_own(reason).await;
    }

    async fn close_own(&self, reason: SessionEndReason) {
        if self.state() == SessionState::Closed {
            return;
        }
        let _ = self.call(|reply| Command::Close { reason, reply }).await;
    }

    /// Unloads the session if it is idle (or closed) and unwatched: its task writes
    /// everything, marks the record cleanly closed and ends. Returns the final record.
    pub(crate) async fn evict(&self) -> Option<SessionRecord> {
        self.call(Command::Evict).await.ok().flatten()
    }

    /// Waits until everything the session did so far, its record included, is stored.
    pub(crate) async fn saved(&self) {
        let _ = self.call(Command::Saved).await;
    }

    /// Adds an event to this session's stream from outside its task.
    pub(crate) async fn notify(&self, body: EventBody) {
        let _ = self.commands.send(Command::Emit(body)).await;
    }

    /// What the session's work produced so far (spec 7.3 `SubAgentResult`).
    pub(crate) async fn result(&self) -> Result<SubagentResult, Error> {
        self.call(Command::Result).await
    }

    /// Waits until the session is not processing.
    pub(crate) async fn settled(&self) {
        let mut view = self.view.clone();
        let _ = view.wait_for(|v| !v.state.is_working()).await;
    }

    /// Tokens used so far.
    pub fn usage(&self) -> Usage {
        self.view.borrow().usage
    }
}
