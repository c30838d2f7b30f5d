//! The approval policy: which calls run, which are refused, and which ask a person first
//! (`approval` in the session config). Rules are `tool` or `tool(pattern)`; the pattern is a
//! glob over the command line (`*` crosses `/` and spaces) or over the paths a call writes,
//! relative to the session's directory (`*` stays within one path segment, `**` crosses them).
//! Deny wins over allow; deny rules apply in every mode.

use crate::tools::{ApprovalSubject, TargetKind};
use agentd_proto::{ApprovalConfig, ApprovalMode, ApprovalRule};
use globset::{GlobBuilder, GlobMatcher};
use std::path::{Component, Path, PathBuf};

/// What the policy says about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it; nothing needed deciding (`auto` mode, or a tool that never asks).
    Run,
    /// Run it: this allow rule matched in `ask` mode.
    AllowedBy(String),
    /// Refuse it: this deny rule matched.
    DeniedBy(String),
    /// Refuse it for this reason, which no rule gave (running outside the sandbox with nobody
    /// to ask).
    Refused(String),
    /// Ask a person.
    Ask,
}

/// One parsed rule.
struct Rule<'a> {
    text: &'a str,
    tool: &'a str,
    pattern: Option<&'a str>,
}

fn parse(rule: &ApprovalRule) -> Result<Rule<'_>, String> {
    let text = rule.0.trim();
    let bad = |why: &str| Err(format!("approval rule {text:?}: {why}"));
    let (tool, pattern) = match text.split_once('(') {
        None => (text, None),
        Some((tool, rest)) => match rest.strip_suffix(')') {
            Some(pattern) if !pattern.is_empty() => (tool.trim(), Some(pattern)),
            Some(_) => return bad("the pattern in parentheses is empty"),
            None => return bad("a pattern must end with `)`, as in shell(git status*)"),
        },
    };
    if tool.is_empty()
        || !tool
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return bad("must start with a tool name, as in `shell` or `write_file(src/**)`");
    }
    Ok(Rule {
        text,
        tool,
        pattern,
    })
}

fn matcher(pattern: &str, kind: TargetKind) -> Result<GlobMatcher, String> {
    GlobBuilder::new(pattern)
        .literal_separator(kind == TargetKind::Paths)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("approval rule pattern {pattern:?}: {e}"))
}

/// Checks every rule of `config`; the error names the first bad one.
pub fn validate(config: &ApprovalConfig) -> Result<(), String> {
    for rule in config.allow.iter().chain(&config.deny) {
        let rule = parse(rule)?;
        if let Some(pattern) = rule.pattern {
            matcher(pattern, TargetKind::Command)?;
        }
    }
    Ok(())
}

/// Whether `rule` covers the call. With `every`, each target must match (allow); otherwise
/// one is enough (deny). A pattern never matches a call without targets.
fn covers(rule: &Rule<'_>, tool: &str, targets: &[String], kind: TargetKind, every: bool) -> bool {
    if rule.tool != tool {
        return false;
    }
    let Some(pattern) = rule.pattern else {
        return true;
    };
    let Ok(glob) = matcher(pattern, kind) else {
        return false;
    };
    if targets.is_empty() {
        return false;
    }
    if every {
        targets.iter().all(|t| glob.is_match(t))
    } else {
        targets.iter().any(|t| glob.is_match(t))
    }
}

