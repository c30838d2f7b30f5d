//! Application error codes. Standard JSON-RPC codes (-32700, -32600, -32601, -32602, -32603)
//! are used for protocol errors; everything agentd-specific has a code in -32000..-32099 and a
//! stable `data.kind` string, so clients match on the kind, never on the message.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What went wrong, as carried in an error's `data.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The daemon is at a limit; retry later.
    Overloaded,
    /// The peer's uid is not the daemon's.
    Unauthorized,
    /// No session has that id.
    SessionNotFound,
    /// The session is working and the request asked not to queue (`when_busy: reject`).
    SessionBusy,
    /// The session is closed and takes no more input.
    SessionClosed,
    /// The session's stored record cannot be read, so the session cannot be loaded; the
    /// message and `data.damaged` say why. `session/delete` removes it.
    SessionDamaged,
    /// A configuration value is invalid; the message names the key.
    InvalidConfig,
    /// The requested provider has no key or endpoint configured; the message says what to set.
    ProviderNotConfigured,
    /// The daemon is shutting down.
    ShuttingDown,
    /// The session's state could not be written to disk (full or read-only); what is already
    /// stored is intact.
    StorageFailed,
    /// The LLM provider failed a request the daemon made for the client (a compaction
    /// summary); the message carries the provider's error.
    ProviderFailed,
    /// No pending request of the session has that id: it never existed, or it was already
    /// settled (the message says how).
    RequestNotFound,
    /// A bug in the daemon stopped the request (a crashed task); the session and the daemon
    /// go on, and the message says what failed.
    Internal,
    /// The session's execution environment cannot be reached (an SSH host that refuses the
    /// connection, fails host key verification, or lacks the working directory); the message
    /// carries the reason.
    EnvironmentUnavailable,
    /// An undo (`session/rollback {files: true}`) or a redo (`session/redo`) was refused as a
    /// whole because it would overwrite files the user changed since; nothing was restored.
    /// `data.files` names them (at most [`MAX_LISTED_FILES`], `data.more_files` counts the
    /// rest); `force: true` restores them anyway.
    FilesChanged,
}

/// The most files an error's `data.files` lists.
pub const MAX_LISTED_FILES: usize = 100;

impl ErrorKind {
    /// The JSON-RPC error code for this kind.
    pub const fn code(self) -> i32 {
        match self {
            Self::Overloaded => -32001,
            Self::Unauthorized => -32002,
            Self::ShuttingDown => -32003,
            Self::SessionNotFound => -32010,
            Self::SessionBusy => -32011,
            Self::SessionClosed => -32012,
            Self::SessionDamaged => -32014,
            Self::InvalidConfig => -32020,
            Self::ProviderNotConfigured => -32021,
            Self::StorageFailed => -32030,
            Self::ProviderFailed => -32022,
            Self::RequestNotFound => -32013,
            Self::Internal => -32040,
            Self::EnvironmentUnavailable => -32024,
            Self::FilesChanged => -32016,
        }
    }

    /// The stable string in `data.kind`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Overloaded => "overloaded",
            Self::Unauthorized => "unauthorized",
            Self::ShuttingDown => "shutting_down",
            Self::SessionNotFound => "session_not_found",
            Self::SessionBusy => "session_busy",
            Self::SessionClosed => "session_closed",
            Self::SessionDamaged => "session_damaged",
            Self::InvalidConfig => "invalid_config",
            Self::ProviderNotConfigured => "provider_not_configured",
            Self::StorageFailed => "storage_failed",
            Self::ProviderFailed => "provider_failed",
            Self::RequestNotFound => "request_not_found",
            Self::Internal => "internal",
            Self::EnvironmentUnavailable => "environment_unavailable",
            Self::FilesChanged => "files_changed",
        }
    }

    /// Whether the same request may succeed if sent again later.
    pub const fn is_retryable(self) -> bool {
        matches!(self, Self::Overloaded)
    }

    /// Every kind, for documentation and schema export.
    pub const ALL: [ErrorKind; 15] = [
        Self::Overloaded,
        Self::Unauthorized,
        Self::ShuttingDown,
        Self::SessionNotFound,
        Self::SessionBusy,
        Self::SessionClosed,
        Self::SessionDamaged,
        Self::RequestNotFound,
        Self::InvalidConfig,
        Self::ProviderNotConfigured,
        Self::StorageFailed,
        Self::ProviderFailed,
        Self::Internal,
        Self::EnvironmentUnavailable,
        Self::FilesChanged,
    ];

    /// Every kind's `data.kind` string, in [`ALL`](Self::ALL)'s order.
    pub const NAMES: [&'static str; Self::ALL.len()] = {
        let mut names = [""; Self::ALL.len()];
        let mut i = 0;
        while i < names.len() {
            names[i] = Self::ALL[i].as_str();
            i += 1;
        }
        names
    };
}

impl std::str::FromStr for ErrorKind {
    type Err = crate::UnknownName;

    /// The kind a `data.kind` string names.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| crate::UnknownName {
                what: "error kind",
                given: s.to_owned(),
                accepted: &Self::NAMES,
            })
    }
}

/// The `data` member of an application error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorData {
    /// What went wrong.
    pub kind: ErrorKind,
    /// Whether retrying later may succeed.
    pub retryable: bool,
    /// The session the error concerns, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<crate::SessionId>,
    /// For `session_damaged`: what is wrong with the session's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damaged: Option<crate::DamagedSession>,
    /// For `files_changed`: the files the user changed since, at most
    /// [`MAX_LISTED_FILES`] of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<String>>,
    /// For `files_changed`: how many more files there are than `files` lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub more_files: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::ErrorKind;

    /// Clients tell errors apart by code and by kind: two kinds added on separate branches
    /// must not share either.
    #[test]
    fn codes_and_kinds_are_unique() {
        let mut codes: Vec<i32> = ErrorKind::ALL.iter().map(|k| k.code()).collect();
        let mut names = ErrorKind::NAMES.to_vec();
        codes.sort_unstable();
        codes.dedup();
        names.sort_unstable();
        names.dedup();
        assert_eq!(codes.len(), ErrorKind::ALL.len());
        assert_eq!(names.len(), ErrorKind::ALL.len());
    }

    /// A `data.kind` parses back to its kind, the same as serde reads it.
    #[test]
    fn each_kind_parses_from_its_name() {
        for kind in ErrorKind::ALL {
            let wire = serde_json::to_value(kind).unwrap_or_default();
            assert_eq!(wire, kind.as_str());
            assert_eq!(kind.as_str().parse::<ErrorKind>(), Ok(kind));
        }
        assert!("brand_new".parse::<ErrorKind>().is_err());
    }
}
