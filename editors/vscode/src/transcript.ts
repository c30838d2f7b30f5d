/**
 * The transcript of one session as the chat view shows it: a list of items (user input,
 * assistant text, reasoning, tool calls with their arguments, status and output, warnings and
 * errors, usage) folded from the session's events, plus the small operations that bring a view
 * from one state to the next. Pure: no I/O and no `vscode` import, so tests feed it real events.
 */

import type { AgentdEvent, Decision, PendingRequest, SessionState, Usage } from "./protocol";
import * as path from "node:path";

export type Item =
  | { id: string; kind: "user"; text: string }
  | { id: string; kind: "steering"; text: string }
  | { id: string; kind: "assistant"; text: string; done: boolean }
  | { id: string; kind: "reasoning"; text: string }
  | {
      id: string;
      kind: "tool";
      tool: string;
      /** The arguments, pretty-printed. */
      args: string;
      /** The arguments as the model sent them. */
      arguments: unknown;
      status: "running" | "ok" | "error";
      output: string;
      /** Files the call edits (absolute), for the diff view. */
      files: string[];
    }
  | { id: string; kind: "notice"; level: "info" | "warning" | "error"; text: string }
  | { id: string; kind: "usage"; text: string }
  | {
      id: string;
      kind: "request";
      requestId: string;
      type: "approval" | "question";
      /** One line: what is asked. */
      title: string;
      /** The command, the file and its diff, or the question. */
      detail: string;
      /** The buttons to offer. */
      options: string[];
      /** How it was settled (`null` while it waits). */
      resolved: string | null;
    };

/** The buttons of an approval, and the decision each sends. */
export const APPROVAL_CHOICES: Readonly<Record<string, Decision>> = { Allow: "allow", Always: "allow_always", Deny: "deny" };
/** The button of a question that asks for a typed answer. */
export const TYPE_ANSWER = "Answer…";

export type RequestItem = Extract<Item, { kind: "request" }>;

/** The item of an approval request. */
export function approvalItem(requestId: string, tool: string, summary: string): RequestItem {
  return { id: `q${requestId}`, kind: "request", requestId, type: "approval", title: `Allow ${tool}?`, detail: summary, options: Object.keys(APPROVAL_CHOICES), resolved: null };
}

/** The item of a question from the model. */
export function questionItem(requestId: string, question: string, options: string[]): RequestItem {
  return { id: `q${requestId}`, kind: "request", requestId, type: "question", title: "The agent asks", detail: question, options: [...options, TYPE_ANSWER], resolved: null };
}

/** The item of a request `session/get` lists as pending (client tools have none here). */
export function pendingItem(p: PendingRequest): RequestItem | undefined {
  switch (p.type) {
    case "approval":
      return approvalItem(p.request_id, p.tool, p.summary);
    case "question":
      return questionItem(p.request_id, p.question, p.options);
    case "client_tool":
      return undefined;
  }
}

/**
 * What `session/respond` sends for `choice` on a request item: a decision, an answer, or
 * `undefined` when the user is to type the answer.
 */
export function responseFor(item: RequestItem, choice: string): { decision: Decision } | { answer: string } | undefined {
  if (item.type === "approval") {
    const decision = APPROVAL_CHOICES[choice];
    if (!decision) {
      throw new Error(`"${choice}" is not an answer to an approval (${Object.keys(APPROVAL_CHOICES).join(", ")})`);
    }
    return { decision };
  }
  return choice === TYPE_ANSWER ? undefined : { answer: choice };
}

/** A change to apply to a rendered transcript (items in ops are copies, never shared). */
export type Op =
  | { op: "add"; item: Item }
  | { op: "update"; item: Item }
  | { op: "append"; id: string; text: string };

/** Tools that change files, and where their arguments name the files. */
const EDIT_TOOLS = new Set(["write_file", "edit_file", "apply_patch"]);

/**
 * The files an editing tool call changes, resolved against the session's `cwd`: `file_path`
 * (or `path`) for write/edit, the `*** Add|Update|Delete File:` and `*** Move to:` lines of a
 * patch. Empty for other tools.
 */
export function editedFiles(tool: string, args: unknown, cwd: string): string[] {
  if (!EDIT_TOOLS.has(tool) || typeof args !== "object" || args === null) {
    return [];
  }
  const record = args as Record<string, unknown>;
  const named: string[] = [];
  for (const key of ["file_path", "path"]) {
    const value = record[key];
    if (typeof value === "string") {
      named.push(value);
    }
  }
  const patch = record["patch"] ?? record["input"];
  if (typeof patch === "string") {
    for (const line of patch.split("\n")) {
      const m = /^\*\*\* (?:(?:Add|Update|Delete) File|Move to): (.+)$/.exec(line.trimEnd());
      if (m?.[1]) {
        named.push(m[1].trim());
      }
    }
  }
  return [...new Set(named.map((p) => path.resolve(cwd, p)))];
}

/**
 * The content a file had before an `edit_file` call, worked back from its content after: the
 * call's `new_string` put back to `old_string`, when it occurs exactly once (so the inversion
 * is unambiguous). `undefined` for other tools and ambiguous edits.
 */
