//! The session task: the single owner of a session's state ([`Core`]). It runs one piece of
//! work at a time (an input and the follow-ups after it, a compaction, an abort's cleanup, the
//! close sequence) while it keeps answering commands, and it is supervised: a panic anywhere
//! becomes an `error` event, the session goes back to idle, and the task goes on serving.
//!
//! `Core` sits in a `Mutex` only because the work and the command handler are two futures of
//! this one task (polled by the same `select!`): no other task ever locks it, no lock is held
//! across an `.await`, and nothing under it touches the disk (writes go to the [`Writer`]).

use super::events::{EventLog, Joined};
use super::history::History;
use super::view::View;
use super::{Command, Error, Info, Registry, SessionSpec};
use crate::agent::{Agent, CompactError, Input, Outcome};
use crate::config::Price;
use crate::llm::{ProviderSet, RetryPolicy};
use crate::profile::EnvironmentContext;
use crate::store::{BACKLOG_LINES, SessionRecord, Writer, WriterStatus};
use crate::tools::{Answer, SubagentResult, ToolRegistry, session_tools};
use agentd_proto::{
    AbortResponse, ApprovalRule, CompactResponse, DaemonEvent, Decision, Disposition, EntryId,
    EventBody, ImageData, InputId, PendingRequest, ProcessingEndReason, QueueContents, QueuedInput,
    RequestBody, RequestId, ResolvedBy, RespondParams, RespondResponse, RollbackResponse,
    SessionEndReason, SessionState, SubmitResponse, ToolCallId, ToolResult, Turn, Usage, WhenBusy,
};
use futures::FutureExt;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{OnceCell, broadcast, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

/// Settled request ids remembered per session, to tell a late answer what happened.
const SETTLED_REMEMBERED: usize = 256;
/// Client input ids remembered per session for idempotent submits.
const IDEMPOTENCY_KEYS: usize = 1024;
/// Queued steering and follow-up messages, each.
const MAX_QUEUED: usize = 100;
/// Seqs skipped when a session is reopened after its daemon died: more than the events that
/// can wait for the disk, so a seq a client saw is never given to another event.
const MISSING_SEQS: u64 = 10_000;
const _: () = assert!(MISSING_SEQS > BACKLOG_LINES as u64);

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
}

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
    submitted: HashMap<String, SubmitResponse>,
    submitted_order: VecDeque<String>,
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
}

/// A request waiting for an answer, with the waiting call's end of the channel.
struct Pending {
    request: PendingRequest,
    /// The allow rules `allow_always` adds.
    always: Vec<ApprovalRule>,
    answer: oneshot::Sender<Answer>,
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

/// The answer `params` gives to a request with `body`; the error names the field that is
/// missing or does not belong.
fn answer_for(body: &RequestBody, params: &RespondParams) -> Result<Answer, Error> {
    let (kind, field, others): (&str, &str, [(&str, bool); 4]) = match body {
        RequestBody::Approval { .. } => (
            "an approval",
            "decision (allow, allow_always or deny)",
            [
                ("answer", params.answer.is_some()),
                ("output", params.output.is_some()),
                ("is_error", params.is_error.is_some()),
                ("", false),
            ],
        ),
        RequestBody::Question { .. } => (
            "a question",
            "answer",
            [
                ("decision", params.decision.is_some()),
                ("message", params.message.is_some()),
                ("output", params.output.is_some()),
                ("is_error", params.is_error.is_some()),
            ],
        ),
        RequestBody::ClientTool { .. } => (
            "a client tool call",
            "output (and is_error)",
            [
                ("decision", params.decision.is_some()),
                ("message", params.message.is_some()),
                ("answer", params.answer.is_some()),
                ("", false),
            ],
        ),
    };
    if let Some((name, _)) = others.iter().find(|(_, present)| *present) {
        return Err(Error::InvalidParams(format!(
            "request {} is {kind}: `{name}` does not answer it; send `{field}`",
            params.request_id
        )));
    }
    let missing = || {
        Error::InvalidParams(format!(
            "request {} is {kind}: send `{field}`",
            params.request_id
        ))
    };
    Ok(match body {
        RequestBody::Approval { .. } => Answer::Approval {
            decision: params.decision.ok_or_else(missing)?,
            message: params.message.clone(),
        },
        RequestBody::Question { .. } => {
            Answer::Question(params.answer.clone().ok_or_else(missing)?)
        }
        RequestBody::ClientTool { .. } => Answer::ClientTool {
            output: params.output.clone().ok_or_else(missing)?,
            is_error: params.is_error.unwrap_or(false),
        },
    })
}

impl Core {
    fn make_view(&self) -> View {
        let branch = self.history.branch_len();
        View {
            state: self.state,
            config: self.config.clone(),
            usage: self.usage,
            queue: Arc::new(self.queue()),
            last_seq: self.log.last_seq(),
            updated: self.log.updated().to_owned(),
            leaf: self.history.leaf().cloned(),
            branch_len: branch,
            history_len: self.history.len(),
            last_end: self.last_end,
            storage_failing: self.storage_error.is_some(),
            active: Instant::now(),
            pending: Arc::new(self.pending.iter().map(|p| p.request.clone()).collect()),
        }
    }

    /// Publishes the view after a change.
    pub(super) fn publish(&self) {
        self.view.send_replace(self.make_view());
    }

    /// Hands `session.json`'s new content to the writer.
    fn save(&self) {
        if let Some(writer) = self.log.writer() {
            writer.record(self.make_view().record(&self.info).to_json());
        }
    }

