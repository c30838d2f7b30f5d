//! Agent Skills (the agentskills.io format) and prompt commands a session found in its
//! workspace and the user's directories, as `session/get` and `session/commands` show them.

use crate::names::names;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

names! {
    /// Where a skill or command was found; a project's overrides the user's of the same name.
    pub enum ExtensionScope ("extension scope") {
        /// The session's workspace (`.agents/` or `.claude/` in its directory).
        Project = "project",
        /// The user's own (`~/.agents/skills`, `~/.claude/skills`, the config directory's
        /// `commands`).
        User = "user",
    }
}

names! {
    /// What a `/name` input runs.
    pub enum CommandKind ("command kind") {
        /// An Agent Skill: `/name` (or `$name`) loads its instructions.
        Skill = "skill",
        /// A prompt template: `/name args` expands to it.
        Prompt = "prompt",
    }
}

/// A skill the session can activate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SkillInfo {
    /// Its name (the `/name` that activates it).
    pub name: String,
    /// What it is for, as its `SKILL.md` says.
    pub description: String,
    /// The directory holding its `SKILL.md`.
    pub path: String,
    /// Where it was found.
    pub scope: ExtensionScope,
    /// Whether its instructions are in the conversation the model sees.
    pub active: bool,
}

/// A name a client can offer after `/`: a skill or a prompt command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CommandInfo {
    /// The name, without the `/`.
    pub name: String,
    /// Whether it is a skill or a prompt template.
    pub kind: CommandKind,
    /// One line saying what it does.
    pub description: String,
    /// What the arguments are (a prompt's `argument-hint`), for completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument_hint: Option<String>,
    /// Where it was found.
    pub scope: ExtensionScope,
    /// The file it was read from.
    pub path: String,
}

/// The answer of `session/commands`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CommandsResponse {
    /// Prompt commands, then skills, each sorted by name; a name appears once.
    pub commands: Vec<CommandInfo>,
    /// Skills and commands that were skipped or read with a problem, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}