export function beforeEdit(tool: string, args: unknown, after: string): string | undefined {
  if (tool !== "edit_file" || typeof args !== "object" || args === null) {
    return undefined;
  }
  const { old_string: from, new_string: to } = args as Record<string, unknown>;
  if (typeof from !== "string" || typeof to !== "string" || to === "") {
    return undefined;
  }
  const at = after.indexOf(to);
  if (at < 0 || after.indexOf(to, at + 1) >= 0) {
    return undefined;
  }
  return after.slice(0, at) + from + after.slice(at + to.length);
}

/** `tokens in (cached) / out`, and the cost when the daemon knows it. */
export function formatUsage(call: Usage, total: Usage): string {
  const part = (u: Usage) => {
    const cached = u.cache_read_tokens ? ` (${u.cache_read_tokens} cached)` : "";
    return `${u.input_tokens}${cached} in / ${u.output_tokens} out`;
  };
  const cost = typeof total.cost_usd === "number" ? ` · $${total.cost_usd.toFixed(4)}` : "";
  const unknown = total.unreported_calls ? ` · ${total.unreported_calls} call(s) unreported` : "";
  return `call ${part(call)} · session ${part(total)}${cost}${unknown}`;
}

/** A session's transcript, built event by event. */
export class Transcript {
  readonly items: Item[] = [];
  state: SessionState = "idle";
  private readonly byId = new Map<string, Item>();
  /** The assistant and reasoning items of the response being streamed. */
  private assistant: Extract<Item, { kind: "assistant" }> | undefined;
  private reasoning: Extract<Item, { kind: "reasoning" }> | undefined;
  private cwd: string;

  constructor(cwd: string) {
    this.cwd = cwd;
  }

