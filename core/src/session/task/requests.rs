//! Requests waiting for a client's answer (approvals, questions, client tools): raising them,
//! answering them (the first answer wins), settling the unanswered by timeout or abort, and
//! remembering how recent ones were settled so a late answer learns why it is too late.

use super::Core;
use crate::session::Error;
use crate::tools::Answer;
use agentd_proto::{
    ApprovalRule, Decision, EventBody, PendingRequest, RequestBody, RequestId, ResolvedBy,
    RespondParams, RespondResponse, SessionState, ToolCallId,
};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::oneshot;

/// Settled request ids remembered per session, to tell a late answer what happened.
const SETTLED_REMEMBERED: usize = 256;

/// A request waiting for an answer, with the waiting call's end of the channel.
pub(super) struct Pending {
    pub(super) request: PendingRequest,
    /// The allow rules `allow_always` adds.
    always: Vec<ApprovalRule>,
    answer: oneshot::Sender<Answer>,
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
    /// Raises a request: logs its event, lists it, and moves the state to `awaiting_input`.
    /// Returns its id and how long it may wait.
    pub(in crate::session) fn raise(
        &mut self,
        call_id: &ToolCallId,
        body: RequestBody,
        always: Vec<ApprovalRule>,
        answer: oneshot::Sender<Answer>,
    ) -> (RequestId, Duration) {
        let request_id = crate::agent::new_request_id();
        let timeout = Duration::from_millis(self.config.approval.timeout_ms);
        let call_id = call_id.clone();
        let event = match &body {
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
        };
        let expires = humantime::format_rfc3339_millis(SystemTime::now() + timeout).to_string();
        self.pending.push(Pending {
            request: PendingRequest {
                request_id: request_id.clone(),
                call_id,
                created: crate::session::now(),
                expires,
                body,
            },
            always,
            answer,
        });
        // In the view before the event: a client that sees the event finds it in
        // `session/get`.
        self.publish();
        self.emit(event);
        self.pending_changed();
        (request_id, timeout)
    }

    /// Settles a request nobody answered (`by` timeout or abort); `false` when an answer
    /// settled it first.
    pub(in crate::session) fn settle(&mut self, request_id: &RequestId, by: ResolvedBy) -> bool {
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
    pub(super) fn respond(&mut self, params: RespondParams) -> Result<RespondResponse, Error> {
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
}
