//! The approval policy: which calls run, which are refused, and which ask a person first
//! (`approval` in the session config). Rules are `tool` or `tool(pattern)`, the pattern a glob.
//! For `shell` it is matched against each simple command of the line (`command.rs`: parsed
//! with tree-sitter-bash; words joined by single spaces, then redirections; `*` crosses `/`
//! and spaces but never into another command). For file tools it is matched against each
//! path the call writes, *resolved* as the sandbox resolves a write (symlinks followed
//! through the deepest existing ancestor): relative patterns against the part inside the
//! session's directory, absolute ones against the whole real path (`*` stays within one
//! path segment, `**` crosses them).
//!
//! An allow rule covers a call only when everything in it is covered: each simple command
//! (or each path) by an allow rule, and nothing the parser cannot vouch for. A deny rule
//! matches any one simple command, spelled any way the parser sees (`/bin/rm`, `\rm`,
//! `env X=1 rm`, `sh -c 'rm ..'`), or any one path, as named or as resolved. Deny wins over
//! allow, and deny rules apply in every mode; a call whose commands or paths the deny rules
//! cannot fully see never runs on its own while such rules exist: it is asked about (`ask`)
//! or refused (`auto`).

mod command;

use crate::exec::ExecutionEnvironment;
use crate::tools::{ApprovalSubject, TargetKind};
use agentd_proto::{ApprovalConfig, ApprovalMode, ApprovalRule};
use command::CommandLine;
use globset::{GlobBuilder, GlobMatcher};
use std::path::{Component, Path, PathBuf};

/// What the policy says about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Run it; nothing needed deciding (`auto` mode, or a tool that never asks).
    Run,
    /// Run it: these allow rules (joined by `, `) cover it in `ask` mode.
    AllowedBy(String),
    /// Refuse it: this deny rule matched.
    DeniedBy(String),
    /// Refuse it for this reason, which no rule gave (running outside the sandbox, or past
    /// deny rules that cannot see all of it, with nobody to ask).
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
pub(crate) fn validate(config: &ApprovalConfig) -> Result<(), String> {
    for rule in config.allow.iter().chain(&config.deny) {
        let rule = parse(rule)?;
        if let Some(pattern) = rule.pattern {
            matcher(pattern, TargetKind::Command)?;
        }
    }
    Ok(())
}

/// The rules of `list` for `tool`: whether a bare one is among them (its text), and the
/// patterns of the others, compiled.
fn rules_for<'c>(
    list: &'c [ApprovalRule],
    tool: &str,
    kind: TargetKind,
) -> (Option<&'c str>, Vec<(&'c str, &'c str, GlobMatcher)>) {
    let mut bare = None;
    let mut patterns = Vec::new();
    for rule in list.iter().filter_map(|r| parse(r).ok()) {
        if rule.tool != tool {
            continue;
        }
        match rule.pattern {
            None => {
                bare.get_or_insert(rule.text);
            }
            Some(pattern) => {
                if let Ok(glob) = matcher(pattern, kind) {
                    patterns.push((rule.text, pattern, glob));
                }
            }
        }
    }
    (bare, patterns)
}

/// A call as the rules see it, made by [`prepare`].
#[derive(Debug)]
pub(crate) struct Prepared {
    /// What the tool said a person approves.
    pub(crate) subject: ApprovalSubject,
    /// What the rules match; `None` when no rule could use it.
    targets: Option<Targets>,
}

#[derive(Debug)]
enum Targets {
    Command(CommandLine),
    Paths {
        paths: Vec<PathTarget>,
        /// The session's directory as named, and as resolved.
        cwd: PathBuf,
        real_cwd: Option<PathBuf>,
    },
}

#[derive(Debug)]
struct PathTarget {
    /// As the model named it, made absolute, with `.` and `..` removed by name.
    named: PathBuf,
    /// Where a write to it leads (`None`: it could not be resolved).
    real: Option<PathBuf>,
}

/// Works out what the rules of `config` for `tool` match in `subject`: the simple commands
/// of a command line, or where each path really leads in `env`. Skipped when no rule could
/// use it (`auto` mode without deny patterns for the tool).
pub(crate) async fn prepare(
    config: &ApprovalConfig,
    tool: &str,
    subject: ApprovalSubject,
    env: &dyn ExecutionEnvironment,
) -> Prepared {
    let kind = subject.kind;
    let (_, deny) = rules_for(&config.deny, tool, kind);
    if config.mode == ApprovalMode::Auto && deny.is_empty() {
        return Prepared {
            subject,
            targets: None,
        };
    }
    let cwd = env.working_directory();
    let real_cwd = env.real_path(cwd).await.ok();
    let targets = match kind {
        TargetKind::Command => {
            let line = subject.targets.concat();
            let mut analysed = tokio::task::spawn_blocking(move || command::analyse(&line))
                .await
                .unwrap_or_else(|_| CommandLine {
                    unvouched: Some("it could not be analysed".into()),
                    hidden: Some("it could not be analysed".into()),
                    ..CommandLine::default()
                });
            // Only allow rules care where redirections lead, and only while nothing else
            // stops them.
            for target in std::mem::take(&mut analysed.redirect_paths) {
                if analysed.unvouched.is_some() {
                    break;
                }
                let real = env.real_path(Path::new(&target)).await.ok();
                let inside = matches!((&real, &real_cwd), (Some(r), Some(c)) if r.starts_with(c));
                if !inside {
                    analysed.unvouched = Some(format!(
                        "it redirects to {target}, which is not inside the session's directory"
                    ));
                }
            }
            Targets::Command(analysed)
        }
        TargetKind::Paths => {
            let mut paths = Vec::with_capacity(subject.targets.len());
            for target in &subject.targets {
                paths.push(PathTarget {
                    named: normalize(&cwd.join(target)),
                    real: env.real_path(Path::new(target)).await.ok(),
                });
            }
            Targets::Paths {
                paths,
                cwd: normalize(cwd),
                real_cwd,
            }
        }
    };
    Prepared {
        subject,
        targets: Some(targets),
    }
}

