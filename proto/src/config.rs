//! Session configuration as it appears on the wire: the full [`SessionConfig`] in snapshots
//! and the partial [`ConfigPatch`] accepted by `session/create` and `session/set_config`.

use crate::McpServerConfig;
use crate::names::names;
use crate::requests::{ApprovalConfig, ApprovalPatch, ClientToolDefinition};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

names! {
    /// How much the model should reason before answering (spec 2.7). `None` means the provider's
    /// default.
    pub enum ReasoningEffort ("reasoning effort") {
        /// Minimal reasoning.
        Low = "low",
        /// Balanced reasoning.
        Medium = "medium",
        /// Deep reasoning.
        High = "high",
    }
}

names! {
    /// What a session's commands and file tools may write (see docs/security.md, *Sandbox*).
    #[derive(Default)]
    pub enum SandboxMode ("sandbox mode") {
        /// Read everywhere; write only in the session's temp dir. Read-only sessions always use it.
        ReadOnly = "read_only",
        /// Read everywhere; write only under the session's cwd, its temp dir and
        /// `sandbox_writable_roots`.
        #[default]
        WorkspaceWrite = "workspace_write",
        /// No restriction beyond the user's own permissions.
        Off = "off",
    }
}

names! {
    /// A session's tool profile (spec 3.2-3.6): the tool set, shell defaults and system prompt
    /// that suit one model family. A session gets its provider's own unless it names one.
    pub enum ProfileId ("profile") {
        /// OpenAI's: `apply_patch` for edits, 10 s shell default; the default of `openai` and
        /// `openai_chat` providers.
        Openai = "openai",
        /// Anthropic's: `edit_file` by exact replacement, `grep` output modes, 120 s shell
        /// default.
        Anthropic = "anthropic",
        /// Gemini's: `read_many_files` and `list_dir` besides `edit_file`, 10 s shell default.
        Gemini = "gemini",
        /// `shell` alone (120 s default), for small local models.
        Bash = "bash",
    }
}

/// The settings a session runs with (spec 2.2). Every field has a default; limits of 0 mean
/// unlimited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SessionConfig {
    /// Provider name: `anthropic`, `openai`, `gemini`, or a configured endpoint.
    pub provider: String,
    /// Model identifier passed to the provider.
    pub model: String,
    /// Reasoning effort for the next LLM call; `null` is the provider default.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Most output tokens one LLM call may produce.
    pub max_output_tokens: u32,
    /// Most turns across the whole session; 0 is unlimited.
    pub max_turns: u32,
    /// Most tool rounds for one user input; 0 is unlimited.
    pub max_tool_rounds_per_input: u32,
    /// Shell timeout when a call sets none, in milliseconds.
    pub default_command_timeout_ms: u64,
    /// Upper bound on any shell call's `timeout_ms`.
    pub max_command_timeout_ms: u64,
    /// Per-tool character limits on the output the model sees (spec 5.2), overriding defaults.
    pub tool_output_limits: BTreeMap<String, usize>,
    /// Per-tool line limits applied after the character limit (spec 5.3), overriding defaults.
    pub tool_line_limits: BTreeMap<String, usize>,
    /// Whether repeating tool-call patterns inject a warning (spec 2.10).
    pub enable_loop_detection: bool,
    /// How many recent tool calls loop detection looks at.
    pub loop_detection_window: usize,
    /// Context window size in tokens, for the 80% usage warning (spec 5.5).
    pub context_window_tokens: u64,
    /// Compact the history automatically when the estimated context passes this percentage
    /// of the window; 0 turns automatic compaction off.
    pub auto_compact_percent: u8,
    /// How deep subagents may nest: 1 lets a session spawn children that cannot spawn
    /// their own (spec 7.3); 0 turns subagents off.
    pub max_subagent_depth: u32,
    /// Most children of one session working at the same time.
    pub max_concurrent_subagents: u32,
    /// Which calls wait for a person's approval, and the rules that decide without asking.
    #[serde(default)]
    pub approval: ApprovalConfig,
    /// Tools that a client executes (see `client_tool_requested`).
    #[serde(default)]
    pub client_tools: Vec<ClientToolDefinition>,
    /// What commands and file tools may write; records from before sandboxes existed get the
    /// default.
    #[serde(default)]
    pub sandbox: SandboxMode,
    /// Absolute directories a `workspace_write` sandbox may also write under.
    #[serde(default)]
    pub sandbox_writable_roots: Vec<PathBuf>,
    /// Whether sandboxed commands may open TCP connections and listen (`read_only` and
    /// `workspace_write` only; `off` never restricts).
    #[serde(default)]
    pub sandbox_network: bool,
    /// The MCP servers whose tools the session takes, by name: the config file's
    /// `[mcp_servers]` as they were when the session was made, plus those the session added.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
}

