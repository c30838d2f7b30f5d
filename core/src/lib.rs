//! agentd-core: coding-agent sessions as a library. A session pairs a model ([`Provider`])
//! with tools ([`Tool`]) run in an [`ExecutionEnvironment`], under a [`Profile`] that gives
//! the tools and the system prompt; everything it does is an event with a per-session seq.
//!
//! A host program (spec 1.2) builds a [`Session`] with [`Session::builder`], submits input,
//! and reads the session's events; the `agentd` daemon holds many sessions in a [`Registry`]
//! and serves them over JSON-RPC. The wire types are in `agentd-proto`.
//!
//! Modules, one concern each (see ARCHITECTURE.md for the code map and invariants), all
//! private; what a host may use is re-exported here:
//! - `session`: the session task, its handle, the registry, the event log;
//! - `agent`: the agentic loop and its approval policy;
//! - `llm`: provider clients over HTTP + SSE;
//! - `profile`: provider-aligned tool sets and system prompts;
//! - `tools`: the tool registry and the tools;
//! - `exec`: where tools run (process groups, sandbox, SSH);
//! - `store`: persistence of sessions, their history trees and event logs;
//! - `config`: the configuration file and environment.

#![deny(missing_docs, unreachable_pub)]

mod agent;
mod checkpoint;
mod config;
mod exec;
mod hooks;
mod llm;
mod mcp;
mod profile;
mod session;
mod skills;
mod store;
mod tools;
mod worktree;

// Sessions and the registry that holds a daemon's sessions.
pub use session::{
    Error, LIVE_BUFFER, Registry, Session, SessionBuilder, SharedEvent, Subscription, View,
};
// What a session is made of: a profile (tools and prompt), a provider, an environment.
pub use profile::Profile;
// Tools, for a host that registers its own.
pub use tools::{
    ApprovalSubject, Keep, OutputLimits, RegisterError, TargetKind, Tool, ToolContext,
    ToolDefinition, ToolError,
};
// Model providers, for a host that brings its own.
pub use llm::{
    ByteStream, Delta, Error as ProviderError, ErrorKind as ProviderErrorKind, Limits, Provider,
    Request, Response, StopReason,
};
// Where tools run, for a host that brings its own environment.
pub use exec::{
    DirEntry, EnvPolicy, Error as ExecError, ExecRequest, ExecResult, ExecutionEnvironment,
    GrepMode, GrepOptions, LocalExecutionEnvironment, OutputSink, ProtectedPaths, SandboxPolicy,
};
// The configuration file.
pub use config::{
    CheckpointsConfig, Config, ContainerConfig, HostConfig, Price, ProviderConfig, ServerConfig,
    ToolsConfig, default_config_dir, default_config_path, default_state_dir,
};
// Hooks, as the config file configures them.
pub use hooks::{Hook, Trusted};
// MCP servers: `agentd --check-mcp` starts the configured ones.
pub use mcp::{McpCheck, check_mcp_servers};
// Where sessions are stored.
pub use store::{RecordedGroup, RecordedProcesses, Store};

/// The daemon's processes: becoming the subreaper of what commands leave behind, ending what
/// a crashed run left, and telling who a socket peer is.
pub mod process {
    pub use crate::exec::{
        AncestryError, ProcessId, become_subreaper, create_protected_dir, descends_from,
        end_leftovers, identify, reap_orphans_forever,
    };
}