impl Prepared {
    /// A line for the person asked about this call, when the rules of `config` could not
    /// decide it: why no allow rule can cover it, or why the deny rules cannot check it.
    pub(crate) fn note(&self, config: &ApprovalConfig, tool: &str) -> Option<String> {
        if let Some(Targets::Command(CommandLine {
            unvouched: Some(why),
            ..
        })) = &self.targets
        {
            return Some(format!(
                "(no allow rule can cover this command: {why}; `always` allows it this once)"
            ));
        }
        let (_, deny) = rules_for(&config.deny, tool, self.subject.kind);
        let why = self.hidden().filter(|_| !deny.is_empty())?;
        Some(format!("(the deny rules cannot check this call: {why})"))
    }

    /// The first deny pattern that matches any command or path.
    fn denied<'r>(&self, rules: &[(&'r str, &str, GlobMatcher)]) -> Option<&'r str> {
        let hit = |forms: &[String]| {
            rules
                .iter()
                .find(|(_, _, glob)| forms.iter().any(|f| glob.is_match(f)))
                .map(|(text, _, _)| *text)
        };
        match self.targets.as_ref()? {
            Targets::Command(line) => hit(&line.deny_forms),
            Targets::Paths {
                paths,
                cwd,
                real_cwd,
            } => paths.iter().find_map(|p| {
                let forms = [
                    (Some(p.named.as_path()), Some(cwd.as_path())),
                    (p.real.as_deref(), real_cwd.as_deref()),
                ];
                rules
                    .iter()
                    .find(|(_, pattern, glob)| {
                        forms.iter().any(|(path, base)| {
                            path.and_then(|path| path_form(pattern, path, *base))
                                .is_some_and(|f| glob.is_match(f))
                        })
                    })
                    .map(|(text, _, _)| *text)
            }),
        }
    }

    /// Why deny rules cannot see all of this call, when they cannot.
    fn hidden(&self) -> Option<String> {
        match self.targets.as_ref()? {
            Targets::Command(line) => line.hidden.clone(),
            Targets::Paths { paths, .. } => paths
                .iter()
                .find(|p| p.real.is_none())
                .map(|p| format!("where {} leads could not be resolved", p.named.display())),
        }
    }

    /// The allow patterns that together cover every command or path of the call.
    fn allowed(&self, rules: &[(&str, &str, GlobMatcher)]) -> Option<String> {
        match self.targets.as_ref()? {
            Targets::Command(line) if line.unvouched.is_none() => {
                cover(&line.commands, rules, |c, _| Some(c.clone()))
            }
            Targets::Command(_) => None,
            Targets::Paths {
                paths, real_cwd, ..
            } => cover(paths, rules, |p, pattern| {
                path_form(pattern, p.real.as_deref()?, real_cwd.as_deref())
            }),
        }
    }
}

/// The rules (joined by `, `) that cover every one of `targets`, each seen by a pattern as
/// `form` gives it; `None` when one is not covered, or there are none.
fn cover<T>(
    targets: &[T],
    rules: &[(&str, &str, GlobMatcher)],
    form: impl Fn(&T, &str) -> Option<String>,
) -> Option<String> {
    if targets.is_empty() {
        return None;
    }
    let mut used: Vec<&str> = Vec::new();
    for target in targets {
        let (text, _, _) = rules
            .iter()
            .find(|(_, pattern, glob)| form(target, pattern).is_some_and(|f| glob.is_match(f)))?;
        if !used.contains(text) {
            used.push(text);
        }
    }
    Some(used.join(", "))
}

/// What a path pattern is matched against: the whole path for an absolute pattern, the part
/// below `base` for a relative one (`None` when the path is not below it).
fn path_form(pattern: &str, path: &Path, base: Option<&Path>) -> Option<String> {
    if pattern.starts_with('/') {
        Some(path.display().to_string())
    } else {
        relative(path, base?)
    }
}

