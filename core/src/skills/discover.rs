//! Finding skills and commands: each root directory listed once (a bounded number of
//! entries), each `SKILL.md` or command file read once within its cap, problems kept as
//! warnings. Runs on the blocking pool when a session is made or loaded; a file unchanged
//! since the last discovery is not read again (`cache.rs`).

use super::cache::{Cache, FileKey, Outcome, RootFiles, kept, lookup};
use super::frontmatter::{self, Frontmatter};
use super::read::{Readable, read_keyed};
use super::{Catalog, Command, Roots, Skill};
use agentd_proto::ExtensionScope;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Most bytes of a `SKILL.md` (the spec asks for bodies under about 5,000 tokens).
pub(super) const MAX_SKILL_BYTES: u64 = 256 * 1024;
/// Most bytes of a command file.
pub(super) const MAX_COMMAND_BYTES: u64 = 64 * 1024;
/// Entries looked at in one root directory: a directory of a million entries costs no more.
const MAX_ENTRIES: usize = 1000;
/// Most skills, and most commands, a session keeps.
pub(super) const MAX_ITEMS: usize = 256;
/// The spec's limits.
const MAX_NAME: usize = 64;
const MAX_DESCRIPTION: usize = 1024;
const MAX_COMPATIBILITY: usize = 500;
/// Most warnings kept; the rest are counted in the last.
const MAX_WARNINGS: usize = 50;

/// Whether `name` follows the spec: 1-64 lowercase letters, digits and single hyphens, not
/// at either end.
pub(super) fn is_spec_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// Whether `name` can be typed after `/` and passed as a tool argument: what agentd accepts
/// from collections that do not follow the spec to the letter (capitals, `_`, `.`, `:`).
fn is_usable_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// `text` on one line, cut at `max` characters; control characters (a terminal's escapes,
/// which a hostile repository's description may hold) become spaces.
pub(super) fn one_line(text: &str, max: usize) -> String {
    let joined = text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    match joined.char_indices().nth(max) {
        Some((cut, _)) => joined[..cut].to_owned(),
        None => joined,
    }
}

struct Found {
    catalog: Catalog,
    dropped_warnings: usize,
}

impl Found {
    fn warn(&mut self, warning: String) {
        if self.catalog.warnings.len() < MAX_WARNINGS {
            self.catalog.warnings.push(warning);
        } else {
            self.dropped_warnings += 1;
        }
    }

    fn warn_all(&mut self, warnings: Vec<String>) {
        for w in warnings {
            self.warn(w);
        }
    }
}

/// The directories in their order of precedence: the project's first.
fn skill_roots(roots: &Roots) -> Vec<(PathBuf, ExtensionScope)> {
    let mut dirs = Vec::new();
    if let Some(p) = &roots.project {
        dirs.push((p.join(".agents/skills"), ExtensionScope::Project));
        dirs.push((p.join(".claude/skills"), ExtensionScope::Project));
    }
    if let Some(h) = &roots.home {
        dirs.push((h.join(".agents/skills"), ExtensionScope::User));
        dirs.push((h.join(".claude/skills"), ExtensionScope::User));
    }
    dirs
}

fn command_roots(roots: &Roots) -> Vec<(PathBuf, ExtensionScope)> {
    let mut dirs = Vec::new();
    if let Some(p) = &roots.project {
        dirs.push((p.join(".agents/commands"), ExtensionScope::Project));
        dirs.push((p.join(".claude/commands"), ExtensionScope::Project));
    }
    if let Some(c) = &roots.config {
        dirs.push((c.join("commands"), ExtensionScope::User));
    }
    dirs
}

