/**
 * The session the editor is attached to: its transcript, kept current from the session's event
 * stream (replayed from the first event, then live, across reconnects), its state for the
 * status bar, and the diffs of the files its live tool calls edit. No `vscode` import (the
 * editor's parts come in as [`Diffs`] and [`AttachedListener`]), so tests run it under Node.
 */

import type { AgentdClient, SessionWatch } from "./client";
import type { AgentdEvent, SessionId, SessionState } from "./protocol";
import { type Op, pendingItem, type RequestItem, Transcript } from "./transcript";

/** Where live edits go: a snapshot when a call starts, a diff when it ends ([`EditDiffs`]). */
export interface Diffs {
  snapshot(callId: string, files: string[]): Promise<void>;
  open(callId: string, files: string[], tool: string, args: unknown): Promise<void>;
}

export interface AttachedListener {
  ops(ops: Op[]): void;
  state(state: SessionState): void;
  /** A request waits for an answer: raised live, or pending when the editor attached. */
  request(item: RequestItem): void;
}

export class AttachedSession {
  private watch: SessionWatch | undefined;
  private disposed = false;
  /** The state shown: the snapshot's while the replay walks through older states. */
  private current: SessionState;

  private constructor(
    readonly id: SessionId,
    readonly title: string,
    readonly transcript: Transcript,
    /** Events up to this seq happened before the attach: no diffs pop up for them. */
    private readonly liveAfter: number,
    private readonly diffs: Diffs,
    private readonly listener: AttachedListener,
  ) {
    this.current = transcript.state;
  }

  /** Attaches to `id`: replays its events from the start, then follows it. */
  static async attach(client: AgentdClient, id: SessionId, diffs: Diffs, listener: AttachedListener): Promise<AttachedSession> {
    const snapshot = await client.request("session/get", { session_id: id });
    const transcript = new Transcript(snapshot.cwd);
    const title = snapshot.title || id.slice(0, 8);
    transcript.state = snapshot.state;
    const attached = new AttachedSession(id, title, transcript, snapshot.last_seq, diffs, listener);
    listener.state(snapshot.state);
    // The replay walks the states again and ends at the current one.
    attached.watch = await client.watchSession(id, 0, (event) => attached.onEvent(event));
    for (const pending of snapshot.pending ?? []) {
      const item = pendingItem(pending);
      if (item) {
        listener.request(item);
      }
    }
    return attached;
  }

  get state(): SessionState {
    return this.current;
  }

  /** The files a tool call item edits, for the chat view's "Show diff". */
  async showDiff(itemId: string): Promise<void> {
    const item = this.transcript.items.find((i) => i.id === itemId);
    if (item?.kind === "tool") {
      await this.diffs.open(item.id, item.files, item.tool, item.arguments);
    }
  }

  async detach(): Promise<void> {
    this.disposed = true;
    await this.watch?.stop().catch(() => undefined);
  }

  private onEvent(event: AgentdEvent): void {
    if (this.disposed) {
      return;
    }
    const ops = this.transcript.apply(event);
    if (ops.length > 0) {
      this.listener.ops(ops);
    }
    if (event.seq >= this.liveAfter && this.transcript.state !== this.current) {
      this.current = this.transcript.state;
      this.listener.state(this.current);
    }
    if (event.seq > this.liveAfter) {
      this.liveEdits(event);
      for (const op of ops) {
        if (op.op === "add" && op.item.kind === "request") {
          this.listener.request(op.item);
        }
      }
    }
  }

  /** Snapshots the files an edit is about to change, and opens the diff once it is done. */
  private liveEdits(event: AgentdEvent): void {
    if (event.kind !== "tool_call_start" && event.kind !== "tool_call_end") {
      return;
    }
    const id = `t${event.data.call_id}`;
    const item = this.transcript.items.find((i) => i.id === id);
    if (item?.kind !== "tool" || item.files.length === 0) {
      return;
    }
    if (event.kind === "tool_call_start") {
      void this.diffs.snapshot(id, item.files);
    } else if (!event.data.error) {
      void this.diffs.open(id, item.files, item.tool, item.arguments);
    }
  }
}
