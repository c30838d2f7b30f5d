//! Provider-aligned profiles (spec 3.2-3.6): the tool set, capability flags and layered system
//! prompt (spec 6.1) that suit one model family.
//!
//! | profile | tools |
//! |---|---|
//! | `openai` | read_file, apply_patch, write_file, shell (10 s), grep, glob |
//! | `anthropic` | read_file, write_file, edit_file, shell (120 s), grep (output modes), glob |
//! | `gemini` | read_file, read_many_files, write_file, edit_file, shell (10 s), grep, glob, list_dir |
//! | `bash` | shell (120 s), for minimal models |

mod context;
mod prompts;

pub(crate) use context::EnvironmentContext;
#[cfg(test)]
pub(crate) use context::PROJECT_DOCS_BUDGET;

use crate::exec::ExecutionEnvironment;
use crate::tools::{
    ApplyPatch, CloseAgent, EditFile, Glob, Grep, ListDir, ReadFile, ReadManyFiles, RegisterError,
    SendInput, Shell, SpawnAgent, Tool, ToolRegistry, Wait, WriteFile,
};
use agentd_proto::{ProfileId, ProviderKind, UnknownName};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// A profile: tools plus the prompt and defaults that suit one model family.
#[derive(Clone)]
pub struct Profile {
    /// Which profile it is.
    pub(crate) id: ProfileId,
    /// The tools the model may call; a host may register more (latest wins, spec 3.7).
    pub(crate) tools: ToolRegistry,
    /// Shell timeout when a call sets none; `None` uses the session's default (10 s).
    pub(crate) shell_timeout: Option<Duration>,
    /// Whether several tool calls of one response run concurrently.
    pub(crate) supports_parallel_tool_calls: bool,
    /// Instruction files this profile reads besides `AGENTS.md` (spec 6.5).
    pub(crate) doc_names: &'static [&'static str],
}

fn registry(tools: Vec<Arc<dyn Tool>>) -> ToolRegistry {
    let mut registry = ToolRegistry::default();
    for tool in tools {
        // The built-in schemas are valid; the profile tests prove it.
        if let Err(e) = registry.register(tool) {
            tracing::error!("built-in tool rejected: {e}");
        }
    }
    registry
}

fn build(id: ProfileId) -> Profile {
    let (tools, shell_timeout, doc_names): (
        Vec<Arc<dyn Tool>>,
        Option<u64>,
        &'static [&'static str],
    ) = match id {
        ProfileId::Openai => (
            vec![
                Arc::new(ReadFile),
                Arc::new(ApplyPatch),
                Arc::new(WriteFile),
                Arc::new(Shell),
                Arc::new(Grep {
                    output_modes: false,
                }),
                Arc::new(Glob),
            ],
            None,
            &["AGENTS.md", ".codex/instructions.md"],
        ),
        ProfileId::Gemini => (
            vec![
                Arc::new(ReadFile),
                Arc::new(ReadManyFiles),
                Arc::new(WriteFile),
                Arc::new(EditFile),
                Arc::new(Shell),
                Arc::new(Grep {
                    output_modes: false,
                }),
                Arc::new(Glob),
                Arc::new(ListDir),
            ],
            None,
            &["AGENTS.md", "GEMINI.md"],
        ),
        ProfileId::Bash => (vec![Arc::new(Shell)], Some(120), &["AGENTS.md"]),
        ProfileId::Anthropic => (
            vec![
                Arc::new(ReadFile),
                Arc::new(WriteFile),
                Arc::new(EditFile),
                Arc::new(Shell),
                Arc::new(Grep { output_modes: true }),
                Arc::new(Glob),
            ],
            Some(120),
            &["AGENTS.md", "CLAUDE.md"],
        ),
    };
    // Every profile can delegate (spec 7); depth and concurrency limits are per session.
    let mut tools = tools;
    tools.extend([
        Arc::new(SpawnAgent) as Arc<dyn Tool>,
        Arc::new(SendInput),
        Arc::new(Wait),
        Arc::new(CloseAgent),
    ]);
    Profile {
        id,
        tools: registry(tools),
        shell_timeout: shell_timeout.map(Duration::from_secs),
        supports_parallel_tool_calls: true,
        doc_names,
    }
}

