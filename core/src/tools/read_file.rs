//! `read_file`: a file's lines, numbered, with offset and limit (spec 3.3).

use super::{Tool, ToolContext, ToolDefinition, ToolError, parse_args};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use std::path::Path;

/// The `read_file` tool.
pub(crate) struct ReadFile;

const DEFAULT_LIMIT: usize = 2000;

#[derive(Deserialize)]
struct Args {
    file_path: String,
    offset: Option<usize>,
    limit: Option<usize>,
}

#[async_trait]
impl Tool for ReadFile {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "read_file".into(),
            description: "Read a file from the filesystem. Returns line-numbered content as \
                `NNN | line`. Use offset and limit to read part of a large file."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string",
                        "description": "Path to the file, absolute or relative to the working directory."},
                    "offset": {"type": "integer", "minimum": 1,
                        "description": "1-based line number to start reading from."},
                    "limit": {"type": "integer", "minimum": 1,
                        "description": "Most lines to read (default 2000)."}
                },
                "required": ["file_path"],
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
        let bytes = ctx.env.read_file(Path::new(&args.file_path)).await?;
        if let Some(media_type) = image_type(&args.file_path) {
            return attach_image(&args.file_path, media_type, &bytes, ctx);
        }
        if bytes[..bytes.len().min(8192)].contains(&0) {
            return Err(ToolError(format!(
                "{} is a binary file; read_file only reads text",
                args.file_path
            )));
        }
        let text = String::from_utf8_lossy(&bytes);
        Ok(number_lines(
            &text,
            args.offset.unwrap_or(1),
            args.limit.unwrap_or(DEFAULT_LIMIT),
        ))
    }
}

fn image_type(path: &str) -> Option<&'static str> {
    let ext = Path::new(path).extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => return None,
    })
}

/// Largest image sent to a model.
const MAX_IMAGE: usize = 5 * 1024 * 1024;

fn attach_image(
    path: &str,
    media_type: &str,
    bytes: &[u8],
    ctx: &ToolContext<'_>,
) -> Result<String, ToolError> {
    use base64::Engine;
    if !ctx.accepts_images {
        return Err(ToolError(format!(
            "{path} is an image, and the current model does not take images"
        )));
    }
    if bytes.len() > MAX_IMAGE {
        return Err(ToolError(format!(
            "{path} is a {} byte image; at most {MAX_IMAGE} bytes are sent to the model",
            bytes.len()
        )));
    }
    (ctx.attach_image)(agentd_proto::ImageData {
        media_type: media_type.into(),
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
    });
    Ok(format!(
        "Image {path} ({media_type}, {} bytes) is attached.",
        bytes.len()
    ))
}

pub(super) fn number_lines(text: &str, offset: usize, limit: usize) -> String {
    let total = text.lines().count();
    if total == 0 {
        return "(empty file)".into();
    }
    if offset > total {
        return format!("(offset {offset} is past the end: the file has {total} lines)");
    }
    let last = (offset - 1 + limit).min(total);
    let width = last.to_string().len().max(3);
    let mut out = String::with_capacity(text.len().min(1 << 20));
    for (i, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
        out.push_str(&format!("{:>width$} | {}\n", i + 1, line));
    }
    if last < total {
        out.push_str(&format!(
            "({} more lines; continue with offset {})\n",
            total - last,
            last + 1
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::number_lines;

    #[test]
    fn numbers_lines_from_offset() {
        assert_eq!(
            number_lines("a\nb\nc\n", 2, 1),
            "  2 | b\n(1 more lines; continue with offset 3)\n"
        );
        assert_eq!(number_lines("a\nb", 1, 10), "  1 | a\n  2 | b\n");
        assert_eq!(number_lines("", 1, 10), "(empty file)");
        assert!(number_lines("a", 5, 1).contains("past the end"));
    }
}
