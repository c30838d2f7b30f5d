//! How approval rules see a `shell` command line. tree-sitter-bash parses it into its simple
//! commands, each a list of words with quotes removed and escapes resolved; only a small set
//! of constructs is *vouched for* (plain words, quoted strings without expansions, `&&`, `||`,
//! `;`, `|`, `|&`, newlines, comments, and redirections, whose files the policy checks).
//! Anything else (substitutions, expansions, globs, assignments, subshells, control flow,
//! here-documents, `eval` and kin, a parse error, a line over [`MAX_LINE`]) means no allow
//! rule with a pattern can cover the line.
//!
//! Deny rules see further: every simple command the parser finds anywhere (inside
//! substitutions, loops, `sh -c` strings), spelled as written and also with its program's
//! directory and the wrappers in front of it (`env`, `command`, `sudo`, `xargs`...) removed.
//! What they cannot see is named in [`CommandLine::hidden`], and the policy never runs such a
//! line on its own while deny rules exist.

use std::collections::HashMap;
use tree_sitter::{Node, Parser};

/// Longest command line analysed; a longer one is vouched for by nobody.
pub(super) const MAX_LINE: usize = 64 * 1024;
/// Deepest nesting of `sh -c` strings deny rules look into.
const MAX_DEPTH: usize = 3;
/// Most wrappers stripped from one command (`env nice timeout 5 rm` is three).
const MAX_WRAPPERS: usize = 8;

/// A command line as the rules see it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct CommandLine {
    /// Each simple command as allow rules match it: its words joined by single spaces, then
    /// its redirections (`echo hi > out.txt`, `cargo test 2>&1`). Only meaningful when
    /// `unvouched` is `None`.
    pub(super) commands: Vec<String>,
    /// Every spelling deny rules match: the whole line, and each simple command found
    /// anywhere, as written, with its program's directory removed (`/bin/rm` → `rm`), and
    /// with each wrapper before it removed (`env X=1 rm x` → `rm x`).
    pub(super) deny_forms: Vec<String>,
    /// Why no allow rule with a pattern can cover the line: the first reason found.
    pub(super) unvouched: Option<String>,
    /// Why deny rules may not see every command the line runs.
    pub(super) hidden: Option<String>,
    /// The files the line's redirections open (except `/dev/null`), as written; the line is
    /// vouched for only when each resolves inside the session's directory.
    pub(super) redirect_paths: Vec<String>,
}

/// Analyses `line` (bounded: [`MAX_LINE`] bytes, [`MAX_DEPTH`] nested shells).
pub(super) fn analyse(line: &str) -> CommandLine {
    let mut out = CommandLine::default();
    out.deny_forms.push(line.trim().to_owned());
    let mut scan = Scan {
        out: &mut out,
        depth: 0,
        changes_dir: false,
    };
    scan.line(line);
    if scan.changes_dir && scan.out.redirect_paths.iter().any(|p| !p.starts_with('/')) {
        scan.unvouched(
            "it redirects to a relative path after changing directory (cd, pushd, popd)".into(),
        );
    }
    out
}

/// One word of a command: its text (quotes removed, escapes resolved) when it is a literal,
/// its source text otherwise.
struct Word {
    text: String,
    literal: bool,
}

/// One simple command, for the rules.
struct Simple {
    words: Vec<Word>,
    /// Its redirections, as rule text (`> out.txt`, `2>&1`).
    redirects: Vec<String>,
}

/// The walk over one line: the top line, or a `sh -c` string at `depth`.
struct Scan<'a> {
    out: &'a mut CommandLine,
    depth: usize,
    /// A top-level command changes the directory relative redirections resolve against.
    changes_dir: bool,
}

