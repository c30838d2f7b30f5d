//! agentd's approvals as ACP permission requests, and the session modes built on them.
//!
//! An `approval_requested` event becomes `session/request_permission` for the call the editor
//! already shows (same tool call id), with `allow_once`, `allow_always` and `reject_once`; the
//! choice goes back with `session/respond`. A request the client cancels is a refusal (the
//! call never runs). A request the client fails to answer is left pending: another client or
//! the session's timeout settles it, safely.
//!
//! Modes: `ask` is approval mode `ask`, `auto` approval mode `auto`, and `read-only` adds deny
//! rules for the file-writing tools to the session's own rules (commands still run, as with
//! `agentctl new --read-only`).

use super::tools;
use crate::client::Connection;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Client, Error};
use agentd_proto::methods as m;
use agentd_proto::{
    ApprovalConfig, ApprovalMode, ApprovalPatch, ApprovalRule, ConfigPatch, Decision, RequestId,
    RespondParams, SessionId, SetConfigParams, ToolCallId,
};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

/// The tools the `read-only` mode refuses.
const WRITERS: [&str; 3] = ["write_file", "edit_file", "apply_patch"];

const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT_ONCE: &str = "reject_once";

/// An approval a session waits on.
pub(super) struct Approval {
    pub(super) request_id: RequestId,
    pub(super) call_id: ToolCallId,
    pub(super) tool: String,
    pub(super) arguments: Value,
    pub(super) summary: String,
}

/// Where an approval's answer goes.
#[derive(Clone)]
pub(super) struct Asker {
    pub(super) daemon: Arc<Connection>,
    pub(super) cx: ConnectionTo<Client>,
    pub(super) session_id: SessionId,
    pub(super) acp_id: acp::SessionId,
    pub(super) cwd: PathBuf,
}

impl Asker {
    /// Asks the editor in a task of its own (the answer may take a person minutes).
    pub(super) fn ask(&self, approval: Approval) {
        let asker = self.clone();
        tokio::spawn(async move { asker.ask_now(approval).await });
    }

    async fn ask_now(self, approval: Approval) {
        let shown = tools::show(&self.cwd, &approval.tool, &approval.arguments);
        let mut content: Vec<acp::ToolCallContent> = shown
            .diffs
            .into_iter()
            .map(acp::ToolCallContent::Diff)
            .collect();
        content.push(acp::ToolCallContent::Content(acp::Content::new(
            acp::ContentBlock::Text(acp::TextContent::new(approval.summary)),
        )));
        let fields = acp::ToolCallUpdateFields::new()
            .title(shown.title)
            .kind(shown.kind)
            .status(acp::ToolCallStatus::Pending)
            .raw_input(approval.arguments)
            .content(content);
        let options = vec![
            acp::PermissionOption::new(ALLOW_ONCE, "Allow", acp::PermissionOptionKind::AllowOnce),
            acp::PermissionOption::new(
                ALLOW_ALWAYS,
                "Always allow",
                acp::PermissionOptionKind::AllowAlways,
            ),
            acp::PermissionOption::new(
                REJECT_ONCE,
                "Reject",
                acp::PermissionOptionKind::RejectOnce,
            ),
        ];
        let request = acp::RequestPermissionRequest::new(
            self.acp_id.clone(),
            acp::ToolCallUpdate::new(approval.call_id.0.clone(), fields),
            options,
        );
        let answer = match self.cx.send_request(request).block_task().await {
            Ok(answer) => answer,
            Err(e) => {
                eprintln!(
                    "agentctl acp: the editor did not answer approval {}: {}; it stays pending",
                    approval.request_id, e.message
                );
                return;
            }
        };
        let (decision, message) = match &answer.outcome {
            acp::RequestPermissionOutcome::Selected(s) => match s.option_id.0.as_ref() {
                ALLOW_ONCE => (Decision::Allow, None),
                ALLOW_ALWAYS => (Decision::AllowAlways, None),
                _ => (
                    Decision::Deny,
                    Some("The user rejected this call.".to_owned()),
                ),
            },
            _ => (
                Decision::Deny,
                Some("The user cancelled the request for permission.".to_owned()),
            ),
        };
        let params = RespondParams {
            session_id: self.session_id.clone(),
            request_id: approval.request_id.clone(),
            decision: Some(decision),
            message,
            answer: None,
            output: None,
            is_error: None,
        };
        if let Err(e) = self.daemon.call::<m::SessionRespond>(params).await {
            // Another client or the timeout settled it first; that answer stands.
            eprintln!(
                "agentctl acp: approval {} was not answered: {e}",
                approval.request_id
            );
        }
    }
}

/// The modes ACP clients show.
pub(super) fn modes(approval: &ApprovalConfig) -> acp::SessionModeState {
    let available = vec![
        acp::SessionMode::new("ask", "Ask").description(
            "Calls that write files or run commands wait for your approval.".to_owned(),
        ),
        acp::SessionMode::new("auto", "Auto").description(
            "Calls run without asking (the session's deny rules still refuse).".to_owned(),
        ),
        acp::SessionMode::new("read-only", "Read-only").description(
            "File writes and edits are refused; reading, search and commands run.".to_owned(),
        ),
    ];
    acp::SessionModeState::new(current(approval), available)
}

fn writer_rule(rule: &ApprovalRule) -> bool {
    WRITERS.contains(&rule.0.as_str())
}

fn current(approval: &ApprovalConfig) -> &'static str {
    if WRITERS
        .iter()
        .all(|w| approval.deny.iter().any(|r| r.0 == *w))
    {
        "read-only"
    } else if approval.mode == ApprovalMode::Ask {
        "ask"
    } else {
        "auto"
    }
}

/// The config change that puts a session with `approval` in `mode`.
pub(super) fn set_mode(
    session_id: SessionId,
    approval: &ApprovalConfig,
    mode: &str,
) -> Result<SetConfigParams, Error> {
    let mut deny: Vec<ApprovalRule> = approval
        .deny
        .iter()
        .filter(|r| !writer_rule(r))
        .cloned()
        .collect();
    let approval_mode = match mode {
        "ask" => ApprovalMode::Ask,
        "auto" => ApprovalMode::Auto,
        "read-only" => {
            deny.extend(WRITERS.iter().map(|w| ApprovalRule((*w).to_owned())));
            approval.mode
        }
        other => {
            return Err(Error::invalid_params().data(format!(
                "unknown mode {other:?}; agentd has ask, auto and read-only"
            )));
        }
    };
    Ok(SetConfigParams {
        session_id,
        config: ConfigPatch {
            approval: Some(ApprovalPatch {
                mode: Some(approval_mode),
                deny: Some(deny),
                ..ApprovalPatch::default()
            }),
            ..ConfigPatch::default()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_through_the_approval_config() {
        let mut approval = ApprovalConfig {
            deny: vec![ApprovalRule("shell(rm*)".into())],
            ..ApprovalConfig::default()
        };
        assert_eq!(current(&approval), "auto");
        for mode in ["read-only", "ask", "auto", "read-only"] {
            let params = set_mode(SessionId("s".into()), &approval, mode).ok();
            let patch = params.and_then(|p| p.config.approval).unwrap_or_default();
            approval.apply(&patch);
            assert_eq!(current(&approval), mode);
            // The session's own rules survive every switch.
            assert!(approval.deny.contains(&ApprovalRule("shell(rm*)".into())));
        }
        assert!(set_mode(SessionId("s".into()), &approval, "yolo").is_err());
    }
}
