/**
 * The agentd wire protocol as this extension uses it: method names, params, results and events,
 * mirroring `proto/schema/agentd-protocol.json` (a test checks the names against that file, so
 * this copy cannot drift silently). Types only; no I/O.
 */

export type SessionId = string;
export type InputId = string;
export type SessionState = "idle" | "processing" | "awaiting_input" | "closed";
export type WhenBusy = "queue" | "steer" | "reject";
export type Disposition = "started" | "follow_up" | "steering";

/** Methods this extension calls, each with its params and result. */
export interface Methods {
  "daemon/info": [Record<string, never>, DaemonInfo];
  "daemon/shutdown": [Record<string, never>, { aborted: number }];
  "session/create": [CreateParams, SessionSnapshot];
  "session/list": [ListParams, { sessions: SessionSummary[] }];
  "session/get": [SessionParams, SessionSnapshot];
  "session/submit": [SubmitParams, SubmitResponse];
  "session/steer": [TextParams, SubmitResponse];
  "session/follow_up": [TextParams, SubmitResponse];
  "session/queue": [SessionParams, QueueContents];
  "session/queue_clear": [SessionParams, QueueContents];
  "session/abort": [AbortParams, AbortResponse];
  "session/close": [SessionParams, { state: SessionState }];
  "session/fork": [ForkParams, SessionSnapshot];
  "session/respond": [RespondParams, { request_id: RequestId; pending: number }];
  "session/commands": [SessionParams, CommandsResponse];
  "session/rollback": [RollbackParams, RollbackResponse];
  "session/redo": [RedoParams, RedoResponse];
  "session/diff": [DiffParams, DiffResponse];
}

/** Undoes user inputs; `files` puts back what the agent changed, `force` over the user's changes. */
export interface RollbackParams extends SessionParams {
  turns?: number;
  files?: boolean;
  force?: boolean;
}

/** What an undo or a redo did to the workspace's files. */
export interface FilesRestored {
  restored: string[];
  not_restored?: string[];
  kept?: string[];
}

export interface RollbackResponse {
  leaf?: string | null;
  entries: number;
  removed: number;
  files?: FilesRestored | null;
}

export interface RedoParams extends SessionParams {
  force?: boolean;
}

export interface RedoResponse {
  leaf?: string | null;
  entries: number;
  files?: FilesRestored | null;
}

/** The agent's changes for one input (absent: the newest). */
export interface DiffParams extends SessionParams {
  input_id?: InputId;
}

export interface DiffResponse {
  input_id: InputId;
  /** A unified diff in git's style; empty when no file changed. */
  diff: string;
}

/** What a `/name` input runs: an Agent Skill or a prompt template. */
export type CommandKind = "skill" | "prompt";

/** One name a prompt may start with, as `session/commands` lists it. */
export interface CommandInfo {
  name: string;
  kind: CommandKind;
  description: string;
  argument_hint?: string | null;
  scope: "project" | "user";
  path: string;
}

/** The answer of `session/commands`. */
export interface CommandsResponse {
  commands: CommandInfo[];
  warnings?: string[];
}

export type Method = keyof Methods;
export type ParamsOf<M extends Method> = Methods[M][0];
export type ResultOf<M extends Method> = Methods[M][1];

/** Subscriptions: the subscribe method, its notification and its unsubscribe method. */
export const SUBSCRIPTIONS = {
  session: { subscribe: "session/subscribe", notification: "session/event", unsubscribe: "session/unsubscribe" },
  daemon: { subscribe: "daemon/subscribe", notification: "daemon/event", unsubscribe: "daemon/unsubscribe" },
} as const;

export interface DaemonInfo {
  version: string;
  pid: number;
  protocol: number;
  socket: string;
  sessions: number;
}

export interface CreateParams {
  cwd: string;
  title?: string;
  provider?: string;
  model?: string;
  profile?: string;
  /** Overrides of the session defaults (the part this extension sets). */
  config?: { approval?: { mode?: ApprovalMode; timeout_ms?: number; ask_user?: boolean } };
}

