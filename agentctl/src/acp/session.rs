//! One ACP session attached to one agentd session: a task that owns the session's event
//! subscription, sends each event to the editor as `session/update`s, and answers each prompt
//! when the work on its input ends.
//!
//! Which prompt an event ends is read from the events themselves, so prompts sent by this
//! editor, by another client or by `agentctl submit` all line up: an input runs from its
//! `user_input` until the next `user_input` (a queued follow-up starting: the input before it
//! ended its turn) or `processing_end` (whose reason is the stop reason). A steering prompt
//! rides with the input it was injected into and ends with it. A prompt's answer may be known
//! before the prompt handler has told the task about it (the events came first), so finished
//! inputs are remembered for a while.
//!
//! Approvals go to the editor as permission requests (`approvals`); one still pending when a
//! `session/load` replay ends is asked then. A question from the model (`ask_user`) is shown
//! as the agent's text, and the next prompt answers it (`session/respond {answer}`) instead of
//! starting new work; that prompt ends with the input that asked.

use super::approvals::{Approval, Asker};
use super::updates::Translator;
use crate::client::Connection;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Client, Error};
use agentd_proto::methods::SessionSubscribe;
use agentd_proto::{
    EventBody, InputId, PendingRequest, ProcessingEndReason, RequestBody, RequestId, SessionId,
    StreamEndReason, StreamItem, SubscribeParams,
};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// How a prompt ended: a stop reason, or the error that stopped the work.
pub(super) type Outcome = Result<acp::StopReason, Error>;

/// Finished inputs remembered for prompts not yet registered; more than a client has in flight.
const REMEMBERED: usize = 256;

/// What the rest of the bridge asks of a session's task.
pub(super) enum Command {
    /// Answer `reply` when the input `input_id` ends.
    Await {
        input_id: InputId,
        reply: oneshot::Sender<Outcome>,
    },
    /// The client cancelled: every prompt still waiting answers `cancelled`.
    Cancelled,
    /// Which question the session waits on, if any.
    Question {
        reply: oneshot::Sender<Option<RequestId>>,
    },
    /// Answer `reply` when the current input ends (a prompt that answered a question).
    Ride { reply: oneshot::Sender<Outcome> },
    /// The session's context window changed (a new model): `usage_update`'s `size`.
    ContextWindow(u64),
    /// The client closed the session (its work was cancelled): every prompt still waiting
    /// answers `cancelled`, and the task ends.
    Close,
}

/// The handle the bridge keeps per attached session.
pub(super) struct Attached {
    /// Commands to the session's task (bounded: a prompt's handler waits for room).
    pub(super) commands: mpsc::Sender<Command>,
}

impl Attached {
    /// Sends the command `make` builds around a reply channel; the returned future is its
    /// answer. Sent and answered are two steps, so a caller can act in between.
    pub(super) async fn request<T, F: FnOnce(oneshot::Sender<T>) -> Command>(
        &self,
        make: F,
    ) -> Result<impl Future<Output = Result<T, Error>> + use<T, F>, Error> {
        let gone = || Error::internal_error().data("the session is no longer followed");
        let (reply, answer) = oneshot::channel();
        self.commands.send(make(reply)).await.map_err(|_| gone())?;
        Ok(async move { answer.await.map_err(|_| gone()) })
    }
}

/// Where the task starts reading the session's events.
pub(super) struct Start {
    /// The log position to read from (`Some(0)`: everything).
    pub(super) since_seq: u64,
    /// Events up to this seq are a replay (`session/load`); `replayed` is told when they have
    /// all been sent.
    pub(super) replay_until: u64,
    pub(super) replayed: Option<oneshot::Sender<()>>,
    /// Requests already waiting when following starts without a replay (`session/resume`):
    /// approvals are asked, a question awaits the next prompt.
    pub(super) pending: Vec<PendingRequest>,
}

/// Starts the task for `session_id`; it ends when the session closes, the daemon goes away or
/// the bridge drops the handle.
pub(super) fn attach(
    daemon: Arc<Connection>,
    cx: ConnectionTo<Client>,
    session_id: SessionId,
    cwd: PathBuf,
    context_window: u64,
    start: Start,
) -> Attached {
    let (commands, rx) = mpsc::channel(64);
    let replaying = start.replay_until > start.since_seq;
    let acp_id = acp::SessionId::new(session_id.0.clone());
    let asker = Asker {
        daemon: daemon.clone(),
        cx: cx.clone(),
        session_id: session_id.clone(),
        acp_id: acp_id.clone(),
        cwd: cwd.clone(),
    };
    let task = Task {
        daemon,
        cx,
        acp_id,
        session_id,
        asker,
        replaying,
        unasked: Vec::new(),
        question: None,
        answer_riders: Vec::new(),
        translator: Translator::new(cwd, context_window, replaying),
        current: None,
        riders: Vec::new(),
        waiting: HashMap::new(),
        finished: VecDeque::new(),
        last_error: None,
        cancelled: false,
    };
    tokio::spawn(task.run(rx, start));
    Attached { commands }
}

