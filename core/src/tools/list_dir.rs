//! `list_dir`: a directory's entries down to a depth (gemini-cli's `list_directory`).

use super::{Tool, ToolContext, ToolDefinition, ToolError, parse_args};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use std::path::Path;

/// The `list_dir` tool.
pub(crate) struct ListDir;

#[derive(Deserialize)]
struct Args {
    path: Option<String>,
    depth: Option<usize>,
}

#[async_trait]
impl Tool for ListDir {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "list_dir".into(),
            description:
                "List the files and directories in a directory, down to a depth (default 1). \
                Directories end with /; files show their size."
                    .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory (default: the working directory)."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": 10, "description": "How many levels to list (default 1)."}
                },
                "additionalProperties": false
            }),
        }
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let path = args.path.unwrap_or_else(|| ".".into());
        let entries = ctx
            .env
            .list_directory(Path::new(&path), args.depth.unwrap_or(1))
            .await?;
        if entries.is_empty() {
            return Ok(format!("{path} is empty"));
        }
        Ok(entries
            .iter()
            .map(|e| match (e.is_dir, e.size) {
                (true, _) => format!("{}/", e.name),
                (false, Some(size)) => format!("{} ({size} bytes)", e.name),
                (false, None) => e.name.clone(),
            })
            .collect::<Vec<_>>()
            .join("\n"))
    }
}
