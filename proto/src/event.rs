//! Events: everything a session does, in order, each with a per-session `seq`.
//!
//! A subscription to a session (`session/subscribe`) delivers [`StreamItem`]s: events, then
//! always one final [`StreamEnd`] saying why the stream stopped.

use crate::hooks::{HookEvent, HookOutcome};
use crate::names::names;
use crate::params::{QueueContents, SessionState};
use crate::requests::{Decision, RequestId, ResolvedBy};
use crate::{
    EntryId, ImageInfo, InputId, McpServerState, ProfileId, SessionConfig, SessionId, ToolCallId,
    Usage,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One event of one session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Event {
    /// The session that emitted it.
    pub session_id: SessionId,
    /// Position in the session's event log: 1 for the first event, then one more each time.
    pub seq: u64,
    /// When it was emitted (RFC 3339, milliseconds).
    pub ts: String,
    /// `kind` and `data`.
    #[serde(flatten)]
    pub body: EventBody,
}

/// Why a processing cycle ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProcessingEndReason {
    /// The model answered with text only.
    Completed,
    /// A client aborted the work.
    Aborted,
    /// `max_tool_rounds_per_input` or `max_turns` was reached.
    TurnLimit,
    /// An error stopped the work; an `error` event came before.
    Error,
    /// The model's answer was cut off at the output-token limit (`max_output_tokens`); a
    /// `warning` event naming the limit came before. The partial answer is in the history.
    MaxTokens,
    /// The model declined to answer (its provider reported a refusal or a safety block); a
    /// `warning` event came before, and whatever text it gave is the answer. As after
    /// `max_tokens`, queued follow-ups wait for the next input: the refused request is still
    /// in the context (roll it back, or rephrase).
    Refusal,
}

names! {
    /// Why a session closed (`session_end`).
    pub enum SessionEndReason ("session end reason") {
        /// A client closed it (`session/close`), or the program embedding it.
        ClosedByClient = "closed by client",
        /// A client aborted its work and closed it (`session/abort {close: true}`).
        Aborted = "aborted",
        /// Its parent closed it (the `close_agent` tool).
        ClosedByParent = "closed by its parent",
        /// Its parent closed, and its subagents with it.
        ParentClosed = "its parent closed",
        /// It was deleted (`session/delete`).
        Deleted = "deleted",
        /// Its provider refused it for good (a rejected key); a fatal `error` event came
        /// before.
        ProviderFailed = "unrecoverable provider error",
    }
}

/// Which limit a `turn_limit` event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// Tool rounds for one input.
    MaxToolRoundsPerInput,
    /// Turns across the session.
    MaxTurns,
}

