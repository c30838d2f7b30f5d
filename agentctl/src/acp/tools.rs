//! How agentd's tool calls look in an editor: each call's ACP `kind`, title, file locations and,
//! for the tools that change files, the `diff` content (path, old and new text) the editor
//! renders. It reads the arguments the model sent, by tool name; a tool it does not know is
//! `other` with its raw arguments, so new tools still show up.

use agent_client_protocol::v1::schema as acp;
use agentd_proto::BuiltinTool;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// What the editor is shown when a call starts.
pub(super) struct Shown {
    pub(super) title: String,
    pub(super) kind: acp::ToolKind,
    pub(super) locations: Vec<acp::ToolCallLocation>,
    /// The change the call makes, for edits and patches.
    pub(super) diffs: Vec<acp::Diff>,
}

fn str_arg<'a>(arguments: &'a Value, key: &str) -> Option<&'a str> {
    arguments.get(key).and_then(Value::as_str)
}

/// `path` made absolute against the session's directory (ACP paths are always absolute).
fn absolute(cwd: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_owned()
    } else {
        cwd.join(path)
    }
}

/// The kind, title, locations and diffs of a call to `tool` with `arguments`.
pub(super) fn show(cwd: &Path, tool: &str, arguments: &Value) -> Shown {
    let path = |key: &str| str_arg(arguments, key).map(|p| absolute(cwd, p));
    let at = |p: &Option<PathBuf>| p.iter().map(acp::ToolCallLocation::new).collect::<Vec<_>>();
    let named = |verb: &str, p: &Option<PathBuf>| match p {
        Some(p) => format!("{verb} {}", p.display()),
        None => verb.to_owned(),
    };
    match tool.parse::<BuiltinTool>() {
        Ok(BuiltinTool::ReadFile) => {
            let p = path("file_path");
            let line = arguments
                .get("offset")
                .and_then(Value::as_u64)
                .and_then(|l| u32::try_from(l).ok());
            Shown {
                title: named("Read", &p),
                kind: acp::ToolKind::Read,
                locations: p
                    .iter()
                    .map(|p| acp::ToolCallLocation::new(p).line(line))
                    .collect(),
                diffs: Vec::new(),
            }
        }
        Ok(BuiltinTool::ReadManyFiles) => {
            let paths: Vec<PathBuf> = arguments
                .get("paths")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|p| absolute(cwd, p))
                .collect();
            Shown {
                title: format!("Read {} files", paths.len()),
                kind: acp::ToolKind::Read,
                locations: paths.iter().map(acp::ToolCallLocation::new).collect(),
                diffs: Vec::new(),
            }
        }
        Ok(BuiltinTool::ListDir) => {
            let p = path("path").or_else(|| Some(cwd.to_owned()));
            Shown {
                title: named("List", &p),
                kind: acp::ToolKind::Read,
                locations: at(&p),
                diffs: Vec::new(),
            }
        }
        Ok(BuiltinTool::EditFile) => {
            let p = path("file_path");
            let diffs = p
                .iter()
                .map(|p| {
                    acp::Diff::new(p, str_arg(arguments, "new_string").unwrap_or_default())
                        .old_text(str_arg(arguments, "old_string").map(str::to_owned))
                })
                .collect();
            Shown {
                title: named("Edit", &p),
                kind: acp::ToolKind::Edit,
                locations: at(&p),
                diffs,
            }
        }
        Ok(BuiltinTool::WriteFile) => {
            let p = path("file_path");
            let diffs = p
                .iter()
                .map(|p| acp::Diff::new(p, str_arg(arguments, "content").unwrap_or_default()))
                .collect();
            Shown {
                title: named("Write", &p),
                kind: acp::ToolKind::Edit,
                locations: at(&p),
                diffs,
            }
        }
        Ok(BuiltinTool::ApplyPatch) => {
            let diffs = patch_diffs(cwd, str_arg(arguments, "patch").unwrap_or_default());
            let title = match diffs.as_slice() {
                [one] => format!("Patch {}", one.path.display()),
                many => format!("Patch {} files", many.len()),
            };
            Shown {
                title,
                kind: acp::ToolKind::Edit,
                locations: diffs
                    .iter()
                    .map(|d| acp::ToolCallLocation::new(&d.path))
                    .collect(),
                diffs,
            }
        }
        Ok(BuiltinTool::Shell) => Shown {
            title: str_arg(arguments, "command").map_or_else(|| "Run".to_owned(), first_line),
            kind: acp::ToolKind::Execute,
            locations: Vec::new(),
            diffs: Vec::new(),
        },
        Ok(BuiltinTool::Grep | BuiltinTool::Glob) => {
            let p = path("path").or_else(|| Some(cwd.to_owned()));
            let pattern = str_arg(arguments, "pattern").unwrap_or_default();
            Shown {
                title: format!("{tool} {pattern}"),
                kind: acp::ToolKind::Search,
                locations: at(&p),
                diffs: Vec::new(),
            }
        }
        Ok(BuiltinTool::ActivateSkill) => Shown {
            title: format!(
                "Activate skill {}",
                str_arg(arguments, "name").unwrap_or_default()
            ),
            kind: acp::ToolKind::Read,
            locations: Vec::new(),
            diffs: Vec::new(),
        },
        Ok(
            BuiltinTool::AskUser
            | BuiltinTool::SpawnAgent
            | BuiltinTool::SendInput
            | BuiltinTool::Wait
            | BuiltinTool::CloseAgent,
        )
        | Err(_) => Shown {
            title: tool.to_owned(),
            kind: acp::ToolKind::Other,
            locations: Vec::new(),
            diffs: Vec::new(),
        },
    }
}

