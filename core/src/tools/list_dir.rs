//! `list_dir`: a directory's entries down to a depth (gemini-cli's `list_directory`).

use super::schema::parameters;
use super::{OutputLimits, Tool, ToolContext, ToolDefinition, ToolError, parse_args};
use agentd_proto::BuiltinTool;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::Path;

/// The `list_dir` tool.
pub(crate) struct ListDir;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Directory (default: the working directory).
    path: Option<String>,
    /// How many levels to list (default 1).
    #[schemars(range(min = 1, max = 10))]
    depth: Option<usize>,
}

#[async_trait]
impl Tool for ListDir {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: BuiltinTool::ListDir.as_str().into(),
            description:
                "List the files and directories in a directory, down to a depth (default 1). \
                Directories end with /; files show their size."
                    .into(),
            parameters: parameters::<Args>(),
        }
    }

    fn output_limits(&self) -> OutputLimits {
        OutputLimits::tail(20_000)
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