/// Which output stream of a command a delta came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// The kind of an event and its data, as `{"kind": ..., "data": {...}}` (spec 2.9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum EventBody {
    /// The session was created.
    SessionStart {
        /// Working directory.
        cwd: String,
        /// Tool profile.
        profile: ProfileId,
        /// Initial configuration.
        config: Box<SessionConfig>,
        /// Title given at creation.
        title: Option<String>,
    },
    /// The session closed; no event follows.
    SessionEnd {
        /// Final state (always `closed`).
        state: SessionState,
        /// Why it closed.
        reason: SessionEndReason,
    },
    /// The session changed state.
    StateChanged {
        /// The new state.
        state: SessionState,
    },
    /// An input started processing.
    UserInput {
        /// Its id.
        input_id: InputId,
        /// Its text.
        text: String,
        /// The images sent with it: type and size only (`session/history {input_id}` returns
        /// them).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageInfo>,
    },
    /// The processing cycle finished and the session is idle.
    ProcessingEnd {
        /// Why it ended.
        reason: ProcessingEndReason,
        /// The input that was running when it ended (the last follow-up of the cycle, when
        /// follow-ups ran after the submitted input); absent when none was (an interrupted
        /// cycle closed after a restart).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input_id: Option<InputId>,
    },
    /// The model began the text of a response. Every `assistant_text_end` follows exactly one
    /// `assistant_text_start`: it comes before the first `assistant_text_delta`, or, for a
    /// response without text (tool calls only), just before that response's `usage` and
    /// `assistant_text_end`. Reasoning deltas may come before it. A response that fails or is
    /// aborted after its start still ends with `assistant_text_end` (the partial text); one
    /// that fails before any text has neither.
    AssistantTextStart {},
    /// Text the model produced, as it arrives.
    AssistantTextDelta {
        /// The new text.
        delta: String,
    },
    /// Reasoning the model produced, as it arrives.
    AssistantReasoningDelta {
        /// The new reasoning text.
        delta: String,
    },
    /// The model finished a response (or it was cut off after its text began); always after
    /// its `assistant_text_start`.
    AssistantTextEnd {
        /// The whole text.
        text: String,
        /// The whole reasoning, if any.
        reasoning: Option<String>,
        /// How many tool calls the response requested.
        tool_calls: usize,
    },
    /// A tool call began.
    ToolCallStart {
        /// The call's id.
        call_id: ToolCallId,
        /// The tool.
        tool_name: String,
        /// The arguments the model sent.
        arguments: serde_json::Value,
        /// For a tool of an MCP server: the server's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<String>,
        /// For a tool of an MCP server: the server's own name of the tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server_tool: Option<String>,
    },
    /// Output of a running tool call, as it arrives.
    ToolCallOutputDelta {
        /// The call's id.
        call_id: ToolCallId,
        /// Which stream.
        stream: OutputStream,
        /// The new output.
        delta: String,
    },
    /// A tool call finished: `output` holds the FULL untruncated output, or `error` the failure.
    ToolCallEnd {
        /// The call's id.
        call_id: ToolCallId,
        /// The tool.
        tool_name: String,
        /// Full output on success.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        /// Error message on failure.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Wall-clock duration.
        duration_ms: u64,
        /// For a tool of an MCP server: the server's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<String>,
        /// For a tool of an MCP server: the server's own name of the tool.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server_tool: Option<String>,
    },
    /// A steering message was added to the conversation.
    SteeringInjected {
        /// The input's id.
        input_id: InputId,
        /// The message.
        text: String,
        /// The images sent with it: type and size only (`session/history {input_id}` returns
        /// them).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageInfo>,
    },
    /// A turn limit stopped the loop.
    TurnLimit {
        /// Which limit.
        limit: LimitKind,
        /// The count that reached it.
        count: u32,
    },
    /// The last tool calls repeat a pattern; a warning was injected for the model.
    LoopDetection {
        /// The warning the model sees.
        message: String,
    },
    /// Older turns were replaced by a summary in what the model sees; the full history stays
    /// in the session's tree.
    Compaction {
        /// Estimated context tokens before.
        tokens_before: u64,
        /// Estimated context tokens after.
        tokens_after: u64,
        /// History entries the summary replaces.
        entries_summarized: usize,
        /// Recent entries kept as they are.
        entries_kept: usize,
        /// Whether the context threshold triggered it (rather than `session/compact`).
        automatic: bool,
    },
    /// A tool call started a subagent: a child session working on `task`.
    SubagentSpawned {
        /// The child session's id.
        agent_id: SessionId,
        /// What it was asked to do.
        task: String,
        /// The git worktree it works in, when it was spawned with `worktree`; it stays when
        /// the child ends (and goes with the child's `session/delete` only if nothing there
        /// would be lost).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worktree: Option<crate::Worktree>,
    },
    /// A subagent finished working on its input (it stays open for `send_input`).
    SubagentFinished {
        /// The child session's id.
        agent_id: SessionId,
        /// Whether its work completed (rather than failing or being stopped).
        success: bool,
        /// Model turns it has used.
        turns_used: u32,
    },
    /// The current branch moved back (`session/rollback`); the entries after `leaf` are off
    /// the branch but still stored.
    Rollback {
        /// The new leaf (`None`: the branch is empty).
        leaf: Option<EntryId>,
        /// Entries taken off the branch.
        removed: usize,
    },
    /// The branch moved forward again to where a rollback took it from (`session/redo`).
    Redo {
        /// The leaf again.
        leaf: Option<EntryId>,
    },
    /// Events with these seqs were never stored: the daemon stopped (a crash, `kill -9`, a
    /// power loss) before writing them, though clients may have seen some. Their seqs are
    /// never reused; a client resuming inside the range continues after it.
    EventsMissing {
        /// The first missing seq.
        first_seq: u64,
        /// The last missing seq.
        last_seq: u64,
    },
    /// A call waits for approval (`approval.mode` is `ask` and no rule decided it); the
    /// session is `awaiting_input` until every request is settled. Answer with
    /// `session/respond {decision}`.
    ApprovalRequested {
        /// The request, for `session/respond`.
        request_id: RequestId,
        /// The call waiting.
        call_id: ToolCallId,
        /// The tool.
        tool: String,
        /// The arguments the model sent.
        arguments: serde_json::Value,
        /// What a person reads: the command line, or the file and a diff.
        summary: String,
    },
    /// An approval was settled; a denied call is not run and the model is told why.
    ApprovalResolved {
        /// The request (a fresh id when a rule decided without asking).
        request_id: RequestId,
        /// The call.
        call_id: ToolCallId,
        /// The tool.
        tool: String,
        /// The decision.
        decision: Decision,
        /// Who decided.
        by: ResolvedBy,
        /// The message given with a denial, or the rule that decided.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// The model asks the user (`ask_user`). Answer with `session/respond {answer}`.
    QuestionRequested {
        /// The request, for `session/respond`.
        request_id: RequestId,
        /// The `ask_user` call.
        call_id: ToolCallId,
        /// The question.
        question: String,
        /// Suggested answers; any text is accepted.
        options: Vec<String>,
    },
    /// A question was settled.
    QuestionResolved {
        /// The request.
        request_id: RequestId,
        /// The `ask_user` call.
        call_id: ToolCallId,
        /// The answer (`None` when nobody answered: timeout or abort).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<String>,
        /// Who settled it.
        by: ResolvedBy,
    },
    /// The model called a client tool. Answer with `session/respond {output, is_error}`.
    ClientToolRequested {
        /// The request, for `session/respond`.
        request_id: RequestId,
        /// The call.
        call_id: ToolCallId,
        /// The client tool.
        tool: String,
        /// The arguments the model sent.
        arguments: serde_json::Value,
    },
    /// A client tool call was settled.
    ClientToolResolved {
        /// The request.
        request_id: RequestId,
        /// The call.
        call_id: ToolCallId,
        /// Whether the result is an error (always for timeout and abort).
        is_error: bool,
        /// Who settled it.
        by: ResolvedBy,
    },
    /// A non-fatal problem (context usage, retries, interrupted work, processes that left a
    /// tool call's process group).
    Warning {
        /// What happened.
        message: String,
        /// When the warning is about processes that left a tool call's process group: which.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        escaped: Option<EscapedProcesses>,
    },
    /// An error; processing stops, and the session closes if it cannot continue.
    Error {
        /// What happened.
        message: String,
        /// Whether the session was closed because of it.
        fatal: bool,
    },
    /// Token usage of one LLM call, and the session's total.
    Usage {
        /// This call.
        call: Usage,
        /// The session so far.
        total: Usage,
    },
    /// The steering or follow-up queue changed.
    QueueChanged {
        /// What is queued now.
        queue: QueueContents,
    },
    /// A hook (`[[hooks.EVENT]]`) started.
    HookStarted {
        /// Pairs it with its `hook_finished`; unique in the session.
        hook_run: String,
        /// The point of the loop it runs at.
        event: HookEvent,
        /// Where it is configured: `hooks.EVENT[N]` in the config file, or
        /// `.agents/hooks.toml hooks.EVENT[N]` in the workspace.
        hook: String,
        /// The first word of its command (the rest may hold what no event should).
        program: String,
        /// The tool call it runs for (`pre_tool_use`, `post_tool_use`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<ToolCallId>,
    },
    /// A hook ended; whatever it did, the work went on unless it blocked.
    HookFinished {
        /// Its `hook_started`'s `hook_run`.
        hook_run: String,
        /// The point of the loop it ran at.
        event: HookEvent,
        /// Where it is configured, as in `hook_started`.
        hook: String,
        /// How it ended.
        outcome: HookOutcome,
        /// Its exit code (`None`: killed by a signal, or never started).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// How long it ran.
        duration_ms: u64,
        /// Why it blocked, failed or timed out (at most 4 KiB: its own words, cut).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// One of the session's MCP servers changed state, or its tools changed.
    McpServerState {
        /// The server's name (the key of `mcp_servers`).
        server: String,
        /// Where it is now.
        state: McpServerState,
        /// Why it failed or stopped; when ready, how many of its tools are not offered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// When ready: the tools offered, as the model sees them (`mcp__SERVER__TOOL`), in
        /// the order it sees them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tools: Option<Vec<String>>,
        /// When ready: the server's tools left out (its own names, at most 256; `reason`
        /// counts them all): past the 128 a server may offer or the 256 KiB their
        /// definitions may take, or with a schema that cannot be used; and in a session whose
        /// sandbox is read-only, those not marked `readOnlyHint` (or marked
        /// `destructiveHint`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        left_out: Vec<String>,
    },
}

impl EventBody {
    /// The `kind` string of this event.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::SessionStart { .. } => "session_start",
            Self::SessionEnd { .. } => "session_end",
            Self::StateChanged { .. } => "state_changed",
            Self::UserInput { .. } => "user_input",
            Self::ProcessingEnd { .. } => "processing_end",
            Self::AssistantTextStart {} => "assistant_text_start",
            Self::AssistantTextDelta { .. } => "assistant_text_delta",
            Self::AssistantReasoningDelta { .. } => "assistant_reasoning_delta",
            Self::AssistantTextEnd { .. } => "assistant_text_end",
            Self::ToolCallStart { .. } => "tool_call_start",
            Self::ToolCallOutputDelta { .. } => "tool_call_output_delta",
            Self::ToolCallEnd { .. } => "tool_call_end",
            Self::SteeringInjected { .. } => "steering_injected",
            Self::TurnLimit { .. } => "turn_limit",
            Self::LoopDetection { .. } => "loop_detection",
            Self::Compaction { .. } => "compaction",
            Self::SubagentSpawned { .. } => "subagent_spawned",
            Self::SubagentFinished { .. } => "subagent_finished",
            Self::Rollback { .. } => "rollback",
            Self::Redo { .. } => "redo",
            Self::EventsMissing { .. } => "events_missing",
            Self::ApprovalRequested { .. } => "approval_requested",
            Self::ApprovalResolved { .. } => "approval_resolved",
            Self::QuestionRequested { .. } => "question_requested",
            Self::QuestionResolved { .. } => "question_resolved",
            Self::ClientToolRequested { .. } => "client_tool_requested",
            Self::ClientToolResolved { .. } => "client_tool_resolved",
            Self::Warning { .. } => "warning",
            Self::Error { .. } => "error",
            Self::Usage { .. } => "usage",
            Self::QueueChanged { .. } => "queue_changed",
            Self::McpServerState { .. } => "mcp_server_state",
            Self::HookStarted { .. } => "hook_started",
            Self::HookFinished { .. } => "hook_finished",
        }
    }
}

