//! A server's tool as a session tool: its schema offered under `mcp__SERVER__TOOL`, each call
//! sent through the owner's connection with the server's tool timeout, cancelled
//! (`notifications/cancelled`) when the work is aborted, and its result converted.

use super::content::{cap, convert};
use super::names::tool_name;
use super::owner::{Cmd, Mcp};
use super::resources::{ListResources, ReadResource};
use crate::tools::{
    ApprovalSubject, McpOrigin, TargetKind, Tool, ToolContext, ToolDefinition, ToolError,
    ToolRegistry,
};
use agentd_proto::McpServerConfig;
use async_trait::async_trait;
use futures::future::BoxFuture;
use rmcp::ServiceError;
use rmcp::model::CallToolRequestParams;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Most characters of a tool description the model is given.
const MAX_DESCRIPTION: usize = 2048;
/// Most bytes of a tool's argument schema.
const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Most bytes one server's offered definitions (schemas and descriptions) take together: they
/// go with every LLM call.
const MAX_SERVER_BYTES: usize = 256 * 1024;

/// One tool of one server.
pub(super) struct McpTool {
    server: String,
    tool: String,
    definition: ToolDefinition,
    read_only: bool,
    destructive: bool,
    timeout: Duration,
    owner: mpsc::WeakSender<Cmd>,
}

impl McpTool {
    /// Most tools one server may offer.
    pub(super) const MAX_PER_SERVER: usize = 128;
}

/// A server's tools not offered (their own names), by why.
#[derive(Default)]
pub(super) struct LeftOut {
    /// Past the limits, or with a schema that cannot be used.
    pub(super) limits: Vec<String>,
    /// Not marked read-only (or marked destructive), in a session whose sandbox is read-only.
    pub(super) writes: Vec<String>,
}

impl LeftOut {
    fn is_empty(&self) -> bool {
        self.limits.is_empty() && self.writes.is_empty()
    }
}

/// The tools of `servers` (name, config, listed tools), in server then tool name order, the
/// resource tools last; and per server, the tools left out. A `read_only` session is offered
/// only the tools their server marks read-only and not destructive.
pub(super) fn build_tools<'a>(
    servers: impl Iterator<Item = (&'a str, &'a McpServerConfig, &'a [rmcp::model::Tool])>,
    read_only: bool,
    owner: &mpsc::WeakSender<Cmd>,
) -> (ToolRegistry, Vec<(String, LeftOut)>) {
    let mut registry = ToolRegistry::default();
    let mut taken = HashSet::new();
    let mut left_out = Vec::new();
    let mut any = false;
    for (server, config, listed) in servers {
        any = true;
        let mut tools: Vec<&rmcp::model::Tool> =
            listed.iter().filter(|t| config.offers(&t.name)).collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools.dedup_by(|a, b| a.name == b.name);
        let mut out = LeftOut::default();
        let mut offered = 0;
        let mut bytes = 0;
        for t in tools {
            let annotations = t.annotations.as_ref();
            let read_only_hint = annotations.and_then(|a| a.read_only_hint) == Some(true);
            let destructive = annotations.and_then(|a| a.destructive_hint) == Some(true);
            if read_only && (!read_only_hint || destructive) {
                out.writes.push(t.name.chars().take(128).collect());
                continue;
            }
            let schema = serde_json::Value::Object((*t.input_schema).clone());
            let size = schema.to_string().len();
            let cost = size
                + t.description
                    .as_deref()
                    .map_or(0, str::len)
                    .min(MAX_DESCRIPTION);
            let fits = offered < McpTool::MAX_PER_SERVER
                && size <= MAX_SCHEMA_BYTES
                && bytes + cost <= MAX_SERVER_BYTES;
            if !fits {
                out.limits.push(t.name.chars().take(128).collect());
                continue;
            }
            let name = tool_name(server, &t.name, &mut taken);
            let tool = McpTool {
                server: server.to_owned(),
                tool: t.name.to_string(),
                definition: ToolDefinition {
                    name,
                    description: t
                        .description
                        .as_deref()
                        .unwrap_or_default()
                        .chars()
                        .take(MAX_DESCRIPTION)
                        .collect(),
                    parameters: schema,
                },
                read_only: read_only_hint,
                destructive,
                timeout: Duration::from_secs(config.tool_timeout_secs()),
                owner: owner.clone(),
            };
            let origin = McpOrigin {
                server: server.to_owned(),
                tool: t.name.to_string(),
                read_only: tool.read_only,
                destructive: tool.destructive,
            };
            match registry.register_mcp(Arc::new(tool), origin) {
                Ok(()) => {
                    offered += 1;
                    bytes += cost;
                }
                Err(_) => out.limits.push(t.name.chars().take(128).collect()),
            }
        }
        if !out.is_empty() {
            left_out.push((server.to_owned(), out));
        }
    }
    if any {
        for tool in [
            Arc::new(ListResources(owner.clone())) as Arc<dyn Tool>,
            Arc::new(ReadResource(owner.clone())),
        ] {
            // Their schemas are ours and valid.
            let _ = registry.register(tool);
        }
    }
    (registry, left_out)
}