/// A command's first line, as a title (a heredoc script would otherwise fill the panel).
fn first_line(command: &str) -> String {
    let mut lines = command.lines();
    let first = lines.next().unwrap_or_default();
    if lines.next().is_some() {
        format!("{first} …")
    } else {
        first.to_owned()
    }
}

/// The files a v4a patch (`apply_patch`) touches, each with the text its hunks replace and the
/// text they put in its place. Context lines belong to both sides, so the editor shows each
/// hunk in place; a moved file is shown at its new path. A malformed patch gives what could be
/// read (the tool itself reports the error).
pub(super) fn patch_diffs(cwd: &Path, patch: &str) -> Vec<acp::Diff> {
    struct File {
        path: PathBuf,
        old: Option<String>,
        new: String,
    }
    let mut files: Vec<File> = Vec::new();
    for line in patch.lines() {
        let header = |prefix: &str| line.strip_prefix(prefix).map(str::trim);
        if let Some(p) = header("*** Add File:") {
            files.push(File {
                path: absolute(cwd, p),
                old: None,
                new: String::new(),
            });
        } else if let Some(p) = header("*** Update File:") {
            files.push(File {
                path: absolute(cwd, p),
                old: Some(String::new()),
                new: String::new(),
            });
        } else if let Some(p) = header("*** Delete File:") {
            // The old text is not in the patch; the editor shows the file emptied.
            files.push(File {
                path: absolute(cwd, p),
                old: Some(String::new()),
                new: String::new(),
            });
        } else if let Some(p) = header("*** Move to:") {
            if let Some(file) = files.last_mut() {
                file.path = absolute(cwd, p);
            }
        } else if line.starts_with("***") || line.starts_with("@@") {
            continue;
        } else if let Some(file) = files.last_mut() {
            let (to_old, to_new, text) = match line.split_at_checked(1) {
                Some(("+", rest)) => (false, true, rest),
                Some(("-", rest)) => (true, false, rest),
                Some((" ", rest)) => (true, true, rest),
                _ => (true, true, line),
            };
            if to_old && let Some(old) = file.old.as_mut() {
                old.push_str(text);
                old.push('\n');
            }
            if to_new {
                file.new.push_str(text);
                file.new.push('\n');
            }
        }
    }
    files
        .into_iter()
        .map(|f| acp::Diff::new(f.path, f.new).old_text(f.old))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(tool: &str, arguments: Value, kind: acp::ToolKind, title: &str, paths: &[&str]) {
        let shown = show(Path::new("/w"), tool, &arguments);
        assert_eq!(shown.kind, kind);
        assert_eq!(shown.title, title);
        let got: Vec<PathBuf> = shown.locations.into_iter().map(|l| l.path).collect();
        let want: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn kinds_titles_and_absolute_locations() {
        use acp::ToolKind::*;
        check(
            "read_file",
            json!({"file_path": "a.rs"}),
            Read,
            "Read /w/a.rs",
            &["/w/a.rs"],
        );
        check(
            "shell",
            json!({"command": "ls\necho"}),
            Execute,
            "ls …",
            &[],
        );
        check("grep", json!({"pattern": "fn"}), Search, "grep fn", &["/w"]);
        check(
            "write_file",
            json!({"file_path": "/x", "content": "y"}),
            Edit,
            "Write /x",
            &["/x"],
        );
        check("spawn_agent", json!({}), Other, "spawn_agent", &[]);
    }

    #[test]
    fn read_file_offset_is_the_location_line() {
        let shown = show(
            Path::new("/w"),
            "read_file",
            &json!({"file_path": "a", "offset": 7}),
        );
        assert_eq!(shown.locations[0].line, Some(7));
    }

    #[test]
    fn edit_file_diff_has_old_and_new_text() {
        let shown = show(
            Path::new("/w"),
            "edit_file",
            &json!({"file_path": "f", "old_string": "a", "new_string": "b"}),
        );
        let want = acp::Diff::new("/w/f", "b").old_text("a".to_owned());
        assert_eq!(shown.diffs, vec![want]);
    }

    #[test]
    fn patch_hunks_become_per_file_diffs() {
        let patch = "*** Begin Patch\n*** Add File: n.txt\n+x\n*** Update File: m.rs\n*** Move to: k.rs\n@@ fn f\n ctx\n-old\n+new\n*** End Patch\n";
        let diffs = patch_diffs(Path::new("/w"), patch);
        assert_eq!(
            diffs,
            vec![
                acp::Diff::new("/w/n.txt", "x\n"),
                acp::Diff::new("/w/k.rs", "ctx\nnew\n").old_text("ctx\nold\n".to_owned()),
            ]
        );
    }
}
