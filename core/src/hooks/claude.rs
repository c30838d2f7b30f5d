//! Claude Code's hook conventions, which hooks written for it rely on: the JSON object on
//! stdin (`session_id`, `transcript_path`, `cwd`, `hook_event_name` as `PreToolUse`...,
//! `tool_name` as `Bash`, `Edit`..., `tool_input` with absolute `file_path`s) and the answer:
//! exit 2 blocks with stderr as the reason; exit 0 may print `{"decision": "block",
//! "reason"}`, `hookSpecificOutput.permissionDecision = "deny"` or `additionalContext`;
//! plain stdout of `user_prompt_submit` and `session_start` hooks is context for the model;
//! any other exit is a failed hook, and the work goes on.

use super::config::claude_alias;
use agentd_proto::{HookEvent, HookOutcome};
use serde_json::{Map, Value, json};

/// How much of a hook's words an event, or the model, gets.
pub(crate) const MAX_REASON_BYTES: usize = 4 * 1024;

/// The stdin fields every event shares.
pub(crate) struct Common<'a> {
    pub(crate) session_id: &'a str,
    pub(crate) transcript_path: &'a str,
    pub(crate) cwd: &'a str,
}

/// The JSON document for `event` on a hook's stdin: the common fields, then `fields`.
pub(crate) fn stdin(common: &Common<'_>, event: HookEvent, fields: Map<String, Value>) -> Vec<u8> {
    let mut doc = Map::new();
    doc.insert("session_id".into(), common.session_id.into());
    doc.insert("transcript_path".into(), common.transcript_path.into());
    doc.insert("cwd".into(), common.cwd.into());
    doc.insert("permission_mode".into(), "default".into());
    doc.insert("hook_event_name".into(), event.claude_name().into());
    doc.extend(fields);
    serde_json::to_vec(&Value::Object(doc)).unwrap_or_default()
}

/// A tool call's fields, once for each file it names where Claude Code's tool takes one file
/// and agentd's several (`apply_patch` as `Edit` of each file the patch changes with the
/// whole `patch`, `read_many_files` as `Read` of each path), so that a guard reading
/// `tool_input.file_path` sees every file: `tool_name` as Claude Code names its tool
/// (`agentd_tool_name` always holds agentd's), `tool_input` with `file_path` made absolute
/// against `cwd`, and `tool_use_id`.
pub(crate) fn tool_fields(
    tool: &str,
    arguments: &Value,
    call_id: &str,
    cwd: &std::path::Path,
) -> Vec<Map<String, Value>> {
    let absolute = |path: &str| Value::from(cwd.join(path).display().to_string());
    let fields = |name: &str, input: Value| {
        let mut fields = Map::new();
        fields.insert("tool_name".into(), name.into());
        fields.insert("tool_input".into(), input);
        fields.insert("tool_use_id".into(), call_id.into());
        fields.insert("agentd_tool_name".into(), tool.into());
        fields
    };
    let text = |key: &str| arguments.get(key).and_then(Value::as_str);
    let per_file: Vec<_> = match tool {
        "apply_patch" => crate::tools::touched_paths(text("patch").unwrap_or_default())
            .iter()
            .map(|path| {
                fields(
                    "Edit",
                    json!({"file_path": absolute(path), "patch": arguments["patch"]}),
                )
            })
            .collect(),
        "read_many_files" => arguments["paths"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|path| fields("Read", json!({"file_path": absolute(path)})))
            .collect(),
        _ => Vec::new(),
    };
    if !per_file.is_empty() {
        return per_file;
    }
    let mut input = arguments.clone();
    if let Some(Value::String(path)) = input.get_mut("file_path") {
        *path = cwd.join(&*path).display().to_string();
    }
    let same_tool = !matches!(tool, "read_many_files" | "apply_patch");
    vec![fields(
        claude_alias(tool).filter(|_| same_tool).unwrap_or(tool),
        input,
    )]
}

/// `tool_response` of a call that ran: its output as the model reads it.
pub(crate) fn tool_response(output: &str) -> Value {
    json!({ "output": output, "success": true })
}

/// What one hook's run asks for.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Answer {
    pub(crate) outcome: Option<HookOutcome>,
    /// Why it blocked or failed.
    pub(crate) reason: Option<String>,
    /// Text for the model.
    pub(crate) context: Option<String>,
}

/// Reads a hook's exit code and output the way Claude Code does.
pub(crate) fn answer(
    event: HookEvent,
    exit_code: Option<i32>,
    stdout: &str,
    stderr: &str,
) -> Answer {
    let stderr = stderr.trim();
    let words = |s: &str| (!s.is_empty()).then(|| cut(s, MAX_REASON_BYTES));
    match exit_code {
        Some(2) if blocks(event) => Answer {
            outcome: Some(HookOutcome::Blocked),
            reason: Some(words(stderr).unwrap_or_else(|| "blocked by a hook".to_owned())),
            context: None,
        },
        Some(0) => from_stdout(event, stdout.trim()),
        code => Answer {
            outcome: Some(HookOutcome::Failed),
            reason: Some(match (code, words(stderr)) {
                (Some(c), Some(w)) => format!("exit code {c}: {w}"),
                (Some(c), None) => format!("exit code {c}"),
                (None, _) => "killed by a signal".to_owned(),
            }),
            context: None,
        },
    }
}

/// Whether a hook of `event` can block (the others' exit 2 is a failure to report).
fn blocks(event: HookEvent) -> bool {
    matches!(
        event,
        HookEvent::PreToolUse
            | HookEvent::PostToolUse
            | HookEvent::UserPromptSubmit
            | HookEvent::Stop
            | HookEvent::SubagentStop
    )
}

