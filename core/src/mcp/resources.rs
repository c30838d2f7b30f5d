//! The resource tools (as codex offers them): `list_mcp_resources` lists what the session's
//! servers offer, `read_mcp_resource` reads one. Both only read.

use super::content::cap;
use super::owner::Cmd;
use super::tool::call;
use crate::tools::{Tool, ToolContext, ToolDefinition, ToolError, parse_args};
use async_trait::async_trait;
use rmcp::model::ReadResourceRequestParams;
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::mpsc;

/// How long a resource listing or read may take.
const TIMEOUT: Duration = Duration::from_secs(60);
/// Most resources one listing reports.
const MAX_LISTED: usize = 1000;

pub(super) struct ListResources(pub(super) mpsc::WeakSender<Cmd>);
pub(super) struct ReadResource(pub(super) mpsc::WeakSender<Cmd>);

#[derive(Deserialize)]
struct ListArgs {
    server: String,
}

#[derive(Deserialize)]
struct ReadArgs {
    server: String,
    uri: String,
}

#[async_trait]
impl Tool for ListResources {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "list_mcp_resources".into(),
            description: "Lists the resources (files, records, documents) an MCP server of this session offers: URI, name, type and description of each. Read one with read_mcp_resource.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"server": {"type": "string", "description": "The MCP server's name (the SERVER of its mcp__SERVER__TOOL tools)."}},
                "required": ["server"]
            }),
        }
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<String, ToolError> {
        let args: ListArgs = parse_args(args)?;
        let value = call(&self.0, &args.server, TIMEOUT, ctx, |peer| {
            Box::pin(async move {
                let list = peer.list_resources(None).await?;
                Ok(serde_json::to_value(list).unwrap_or_default())
            })
        })
        .await?;
        let resources = value
            .get("resources")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if resources.is_empty() {
            return Ok(format!("MCP server {} lists no resources.", args.server));
        }
        let lines: Vec<String> = resources
            .iter()
            .take(MAX_LISTED)
            .map(|r| {
                let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
                format!(
                    "{} ({}){}{}",
                    s("uri"),
                    s("name"),
                    if s("mimeType").is_empty() {
                        String::new()
                    } else {
                        format!(" [{}]", s("mimeType"))
                    },
                    if s("description").is_empty() {
                        String::new()
                    } else {
                        format!(": {}", s("description"))
                    }
                )
            })
            .collect();
        Ok(cap(lines.join("\n")))
    }
}

#[async_trait]
impl Tool for ReadResource {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "read_mcp_resource".into(),
            description: "Reads one resource of an MCP server of this session by its URI (see list_mcp_resources).".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "The MCP server's name."},
                    "uri": {"type": "string", "description": "The resource's URI."}
                },
                "required": ["server", "uri"]
            }),
        }
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<String, ToolError> {
        let args: ReadArgs = parse_args(args)?;
        let uri = args.uri.clone();
        let value = call(&self.0, &args.server, TIMEOUT, ctx, |peer| {
            Box::pin(async move {
                let read = peer
                    .read_resource(ReadResourceRequestParams::new(uri))
                    .await?;
                Ok(serde_json::to_value(read).unwrap_or_default())
            })
        })
        .await?;
        let parts: Vec<String> = value
            .get("contents")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|c| match c.get("text").and_then(Value::as_str) {
                Some(text) => text.to_owned(),
                None => format!(
                    "[binary {} not shown]",
                    c.get("mimeType").and_then(Value::as_str).unwrap_or("data")
                ),
            })
            .collect();
        Ok(cap(parts.join("\n")))
    }
}