    fn queue(&self) -> QueueContents {
        QueueContents {
            steering: self.steering.iter().map(Input::queued).collect(),
            follow_up: self.follow_up.iter().map(Input::queued).collect(),
        }
    }

    /// Records an event.
    pub(super) fn emit(&mut self, body: EventBody) {
        if let EventBody::Error { message, .. } = &body {
            self.last_error = Some(message.clone());
        }
        let event = self.log.record(body);
        self.view.send_modify(|v| {
            v.last_seq = event.seq;
            v.updated.clone_from(&event.ts);
        });
        self.log.broadcast(&event);
    }

    /// Appends a turn to the history and hands it to the writer (a commit point).
    pub(super) fn append(&mut self, turn: Turn) {
        let entry = self.history.push(EntryId(new_id("")), super::now(), turn);
        if let Some(writer) = self.log.writer() {
            // A step ends with a model response or a tool round (or a compaction, or a note
            // closing interrupted work): one sync then covers its events and entries. The
            // user's input and steering ride with the next step's.
            let commit = !matches!(entry.turn, Turn::User { .. } | Turn::Steering { .. });
            writer.entry(&entry, commit);
        }
        let (leaf, branch_len, history_len) = (
            Some(entry.id.clone()),
            self.history.branch_len(),
            self.history.len(),
        );
        self.view.send_modify(|v| {
            v.leaf = leaf;
            v.branch_len = branch_len;
            v.history_len = history_len;
        });
    }

    fn set_state(&mut self, state: SessionState) {
        self.set_state_after(state, None);
    }

    /// Changes state; `first`, an event the change goes with (`processing_end`), is logged
    /// before `state_changed`. The view shows the new state before either event reaches
    /// anyone, so a client that sees them and asks finds the state they announce.
    fn set_state_after(&mut self, state: SessionState, first: Option<EventBody>) {
        if self.state == state {
            if let Some(body) = first {
                self.emit(body);
            }
            return;
        }
        self.state = state;
        self.publish();
        if let Some(body) = first {
            self.emit(body);
        }
        self.emit(EventBody::StateChanged { state });
        self.save();
        if let Some(tx) = &self.daemon_events {
            let _ = tx.send(DaemonEvent::StateChanged {
                session_id: self.info.id.clone(),
                state,
            });
        }
    }

    fn queue_changed(&mut self) {
        let queue = self.queue();
        self.emit(EventBody::QueueChanged { queue });
        self.publish();
        self.save();
    }

    fn check_open(&self) -> Result<(), Error> {
        if self.state == SessionState::Closed || self.closing.is_some() {
            return Err(Error::Closed(self.info.id.clone()));
        }
        Ok(())
    }

    fn check_storage(&self) -> Result<(), Error> {
        match self.log.writer().and_then(Writer::failure) {
            Some(e) => Err(Error::Storage(e)),
            None => Ok(()),
        }
    }

    /// Replies once the change is in the kernel (not waiting for a sync), so what the client
    /// is told survives the daemon being killed.
    fn reply_when_written<T: Send + 'static>(&self, reply: oneshot::Sender<T>, value: T) {
        self.reply_after(reply, value, Writer::written);
    }