fn from_stdout(event: HookEvent, stdout: &str) -> Answer {
    let ok = Answer {
        outcome: Some(HookOutcome::Ok),
        ..Answer::default()
    };
    let json = stdout
        .starts_with('{')
        .then(|| serde_json::from_str::<Map<String, Value>>(stdout).ok())
        .flatten();
    let Some(json) = json else {
        // Claude Code adds a `UserPromptSubmit` or `SessionStart` hook's plain stdout to the
        // context; the other events' stdout is for logs.
        let context = matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart)
            && !stdout.is_empty();
        return Answer {
            context: context.then(|| cut(stdout, MAX_REASON_BYTES)),
            ..ok
        };
    };
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(|s| cut(s.trim(), MAX_REASON_BYTES))
    };
    let specific = json.get("hookSpecificOutput").and_then(Value::as_object);
    let context = text(specific.and_then(|s| s.get("additionalContext")));
    let denied = specific
        .and_then(|s| s.get("permissionDecision"))
        .and_then(Value::as_str)
        == Some("deny");
    let block = json.get("decision").and_then(Value::as_str) == Some("block");
    if blocks(event) && (block || denied) {
        let reason = if denied {
            text(specific.and_then(|s| s.get("permissionDecisionReason")))
        } else {
            text(json.get("reason"))
        };
        return Answer {
            outcome: Some(HookOutcome::Blocked),
            reason: Some(
                reason
                    .filter(|r| !r.is_empty())
                    .unwrap_or_else(|| "blocked by a hook".to_owned()),
            ),
            context,
        };
    }
    Answer { context, ..ok }
}

/// `s` cut to at most `max` bytes on a character boundary, marked when cut.
pub(crate) fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [cut]", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_and_json_answers_follow_claude_code() {
        let blocked = |r: &str| Answer {
            outcome: Some(HookOutcome::Blocked),
            reason: Some(r.to_owned()),
            context: None,
        };
        let pre = HookEvent::PreToolUse;
        assert_eq!(answer(pre, Some(2), "", "no rm\n"), blocked("no rm"));
        assert_eq!(
            answer(pre, Some(0), r#"{"decision":"block","reason":"r"}"#, ""),
            blocked("r")
        );
        assert_eq!(
            answer(
                pre,
                Some(0),
                r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"d"}}"#,
                ""
            ),
            blocked("d")
        );
        assert_eq!(
            answer(pre, Some(0), "hello", "").outcome,
            Some(HookOutcome::Ok)
        );
        assert_eq!(answer(pre, Some(0), "hello", "").context, None);
        let failed = answer(pre, Some(1), "", "boom");
        assert_eq!(
            (failed.outcome, failed.reason.as_deref()),
            (Some(HookOutcome::Failed), Some("exit code 1: boom"))
        );
        // A notification cannot block: its exit 2 is a failure to report.
        let n = answer(HookEvent::Notification, Some(2), "", "x");
        assert_eq!(n.outcome, Some(HookOutcome::Failed));
        let p = answer(
            HookEvent::UserPromptSubmit,
            Some(0),
            "the date is today\n",
            "",
        );
        assert_eq!(p.context.as_deref(), Some("the date is today"));
        let p = answer(
            HookEvent::UserPromptSubmit,
            Some(0),
            r#"{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"ctx"}}"#,
            "",
        );
        assert_eq!(p.context.as_deref(), Some("ctx"));
        let long = "é".repeat(MAX_REASON_BYTES);
        assert!(answer(pre, Some(2), "", &long).reason.unwrap().len() <= MAX_REASON_BYTES + 10);
    }

    #[test]
    fn tool_calls_look_like_claude_codes() {
        let w = std::path::Path::new("/w");
        let f = tool_fields(
            "edit_file",
            &json!({"file_path": "src/a.rs", "old_string": "a", "new_string": "b"}),
            "call_1",
            w,
        );
        assert_eq!(f[0]["tool_name"], "Edit");
        assert_eq!(f[0]["tool_input"]["file_path"], "/w/src/a.rs");
        assert_eq!(f[0]["agentd_tool_name"], "edit_file");
        assert_eq!(f.len(), 1);
        // A guard of `.env` reading `file_path` sees each file a patch changes.
        let patch = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: b.txt\n*** Move to: .env\n@@\n-y\n+z\n*** End Patch";
        let f = tool_fields("apply_patch", &json!({"patch": patch}), "c", w);
        let files: Vec<_> = f
            .iter()
            .map(|f| f["tool_input"]["file_path"].clone())
            .collect();
        assert_eq!(files, ["/w/a.txt", "/w/b.txt", "/w/.env"]);
        assert!(
            f.iter()
                .all(|f| f["tool_name"] == "Edit" && f["tool_input"]["patch"] == patch)
        );
        assert_eq!(f[0]["agentd_tool_name"], "apply_patch");
        let f = tool_fields("apply_patch", &json!({"patch": "x"}), "c", w);
        assert_eq!(f[0]["tool_name"], "apply_patch");
        let f = tool_fields("read_many_files", &json!({"paths": ["a", ".env"]}), "c", w);
        assert_eq!(
            (
                f[1]["tool_name"].clone(),
                f[1]["tool_input"]["file_path"].clone()
            ),
            (json!("Read"), json!("/w/.env"))
        );
        assert_eq!(
            tool_fields("shell", &json!({}), "c", std::path::Path::new("/"))[0]["tool_name"],
            "Bash"
        );
    }
}