impl EventBody {
    /// A `warning` with a message only.
    pub fn warning(message: impl Into<String>) -> Self {
        Self::Warning {
            message: message.into(),
            escaped: None,
        }
    }
}

/// Processes a tool call started that left its process group (`setsid`, a double fork), found
/// when the call ended, timed out or was aborted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EscapedProcesses {
    /// The tool call that started them.
    pub call_id: ToolCallId,
    /// The processes, as found (at most 64; `count` says how many there were).
    pub processes: Vec<ProcessInfo>,
    /// How many processes had left the group.
    pub count: usize,
    /// Whether they were ended with the call (a timeout or an abort). Otherwise they keep
    /// running until the session is aborted or closed.
    pub ended: bool,
}

/// One process, as `/proc` names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessInfo {
    /// Its process id.
    pub pid: u32,
    /// Its command line (or name), shortened.
    pub command: String,
}

names! {
    /// Why a subscription's stream ended.
    pub enum StreamEndReason ("stream end reason") {
        /// The session closed; its last event was `session_end`.
        SessionClosed = "session_closed",
        /// The subscriber fell behind its bounded buffer. Resubscribe with `since_seq` set to the
        /// last `seq` received: nothing is lost.
        Lagged = "lagged",
        /// The daemon is shutting down.
        DaemonShutdown = "daemon_shutdown",
        /// The client ended the subscription (`session/unsubscribe`).
        Unsubscribed = "unsubscribed",
    }
}

