//! A command's failure, the exit code it maps to, and how it is reported. Only `main` turns a
//! [`Failure`] into a process exit.
//!
//! Exit codes (also in docs/cli.md and the man page):
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

use agentd_proto::{ErrorKind, StreamEndReason};
use jsonrpsee::core::ClientError;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::fmt;

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
    /// What kind of failure it is.
    pub(crate) kind: Kind,
    /// What went wrong and, where it helps, what to do.
    pub(crate) message: String,
    /// The exit code agentctl ends with.
    pub(crate) exit_code: u8,
}

/// A failure's `kind`: the daemon's `data.kind`, a standard JSON-RPC error's name, or
/// agentctl's own. Each is one string in `--json` output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The daemon's `data.kind`.
    Daemon(ErrorKind),
    /// A `data.kind` this agentctl does not know (a newer daemon's), as sent.
    UnknownDaemon(String),
    /// A JSON-RPC error without `data.kind`, named by its code.
    Rpc(RpcError),
    /// The followed event stream ended before the work did.
    StreamEnded(StreamEndReason),
    /// agentctl's own.
    Local(Local),
}

/// The standard JSON-RPC errors, which carry no `data.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RpcError {
    /// -32700: the message was not JSON.
    ParseError,
    /// -32600: not a request.
    InvalidRequest,
    /// -32601: no such method.
    MethodNotFound,
    /// -32602: the params do not fit the method.
    InvalidParams,
    /// -32603: the server failed.
    InternalError,
    /// Any other code.
    Error,
}

impl RpcError {
    fn from_code(code: i32) -> Self {
        match code {
            -32700 => Self::ParseError,
            -32600 => Self::InvalidRequest,
            -32601 => Self::MethodNotFound,
            -32602 => Self::InvalidParams,
            -32603 => Self::InternalError,
            _ => Self::Error,
        }
    }
}

/// The failures agentctl tells by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Local {
    /// Bad usage.
    Usage,
    /// Something failed on agentctl's side.
    Failed,
    /// The daemon cannot be reached.
    Unavailable,
    /// The server or its directory is not this user's own.
    Untrusted,
    /// The daemon shut down while the work was followed.
    DaemonShutdown,
}

impl Kind {
    /// The kind of an error the daemon answered with `code` and `data`: `data.kind` when it has
    /// one, else the code's name.
    pub(crate) fn of_error(code: i32, data: Option<&RawValue>) -> Self {
        Self::of_data(data).unwrap_or(Self::Rpc(RpcError::from_code(code)))
    }

    /// The `data.kind` of an error's `data`, if it has one.
    pub(crate) fn of_data(data: Option<&RawValue>) -> Option<Self> {
        #[derive(Deserialize)]
        struct Data {
            kind: Option<String>,
        }
        let kind = serde_json::from_str::<Data>(data?.get()).ok()?.kind?;
        Some(kind.parse().map_or(Self::UnknownDaemon(kind), Self::Daemon))
    }

    /// The name `--json` shows.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Self::Daemon(kind) => kind.as_str(),
            Self::UnknownDaemon(kind) => kind,
            Self::Rpc(RpcError::ParseError) => "parse_error",
            Self::Rpc(RpcError::InvalidRequest) => "invalid_request",
            Self::Rpc(RpcError::MethodNotFound) => "method_not_found",
            Self::Rpc(RpcError::InvalidParams) => "invalid_params",
            Self::Rpc(RpcError::InternalError) => "internal_error",
            Self::Rpc(RpcError::Error) => "error",
            Self::StreamEnded(reason) => reason.as_str(),
            Self::Local(Local::Usage) => "usage",
            Self::Local(Local::Failed) => "failed",
            Self::Local(Local::Unavailable) => "unavailable",
            Self::Local(Local::Untrusted) => "untrusted",
            Self::Local(Local::DaemonShutdown) => "daemon_shutdown",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Failure {
    fn local(exit_code: u8, kind: Local, message: impl Into<String>) -> Self {
        Self {
            code: None,
            kind: Kind::Local(kind),
            message: message.into(),
            exit_code,
        }
    }

    /// Bad usage (exit 2).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self::local(EX_USAGE, Local::Usage, message)
    }

    /// A failure on agentctl's side (exit 1).
    pub(crate) fn failed(message: impl Into<String>) -> Self {
        Self::local(EX_FAILURE, Local::Failed, message)
    }

    /// The daemon cannot be reached (exit 69).
    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self::local(EX_UNAVAILABLE, Local::Unavailable, message)
    }

    /// The server is not this user's daemon, or its directory is not this user's own (exit
    /// 77): nothing was sent.
    pub(crate) fn untrusted(message: impl Into<String>) -> Self {
        Self::local(EX_NOPERM, Local::Untrusted, message)
    }

    /// The daemon shut down and stopped the followed work (exit 69).
    pub(crate) fn daemon_shutdown(message: impl Into<String>) -> Self {
        Self::local(EX_UNAVAILABLE, Local::DaemonShutdown, message)
    }

    /// Whether this is an [`untrusted`](Self::untrusted) failure, which no retry or
    /// auto-start can fix.
    pub(crate) fn is_untrusted(&self) -> bool {
        self.kind == Kind::Local(Local::Untrusted)
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

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Call(err) => {
                let kind = Kind::of_error(err.code(), err.data());
                let (exit_code, message) = match &kind {
                    Kind::Daemon(ErrorKind::Unauthorized) => {
                        (EX_NOPERM, format!("{} ({kind})", err.message()))
                    }
                    Kind::Daemon(_) | Kind::UnknownDaemon(_) => {
                        (EX_FAILURE, format!("{} ({kind})", err.message()))
                    }
                    _ => (EX_FAILURE, err.message().to_owned()),
                };
                Failure {
                    code: Some(err.code()),
                    kind,
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;
    use serde_json::value::to_raw_value;

    fn kind_of(code: i32, data: serde_json::Value) -> Kind {
        let data = (!data.is_null()).then(|| to_raw_value(&data).unwrap());
        Kind::of_error(code, data.as_deref())
    }

    #[test]
    fn a_daemon_error_s_kind_is_its_data_kind_else_its_code_s_name() {
        let busy = json!({"kind": "session_busy", "retryable": false});
        assert_eq!(kind_of(-32011, busy), Kind::Daemon(ErrorKind::SessionBusy));
        assert_eq!(
            kind_of(-32602, json!(null)),
            Kind::Rpc(RpcError::InvalidParams)
        );
        assert_eq!(kind_of(-32007, json!(null)), Kind::Rpc(RpcError::Error));
        let newer = json!({"kind": "brand_new", "retryable": true});
        assert_eq!(
            kind_of(-32099, newer),
            Kind::UnknownDaemon("brand_new".into())
        );
    }

    #[test]
    fn json_shows_each_kind_by_its_wire_name() {
        let shown = |kind: Kind| {
            serde_json::to_value(Failure {
                code: None,
                kind,
                message: String::new(),
                exit_code: 1,
            })
            .unwrap()["kind"]
                .clone()
        };
        assert_eq!(
            shown(Kind::Daemon(ErrorKind::ShuttingDown)),
            "shutting_down"
        );
        assert_eq!(shown(Kind::UnknownDaemon("brand_new".into())), "brand_new");
        assert_eq!(
            shown(Kind::Rpc(RpcError::MethodNotFound)),
            "method_not_found"
        );
        assert_eq!(shown(Kind::StreamEnded(StreamEndReason::Lagged)), "lagged");
        assert_eq!(shown(Kind::Local(Local::DaemonShutdown)), "daemon_shutdown");
    }
}
