//! MCP servers a session takes tools from: their configuration (`[mcp_servers.NAME]` in the
//! daemon's config file, `mcp_servers` in `session/create` and `session/set_config`) and the
//! states `mcp_server_state` events report.

use crate::names::names;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// How long a server may take to start and list its tools when nothing says otherwise.
pub const MCP_DEFAULT_STARTUP_TIMEOUT_SECS: u64 = 10;
/// How long one tool call may take when nothing says otherwise.
pub const MCP_DEFAULT_TOOL_TIMEOUT_SECS: u64 = 60;

/// One MCP server (the shape codex's `[mcp_servers.NAME]` has): either a program the daemon
/// starts and speaks to over its stdin and stdout (`command`), or a Streamable HTTP endpoint
/// (`url`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The program of a stdio server (looked up in `PATH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables set for it, over the session's filtered environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Its working directory (absolute; default: the session's, for a local session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// The endpoint of a Streamable HTTP server (`http://` or `https://`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The variable of the daemon's environment holding the bearer token sent to `url`; the
    /// token itself is never part of a config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env_var: Option<String>,
    /// More HTTP headers sent to `url`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Seconds the server may take to start and list its tools (default 10); the first LLM
    /// call of a session waits for it that long at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_secs: Option<u64>,
    /// Seconds one tool call may take (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout_secs: Option<u64>,
    /// Only these of the server's tools are offered (its own names); absent: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled_tools: Option<Vec<String>>,
    /// These of the server's tools are never offered (its own names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled_tools: Vec<String>,
    /// `false` keeps the server configured but unused (a session can turn off a server of
    /// the config file this way).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

/// Nothing set and enabled, as an empty table in the config file reads.
impl Default for McpServerConfig {
    fn default() -> Self {
        Self {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            url: None,
            bearer_token_env_var: None,
            headers: BTreeMap::new(),
            startup_timeout_secs: None,
            tool_timeout_secs: None,
            enabled_tools: None,
            disabled_tools: Vec::new(),
            enabled: true,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_default_is_what_an_empty_table_reads() {
        let read: McpServerConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(read, McpServerConfig::default());
        assert!(read.enabled);
    }
}

fn is_true(b: &bool) -> bool {
    *b
}

impl McpServerConfig {
    /// The startup timeout in seconds, the default filled in.
    pub fn startup_timeout_secs(&self) -> u64 {
        self.startup_timeout_secs
            .unwrap_or(MCP_DEFAULT_STARTUP_TIMEOUT_SECS)
    }

    /// The tool-call timeout in seconds, the default filled in.
    pub fn tool_timeout_secs(&self) -> u64 {
        self.tool_timeout_secs
            .unwrap_or(MCP_DEFAULT_TOOL_TIMEOUT_SECS)
    }

    /// Whether the server's tool `name` is offered, per `enabled_tools` and `disabled_tools`.
    pub fn offers(&self, name: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|only| only.iter().any(|t| t == name))
            && !self.disabled_tools.iter().any(|t| t == name)
    }
}

names! {
    /// Where an MCP server of a session is (`mcp_server_state`).
    pub enum McpServerState ("MCP server state") {
        /// Being started, initialized and asked for its tools.
        Starting = "starting",
        /// Serving; `tools` lists what it offers.
        Ready = "ready",
        /// It could not start, stopped answering or crashed; `reason` says why. Its tools are
        /// left out; a crashed server is started again on its next use.
        Failed = "failed",
        /// Stopped: the session closed, or the server was disabled or removed.
        Stopped = "stopped",
    }
}