struct Task {
    daemon: Arc<Connection>,
    cx: ConnectionTo<Client>,
    session_id: SessionId,
    acp_id: acp::SessionId,
    /// Sends approvals to the editor.
    asker: Asker,
    /// Reading the replay of a `session/load`.
    replaying: bool,
    /// Approvals requested in the replay and not settled in it: asked when it ends.
    unasked: Vec<Approval>,
    /// The question the session waits on.
    question: Option<RequestId>,
    /// Prompts that answered a question, ending with the current input.
    answer_riders: Vec<oneshot::Sender<Outcome>>,
    translator: Translator,
    /// The input running now.
    current: Option<InputId>,
    /// Steering injected into the current input.
    riders: Vec<InputId>,
    /// Prompts waiting for their input to end.
    waiting: HashMap<InputId, oneshot::Sender<Outcome>>,
    /// Inputs that ended before their prompt was registered, oldest first.
    finished: VecDeque<(InputId, Outcome)>,
    /// The last `error` event's message, for a `processing_end` with reason `error`.
    last_error: Option<String>,
    /// The client cancelled the current work: its end is `cancelled` whatever the reason.
    cancelled: bool,
}

impl Task {
    async fn run(mut self, mut commands: mpsc::Receiver<Command>, start: Start) {
        let Start {
            mut since_seq,
            replay_until,
            mut replayed,
            pending,
        } = start;
        for request in pending {
            match request.body {
                RequestBody::Approval {
                    tool,
                    arguments,
                    summary,
                } => self.asker.ask(Approval {
                    request_id: request.request_id,
                    call_id: request.call_id,
                    tool,
                    arguments,
                    summary,
                }),
                RequestBody::Question { .. } => self.question = Some(request.request_id),
                // Client tools are the socket clients' own; ACP has none.
                RequestBody::ClientTool { .. } => {}
            }
        }
        if replay_until <= since_seq
            && let Some(done) = replayed.take()
        {
            let _ = done.send(());
        }
        'subscribe: loop {
            let params = SubscribeParams {
                session_id: self.session_id.clone(),
                since_seq: Some(since_seq),
            };
            let mut sub = match self.daemon.subscribe::<SessionSubscribe>(params).await {
                Ok(sub) => sub,
                Err(e) => {
                    self.fail_all(&format!("cannot follow the session: {e}"));
                    return;
                }
            };
            loop {
                tokio::select! {
                    command = commands.recv() => match command {
                        Some(Command::Close) => {
                            self.end_all(&|| Ok(acp::StopReason::Cancelled));
                            return;
                        }
                        None => return,
                        Some(command) => self.command(command),
                    },
                    item = sub.next() => match item {
                        Some(Ok(StreamItem::Event(event))) => {
                            since_seq = event.seq;
                            self.event(&event.body);
                            // Events name a user's images; the history holds them.
                            if self.replaying {
                                let daemon = self.daemon.clone();
                                let images = super::content::replayed_images(
                                    &daemon, &self.session_id, &event.body,
                                );
                                for update in images.await {
                                    self.send(update);
                                }
                            }
                            if event.seq >= replay_until
                                && let Some(done) = replayed.take()
                            {
                                for update in self.translator.go_live() {
                                    self.send(update);
                                }
                                self.replaying = false;
                                for approval in std::mem::take(&mut self.unasked) {
                                    self.asker.ask(approval);
                                }
                                let _ = done.send(());
                            }
                        }
                        Some(Ok(StreamItem::End(end))) => match end.reason {
                            // Nothing is lost: read on from where this stream stopped.
                            StreamEndReason::Lagged => continue 'subscribe,
                            StreamEndReason::SessionClosed => {
                                self.fail_all("the session was closed");
                                return;
                            }
                            StreamEndReason::DaemonShutdown | StreamEndReason::Unsubscribed => {
                                self.fail_all("the daemon stopped");
                                return;
                            }
                        },
                        Some(Err(e)) => eprintln!("agentctl acp: an event could not be read: {e}"),
                        None => {
                            self.fail_all("the connection to the daemon was lost");
                            return;
                        }
                    },
                }
            }
        }
    }

    fn send(&self, update: acp::SessionUpdate) {
        let _ = self
            .cx
            .send_notification(acp::SessionNotification::new(self.acp_id.clone(), update));
    }

    fn command(&mut self, command: Command) {
        match command {
            Command::Await { input_id, reply } => {
                match self.finished.iter().position(|(id, _)| *id == input_id) {
                    Some(i) => {
                        if let Some((_, outcome)) = self.finished.remove(i) {
                            let _ = reply.send(outcome);
                        }
                    }
                    None => {
                        self.waiting.insert(input_id, reply);
                    }
                }
            }
            Command::Cancelled => {
                self.cancelled = self.current.is_some();
                // Queued prompts never start (the bridge cleared the queue); the running one
                // answers when its `processing_end` comes.
                let running: Vec<InputId> =
                    self.current.iter().chain(&self.riders).cloned().collect();
                let queued: Vec<InputId> = self
                    .waiting
                    .keys()
                    .filter(|id| !running.contains(id))
                    .cloned()
                    .collect();
                for id in queued {
                    self.end(id, Ok(acp::StopReason::Cancelled));
                }
            }
            Command::Question { reply } => {
                let _ = reply.send(self.question.clone());
            }
            Command::ContextWindow(tokens) => self.translator.context_window = tokens,
            // Handled by the loop, which ends with it.
            Command::Close => {}
            Command::Ride { reply } => {
                if self.current.is_some() {
                    self.answer_riders.push(reply);
                } else {
                    let _ = reply.send(Ok(acp::StopReason::EndTurn));
                }
            }
        }
    }

    fn event(&mut self, body: &EventBody) {
        for update in self.translator.updates(body) {
            self.send(update);
        }
        match body {
            EventBody::UserInput { input_id, .. } => {
                self.end_current(Ok(acp::StopReason::EndTurn));
                self.current = Some(input_id.clone());
            }
            EventBody::SteeringInjected { input_id, .. } => self.riders.push(input_id.clone()),
            EventBody::Error { message, .. } => self.last_error = Some(message.clone()),
            EventBody::ApprovalRequested {
                request_id,
                call_id,
                tool,
                arguments,
                summary,
            } => {
                let approval = Approval {
                    request_id: request_id.clone(),
                    call_id: call_id.clone(),
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                    summary: summary.clone(),
                };
                if self.replaying {
                    self.unasked.push(approval);
                } else {
                    self.asker.ask(approval);
                }
            }
            EventBody::ApprovalResolved { request_id, .. } => {
                self.unasked.retain(|a| a.request_id != *request_id);
            }
            EventBody::QuestionRequested { request_id, .. } => {
                self.question = Some(request_id.clone());
            }
            EventBody::QuestionResolved { request_id, .. }
                if self.question.as_ref() == Some(request_id) =>
            {
                self.question = None;
            }
            EventBody::ProcessingEnd { reason, input_id } => {
                if self.current.is_none() {
                    self.current = input_id.clone();
                }
                let outcome = match reason {
                    _ if self.cancelled => Ok(acp::StopReason::Cancelled),
                    ProcessingEndReason::Completed => Ok(acp::StopReason::EndTurn),
                    ProcessingEndReason::Aborted => Ok(acp::StopReason::Cancelled),
                    ProcessingEndReason::TurnLimit => Ok(acp::StopReason::MaxTurnRequests),
                    ProcessingEndReason::MaxTokens => Ok(acp::StopReason::MaxTokens),
                    ProcessingEndReason::Refusal => Ok(acp::StopReason::Refusal),
                    ProcessingEndReason::Error => Err(Error::internal_error().data(
                        self.last_error
                            .take()
                            .unwrap_or_else(|| "the session's work failed".to_owned()),
                    )),
                };
                self.cancelled = false;
                self.end_current(outcome);
            }
            _ => {}
        }
    }

    /// The current input, its riders and the prompts that answered its questions ended with
    /// `outcome`.
    fn end_current(&mut self, outcome: Outcome) {
        let ended: Vec<InputId> = self
            .current
            .take()
            .into_iter()
            .chain(self.riders.drain(..))
            .collect();
        for id in ended {
            self.end(id, outcome.clone());
        }
        for reply in self.answer_riders.drain(..) {
            let _ = reply.send(outcome.clone());
        }
    }

    fn end(&mut self, id: InputId, outcome: Outcome) {
        match self.waiting.remove(&id) {
            Some(reply) => {
                let _ = reply.send(outcome);
            }
            None => {
                if self.finished.len() == REMEMBERED {
                    self.finished.pop_front();
                }
                self.finished.push_back((id, outcome));
            }
        }
    }

    fn fail_all(&mut self, why: &str) {
        self.end_all(&|| Err(Error::internal_error().data(why)));
    }

    /// Answers every prompt still waiting with `outcome`.
    fn end_all(&mut self, outcome: &dyn Fn() -> Outcome) {
        let replies = self.waiting.drain().map(|(_, r)| r);
        for reply in replies.chain(self.answer_riders.drain(..)) {
            let _ = reply.send(outcome());
        }
    }
}
