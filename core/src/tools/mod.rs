//! Tools the model can call: the [`ToolRegistry`] (spec 3.8), output truncation (spec 5) and
//! the tools themselves. A tool that fails returns a [`ToolError`], which the agent loop turns
//! into an error result for the model; a tool never ends a session.

mod apply_patch;
mod ask_user;
mod client_tools;
mod edit_file;
mod fuzzy;
mod list_dir;
mod read_file;
mod read_many_files;
mod registry;
mod requests;
mod schema;
mod search;
mod shell;
mod subagents;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;
mod truncate;
mod write_file;

pub(crate) use apply_patch::{ApplyPatch, touched_paths};
pub(crate) use ask_user::AskUser;
pub(crate) use client_tools::session_tools;
pub(crate) use edit_file::EditFile;
pub(crate) use list_dir::ListDir;
pub(crate) use read_file::ReadFile;
pub(crate) use read_many_files::ReadManyFiles;
pub use registry::RegisterError;
pub(crate) use registry::{McpOrigin, RegisteredTool, ToolRegistry};
pub(crate) use requests::{Answer, Requests, Settled};
pub(crate) use schema::parameters;
pub(crate) use search::{Glob, Grep};
pub(crate) use shell::Shell;
pub(crate) use subagents::{
    CloseAgent, SendInput, SpawnAgent, SpawnRequest, Spawned, SubagentResult, Subagents, Wait,
};
pub(crate) use truncate::truncate_tool_output;
pub use truncate::{Keep, OutputLimits};
pub(crate) use write_file::WriteFile;

use crate::exec::{ExecutionEnvironment, OutputSink, SandboxPolicy};
use agentd_proto::{SessionConfig, ToolCallId};
use async_trait::async_trait;
use serde::Serialize;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What the model is told about a tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    /// Unique name.
    pub name: String,
    /// What it does and when to use it.
    pub description: String,
    /// JSON Schema of the arguments; the root is an object.
    pub parameters: serde_json::Value,
}

/// Everything a tool may use while it runs.
pub struct ToolContext<'a> {
    /// Where to read, write and run: the session's environment under this call's sandbox.
    pub env: &'a dyn ExecutionEnvironment,
    /// The sandbox this call runs under (already applied by `env`); `None`: unrestricted.
    pub sandbox: Option<&'a SandboxPolicy>,
    /// The session's settings at the time of the call.
    pub config: &'a SessionConfig,
    /// The profile's shell timeout when the call sets none (spec 3.5: 120 s for Anthropic).
    pub default_command_timeout: Duration,
    /// Fires when the session aborts the call.
    pub cancel: &'a CancellationToken,
    /// Streams output as it is produced (`tool_call_output_delta`).
    pub output: OutputSink<'a>,
    /// Whether the session's model takes images in tool results.
    pub accepts_images: bool,
    /// Attaches an image to the call's result (when `accepts_images`).
    pub attach_image: &'a (dyn Fn(agentd_proto::ImageData) + Send + Sync),
    /// Reports processes a command started that left its process group, and whether they
    /// were ended with it (the session names them in a `warning` event).
    pub report_escaped: &'a (dyn Fn(Vec<agentd_proto::ProcessInfo>, bool) + Send + Sync),
    /// The session's child sessions, when the host supports subagents.
    pub(crate) subagents: Option<&'a dyn Subagents>,
    /// The session's Agent Skills, for `activate_skill`.
    pub(crate) skills: Option<&'a dyn crate::skills::Skills>,
    /// The call being run.
    pub call_id: &'a ToolCallId,
    /// The session's clients, for questions and client tools; `None` where nobody can answer.
    pub(crate) requests: Option<&'a dyn Requests>,
    /// See [`ToolContext::stop_reason`].
    pub(crate) stop_reason: &'a (dyn Fn() -> &'static str + Send + Sync),
}

impl ToolContext<'_> {
    /// Why the call was stopped, once [`ToolContext::cancel`] fired, as words that follow
    /// "aborted": "by the user", or the daemon shutting down, or the session's disk failing.
    pub fn stop_reason(&self) -> &'static str {
        (self.stop_reason)()
    }
}

/// What the approval rules of a call match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// A command line.
    Command,
    /// Paths the call writes.
    Paths,
}

/// What a person approves before a call that writes files or runs a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalSubject {
    /// Whether `targets` are a command or paths.
    pub kind: TargetKind,
    /// The command line, or every path the call writes, as the model gave them.
    pub targets: Vec<String>,
    /// What a person reads: the command, or the file and a diff.
    pub summary: String,
    /// The call asks to run outside the session's sandbox: only a person may allow that.
    pub outside_sandbox: bool,
}

/// Most characters of an approval summary; a longer one ends with a note saying so.
pub(crate) const MAX_SUMMARY_CHARS: usize = 16_000;

impl ApprovalSubject {
    /// A subject whose summary is capped at 16,000 characters.
    pub fn new(kind: TargetKind, targets: Vec<String>, summary: String) -> Self {
        let summary = match summary.char_indices().nth(MAX_SUMMARY_CHARS) {
            Some((cut, _)) => format!(
                "{}\n[... {} more characters not shown]",
                &summary[..cut],
                summary.len() - cut
            ),
            None => summary,
        };
        Self {
            kind,
            targets,
            summary,
            outside_sandbox: false,
        }
    }
}

/// A diff-like view of replacing `old` by `new` in `path`, for approval summaries.
pub(crate) fn diff_summary(path: &str, old: &str, new: &str) -> String {
    let mut out = format!("--- {path}\n+++ {path}\n");
    for line in old.lines() {
        out.push('-');
        out.push_str(line);
        out.push('\n');
    }
    for line in new.lines() {
        out.push('+');
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A failed tool call; the message goes to the model as an error result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl From<crate::exec::Error> for ToolError {
    fn from(e: crate::exec::Error) -> Self {
        Self(e.to_string())
    }
}

/// One tool. Arguments arrive already validated against [`Tool::definition`]'s schema.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Name, description and argument schema.
    fn definition(&self) -> ToolDefinition;
    /// What a person approves before this call runs; `None` (the default) for tools that
    /// only read, which never ask.
    fn approval(&self, _args: &serde_json::Value) -> Option<ApprovalSubject> {
        None
    }
    /// How much of its output the model sees; the default suits a tool whose output is read
    /// whole (30,000 characters, beginning and end).
    fn output_limits(&self) -> OutputLimits {
        OutputLimits::default()
    }
    /// Runs the tool and returns its full output.
    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError>;
}

/// Deserializes validated arguments into a tool's own argument struct.
pub(crate) fn parse_args<T: serde::de::DeserializeOwned>(
    args: serde_json::Value,
) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError(format!("invalid arguments: {e}")))
}