    /// Replies once `session.json` holds the change too: for what only the record keeps (the
    /// config, the leaf after a rollback).
    fn reply_when_saved<T: Send + 'static>(&self, reply: oneshot::Sender<T>, value: T) {
        self.reply_after(reply, value, Writer::saved);
    }

    fn reply_after<T: Send + 'static, F: Future<Output = ()> + Send + 'static>(
        &self,
        reply: oneshot::Sender<T>,
        value: T,
        barrier: impl FnOnce(&Writer) -> F,
    ) {
        match self.log.writer() {
            Some(writer) => {
                let done = barrier(writer);
                tokio::spawn(async move {
                    done.await;
                    let _ = reply.send(value);
                });
            }
            None => {
                let _ = reply.send(value);
            }
        }
    }

    fn new_input(&self, text: String, images: Vec<ImageData>) -> Input {
        Input {
            input_id: InputId(new_id("in_")),
            text,
            images,
        }
    }

    fn cancel_turn(&self) {
        if let Some(turn) = &self.turn {
            turn.cancel();
        }
    }

    fn submit(
        &mut self,
        cancel: &CancellationToken,
        text: String,
        images: Vec<ImageData>,
        client_input_id: Option<String>,
        when_busy: WhenBusy,
    ) -> Result<SubmitResponse, Error> {
        self.check_open()?;
        if let Some(previous) = client_input_id.as_ref().and_then(|k| self.submitted.get(k)) {
            return Ok(previous.clone());
        }
        self.check_storage()?;
        let input = self.new_input(text, images);
        let input_id = input.input_id.clone();
        let disposition = if self.state == SessionState::Idle && self.next.is_none() {
            let token = cancel.child_token();
            self.turn = Some(token.clone());
            self.next = Some(Work::Process(input, token));
            self.set_state(SessionState::Processing);
            Disposition::Started
        } else {
            let queue = match when_busy {
                WhenBusy::Queue => &mut self.follow_up,
                WhenBusy::Steer => &mut self.steering,
                WhenBusy::Reject => return Err(Error::Busy(self.info.id.clone())),
            };
            if queue.len() >= MAX_QUEUED {
                return Err(Error::InvalidParams(format!(
                    "the queue is full ({MAX_QUEUED} items); wait, or clear it with session/queue_clear"
                )));
            }
            queue.push_back(input);
            self.queue_changed();
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
            if self.submitted_order.len() >= IDEMPOTENCY_KEYS
                && let Some(old) = self.submitted_order.pop_front()
            {
                self.submitted.remove(&old);
            }
            self.submitted.insert(key.clone(), response.clone());
            self.submitted_order.push_back(key);
        }
        Ok(response)
    }

    fn steer(&mut self, text: String, images: Vec<ImageData>) -> Result<SubmitResponse, Error> {
        self.check_open()?;
        self.check_storage()?;
        if self.steering.len() >= MAX_QUEUED {
            return Err(Error::InvalidParams(format!(
                "the steering queue is full ({MAX_QUEUED} items); wait for the next tool round"
            )));
        }
        let input = self.new_input(text, images);
        let input_id = input.input_id.clone();
        self.steering.push_back(input);
        self.queue_changed();
        Ok(SubmitResponse {
            input_id,
            disposition: Disposition::Steering,
            queued: true,
        })
    }

    /// Removes and returns every queued steering message.
    pub(super) fn drain_steering(&mut self) -> Vec<Input> {
        if self.steering.is_empty() {
            return Vec::new();
        }
        let drained = self.steering.drain(..).collect();
        self.queue_changed();
        drained
    }

    fn queue_clear(&mut self) -> QueueContents {
        let removed = self.queue();
        if !self.steering.is_empty() || !self.follow_up.is_empty() {
            self.steering.clear();
            self.follow_up.clear();
            self.queue_changed();
        }
        removed
    }

    fn set_config(
        &mut self,
        patch: &agentd_proto::ConfigPatch,
    ) -> Result<agentd_proto::SessionConfig, Error> {
        if self.info.read_only
            && patch
                .sandbox
                .is_some_and(|m| m != agentd_proto::SandboxMode::ReadOnly)
        {
            return Err(Error::InvalidConfig(
                "sandbox: a read-only session's sandbox is always read_only".into(),
            ));
        }
        let mut next = (*self.config).clone();
        next.apply(patch);
        crate::config::validate_session_config(&next)
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        self.tools =
            Arc::new(session_tools(&self.info.profile.tools, &next).map_err(Error::InvalidConfig)?);
        self.config = Arc::new(next.clone());
        self.publish();
        self.save();
        Ok(next)
    }

    fn rollback(&mut self, turns: usize) -> Result<RollbackResponse, Error> {
        self.check_open()?;
        if self.state != SessionState::Idle {
            return Err(Error::Busy(self.info.id.clone()));
        }
        let users = self
            .history
            .branch()
            .iter()
            .filter(|e| matches!(e.turn, Turn::User { .. }))
            .count();
        let removed = self.history.rollback(turns).ok_or_else(|| {
            Error::InvalidParams(format!(
                "cannot roll back {turns} turns: the branch has {users} user inputs (turns must be 1 to {users})"
            ))
        })?;
        let leaf = self.history.leaf().cloned();
        self.emit(EventBody::Rollback {
            leaf: leaf.clone(),
            removed,
        });
        self.publish();
        self.save();
        Ok(RollbackResponse {
            leaf,
            entries: self.history.branch_len(),
            removed,
        })
    }

    /// Raises a request: logs its event, lists it, and moves the state to `awaiting_input`.
    /// Returns its id and how long it may wait.
    pub(super) fn raise(
        &mut self,
        call_id: &ToolCallId,
        body: RequestBody,
        always: Vec<ApprovalRule>,
        answer: oneshot::Sender<Answer>,
    ) -> (RequestId, Duration) {
        let request_id = crate::agent::new_request_id();
        let timeout = Duration::from_millis(self.config.approval.timeout_ms);
        let call_id = call_id.clone();
        self.emit(match &body {
            RequestBody::Approval {
                tool,
                arguments,
                summary,
            } => EventBody::ApprovalRequested {
                request_id: request_id.clone(),
                call_id: call_id.clone(),
                tool: tool.clone(),
                arguments: arguments.clone(),
                summary: summary.clone(),
            },
            RequestBody::Question { question, options } => EventBody::QuestionRequested {
                request_id: request_id.clone(),
                call_id: call_id.clone(),
                question: question.clone(),
                options: options.clone(),
            },
            RequestBody::ClientTool { tool, arguments } => EventBody::ClientToolRequested {
                request_id: request_id.clone(),
                call_id: call_id.clone(),
                tool: tool.clone(),
                arguments: arguments.clone(),
            },
        });
        let expires = humantime::format_rfc3339_millis(SystemTime::now() + timeout).to_string();
        self.pending.push(Pending {
            request: PendingRequest {
                request_id: request_id.clone(),
                call_id,
                created: super::now(),
                expires,
                body,
            },
            always,
            answer,
        });
        self.pending_changed();
        (request_id, timeout)
    }

    /// Settles a request nobody answered (`by` timeout or abort); `false` when an answer
    /// settled it first.
    pub(super) fn settle(&mut self, request_id: &RequestId, by: ResolvedBy) -> bool {
        let Some(at) = self
            .pending
            .iter()
            .position(|p| p.request.request_id == *request_id)
        else {
            return false;
        };
        let pending = self.pending.remove(at);
        let request = pending.request;
        self.emit(match request.body {
            RequestBody::Approval { tool, .. } => EventBody::ApprovalResolved {
                request_id: request.request_id.clone(),
                call_id: request.call_id,
                tool,
                decision: Decision::Deny,
                by,
                message: None,
            },
            RequestBody::Question { .. } => EventBody::QuestionResolved {
                request_id: request.request_id.clone(),
                call_id: request.call_id,
                answer: None,
                by,
            },
            RequestBody::ClientTool { .. } => EventBody::ClientToolResolved {
                request_id: request.request_id.clone(),
                call_id: request.call_id,
                is_error: true,
                by,
            },
        });
        self.remember_settled(request.request_id, by);
        self.pending_changed();
        true
    }

    /// `session/respond`: checks the answer fits the request, settles it, and hands the
    /// answer to the waiting call.
    fn respond(&mut self, params: RespondParams) -> Result<RespondResponse, Error> {
        let id = &params.request_id;
        let Some(at) = self
            .pending
            .iter()
            .position(|p| p.request.request_id == *id)
        else {
            let why = match self.settled.iter().find(|(r, _)| r == id) {
                Some((_, ResolvedBy::Client)) => "it was already answered (the first answer wins)",
                Some((_, ResolvedBy::Timeout)) => {
                    "nobody answered in time and it was settled by its timeout"
                }
                Some((_, ResolvedBy::Abort)) => "the work was aborted and it was withdrawn",
                Some((_, ResolvedBy::Rule)) => "a rule decided it",
                None => {
                    "no request of this session has that id; session/get lists the pending ones"
                }
            };
            return Err(Error::RequestNotFound(format!("request {id}: {why}")));
        };
        let answer = answer_for(&self.pending[at].request.body, &params)?;
        let pending = self.pending.remove(at);
        let request = pending.request;
        let resolved = match (&request.body, &answer) {
            (RequestBody::Approval { tool, .. }, Answer::Approval { decision, message }) => {
                if *decision == Decision::AllowAlways {
                    let mut config = (*self.config).clone();
                    for rule in pending.always {
                        if !config.approval.allow.contains(&rule) {
                            config.approval.allow.push(rule);
                        }
                    }
                    self.config = Arc::new(config);
                    self.save();
                }
                EventBody::ApprovalResolved {
                    request_id: request.request_id.clone(),
                    call_id: request.call_id,
                    tool: tool.clone(),
                    decision: *decision,
                    by: ResolvedBy::Client,
                    message: message.clone(),
                }
            }
            (RequestBody::Question { .. }, Answer::Question(text)) => EventBody::QuestionResolved {
                request_id: request.request_id.clone(),
                call_id: request.call_id,
                answer: Some(text.clone()),
                by: ResolvedBy::Client,
            },
            (_, Answer::ClientTool { is_error, .. }) => EventBody::ClientToolResolved {
                request_id: request.request_id.clone(),
                call_id: request.call_id,
                is_error: *is_error,
                by: ResolvedBy::Client,
            },
            _ => unreachable!("answer_for matches the answer to the request"),
        };
        self.emit(resolved);
        self.remember_settled(request.request_id.clone(), ResolvedBy::Client);
        // The call may be gone (its work crashed); the answer is recorded all the same.
        let _ = pending.answer.send(answer);
        self.pending_changed();
        Ok(RespondResponse {
            request_id: request.request_id,
            pending: self.pending.len(),
        })
    }

    fn remember_settled(&mut self, id: RequestId, by: ResolvedBy) {
        if self.settled.len() >= SETTLED_REMEMBERED {
            self.settled.pop_front();
        }
        self.settled.push_back((id, by));
    }

    /// `awaiting_input` while a request waits, `processing` when none does.
    fn pending_changed(&mut self) {
        match self.state {
            SessionState::Processing if !self.pending.is_empty() => {
                self.set_state(SessionState::AwaitingInput)
            }
            SessionState::AwaitingInput if self.pending.is_empty() => {
                self.set_state(SessionState::Processing)
            }
            _ => self.publish(),
        }
    }

    /// What the session's work produced so far (spec 7.3 `SubAgentResult`).
    pub(super) fn result(&self) -> SubagentResult {
        let branch = self.history.branch();
        let turns_used = branch
            .iter()
            .filter(|e| matches!(e.turn, Turn::Assistant { .. }))
            .count() as u32;
        let last_text = branch.iter().rev().find_map(|e| match &e.turn {
            Turn::Assistant { text, .. } if !text.trim().is_empty() => Some(text.clone()),
            _ => None,
        });
        let success = self.last_end == Some(ProcessingEndReason::Completed);
        let output = match (success, self.last_error.clone(), last_text) {
            (true, _, Some(text)) => text,
            (false, Some(error), _) => format!("error: {error}"),
            (_, _, Some(text)) => text,
            _ if self.state == SessionState::Closed => "the subagent was closed".into(),
            _ => "(no output)".into(),
        };
        SubagentResult {
            output,
            success,
            turns_used,
        }
    }

    /// After a daemon stopped mid-work: answers the tool calls left open, notes the
    /// interruption for the model, and ends the processing cycle the log had begun.
    fn recover_interrupted(&mut self) {
        let open_calls = self.history.branch().last().and_then(|e| match &e.turn {
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
        self.emit(EventBody::warning(
            "the daemon restarted while this session was processing; its work was interrupted",
        ));
        self.set_state_after(
            SessionState::Idle,
            Some(EventBody::ProcessingEnd {
                reason: ProcessingEndReason::Aborted,
                input_id: None,
            }),
        );
    }
}

/// The session task's state and everything its work needs.
pub(super) struct Task {
    pub(super) info: Arc<Info>,
    pub(super) providers: ProviderSet,
    pub(super) retry: RetryPolicy,
    pub(super) prices: Arc<BTreeMap<String, Price>>,
    pub(super) registry: Option<Weak<Registry>>,
    /// The session's token: cancelled at daemon shutdown. Turns are its children.
    cancel: CancellationToken,
    /// Captured in the background from the start; the first LLM call waits for it.
    context: Arc<OnceCell<EnvironmentContext>>,
    core: Mutex<Core>,
}

/// Builds the session, emits its first events, and starts its supervised task.
pub(super) fn start(
    spec: SessionSpec,
    daemon_events: Option<broadcast::Sender<DaemonEvent>>,
    commands: mpsc::Receiver<Command>,
    tasks: &tokio_util::task::TaskTracker,
) -> (Arc<Info>, watch::Receiver<View>) {
    let restored = spec.restored;
    let info = Arc::new(Info {
        id: spec.id.clone(),
        cwd: spec.cwd,
        title: spec.title,
        profile: spec.profile,
        instructions: spec.instructions,
        read_only: spec.read_only,
        created: restored
            .as_ref()
            .map_or_else(super::now, |r| r.record.created.clone()),
        forked_from: spec.forked_from,
        parent: spec.parent,
        env: spec.env,
        environment: spec.environment,
    });
    let (last_seq, updated) = restored.as_ref().map_or((0, super::now()), |r| {
        (r.last_seq, r.record.updated.clone())
    });
    let writer = spec.files.map(|files| {
        let reader = restored
            .as_ref()
            .map_or_else(|| files.reader(), |r| r.reader.clone());
        Writer::start(files, reader, last_seq)
    });
    let log = EventLog::new(spec.id, writer, last_seq, updated);
    let mut config = spec.config;
    // A read-only session's commands write nowhere either (records from before sandboxes
    // existed included).
    if spec.read_only {
        config.sandbox = agentd_proto::SandboxMode::ReadOnly;
    }
    // A config validated at creation; only a record edited by hand can fail here.
    let (tools, tools_warning) = match session_tools(&info.profile.tools, &config) {
        Ok(tools) => (tools, None),
        Err(e) => (
            info.profile.tools.clone(),
            Some(format!("the session's client tools are not offered: {e}")),
        ),
    };
    let config = Arc::new(config);
    let mut core = Core {
        info: info.clone(),
        daemon_events,
        state: SessionState::Idle,
        closing: None,
        steering: VecDeque::new(),
        follow_up: VecDeque::new(),
        turn: None,
        next: None,
        submitted: HashMap::new(),
        submitted_order: VecDeque::new(),
        last_end: None,
        last_error: None,
        current_input: None,
        view: watch::channel(placeholder_view(config.clone())).0,
        config,
        usage: Usage::default(),
        history: spec.history,
        log,
        storage_error: None,
        aborts: Vec::new(),
        closes: Vec::new(),
        tools: Arc::new(tools),
        pending: Vec::new(),
        settled: VecDeque::new(),
    };
    if let Some(message) = tools_warning {
        core.emit(EventBody::warning(message));
    }
    match restored {
        None => {
            core.emit(EventBody::SessionStart {
                cwd: info.cwd.display().to_string(),
                profile: info.profile.id,
                config: Box::new((*core.config).clone()),
                title: info.title.clone(),
            });
            // A fork's copied history.
            if let Some(writer) = core.log.writer() {
                for entry in core.history.branch() {
                    writer.entry(&entry, true);
                }
            }
        }
        Some(r) => {
            core.usage = r.record.usage;
            let (steering, follow_up) = (r.record.queue.steering, r.record.queue.follow_up);
            let lost: Vec<InputId> = steering
                .iter()
                .chain(&follow_up)
                .filter(|q| !q.images.is_empty())
                .map(|q| q.input_id.clone())
                .collect();
            core.steering = steering.into_iter().map(restored_input).collect();
            core.follow_up = follow_up.into_iter().map(restored_input).collect();
            if !lost.is_empty() {
                let ids: Vec<&str> = lost.iter().map(|i| i.0.as_str()).collect();
                core.emit(EventBody::warning(format!(
                    "the images of queued inputs {} were not kept over the restart (queued \
                     images live in memory only); their text is still queued",
                    ids.join(", ")
                )));
            }
            core.state = match r.record.state {
                SessionState::Closed => SessionState::Closed,
                _ if r.interrupted => SessionState::Processing,
                _ => SessionState::Idle,
            };
            if r.unclean {
                core.log.skip(MISSING_SEQS);
            }
            for message in r.warnings {
                core.emit(EventBody::warning(message));
            }
            if core.state == SessionState::Processing {
                core.recover_interrupted();
            }
        }
    }
    core.publish();
    core.save();
    let view = core.view.subscribe();
    let context = Arc::new(OnceCell::new());
    let task = Arc::new(Task {
        info: info.clone(),
        providers: spec.providers,
        retry: spec.retry,
        prices: spec.prices,
        registry: spec.registry,
        cancel: spec.cancel,
        context: context.clone(),
        core: Mutex::new(core),
    });
    if task.core().state != SessionState::Closed {
        let env = info.env.clone();
        let docs = info.profile.doc_names;
        tasks.spawn(async move {
            context.get_or_init(|| capture(env, docs)).await;
        });
    }
    tasks.spawn(supervise(task, commands));
    (info, view)
}

/// A queued input read back from a record: the record keeps its images' type and size only.
fn restored_input(q: QueuedInput) -> Input {
    Input {
        input_id: q.input_id,
        text: q.text,
        images: Vec::new(),
    }
}

/// Captures the environment context; a panic in it (a bug) leaves the minimal context, so
/// the session still works.
async fn capture(
    env: Arc<dyn crate::exec::ExecutionEnvironment>,
    docs: &'static [&'static str],
) -> EnvironmentContext {
    match AssertUnwindSafe(EnvironmentContext::capture(env.as_ref(), docs))
        .catch_unwind()
        .await
    {
        Ok(context) => context,
        Err(panic) => {
            tracing::error!(
                "capturing the environment context crashed: {}",
                panic_message(panic.as_ref())
            );
            EnvironmentContext::minimal(env.as_ref())
        }
    }
}