impl Scan<'_> {
    /// A construct the parser cannot vouch for: no allow rule covers the top line, and deny
    /// rules may miss what it runs.
    fn syntax(&mut self, why: String) {
        if self.depth == 0 {
            self.unvouched(why.clone());
        }
        self.hidden(why);
    }

    fn unvouched(&mut self, why: String) {
        self.out.unvouched.get_or_insert(why);
    }

    /// Something deny rules cannot see into (allow rules still match it as written).
    fn hidden(&mut self, why: String) {
        self.out.hidden.get_or_insert(why);
    }

    fn line(&mut self, line: &str) {
        if line.len() > MAX_LINE {
            return self.syntax(format!(
                "it is longer than {} KiB, more than the rules parse",
                MAX_LINE / 1024
            ));
        }
        if line.contains('\0') {
            return self.syntax("it contains a NUL byte".into());
        }
        let mut parser = Parser::new();
        let tree = parser
            .set_language(&tree_sitter_bash::LANGUAGE.into())
            .ok()
            .and_then(|()| parser.parse(line, None));
        let Some(tree) = tree else {
            return self.syntax("it could not be parsed".into());
        };
        let root = tree.root_node();
        if root.has_error() {
            self.syntax("it does not parse as a complete shell command".into());
        }
        let src = line.as_bytes();
        let mut commands = Vec::new();
        let mut leaves = Vec::new();
        // Pre-order, without recursion: a deeply nested line cannot exhaust the stack.
        let mut cursor = root.walk();
        'walk: loop {
            let node = cursor.node();
            if let Some(why) = unvouched_kind(&node) {
                self.syntax(format!("it has {why}"));
            }
            match node.kind() {
                "command" => commands.push(node),
                _ if node.child_count() == 0 => leaves.push(node.byte_range()),
                _ => {}
            }
            if cursor.goto_first_child() {
                continue;
            }
            while !cursor.goto_next_sibling() {
                if !cursor.goto_parent() {
                    break 'walk;
                }
            }
        }
        // What the parser skipped must be blanks, or bash may read something it did not.
        let mut at = 0;
        for range in leaves.iter().chain([&(src.len()..src.len())]) {
            let gap = line.get(at..range.start).unwrap_or_default();
            if !gap
                .replace("\\\n", "")
                .chars()
                .all(|c| matches!(c, ' ' | '\t' | '\n'))
            {
                self.syntax("it has a part the parser skipped".into());
            }
            at = at.max(range.end);
        }
        let redirected = redirects_of_statements(root);
        for node in commands {
            let simple = self.simple(node, src, &redirected);
            if self.depth == 0 {
                self.out
                    .commands
                    .push(rule_text(&simple.words, &simple.redirects));
            }
            self.forms(&simple.words, &simple.redirects, MAX_WRAPPERS);
        }
    }

    /// The words and redirections of one `command` node (plus those its enclosing
    /// redirected statement gives it).
    fn simple(&mut self, node: Node<'_>, src: &[u8], redirected: &Redirected<'_>) -> Simple {
        let mut words = Vec::new();
        let mut redirects = Vec::new();
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            match child.kind() {
                "variable_assignment" => {}
                "file_redirect" | "herestring_redirect" => {
                    redirects.push(self.redirect(child, src));
                }
                "command_name" => match child.named_child(0) {
                    Some(name) => words.push(self.word(name, src)),
                    None => words.push(self.word(child, src)),
                },
                _ => words.push(self.word(child, src)),
            }
        }
        for redirect in redirected.get(&node.id()).into_iter().flatten() {
            redirects.push(self.redirect(*redirect, src));
        }
        Simple { words, redirects }
    }

    /// One argument: a literal, or (with a reason recorded) its source text.
    fn word(&mut self, node: Node<'_>, src: &[u8]) -> Word {
        let Some((text, shape)) = literal(node, src) else {
            let text = text(node, src).to_owned();
            self.syntax(format!("it has a word that is not a literal ({text})"));
            return Word {
                text,
                literal: false,
            };
        };
        if let Some(why) = unread_char(&shape) {
            self.syntax(format!("it has {why}"));
        } else if is_pattern(&shape) {
            self.syntax(format!("it has a glob or brace pattern ({text})"));
        }
        Word {
            text,
            literal: true,
        }
    }

    /// A redirection's rule text; records the file it opens.
    fn redirect(&mut self, node: Node<'_>, src: &[u8]) -> String {
        if node.kind() != "file_redirect" {
            // A here-string: the line is unvouched already, and it opens no file.
            return text(node, src).to_owned();
        }
        let mut fd = String::new();
        let mut op = String::new();
        let mut target = None;
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            match child.kind() {
                "file_descriptor" => fd = text(child, src).to_owned(),
                _ if !child.is_named() => op = child.kind().to_owned(),
                _ if target.is_none() => target = Some(child),
                _ => self.syntax("it has a redirection with more than one target".into()),
            }
        }
        let Some(target) = target else {
            return format!("{fd}{op}");
        };
        let target_text = text(target, src);
        let duplicates =
            matches!(op.as_str(), ">&" | "<&") && (target.kind() == "number" || target_text == "-");
        if duplicates {
            return format!("{fd}{op}{target_text}");
        }
        let word = self.word(target, src);
        if self.depth == 0 && word.literal && word.text != "/dev/null" {
            if word.text.starts_with('~') {
                self.unvouched(format!(
                    "it redirects to {}, which starts with ~",
                    word.text
                ));
            }
            self.out.redirect_paths.push(word.text.clone());
        }
        format!("{fd}{op} {}", word.text)
    }

    /// Adds the deny forms of a command, stripping at most `budget` wrappers and looking
    /// into `sh -c`.
    fn forms(&mut self, words: &[Word], redirects: &[String], mut budget: usize) {
        let mut rest = words;
        loop {
            let Some(program) = rest.first() else {
                return;
            };
            self.out.deny_forms.push(rule_text(rest, redirects));
            if !program.literal {
                // Recorded as unvouched where the word was read.
                return;
            }
            let name = program
                .text
                .rsplit('/')
                .next()
                .unwrap_or(&program.text)
                .to_owned();
            if name != program.text {
                let mut form = name.clone();
                for word in &rest[1..] {
                    form.push(' ');
                    form.push_str(&word.text);
                }
                self.out.deny_forms.push(rule_text_after(form, redirects));
            }
            if self.depth == 0 && matches!(name.as_str(), "cd" | "pushd" | "popd") {
                self.changes_dir = true;
            }
            let args = &rest[1..];
            if RUNS_TEXT.contains(&name.as_str()) {
                self.syntax(format!(
                    "it runs `{name}`, which runs text as code or changes what a name runs"
                ));
            }
            if EVALUATES_NAMES.contains(&name.as_str())
                && args.iter().any(|a| a.text.contains(['$', '`']))
            {
                self.syntax(format!(
                    "it passes `{name}` a `$` or backquote, which bash may expand in an array subscript"
                ));
            }
            if SHELLS.contains(&name.as_str()) {
                return self.shell(&name, args);
            }
            if UNREAD_SHELLS.contains(&name.as_str()) {
                return self.hidden(format!(
                    "it runs `{name}`, a shell whose language the rules do not read"
                ));
            }
            let wrapper = WRAPPERS.iter().find(|w| w.name == name);
            if wrapper.is_none() && name != "find" {
                return;
            }
            if budget == 0 {
                return self.hidden(format!(
                    "it has more than {MAX_WRAPPERS} wrappers (env, sudo, find -exec, ...) in front of one command"
                ));
            }
            budget -= 1;
            let Some(wrapper) = wrapper else {
                return self.find_exec(args, budget);
            };
            match wrapper.skip(args) {
                Ok(skipped) => rest = &args[skipped..],
                Err(why) => return self.hidden(why),
            }
        }
    }

    /// A shell's arguments: its `-c` string is analysed as a line of its own; a script or
    /// standard input cannot be seen.
    fn shell(&mut self, name: &str, args: &[Word]) {
        match shell_string(args) {
            Some(script) if self.depth < MAX_DEPTH => {
                let mut inner = Scan {
                    out: &mut *self.out,
                    depth: self.depth + 1,
                    changes_dir: false,
                };
                inner.line(&script);
            }
            Some(_) => self.hidden(format!("it nests shells more than {MAX_DEPTH} deep")),
            None => self.hidden(format!(
                "it runs `{name}` on a script or its input, which the rules cannot read"
            )),
        }
    }

    /// The commands `find` runs with `-exec`, `-execdir`, `-ok` and `-okdir`.
    fn find_exec(&mut self, args: &[Word], budget: usize) {
        let mut at = 0;
        while at < args.len() {
            let starts = matches!(
                args[at].text.as_str(),
                "-exec" | "-execdir" | "-ok" | "-okdir"
            );
            at += 1;
            if starts && args[at - 1].literal {
                let end = args[at..]
                    .iter()
                    .position(|w| w.text == ";" || w.text == "+")
                    .map_or(args.len(), |n| at + n);
                self.forms(&args[at..end], &[], budget);
                at = end;
            }
        }
    }
}

