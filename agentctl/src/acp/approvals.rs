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
    ApprovalConfig, ApprovalMode, ApprovalPatch, ApprovalRule, BuiltinTool, ConfigPatch, Decision,
    RequestId, RespondParams, SessionId, SetConfigParams, ToolCallId,
};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

/// The tools the `read-only` mode refuses.
const WRITERS: [BuiltinTool; 3] = [
    BuiltinTool::WriteFile,
    BuiltinTool::EditFile,
    BuiltinTool::ApplyPatch,
];

/// The `session/set_config_option` id for the mode.
pub(super) const MODE_OPTION: &str = "mode";

/// The answers an approval offers, as ACP permission options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    AllowOnce,
    AllowAlways,
    RejectOnce,
}

impl Answer {
    const ALL: [Self; 3] = [Self::AllowOnce, Self::AllowAlways, Self::RejectOnce];

    /// Its ACP option id.
    fn id(self) -> &'static str {
        match self {
            Self::AllowOnce => "allow_once",
            Self::AllowAlways => "allow_always",
            Self::RejectOnce => "reject_once",
        }
    }

    fn option(self) -> acp::PermissionOption {
        let (name, kind) = match self {
            Self::AllowOnce => ("Allow", acp::PermissionOptionKind::AllowOnce),
            Self::AllowAlways => ("Always allow", acp::PermissionOptionKind::AllowAlways),
            Self::RejectOnce => ("Reject", acp::PermissionOptionKind::RejectOnce),
        };
        acp::PermissionOption::new(self.id(), name, kind)
    }

    /// The decision sent for the option the editor selected; an option agentd did not offer
    /// is a rejection.
    fn decision(option_id: &str) -> (Decision, Option<String>) {
        match Self::ALL.into_iter().find(|a| a.id() == option_id) {
            Some(Self::AllowOnce) => (Decision::Allow, None),
            Some(Self::AllowAlways) => (Decision::AllowAlways, None),
            Some(Self::RejectOnce) | None => (
                Decision::Deny,
                Some("The user rejected this call.".to_owned()),
            ),
        }
    }
}

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
        let request = acp::RequestPermissionRequest::new(
            self.acp_id.clone(),
            acp::ToolCallUpdate::new(approval.call_id.0.clone(), fields),
            Answer::ALL.map(Answer::option).to_vec(),
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
            acp::RequestPermissionOutcome::Selected(s) => Answer::decision(&s.option_id.0),
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

/// The session modes ACP clients show, made of the session's approval config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Approval mode `ask`.
    Ask,
    /// Approval mode `auto`.
    Auto,
    /// Deny rules for the file-writing tools, whatever the approval mode.
    ReadOnly,
}

impl Mode {
    const ALL: [Self; 3] = [Self::Ask, Self::Auto, Self::ReadOnly];

    /// Its ACP mode id.
    fn id(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Auto => "auto",
            Self::ReadOnly => "read-only",
        }
    }

    /// The mode with ACP id `id`.
    pub(super) fn from_id(id: &str) -> Result<Self, Error> {
        Self::ALL.into_iter().find(|m| m.id() == id).ok_or_else(|| {
            Error::invalid_params().data(format!(
                "unknown mode {id:?}; agentd has ask, auto and read-only"
            ))
        })
    }

    fn shown(self) -> acp::SessionMode {
        let (name, description) = match self {
            Self::Ask => (
                "Ask",
                "Calls that write files or run commands wait for your approval.",
            ),
            Self::Auto => (
                "Auto",
                "Calls run without asking (the session's deny rules still refuse).",
            ),
            Self::ReadOnly => (
                "Read-only",
                "File writes and edits are refused; reading, search and commands run.",
            ),
        };
        acp::SessionMode::new(self.id(), name).description(description.to_owned())
    }

    /// The mode a session with `approval` is in.
    fn of(approval: &ApprovalConfig) -> Self {
        if WRITERS
            .iter()
            .all(|w| approval.deny.iter().any(|r| r.0 == w.as_str()))
        {
            Self::ReadOnly
        } else if approval.mode == ApprovalMode::Ask {
            Self::Ask
        } else {
            Self::Auto
        }
    }
}

