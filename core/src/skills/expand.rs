//! What the model is given for a user's input: `/name args` naming a prompt command expands
//! to its template (`$ARGUMENTS`, `$1`..`$9`); `/name` or `$name` naming a skill puts the
//! skill's text before the input (once: an active skill is not loaded again). Anything else,
//! an unknown `/name` included, goes as typed.

use super::Catalog;
use std::sync::Arc;

/// An input's expansion.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Expansion {
    /// What the model is given instead of the input; `None`: the input as typed.
    pub(crate) expanded: Option<String>,
    /// Problems to report (a file that could not be read).
    pub(crate) warnings: Vec<String>,
}

/// `args` split as a shell would split plain words and quoted strings (no expansions).
fn split_args(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote = None;
    for c in args.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}

/// The longest expansion of a command: a template naming `$1` thousands of times with a
/// long argument would otherwise make gigabytes (a subagent's task may be such an input).
const MAX_EXPANDED: usize = 1 << 20;

/// `template` with `$ARGUMENTS` and `$1`..`$9` replaced (a missing argument is empty); the
/// arguments are appended when the template names none of them. `None` past
/// [`MAX_EXPANDED`] bytes.
pub(super) fn substitute(template: &str, args: &str) -> Option<String> {
    let words = split_args(args);
    let mut out = String::with_capacity(template.len() + args.len());
    let mut used = false;
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(args);
            used = true;
            rest = tail;
        } else if let Some(d) = after.bytes().next().filter(|b| (b'1'..=b'9').contains(b)) {
            if let Some(word) = words.get(usize::from(d - b'1')) {
                out.push_str(word);
            }
            used = true;
            rest = &after[1..];
        } else {
            out.push('$');
            rest = after;
        }
        if out.len() > MAX_EXPANDED {
            return None;
        }
    }
    out.push_str(rest);
    if !used && !args.is_empty() {
        out.push_str("\n\nARGUMENTS: ");
        out.push_str(args);
    }
    (out.len() <= MAX_EXPANDED).then_some(out)
}

/// The skill names an input calls for: a leading `/name`, and each `$name` word.
fn named_skills<'a>(catalog: &Catalog, text: &'a str) -> Vec<&'a str> {
    let mut names = Vec::new();
    let words = text.split_whitespace();
    for (i, word) in words.enumerate() {
        let name = match (i, word.strip_prefix('/'), word.strip_prefix('$')) {
            (0, Some(name), _) => name,
            (_, _, Some(name)) => name.trim_end_matches(['.', ',', ';', '!', '?', ')']),
            _ => continue,
        };
        if catalog.skill(name).is_some() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Expands `text` (blocking: reads the files it names).
fn expand_blocking(catalog: &Catalog, active: &[String], text: &str) -> Expansion {
    let mut expansion = Expansion::default();
    let trimmed = text.trim_start();
    if let Some(rest) = trimmed.strip_prefix('/') {
        let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        if let Some(command) = catalog.command(name) {
            match catalog.template(command) {
                Ok(template) => match substitute(&template, args.trim()) {
                    Some(expanded) => expansion.expanded = Some(super::defang(&expanded)),
                    None => expansion.warnings.push(format!(
                        "the command /{name} would expand past {} MiB; the input went as typed",
                        MAX_EXPANDED >> 20
                    )),
                },
                Err(e) => expansion.warnings.push(format!(
                    "the command /{name} could not be read ({e}); the input went as typed"
                )),
            }
            return expansion;
        }
    }
    let mut blocks = Vec::new();
    for name in named_skills(catalog, text) {
        let Some(skill) = catalog.skill(name) else {
            continue;
        };
        if active.contains(&skill.name) {
            continue;
        }
        match catalog.load(skill) {
            Ok(block) => blocks.push(block),
            Err(e) => expansion
                .warnings
                .push(format!("the skill {name} could not be read: {e}")),
        }
    }
    if !blocks.is_empty() {
        blocks.push(super::defang(text));
        expansion.expanded = Some(blocks.join("\n\n"));
    }
    expansion
}

/// Expands a user's input for the model, reading what it names off the async workers.
pub(crate) async fn expand(catalog: Arc<Catalog>, active: Vec<String>, text: &str) -> Expansion {
    let may_name = text.trim_start().starts_with('/') || text.contains('$');
    if !may_name || (catalog.skills.is_empty() && catalog.commands.is_empty()) {
        return Expansion::default();
    }
    let text = text.to_owned();
    tokio::task::spawn_blocking(move || expand_blocking(&catalog, &active, &text))
        .await
        .unwrap_or_else(|e| Expansion {
            expanded: None,
            warnings: vec![format!("expanding the input crashed: {e}")],
        })
}
