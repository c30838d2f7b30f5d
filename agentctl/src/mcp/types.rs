//! The tools' arguments and results. Their JSON Schemas (`inputSchema`, `outputSchema`) are
//! derived from these types, so what `tools/list` promises is what the tools parse and answer.

use agentd_proto::SessionState;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `session_start`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct StartArgs {
    /// The task: the session's first message to its model.
    pub(super) prompt: String,
    /// The directory the session works in (absolute, or relative to the MCP server's
    /// working directory). Default: the MCP server's working directory.
    #[serde(default)]
    pub(super) cwd: Option<String>,
    /// A provider configured in agentd (`agentctl models` lists them). Default: agentd's
    /// default provider.
    #[serde(default)]
    pub(super) provider: Option<String>,
    /// A model of that provider. Default: the provider's default model.
    #[serde(default)]
    pub(super) model: Option<String>,
}

/// `session_reply`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReplyArgs {
    /// The session, as `session_start` or `session_list` gave it.
    pub(super) session_id: String,
    /// The next message; when the session asked a question, the answer to it.
    pub(super) prompt: String,
}

/// `session_list`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ListArgs {
    /// Only sessions working in this directory (absolute, or relative to the MCP server's
    /// working directory).
    #[serde(default)]
    pub(super) cwd: Option<String>,
    /// At most this many sessions, newest first (1 to 200; default 50).
    #[serde(default)]
    #[schemars(range(min = 1, max = 200))]
    pub(super) limit: Option<u32>,
}

/// How a session's work on the prompt ended, or why the call answered before it did.
#[derive(Serialize, JsonSchema, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
pub(super) enum Status {
    /// The model answered.
    Completed,
    /// The work was aborted (by another client, or the daemon stopping).
    Aborted,
    /// A turn limit of the session stopped the work.
    TurnLimit,
    /// The answer was cut off at the output-token limit.
    MaxTokens,
    /// The model declined to answer.
    Refusal,
    /// An error stopped the work.
    Error,
    /// The work waits for a person to approve a tool call (see `waiting`); it goes on in
    /// agentd once answered there.
    AwaitingApproval,
    /// The model asked a question (see `waiting`): answer it with `session_reply`.
    Question,
}

impl Status {
    /// The word the text result uses.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Aborted => "aborted",
            Self::TurnLimit => "turn_limit",
            Self::MaxTokens => "max_tokens",
            Self::Refusal => "refusal",
            Self::Error => "error",
            Self::AwaitingApproval => "awaiting_approval",
            Self::Question => "question",
        }
    }
}

/// The answer of `session_start` and `session_reply`.
#[derive(Serialize, JsonSchema)]
pub(super) struct RunResult {
    /// The agentd session: for `session_reply`, and to open it with `agentctl` or an editor.
    pub(super) session_id: String,
    /// How the work ended.
    pub(super) status: Status,
    /// The model's last text (empty when it wrote none).
    pub(super) text: String,
    /// What the session waits for, with `awaiting_approval` and `question`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) waiting: Option<Waiting>,
    /// The error that stopped the work, with `error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<String>,
}

/// A request of the session that someone has to answer.
#[derive(Serialize, JsonSchema)]
pub(super) struct Waiting {
    /// The request's id (`agentctl respond SESSION REQUEST ...`).
    pub(super) request_id: String,
    /// What the request asks: the tool call to approve, or the question.
    pub(super) what: String,
    /// Suggested answers to a question.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) options: Vec<String>,
    /// When a request nobody answers is settled (an approval denied), RFC 3339, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) expires: Option<String>,
    /// How to answer it.
    pub(super) answer_with: String,
}

/// The answer of `session_list`.
#[derive(Serialize, JsonSchema)]
pub(super) struct SessionList {
    /// The sessions, newest first.
    pub(super) sessions: Vec<SessionItem>,
    /// How many sessions matched (more than listed when the limit cut the list).
    pub(super) total: usize,
}

/// One session of `session_list`.
#[derive(Serialize, JsonSchema)]
pub(super) struct SessionItem {
    /// Its id.
    pub(super) session_id: String,
    /// Its title, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) title: Option<String>,
    /// The directory it works in.
    pub(super) cwd: String,
    /// Its state.
    pub(super) state: SessionState,
    /// When it last changed (RFC 3339).
    pub(super) updated: String,
}
