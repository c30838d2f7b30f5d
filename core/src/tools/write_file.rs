//! `write_file`: writes a whole file, creating parent directories (spec 3.3).

use super::{
    ApprovalSubject, TargetKind, Tool, ToolContext, ToolDefinition, ToolError, diff_summary,
    parse_args,
};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use std::path::Path;

/// The `write_file` tool.
pub(crate) struct WriteFile;

#[derive(Deserialize)]
struct Args {
    file_path: String,
    content: String,
}

#[async_trait]
impl Tool for WriteFile {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "write_file".into(),
            description:
                "Write content to a file, replacing it if it exists. Creates the file and parent \
                directories if needed. Prefer editing tools for changes to existing files."
                    .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "description": "Path to the file, absolute or relative to the working directory."},
                    "content": {"type": "string", "description": "The full file content."}
                },
                "required": ["file_path", "content"],
                "additionalProperties": false
            }),
        }
    }

    fn approval(&self, args: &serde_json::Value) -> Option<ApprovalSubject> {
        let args: Args = serde_json::from_value(args.clone()).ok()?;
        let summary = diff_summary(&args.file_path, "", &args.content);
        Some(ApprovalSubject::new(
            TargetKind::Paths,
            vec![args.file_path],
            summary,
        ))
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        ctx.env
            .write_file(Path::new(&args.file_path), args.content.as_bytes())
            .await?;
        Ok(format!(
            "Wrote {} bytes to {}",
            args.content.len(),
            args.file_path
        ))
    }
}
