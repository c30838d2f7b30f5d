//! `grep` and `glob` (spec 3.3): thin tools over the environment's search, which uses
//! ripgrep's crates and respects .gitignore.

use super::schema::parameters;
use super::{OutputLimits, Tool, ToolContext, ToolDefinition, ToolError, parse_args};
use crate::exec::{GrepMode, GrepOptions};
use agentd_proto::BuiltinTool;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::PathBuf;

/// The `grep` tool. With `output_modes` (the Anthropic profile), the model may ask for
/// matching lines, matching files, or counts.
pub(crate) struct Grep {
    /// Whether the `output_mode` parameter is offered.
    pub(crate) output_modes: bool,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GrepArgs {
    /// Regular expression (ripgrep syntax).
    pattern: String,
    /// File or directory to search (default: the working directory).
    path: Option<String>,
    /// Only files matching this glob, e.g. "*.py" or "src/**/*.ts".
    glob_filter: Option<String>,
    /// Ignore case (default false).
    #[serde(default)]
    case_insensitive: bool,
    /// Most results to return (default 100).
    #[schemars(range(min = 1))]
    max_results: Option<usize>,
    /// content: matching lines (default); files_with_matches: file paths; count: matches per
    /// file.
    #[serde(default)]
    output_mode: OutputMode,
}

// What `grep` returns (offered with `output_modes`). Its variants have no doc comments: the
// field's description explains them, and the schema stays a plain `enum`.
#[derive(Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum OutputMode {
    #[default]
    Content,
    FilesWithMatches,
    Count,
}

#[async_trait]
impl Tool for Grep {
    fn definition(&self) -> ToolDefinition {
        let mut parameters = parameters::<GrepArgs>();
        if !self.output_modes
            && let Some(properties) = parameters["properties"].as_object_mut()
        {
            properties.remove("output_mode");
        }
        ToolDefinition {
            name: BuiltinTool::Grep.as_str().into(),
            description:
                "Search file contents with a regular expression. Respects .gitignore. Returns \
                `path:line:text` lines sorted by path."
                    .into(),
            parameters,
        }
    }

    fn output_limits(&self) -> OutputLimits {
        OutputLimits::tail(20_000).lines(200)
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let args: GrepArgs = parse_args(args)?;
        let mode = match args.output_mode {
            OutputMode::Content => GrepMode::Content,
            OutputMode::FilesWithMatches => GrepMode::FilesWithMatches,
            OutputMode::Count => GrepMode::Count,
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

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GlobArgs {
    /// Glob pattern, relative to path.
    pattern: String,
    /// Base directory (default: the working directory).
    path: Option<String>,
}

#[async_trait]
impl Tool for Glob {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: BuiltinTool::Glob.as_str().into(),
            description:
                "Find files whose path matches a glob pattern such as \"**/*.rs\" or \"src/*.ts\", \
                newest first. Respects .gitignore."
                    .into(),
            parameters: parameters::<GlobArgs>(),
        }
    }

    fn output_limits(&self) -> OutputLimits {
        OutputLimits::tail(20_000).lines(500)
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
