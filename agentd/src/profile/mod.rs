//! Provider-aligned profiles (spec 3.2): the tool set, capability flags and layered system
//! prompt (spec 6.1) a session's model works with.

use crate::exec::ExecutionEnvironment;
use crate::tools::{ReadFile, Shell, ToolRegistry};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A profile: tools plus the prompt and defaults that suit one model family.
#[derive(Clone)]
pub struct Profile {
    /// `anthropic`.
    pub id: &'static str,
    /// The tools the model may call; hosts may register more (latest wins).
    pub tools: ToolRegistry,
    /// Shell timeout when a call sets none; `None` uses the session's default.
    pub shell_timeout: Option<Duration>,
    /// Whether several tool calls of one response run concurrently.
    pub supports_parallel_tool_calls: bool,
    base_instructions: &'static str,
}

/// A profile name that does not exist.
#[derive(Debug, thiserror::Error)]
#[error("unknown profile {0:?}; available: anthropic")]
pub struct UnknownProfile(pub String);

impl Profile {
    /// The profile called `name`.
    pub fn named(name: &str) -> Result<Self, UnknownProfile> {
        match name {
            "anthropic" => Ok(Self::anthropic()),
            other => Err(UnknownProfile(other.to_owned())),
        }
    }

    /// Claude Code-aligned (spec 3.5): 120 s shell default, parallel tool calls. Built once;
    /// sessions share its compiled tool schemas.
    pub fn anthropic() -> Self {
        static BUILT: std::sync::OnceLock<Profile> = std::sync::OnceLock::new();
        BUILT.get_or_init(Self::build_anthropic).clone()
    }

    fn build_anthropic() -> Self {
        let mut tools = ToolRegistry::default();
        for tool in [
            Arc::new(ReadFile) as Arc<dyn crate::tools::Tool>,
            Arc::new(Shell),
        ] {
            // The built-in schemas are valid; a failure here is a programming error caught by tests.
            if let Err(e) = tools.register(tool) {
                tracing::error!("built-in tool rejected: {e}");
            }
        }
        Self {
            id: "anthropic",
            tools,
            shell_timeout: Some(Duration::from_secs(120)),
            supports_parallel_tool_calls: true,
            base_instructions: ANTHROPIC_BASE,
        }
    }

    /// The system prompt: base instructions, environment context, tool descriptions and the
    /// user's instructions last (spec 6.1).
    pub fn system_prompt(
        &self,
        env: &dyn ExecutionEnvironment,
        context: &EnvironmentContext,
        model: &str,
        user: Option<&str>,
    ) -> String {
        let mut prompt = String::with_capacity(4096);
        prompt.push_str(self.base_instructions.trim());
        prompt.push_str("\n\n<environment>\n");
        prompt.push_str(&format!(
            "Working directory: {}\n",
            env.working_directory().display()
        ));
        prompt.push_str(&format!(
            "Is git repository: {}\n",
            context.git_branch.is_some()
        ));
        if let Some(branch) = &context.git_branch {
            prompt.push_str(&format!("Git branch: {branch}\n"));
        }
        prompt.push_str(&format!("Platform: {}\n", env.platform()));
        prompt.push_str(&format!("OS version: {}\n", context.os_version));
        prompt.push_str(&format!("Today's date: {}\n", context.date));
        prompt.push_str(&format!("Model: {model}\n"));
        prompt.push_str("</environment>\n\n<tools>\n");
        for def in self.tools.definitions() {
            prompt.push_str(&format!("- {}: {}\n", def.name, def.description));
        }
        prompt.push_str("</tools>\n");
        if let Some(user) = user.filter(|u| !u.trim().is_empty()) {
            prompt.push_str("\n<user_instructions>\n");
            prompt.push_str(user.trim());
            prompt.push_str("\n</user_instructions>\n");
        }
        prompt
    }
}

/// Facts about the session's environment captured once at session start (spec 6.3).
#[derive(Debug, Clone)]
pub struct EnvironmentContext {
    /// The current branch if the working directory is in a git repository.
    pub git_branch: Option<String>,
    /// OS name and version.
    pub os_version: String,
    /// The date the session started, `YYYY-MM-DD`.
    pub date: String,
}

impl EnvironmentContext {
    /// Reads the git branch (from `.git/HEAD` of the nearest repository) and the OS version.
    pub fn capture(env: &dyn ExecutionEnvironment) -> Self {
        Self {
            git_branch: git_branch(env.working_directory()),
            os_version: env.os_version(),
            date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()[..10]
                .to_owned(),
        }
    }
}

fn git_branch(cwd: &Path) -> Option<String> {
    let root = cwd.ancestors().find(|d| d.join(".git").exists())?;
    let head = std::fs::read_to_string(root.join(".git/HEAD")).unwrap_or_default();
    Some(match head.trim().strip_prefix("ref: refs/heads/") {
        Some(branch) => branch.to_owned(),
        None => "(detached HEAD)".to_owned(),
    })
}

const ANTHROPIC_BASE: &str = r#"
You are a coding agent running inside agentd, working in the user's project on their machine. You
help with software engineering tasks: fixing bugs, adding features, refactoring, explaining code and
running commands. Work autonomously until the task is done, then give a short summary of what you
changed and anything the user must know.

# Using tools
- Read a file before you change it, and look around the code it touches so your change fits the
  existing conventions, libraries and style.
- Prefer editing existing files to creating new ones; never create documentation files unless asked.
- Use the shell for builds, tests, git and searching. Commands run with bash in the working
  directory; each has a timeout (set timeout_ms for long builds or test suites). Avoid interactive
  commands and commands that never exit; start servers in the background if you must.
- When several independent tool calls are needed, make them in the same response; they run in
  parallel.
- Tool output may be truncated; when it is, re-run with narrower parameters rather than guessing.

# Working well
- Keep changes minimal and focused on the task; do not fix unrelated things without saying so.
- After a change, verify it: run the relevant tests, type checker or build.
- If a tool fails, read the error, fix the cause and retry with a different approach instead of
  repeating the same call.
- Never print, log or commit secrets such as API keys.
- Be concise in your messages: say what you did and why, not every step.
"#;