/// A partial [`SessionConfig`]: every field that is present replaces the current value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigPatch {
    /// See [`SessionConfig::provider`]. Switching provider without naming a model selects the
    /// new provider's default model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// See [`SessionConfig::model`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// See [`SessionConfig::reasoning_effort`]. Absent leaves it as it is; `null` sets the
    /// provider default.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub reasoning_effort: Option<Option<ReasoningEffort>>,
    /// See [`SessionConfig::max_output_tokens`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// See [`SessionConfig::max_turns`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// See [`SessionConfig::max_tool_rounds_per_input`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_rounds_per_input: Option<u32>,
    /// See [`SessionConfig::default_command_timeout_ms`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_command_timeout_ms: Option<u64>,
    /// See [`SessionConfig::max_command_timeout_ms`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_command_timeout_ms: Option<u64>,
    /// Merged into [`SessionConfig::tool_output_limits`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_output_limits: Option<BTreeMap<String, usize>>,
    /// Merged into [`SessionConfig::tool_line_limits`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_line_limits: Option<BTreeMap<String, usize>>,
    /// See [`SessionConfig::enable_loop_detection`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_loop_detection: Option<bool>,
    /// See [`SessionConfig::loop_detection_window`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_detection_window: Option<usize>,
    /// See [`SessionConfig::context_window_tokens`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window_tokens: Option<u64>,
    /// See [`SessionConfig::auto_compact_percent`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_compact_percent: Option<u8>,
    /// See [`SessionConfig::max_subagent_depth`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_subagent_depth: Option<u32>,
    /// See [`SessionConfig::max_concurrent_subagents`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_subagents: Option<u32>,
    /// Merged into [`SessionConfig::approval`]: each field present replaces its value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalPatch>,
    /// Replaces [`SessionConfig::client_tools`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_tools: Option<Vec<ClientToolDefinition>>,
    /// See [`SessionConfig::sandbox`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxMode>,
    /// Replaces [`SessionConfig::sandbox_writable_roots`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_writable_roots: Option<Vec<PathBuf>>,
    /// See [`SessionConfig::sandbox_network`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_network: Option<bool>,
    /// Merged into [`SessionConfig::mcp_servers`]: each server named replaces the one of that
    /// name (`enabled = false` turns one off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<BTreeMap<String, McpServerConfig>>,
}

impl SessionConfig {
    /// Applies every field present in `patch`.
    pub fn apply(&mut self, patch: &ConfigPatch) {
        let p = patch.clone();
        if let Some(v) = p.provider {
            self.provider = v;
        }
        if let Some(v) = p.model {
            self.model = v;
        }
        if let Some(v) = p.reasoning_effort {
            self.reasoning_effort = v;
        }
        macro_rules! set {
            ($($field:ident),*) => { $( if let Some(v) = p.$field { self.$field = v; } )* };
        }
        set!(
            max_output_tokens,
            max_turns,
            max_tool_rounds_per_input,
            default_command_timeout_ms,
            max_command_timeout_ms,
            enable_loop_detection,
            loop_detection_window,
            context_window_tokens,
            auto_compact_percent,
            max_subagent_depth,
            max_concurrent_subagents,
            sandbox,
            sandbox_writable_roots,
            sandbox_network
        );
        if let Some(m) = p.tool_output_limits {
            self.tool_output_limits.extend(m);
        }
        if let Some(m) = p.tool_line_limits {
            self.tool_line_limits.extend(m);
        }
        if let Some(a) = &p.approval {
            self.approval.apply(a);
        }
        if let Some(t) = p.client_tools {
            self.client_tools = t;
        }
        if let Some(m) = p.mcp_servers {
            self.mcp_servers.extend(m);
        }
    }
}

/// Tells a present `null` (`Some(None)`) from an absent field (`None`, via `default`).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}
