//! The subagent tools (spec 7.2): `spawn_agent`, `send_input`, `wait` and `close_agent`. They
//! reach child sessions through the [`Subagents`] the host provides; the tools only parse
//! arguments and word the results for the model.

use super::{Tool, ToolContext, ToolDefinition, ToolError, parse_args};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
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

/// What `spawn_agent` asks for.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct SpawnRequest {
    /// The task, in natural language.
    pub(crate) task: String,
    /// A subdirectory of the parent's working directory to work in.
    pub(crate) working_dir: Option<String>,
    /// A model instead of the parent's.
    pub(crate) model: Option<String>,
    /// Turn limit (0: unlimited).
    pub(crate) max_turns: Option<u32>,
}

/// Child sessions of the calling session. Errors are messages for the model.
#[async_trait]
pub(crate) trait Subagents: Send + Sync {
    /// Starts a child on `request.task`; returns its id.
    async fn spawn(&self, request: SpawnRequest) -> Result<String, String>;
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

#[derive(Deserialize)]
struct AgentArgs {
    agent_id: String,
}

#[derive(Deserialize)]
struct SendArgs {
    agent_id: String,
    message: String,
}

fn agent_id_schema() -> serde_json::Value {
    json!({"type": "string", "description": "The id spawn_agent returned."})
}

/// The definition of a tool whose only argument is the agent's id.
fn agent_tool(name: &str, description: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: description.into(),
        parameters: json!({
            "type": "object",
            "properties": {"agent_id": agent_id_schema()},
            "required": ["agent_id"],
            "additionalProperties": false
        }),
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
            name: "spawn_agent".into(),
            description: "Spawn a subagent to handle a scoped task autonomously. It works in \
                parallel with you, in the same files, with its own conversation; give it \
                everything it needs in the task. Returns its id: collect its result with \
                `wait`."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string", "description": "The task, with all the context the subagent needs."},
                    "working_dir": {"type": "string", "description": "A subdirectory to scope the subagent to."},
                    "model": {"type": "string", "description": "Model override (default: yours)."},
                    "max_turns": {"type": "integer", "minimum": 0, "description": "Turn limit (default 0, unlimited)."}
                },
                "required": ["task"],
                "additionalProperties": false
            }),
        }
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let request: SpawnRequest = parse_args(args)?;
        let id = subagents(ctx)?.spawn(request).await.map_err(ToolError)?;
        Ok(format!("spawned agent {id}; status: running"))
    }
}

/// `send_input`.
pub(crate) struct SendInput;

#[async_trait]
impl Tool for SendInput {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "send_input".into(),
            description: "Send a message to a subagent: it sees it after its current tool \
                round, or starts on it if it has finished."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "agent_id": agent_id_schema(),
                    "message": {"type": "string"}
                },
                "required": ["agent_id", "message"],
                "additionalProperties": false
            }),
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
            "wait",
            "Wait for a subagent to finish and return its result: its final \
                output, whether it succeeded, and the turns it used.",
        )
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
            "close_agent",
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
