//! The subagent tools (spec 7.2): `spawn_agent`, `send_input`, `wait` and `close_agent`. They
//! reach child sessions through the [`Subagents`] the host provides; the tools only parse
//! arguments and word the results for the model.

use super::schema::parameters;
use super::{OutputLimits, Tool, ToolContext, ToolDefinition, ToolError, parse_args};
use agentd_proto::{BuiltinTool, Worktree};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

/// What a child session produced (spec 7.3 `SubAgentResult`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SubagentResult {
    /// Its final text (or what stopped it).
    pub(crate) output: String,
    /// Whether its work completed.
    pub(crate) success: bool,
    /// Model turns it used.
    pub(crate) turns_used: u32,
}

/// What `spawn_agent` asks for: its arguments, whose field docs the model reads.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SpawnRequest {
    /// The task, with all the context the subagent needs.
    pub(crate) task: String,
    /// A subdirectory to scope the subagent to.
    pub(crate) working_dir: Option<String>,
    /// Model override (default: yours).
    pub(crate) model: Option<String>,
    /// Turn limit (default 0, unlimited).
    pub(crate) max_turns: Option<u32>,
    /// Have it work in a git worktree of its own, on a new branch `agentd/NAME` from your
    /// current HEAD, so that your files stay as they are; its worktree and branch stay when
    /// it ends, for you to look at or merge. Not with `working_dir`.
    pub(crate) worktree: Option<bool>,
    /// The worktree's NAME (letters, digits, '.', '_', '-'; implies `worktree`; default: one
    /// agentd picks).
    pub(crate) worktree_name: Option<String>,
}

impl SpawnRequest {
    /// The worktree asked for: `None` for none, `Some(None)` for one agentd names.
    pub(crate) fn worktree(&self) -> Option<Option<&str>> {
        match (&self.worktree_name, self.worktree) {
            (Some(name), _) => Some(Some(name.as_str())),
            (None, Some(true)) => Some(None),
            (None, _) => None,
        }
    }
}

/// A child just spawned: its id, and its worktree if it has one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Spawned {
    /// Its session id.
    pub(crate) agent_id: String,
    /// The worktree it works in (`spawn_agent {worktree}`).
    pub(crate) worktree: Option<Worktree>,
}

/// Child sessions of the calling session. Errors are messages for the model.
#[async_trait]
pub(crate) trait Subagents: Send + Sync {
    /// Starts a child on `request.task`.
    async fn spawn(&self, request: SpawnRequest) -> Result<Spawned, String>;
    /// Gives a child more input: steering while it works, a new input when it is idle.
    async fn send_input(&self, agent_id: &str, message: String) -> Result<(), String>;
    /// Waits until the child is not working (or `cancel` fires) and returns its result.
    async fn wait(
        &self,
        agent_id: &str,
        cancel: &CancellationToken,
    ) -> Result<SubagentResult, String>;
    /// Stops and closes a child; returns its last result.
    async fn close(&self, agent_id: &str) -> Result<SubagentResult, String>;
}

fn subagents<'a>(ctx: &ToolContext<'a>) -> Result<&'a dyn Subagents, ToolError> {
    ctx.subagents
        .ok_or_else(|| ToolError("subagents are not available in this host".into()))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AgentArgs {
    /// The id spawn_agent returned.
    agent_id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SendArgs {
    /// The id spawn_agent returned.
    agent_id: String,
    message: String,
}

/// The definition of a tool whose only argument is the agent's id.
fn agent_tool(tool: BuiltinTool, description: &str) -> ToolDefinition {
    ToolDefinition {
        name: tool.as_str().into(),
        description: description.into(),
        parameters: parameters::<AgentArgs>(),
    }
}

fn describe(agent_id: &str, r: &SubagentResult) -> String {
    let status = if r.success { "completed" } else { "failed" };
    format!(
        "agent {agent_id} {status} after {} turns.\n\n{}",
        r.turns_used, r.output
    )
}

/// `spawn_agent`.
pub(crate) struct SpawnAgent;

#[async_trait]
impl Tool for SpawnAgent {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: BuiltinTool::SpawnAgent.as_str().into(),
            description: "Spawn a subagent to handle a scoped task autonomously. It works in \
                parallel with you, in the same files (or in a git worktree of its own with \
                `worktree`), with its own conversation; give it everything it needs in the \
                task. Returns its id: collect its result with `wait`."
                .into(),
            parameters: parameters::<SpawnRequest>(),
        }
    }

    fn output_limits(&self) -> OutputLimits {
        OutputLimits::head_tail(20_000)
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let request: SpawnRequest = parse_args(args)?;
        let spawned = subagents(ctx)?.spawn(request).await.map_err(ToolError)?;
        let mut text = format!("spawned agent {}; status: running", spawned.agent_id);
        if let Some(tree) = &spawned.worktree {
            text.push_str(&format!(
                "; it works in the worktree {} on branch {} (from {}), which stays when it \
                 ends: look at it there, or merge the branch",
                tree.path, tree.branch, tree.base
            ));
        }
        Ok(text)
    }
}

/// `send_input`.
pub(crate) struct SendInput;

#[async_trait]
impl Tool for SendInput {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: BuiltinTool::SendInput.as_str().into(),
            description: "Send a message to a subagent: it sees it after its current tool \
                round, or starts on it if it has finished."
                .into(),
            parameters: parameters::<SendArgs>(),
        }
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let args: SendArgs = parse_args(args)?;
        subagents(ctx)?
            .send_input(&args.agent_id, args.message)
            .await
            .map_err(ToolError)?;
        Ok(format!("message sent to agent {}", args.agent_id))
    }
}

/// `wait`.
pub(crate) struct Wait;

#[async_trait]
impl Tool for Wait {
    fn definition(&self) -> ToolDefinition {
        agent_tool(
            BuiltinTool::Wait,
            "Wait for a subagent to finish and return its result: its final \
                output, whether it succeeded, and the turns it used.",
        )
    }

    fn output_limits(&self) -> OutputLimits {
        OutputLimits::head_tail(20_000)
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let args: AgentArgs = parse_args(args)?;
        let result = subagents(ctx)?
            .wait(&args.agent_id, ctx.cancel)
            .await
            .map_err(ToolError)?;
        let text = describe(&args.agent_id, &result);
        if result.success {
            Ok(text)
        } else {
            Err(ToolError(text))
        }
    }
}

/// `close_agent`.
pub(crate) struct CloseAgent;

#[async_trait]
impl Tool for CloseAgent {
    fn definition(&self) -> ToolDefinition {
        agent_tool(
            BuiltinTool::CloseAgent,
            "Stop a subagent (its running commands are killed) and close it.",
        )
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let args: AgentArgs = parse_args(args)?;
        let result = subagents(ctx)?
            .close(&args.agent_id)
            .await
            .map_err(ToolError)?;
        Ok(format!(
            "closed. Last result: {}",
            describe(&args.agent_id, &result)
        ))
    }
}
