//! `apply_patch` (the OpenAI profile): the v4a patch format of the spec's appendix A. Add,
//! delete, update and move files in one patch; all of it applies or none of it does, and an
//! error names the file, the hunk and the lines that did not match.

use super::schema::parameters;
use super::{
    ApprovalSubject, OutputLimits, TargetKind, Tool, ToolContext, ToolDefinition, ToolError, fuzzy,
    parse_args,
};
use crate::exec::ExecutionEnvironment;
use agentd_proto::BuiltinTool;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The `apply_patch` tool.
pub(crate) struct ApplyPatch;

#[derive(Debug, Clone, PartialEq)]
enum Line {
    Context(String),
    Remove(String),
    Add(String),
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Hunk {
    hint: Option<String>,
    lines: Vec<Line>,
    eof: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Add {
        path: String,
        content: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

/// The files a v4a patch would change (a moved file's both names); none when it does not
/// parse, as the tool then changes nothing.
pub(crate) fn touched_paths(patch: &str) -> Vec<String> {
    parse(patch)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|op| match op {
            Op::Add { path, .. } | Op::Delete { path } => vec![path],
            Op::Update { path, move_to, .. } => std::iter::once(path).chain(move_to).collect(),
        })
        .collect()
}

/// Parses a v4a patch.
fn parse(patch: &str) -> Result<Vec<Op>, String> {
    let lines: Vec<&str> = patch.lines().map(|l| l.trim_end_matches('\r')).collect();
    let first = lines
        .iter()
        .position(|l| !l.trim().is_empty())
        .ok_or("the patch is empty")?;
    let last = lines
        .iter()
        .rposition(|l| !l.trim().is_empty())
        .unwrap_or(first);
    if lines[first].trim() != "*** Begin Patch" {
        return Err(format!(
            "line {}: a patch must start with \"*** Begin Patch\"",
            first + 1
        ));
    }
    if lines[last].trim() != "*** End Patch" || last == first {
        return Err(format!(
            "line {}: a patch must end with \"*** End Patch\"",
            last + 1
        ));
    }
    let mut ops = Vec::new();
    let mut i = first + 1;
    while i < last {
        let line = lines[i];
        let header = |prefix: &str| line.strip_prefix(prefix).map(|p| p.trim().to_owned());
        if let Some(path) = header("*** Add File: ") {
            i += 1;
            let mut content = String::new();
            while i < last && !lines[i].starts_with("*** ") {
                let Some(text) = lines[i].strip_prefix('+') else {
                    return Err(format!(
                        "line {}: in \"Add File: {path}\" every line must start with '+'",
                        i + 1
                    ));
                };
                content.push_str(text);
                content.push('\n');
                i += 1;
            }
            ops.push(Op::Add { path, content });
        } else if let Some(path) = header("*** Delete File: ") {
            ops.push(Op::Delete { path });
            i += 1;
        } else if let Some(path) = header("*** Update File: ") {
            i += 1;
            let mut move_to = None;
            if let Some(to) = lines.get(i).and_then(|l| l.strip_prefix("*** Move to: ")) {
                move_to = Some(to.trim().to_owned());
                i += 1;
            }
            let mut hunks: Vec<Hunk> = Vec::new();
            while i < last && (!lines[i].starts_with("*** ") || lines[i] == "*** End of File") {
                let l = lines[i];
                if let Some(rest) = l.strip_prefix("@@") {
                    let hint = rest.trim();
                    hunks.push(Hunk {
                        hint: (!hint.is_empty()).then(|| hint.to_owned()),
                        ..Hunk::default()
                    });
                } else if l == "*** End of File" {
                    match hunks.last_mut() {
                        Some(h) => h.eof = true,
                        None => {
                            return Err(format!(
                                "line {}: \"*** End of File\" before any hunk",
                                i + 1
                            ));
                        }
                    }
                } else {
                    if hunks.is_empty() {
                        hunks.push(Hunk::default());
                    }
                    let parsed = match l.chars().next() {
                        Some(' ') => Line::Context(l[1..].to_owned()),
                        Some('-') => Line::Remove(l[1..].to_owned()),
                        Some('+') => Line::Add(l[1..].to_owned()),
                        // Models often drop the space of an empty context line.
                        None => Line::Context(String::new()),
                        Some(_) => {
                            return Err(format!(
                                "line {}: in \"Update File: {path}\" a hunk line must start with ' ', '-' or '+': {l:?}",
                                i + 1
                            ));
                        }
                    };
                    if let Some(h) = hunks.last_mut() {
                        h.lines.push(parsed);
                    }
                }
                i += 1;
            }
            if hunks.iter().all(|h| h.lines.is_empty()) && move_to.is_none() {
                return Err(format!("\"Update File: {path}\" has no changes"));
            }
            ops.push(Op::Update {
                path,
                move_to,
                hunks,
            });
        } else if line.trim().is_empty() {
            i += 1;
        } else {
            return Err(format!(
                "line {}: expected \"*** Add File:\", \"*** Delete File:\" or \"*** Update File:\", found {line:?}",
                i + 1
            ));
        }
    }
    if ops.is_empty() {
        return Err("the patch contains no operations".into());
    }
    Ok(ops)
}

/// One way of comparing a file line with a patch line.
type LineEq<'a> = &'a dyn Fn(&str, &str) -> bool;

/// Where `old` occurs in `lines` at or after `from` (or only at the end, with `eof`), trying
/// exact, whitespace-tolerant and then fuzzy comparison.
fn find(lines: &[String], old: &[&str], from: usize, eof: bool) -> Option<usize> {
    if old.len() > lines.len() {
        return None;
    }
    let last_start = lines.len() - old.len();
    let starts: Vec<usize> = if eof {
        vec![last_start]
    } else {
        (from.min(last_start + 1)..=last_start).collect()
    };
    let comparisons: [LineEq; 4] = [
        &|a, b| a == b,
        &|a, b| a.trim_end() == b.trim_end(),
        &|a, b| a.trim() == b.trim(),
        &|a, b| fuzzy::lines_equal(a, b),
    ];
    comparisons.iter().find_map(|eq| {
        starts
            .iter()
            .copied()
            .find(|&s| old.iter().enumerate().all(|(k, o)| eq(&lines[s + k], o)))
    })
}

/// Applies `hunks` to `text`.
fn apply_hunks(text: &str, hunks: &[Hunk], path: &str) -> Result<String, String> {
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut cursor = 0;
    for (n, hunk) in hunks
        .iter()
        .enumerate()
        .filter(|(_, h)| !h.lines.is_empty())
    {
        let old: Vec<&str> = hunk
            .lines
            .iter()
            .filter_map(|l| match l {
                Line::Context(s) | Line::Remove(s) => Some(s.as_str()),
                Line::Add(_) => None,
            })
            .collect();

        let after_hint = hunk.hint.as_ref().and_then(|hint| {
            (cursor..lines.len())
                .find(|&i| lines[i].trim() == hint.trim() || fuzzy::lines_equal(&lines[i], hint))
                .map(|i| i + 1)
        });
        let pos = if old.is_empty() {
            if hunk.eof || hunk.hint.is_none() {
                Some(lines.len())
            } else {
                after_hint
            }
        } else {
            after_hint
                .and_then(|from| find(&lines, &old, from, hunk.eof))
                .or_else(|| find(&lines, &old, cursor, hunk.eof))
                .or_else(|| find(&lines, &old, 0, hunk.eof))
        };
        let Some(pos) = pos else {
            let hint = hunk
                .hint
                .as_ref()
                .map(|h| format!(" after \"@@ {h}\""))
                .unwrap_or_default();
            let expected: Vec<String> = old.iter().map(|l| format!("    {l}")).collect();
            let why = if old.is_empty() {
                format!(
                    "the context hint \"@@ {}\" is not in the file",
                    hunk.hint.as_deref().unwrap_or("")
                )
            } else {
                format!(
                    "these lines are not in the file{hint}:\n{}",
                    expected.join("\n")
                )
            };
            return Err(format!(
                "hunk {} of {path} does not apply: {why}\nRead the file and make the context lines match it exactly.",
                n + 1
            ));
        };
        // Context lines keep the file's own text (they may have matched only loosely).
        let mut original = lines[pos..pos + old.len()].iter();
        let mut new = Vec::with_capacity(hunk.lines.len());
        for line in &hunk.lines {
            match line {
                Line::Context(s) => new.push(original.next().cloned().unwrap_or_else(|| s.clone())),
                Line::Remove(_) => {
                    original.next();
                }
                Line::Add(s) => new.push(s.clone()),
            }
        }
        let replaced = new.len();
        lines.splice(pos..pos + old.len(), new);
        cursor = pos + replaced;
    }
    let mut out = lines.join(newline);
    if !out.is_empty() || !text.is_empty() {
        out.push_str(newline);
    }
    Ok(out)
}

/// One file change, computed before anything is written.
struct Change {
    path: PathBuf,
    content: Option<String>,
}

async fn plan(
    env: &dyn ExecutionEnvironment,
    ops: &[Op],
) -> Result<(Vec<Change>, Vec<String>), String> {
    let mut changes = Vec::new();
    let mut summary = Vec::new();
    for op in ops {
        match op {
            Op::Add { path, content } => {
                if env.file_exists(Path::new(path)).await {
                    return Err(format!(
                        "Add File {path}: the file already exists; use \"*** Update File:\" to change it"
                    ));
                }
                changes.push(Change {
                    path: path.into(),
                    content: Some(content.clone()),
                });
                summary.push(format!("A {path}"));
            }
            Op::Delete { path } => {
                if !env.file_exists(Path::new(path)).await {
                    return Err(format!("Delete File {path}: the file does not exist"));
                }
                changes.push(Change {
                    path: path.into(),
                    content: None,
                });
                summary.push(format!("D {path}"));
            }
            Op::Update {
                path,
                move_to,
                hunks,
            } => {
                let bytes = env
                    .read_file(Path::new(path))
                    .await
                    .map_err(|e| format!("Update File {path}: {e}"))?;
                let text = String::from_utf8(bytes)
                    .map_err(|_| format!("Update File {path}: not a UTF-8 text file"))?;
                let updated = apply_hunks(&text, hunks, path)?;
                match move_to {
                    Some(to) => {
                        changes.push(Change {
                            path: to.into(),
                            content: Some(updated),
                        });
                        changes.push(Change {
                            path: path.into(),
                            content: None,
                        });
                        summary.push(format!("M {to} (moved from {path})"));
                    }
                    None => {
                        changes.push(Change {
                            path: path.into(),
                            content: Some(updated),
                        });
                        summary.push(format!("M {path}"));
                    }
                }
            }
        }
    }
    Ok((changes, summary))
}

async fn write(
    env: &dyn ExecutionEnvironment,
    path: &Path,
    content: Option<&[u8]>,
) -> Result<(), crate::exec::Error> {
    match content {
        Some(c) => env.write_file(path, c).await,
        None => env.remove_file(path).await,
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The whole patch, from *** Begin Patch to *** End Patch.
    patch: String,
}

#[async_trait]
impl Tool for ApplyPatch {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: BuiltinTool::ApplyPatch.as_str().into(),
            description: "Create, delete, update and move files with a patch in the v4a format:\n\
                *** Begin Patch\n*** Add File: path\n+line\n*** Delete File: path\n*** Update File: path\n\
                *** Move to: new/path (optional)\n@@ a line near the change (optional hint)\n context line\n-removed line\n\
                +added line\n*** End of File (optional: the hunk ends the file)\n*** End Patch\n\
                Show about 3 lines of context around each change; several @@ hunks per file are allowed. Paths are \
                relative to the working directory. All changes apply or none do."
                .into(),
            parameters: parameters::<Args>(),
        }
    }

    fn approval(&self, args: &serde_json::Value) -> Option<ApprovalSubject> {
        let patch = args.get("patch")?.as_str()?;
        // A patch that does not parse writes nothing, but it still asks: the rules see no
        // paths, so only a bare `apply_patch` rule decides it.
        let targets = parse(patch)
            .map(|ops| {
                ops.iter()
                    .flat_map(|op| match op {
                        Op::Add { path, .. } | Op::Delete { path } => vec![path.clone()],
                        Op::Update { path, move_to, .. } => std::iter::once(path.clone())
                            .chain(move_to.clone())
                            .collect(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(ApprovalSubject::new(
            TargetKind::Paths,
            targets,
            patch.trim().to_owned(),
        ))
    }

    fn output_limits(&self) -> OutputLimits {
        OutputLimits::tail(10_000)
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let ops = parse(&args.patch).map_err(|e| ToolError(format!("invalid patch: {e}")))?;
        let (changes, summary) = plan(ctx.env, &ops).await.map_err(ToolError)?;
        // Keep what each touched path held, to put it back if a later write fails. A path
        // that exists but cannot be read (too big, not a regular file, agentd's own) could
        // not be put back, so nothing is changed.
        let mut originals = Vec::new();
        for change in &changes {
            originals.push(match ctx.env.read_file(&change.path).await {
                Ok(bytes) => Some(bytes),
                Err(crate::exec::Error::NotFound(_)) => None,
                Err(e) => {
                    return Err(ToolError(format!(
                        "{}: {e}; no file was changed",
                        change.path.display()
                    )));
                }
            });
        }
        for (done, change) in changes.iter().enumerate() {
            if let Err(e) = write(
                ctx.env,
                &change.path,
                change.content.as_deref().map(str::as_bytes),
            )
            .await
            {
                for (undo, original) in changes[..done].iter().zip(&originals).rev() {
                    let _ = write(ctx.env, &undo.path, original.as_deref()).await;
                }
                return Err(ToolError(format!(
                    "{}: {e}; no file was changed",
                    change.path.display()
                )));
            }
        }
        Ok(format!(
            "Success. Updated the following files:\n{}",
            summary.join("\n")
        ))
    }
}

#[cfg(test)]
mod tests;
