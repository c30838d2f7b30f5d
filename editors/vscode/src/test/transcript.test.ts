/**
 * The transcript model's pure parts: which files an edit names, how usage reads, and events
 * met without their start (a client that attached late, a log with a gap).
 */

import { strict as assert } from "node:assert";
import { test } from "node:test";
import type { AgentdEvent } from "../protocol";
import { beforeEdit, editedFiles, formatUsage, Transcript } from "../transcript";

test("the files an edit names, resolved against the session's directory", () => {
  assert.deepEqual(editedFiles("write_file", { file_path: "src/a.rs", content: "x" }, "/p"), ["/p/src/a.rs"]);
  assert.deepEqual(editedFiles("edit_file", { file_path: "/abs/b.rs", old_string: "a", new_string: "b" }, "/p"), ["/abs/b.rs"]);
  const patch = ["*** Begin Patch", "*** Update File: a.py", "*** Move to: b.py", "@@", "-x", "+y", "*** Add File: c.py", "+z", "*** Delete File: d.py", "*** End Patch"].join("\n");
  assert.deepEqual(editedFiles("apply_patch", { patch }, "/p"), ["/p/a.py", "/p/b.py", "/p/c.py", "/p/d.py"]);
  assert.deepEqual(editedFiles("shell", { command: "echo > f" }, "/p"), []);
  assert.deepEqual(editedFiles("write_file", "not an object", "/p"), []);
});

test("an edit_file is worked back from the content after it, when unambiguous", () => {
  const args = { file_path: "a", old_string: "old", new_string: "new" };
  assert.equal(beforeEdit("edit_file", args, "one new two"), "one old two");
  assert.equal(beforeEdit("edit_file", args, "new and new"), undefined, "two places it could have been");
  assert.equal(beforeEdit("edit_file", args, "nothing"), undefined);
  assert.equal(beforeEdit("edit_file", { ...args, new_string: "" }, "x"), undefined);
  assert.equal(beforeEdit("write_file", { file_path: "a", content: "new" }, "new"), undefined);
});

test("usage names the call and the session, with cost when known", () => {
  const call = { input_tokens: 100, output_tokens: 20, cache_read_tokens: 50 };
  assert.equal(formatUsage(call, { input_tokens: 300, output_tokens: 60, cost_usd: 0.0123 }), "call 100 (50 cached) in / 20 out · session 300 in / 60 out · $0.0123");
  assert.equal(formatUsage(call, { input_tokens: 0, output_tokens: 0, unreported_calls: 2 }), "call 100 (50 cached) in / 20 out · session 0 in / 0 out · 2 call(s) unreported");
});

function ev(seq: number, kind: string, data: unknown): AgentdEvent {
  return { session_id: "s", seq, ts: "t", kind, data } as AgentdEvent;
}

test("events whose start came before the attach still make whole items", () => {
  const t = new Transcript("/p");
  const ops = [
    ...t.apply(ev(7, "assistant_text_end", { text: "partial answer", reasoning: "why", tool_calls: 1 })),
    ...t.apply(ev(8, "tool_call_end", { call_id: "c1", tool_name: "shell", duration_ms: 3, output: null, error: "exit 1" })),
    ...t.apply(ev(9, "events_missing", { first_seq: 10, last_seq: 12 })),
    ...t.apply(ev(13, "processing_end", { input_id: null, reason: "error" })),
  ];
  assert.deepEqual(
    t.items.map((i) => [i.kind, "text" in i ? i.text : i.kind === "tool" ? `${i.status}: ${i.output}` : ""]),
    [
      ["reasoning", "why"],
      ["assistant", "partial answer"],
      ["tool", "error: exit 1"],
      ["notice", "Events 10–12 were never stored (the daemon stopped)."],
      ["notice", "Stopped: error."],
    ],
  );
  assert.ok(ops.every((op) => op.op === "add"));
});

test("an MCP server's states read as notices, its start left out", () => {
  const t = new Transcript("/p");
  t.apply(ev(1, "mcp_server_state", { server: "git", state: "starting" }));
  t.apply(ev(2, "mcp_server_state", { server: "git", state: "ready", tools: ["mcp__git__status", "mcp__git__log"] }));
  t.apply(ev(3, "mcp_server_state", { server: "jira", state: "failed", reason: "did not start within 10 s" }));
  assert.deepEqual(
    t.items.map((i) => ["level" in i ? i.level : "", "text" in i ? i.text : ""]),
    [
      ["info", "MCP server git: ready, 2 tools."],
      ["warning", "MCP server jira: failed (did not start within 10 s)."],
    ],
  );
});
