//! The method table: one marker type per method, pairing its wire name with its params and
//! result types. The daemon registers handlers from it and clients call through it, so a name
//! and its types cannot drift apart.
//!
//! Params are a JSON object whose fields are the params type's fields (never wrapped in an
//! array), so `socat`, Python or Neovim can send `{"session_id": "..."}` as is.

use crate::*;
use schemars::JsonSchema;
use serde::{Serialize, de::DeserializeOwned};

/// A request/response method.
pub trait Method {
    /// The wire name, `noun/verb`.
    const NAME: &'static str;
    /// One line for documentation.
    const DOC: &'static str;
    /// The `params` object.
    type Params: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
    /// The `result`.
    type Response: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
}

/// A subscription: a method that answers with a subscription id and then sends notifications.
pub trait Subscription {
    /// The wire name of the subscribe method.
    const NAME: &'static str;
    /// The notification method carrying items.
    const NOTIFICATION: &'static str;
    /// The method that ends the subscription early.
    const UNSUBSCRIBE: &'static str;
    /// One line for documentation.
    const DOC: &'static str;
    /// The `params` object.
    type Params: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
    /// What each notification carries.
    type Item: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
}

macro_rules! methods {
    ($($(#[doc = $doc:literal])* $ty:ident = $name:literal ($params:ty) -> $resp:ty;)*) => {
        $(
            $(#[doc = $doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $ty;
            impl Method for $ty {
                const NAME: &'static str = $name;
                const DOC: &'static str = concat!($($doc),*);
                type Params = $params;
                type Response = $resp;
            }
        )*

        /// Calls `visit` once per method, in table order (schema export, docs).
        pub fn for_each_method(visit: &mut impl MethodVisitor) {
            $( visit.method::<$ty>(); )*
        }
    };
}

/// Something that walks the method table, see [`for_each_method`].
pub trait MethodVisitor {
    /// Called once per request/response method.
    fn method<M: Method>(&mut self);
    /// Called once per subscription.
    fn subscription<S: Subscription>(&mut self);
}

methods! {
    /// Version, pid, uptime, socket, session counts and configured providers.
    DaemonInfoMethod = "daemon/info" (Empty) -> DaemonInfo;
    /// Read the config file (and the credentials file) again: new sessions get the new
    /// config, running ones keep theirs. A file that does not load is refused with
    /// `invalid_config`, and the old config stays. SIGHUP does the same.
    DaemonReload = "daemon/reload" (Empty) -> ReloadResponse;
    /// Graceful stop: abort running work, flush, remove the socket, exit.
    DaemonShutdown = "daemon/shutdown" (Empty) -> ShutdownResponse;
    /// Create a session in a working directory with a provider, model and profile.
    SessionCreate = "session/create" (CreateParams) -> SessionSnapshot;
    /// Summaries of sessions, newest first, optionally filtered.
    SessionList = "session/list" (ListParams) -> ListResponse;
    /// A session's full snapshot: config, state, queues, usage, last seq.
    SessionGet = "session/get" (SessionParams) -> SessionSnapshot;
    /// Submit input: starts processing when idle, else queues, steers or rejects (`when_busy`).
    SessionSubmit = "session/submit" (SubmitParams) -> SubmitResponse;
    /// Queue a steering message, injected after the current tool round (spec 2.6).
    SessionSteer = "session/steer" (TextParams) -> SubmitResponse;
    /// Queue a follow-up, processed after the current input completes (spec 2.6).
    SessionFollowUp = "session/follow_up" (TextParams) -> SubmitResponse;
    /// The queued steering and follow-up items.
    SessionQueue = "session/queue" (SessionParams) -> QueueContents;
    /// Remove every queued item and return them.
    SessionQueueClear = "session/queue_clear" (SessionParams) -> QueueContents;
    /// Stop the current work (the session becomes idle), or close the session with `close`.
    SessionAbort = "session/abort" (AbortParams) -> AbortResponse;
    /// Close the session: abort running work, then state `closed`.
    SessionClose = "session/close" (SessionParams) -> CloseResponse;
    /// Change model, reasoning effort, limits or timeouts from the next LLM call.
    SessionSetConfig = "session/set_config" (SetConfigParams) -> SessionSnapshot;
    /// The conversation's turns, paged.
    SessionHistory = "session/history" (HistoryParams) -> HistoryResponse;
    /// A new session whose history is a copy of this one's branch up to an entry.
    SessionFork = "session/fork" (ForkParams) -> SessionSnapshot;
    /// Move the branch back by user inputs; nothing is deleted (an idle session only).
    SessionRollback = "session/rollback" (RollbackParams) -> RollbackResponse;
    /// Bring back what the last rollback took away: the conversation, and the files when it
    /// put files back (an idle session only).
    SessionRedo = "session/redo" (RedoParams) -> RedoResponse;
    /// What the agent changed in the workspace's files for one input, as a unified diff.
    SessionDiff = "session/diff" (DiffParams) -> DiffResponse;
    /// Replace older turns with a summary written by the session's model (idle only).
    SessionCompact = "session/compact" (SessionParams) -> CompactResponse;
    /// Answer a pending request (an approval, a question, a client tool call); the first
    /// answer wins.
    SessionRespond = "session/respond" (RespondParams) -> RespondResponse;
    /// Close the session if needed and delete it with its stored history and events.
    SessionDelete = "session/delete" (SessionParams) -> DeleteResponse;
    /// The skills and prompt commands a client can offer after `/`, found when the session
    /// was made or loaded.
    SessionCommands = "session/commands" (SessionParams) -> CommandsResponse;
}

/// Stream a session's events: replay those after `since_seq`, then live ones.
#[derive(Debug, Clone, Copy)]
pub struct SessionSubscribe;
impl Subscription for SessionSubscribe {
    const NAME: &'static str = "session/subscribe";
    const NOTIFICATION: &'static str = "session/event";
    const UNSUBSCRIBE: &'static str = "session/unsubscribe";
    const DOC: &'static str =
        "Stream a session's events: replay those with seq > since_seq, then live ones.";
    type Params = SubscribeParams;
    type Item = StreamItem;
}

/// Stream daemon-wide notifications: sessions created and deleted, state changes.
#[derive(Debug, Clone, Copy)]
pub struct DaemonSubscribe;
impl Subscription for DaemonSubscribe {
    const NAME: &'static str = "daemon/subscribe";
    const NOTIFICATION: &'static str = "daemon/event";
    const UNSUBSCRIBE: &'static str = "daemon/unsubscribe";
    const DOC: &'static str =
        "Stream daemon-wide notifications: sessions created and deleted, state changes.";
    type Params = Empty;
    type Item = DaemonEvent;
}

/// Calls `visit` once per subscription.
pub fn for_each_subscription(visit: &mut impl MethodVisitor) {
    visit.subscription::<SessionSubscribe>();
    visit.subscription::<DaemonSubscribe>();
}
