//! `activate_skill`: loads a skill's instructions into the conversation once, wrapped in
//! `<skill_content name="...">` so that `active.rs` recognises them, with the skill's
//! directory and a bounded list of its files for the model to read on demand.

use super::discover::MAX_SKILL_BYTES;
use super::read::{Readable, read_capped};
use super::{Catalog, Skill, frontmatter};
use crate::tools::{OutputLimits, Tool, ToolContext, ToolDefinition, ToolError, ToolRegistry};
use agentd_proto::BuiltinTool;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::Path;
use std::sync::Arc;

/// The opening of a skill's text in the conversation.
pub(super) const OPEN: &str = "<skill_content name=\"";
/// Its closing.
pub(super) const CLOSE: &str = "</skill_content>";

/// `text` with any skill tags in it made inert: only agentd writes them, so a skill is active
/// only when agentd loaded it (`active.rs`), not because a summary the model wrote, a typed
/// input, a command's template or a skill's own file spells one out.
pub(crate) fn defang(text: &str) -> String {
    text.replace("<skill_content", "<skill-content")
        .replace("</skill_content", "</skill-content")
}

/// Most files a skill's text lists, and how deep below its directory they are looked for.
const MAX_RESOURCES: usize = 50;
const RESOURCE_DEPTH: usize = 3;

/// What the tool needs of its session.
pub(crate) trait Skills: Send + Sync {
    /// The skills the session found.
    fn catalog(&self) -> Arc<Catalog>;
    /// The names of the skills whose text the model sees now.
    fn active(&self) -> Vec<String>;
}

/// The `activate_skill` tool, offered to sessions that found skills.
pub(crate) struct ActivateSkill;

impl ActivateSkill {
    /// A registry of this tool alone, its schema compiled once for every session.
    pub(crate) fn registry() -> &'static ToolRegistry {
        static TOOLS: std::sync::OnceLock<ToolRegistry> = std::sync::OnceLock::new();
        TOOLS.get_or_init(|| {
            let mut tools = ToolRegistry::default();
            // A valid schema (`skills::tests::the_tool_schema_is_valid`).
            if let Err(e) = tools.register(Arc::new(ActivateSkill)) {
                tracing::error!("activate_skill rejected: {e}");
            }
            tools
        })
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The skill's name, as the list of available skills gives it.
    name: String,
}

/// The files of a skill's directory, relative to it, sorted; symlinks are listed, not
/// followed, and at most [`MAX_RESOURCES`] are looked at.
fn resources(dir: &Path) -> (Vec<String>, bool) {
    let mut found = Vec::new();
    let mut more = false;
    let mut pending = vec![(dir.to_owned(), 0usize)];
    let mut looked = 0;
    while let Some((current, depth)) = pending.pop() {
        let Ok(read) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in read.flatten() {
            looked += 1;
            if looked > MAX_RESOURCES * 4 || found.len() == MAX_RESOURCES {
                more = true;
                break;
            }
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() && depth + 1 < RESOURCE_DEPTH => {
                    pending.push((path, depth + 1));
                }
                Ok(t) if t.is_dir() => {}
                Ok(_) if path == dir.join("SKILL.md") => {}
                Ok(_) => {
                    if let Ok(rel) = path.strip_prefix(dir) {
                        found.push(rel.display().to_string());
                    }
                }
                Err(_) => {}
            }
        }
    }
    found.sort();
    (found, more)
}

/// A skill's text as the conversation holds it (blocking).
pub(super) fn content(skill: &Skill, readable: &Readable) -> Result<String, String> {
    let text = read_capped(&skill.dir.join("SKILL.md"), MAX_SKILL_BYTES, readable)?;
    let body = frontmatter::split(&text).body.trim();
    let dir = skill.dir.display();
    let mut out = format!(
        "{body}\n\nSkill directory: {dir}\nRelative paths in this skill are relative to that directory.\n"
    );
    let (files, more) = resources(&skill.dir);
    if !files.is_empty() {
        out.push_str("<skill_resources>\n");
        for f in files {
            out.push_str(&f);
            out.push('\n');
        }
        if more {
            out.push_str("(more files not listed)\n");
        }
        out.push_str("</skill_resources>\n");
    }
    Ok(format!("{OPEN}{}\">\n{}{CLOSE}", skill.name, defang(&out)))
}

/// What activating `name` gives the model: the skill's text, or a note that it is already
/// active (never its text twice). Errors are messages for the model.
pub(crate) async fn activate(skills: &dyn Skills, name: &str) -> Result<String, String> {
    let catalog = skills.catalog();
    let Some(skill) = catalog.skill(name).cloned() else {
        let names: Vec<&str> = catalog
            .skills
            .iter()
            .map(|s| s.name.as_str())
            .take(50)
            .collect();
        return Err(format!(
            "no skill is named {:?}; the available ones are: {}",
            super::discover::one_line(name, 80),
            names.join(", ")
        ));
    };
    if skills.active().contains(&skill.name) {
        return Ok(format!(
            "The skill {} is already active: its instructions are earlier in this conversation.",
            skill.name
        ));
    }
    tokio::task::spawn_blocking(move || catalog.load(&skill))
        .await
        .map_err(|e| format!("reading the skill failed: {e}"))?
}

#[async_trait]
impl Tool for ActivateSkill {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: BuiltinTool::ActivateSkill.as_str().into(),
            description: "Load a skill's instructions (see the available skills in the system \
                prompt) before a task it matches. Returns its instructions, its directory and \
                the files in it."
                .into(),
            parameters: crate::tools::parameters::<Args>(),
        }
    }

    fn output_limits(&self) -> OutputLimits {
        OutputLimits::head_tail(MAX_SKILL_BYTES as usize + 16 * 1024)
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let args: Args = crate::tools::parse_args(args)?;
        let skills = ctx
            .skills
            .ok_or_else(|| ToolError("this session has no skills".into()))?;
        activate(skills, &args.name).await.map_err(ToolError)
    }
}
