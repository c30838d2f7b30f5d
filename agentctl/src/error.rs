//! A command's failure and the exit code it maps to. Only `main` turns a [`Failure`] into a
//! process exit.

use jsonrpsee::core::ClientError;

/// A failure and the exit code it maps to.
pub(crate) struct Failure(pub(crate) u8, pub(crate) String);

/// The daemon cannot be reached (sysexits' EX_UNAVAILABLE).
pub(crate) const EX_UNAVAILABLE: u8 = 69;
/// The daemon refused this user (sysexits' EX_NOPERM).
pub(crate) const EX_NOPERM: u8 = 77;

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Call(err) => {
                let kind = err
                    .data()
                    .and_then(|d| serde_json::from_str::<serde_json::Value>(d.get()).ok())
                    .and_then(|d| d["kind"].as_str().map(str::to_owned));
                match kind {
                    Some(kind) if kind == "unauthorized" => {
                        Failure(EX_NOPERM, format!("{} ({kind})", err.message()))
                    }
                    Some(kind) => Failure(1, format!("{} ({kind})", err.message())),
                    None => Failure(1, err.message().to_owned()),
                }
            }
            ClientError::RestartNeeded(_) | ClientError::Transport(_) => Failure(
                EX_UNAVAILABLE,
                format!("lost the connection to agentd: {e}"),
            ),
            other => Failure(1, other.to_string()),
        }
    }
}

/// What every command returns: an exit code, or a failure.
pub(crate) type Result<T> = std::result::Result<T, Failure>;