impl Profile {
    /// Adds a tool the model may call, replacing a tool of the same name (spec 3.7: the latest
    /// registration wins).
    pub fn register_tool(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegisterError> {
        self.tools.register(tool)
    }

    /// The profile `id`. Built once; sessions share its compiled tool schemas.
    pub fn named(id: ProfileId) -> Self {
        static PROFILES: OnceLock<Vec<Profile>> = OnceLock::new();
        let all = PROFILES.get_or_init(|| ProfileId::ALL.iter().copied().map(build).collect());
        all.iter()
            .find(|p| p.id == id)
            .cloned()
            // Never taken (every id is built above), and cannot fail.
            .unwrap_or_else(|| build(id))
    }

    /// The profile a stored record names. Records keep the name as written, so one from a
    /// newer agentd with a profile this one lacks still loads (with another profile).
    pub(crate) fn stored(name: &str) -> Result<Self, UnknownName> {
        name.parse().map(Self::named)
    }

    /// The profile aligned with a provider family (spec 3.1). OpenAI-compatible servers get
    /// the OpenAI profile; pick `bash` for small local models.
    pub fn for_provider(kind: ProviderKind) -> Self {
        Self::named(match kind {
            ProviderKind::Anthropic => ProfileId::Anthropic,
            ProviderKind::Openai | ProviderKind::OpenaiChat => ProfileId::Openai,
            ProviderKind::Gemini => ProfileId::Gemini,
        })
    }

    /// The system prompt (spec 6.1): base instructions, environment context, tool
    /// descriptions, the available skills, project instructions, then the user's
    /// instructions last.
    pub(crate) fn system_prompt(
        &self,
        tools: &ToolRegistry,
        env: &dyn ExecutionEnvironment,
        context: &EnvironmentContext,
        model: &str,
        skills: &str,
        user: Option<&str>,
    ) -> String {
        let mut prompt = prompts::base(self.id);
        prompt.push_str("\n\n<environment>\n");
        prompt.push_str(&format!(
            "Working directory: {}\n",
            env.working_directory().display()
        ));
        prompt.push_str(&format!("Is git repository: {}\n", context.git.is_some()));
        if let Some(git) = &context.git {
            prompt.push_str(&format!("Git branch: {}\n", git.branch));
            prompt.push_str(&format!(
                "Git status: {} modified, {} untracked\n",
                git.modified, git.untracked
            ));
            if !git.recent_commits.is_empty() {
                prompt.push_str("Recent commits:\n");
                for c in &git.recent_commits {
                    prompt.push_str(&format!("  {c}\n"));
                }
            }
        }
        prompt.push_str(&format!("Platform: {}\n", env.platform()));
        prompt.push_str(&format!("OS version: {}\n", context.os_version));
        prompt.push_str(&format!("Today's date: {}\n", context.date));
        prompt.push_str(&format!("Model: {model}\n"));
        prompt.push_str("</environment>\n\n<tools>\n");
        for def in tools.definitions() {
            prompt.push_str(&format!(
                "- {}: {}\n",
                def.name,
                def.description.lines().next().unwrap_or_default()
            ));
        }
        prompt.push_str("</tools>\n");
        prompt.push_str(skills);
        if !context.project_docs.is_empty() {
            prompt.push_str("\n<project_instructions>\n");
            prompt.push_str(&context.project_docs);
            prompt.push_str("\n</project_instructions>\n");
        }
        if let Some(user) = user.filter(|u| !u.trim().is_empty()) {
            prompt.push_str("\n<user_instructions>\n");
            prompt.push_str(user.trim());
            prompt.push_str("\n</user_instructions>\n");
        }
        prompt
    }
}

#[cfg(test)]
mod tests;
