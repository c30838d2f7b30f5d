//! The names of agentd's built-in tools, as events and requests carry them in `tool_name` and
//! `tool`. Those fields stay strings: a session also has its clients' tools and the tools a
//! host program registers.

use crate::names::names;

names! {
    /// A tool agentd has built in; which of them a session offers depends on its profile.
    pub enum BuiltinTool ("built-in tool") {
        /// A file's numbered lines, or an image.
        ReadFile = "read_file",
        /// Several files at once.
        ReadManyFiles = "read_many_files",
        /// A whole file written.
        WriteFile = "write_file",
        /// An exact replacement in a file.
        EditFile = "edit_file",
        /// A v4a patch over several files.
        ApplyPatch = "apply_patch",
        /// A command line run with bash.
        Shell = "shell",
        /// A search of file contents.
        Grep = "grep",
        /// A search of file names.
        Glob = "glob",
        /// A directory's entries.
        ListDir = "list_dir",
        /// A question for the user.
        AskUser = "ask_user",
        /// A subagent started on a task.
        SpawnAgent = "spawn_agent",
        /// More input for a subagent.
        SendInput = "send_input",
        /// Waiting for subagents to finish.
        Wait = "wait",
        /// A subagent closed.
        CloseAgent = "close_agent",
        /// An Agent Skill's instructions loaded into the conversation.
        ActivateSkill = "activate_skill",
    }
}
