//! MCP servers as tool sources. Each session that has `mcp_servers` gets one owner task
//! (`owner.rs`) holding its servers' connections and states; the session, the agent loop and
//! the tools talk to it through [`Mcp`], a handle over a channel. A server starts
//! (`connect.rs`: a stdio program through the exec layer, its stderr logged, bounded) without
//! blocking `session/create`; the first LLM call waits for it up to its startup timeout.
//! Its tools are offered as `mcp__SERVER__TOOL` (`names.rs`), in a stable order, run by
//! [`McpTool`](tool::McpTool) (`tool.rs`) with their results turned into text and images
//! (`content.rs`); `resources.rs` is the two resource tools. A Streamable HTTP server is
//! reached through rmcp's client (`http.rs`).

mod check;
mod config;
mod connect;
mod content;
mod http;
mod names;
mod owner;
mod resources;
mod tool;

pub use check::{McpCheck, check_mcp_servers};
pub(crate) use config::validate;
pub(crate) use names::PREFIX;
pub(crate) use owner::Mcp;

use crate::exec::LocalOptions;
use std::path::PathBuf;
use std::sync::Arc;

/// What a session's stdio servers start with: the daemon's command options (filtered
/// variables, the process ledger) and the directory they run in unless they name one.
#[derive(Clone)]
pub(crate) struct Launcher {
    pub(crate) options: LocalOptions,
    /// The session's directory when it is local; otherwise the daemon's home.
    pub(crate) cwd: PathBuf,
}

/// Where a session's MCP events go (its own stream).
pub(crate) type Emit = Arc<dyn Fn(agentd_proto::EventBody) + Send + Sync>;