/// Builtins that run text as code or change what a name runs; a line using one is never
/// vouched for.
const RUNS_TEXT: &[&str] = &[
    "eval",
    "exec",
    "source",
    ".",
    "alias",
    "hash",
    "enable",
    "trap",
    "fc",
    "mapfile",
    "readarray",
    "complete",
    "compgen",
    "bind",
    "let",
    "export",
    "declare",
    "typeset",
    "readonly",
    "local",
];

/// Builtins that evaluate an argument as a variable name or a number, where bash expands an
/// array subscript (`read 'a[$(cmd)]'` runs `cmd`).
const EVALUATES_NAMES: &[&str] = &[
    "printf", "read", "test", "[", "unset", "getopts", "wait", "shift", "exit", "return", "kill",
    "ulimit",
];

/// Shells whose `-c` string deny rules read: their simple commands are bash's.
const SHELLS: &[&str] = &[
    "sh", "bash", "rbash", "dash", "ash", "zsh", "ksh", "mksh", "pdksh", "yash", "posh",
];

/// Shells with a language of their own: what they run is hidden from deny rules.
const UNREAD_SHELLS: &[&str] = &["fish", "csh", "tcsh", "nu", "elvish", "xonsh", "pwsh"];

/// The `-c` string of a shell's arguments, when it has one and it is a literal.
fn shell_string(args: &[Word]) -> Option<String> {
    let mut command = false;
    let mut at = 0;
    while let Some(arg) = args.get(at) {
        if !arg.literal {
            return None;
        }
        let t = arg.text.as_str();
        if t == "--" || t == "-" {
            at += 1;
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            at += if matches!(long, "rcfile" | "init-file") {
                2
            } else {
                1
            };
            continue;
        }
        if t.len() > 1 && (t.starts_with('-') || t.starts_with('+')) {
            // `-o NAME` and `-O NAME` take the next word; any number may share one cluster.
            let takes = t[1..].chars().filter(|c| matches!(c, 'o' | 'O')).count();
            command |= t[1..].contains('c');
            at += 1 + takes;
            continue;
        }
        break;
    }
    let script = args.get(at)?;
    (command && script.literal).then(|| script.text.clone())
}