/// A view for the moment before the first real one is published.
fn placeholder_view(config: Arc<agentd_proto::SessionConfig>) -> View {
    View {
        state: SessionState::Idle,
        config,
        usage: Usage::default(),
        queue: Arc::default(),
        last_seq: 0,
        updated: String::new(),
        leaf: None,
        branch_len: 0,
        history_len: 0,
        last_end: None,
        storage_failing: false,
        active: Instant::now(),
        pending: Arc::default(),
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned())
}

/// Why the task's loop ended.
enum Exit {
    /// Shutdown, or nobody holds the session any more.
    Done,
    /// Unloaded: the registry waits for the final record, sent once everything is written.
    Evicted(oneshot::Sender<Option<SessionRecord>>, Box<SessionRecord>),
}

/// Runs the task; a panic becomes an `error` event and the task serves on. However it ends,
/// everything is written and the record marked closed cleanly first.
async fn supervise(task: Arc<Task>, mut commands: mpsc::Receiver<Command>) {
    let exit = loop {
        match AssertUnwindSafe(task.run(&mut commands))
            .catch_unwind()
            .await
        {
            Ok(exit) => break exit,
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                tracing::error!(session = %task.info.id, "the session task crashed: {message}");
                task.recover_from_panic(&message);
            }
        }
    };
    task.finish().await;
    if let Exit::Evicted(reply, record) = exit {
        let _ = reply.send(Some(*record));
    }
}

