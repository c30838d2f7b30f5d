//! What hooks are configured: `[[hooks.EVENT]]` tables (the config file's, and a trusted
//! workspace's `.agents/hooks.toml`, the same shape) checked into [`Hook`]s, each error
//! naming its key; the trusted workspaces of the config file; and the project's hooks file,
//! read only when its digest is the one the user trusted.

use crate::exec::{ProtectedPaths, read_small};
use agentd_proto::{HookEvent, MAX_PROJECT_HOOKS_BYTES, PROJECT_HOOKS_FILE};
use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default `timeout_secs` (Claude Code's too).
const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// The longest `timeout_secs`.
const MAX_TIMEOUT_SECS: u64 = 3600;
/// Most hooks one event may have in one file.
const MAX_HOOKS_PER_EVENT: usize = 32;
/// The longest command.
const MAX_COMMAND_BYTES: usize = 8 * 1024;

/// One `[[hooks.EVENT]]` table as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HookTable {
    matcher: Option<String>,
    command: String,
    timeout_secs: Option<u64>,
    /// `false`: run outside the session's sandbox (the config file's hooks only).
    sandbox: Option<bool>,
}

/// The `hooks` table of a file: tables by event name.
pub(crate) type HooksTable = BTreeMap<String, Vec<HookTable>>;

/// A file that holds hooks only (`.agents/hooks.toml`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProjectFile {
    #[serde(default)]
    hooks: HooksTable,
}

/// One checked hook.
#[derive(Debug, Clone)]
pub struct Hook {
    pub(crate) event: HookEvent,
    /// Where it is configured, as events name it.
    pub(crate) label: String,
    pub(crate) command: String,
    matcher: Option<Vec<GlobMatcher>>,
    pub(crate) timeout: Duration,
    /// Whether it runs in the session's sandbox (the default: a hook that runs a tool of the
    /// workspace, a formatter reading its config, would otherwise run what the model wrote
    /// with the user's full rights).
    pub(crate) sandboxed: bool,
}

impl Hook {
    /// Whether it runs for a call of `tool` (`None`: the event has no tool).
    pub(crate) fn matches(&self, tool: Option<&str>) -> bool {
        let (Some(globs), Some(tool)) = (&self.matcher, tool) else {
            return true;
        };
        let alias = claude_alias(tool);
        globs
            .iter()
            .any(|g| g.is_match(tool) || alias.is_some_and(|a| g.is_match(a)))
    }

    /// The first word of its command.
    pub(crate) fn program(&self) -> String {
        self.command
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect()
    }
}

/// Claude Code's name of a tool agentd has in its place, which its matchers name.
pub(crate) fn claude_alias(tool: &str) -> Option<&'static str> {
    Some(match tool {
        "shell" => "Bash",
        "read_file" | "read_many_files" => "Read",
        "write_file" => "Write",
        "edit_file" | "apply_patch" => "Edit",
        "grep" => "Grep",
        "glob" => "Glob",
        _ => return None,
    })
}

/// Where a `hooks` table was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The user's config file.
    Config,
    /// A trusted workspace's `.agents/hooks.toml`, which cannot take a hook out of the
    /// sandbox: a model in a `workspace_write` session can write the scripts it names.
    Workspace,
}

/// Checks a `hooks` table written in `origin`; its file's name prefixes every label and error
/// of a workspace's.
pub(crate) fn check(table: &HooksTable, origin: Origin) -> Result<Vec<Hook>, String> {
    let origin_name = match origin {
        Origin::Config => String::new(),
        Origin::Workspace => format!("{PROJECT_HOOKS_FILE} "),
    };
    let origin_name = origin_name.as_str();
    let mut hooks = Vec::new();
    for (name, tables) in table {
        let event: HookEvent = name
            .parse()
            .map_err(|e: agentd_proto::UnknownName| format!("{origin_name}hooks.{name}: {e}"))?;
        if tables.len() > MAX_HOOKS_PER_EVENT {
            return Err(format!(
                "{origin_name}hooks.{name}: at most {MAX_HOOKS_PER_EVENT} hooks per event"
            ));
        }
        for (i, t) in tables.iter().enumerate() {
            let label = format!("{origin_name}hooks.{name}[{i}]");
            hooks.push(check_one(event, label, t, origin)?);
        }
    }
    Ok(hooks)
}