export type RequestId = string;
/** Whether calls that write files or run commands wait for an approval. */
export type ApprovalMode = "auto" | "ask";
/** An answer to an approval. */
export type Decision = "allow" | "allow_always" | "deny";
/** Who settled a pending request. */
export type ResolvedBy = "client" | "rule" | "timeout" | "abort";

/** Answers a pending request: `decision` for an approval, `answer` for a question. */
export interface RespondParams extends SessionParams {
  request_id: RequestId;
  decision?: Decision;
  message?: string;
  answer?: string;
  output?: string;
  is_error?: boolean;
}

/** A request waiting for an answer, as `session/get` lists it. */
export type PendingRequest = { request_id: RequestId; call_id: string; created: string; expires: string } & (
  | { type: "approval"; tool: string; arguments: unknown; summary: string }
  | { type: "question"; question: string; options: string[] }
  | { type: "client_tool"; tool: string; arguments: unknown }
);

export interface ListParams {
  cwd?: string;
  state?: SessionState;
}

export interface SessionParams {
  session_id: SessionId;
}

export interface TextParams extends SessionParams {
  text: string;
}

export interface SubmitParams extends TextParams {
  client_input_id?: string;
  when_busy?: WhenBusy;
}

export interface AbortParams extends SessionParams {
  close?: boolean;
}

export interface ForkParams extends SessionParams {
  entry_id?: string;
  title?: string;
}

export interface SubmitResponse {
  input_id: InputId;
  disposition: Disposition;
  queued: boolean;
}

export interface QueuedInput {
  input_id: InputId;
  text: string;
}

export interface QueueContents {
  steering: QueuedInput[];
  follow_up: QueuedInput[];
}

export interface AbortResponse {
  aborted: boolean;
  queue: QueueContents;
  state: SessionState;
}

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens?: number;
  cache_write_tokens?: number;
  reasoning_tokens?: number;
  cost_usd?: number | null;
  unreported_calls?: number;
}

export interface SessionSummary {
  session_id: SessionId;
  title?: string | null;
  cwd: string;
  state: SessionState;
  provider: string;
  model: string;
  parent_id?: SessionId | null;
  created: string;
  updated: string;
  usage: Usage;
}

export interface SessionSnapshot {
  session_id: SessionId;
  title?: string | null;
  cwd: string;
  state: SessionState;
  profile: string;
  parent_id?: SessionId | null;
  last_seq: number;
  queue: QueueContents;
  usage: Usage;
  config: { provider: string; model: string };
  /** Requests waiting for a client's answer, oldest first. */
  pending?: PendingRequest[];
}

/** Event kinds and their data, as `session/event` carries them. */
export interface EventData {
  session_start: { cwd: string; profile: string; title?: string | null };
  session_end: { reason: string; state: SessionState };
  state_changed: { state: SessionState };
  user_input: { input_id: InputId; text: string };
  processing_end: { input_id?: InputId | null; reason: string };
  assistant_text_start: Record<string, never>;
  assistant_text_delta: { delta: string };
  assistant_reasoning_delta: { delta: string };
  assistant_text_end: { text: string; reasoning?: string | null; tool_calls: number };
  /** `server` and `server_tool`: set for an MCP server's tool (its name there). */
  tool_call_start: { call_id: string; tool_name: string; arguments: unknown; server?: string; server_tool?: string };
  tool_call_output_delta: { call_id: string; delta: string; stream: "stdout" | "stderr" };
  tool_call_end: {
    call_id: string;
    tool_name: string;
    duration_ms: number;
    output?: string | null;
    error?: string | null;
    server?: string;
    server_tool?: string;
  };
  steering_injected: { input_id: InputId; text: string };
  turn_limit: { count: number; limit: string };
  loop_detection: { message: string };
  compaction: { automatic: boolean; tokens_before: number; tokens_after: number };
  subagent_spawned: { agent_id: SessionId; task: string };
  subagent_finished: { agent_id: SessionId; success: boolean; turns_used: number };
  rollback: { leaf?: string | null; removed: number };
  redo: { leaf?: string | null };
  events_missing: { first_seq: number; last_seq: number };
  approval_requested: { request_id: RequestId; call_id: string; tool: string; arguments: unknown; summary: string };
  approval_resolved: { request_id: RequestId; call_id: string; tool: string; decision: Decision; by: ResolvedBy; message?: string | null };
  question_requested: { request_id: RequestId; call_id: string; question: string; options: string[] };
  question_resolved: { request_id: RequestId; call_id: string; answer?: string | null; by: ResolvedBy };
  client_tool_requested: { request_id: RequestId; call_id: string; tool: string; arguments: unknown };
  client_tool_resolved: { request_id: RequestId; call_id: string; is_error: boolean; by: ResolvedBy };
  warning: { message: string };
  error: { message: string; fatal: boolean };
  usage: { call: Usage; total: Usage };
  queue_changed: { queue: QueueContents };
  mcp_server_state: {
    server: string;
    state: "starting" | "ready" | "failed" | "stopped";
    reason?: string | null;
    tools?: string[] | null;
    left_out?: string[];
  };
  hook_started: { hook_run: string; event: string; hook: string; program: string; call_id?: string | null };
  hook_finished: {
    hook_run: string;
    event: string;
    hook: string;
    outcome: string;
    exit_code?: number | null;
    duration_ms: number;
    reason?: string | null;
  };
}