/// Decides a call of `tool` whose approval subject is `subject` (`None`: the tool never asks),
/// in a session whose commands run `sandboxed` or not. A call that asks to leave the sandbox
/// is never allowed by a rule: a person decides, or nobody may.
pub fn decide(
    config: &ApprovalConfig,
    tool: &str,
    subject: Option<&ApprovalSubject>,
    cwd: &Path,
    sandboxed: bool,
) -> Verdict {
    let Some(subject) = subject else {
        return Verdict::Run;
    };
    let targets = targets(subject, cwd);
    let rules = |list: &'_ [ApprovalRule], every: bool| -> Option<String> {
        list.iter()
            .filter_map(|r| parse(r).ok())
            .find(|r| covers(r, tool, &targets, subject.kind, every))
            .map(|r| r.text.to_owned())
    };
    if let Some(rule) = rules(&config.deny, false) {
        return Verdict::DeniedBy(rule);
    }
    if subject.outside_sandbox && sandboxed {
        return match config.mode {
            ApprovalMode::Ask => Verdict::Ask,
            ApprovalMode::Auto => Verdict::Refused(
                "Refused: running outside the sandbox needs the user's approval, and this session does not ask (approval mode auto). Work within the sandbox, or tell the user what needs their permission.".into(),
            ),
        };
    }
    if config.mode == ApprovalMode::Auto {
        return Verdict::Run;
    }
    match rules(&config.allow, true) {
        Some(rule) => Verdict::AllowedBy(rule),
        None => Verdict::Ask,
    }
}

/// The allow rules that `allow_always` adds: this tool with exactly this command, or with
/// exactly these paths (a bare tool name when the call has no target).
pub fn always_rules(tool: &str, subject: &ApprovalSubject, cwd: &Path) -> Vec<ApprovalRule> {
    let targets = targets(subject, cwd);
    if targets.is_empty() {
        return vec![ApprovalRule(tool.to_owned())];
    }
    targets
        .iter()
        .map(|t| ApprovalRule(format!("{tool}({})", escape(t))))
        .collect()
}

