//! The command line, as clap parses it. Each command's own arguments live beside the code that
//! runs it (`cmd/`); this file only lists the commands, so the help and man pages read in one
//! place.

use crate::cmd;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// The exit codes, for `--help` and the man page (`error.rs` defines them).
const EXIT_CODES: &str = "\
Exit codes:
  0    success
  1    the daemon answered with an error, or the followed work ended in one
  2    bad usage (a flag, an argument or a config pair)
  3    submit --follow: the work stopped at the session's turn limit (--max-turns)
  4    submit --follow: the work stopped at the round limit for one input (--max-rounds)
  5    submit --follow: the answer was cut off at the output-token limit
  6    submit --follow: the model declined to answer (a refusal or a safety block)
  69   the daemon cannot be reached, or it shut down while followed
  77   refused: the daemon refused this user (or a process it started), or agentctl
       refused the server (another user's daemon, or a runtime directory not yours)
  130  interrupted (Ctrl-C aborted the work)

With --json, an error is one JSON object on stderr: {\"code\": JSON-RPC code or null,
\"kind\": the daemon's data.kind, or usage, unavailable, untrusted, failed, daemon_shutdown,
\"message\", \"exit_code\"}.";

/// Control agentd sessions from the shell.
#[derive(Parser)]
#[command(version, about, after_help = EXIT_CODES)]
pub(crate) struct Cli {
    /// Socket path [default: $XDG_RUNTIME_DIR/agentd/agentd.sock]
    #[arg(long, global = true, env = "AGENTD_SOCKET")]
    pub(crate) socket: Option<PathBuf>,
    /// Print machine-readable NDJSON instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

// Parsed once per process: boxing the big variant would save nothing that matters.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub(crate) enum Command {
    #[command(flatten)]
    Online(Online),
    #[command(flatten)]
    Offline(Offline),
}

/// Commands that work without a daemon.
#[derive(Subcommand)]
pub(crate) enum Offline {
    /// Check the setup: socket, daemon, config, providers (never prints keys; never starts
    /// the daemon).
    Doctor,
    /// Store a provider's API key for the daemon (read from stdin, or typed at a prompt that
    /// does not echo; never an argument). New sessions use it at once; it wins over the
    /// provider's environment variable.
    Login(cmd::login::Provider),
    /// Remove a provider's stored API key.
    Logout(cmd::login::Provider),
    /// Trust a workspace (default: the current directory), so that its `.agents/hooks.toml`
    /// runs, as it is now; `--list` and `--remove DIR`. Kept in the config file; a running
    /// daemon reloads it.
    Trust(cmd::trust::Trust),
    /// The daemon itself: status, stop, restart, reload.
    Daemon {
        #[command(subcommand)]
        command: cmd::daemon::DaemonCommand,
    },
    /// Speak the Model Context Protocol on stdin/stdout, so MCP clients hand work to agentd.
    ///
    /// For Claude Code (`claude mcp add agentd -- agentctl mcp-server`), Cursor, codex or any
    /// MCP client: the tools session_start, session_reply and session_list start, continue and
    /// list agentd sessions, which stay in the daemon. Only MCP goes to stdout. The daemon is
    /// reached (or started) at the first tool call.
    McpServer,
    /// Print a shell completion script: `agentctl completions bash > ~/.local/share/bash-completion/completions/agentctl`.
    Completions { shell: clap_complete::Shell },
    /// Print the man page, or write every page into a directory.
    Man {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

/// Commands that talk to the daemon (starting it if needed).
#[derive(Subcommand)]
pub(crate) enum Online {
    /// Daemon version, uptime, sessions and providers.
    Status,
    /// Configured providers and their models.
    Models,
    /// Create a session and print its id.
    New(cmd::new::NewArgs),
    /// List sessions.
    Ls(cmd::ls::Ls),
    /// Show one session.
    Show(cmd::show::Show),
    /// Submit a prompt: `submit SESSION [PROMPT]` or `submit --new [PROMPT]`; without PROMPT it
    /// is read from stdin.
    Submit(cmd::submit::Submit),
    /// Inject a message after the current tool round.
    Steer(cmd::steer::Message),
    /// Queue a message to run after the current input completes.
    FollowUp(cmd::steer::Message),
    /// Show (or with --clear remove) queued steering and follow-ups.
    Queue(cmd::queue::Queue),
    /// The skills and prompt commands a session's input may start with (`/name`).
    Commands(cmd::commands::Commands),
    /// Stop the session's current work (it stays open unless --close).
    Abort(cmd::abort::Abort),
    /// Close a session.
    Close(cmd::close::Close),
    /// Print a session's events.
    Events(cmd::events::Events),
    /// Print the conversation.
    History(cmd::history::History),
    /// Copy a session's conversation, up to an entry, into a new session.
    Fork(cmd::fork::Fork),
    /// Undo the last user inputs and what followed them (nothing is deleted; `fork --at`
    /// reaches it).
    Rollback(cmd::rollback::Rollback),
    /// Undo the last user inputs with the files the agent changed in them: `undo [SESSION]
    /// [--turns N] [--force]`. Files you changed since are never overwritten without --force.
    Undo(cmd::undo::Undo),
    /// Bring back what the last undo (or rollback) took away, files and conversation.
    Redo(cmd::undo::Redo),
    /// Show what the agent changed in the files for an input, as a unified diff.
    Diff(cmd::diff::Diff),
    /// Replace older turns with a summary written by the session's model.
    Compact(cmd::compact::Compact),
    /// Delete sessions with their stored history and events (running ones are aborted).
    Rm(cmd::rm::Rm),
    /// Delete closed sessions not updated for a while.
    Gc(cmd::gc::Gc),
    /// Show a session's config, or change it from the next LLM call: `config SESSION
    /// max-turns=20 effort=high`.
    Config(cmd::config::Config),
    /// List the requests a session waits on: approvals, questions, client tool calls.
    Pending(cmd::respond::Pending),
    /// Answer a pending request: `respond SESSION REQUEST allow|allow_always|deny
    /// [--message TEXT]`, or the answer to a question.
    Respond(cmd::respond::Respond),
    /// MCP servers: `mcp list SESSION` shows a session's, each one's state and tools; `mcp
    /// list` the config file's, each started and stopped (no daemon needed).
    #[command(subcommand)]
    Mcp(cmd::mcp::Mcp),
    /// Speak the Agent Client Protocol on stdin/stdout, for editors (Zed, JetBrains, Neovim,
    /// Emacs): each ACP session is an agentd session. Only ACP goes to stdout.
    Acp,
    /// Print the socket of your agentd, starting it if nothing answers, once it is checked to
    /// run as you: how editor plugins find the daemon.
    SocketPath,
}