fn relative(path: &Path, base: &Path) -> Option<String> {
    match path.strip_prefix(base) {
        Ok(rel) if !rel.as_os_str().is_empty() => Some(rel.display().to_string()),
        _ => None,
    }
}

/// Decides a call of `tool` whose approval subject is `call` (`None`: the tool never asks),
/// in a session whose commands run `sandboxed` or not. A call that asks to leave the sandbox
/// is never allowed by a rule: a person decides, or nobody may.
pub(crate) fn decide(
    config: &ApprovalConfig,
    tool: &str,
    call: Option<&Prepared>,
    sandboxed: bool,
) -> Verdict {
    let Some(call) = call else {
        return Verdict::Run;
    };
    let kind = call.subject.kind;
    let (bare_deny, deny) = rules_for(&config.deny, tool, kind);
    if let Some(rule) = bare_deny.or_else(|| call.denied(&deny)) {
        return Verdict::DeniedBy(rule.to_owned());
    }
    if !deny.is_empty()
        && let Some(why) = call.hidden()
    {
        return match config.mode {
            ApprovalMode::Ask => Verdict::Ask,
            ApprovalMode::Auto => Verdict::Refused(format!(
                "Refused: this session has deny rules for `{tool}` and they cannot check this call ({why}), so it was not run. Write it as plain commands with literal arguments, or ask the user."
            )),
        };
    }
    if call.subject.outside_sandbox && sandboxed {
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
    let (bare_allow, allow) = rules_for(&config.allow, tool, kind);
    match bare_allow
        .map(str::to_owned)
        .or_else(|| call.allowed(&allow))
    {
        Some(rules) => Verdict::AllowedBy(rules),
        None => Verdict::Ask,
    }
}

/// The rule tool name of MCP tools: `mcp(SERVER/TOOL)`.
const MCP: &str = "mcp";

/// What `mcp(...)` patterns match for `server`'s tool `tool`: `SERVER/TOOL`.
pub(crate) fn mcp_target(server: &str, tool: &str) -> String {
    format!("{server}/{tool}")
}

/// The rule allowing exactly `target` (what `allow_always` adds).
pub(crate) fn mcp_rule(target: &str) -> ApprovalRule {
    ApprovalRule(format!("{MCP}({})", escape(target)))
}

/// Decides a call of an MCP tool, `target` being `SERVER/TOOL`: a deny rule (`mcp`, or
/// `mcp(pattern)` matching it) refuses it in every mode; in `auto` mode it runs; in `ask`
/// mode a tool its server calls read-only runs, one it calls destructive is always asked
/// about (no allow rule covers it), and any other runs when an allow rule covers it.
/// Annotations are the server's word: they relax asking only for what says it only reads,
/// never deny rules.
pub(crate) fn decide_mcp(
    config: &ApprovalConfig,
    target: &str,
    read_only: bool,
    destructive: bool,
) -> Verdict {
    let (bare_deny, deny) = rules_for(&config.deny, MCP, TargetKind::Command);
    if let Some(rule) = bare_deny.or_else(|| {
        deny.iter()
            .find(|(_, _, glob)| glob.is_match(target))
            .map(|(text, _, _)| *text)
    }) {
        return Verdict::DeniedBy(rule.to_owned());
    }
    match config.mode {
        ApprovalMode::Auto => Verdict::Run,
        ApprovalMode::Ask if destructive => Verdict::Ask,
        ApprovalMode::Ask if read_only => Verdict::Run,
        ApprovalMode::Ask => {
            let (bare_allow, allow) = rules_for(&config.allow, MCP, TargetKind::Command);
            match bare_allow.map(str::to_owned).or_else(|| {
                allow
                    .iter()
                    .find(|(_, _, glob)| glob.is_match(target))
                    .map(|(text, _, _)| (*text).to_owned())
            }) {
                Some(rule) => Verdict::AllowedBy(rule),
                None => Verdict::Ask,
            }
        }
    }
}

/// The allow rules that `allow_always` adds: this tool with exactly each simple command of
/// the line, or exactly each resolved path. None when rules cannot cover the call (a command
/// the parser cannot vouch for, a path that cannot be resolved): `allow_always` then allows
/// it once.
pub(crate) fn always_rules(tool: &str, call: &Prepared) -> Vec<ApprovalRule> {
    let texts: Vec<String> = match &call.targets {
        Some(Targets::Command(line)) if line.unvouched.is_none() => line.commands.clone(),
        Some(Targets::Paths {
            paths, real_cwd, ..
        }) => {
            let resolved: Option<Vec<String>> = paths
                .iter()
                .map(|p| {
                    let real = p.real.as_ref()?;
                    Some(
                        real_cwd
                            .as_deref()
                            .and_then(|c| relative(real, c))
                            .unwrap_or_else(|| real.display().to_string()),
                    )
                })
                .collect();
            resolved.unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let mut rules: Vec<ApprovalRule> = Vec::new();
    for text in texts {
        let rule = ApprovalRule(format!("{tool}({})", escape(&text)));
        if !rules.contains(&rule) {
            rules.push(rule);
        }
    }
    rules
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
mod tests;
