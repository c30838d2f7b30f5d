//! How the tools answer: a text for the calling model (which may see only the text), the same
//! result as `structuredContent` for programs, and every failure as a tool error (`isError`)
//! whose text says what went wrong and what to do.

use super::types::{RunResult, SessionList, Status};
use crate::error::{Failure, Kind};
use agentd_proto::ErrorKind;
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;

/// `session_start`'s and `session_reply`'s answer; an `error` status is a tool error.
pub(super) fn run(result: &RunResult) -> CallToolResult {
    let id = &result.session_id;
    let status = result.status.as_str();
    let note = match (&result.waiting, result.status) {
        (Some(w), Status::AwaitingApproval) => {
            let expires = w
                .expires
                .as_ref()
                .map(|e| format!("; unanswered, it is denied at {e}"))
                .unwrap_or_default();
            format!(
                "agentd session {id} is waiting for approval of {} (request {}{expires}). \
                 The MCP client cannot answer it: {}.",
                w.what, w.request_id, w.answer_with
            )
        }
        (Some(w), _) => {
            let options = if w.options.is_empty() {
                String::new()
            } else {
                format!(" (suggested answers: {})", w.options.join(", "))
            };
            format!(
                "agentd session {id}: the model asks: {}{options}\nAnswer with {}.",
                w.what, w.answer_with
            )
        }
        (None, Status::Error) => format!(
            "agentd session {id}: error: {}",
            result.error.as_deref().unwrap_or("the work failed")
        ),
        (None, _) => format!("agentd session {id}: {status}; session_reply continues it"),
    };
    let text = if result.text.is_empty() {
        format!("[{note}]")
    } else {
        format!("{}\n\n[{note}]", result.text)
    };
    structured(text, result, result.status == Status::Error)
}

/// `session_list`'s answer.
pub(super) fn list(list: &SessionList) -> CallToolResult {
    let mut text = String::new();
    for s in &list.sessions {
        text += &format!(
            "{}  {}  {}  {}",
            s.session_id,
            s.state.as_str(),
            s.updated,
            s.cwd
        );
        if let Some(title) = &s.title {
            text += &format!("  {title}");
        }
        text.push('\n');
    }
    text += &format!("({} of {} sessions)", list.sessions.len(), list.total);
    structured(text, list, false)
}

/// A failure as a tool error, with what to do where the daemon's words do not say it (they
/// name `agentctl login` for a provider without a key, the config file for an unknown one).
pub(super) fn failure(failure: &Failure) -> CallToolResult {
    let hint = match &failure.kind {
        Kind::Daemon(ErrorKind::SessionNotFound) => "; session_list lists the sessions",
        _ => "",
    };
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{}{hint}",
        failure.message
    ))])
}

fn structured<T: Serialize>(text: String, value: &T, is_error: bool) -> CallToolResult {
    let mut result = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    result.structured_content = serde_json::to_value(value).ok();
    result
}

#[cfg(test)]
mod tests {
    use super::run;
    use crate::mcp::types::{RunResult, Status};

    /// The text and `isError` of a result with `status`, `text` and `error`.
    fn check(status: Status, text: &str, error: Option<&str>) -> (String, Option<bool>) {
        let result = run(&RunResult {
            session_id: "s1".into(),
            status,
            text: text.into(),
            waiting: None,
            error: error.map(str::to_owned),
        });
        let said = result.content[0]
            .as_text()
            .map(|t| t.text.clone())
            .unwrap_or_default();
        (said, result.is_error)
    }

    #[test]
    fn the_text_ends_with_the_session_and_how_its_work_ended() {
        assert_eq!(
            check(Status::Completed, "Done.", None),
            (
                "Done.\n\n[agentd session s1: completed; session_reply continues it]".into(),
                Some(false)
            )
        );
        assert_eq!(
            check(Status::TurnLimit, "", None),
            (
                "[agentd session s1: turn_limit; session_reply continues it]".into(),
                Some(false)
            )
        );
    }

    #[test]
    fn work_that_ended_in_an_error_is_a_tool_error_naming_it() {
        assert_eq!(
            check(Status::Error, "Partial", Some("the provider said no")),
            (
                "Partial\n\n[agentd session s1: error: the provider said no]".into(),
                Some(true)
            )
        );
    }
}
