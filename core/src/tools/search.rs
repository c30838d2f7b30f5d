//! `grep` and `glob` (spec 3.3): thin tools over the environment's search, which uses
//! ripgrep's crates and respects .gitignore.

use super::{Tool, ToolContext, ToolDefinition, ToolError, parse_args};
use crate::exec::{GrepMode, GrepOptions};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use std::path::PathBuf;

/// The `grep` tool. With `output_modes` (the Anthropic profile), the model may ask for
/// matching lines, matching files, or counts.
pub(crate) struct Grep {
    /// Whether the `output_mode` parameter is offered.
    pub(crate) output_modes: bool,
}

#[derive(Deserialize)]
struct GrepArgs {
    pattern: String,
    path: Option<String>,
    glob_filter: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
    max_results: Option<usize>,
    output_mode: Option<String>,
}

#[async_trait]
impl Tool for Grep {
    fn definition(&self) -> ToolDefinition {
        let mut parameters = json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression (ripgrep syntax)."},
                "path": {"type": "string", "description": "File or directory to search (default: the working directory)."},
                "glob_filter": {"type": "string", "description": "Only files matching this glob, e.g. \"*.py\" or \"src/**/*.ts\"."},
                "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)."},
                "max_results": {"type": "integer", "minimum": 1, "description": "Most results to return (default 100)."}
            },
            "required": ["pattern"],
            "additionalProperties": false
        });
        if self.output_modes {
            parameters["properties"]["output_mode"] = json!({
                "type": "string", "enum": ["content", "files_with_matches", "count"],
                "description": "content: matching lines (default); files_with_matches: file paths; count: matches per file."
            });
        }
        ToolDefinition {
            name: "grep".into(),
            description:
                "Search file contents with a regular expression. Respects .gitignore. Returns \
                `path:line:text` lines sorted by path."
                    .into(),
            parameters,
        }
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let args: GrepArgs = parse_args(args)?;
        let mode = match args.output_mode.as_deref() {
            None | Some("content") => GrepMode::Content,
            Some("files_with_matches") => GrepMode::FilesWithMatches,
            Some("count") => GrepMode::Count,
            Some(other) => return Err(ToolError(format!("unknown output_mode {other:?}"))),
        };
        let options = GrepOptions {
            pattern: args.pattern,
            path: PathBuf::from(args.path.unwrap_or_else(|| ".".into())),
            glob: args.glob_filter,
            case_insensitive: args.case_insensitive,
            max_results: args.max_results.unwrap_or(100),
            mode,
        };
        Ok(ctx.env.grep(options).await?)
    }
}

/// The `glob` tool.
pub(crate) struct Glob;

#[derive(Deserialize)]
struct GlobArgs {
    pattern: String,
    path: Option<String>,
}

#[async_trait]
impl Tool for Glob {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "glob".into(),
            description:
                "Find files whose path matches a glob pattern such as \"**/*.rs\" or \"src/*.ts\", \
                newest first. Respects .gitignore."
                    .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob pattern, relative to path."},
                    "path": {"type": "string", "description": "Base directory (default: the working directory)."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        }
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let args: GlobArgs = parse_args(args)?;
        let base = PathBuf::from(args.path.unwrap_or_else(|| ".".into()));
        let files = ctx.env.glob(&args.pattern, &base).await?;
        if files.is_empty() {
            return Ok(format!("No files match {:?}.", args.pattern));
        }
        Ok(files.join("\n"))
    }
}