/// A program that runs the command in its arguments, and its options, so that the command's
/// start can be found. An option it does not know hides the command from deny rules.
struct Wrapper {
    name: &'static str,
    /// Short options without an argument.
    flags: &'static str,
    /// Short options taking an argument, attached or as the next word.
    with_arg: &'static str,
    /// Short options whose optional argument can only be attached (`xargs -i{}`).
    attached: &'static str,
    long_flags: &'static [&'static str],
    long_with_arg: &'static [&'static str],
    /// `-` alone is an option (`env -`).
    lone_dash: bool,
    /// `NAME=VALUE` words may come before the command.
    assignments: bool,
    /// Operands before the command (`timeout`'s duration).
    operands: usize,
    /// Short options that make it run a shell, which reads its input when no command
    /// follows (`sudo -s`).
    shell_flags: &'static str,
}

const NONE: Wrapper = Wrapper {
    name: "",
    flags: "",
    with_arg: "",
    attached: "",
    long_flags: &[],
    long_with_arg: &[],
    lone_dash: false,
    assignments: false,
    operands: 0,
    shell_flags: "",
};

const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        name: "command",
        flags: "pvV",
        ..NONE
    },
    Wrapper {
        name: "builtin",
        ..NONE
    },
    Wrapper {
        name: "exec",
        flags: "cl",
        with_arg: "a",
        ..NONE
    },
    Wrapper {
        name: "env",
        flags: "i0v",
        with_arg: "uC",
        long_flags: &["ignore-environment", "null", "debug"],
        long_with_arg: &["unset", "chdir"],
        lone_dash: true,
        assignments: true,
        ..NONE
    },
    Wrapper {
        name: "nice",
        flags: "0123456789",
        with_arg: "n",
        long_with_arg: &["adjustment"],
        ..NONE
    },
    Wrapper {
        name: "nohup",
        ..NONE
    },
    Wrapper {
        name: "time",
        flags: "pavq",
        with_arg: "of",
        long_flags: &["portability", "append", "verbose", "quiet"],
        long_with_arg: &["output", "format"],
        ..NONE
    },
    Wrapper {
        name: "timeout",
        flags: "v",
        with_arg: "ks",
        long_flags: &["foreground", "preserve-status", "verbose"],
        long_with_arg: &["kill-after", "signal"],
        operands: 1,
        ..NONE
    },
    Wrapper {
        name: "xargs",
        flags: "0prtx",
        with_arg: "adEILnPs",
        attached: "eil",
        long_flags: &[
            "null",
            "no-run-if-empty",
            "interactive",
            "verbose",
            "exit",
            "open-tty",
        ],
        long_with_arg: &[
            "arg-file",
            "delimiter",
            "eof",
            "replace",
            "max-lines",
            "max-args",
            "max-procs",
            "max-chars",
            "process-slot-var",
        ],
        ..NONE
    },
    Wrapper {
        name: "sudo",
        flags: "AbEHiKklnPSsBN",
        with_arg: "gCDhpRrTtUu",
        long_flags: &[
            "askpass",
            "background",
            "bell",
            "preserve-env",
            "set-home",
            "login",
            "remove-timestamp",
            "reset-timestamp",
            "non-interactive",
            "preserve-groups",
            "stdin",
            "shell",
        ],
        long_with_arg: &[
            "group",
            "close-from",
            "chdir",
            "host",
            "prompt",
            "chroot",
            "role",
            "type",
            "command-timeout",
            "other-user",
            "user",
        ],
        assignments: true,
        shell_flags: "is",
        ..NONE
    },
    Wrapper {
        name: "doas",
        flags: "ns",
        with_arg: "uC",
        shell_flags: "s",
        ..NONE
    },
    Wrapper {
        name: "stdbuf",
        with_arg: "ioe",
        long_with_arg: &["input", "output", "error"],
        ..NONE
    },
    Wrapper {
        name: "setsid",
        flags: "cfw",
        long_flags: &["ctty", "fork", "wait"],
        ..NONE
    },
    Wrapper {
        name: "busybox",
        ..NONE
    },
    Wrapper {
        name: "coproc",
        ..NONE
    },
];