fn check_one(
    event: HookEvent,
    label: String,
    t: &HookTable,
    origin: Origin,
) -> Result<Hook, String> {
    if t.sandbox == Some(false) && origin == Origin::Workspace {
        return Err(format!(
            "{label}.sandbox: a workspace's hooks run in the session's sandbox; only your \
             config file's may set sandbox = false"
        ));
    }
    if t.command.trim().is_empty() {
        return Err(format!("{label}.command must not be empty"));
    }
    if t.command.len() > MAX_COMMAND_BYTES {
        return Err(format!(
            "{label}.command is longer than {MAX_COMMAND_BYTES} bytes (put it in a script)"
        ));
    }
    let secs = t.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS);
    if !(1..=MAX_TIMEOUT_SECS).contains(&secs) {
        return Err(format!(
            "{label}.timeout_secs must be 1 to {MAX_TIMEOUT_SECS}, got {secs}"
        ));
    }
    let every = |m: &str| matches!(m.trim(), "" | "*");
    let matcher = match t.matcher.as_deref() {
        None => None,
        Some(m) if every(m) => None,
        Some(_) if !event.is_tool_event() => {
            return Err(format!(
                "{label}.matcher: only pre_tool_use and post_tool_use hooks take a matcher \
                 (a tool name glob); remove it"
            ));
        }
        Some(m) => Some(
            m.split('|')
                .map(|alt| {
                    GlobBuilder::new(alt.trim())
                        .literal_separator(false)
                        .build()
                        .map(|g| g.compile_matcher())
                        .map_err(|e| format!("{label}.matcher: {e}"))
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    Ok(Hook {
        event,
        label,
        command: t.command.clone(),
        matcher,
        timeout: Duration::from_secs(secs),
        sandboxed: t.sandbox != Some(false),
    })
}

/// `[trusted_workspaces."DIR"]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TrustTable {
    hooks_sha256: Option<String>,
}

/// The workspaces the user trusts, by real path: the digest of each one's hooks file as it
/// was trusted (`None`: it had none).
pub type Trusted = BTreeMap<PathBuf, Option<String>>;

/// Checks the `trusted_workspaces` table.
pub(crate) fn check_trusted(table: &BTreeMap<String, TrustTable>) -> Result<Trusted, String> {
    let mut trusted = Trusted::new();
    for (dir, t) in table {
        let path = PathBuf::from(dir);
        if !path.is_absolute() {
            return Err(format!(
                "trusted_workspaces.{dir:?}: must be an absolute path (`agentctl trust DIR` writes it)"
            ));
        }
        if let Some(d) = &t.hooks_sha256
            && (d.len() != 64 || !d.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(format!(
                "trusted_workspaces.{dir:?}.hooks_sha256 must be 64 hex digits; run `agentctl trust {dir}` again"
            ));
        }
        trusted.insert(path, t.hooks_sha256.clone());
    }
    Ok(trusted)
}

/// The hex SHA-256 of a hooks file's bytes (as `agentctl trust` computes it).
pub(crate) fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The hooks of the workspace at `cwd` that may run, and what to tell the user about the
/// rest: its nearest trusted directory's `.agents/hooks.toml`, when that file's bytes are
/// the ones trusted. A workspace nobody trusted, a file written or changed since it was
/// trusted, or one that does not parse runs nothing (and says why). Blocking: a small read.
pub(crate) fn project_hooks(
    cwd: &Path,
    trusted: &Trusted,
    protected: &ProtectedPaths,
) -> (Vec<Hook>, Vec<String>) {
    let read_bounded = |file: &Path| {
        read_small(file, MAX_PROJECT_HOOKS_BYTES, protected).map_err(|e| e.to_string())
    };
    let real = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_owned());
    let trust = real
        .ancestors()
        .find_map(|dir| trusted.get(dir).map(|digest| (dir, digest)));
    let Some((dir, trusted_digest)) = trust else {
        let file = real.join(PROJECT_HOOKS_FILE);
        let warnings = match read_bounded(&file) {
            Ok(None) => Vec::new(),
            _ => vec![format!(
                "{} is not run: this workspace is not trusted (review it, then run `agentctl \
                 trust {}`)",
                file.display(),
                real.display()
            )],
        };
        return (Vec::new(), warnings);
    };
    let file = dir.join(PROJECT_HOOKS_FILE);
    let bytes = match read_bounded(&file) {
        Ok(None) => return (Vec::new(), Vec::new()),
        Ok(Some(b)) => b,
        Err(why) => {
            return (
                Vec::new(),
                vec![format!("{} is not run: {why}", file.display())],
            );
        }
    };
    let again = format!(
        "review it, then run `agentctl trust {}` to trust it as it is now",
        dir.display()
    );
    match trusted_digest {
        None => {
            return (
                Vec::new(),
                vec![format!(
                    "{} is not run: it was written after this workspace was trusted ({again})",
                    file.display()
                )],
            );
        }
        Some(d) if *d != digest(&bytes) => {
            return (
                Vec::new(),
                vec![format!(
                    "{} is not run: it changed since this workspace was trusted ({again})",
                    file.display()
                )],
            );
        }
        Some(_) => {}
    }
    let parsed = std::str::from_utf8(&bytes)
        .map_err(|_| "it is not UTF-8".to_owned())
        .and_then(|text| crate::config::parse_toml::<ProjectFile>(text).map_err(|e| e.to_string()))
        .and_then(|f| check(&f.hooks, Origin::Workspace));
    match parsed {
        Ok(hooks) => (hooks, Vec::new()),
        Err(why) => (
            Vec::new(),
            vec![format!("{} is not run: {why}", file.display())],
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn hooks(text: &str) -> Result<Vec<Hook>, String> {
        let f: ProjectFile = crate::config::parse_toml(text).map_err(|e| e.to_string())?;
        check(&f.hooks, Origin::Config)
    }

    #[test]
    fn a_matcher_names_agentd_tools_or_claude_codes() {
        let h =
            hooks("[[hooks.pre_tool_use]]\nmatcher = \"Edit|Write\"\ncommand = \"fmt\"\n").unwrap();
        let m = |t| h[0].matches(Some(t));
        assert_eq!(
            [
                m("edit_file"),
                m("apply_patch"),
                m("write_file"),
                m("shell"),
                m("Write")
            ],
            [true, true, true, false, true]
        );
        let h = hooks("[[hooks.post_tool_use]]\nmatcher = \"mcp__*\"\ncommand = \"x\"\n").unwrap();
        assert!(h[0].matches(Some("mcp__docs__search")) && !h[0].matches(Some("shell")));
        let h = hooks("[[hooks.pre_tool_use]]\ncommand = \"x\"\n").unwrap();
        assert!(h[0].matches(Some("anything")));
        assert_eq!(h[0].timeout, Duration::from_secs(60));
    }

    #[test]
    fn bad_hook_tables_are_refused_naming_the_key() {
        let e = |t: &str| hooks(t).unwrap_err();
        assert_eq!(
            e("[[hooks.before_tool]]\ncommand = \"x\"\n"),
            "hooks.before_tool: unknown hook event \"before_tool\"; use session_start, \
             user_prompt_submit, pre_tool_use, post_tool_use, pre_compact, stop, \
             subagent_stop or notification"
        );
        assert_eq!(
            e("[[hooks.stop]]\ncommand = \" \"\n"),
            "hooks.stop[0].command must not be empty"
        );
        assert_eq!(
            e("[[hooks.stop]]\ncommand = \"x\"\ntimeout_secs = 0\n"),
            "hooks.stop[0].timeout_secs must be 1 to 3600, got 0"
        );
        assert!(
            e("[[hooks.stop]]\nmatcher = \"Bash\"\ncommand = \"x\"\n")
                .starts_with("hooks.stop[0].matcher: only pre_tool_use and post_tool_use")
        );
        assert!(
            e("[[hooks.pre_tool_use]]\nmatcher = \"[\"\ncommand = \"x\"\n")
                .starts_with("hooks.pre_tool_use[0].matcher: ")
        );
        assert!(e("[[hooks.stop]]\ncommand = \"x\"\ntimeout = 5\n").contains("unknown field"));
    }

    #[test]
    fn only_the_users_config_takes_a_hook_out_of_the_sandbox() {
        let text = "[[hooks.notification]]\ncommand = \"notify-send hi\"\nsandbox = false\n";
        let f: ProjectFile = crate::config::parse_toml(text).unwrap();
        assert!(!check(&f.hooks, Origin::Config).unwrap()[0].sandboxed);
        assert_eq!(
            check(&f.hooks, Origin::Workspace).unwrap_err(),
            ".agents/hooks.toml hooks.notification[0].sandbox: a workspace's hooks run in the \
             session's sandbox; only your config file's may set sandbox = false"
        );
        assert!(hooks("[[hooks.stop]]\ncommand = \"x\"\n").unwrap()[0].sandboxed);
    }

    #[test]
    fn a_project_file_runs_only_as_it_was_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let sub = real.join("sub");
        std::fs::create_dir_all(real.join(".agents")).unwrap();
        std::fs::create_dir_all(&sub).unwrap();
        let text = "[[hooks.stop]]\ncommand = \"true\"\n";
        std::fs::write(real.join(PROJECT_HOOKS_FILE), text).unwrap();
        let (h, w) = project_hooks(&real, &Trusted::new(), &ProtectedPaths::default());
        assert!(h.is_empty() && w[0].contains("not trusted"), "{w:?}");
        let trusted = Trusted::from([(real.clone(), Some(digest(text.as_bytes())))]);
        let (h, w) = project_hooks(&sub, &trusted, &ProtectedPaths::default());
        assert_eq!((h.len(), w.len()), (1, 0));
        assert_eq!(h[0].label, ".agents/hooks.toml hooks.stop[0]");
        std::fs::write(
            real.join(PROJECT_HOOKS_FILE),
            "[[hooks.stop]]\ncommand = \"evil\"\n",
        )
        .unwrap();
        let (h, w) = project_hooks(&sub, &trusted, &ProtectedPaths::default());
        assert!(h.is_empty() && w[0].contains("changed since"), "{w:?}");
        let (h, w) = project_hooks(
            &sub,
            &Trusted::from([(real.clone(), None)]),
            &ProtectedPaths::default(),
        );
        assert!(h.is_empty() && w[0].contains("written after"), "{w:?}");
        std::fs::remove_file(real.join(PROJECT_HOOKS_FILE)).unwrap();
        nix::unistd::mkfifo(
            &real.join(PROJECT_HOOKS_FILE),
            nix::sys::stat::Mode::S_IRWXU,
        )
        .unwrap();
        let (h, w) = project_hooks(&sub, &trusted, &ProtectedPaths::default());
        assert!(h.is_empty() && w[0].contains("regular files only"), "{w:?}");
    }
}
