//! A command's failure, the exit code it maps to, and how it is reported. Only `main` turns a
//! [`Failure`] into a process exit.
//!
//! Exit codes (also in the README and the man page):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | the daemon answered with an error, or the followed work ended in one |
//! | 2 | bad usage |
//! | 3 | the followed work stopped at the session's turn limit (`--max-turns`) |
//! | 4 | the followed work stopped at the round limit for one input (`--max-rounds`) |
//! | 5 | reserved: the model's answer stopped at its output token limit |
//! | 69 | the daemon cannot be reached, or it stopped while followed |
//! | 77 | the daemon refused this user (or this process), or agentctl refused the server: another user's socket or runtime directory |
//! | 130 | interrupted (Ctrl-C aborted the work) |

use jsonrpsee::core::ClientError;
use serde::Serialize;

/// Something went wrong on agentctl's side (it could not read stdin, write a file...).
pub(crate) const EX_FAILURE: u8 = 1;
/// Bad usage: a flag, an argument or a `config` pair is wrong.
pub(crate) const EX_USAGE: u8 = 2;
/// The followed work stopped at `max_turns`.
pub(crate) const EX_TURN_LIMIT: u8 = 3;
/// The followed work stopped at `max_tool_rounds_per_input`.
pub(crate) const EX_ROUND_LIMIT: u8 = 4;
/// The followed work's answer was cut off at the model's output token limit
/// (`processing_end`'s `max_tokens`).
pub(crate) const EX_MAX_TOKENS: u8 = 5;
/// The followed work's model declined to answer (`processing_end`'s `refusal`).
pub(crate) const EX_REFUSED: u8 = 6;
/// The daemon cannot be reached (sysexits' EX_UNAVAILABLE).
pub(crate) const EX_UNAVAILABLE: u8 = 69;
/// The daemon refused this user (sysexits' EX_NOPERM).
pub(crate) const EX_NOPERM: u8 = 77;
/// Ctrl-C aborted the work (128 + SIGINT).
pub(crate) const EX_INTERRUPTED: u8 = 130;

/// A failure: the exit code, a stable `kind`, the JSON-RPC error code when the daemon sent
/// one, and a message for people.
#[derive(Debug, Serialize)]
pub(crate) struct Failure {
    /// The JSON-RPC error code, when the daemon answered with an error.
    pub(crate) code: Option<i32>,
    /// The daemon's `data.kind`, or agentctl's own: `usage`, `unavailable`, `failed`.
    pub(crate) kind: String,
    /// What went wrong and, where it helps, what to do.
    pub(crate) message: String,
    /// The exit code agentctl ends with.
    pub(crate) exit_code: u8,
}

impl Failure {
    fn local(exit_code: u8, kind: &str, message: impl Into<String>) -> Self {
        Self {
            code: None,
            kind: kind.to_owned(),
            message: message.into(),
            exit_code,
        }
    }

    /// Bad usage (exit 2).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self::local(EX_USAGE, "usage", message)
    }

    /// A failure on agentctl's side (exit 1).
    pub(crate) fn failed(message: impl Into<String>) -> Self {
        Self::local(EX_FAILURE, "failed", message)
    }

    /// The daemon cannot be reached (exit 69).
    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self::local(EX_UNAVAILABLE, "unavailable", message)
    }

    /// The server is not this user's daemon, or its directory is not this user's own (exit
    /// 77): nothing was sent.
    pub(crate) fn untrusted(message: impl Into<String>) -> Self {
        Self::local(EX_NOPERM, "untrusted", message)
    }

    /// Whether this is an [`untrusted`](Self::untrusted) failure, which no retry or
    /// auto-start can fix.
    pub(crate) fn is_untrusted(&self) -> bool {
        self.kind == "untrusted"
    }

    /// Prints the failure on stderr: one JSON object with `--json`, else a line for people.
    pub(crate) fn report(&self, json: bool) {
        if json {
            eprintln!("{}", serde_json::to_string(self).unwrap_or_default());
        } else {
            eprintln!("agentctl: {}", self.message);
        }
    }
}

/// The `kind` of a standard JSON-RPC error, which carries no `data.kind`.
fn standard_kind(code: i32) -> &'static str {
    match code {
        -32700 => "parse_error",
        -32600 => "invalid_request",
        -32601 => "method_not_found",
        -32602 => "invalid_params",
        -32603 => "internal_error",
        _ => "error",
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Call(err) => {
                let kind = err
                    .data()
                    .and_then(|d| serde_json::from_str::<serde_json::Value>(d.get()).ok())
                    .and_then(|d| d["kind"].as_str().map(str::to_owned));
                let (exit_code, message) = match &kind {
                    Some(kind) if kind == "unauthorized" => {
                        (EX_NOPERM, format!("{} ({kind})", err.message()))
                    }
                    Some(kind) => (EX_FAILURE, format!("{} ({kind})", err.message())),
                    None => (EX_FAILURE, err.message().to_owned()),
                };
                Failure {
                    code: Some(err.code()),
                    kind: kind.unwrap_or_else(|| standard_kind(err.code()).to_owned()),
                    message,
                    exit_code,
                }
            }
            ClientError::RestartNeeded(_) | ClientError::Transport(_) => {
                Failure::unavailable(format!("lost the connection to agentd: {e}"))
            }
            other => Failure::failed(other.to_string()),
        }
    }
}

/// What every command returns: an exit code, or a failure.
pub(crate) type Result<T> = std::result::Result<T, Failure>;