/// The modes ACP clients show.
pub(super) fn modes(approval: &ApprovalConfig) -> acp::SessionModeState {
    let available = Mode::ALL.map(Mode::shown).to_vec();
    acp::SessionModeState::new(Mode::of(approval).id(), available)
}

/// The same modes as the `mode` config option (category `mode`), which ACP's config options
/// replace the modes with; both are sent, in step, for older clients.
pub(super) fn mode_option(approval: &ApprovalConfig) -> acp::SessionConfigOption {
    let values = Mode::ALL
        .map(|m| {
            let shown = m.shown();
            acp::SessionConfigSelectOption::new(m.id(), shown.name).description(shown.description)
        })
        .to_vec();
    acp::SessionConfigOption::select(MODE_OPTION, "Mode", Mode::of(approval).id(), values)
        .category(acp::SessionConfigOptionCategory::Mode)
        .description("When calls wait for your approval".to_owned())
}

/// The mode a session with `approval` is in, as its ACP id.
pub(super) fn mode_id(approval: &ApprovalConfig) -> &'static str {
    Mode::of(approval).id()
}

fn writer_rule(rule: &ApprovalRule) -> bool {
    WRITERS.iter().any(|w| rule.0 == w.as_str())
}

/// The config change that puts a session with `approval` in `mode`.
pub(super) fn set_mode(
    session_id: SessionId,
    approval: &ApprovalConfig,
    mode: Mode,
) -> SetConfigParams {
    let mut deny: Vec<ApprovalRule> = approval
        .deny
        .iter()
        .filter(|r| !writer_rule(r))
        .cloned()
        .collect();
    let approval_mode = match mode {
        Mode::Ask => ApprovalMode::Ask,
        Mode::Auto => ApprovalMode::Auto,
        Mode::ReadOnly => {
            deny.extend(WRITERS.iter().map(|w| ApprovalRule(w.as_str().to_owned())));
            approval.mode
        }
    };
    SetConfigParams {
        session_id,
        config: ConfigPatch {
            approval: Some(ApprovalPatch {
                mode: Some(approval_mode),
                deny: Some(deny),
                ..ApprovalPatch::default()
            }),
            ..ConfigPatch::default()
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn modes_round_trip_through_the_approval_config() {
        let mut approval = ApprovalConfig {
            deny: vec![ApprovalRule("shell(rm*)".into())],
            ..ApprovalConfig::default()
        };
        assert_eq!(Mode::of(&approval), Mode::Auto);
        for id in ["read-only", "ask", "auto", "read-only"] {
            let mode = Mode::from_id(id).unwrap();
            let params = set_mode(SessionId("s".into()), &approval, mode);
            approval.apply(&params.config.approval.unwrap_or_default());
            assert_eq!(Mode::of(&approval), mode);
            assert_eq!(modes(&approval).current_mode_id.0.as_ref(), id);
            // The session's own rules survive every switch.
            assert!(approval.deny.contains(&ApprovalRule("shell(rm*)".into())));
        }
        assert!(Mode::from_id("yolo").is_err());
    }

    #[test]
    fn each_permission_option_gives_its_decision() {
        let offered: Vec<String> = Answer::ALL
            .map(|a| a.option().option_id.0.to_string())
            .to_vec();
        assert_eq!(offered, ["allow_once", "allow_always", "reject_once"]);
        assert_eq!(Answer::decision("allow_once"), (Decision::Allow, None));
        assert_eq!(
            Answer::decision("allow_always"),
            (Decision::AllowAlways, None)
        );
        assert_eq!(Answer::decision("reject_once").0, Decision::Deny);
        assert_eq!(Answer::decision("something_else").0, Decision::Deny);
    }
}
