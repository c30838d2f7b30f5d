//! Following a session's work for one tool call: the session's events from before the input
//! was submitted until its work ends, or until it needs a person, reporting progress on the
//! way (when the client asked for it) and aborting the work when the client cancels the call.
//!
//! Approvals cannot be answered through MCP (see `mcp/mod.rs`): the first one ends the call
//! with status `awaiting_approval` and says how to answer it, while the session waits in the
//! daemon. A question of the model ends the call with status `question`; `session_reply`
//! answers it.

use super::shortened;
use super::types::{RunResult, Status, Waiting};
use crate::client::Connection;
use crate::cmd::stream::{EventStream, Next};
use crate::error::{Failure, Result};
use agentd_proto::methods as m;
use agentd_proto::{
    AbortParams, EventBody, InputId, ProcessingEndReason, RequestBody, RequestId, SessionId,
    SessionParams, StreamEndReason,
};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

/// Which input's end answers the call.
pub(super) enum Target {
    /// The input this call submitted.
    Input(InputId),
    /// The input running now: a question was answered, and the input that asked goes on.
    Current,
}

/// Progress notifications, for a call whose client sent `_meta.progressToken`.
pub(super) struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    steps: u32,
}

/// The longest progress message: a step's gist, not its arguments.
const PROGRESS_MESSAGE_CHARS: usize = 120;

impl Progress {
    /// Progress for the call of `ctx`, if its client asked for it.
    pub(super) fn of(ctx: &RequestContext<RoleServer>) -> Option<Self> {
        Some(Self {
            token: ctx.meta.get_progress_token()?,
            peer: ctx.peer.clone(),
            steps: 0,
        })
    }

    /// Reports one more step. Awaited, so a client that reads slowly slows the following of
    /// events (the daemon keeps them), never grows a queue here.
    async fn step(&mut self, message: &str) {
        self.steps += 1;
        let param = ProgressNotificationParam::new(self.token.clone(), f64::from(self.steps))
            .with_message(shortened(message, PROGRESS_MESSAGE_CHARS));
        // A client gone away ends the call through its cancellation, not here.
        let _ = self.peer.notify_progress(param).await;
    }
}

/// The longest description of a request in a result: a diff to approve can be long, and the
/// whole of it is for the person answering, in `agentctl pending` or the editor.
const WHAT_CHARS: usize = 2000;

/// One call's following of a session.
pub(super) struct Follow<'c> {
    pub(super) conn: &'c Connection,
    pub(super) session_id: SessionId,
    /// Opened before the input was submitted (or the question answered), so nothing is missed.
    pub(super) stream: EventStream<'c>,
    pub(super) progress: Option<Progress>,
    /// Cancelled when the client cancels the call (or goes away).
    pub(super) cancelled: CancellationToken,
}