  /** Folds one event in; returns what changed. */
  apply(event: AgentdEvent): Op[] {
    const seq = event.seq;
    switch (event.kind) {
      case "session_start":
        this.cwd = event.data.cwd;
        return [];
      case "state_changed":
        this.state = event.data.state;
        return [];
      case "session_end":
        this.state = "closed";
        return [this.add({ id: `n${seq}`, kind: "notice", level: "info", text: `Session closed (${event.data.reason}).` })];
      case "user_input":
        return [this.add({ id: `u${seq}`, kind: "user", text: event.data.text })];
      case "steering_injected":
        return [this.add({ id: `s${seq}`, kind: "steering", text: event.data.text })];
      case "assistant_text_start":
        // Reasoning may stream before the start; it belongs to this response.
        this.assistant = undefined;
        return [];
      case "assistant_reasoning_delta": {
        if (!this.reasoning) {
          this.reasoning = { id: `r${seq}`, kind: "reasoning", text: "" };
          const ops = [this.add(this.reasoning)];
          this.reasoning.text += event.data.delta;
          ops.push({ op: "append", id: this.reasoning.id, text: event.data.delta });
          return ops;
        }
        this.reasoning.text += event.data.delta;
        return [{ op: "append", id: this.reasoning.id, text: event.data.delta }];
      }
      case "assistant_text_delta": {
        const ops: Op[] = [];
        if (!this.assistant) {
          this.assistant = { id: `a${seq}`, kind: "assistant", text: "", done: false };
          ops.push(this.add(this.assistant));
        }
        this.assistant.text += event.data.delta;
        ops.push({ op: "append", id: this.assistant.id, text: event.data.delta });
        return ops;
      }
      case "assistant_text_end": {
        const ops: Op[] = [];
        const { text, reasoning } = event.data;
        if (reasoning && !this.reasoning) {
          // Attached after the reasoning streamed: show it whole.
          ops.push(this.add({ id: `r${seq}`, kind: "reasoning", text: reasoning }));
        }
        if (text) {
          if (this.assistant) {
            this.assistant.text = text;
            this.assistant.done = true;
            ops.push({ op: "update", item: { ...this.assistant } });
          } else {
            ops.push(this.add({ id: `a${seq}`, kind: "assistant", text, done: true }));
          }
        }
        this.assistant = undefined;
        this.reasoning = undefined;
        return ops;
      }
      case "tool_call_start": {
        const { call_id, tool_name, arguments: args } = event.data;
        return [
          this.add({
            id: `t${call_id}`,
            kind: "tool",
            tool: tool_name,
            args: typeof args === "string" ? args : JSON.stringify(args, null, 2),
            arguments: args,
            status: "running",
            output: "",
            files: editedFiles(tool_name, args, this.cwd),
          }),
        ];
      }
      case "tool_call_output_delta": {
        const item = this.byId.get(`t${event.data.call_id}`);
        if (item?.kind !== "tool") {
          return [];
        }
        item.output += event.data.delta;
        return [{ op: "append", id: item.id, text: event.data.delta }];
      }
      case "tool_call_end": {
        const { call_id, tool_name, output, error } = event.data;
        const existing = this.byId.get(`t${call_id}`);
        const item =
          existing?.kind === "tool"
            ? existing
            : { id: `t${call_id}`, kind: "tool" as const, tool: tool_name, args: "", arguments: null, status: "running" as const, output: "", files: [] };
        const updated: Item = { ...item, status: error ? "error" : "ok", output: error ?? output ?? "" };
        if (!existing) {
          return [this.add(updated)];
        }
        this.replace(updated);
        return [{ op: "update", item: updated }];
      }
      case "processing_end":
        this.assistant = undefined;
        this.reasoning = undefined;
        return event.data.reason === "completed"
          ? []
          : [this.add({ id: `n${seq}`, kind: "notice", level: event.data.reason === "error" ? "error" : "info", text: `Stopped: ${event.data.reason.replace(/_/g, " ")}.` })];
      case "warning":
        return [this.add({ id: `n${seq}`, kind: "notice", level: "warning", text: event.data.message })];
      case "error":
        return [this.add({ id: `n${seq}`, kind: "notice", level: "error", text: event.data.message })];
      case "loop_detection":
        return [this.add({ id: `n${seq}`, kind: "notice", level: "warning", text: event.data.message })];
      case "mcp_server_state": {
        // Starting is a moment, not news; ready, failed and stopped are.
        const { server, state, reason, tools } = event.data;
        if (state === "starting") {
          return [];
        }
        const what = state === "ready" ? `ready, ${tools?.length ?? 0} tools` : state;
        const text = `MCP server ${server}: ${what}${reason ? ` (${reason})` : ""}.`;
        return [this.add({ id: `n${seq}`, kind: "notice", level: state === "failed" ? "warning" : "info", text })];
      }
      case "turn_limit":
        return [this.add({ id: `n${seq}`, kind: "notice", level: "warning", text: `Turn limit reached (${event.data.limit}: ${event.data.count}).` })];
      case "compaction":
        return [this.add({ id: `n${seq}`, kind: "notice", level: "info", text: `Compacted: ${event.data.tokens_before} → ${event.data.tokens_after} tokens.` })];
      case "subagent_spawned":
        return [this.add({ id: `n${seq}`, kind: "notice", level: "info", text: `Subagent ${event.data.agent_id}: ${event.data.task}` })];
      case "subagent_finished":
        return [this.add({ id: `n${seq}`, kind: "notice", level: "info", text: `Subagent ${event.data.agent_id} finished (${event.data.success ? "ok" : "failed"}).` })];
      case "events_missing":
        return [this.add({ id: `n${seq}`, kind: "notice", level: "warning", text: `Events ${event.data.first_seq}–${event.data.last_seq} were never stored (the daemon stopped).` })];
      case "usage": {
        const text = formatUsage(event.data.call, event.data.total);
        const last = this.items[this.items.length - 1];
        if (last?.kind === "usage") {
          const updated: Item = { ...last, text };
          this.replace(updated);
          return [{ op: "update", item: updated }];
        }
        return [this.add({ id: `g${seq}`, kind: "usage", text })];
      }
      case "approval_requested": {
        const { request_id, tool, summary } = event.data;
        return [this.add(approvalItem(request_id, tool, summary))];
      }
      case "approval_resolved": {
        const { request_id, decision, by, message } = event.data;
        const said = `${decision.replace("_", " ")}${by === "client" ? "" : ` (by ${by})`}${message ? `: ${message}` : ""}`;
        return this.resolve(`q${request_id}`, said);
      }
      case "question_requested": {
        const { request_id, question, options } = event.data;
        return [this.add(questionItem(request_id, question, options))];
      }
      case "question_resolved": {
        const { request_id, answer, by } = event.data;
        return this.resolve(`q${request_id}`, answer ? `answered: ${answer}` : `unanswered (${by})`);
      }
      case "client_tool_requested":
        return [this.add({ id: `n${seq}`, kind: "notice", level: "info", text: `Client tool ${event.data.tool} called; the client that defined it answers.` })];
      case "rollback":
        return [this.add({ id: `n${seq}`, kind: "notice", level: "info", text: `Undone: ${event.data.removed} entries taken back (agentd: Redo brings them back).` })];
      case "redo":
        return [this.add({ id: `n${seq}`, kind: "notice", level: "info", text: "Redone: what the undo took back is on the branch again." })];
      case "client_tool_resolved":
      case "queue_changed":
        return [];
    }
    return [];
  }

  /** The requests still waiting for an answer. */
  pending(): RequestItem[] {
    return this.items.filter((i): i is RequestItem => i.kind === "request" && i.resolved === null);
  }

  private resolve(id: string, resolved: string): Op[] {
    const item = this.byId.get(id);
    if (item?.kind !== "request") {
      return [];
    }
    const updated: Item = { ...item, resolved };
    this.replace(updated);
    return [{ op: "update", item: updated }];
  }

  private add(item: Item): Op {
    this.items.push(item);
    this.byId.set(item.id, item);
    // A copy: the item goes on changing, and the op must say what it was now.
    return { op: "add", item: { ...item } };
  }

  private replace(item: Item): void {
    const index = this.items.findIndex((i) => i.id === item.id);
    if (index >= 0) {
      this.items[index] = item;
    }
    this.byId.set(item.id, item);
  }
}