/// The final message of every subscription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StreamEnd {
    /// The session whose stream this was.
    pub session_id: SessionId,
    /// Why the stream ended.
    pub reason: StreamEndReason,
    /// The seq of the last event delivered on this stream (0 if none).
    pub last_seq: u64,
}

/// What a `session/event` notification carries: an event, or the end of the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamItem {
    /// One event.
    Event(Event),
    /// The stream ended; no more notifications follow on this subscription.
    End(StreamEnd),
}

/// What a `daemon/event` notification carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DaemonEvent {
    /// A session was created.
    SessionCreated {
        /// Its id.
        session_id: SessionId,
    },
    /// A session was deleted with its stored history and events.
    SessionDeleted {
        /// Its id.
        session_id: SessionId,
    },
    /// A session changed state.
    StateChanged {
        /// Its id.
        session_id: SessionId,
        /// The new state.
        state: SessionState,
    },
    /// The subscriber fell behind and was dropped; resubscribe and call `session/list`.
    Lagged {},
    /// The daemon is shutting down; this is the last notification.
    Shutdown {},
    /// The client ended the subscription (`daemon/unsubscribe`); this is the last
    /// notification.
    Unsubscribed {},
}

impl DaemonEvent {
    /// Whether this is the last notification of its subscription.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            Self::Lagged {} | Self::Shutdown {} | Self::Unsubscribed {}
        )
    }
}