impl Wrapper {
    /// How many of `args` come before the wrapped command.
    fn skip(&self, args: &[Word]) -> Result<usize, String> {
        let unknown = |arg: &str| {
            Err(format!(
                "it runs `{}` with `{arg}`, an option the rules do not know, so the command it wraps is not seen",
                self.name
            ))
        };
        let mut at = 0;
        let mut shell = false;
        while let Some(arg) = args.get(at) {
            if !arg.literal {
                return unknown(&arg.text);
            }
            let t = arg.text.as_str();
            if t == "--" {
                at += 1;
                break;
            }
            if t == "-" && self.lone_dash {
                at += 1;
                continue;
            }
            if let Some(long) = t.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (long, None),
                };
                at += match (value, self.long_flags.contains(&name)) {
                    (None, true) => 1,
                    _ if !self.long_with_arg.contains(&name) => return unknown(t),
                    (Some(_), _) => 1,
                    (None, _) => 2,
                };
                continue;
            }
            if t.len() < 2 || !t.starts_with('-') {
                break;
            }
            let cluster = &t[1..];
            shell |= cluster.contains(|c| self.shell_flags.contains(c));
            let mut takes_next = false;
            for (i, c) in cluster.char_indices() {
                if self.flags.contains(c) {
                    continue;
                }
                if self.attached.contains(c) {
                    break;
                }
                if self.with_arg.contains(c) {
                    takes_next = i + c.len_utf8() == cluster.len();
                    break;
                }
                return unknown(t);
            }
            at += if takes_next { 2 } else { 1 };
        }
        if self.assignments {
            while args.get(at).is_some_and(|w| is_assignment(&w.text)) {
                at += 1;
            }
        }
        let at = at + self.operands;
        if shell && at >= args.len() {
            return Err(format!(
                "it runs a shell through `{}` that reads its input, which the rules cannot see",
                self.name
            ));
        }
        Ok(at.min(args.len()))
    }
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// Why a node is not vouched for, when it is not.
fn unvouched_kind(node: &Node<'_>) -> Option<String> {
    let kind = node.kind();
    let vouched = if node.is_named() {
        matches!(
            kind,
            "program"
                | "list"
                | "pipeline"
                | "redirected_statement"
                | "command"
                | "command_name"
                | "word"
                | "number"
                | "string"
                | "string_content"
                | "raw_string"
                | "concatenation"
                | "file_redirect"
                | "file_descriptor"
                | "comment"
        )
    } else {
        matches!(
            kind,
            "&&" | "||"
                | ";"
                | "|"
                | "|&"
                | "\""
                | ">"
                | ">>"
                | "<"
                | "&>"
                | "&>>"
                | ">&"
                | "<&"
                | ">|"
                | ">&-"
                | "<&-"
        )
    };
    if vouched && !node.is_missing() {
        return None;
    }
    Some(
        match kind {
            "command_substitution" => "a command substitution ($(...) or `...`)",
            "process_substitution" => "a process substitution (<(...) or >(...))",
            "simple_expansion" | "expansion" | "$" | "${" => "a variable expansion ($NAME)",
            "arithmetic_expansion" | "$((" | "$[" => "an arithmetic expansion",
            "subshell" => "a subshell ( ... )",
            "compound_statement" => "a brace group { ...; }",
            "function_definition" => "a function definition",
            "if_statement"
            | "while_statement"
            | "for_statement"
            | "c_style_for_statement"
            | "case_statement" => "control flow (if, for, while, until, case)",
            "heredoc_redirect" | "heredoc_body" | "heredoc_start" => "a here-document",
            "herestring_redirect" => "a here-string (<<<)",
            "variable_assignment" => "a variable assignment",
            "declaration_command" | "unset_command" => {
                "a declaration (export, declare, readonly, local, unset)"
            }
            "brace_expression" => "a brace pattern ({1..3})",
            "ansi_c_string" | "translated_string" => "a $'...' or $\"...\" string",
            "test_command" => "a test expression ([ ] or [[ ]])",
            "negated_command" => "a negated command (!)",
            "&" => "a background job (&)",
            _ if node.is_error() || node.is_missing() => "a part that does not parse",
            other => return Some(format!("`{other}`, which the rules do not vouch for")),
        }
        .to_owned(),
    )
}

