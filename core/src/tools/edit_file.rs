//! `edit_file`: replaces an exact string (spec 3.3), falling back to a fuzzy match that
//! tolerates whitespace and Unicode punctuation drift, and says when it did.

use super::{
    ApprovalSubject, TargetKind, Tool, ToolContext, ToolDefinition, ToolError, diff_summary, fuzzy,
    parse_args,
};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use std::path::Path;

/// The `edit_file` tool.
pub(crate) struct EditFile;

#[derive(Deserialize)]
struct Args {
    file_path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

/// Applies one edit to `text`; returns the new text and a report for the model.
pub(super) fn edit(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<(String, String), String> {
    if old.is_empty() {
        return Err("old_string is empty; use write_file to create or replace a whole file".into());
    }
    if old == new {
        return Err("old_string and new_string are the same; nothing to change".into());
    }
    let exact = text.matches(old).count();
    if exact == 1 || (exact > 1 && replace_all) {
        let out = if replace_all {
            text.replace(old, new)
        } else {
            text.replacen(old, new, 1)
        };
        return Ok((
            out,
            format!(
                "Replaced {exact} occurrence{}",
                if exact == 1 { "" } else { "s" }
            ),
        ));
    }
    if exact > 1 {
        return Err(format!(
            "old_string matches {exact} locations; include more surrounding lines to make it unique, or set replace_all to true"
        ));
    }
    let fuzzy = fuzzy::find_all(text, old);
    match fuzzy.as_slice() {
        [] => Err(
            "old_string was not found in the file (not even ignoring whitespace and quote style); \
                   read the file again and copy the text exactly"
                .into(),
        ),
        [(a, b)] | [(a, b), ..] if fuzzy.len() == 1 || replace_all => {
            let mut out = String::with_capacity(text.len());
            let mut last = 0;
            for (start, end) in if replace_all {
                fuzzy.clone()
            } else {
                vec![(*a, *b)]
            } {
                out.push_str(&text[last..start]);
                out.push_str(new);
                last = end;
            }
            out.push_str(&text[last..]);
            let shown: String = text[*a..*b].chars().take(200).collect();
            Ok((
                out,
                format!(
                    "Replaced {} occurrence{} using a fuzzy match (whitespace/punctuation differed); the matched text was:\n{shown}",
                    if replace_all { fuzzy.len() } else { 1 },
                    if replace_all && fuzzy.len() > 1 {
                        "s"
                    } else {
                        ""
                    }
                ),
            ))
        }
        _ => Err(format!(
            "old_string matches {} locations once whitespace is ignored; include more surrounding lines to make it unique",
            fuzzy.len()
        )),
    }
}

#[async_trait]
impl Tool for EditFile {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "edit_file".into(),
            description: "Replace an exact string in a file. old_string must match the file's text exactly \
                (including indentation) and be unique in the file unless replace_all is true; include enough \
                surrounding lines to make it unique. Read the file first."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "file_path": {"type": "string", "description": "Path to the file."},
                    "old_string": {"type": "string", "description": "The exact text to replace."},
                    "new_string": {"type": "string", "description": "The replacement text."},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
                },
                "required": ["file_path", "old_string", "new_string"],
                "additionalProperties": false
            }),
        }
    }

    fn approval(&self, args: &serde_json::Value) -> Option<ApprovalSubject> {
        let args: Args = serde_json::from_value(args.clone()).ok()?;
        let summary = diff_summary(&args.file_path, &args.old_string, &args.new_string);
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
        let path = Path::new(&args.file_path);
        let bytes = ctx.env.read_file(path).await?;
        let text = String::from_utf8(bytes)
            .map_err(|_| ToolError(format!("{} is not a UTF-8 text file", args.file_path)))?;
        let (updated, report) =
            edit(&text, &args.old_string, &args.new_string, args.replace_all).map_err(ToolError)?;
        ctx.env.write_file(path, updated.as_bytes()).await?;
        Ok(format!("{report} in {}", args.file_path))
    }
}

#[cfg(test)]
mod tests {
    use super::edit;

    #[test]
    fn exact_unique_many_and_missing() {
        assert_eq!(edit("a b a", "b", "c", false).unwrap().0, "a c a");
        assert!(
            edit("a b a", "a", "c", false)
                .unwrap_err()
                .starts_with("old_string matches 2 locations")
        );
        assert_eq!(
            edit("a b a", "a", "c", true).unwrap(),
            ("c b c".into(), "Replaced 2 occurrences".into())
        );
        assert!(
            edit("abc", "x", "y", false)
                .unwrap_err()
                .starts_with("old_string was not found")
        );
        assert!(edit("abc", "", "y", false).is_err());
        assert!(edit("abc", "b", "b", false).is_err());
    }

    #[test]
    fn fuzzy_match_is_reported() {
        let text = "fn main() {\n    println!(\u{201C}hi\u{201D});\n}\n";
        let (out, report) = edit(text, "println!(\"hi\");", "println!(\"bye\");", false).unwrap();
        assert_eq!(out, "fn main() {\n    println!(\"bye\");\n}\n");
        assert!(report.contains("fuzzy match"), "{report}");
        assert!(
            report.ends_with("println!(\u{201C}hi\u{201D});"),
            "{report}"
        );
    }
}