export type EventKind = keyof EventData;

/** Every kind above, for the drift test against the committed schema. */
export const EVENT_KINDS: readonly EventKind[] = [
  "session_start",
  "session_end",
  "state_changed",
  "user_input",
  "processing_end",
  "assistant_text_start",
  "assistant_text_delta",
  "assistant_reasoning_delta",
  "assistant_text_end",
  "tool_call_start",
  "tool_call_output_delta",
  "tool_call_end",
  "steering_injected",
  "turn_limit",
  "loop_detection",
  "compaction",
  "subagent_spawned",
  "subagent_finished",
  "rollback",
  "redo",
  "events_missing",
  "approval_requested",
  "approval_resolved",
  "question_requested",
  "question_resolved",
  "client_tool_requested",
  "client_tool_resolved",
  "mcp_server_state",
  "hook_started",
  "hook_finished",
  "warning",
  "error",
  "usage",
  "queue_changed",
];

/** Every method named in [`Methods`], for the drift test. */
export const METHOD_NAMES: readonly Method[] = [
  "daemon/info",
  "daemon/shutdown",
  "session/create",
  "session/list",
  "session/get",
  "session/submit",
  "session/steer",
  "session/follow_up",
  "session/queue",
  "session/queue_clear",
  "session/abort",
  "session/close",
  "session/fork",
  "session/respond",
  "session/commands",
  "session/rollback",
  "session/redo",
  "session/diff",
];

/** One event of one session; `kind` selects the shape of `data`. */
export type AgentdEvent = {
  [K in EventKind]: { session_id: SessionId; seq: number; ts: string; kind: K; data: EventData[K] };
}[EventKind];

/** Why a session stream ended. */
export type StreamEndReason = "session_closed" | "lagged" | "daemon_shutdown" | "unsubscribed";

/** What a `session/event` notification carries. */
export type StreamItem =
  | ({ type: "event" } & AgentdEvent)
  | { type: "end"; session_id: SessionId; last_seq: number; reason: StreamEndReason };

/** What a `daemon/event` notification carries. */
export type DaemonEvent =
  | { kind: "session_created"; session_id: SessionId }
  | { kind: "session_deleted"; session_id: SessionId }
  | { kind: "state_changed"; session_id: SessionId; state: SessionState }
  | { kind: "lagged" }
  | { kind: "shutdown" }
  | { kind: "unsubscribed" };

/** The `data` of an application error. */
export interface ErrorData {
  kind: string;
  retryable: boolean;
  session_id?: SessionId | null;
  /** For `files_changed`: the files the user changed since (at most 100 of them). */
  files?: string[];
  /** For `files_changed`: how many more there are than `files` lists. */
  more_files?: number;
}