/// What the rules match: the trimmed command, or each path relative to `cwd` when it lies
/// under it (absolute otherwise), with `.` and `..` resolved.
fn targets(subject: &ApprovalSubject, cwd: &Path) -> Vec<String> {
    match subject.kind {
        TargetKind::Command => subject
            .targets
            .iter()
            .map(|c| c.trim().to_owned())
            .collect(),
        TargetKind::Paths => subject
            .targets
            .iter()
            .map(|p| {
                let full = normalize(&cwd.join(p));
                match full.strip_prefix(normalize(cwd)) {
                    Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
                    _ => full.display().to_string(),
                }
            })
            .collect(),
    }
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Escapes glob syntax so the pattern matches `text` only.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\' | '(' | ')') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(mode: ApprovalMode, allow: &[&str], deny: &[&str]) -> ApprovalConfig {
        ApprovalConfig {
            mode,
            allow: allow.iter().map(|r| ApprovalRule((*r).into())).collect(),
            deny: deny.iter().map(|r| ApprovalRule((*r).into())).collect(),
            ..ApprovalConfig::default()
        }
    }

    fn command(c: &str) -> ApprovalSubject {
        ApprovalSubject {
            kind: TargetKind::Command,
            targets: vec![c.into()],
            summary: c.into(),
            outside_sandbox: false,
        }
    }

    fn paths(p: &[&str]) -> ApprovalSubject {
        ApprovalSubject {
            kind: TargetKind::Paths,
            targets: p.iter().map(|p| (*p).into()).collect(),
            summary: String::new(),
            outside_sandbox: false,
        }
    }

    const CWD: &str = "/projects/demo";

    #[test]
    fn commands_match_globs_across_spaces_and_slashes() {
        let c = config(
            ApprovalMode::Ask,
            &["shell(git status*)", "shell(cargo test*)"],
            &[],
        );
        let cwd = Path::new(CWD);
        let d = |cmd| decide(&c, "shell", Some(&command(cmd)), cwd, true);
        assert_eq!(
            d("git status --short"),
            Verdict::AllowedBy("shell(git status*)".into())
        );
        assert_eq!(
            d("cargo test -p a/b"),
            Verdict::AllowedBy("shell(cargo test*)".into())
        );
        assert_eq!(d("git push"), Verdict::Ask);
        assert_eq!(d("rm -rf / ; git status"), Verdict::Ask);
    }

    #[test]
    fn deny_wins_and_applies_in_auto_mode() {
        let c = config(ApprovalMode::Auto, &["shell"], &["shell(rm *)"]);
        let cwd = Path::new(CWD);
        assert_eq!(
            decide(&c, "shell", Some(&command("rm -rf x")), cwd, true),
            Verdict::DeniedBy("shell(rm *)".into())
        );
        assert_eq!(
            decide(&c, "shell", Some(&command("ls")), cwd, true),
            Verdict::Run
        );
        assert_eq!(decide(&c, "read_file", None, cwd, true), Verdict::Run);
    }

    #[test]
    fn paths_are_relative_to_the_session_and_every_one_must_be_allowed() {
        let c = config(
            ApprovalMode::Ask,
            &["write_file(src/**)", "apply_patch(src/*)"],
            &[],
        );
        let cwd = Path::new(CWD);
        let d = |tool, p: &[&str]| decide(&c, tool, Some(&paths(p)), cwd, true);
        assert!(matches!(
            d("write_file", &["src/a/b.rs"]),
            Verdict::AllowedBy(_)
        ));
        assert!(matches!(
            d("write_file", &["/projects/demo/src/x.rs"]),
            Verdict::AllowedBy(_)
        ));
        assert_eq!(d("write_file", &["src/../../etc/passwd"]), Verdict::Ask);
        assert_eq!(d("write_file", &["README.md"]), Verdict::Ask);
        assert!(matches!(
            d("apply_patch", &["src/a.rs", "src/b.rs"]),
            Verdict::AllowedBy(_)
        ));
        assert_eq!(
            d("apply_patch", &["src/a.rs", "src/deep/b.rs"]),
            Verdict::Ask
        );
        assert_eq!(d("apply_patch", &[]), Verdict::Ask);
    }

    #[test]
    fn allow_always_matches_exactly_that_call() {
        let cwd = Path::new(CWD);
        let odd = command("echo [a]* (b) {c}?");
        let rules = always_rules("shell", &odd, cwd);
        let c = ApprovalConfig {
            mode: ApprovalMode::Ask,
            allow: rules,
            ..ApprovalConfig::default()
        };
        validate(&c).unwrap();
        assert!(matches!(
            decide(&c, "shell", Some(&odd), cwd, true),
            Verdict::AllowedBy(_)
        ));
        assert_eq!(
            decide(&c, "shell", Some(&command("echo a1 (b) {c}x")), cwd, true),
            Verdict::Ask
        );
        let file = paths(&["/projects/demo/src/lib.rs"]);
        assert_eq!(
            always_rules("write_file", &file, cwd),
            [ApprovalRule("write_file(src/lib.rs)".into())]
        );
    }

    #[test]
    fn leaving_the_sandbox_is_for_a_person_to_allow() {
        let cwd = Path::new(CWD);
        let mut outside = command("make install");
        outside.outside_sandbox = true;
        let ask = config(ApprovalMode::Ask, &["shell"], &[]);
        assert_eq!(
            decide(&ask, "shell", Some(&outside), cwd, true),
            Verdict::Ask
        );
        let auto = config(ApprovalMode::Auto, &["shell"], &[]);
        assert!(matches!(
            decide(&auto, "shell", Some(&outside), cwd, true),
            Verdict::Refused(_)
        ));
        // Without a sandbox there is nothing to leave.
        assert_eq!(
            decide(&auto, "shell", Some(&outside), cwd, false),
            Verdict::Run
        );
        let deny = config(ApprovalMode::Ask, &[], &["shell(make *)"]);
        assert!(matches!(
            decide(&deny, "shell", Some(&outside), cwd, true),
            Verdict::DeniedBy(_)
        ));
    }

    #[test]
    fn bad_rules_are_named() {
        for (rule, says) in [
            ("shell(git", "must end with `)`"),
            ("shell()", "empty"),
            ("(x)", "tool name"),
            ("shell([)", "pattern"),
        ] {
            let c = config(ApprovalMode::Ask, &[rule], &[]);
            let err = validate(&c).unwrap_err();
            assert!(err.contains(says), "{rule}: {err}");
        }
    }
}