impl Follow<'_> {
    /// Follows the work of `target` to its end (or to a request for a person).
    pub(super) async fn run(mut self, target: Target) -> Result<RunResult> {
        let mut seen = matches!(target, Target::Current);
        let mut text = String::new();
        let mut last_error = None;
        loop {
            let next = tokio::select! {
                next = self.stream.next() => next?,
                () = self.cancelled.cancelled() => return Err(self.abort().await),
            };
            let event = match next {
                Next::Event(event) => event,
                Next::End(end) if end.reason == StreamEndReason::DaemonShutdown => {
                    return Err(Failure::daemon_shutdown(
                        "agentd shut down and stopped the work; the session keeps its history: \
                         session_reply continues it once agentd runs again",
                    ));
                }
                Next::End(end) => {
                    return Err(Failure::failed(format!(
                        "the session's event stream ended ({}) before its work did",
                        end.reason
                    )));
                }
            };
            match event.body {
                EventBody::UserInput { input_id, .. } => match &target {
                    Target::Input(ours) if *ours == input_id => {
                        seen = true;
                        self.step("working").await;
                    }
                    // A follow-up queued by another client starts: this input's work is done.
                    _ if seen => return Ok(self.result(Status::Completed, text)),
                    _ => {}
                },
                _ if !seen => {}
                EventBody::AssistantTextStart {} => self.step("the model is answering").await,
                EventBody::AssistantTextEnd { text: said, .. } if !said.is_empty() => text = said,
                EventBody::ToolCallStart {
                    tool_name,
                    arguments,
                    ..
                } => self.step(&format!("{tool_name} {arguments}")).await,
                EventBody::Compaction { .. } => self.step("compacting the context").await,
                EventBody::Error { message, .. } => last_error = Some(message),
                EventBody::ApprovalRequested {
                    request_id,
                    tool,
                    summary,
                    ..
                } => {
                    let what = format!("{tool}: {summary}");
                    let what = shortened(&what, WHAT_CHARS);
                    let waiting = self.approval(request_id, what).await;
                    let mut result = self.result(Status::AwaitingApproval, text);
                    result.waiting = Some(waiting);
                    return Ok(result);
                }
                EventBody::QuestionRequested {
                    request_id,
                    question,
                    options,
                    ..
                } => {
                    let mut result = self.result(Status::Question, text);
                    result.waiting = Some(Waiting {
                        request_id: request_id.to_string(),
                        what: question,
                        options,
                        expires: None,
                        answer_with: format!(
                            "session_reply with this session_id and the answer as the prompt, \
                             or `agentctl respond {} {request_id} ANSWER`",
                            self.session_id
                        ),
                    });
                    return Ok(result);
                }
                EventBody::ProcessingEnd { reason, .. } => {
                    let status = match reason {
                        ProcessingEndReason::Completed => Status::Completed,
                        ProcessingEndReason::Aborted => Status::Aborted,
                        ProcessingEndReason::TurnLimit => Status::TurnLimit,
                        ProcessingEndReason::MaxTokens => Status::MaxTokens,
                        ProcessingEndReason::Refusal => Status::Refusal,
                        ProcessingEndReason::Error => Status::Error,
                    };
                    let mut result = self.result(status, text);
                    if status == Status::Error {
                        result.error = Some(
                            last_error.unwrap_or_else(|| "the session's work failed".to_owned()),
                        );
                    }
                    return Ok(result);
                }
                EventBody::SessionEnd { reason, .. } => {
                    return Err(Failure::failed(format!(
                        "the session closed ({reason}) before its work ended"
                    )));
                }
                _ => {}
            }
        }
    }

    async fn step(&mut self, message: &str) {
        if let Some(progress) = self.progress.as_mut() {
            progress.step(message).await;
        }
    }

    fn result(&self, status: Status, text: String) -> RunResult {
        RunResult {
            session_id: self.session_id.to_string(),
            status,
            text,
            waiting: None,
            error: None,
        }
    }

    /// The approval `request_id` asks for `what`, with when it expires (from the session's
    /// pending requests, when they can be read).
    async fn approval(&self, request_id: RequestId, what: String) -> Waiting {
        let expires = self
            .conn
            .call::<m::SessionGet>(SessionParams {
                session_id: self.session_id.clone(),
            })
            .await
            .ok()
            .and_then(|snapshot| {
                snapshot
                    .pending
                    .into_iter()
                    .find(|p| p.request_id == request_id)
                    .filter(|p| matches!(p.body, RequestBody::Approval { .. }))
                    .map(|p| p.expires)
            });
        Waiting {
            answer_with: format!(
                "a person answers it: `agentctl respond {} {request_id} allow` (or allow_always, \
                 or deny), `agentctl pending {0}` to see it, or an editor with the session \
                 open; the work then goes on in agentd, and session_reply works once it is \
                 idle again",
                self.session_id
            ),
            request_id: request_id.to_string(),
            what,
            options: Vec::new(),
            expires,
        }
    }

    /// The client cancelled the call: the session's work stops (the session stays, idle).
    async fn abort(&self) -> Failure {
        let params = AbortParams {
            session_id: self.session_id.clone(),
            close: false,
        };
        match self.conn.call::<m::SessionAbort>(params).await {
            Ok(_) => Failure::failed("cancelled: the session's work was aborted"),
            Err(e) => Failure::from(e),
        }
    }
}
