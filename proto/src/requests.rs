//! Pending requests: what a session asks of its clients while it works. An approval before a
//! call that writes files or runs a command, a question from the model (`ask_user`), or a call
//! of a tool that a client executes. Any attached client answers with `session/respond`; the
//! first answer wins, and a timeout settles the request safely (the call is refused, never run).

use crate::names::names;
use crate::{SessionId, ToolCallId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A pending request's id, unique in the daemon.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct RequestId(pub String);

impl RequestId {
    /// The identifier as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

names! {
    /// When a call needs a person's approval.
    #[derive(Default)]
    pub enum ApprovalMode ("approval mode") {
        /// Calls run without asking (deny rules still refuse).
        #[default]
        Auto = "auto",
        /// Every call that writes files or runs a command waits for an answer, unless a rule
        /// decides it; reads, search and listing never ask.
        Ask = "ask",
    }
}

/// A rule: a tool name, optionally with a pattern, as `tool` or `tool(pattern)`; a bare name
/// matches every call of the tool. The pattern is a glob matched against each simple command
/// of a shell line, its words with quotes removed joined by single spaces
/// (`shell(git status*)`), or against each path a file tool writes, resolved (symlinks
/// followed) and relative to the session's directory (`write_file(src/**)`), or whole when
/// the pattern starts with `/`. An allow rule covers a shell line only when every simple
/// command matches and the line holds nothing the parser cannot vouch for; a deny rule
/// matches any simple command, however spelled. MCP tools take `mcp(SERVER/TOOL)` rules, the
/// pattern a glob over the server's name and its own name of the tool (`mcp(github/*)`), and
/// a bare `mcp` matches them all. docs/security.md, *The rule language*, has it all.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct ApprovalRule(pub String);

/// The approval settings of a session (`approval` in its config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalConfig {
    /// Whether calls that write or run ask first.
    #[serde(default)]
    pub mode: ApprovalMode,
    /// Calls these rules match run without asking.
    #[serde(default)]
    pub allow: Vec<ApprovalRule>,
    /// Calls these rules match are refused without asking, in every mode; deny wins over
    /// allow.
    #[serde(default)]
    pub deny: Vec<ApprovalRule>,
    /// How long a request waits for an answer before it is settled: an approval is denied, a
    /// question goes unanswered, a client tool fails.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Offer the `ask_user` tool even in `auto` mode (it is always offered in `ask` mode).
    #[serde(default)]
    pub ask_user: bool,
}

fn default_timeout_ms() -> u64 {
    300_000
}

impl Default for ApprovalConfig {
    fn default() -> Self {
        Self {
            mode: ApprovalMode::Auto,
            allow: Vec::new(),
            deny: Vec::new(),
            timeout_ms: default_timeout_ms(),
            ask_user: false,
        }
    }
}

impl ApprovalConfig {
    /// Whether the model is offered `ask_user`.
    pub fn offers_ask_user(&self) -> bool {
        self.mode == ApprovalMode::Ask || self.ask_user
    }
}

/// A partial [`ApprovalConfig`]: each field present replaces the current value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalPatch {
    /// See [`ApprovalConfig::mode`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ApprovalMode>,
    /// Replaces [`ApprovalConfig::allow`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<ApprovalRule>>,
    /// Replaces [`ApprovalConfig::deny`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny: Option<Vec<ApprovalRule>>,
    /// See [`ApprovalConfig::timeout_ms`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// See [`ApprovalConfig::ask_user`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_user: Option<bool>,
}

impl ApprovalConfig {
    /// Applies every field present in `patch`.
    pub fn apply(&mut self, patch: &ApprovalPatch) {
        let p = patch.clone();
        if let Some(v) = p.mode {
            self.mode = v;
        }
        if let Some(v) = p.allow {
            self.allow = v;
        }
        if let Some(v) = p.deny {
            self.deny = v;
        }
        if let Some(v) = p.timeout_ms {
            self.timeout_ms = v;
        }
        if let Some(v) = p.ask_user {
            self.ask_user = v;
        }
    }
}

/// A tool that a client executes: the model sees it like any other; its calls become
/// `client_tool_requested` events answered with `session/respond {output, is_error}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientToolDefinition {
    /// Its name; it may not be the name of a built-in tool.
    pub name: String,
    /// What it does and when to use it, for the model.
    pub description: String,
    /// JSON Schema of its arguments; the root is an object.
    pub parameters: serde_json::Value,
}

/// An answer to an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run this call.
    Allow,
    /// Run this call, and add an allow rule for this tool and command or path to the
    /// session, so the same call never asks again.
    AllowAlways,
    /// Refuse this call; the model is told, with the message if one was given.
    Deny,
}

/// Who settled a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResolvedBy {
    /// A client, through `session/respond`.
    Client,
    /// An allow or deny rule of the session's config; no question was asked.
    Rule,
    /// Nobody answered within `approval.timeout_ms`.
    Timeout,
    /// The work was aborted (or the session closed) while the request waited.
    Abort,
}

/// What a pending request asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RequestBody {
    /// May this call run? Answer with `decision`.
    Approval {
        /// The tool.
        tool: String,
        /// The arguments the model sent.
        arguments: serde_json::Value,
        /// What a person reads: the command line, or the file and a diff.
        summary: String,
    },
    /// The model asks the user. Answer with `answer`.
    Question {
        /// The question.
        question: String,
        /// Suggested answers, if the model gave some; any text is accepted.
        options: Vec<String>,
    },
    /// A call of a client tool. Answer with `output` (and `is_error`).
    ClientTool {
        /// The client tool.
        tool: String,
        /// The arguments the model sent.
        arguments: serde_json::Value,
    },
}

/// A request waiting for an answer, as `session/get` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PendingRequest {
    /// Its id, for `session/respond`.
    pub request_id: RequestId,
    /// The tool call it belongs to.
    pub call_id: ToolCallId,
    /// When it was raised (RFC 3339).
    pub created: String,
    /// When it will be settled by timeout if nobody answers (RFC 3339).
    pub expires: String,
    /// What it asks.
    #[serde(flatten)]
    pub body: RequestBody,
}

/// Parameters of `session/respond`. Which answer field is required depends on the request:
/// `decision` (and optionally `message`) for an approval, `answer` for a question, `output`
/// (and optionally `is_error`) for a client tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RespondParams {
    /// The session.
    pub session_id: SessionId,
    /// The request answered.
    pub request_id: RequestId,
    /// For an approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// For an approval: passed to the model with a denial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// For a question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// For a client tool: the result the model sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// For a client tool: whether `output` describes a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

/// Result of `session/respond`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RespondResponse {
    /// The request answered.
    pub request_id: RequestId,
    /// Requests of the session still waiting.
    pub pending: usize,
}