/// The redirections of redirected statements, by the id of the command they apply to.
type Redirected<'t> = HashMap<usize, Vec<Node<'t>>>;

/// The redirections of each redirected statement, keyed by the command they apply to: bash
/// binds `a && b > f` and `a | b > f` to `b`.
fn redirects_of_statements(root: Node<'_>) -> Redirected<'_> {
    let mut out = Redirected::new();
    let mut cursor = root.walk();
    'walk: loop {
        let node = cursor.node();
        if node.kind() == "redirected_statement" {
            let mut target = node.child_by_field_name("body");
            while let Some(t) = target.filter(|t| t.kind() != "command") {
                target = match t.kind() {
                    "list" | "pipeline" | "redirected_statement" => t
                        .named_child_count()
                        .checked_sub(1)
                        .and_then(|last| t.named_child(u32::try_from(last).ok()?)),
                    _ => None,
                };
            }
            if let Some(command) = target {
                let mut c = node.walk();
                out.entry(command.id())
                    .or_default()
                    .extend(node.children_by_field_name("redirect", &mut c));
            }
        }
        if cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                break 'walk;
            }
        }
    }
    out
}

/// The literal value of a word-like node and its *shape*: the same text with every quoted or
/// escaped character replaced by `x`, so that only the characters bash would act on remain.
/// `None` when the node holds an expansion or anything else that is not a literal.
fn literal(node: Node<'_>, src: &[u8]) -> Option<(String, String)> {
    let raw = text(node, src);
    match node.kind() {
        "word" | "number" => {
            let mut value = String::new();
            let mut shape = String::new();
            let mut chars = raw.chars();
            while let Some(c) = chars.next() {
                if c != '\\' {
                    value.push(c);
                    shape.push(c);
                    continue;
                }
                match chars.next() {
                    Some('\n') => {}
                    Some(escaped) => {
                        value.push(escaped);
                        shape.push('x');
                    }
                    None => {
                        value.push('\\');
                        shape.push('x');
                    }
                }
            }
            Some((value, shape))
        }
        "raw_string" => {
            let inner = raw.strip_prefix('\'')?.strip_suffix('\'')?;
            Some((inner.to_owned(), "x".repeat(inner.chars().count())))
        }
        "string" => {
            let mut cursor = node.walk();
            if node
                .named_children(&mut cursor)
                .any(|c| c.kind() != "string_content")
            {
                return None;
            }
            let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
            let mut value = String::new();
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                match c {
                    // Expansions tree-sitter did not mark: not a literal after all.
                    '$' | '`' => return None,
                    '\\' => match chars.next() {
                        Some('\n') => {}
                        Some(e @ ('$' | '`' | '"' | '\\')) => value.push(e),
                        Some(other) => {
                            value.push('\\');
                            value.push(other);
                        }
                        None => value.push('\\'),
                    },
                    c => value.push(c),
                }
            }
            let shape = "x".repeat(value.chars().count());
            Some((value, shape))
        }
        "concatenation" => {
            let mut value = String::new();
            let mut shape = String::new();
            let mut cursor = node.walk();
            for part in node.children(&mut cursor) {
                let (v, s) = literal(part, src)?;
                value.push_str(&v);
                shape.push_str(&s);
            }
            Some((value, shape))
        }
        _ => None,
    }
}

