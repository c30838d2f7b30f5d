//! Hooks: the user's own programs that agentd runs at points of a session's loop, configured
//! as `[[hooks.EVENT]]` in the config file and, in a workspace the user trusts, in the
//! project's [`PROJECT_HOOKS_FILE`]. Trust is kept in the config file under
//! [`TRUST_TABLE`], one table per workspace holding the digest of its hooks file as the user
//! trusted it (`agentctl trust` writes it, the daemon reads it): a hooks file written or
//! changed since (by a prompt-injected model, say) is not run.

use crate::names::names;

names! {
    /// A point of the loop where hooks run (`[[hooks.EVENT]]`).
    pub enum HookEvent ("hook event") {
        /// A session starts working: before its first input in this daemon.
        SessionStart = "session_start",
        /// An input arrives, before the model sees it: a hook may add context or refuse it.
        UserPromptSubmit = "user_prompt_submit",
        /// A tool call is about to run: a hook may block it.
        PreToolUse = "pre_tool_use",
        /// A tool call ran: a hook may tell the model something about it.
        PostToolUse = "post_tool_use",
        /// The history is about to be compacted.
        PreCompact = "pre_compact",
        /// The model answered without tool calls: a hook may send it back to work.
        Stop = "stop",
        /// A subagent's model answered without tool calls (the subagent's `stop`).
        SubagentStop = "subagent_stop",
        /// A request waits for a person (an approval, a question).
        Notification = "notification",
    }
}

impl HookEvent {
    /// Claude Code's name of the event (`hook_event_name` on a hook's stdin).
    pub const fn claude_name(self) -> &'static str {
        match self {
            Self::SessionStart => "SessionStart",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::PreCompact => "PreCompact",
            Self::Stop => "Stop",
            Self::SubagentStop => "SubagentStop",
            Self::Notification => "Notification",
        }
    }

    /// Whether the event concerns a tool call (its hooks may have a `matcher`).
    pub const fn is_tool_event(self) -> bool {
        matches!(self, Self::PreToolUse | Self::PostToolUse)
    }
}

names! {
    /// How one hook's run ended (`hook_finished`).
    pub enum HookOutcome ("hook outcome") {
        /// It exited 0 (or with a code other than 2) and asked for nothing.
        Ok = "ok",
        /// It blocked: exit 2, or `{"decision": "block"}` (`reason` says why).
        Blocked = "blocked",
        /// It could not start, or exited with a code other than 0 and 2; the work went on.
        Failed = "failed",
        /// It ran past its `timeout_secs` and was stopped; the work went on.
        TimedOut = "timed_out",
        /// The work was aborted while it ran; it was stopped.
        Aborted = "aborted",
    }
}

/// A project's hooks file, relative to the workspace; read only when the workspace is trusted.
pub const PROJECT_HOOKS_FILE: &str = ".agents/hooks.toml";

/// The largest project hooks file read.
pub const MAX_PROJECT_HOOKS_BYTES: u64 = 64 * 1024;

/// The config file's table of trusted workspaces: `[trusted_workspaces."/abs/dir"]` with
/// `hooks_sha256`, the hex SHA-256 of the workspace's [`PROJECT_HOOKS_FILE`] when it was
/// trusted (absent: it had none, and any that appears later is not run).
pub const TRUST_TABLE: &str = "trusted_workspaces";

/// The key of a trusted workspace's table holding its hooks file's digest.
pub const TRUST_DIGEST_KEY: &str = "hooks_sha256";
