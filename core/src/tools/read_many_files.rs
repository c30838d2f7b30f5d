//! `read_many_files` (the Gemini profile): several files, or glob patterns, in one call.

use super::read_file::number_lines;
use super::{Tool, ToolContext, ToolDefinition, ToolError, parse_args};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use std::path::Path;

/// The `read_many_files` tool.
pub(crate) struct ReadManyFiles;

/// Files read at most per call.
const MAX_FILES: usize = 50;

#[derive(Deserialize)]
struct Args {
    paths: Vec<String>,
}

#[async_trait]
impl Tool for ReadManyFiles {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "read_many_files".into(),
            description: "Read several files at once. Each entry is a path or a glob pattern (e.g. \"src/**/*.py\"). \
                Each file is shown with its path and numbered lines; binary files are skipped."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "paths": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                              "description": "Paths or glob patterns, relative to the working directory."}
                },
                "required": ["paths"],
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
        let mut files = Vec::new();
        for entry in &args.paths {
            if entry.contains(['*', '?', '[']) {
                files.extend(ctx.env.glob(entry, Path::new(".")).await?);
            } else {
                files.push(entry.clone());
            }
        }
        files.dedup();
        let mut out = String::new();
        let mut skipped = Vec::new();
        for file in files.iter().take(MAX_FILES) {
            match ctx.env.read_file(Path::new(file)).await {
                Ok(bytes) if bytes[..bytes.len().min(8192)].contains(&0) => {
                    skipped.push(format!("{file} (binary)"))
                }
                Ok(bytes) => out.push_str(&format!(
                    "--- {file} ---\n{}\n",
                    number_lines(&String::from_utf8_lossy(&bytes), 1, usize::MAX)
                )),
                Err(e) => skipped.push(format!("{file} ({e})")),
            }
        }
        if files.len() > MAX_FILES {
            skipped.push(format!(
                "{} more files (at most {MAX_FILES} per call)",
                files.len() - MAX_FILES
            ));
        }
        if !skipped.is_empty() {
            out.push_str(&format!("Skipped: {}\n", skipped.join("; ")));
        }
        if out.is_empty() {
            return Err(ToolError("no files matched".into()));
        }
        Ok(out)
    }
}