/// The next change of the writer's status; never ready without a writer.
async fn storage_changed(status: &mut Option<watch::Receiver<WriterStatus>>) -> WriterStatus {
    if let Some(rx) = status {
        if rx.changed().await.is_ok() {
            return rx.borrow_and_update().clone();
        }
        *status = None;
    }
    std::future::pending().await
}

impl Task {
    /// The task's state. Only this task locks it; see the module docs.
    pub(super) fn core(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn context(&self) -> Option<&EnvironmentContext> {
        self.context.get()
    }

    async fn run(&self, commands: &mut mpsc::Receiver<Command>) -> Exit {
        let mut storage = self.core().log.writer().map(Writer::status);
        let mut reachable = true;
        loop {
            let work = self.core().next.take();
            if let Some(work) = work {
                let work = self.work(work);
                tokio::pin!(work);
                loop {
                    tokio::select! {
                        () = &mut work => break,
                        command = commands.recv(), if reachable => match command {
                            Some(command) => self.handle(command),
                            // Nobody can reach the session any more: stop the work.
                            None => {
                                reachable = false;
                                self.core().cancel_turn();
                            }
                        },
                        status = storage_changed(&mut storage) => self.storage_changed(status),
                    }
                }
                self.after_work();
                continue;
            }
            tokio::select! {
                command = commands.recv() => match command {
                    Some(Command::Evict(reply)) => match self.evictable() {
                        Some(record) => return Exit::Evicted(reply, Box::new(record)),
                        None => {
                            let _ = reply.send(None);
                        }
                    },
                    Some(command) => self.handle(command),
                    None => return Exit::Done,
                },
                status = storage_changed(&mut storage) => self.storage_changed(status),
                () = self.cancel.cancelled() => return Exit::Done,
            }
        }
    }

    /// Answers a command. Never waits: what needs waiting becomes work, or a reply sent when
    /// the work ends.
    fn handle(&self, command: Command) {
        let mut core = self.core();
        // Any command is use: an unloaded session would only have to load again.
        core.view.send_modify(|v| v.active = Instant::now());
        match command {
            Command::Submit {
                text,
                images,
                client_input_id,
                when_busy,
                reply,
            } => {
                let result = self.check_takes_images(&core, &images).and_then(|()| {
                    core.submit(&self.cancel, text, images, client_input_id, when_busy)
                });
                core.reply_when_written(reply, result);
            }
            Command::Steer {
                text,
                images,
                reply,
            } => {
                let result = self
                    .check_takes_images(&core, &images)
                    .and_then(|()| core.steer(text, images));
                core.reply_when_written(reply, result);
            }
            Command::QueueClear(reply) => {
                let result = core.queue_clear();
                core.reply_when_written(reply, result);
            }
            Command::SetConfig {
                patch,
                provider,
                reply,
            } => {
                let result = core.set_config(&patch);
                if let (Ok(_), Some((name, client))) = (&result, provider) {
                    self.providers.insert(&name, client);
                }
                core.reply_when_saved(reply, result);
            }
            Command::Rollback { turns, reply } => {
                let result = core.rollback(turns);
                core.reply_when_saved(reply, result);
            }
            Command::Compact(reply) => {
                let started = core.check_open().and_then(|()| {
                    if core.state != SessionState::Idle || core.next.is_some() {
                        return Err(Error::Busy(self.info.id.clone()));
                    }
                    core.check_storage()
                });
                match started {
                    Ok(()) => {
                        let token = self.cancel.child_token();
                        core.turn = Some(token.clone());
                        core.next = Some(Work::Compact(token, reply));
                        core.set_state(SessionState::Processing);
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            Command::History(reply) => {
                let _ = reply.send(core.history.branch());
            }
            Command::InputEntry { input_id, reply } => {
                let _ = reply.send(core.history.input(&input_id));
            }
            Command::Subscribe { since_seq, reply } => {
                let joined: Joined = core.log.subscribe(since_seq);
                let _ = reply.send(joined);
            }
            Command::Abort(reply) => {
                let working = core.state.is_working();
                core.cancel_turn();
                core.aborts.push((reply, working));
                if !working && core.next.is_none() {
                    core.next = Some(Work::Terminate);
                }
            }
            Command::Close { reason, reply } => {
                if core.state == SessionState::Closed {
                    let _ = reply.send(());
                    return;
                }
                core.closes.push(reply);
                if core.closing.is_none() {
                    core.closing = Some(reason);
                }
                core.cancel_turn();
                if !core.state.is_working() && core.next.is_none() {
                    core.next = Some(Work::Close);
                }
            }
            // Only an idle task unloads (see `run`).
            Command::Evict(reply) => {
                let _ = reply.send(None);
            }
            Command::RetryStorage(reply) => {
                let retry: StorageRetry = match core.log.writer() {
                    Some(writer) => Box::pin(writer.sync()),
                    None => Box::pin(async { Ok(()) }),
                };
                let _ = reply.send(retry);
            }
            Command::Emit(body) => core.emit(body),
            Command::Result(reply) => {
                let _ = reply.send(core.result());
            }
            Command::Saved(reply) => core.reply_when_saved(reply, ()),
            Command::Respond { params, reply } => {
                let result = core.respond(params);
                core.reply_when_written(reply, result);
            }
        }
    }

    /// Images are taken only when the session's provider takes them: refused here, never
    /// dropped on the way to the model.
    fn check_takes_images(&self, core: &Core, images: &[ImageData]) -> Result<(), Error> {
        let provider = &core.config.provider;
        let takes = self
            .providers
            .get(provider)
            .is_none_or(|p| p.takes_input_images());
        if images.is_empty() || takes {
            return Ok(());
        }
        Err(Error::InvalidParams(format!(
            "images: provider {provider:?} does not take images (its models are text-only by \
             default; set `images = true` under [providers.{provider}] in the daemon's config \
             if they take them), so {} image(s) cannot be sent; switch the session to a \
             provider that does, or send text only",
            images.len()
        )))
    }

    fn storage_changed(&self, status: WriterStatus) {
        let mut core = self.core();
        match status {
            WriterStatus::Failing(e) => {
                tracing::error!(session = %self.info.id, "cannot save the session: {e}");
                if core.storage_error.is_none() {
                    core.cancel_turn();
                    core.storage_error = Some(e.clone());
                    core.emit(EventBody::Error {
                        message: format!(
                            "cannot save the session to disk ({e}); the work is stopped, and new input is refused until the disk can be written again. Nothing already saved is lost."
                        ),
                        fatal: false,
                    });
                    core.publish();
                }
            }
            WriterStatus::Ok => {
                if core.storage_error.take().is_some() {
                    core.publish();
                }
            }
        }
    }

    async fn work(&self, work: Work) {
        match work {
            Work::Process(input, token) => self.process(input, token).await,
            Work::Compact(token, reply) => {
                let result = AssertUnwindSafe(self.compact(&token))
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|panic| {
                        Err(Error::Internal(format!(
                            "the compaction crashed: {}",
                            panic_message(panic.as_ref())
                        )))
                    });
                {
                    let mut core = self.core();
                    core.turn = None;
                    core.set_state(SessionState::Idle);
                }
                // After the state: whoever gets the answer sees the session idle.
                let _ = reply.send(result);
            }
            Work::Terminate => self.info.env.terminate_all().await,
            Work::Close => {
                self.info.env.terminate_all().await;
                let mut core = self.core();
                core.turn = None;
                let reason = core.closing.unwrap_or(SessionEndReason::ClosedByClient); // set before Close is queued
                core.set_state(SessionState::Closed);
                core.emit(EventBody::SessionEnd {
                    state: SessionState::Closed,
                    reason,
                });
                core.publish();
            }
        }
    }

    /// Replies to the calls that waited for the work to end, and queues the close sequence
    /// when one was asked for.
    fn after_work(&self) {
        let mut core = self.core();
        if core.closing.is_some() && core.state != SessionState::Closed {
            if core.next.is_none() {
                core.next = Some(Work::Close);
            }
            return;
        }
        let queue = core.queue();
        let state = core.state;
        for (reply, aborted) in core.aborts.drain(..) {
            let _ = reply.send(Ok(AbortResponse {
                aborted,
                state,
                queue: queue.clone(),
            }));
        }
        if state == SessionState::Closed {
            for reply in core.closes.drain(..) {
                let _ = reply.send(());
            }
        }
    }

    async fn compact(&self, token: &CancellationToken) -> Result<CompactResponse, Error> {
        self.context_ready().await;
        self.agent()
            .compact(false, token)
            .await
            .map_err(|e| match e {
                CompactError::NothingToCompact(_) => Error::InvalidParams(e.to_string()),
                CompactError::NotConfigured(_) => Error::ProviderNotConfigured(e.to_string()),
                CompactError::Provider(_) => Error::Provider(e.to_string()),
                CompactError::Aborted => Error::InvalidParams("the compaction was aborted".into()),
            })
    }

    fn agent(&self) -> Agent<'_> {
        Agent {
            host: self,
            env: self.info.env.as_ref(),
            profile: &self.info.profile,
            providers: &self.providers,
            retry: &self.retry,
        }
    }

    /// Waits for the environment context (captured in the background since the start).
    async fn context_ready(&self) {
        let env = self.info.env.clone();
        let docs = self.info.profile.doc_names;
        self.context.get_or_init(|| capture(env, docs)).await;
    }

    /// Runs `input` and the follow-ups after it, then ends the processing cycle.
    async fn process(&self, mut input: Input, mut token: CancellationToken) {
        self.context_ready().await;
        loop {
            self.core().current_input = Some(input.input_id.clone());
            // A bug in the loop must not take the daemon or other sessions down with it.
            let outcome = match AssertUnwindSafe(self.agent().process_input(input, &token))
                .catch_unwind()
                .await
            {
                Ok(outcome) => outcome,
                Err(panic) => {
                    self.core().emit(EventBody::Error {
                        message: format!(
                            "internal error: the agent loop crashed ({})",
                            panic_message(panic.as_ref())
                        ),
                        fatal: false,
                    });
                    Outcome::Failed
                }
            };
            if outcome == Outcome::Aborted {
                self.info.env.terminate_all().await;
            }
            let mut core = self.core();
            if matches!(outcome, Outcome::Completed | Outcome::TurnLimit)
                && core.closing.is_none()
                && let Some(next) = core.follow_up.pop_front()
            {
                token = self.cancel.child_token();
                core.turn = Some(token.clone());
                core.queue_changed();
                input = next;
                continue;
            }
            core.turn = None;
            let reason = match outcome {
                Outcome::Completed => ProcessingEndReason::Completed,
                Outcome::TurnLimit => ProcessingEndReason::TurnLimit,
                Outcome::MaxTokens => ProcessingEndReason::MaxTokens,
                Outcome::Refusal => ProcessingEndReason::Refusal,
                // The store failing stopped it, not a client.
                Outcome::Aborted if core.storage_error.is_some() => ProcessingEndReason::Error,
                Outcome::Aborted => ProcessingEndReason::Aborted,
                Outcome::Failed | Outcome::Fatal => ProcessingEndReason::Error,
            };
            core.last_end = Some(reason);
            if outcome == Outcome::Fatal && core.closing.is_none() {
                core.closing = Some(SessionEndReason::ProviderFailed);
            }
            let end = EventBody::ProcessingEnd {
                reason,
                input_id: core.current_input.take(),
            };
            if core.closing.is_none() {
                core.set_state_after(SessionState::Idle, Some(end));
            } else {
                // The close sequence that follows moves the state on.
                core.emit(end);
            }
            let report = self.info.parent.as_ref().map(|p| {
                let result = core.result();
                (p.session_id.clone(), result)
            });
            drop(core);
            if let Some((parent, result)) = report {
                self.report_to_parent(parent, result);
            }
            return;
        }
    }

    /// Emits `subagent_finished` on the parent's stream.
    fn report_to_parent(&self, parent: agentd_proto::SessionId, result: SubagentResult) {
        let Some(registry) = self.registry.as_ref().and_then(Weak::upgrade) else {
            return;
        };
        let agent_id = self.info.id.clone();
        tokio::spawn(async move {
            if let Ok(parent) = registry.get(&parent).await {
                parent
                    .notify(EventBody::SubagentFinished {
                        agent_id,
                        success: result.success,
                        turns_used: result.turns_used,
                    })
                    .await;
            }
        });
    }

    /// The final record if the session can be unloaded now: idle or closed, no work, no
    /// subscriber, nobody waiting.
    fn evictable(&self) -> Option<SessionRecord> {
        let core = self.core();
        let quiet = matches!(core.state, SessionState::Idle | SessionState::Closed)
            && core.next.is_none()
            && core.aborts.is_empty()
            && core.closes.is_empty()
            && core.log.subscribers() == 0;
        quiet.then(|| {
            let mut record = core.make_view().record(&self.info);
            record.open = false;
            record
        })
    }

    /// Writes everything and marks the record cleanly closed: the journal then holds every
    /// event, so reopening it skips no seqs.
    async fn finish(&self) {
        let sync = {
            let core = self.core();
            core.log.writer().map(|writer| {
                let mut record = core.make_view().record(&self.info);
                record.open = false;
                writer.record(record.to_json());
                writer.sync()
            })
        };
        if let Some(sync) = sync
            && let Err(e) = sync.await
        {
            tracing::error!(session = %self.info.id, "cannot save the session before unloading it: {e}");
        }
    }

    /// After a panic outside the loop's own guard: the session reports it and goes on idle.
    fn recover_from_panic(&self, message: &str) {
        let mut core = self.core();
        core.cancel_turn();
        core.turn = None;
        core.next = None;
        let waiting: Vec<RequestId> = core
            .pending
            .iter()
            .map(|p| p.request.request_id.clone())
            .collect();
        for id in waiting {
            core.settle(&id, ResolvedBy::Abort);
        }
        core.emit(EventBody::Error {
            message: format!("internal error: the session task crashed ({message}); it is idle again and takes new input"),
            fatal: false,
        });
        if core.state.is_working() {
            core.last_end = Some(ProcessingEndReason::Error);
            let input_id = core.current_input.take();
            core.set_state_after(
                SessionState::Idle,
                Some(EventBody::ProcessingEnd {
                    reason: ProcessingEndReason::Error,
                    input_id,
                }),
            );
        }
        // Callers waiting on this task get an error, never a hang.
        core.aborts.clear();
        core.closes.clear();
    }
}
