//! Client tools: tools a client defines in the session config (`client_tools`) and executes
//! itself, and [`session_tools`], the tool set of a session: its profile's tools plus
//! `ask_user` and the client tools its config asks for.

use super::requests::{Answer, Settled};
use super::{AskUser, Tool, ToolContext, ToolDefinition, ToolError, ToolRegistry};
use agentd_proto::{BuiltinTool, ClientToolDefinition, RequestBody, SessionConfig};
use async_trait::async_trait;
use std::sync::Arc;

/// A tool whose calls a client answers.
struct ClientTool(ClientToolDefinition);

#[async_trait]
impl Tool for ClientTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.0.name.clone(),
            description: self.0.description.clone(),
            parameters: self.0.parameters.clone(),
        }
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let name = &self.0.name;
        let requests = ctx
            .requests
            .ok_or_else(|| ToolError(format!("no client can run {name} in this session")))?;
        let body = RequestBody::ClientTool {
            tool: name.clone(),
            arguments: args,
        };
        match requests
            .raise(ctx.call_id, body, Vec::new(), ctx.cancel)
            .await
        {
            Settled::Answered(Answer::ClientTool { output, is_error }) => {
                if is_error {
                    Err(ToolError(output))
                } else {
                    Ok(output)
                }
            }
            Settled::Answered(other) => Err(ToolError(format!("unexpected answer {other:?}"))),
            Settled::TimedOut(secs) => Err(ToolError(format!(
                "no client answered within {secs} s (the client that provides {name} may have gone); do not rely on it"
            ))),
            Settled::Aborted => Err(ToolError(
                "the call was withdrawn: the work was aborted".into(),
            )),
        }
    }
}

/// The tools of a session with `config`: `base` (its profile's), then `ask_user` and the
/// client tools when the config asks for them. The error says which client tool is invalid.
pub(crate) fn session_tools(
    base: &ToolRegistry,
    config: &SessionConfig,
) -> Result<ToolRegistry, String> {
    if !config.approval.offers_ask_user() && config.client_tools.is_empty() {
        return Ok(base.clone());
    }
    let mut tools = base.clone();
    if config.approval.offers_ask_user() {
        tools
            .register(Arc::new(AskUser))
            .map_err(|e| e.to_string())?;
    }
    for def in &config.client_tools {
        let name = &def.name;
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!(
                "client_tools: {name:?} is not a valid tool name (1 to 64 letters, digits, `_` or `-`)"
            ));
        }
        if name.starts_with(crate::mcp::PREFIX) {
            return Err(format!(
                "client_tools: {name:?} starts with {:?}, which only MCP servers' tools may",
                crate::mcp::PREFIX
            ));
        }
        if tools.get(name).is_some() || name == BuiltinTool::AskUser.as_str() {
            return Err(format!(
                "client_tools: {name:?} is already a tool of this session; a client tool may not shadow it"
            ));
        }
        tools
            .register(Arc::new(ClientTool(def.clone())))
            .map_err(|e| format!("client_tools: {e}"))?;
    }
    Ok(tools)
}
