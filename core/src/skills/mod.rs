//! Agent Skills (the agentskills.io format) and prompt commands: found once when a session
//! is made or loaded (`discover.rs`, bounded reads in `read.rs`, lenient frontmatter in
//! `frontmatter.rs`), listed in the system prompt within a budget (`prompt.rs`), loaded into
//! the conversation by the model's `activate_skill` (`tool.rs`) or the user's `/name` and
//! `$name`, and prompt templates expanded from `/name args` (`expand.rs`). Which skills are
//! active is read from the conversation itself (`active.rs`), so it follows rollbacks, forks
//! and restarts, and a compaction carries their text over.
//!
//! Skill and command files are text for the model: reading them needs no trust, but every
//! read is bounded and none reaches agentd's own files.

mod active;
mod cache;
mod discover;
mod expand;
mod frontmatter;
mod prompt;
mod read;
mod tool;

pub(crate) use active::{active, carried_over};
pub(crate) use cache::Cache;
pub(crate) use expand::{Expansion, expand};
pub(crate) use tool::{ActivateSkill, Skills, defang};

use crate::exec::ProtectedPaths;
use agentd_proto::{CommandInfo, CommandKind, CommandsResponse, ExtensionScope, SkillInfo};
use std::path::PathBuf;

/// Where skills and commands are looked for.
#[derive(Debug, Clone, Default)]
pub(crate) struct Roots {
    /// The workspace (`.agents/skills`, `.claude/skills`, `.agents/commands`,
    /// `.claude/commands`); `None` for a session whose files are on another machine.
    pub(crate) project: Option<PathBuf>,
    /// The user's home (`~/.agents/skills`, `~/.claude/skills`).
    pub(crate) home: Option<PathBuf>,
    /// agentd's config directory (`commands`).
    pub(crate) config: Option<PathBuf>,
}

impl Roots {
    /// The user's directories as the daemon's environment names them (`$HOME`,
    /// `$XDG_CONFIG_HOME`), and `project` when the session's files are on this machine.
    pub(crate) fn for_user(project: Option<PathBuf>) -> Self {
        Self {
            project,
            home: directories::BaseDirs::new().map(|d| d.home_dir().to_owned()),
            config: crate::config::default_config_dir(),
        }
    }
}

/// A skill found on disk; its body is read when it is activated.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Skill {
    pub(crate) name: String,
    pub(crate) description: String,
    /// The directory holding `SKILL.md`.
    pub(crate) dir: PathBuf,
    pub(crate) scope: ExtensionScope,
}

/// A prompt template found on disk; its text is read when it is used.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Command {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) argument_hint: Option<String>,
    pub(crate) file: PathBuf,
    pub(crate) scope: ExtensionScope,
}

/// What a session found, sorted by name, with the problems met.
#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    pub(crate) skills: Vec<Skill>,
    pub(crate) commands: Vec<Command>,
    pub(crate) warnings: Vec<String>,
    /// What skill and command files may be.
    pub(super) readable: read::Readable,
}

impl Catalog {
    /// Finds the skills and commands of `roots` (blocking: call it off the async workers),
    /// reading again only the files changed since `cache` saw them.
    pub(crate) fn discover(roots: &Roots, protected: &ProtectedPaths, cache: &Cache) -> Self {
        let readable = read::Readable {
            protected: protected.clone(),
            commands: roots
                .config
                .as_ref()
                .and_then(|c| std::fs::canonicalize(c.join("commands")).ok()),
        };
        discover::discover(roots, &readable, cache)
    }

    pub(crate) fn skill(&self, name: &str) -> Option<&Skill> {
        self.skills
            .binary_search_by(|s| s.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.skills[i])
    }

    pub(crate) fn command(&self, name: &str) -> Option<&Command> {
        self.commands
            .binary_search_by(|c| c.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.commands[i])
    }

    /// The skills as `session/get` shows them.
    pub(crate) fn skill_infos(&self, active: &[String]) -> Vec<SkillInfo> {
        self.skills
            .iter()
            .map(|s| SkillInfo {
                name: s.name.clone(),
                description: s.description.clone(),
                path: s.dir.display().to_string(),
                scope: s.scope,
                active: active.contains(&s.name),
            })
            .collect()
    }

    /// The answer of `session/commands`: prompt commands, then the skills no command hides.
    pub(crate) fn commands_response(&self) -> CommandsResponse {
        let prompts = self.commands.iter().map(|c| CommandInfo {
            name: c.name.clone(),
            kind: CommandKind::Prompt,
            description: c.description.clone(),
            argument_hint: c.argument_hint.clone(),
            scope: c.scope,
            path: c.file.display().to_string(),
        });
        let skills = self
            .skills
            .iter()
            .filter(|s| self.command(&s.name).is_none())
            .map(|s| CommandInfo {
                name: s.name.clone(),
                kind: CommandKind::Skill,
                description: s.description.clone(),
                argument_hint: None,
                scope: s.scope,
                path: s.dir.join("SKILL.md").display().to_string(),
            });
        CommandsResponse {
            commands: prompts.chain(skills).collect(),
            warnings: self.warnings.clone(),
        }
    }

    /// The system prompt's list of skills (empty without skills).
    pub(crate) fn prompt_section(&self) -> String {
        prompt::section(&self.skills)
    }

    /// A skill's instructions as the conversation holds them (blocking).
    pub(crate) fn load(&self, skill: &Skill) -> Result<String, String> {
        tool::content(skill, &self.readable)
    }

    /// A command's template (blocking).
    fn template(&self, command: &Command) -> Result<String, String> {
        let text = read::read_capped(&command.file, discover::MAX_COMMAND_BYTES, &self.readable)?;
        Ok(frontmatter::split(&text).body.trim().to_owned())
    }
}

#[cfg(test)]
mod tests;