/// Sends `params` to `server` through the owner, within `timeout`, withdrawn when `ctx` is
/// cancelled; the result's JSON.
pub(super) async fn call(
    owner: &mpsc::WeakSender<Cmd>,
    server: &str,
    timeout: Duration,
    ctx: &ToolContext<'_>,
    request: impl FnOnce(
        rmcp::Peer<rmcp::service::RoleClient>,
    ) -> BoxFuture<'static, Result<serde_json::Value, ServiceError>>,
) -> Result<serde_json::Value, ToolError> {
    let started = std::time::Instant::now();
    let mcp = Mcp::upgrade(owner)
        .ok_or_else(|| ToolError("the session's MCP servers are stopped".into()))?;
    let (peer, generation) = tokio::select! {
        peer = mcp.peer(server) => peer.map_err(ToolError)?,
        () = ctx.cancel.cancelled() => return Err(ToolError("the call was withdrawn: the work was aborted".into())),
    };
    // Dropping the request (timeout, abort) sends the server `notifications/cancelled`.
    let sent = std::time::Instant::now();
    let result = tokio::select! {
        r = tokio::time::timeout(timeout, request(peer)) => r,
        () = ctx.cancel.cancelled() => return Err(ToolError("the call was cancelled: the work was aborted".into())),
    };
    // What the benchmark compares: the server's round trip and the whole call.
    tracing::debug!(
        server,
        request_us = sent.elapsed().as_micros() as u64,
        total_us = started.elapsed().as_micros() as u64,
        "MCP call"
    );
    match result {
        Err(_) => Err(ToolError(format!(
            "MCP server {server} did not answer within {} s (tool_timeout_secs); the call was cancelled",
            timeout.as_secs()
        ))),
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e @ (ServiceError::TransportClosed | ServiceError::TransportSend(_)))) => {
            let reason = format!("the server stopped answering ({e})");
            mcp.lost(server, generation, reason.clone());
            Err(ToolError(format!(
                "MCP server {server}: {reason}; it is started again on the next call"
            )))
        }
        Ok(Err(e)) => Err(ToolError(cap(format!("MCP server {server}: {e}")))),
    }
}

#[async_trait]
impl Tool for McpTool {
    fn definition(&self) -> ToolDefinition {
        self.definition.clone()
    }

    fn approval(&self, args: &serde_json::Value) -> Option<ApprovalSubject> {
        (!self.read_only || self.destructive).then(|| {
            ApprovalSubject::new(
                TargetKind::Command,
                vec![format!("{}/{}", self.server, self.tool)],
                format!(
                    "MCP server {} tool {}{}\narguments: {args}",
                    self.server,
                    self.tool,
                    if self.destructive {
                        " (the server says it may destroy data)"
                    } else {
                        ""
                    }
                ),
            )
        })
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let arguments = match args {
            serde_json::Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let name = self.tool.clone();
        let value = call(&self.owner, &self.server, self.timeout, ctx, |peer| {
            Box::pin(async move {
                let result = peer
                    .call_tool(CallToolRequestParams::new(name).with_arguments(arguments))
                    .await?;
                Ok(serde_json::to_value(result).unwrap_or_default())
            })
        })
        .await?;
        let converted = convert(&value, ctx.accepts_images);
        for image in converted.images {
            (ctx.attach_image)(image);
        }
        if value.get("isError").and_then(serde_json::Value::as_bool) == Some(true) {
            return Err(ToolError(converted.text));
        }
        Ok(converted.text)
    }
}
