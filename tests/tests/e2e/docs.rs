//! The README and the pages in docs/ stay true: every `agentctl` command line in them parses
//! with the CLI definition, every config snippet passes `agentd --check-config`, every link
//! leads somewhere, and every command is documented. `newcomer.rs` runs the quick start and
//! each editor's set-up from their text.

use agentd_tests::bin_dir;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// README.md and every hand-written page of docs/ (protocol.md is generated), with their text.
fn pages() -> Vec<(PathBuf, String)> {
    let mut paths = vec![repo().join("README.md")];
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") && !path.ends_with("protocol.md") {
            paths.push(path);
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

/// The fenced blocks of `text` whose info string starts with one of `languages`.
pub(crate) fn blocks<'a>(text: &'a str, languages: &[&str]) -> Vec<&'a str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let info_end = after.find('\n').unwrap_or(after.len());
        let info = after[..info_end].trim();
        let body = &after[(info_end + 1).min(after.len())..];
        let end = body.find("\n```").map_or(body.len(), |e| e + 1);
        if languages
            .iter()
            .any(|l| info.split_whitespace().next() == Some(l))
        {
            found.push(&body[..end]);
        }
        rest = &body[(end + 3).min(body.len())..];
    }
    found
}

/// Splits a shell line into words: quotes removed, a `#` word ends it.
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    word.push(q);
                }
            }
            '#' if !in_word => break,
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// The `agentctl` invocations a shell block shows, each as its arguments: continuation lines
/// joined, a pipe's last command taken, `[--flag]` shown as optional taken as given, and
/// `a|b|c` alternatives each taken.
pub(crate) fn agentctl_lines(block: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for line in block.replace("\\\n", " ").lines() {
        let command = line.rsplit(" | ").next().unwrap_or(line);
        let command = command.trim().trim_start_matches("./target/release/");
        let Some(args) = command.strip_prefix("agentctl ") else {
            continue;
        };
        let args: Vec<String> = words(args)
            .into_iter()
            .map(|w| w.replace(['[', ']'], "").trim_end_matches("...").to_owned())
            // Placeholders of numbers stand for one.
            .map(|w| match w.as_str() {
                "SEQ" | "N" => "3".to_owned(),
                _ => w,
            })
            .filter(|w| !w.is_empty())
            .collect();
        let alternatives = args
            .iter()
            .position(|w| w.contains('|') && !w.contains(' '));
        match alternatives {
            Some(i) => {
                for alternative in args[i].split('|') {
                    let mut one = args.clone();
                    one[i] = alternative.to_owned();
                    found.push(one);
                }
            }
            None => found.push(args),
        }
    }
    found
}

/// Every `agentctl` line in the README and docs/ parses: with `--help` appended, clap reads
/// every argument (an unknown flag or a bad value fails with exit 2) and then prints the help
/// instead of running anything.
#[test]
fn every_agentctl_line_in_the_docs_parses() {
    let mut checked = 0;
    for (path, text) in pages() {
        for block in blocks(&text, &["sh", "bash"]) {
            for args in agentctl_lines(block) {
                let out = Command::new(bin_dir().join("agentctl"))
                    .args(&args)
                    .arg("--help")
                    .env("AGENTD_NO_AUTOSTART", "1")
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{}: `agentctl {}` does not parse: {}",
                    path.display(),
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr)
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} lines found: is the parser broken?"
    );
}

/// Every TOML snippet in the README and docs/ is a valid agentd config file (a snippet of
/// another program's file says so in its first line).
#[test]
fn every_config_snippet_passes_check_config() {
    let mut checked = 0;
    for (path, text) in pages() {
        for block in blocks(&text, &["toml"]) {
            if block.starts_with("# ~/") {
                continue;
            }
            let home = tempfile::tempdir().unwrap();
            let config = home.path().join("config.toml");
            std::fs::write(&config, block).unwrap();
            let out = Command::new(bin_dir().join("agentd"))
                .arg("--check-config")
                .env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .env("HOME", home.path())
                .env("XDG_CONFIG_HOME", home.path().join("config"))
                .env("XDG_STATE_HOME", home.path().join("state"))
                .env("XDG_RUNTIME_DIR", home.path().join("run"))
                .env("AGENTD_CONFIG", &config)
                .env("ANTHROPIC_API_KEY", "test-key")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}: this snippet is refused:\n{block}\n{}{}",
                path.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            checked += 1;
        }
    }
    assert!(checked >= 7, "only {checked} snippets found");
}

/// GitHub's anchor for a heading.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every relative link in the README and docs/ leads to a file that exists, and to a heading
/// of it when it names one.
#[test]
fn every_link_in_the_docs_leads_somewhere() {
    for (path, text) in pages() {
        let dir = path.parent().unwrap();
        for link in text.split("](").skip(1) {
            let target = &link[..link.find(')').unwrap()];
            if target.starts_with("http") {
                continue;
            }
            let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
            let file = if file.is_empty() {
                path.clone()
            } else {
                dir.join(file)
            };
            assert!(
                file.exists(),
                "{}: the link ({target}) leads nowhere",
                path.display()
            );
            if !fragment.is_empty() {
                let page = std::fs::read_to_string(&file).unwrap();
                assert!(
                    page.lines()
                        .filter_map(|l| l.strip_prefix('#'))
                        .any(|h| anchor(h.trim_start_matches('#')) == fragment),
                    "{}: ({target}) names no heading of {}",
                    path.display(),
                    file.display()
                );
            }
        }
    }
}

/// The commands `agentctl ARGS --help` lists.
fn subcommands(args: &[&str]) -> Vec<String> {
    let out = Command::new(bin_dir().join("agentctl"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split("Commands:")
        .nth(1)
        .unwrap_or_default()
        .split("\n\n")
        .next()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help")
        .collect()
}

/// Every command and `daemon` subcommand `agentctl --help` lists is shown in the README or
/// docs/.
#[test]
fn the_docs_show_every_command() {
    let docs: String = pages().into_iter().map(|(_, text)| text).collect();
    let top = subcommands(&[]);
    assert!(top.contains(&"login".to_owned()), "{top:?}");
    for c in &top {
        assert!(
            docs.contains(&format!("agentctl {c}")),
            "neither README.md nor docs/ shows `agentctl {c}`"
        );
    }
    let daemon_lines: Vec<&str> = docs
        .lines()
        .filter(|l| l.starts_with("agentctl daemon "))
        .collect();
    for c in subcommands(&["daemon"]) {
        assert!(
            daemon_lines.iter().any(|l| l.contains(&c)),
            "neither README.md nor docs/ shows `agentctl daemon {c}`: {daemon_lines:?}"
        );
    }
}