/// Characters bash would act on that tree-sitter left inside an unquoted word: the two read
/// the line differently, so neither reading can be trusted.
fn unread_char(shape: &str) -> Option<String> {
    shape
        .chars()
        .find(|c| "$`;&|()<>'\"".contains(*c) || c.is_whitespace())
        .map(|c| format!("a {c:?} the parser read as part of a word"))
}

/// Whether unquoted text would be expanded by bash into other words: a glob (`*`, `?`,
/// `[`) or a brace expansion (`{a,b}`, `{1..3}`).
fn is_pattern(shape: &str) -> bool {
    if shape.contains(['*', '?', '[']) {
        return true;
    }
    shape.find('{').is_some_and(|open| {
        let after = &shape[open..];
        let close = after.rfind('}').unwrap_or(0);
        let inside = &after[..close];
        inside.contains(',') || inside.contains("..")
    })
}

fn text<'s>(node: Node<'_>, src: &'s [u8]) -> &'s str {
    node.utf8_text(src).unwrap_or_default()
}

fn rule_text(words: &[Word], redirects: &[String]) -> String {
    let joined = words
        .iter()
        .map(|w| w.text.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    rule_text_after(joined, redirects)
}

fn rule_text_after(mut text: String, redirects: &[String]) -> String {
    for redirect in redirects {
        text.push(' ');
        text.push_str(redirect);
    }
    text
}

#[cfg(test)]
mod tests;
