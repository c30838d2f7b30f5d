//! The agentd wire protocol: every type that crosses the daemon's socket.
//!
//! agentd speaks JSON-RPC 2.0 over a Unix socket. This crate names every method
//! ([`methods`]), its `*Params` and `*Response` types, the events a session emits
//! ([`Event`], [`EventBody`]), the turns of a conversation ([`Turn`]) and the error codes
//! ([`ErrorKind`]). It does no I/O: the daemon and every client share these types, and
//! [`schema::protocol_schema`] exports them as JSON Schema.
//!
//! ```
//! use agentd_proto::{methods::{Method, SessionSubmit}, SubmitParams, SessionId};
//!
//! assert_eq!(SessionSubmit::NAME, "session/submit");
//! let params = SubmitParams { session_id: SessionId::from("s1"), text: "hi".into(),
//!     images: vec![], client_input_id: None, when_busy: None };
//! let wire = serde_json::to_value(&params).unwrap();
//! assert_eq!(wire["text"], "hi");
//! assert!(wire.get("images").is_none());
//! ```
#![deny(missing_docs)]

mod config;
pub mod credentials;
mod error;
mod event;
mod extensions;
mod history;
mod hooks;
mod ids;
mod images;
mod mcp;
pub mod methods;
mod names;
mod params;
mod requests;
pub mod schema;
pub mod socket;
mod tools;

pub use config::{ConfigPatch, ProfileId, ReasoningEffort, SandboxMode, SessionConfig};
pub use error::{ErrorData, ErrorKind, MAX_LISTED_FILES};
pub use event::{
    DaemonEvent, EscapedProcesses, Event, EventBody, LimitKind, OutputStream, ProcessInfo,
    ProcessingEndReason, SessionEndReason, StreamEnd, StreamEndReason, StreamItem,
};
pub use extensions::{CommandInfo, CommandKind, CommandsResponse, ExtensionScope, SkillInfo};
pub use history::{
    HistoryEntry, ImageData, ProviderKind, ReasoningBlock, ToolCall, ToolResult, Turn, Usage,
};
pub use hooks::{
    HookEvent, HookOutcome, MAX_PROJECT_HOOKS_BYTES, PROJECT_HOOKS_FILE, TRUST_DIGEST_KEY,
    TRUST_TABLE,
};
pub use ids::{EntryId, InputId, SessionId, ToolCallId};
pub use images::{
    IMAGE_MEDIA_TYPES, ImageInfo, MAX_IMAGE_BYTES, MAX_IMAGES, MAX_IMAGES_BYTES, MAX_REQUEST_BYTES,
    image_media_type,
};
pub use mcp::{
    MCP_DEFAULT_STARTUP_TIMEOUT_SECS, MCP_DEFAULT_TOOL_TIMEOUT_SECS, McpServerConfig,
    McpServerState,
};
pub use names::UnknownName;
pub use params::*;
pub use requests::{
    ApprovalConfig, ApprovalMode, ApprovalPatch, ApprovalRule, ClientToolDefinition, Decision,
    PendingRequest, RequestBody, RequestId, ResolvedBy, RespondParams, RespondResponse,
};
pub use tools::BuiltinTool;

/// Protocol version, bumped on every incompatible change to the wire types. 2: closed sets of
/// names (`profile`, a session's end reason, `restart_needed`) are enums in the schema, and an
/// unknown `profile` is an invalid param (-32602) instead of `invalid_config`.
pub const PROTOCOL_VERSION: u32 = 2;
