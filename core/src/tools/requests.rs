//! What a tool call may ask of the session's clients: [`Requests`], implemented by the
//! session, which raises a pending request, waits for `session/respond`, and settles it on
//! timeout or abort. Approvals, `ask_user` and client tools all go through it.

use agentd_proto::{ApprovalRule, Decision, RequestBody, ToolCallId};
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

/// A client's answer, checked against the kind of request it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// To an approval.
    Approval {
        /// The decision.
        decision: Decision,
        /// Sent to the model with a denial.
        message: Option<String>,
    },
    /// To a question.
    Question(String),
    /// To a client tool call.
    ClientTool {
        /// The result the model sees.
        output: String,
        /// Whether it is a failure.
        is_error: bool,
    },
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Settled {
    /// A client answered.
    Answered(Answer),
    /// Nobody answered in time; the timeout is in seconds.
    TimedOut(u64),
    /// The work was aborted or the session closed.
    Aborted,
}

/// Pending requests to the session's clients.
#[async_trait]
pub(crate) trait Requests: Send + Sync {
    /// Raises a request for `call_id` and waits until it is settled. `always` holds the allow
    /// rules an `allow_always` answer adds to the session (approvals only).
    async fn raise(
        &self,
        call_id: &ToolCallId,
        body: RequestBody,
        always: Vec<ApprovalRule>,
        cancel: &CancellationToken,
    ) -> Settled;
}