/// A root's entries, sorted by name, at most [`MAX_ENTRIES`] looked at. A missing root has
/// none.
fn entries(dir: &Path, found: &mut Found) -> Vec<(String, PathBuf)> {
    let read = match std::fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Vec::new(),
        Err(e) => {
            found.warn(format!("{}: {e}", dir.display()));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for entry in read.take(MAX_ENTRIES + 1).flatten() {
        if out.len() == MAX_ENTRIES {
            found.warn(format!(
                "{}: only its first {MAX_ENTRIES} entries were looked at",
                dir.display()
            ));
            break;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        // A name with a control character (a newline forging the system prompt's structure,
        // a terminal escape for whoever reads the warnings) is not looked at.
        if name.chars().any(char::is_control) {
            found.warn(format!(
                "{}: {:?} was left out: its name holds control characters",
                dir.display(),
                name
            ));
        } else if !name.starts_with('.') {
            out.push((name, entry.path()));
        }
    }
    out.sort();
    out
}

/// Reads one skill directory: no skill (with a warning) when it cannot be used; the file's
/// key when it was read.
fn skill(
    dir_name: &str,
    dir: &Path,
    scope: ExtensionScope,
    readable: &Readable,
) -> (Option<FileKey>, Outcome<Skill>) {
    let mut warnings = Vec::new();
    let file = dir.join("SKILL.md");
    let (text, key) = match read_keyed(&file, MAX_SKILL_BYTES, readable) {
        Ok(read) => read,
        // A directory without SKILL.md (or a file beside the skills) is not a skill.
        Err(_) if !file.exists() => {
            return (
                None,
                Outcome {
                    item: None,
                    warnings,
                },
            );
        }
        Err(e) => {
            warnings.push(format!("skill skipped: {e}"));
            return (
                None,
                Outcome {
                    item: None,
                    warnings,
                },
            );
        }
    };
    let item = parse_skill(dir_name, dir, &file, &text, scope, &mut warnings);
    (Some(key), Outcome { item, warnings })
}

fn parse_skill(
    dir_name: &str,
    dir: &Path,
    file: &Path,
    text: &str,
    scope: ExtensionScope,
    warnings: &mut Vec<String>,
) -> Option<Skill> {
    let shown = file.display();
    let Some(yaml) = frontmatter::split(text).yaml else {
        warnings.push(format!(
            "skill skipped: {shown} has no YAML frontmatter (--- lines)"
        ));
        return None;
    };
    let (front, warning) = frontmatter::parse(yaml);
    if let Some(w) = warning {
        warnings.push(format!("{shown}: {w}"));
    }
    let Frontmatter {
        name,
        description,
        compatibility,
        ..
    } = front;
    let Some(description) = description.filter(|d| !d.trim().is_empty()) else {
        warnings.push(format!("skill skipped: {shown} has no description"));
        return None;
    };
    let name = match name {
        Some(name) => name.trim().to_owned(),
        None => {
            warnings.push(format!(
                "{shown}: no name; the directory's name {dir_name:?} is used"
            ));
            dir_name.to_owned()
        }
    };
    if !is_usable_name(&name) {
        warnings.push(format!(
            "skill skipped: {shown}: its name {:?} is not 1-64 letters, digits, `-`, `_`, `.` or `:`",
            one_line(&name, 80)
        ));
        return None;
    }
    if !is_spec_name(&name) {
        warnings.push(format!(
            "{shown}: the name {name:?} breaks the spec's rule (lowercase letters, digits and single hyphens); it is used as it is"
        ));
    }
    if name != dir_name {
        warnings.push(format!(
            "{shown}: the name {name:?} differs from its directory's {dir_name:?}"
        ));
    }
    if description.chars().count() > MAX_DESCRIPTION {
        warnings.push(format!(
            "{shown}: its description is longer than {MAX_DESCRIPTION} characters; it is cut"
        ));
    }
    if compatibility.is_some_and(|c| c.chars().count() > MAX_COMPATIBILITY) {
        warnings.push(format!(
            "{shown}: its compatibility is longer than {MAX_COMPATIBILITY} characters"
        ));
    }
    Some(Skill {
        name,
        description: one_line(&description, MAX_DESCRIPTION),
        dir: dir.to_owned(),
        scope,
    })
}

/// Reads one command file: no command (with a warning) when it cannot be used; the file's
/// key when it was read.
fn command(
    name: &str,
    file: &Path,
    scope: ExtensionScope,
    readable: &Readable,
) -> (Option<FileKey>, Outcome<Command>) {
    let mut warnings = Vec::new();
    let (text, key) = match read_keyed(file, MAX_COMMAND_BYTES, readable) {
        Ok(read) => read,
        Err(e) => {
            warnings.push(format!("command skipped: {e}"));
            return (
                None,
                Outcome {
                    item: None,
                    warnings,
                },
            );
        }
    };
    let split = frontmatter::split(&text);
    let front = match split.yaml {
        Some(yaml) => {
            let (front, warning) = frontmatter::parse(yaml);
            if let Some(w) = warning {
                warnings.push(format!("{}: {w}", file.display()));
            }
            front
        }
        None => Frontmatter::default(),
    };
    // Without a description, the template's first line says what it does.
    let description = front
        .description
        .filter(|d| !d.trim().is_empty())
        .unwrap_or_else(|| {
            split
                .body
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or_default()
                .trim_start_matches('#')
                .to_owned()
        });
    let item = Some(Command {
        name: name.to_owned(),
        description: one_line(&description, 200),
        argument_hint: front.argument_hint.map(|h| one_line(&h, 200)),
        file: file.to_owned(),
        scope,
    });
    (Some(key), Outcome { item, warnings })
}

/// Finds the skills and commands of `roots`, reading only the files `cache` does not know
/// unchanged.
pub(super) fn discover(roots: &Roots, readable: &Readable, cache: &Cache) -> Catalog {
    let mut found = Found {
        catalog: Catalog::default(),
        dropped_warnings: 0,
    };
    let mut skills: BTreeMap<String, Skill> = BTreeMap::new();
    for (root, scope) in skill_roots(roots) {
        let (mut before, mut now) = (cache.take_skills(&root), RootFiles::new());
        for (dir_name, dir) in entries(&root, &mut found) {
            let outcome = lookup(
                &dir.join("SKILL.md"),
                &dir_name,
                &mut before,
                &mut now,
                || skill(&dir_name, &dir, scope, readable),
            );
            found.warn_all(outcome.warnings);
            let Some(skill) = outcome.item else {
                continue;
            };
            if let Some(first) = skills.get(&skill.name) {
                // A project's overrides the user's silently; two of one scope are a mistake.
                if first.scope == skill.scope {
                    found.warn(format!(
                        "skill {:?} in {} is shadowed by the one in {}",
                        skill.name,
                        skill.dir.display(),
                        first.dir.display()
                    ));
                }
                continue;
            }
            if skills.len() == MAX_ITEMS {
                found.warn(format!(
                    "more than {MAX_ITEMS} skills: {} and later ones are not offered",
                    skill.dir.display()
                ));
                break;
            }
            skills.insert(skill.name.clone(), skill);
        }
        cache.put_skills(root, kept(before, now));
    }
    let mut commands: BTreeMap<String, Command> = BTreeMap::new();
    for (root, scope) in command_roots(roots) {
        let (mut before, mut now) = (cache.take_commands(&root), RootFiles::new());
        for (file_name, file) in entries(&root, &mut found) {
            let Some(name) = file_name.strip_suffix(".md") else {
                continue;
            };
            if !is_usable_name(name) {
                found.warn(format!(
                    "command skipped: {}: its name is not 1-64 letters, digits, `-`, `_`, `.` or `:`",
                    file.display()
                ));
                continue;
            }
            let outcome = lookup(&file, &file_name, &mut before, &mut now, || {
                command(name, &file, scope, readable)
            });
            found.warn_all(outcome.warnings);
            let Some(command) = outcome.item else {
                continue;
            };
            if commands.contains_key(&command.name) {
                continue;
            }
            if commands.len() == MAX_ITEMS {
                found.warn(format!(
                    "more than {MAX_ITEMS} commands: {} and later ones are not offered",
                    file.display()
                ));
                break;
            }
            commands.insert(command.name.clone(), command);
        }
        cache.put_commands(root, kept(before, now));
    }
    if found.dropped_warnings > 0 {
        let n = found.dropped_warnings;
        found
            .catalog
            .warnings
            .push(format!("... and {n} more warnings"));
    }
    found.catalog.readable = readable.clone();
    found.catalog.skills = skills.into_values().collect();
    found.catalog.commands = commands.into_values().collect();
    found.catalog
}
