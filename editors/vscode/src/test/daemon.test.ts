/**
 * The client and the transcript model against the real daemon. Run through
 * `cargo test -p agentd-tests --test e2e -- editor_vscode`, which starts agentd on a temp
 * socket with a scripted mock provider (`run: CMD` asks for a shell call, `call: TOOL {JSON}`
 * for any call, `think: X` streams reasoning, anything else is echoed; answers after tool results quote them and any steering)
 * and passes `AGENTD_SOCKET` and `AGENTCTL`. Tests run in order; the last restarts the daemon.
 */

import { strict as assert } from "node:assert";
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { after, test } from "node:test";
import { AttachedSession } from "../attached";
import { contentBefore, parseDiff, refusedFiles } from "../changes";
import { AgentdClient, RpcError, type SessionWatch, UnavailableError } from "../client";
import { commandItems } from "../commands";
import type { AgentdEvent, DaemonEvent, EventKind, SessionState } from "../protocol";
import { type Op, pendingItem, type RequestItem, responseFor, TYPE_ANSWER, Transcript } from "../transcript";

const socketPath = process.env["AGENTD_SOCKET"] ?? "";
const agentctl = process.env["AGENTCTL"] ?? "";
if (!socketPath || !agentctl) {
  throw new Error(
    "AGENTD_SOCKET and AGENTCTL are not set: these tests run against a daemon with a scripted mock provider; " +
      "run them with `cargo test -p agentd-tests --test e2e -- editor_vscode`",
  );
}

/** A guard against a hang, far above any real wait; never a timing assertion. */
const BOUND_MS = 60_000;

const clients: AgentdClient[] = [];
after(() => clients.forEach((c) => c.dispose()));

function newClient(env?: NodeJS.ProcessEnv, socket = socketPath): AgentdClient {
  const client = new AgentdClient(env ? { socketPath: socket, agentctlPath: agentctl, env } : { socketPath: socket, agentctlPath: agentctl });
  clients.push(client);
  return client;
}

function tempDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), "agentd-vscode-"));
}

/** Polls `ready` until it holds (a condition outside the daemon: a file, a process). */
async function until(what: string, ready: () => boolean): Promise<void> {
  const deadline = Date.now() + BOUND_MS;
  while (!ready()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Runs agentctl with this process's environment (the daemon's). */
function runAgentctl(args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(agentctl, args, { timeout: BOUND_MS }, (error, stdout, stderr) =>
      error ? reject(new Error(`agentctl ${args.join(" ")}: ${error.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
}

/** The events a watch delivered, with a way to wait for one. */
class Events {
  readonly all: AgentdEvent[] = [];
  private waiters: { pred: (e: AgentdEvent) => boolean; resolve: (e: AgentdEvent) => void }[] = [];

  readonly push = (event: AgentdEvent): void => {
    this.all.push(event);
    this.waiters = this.waiters.filter((w) => {
      if (w.pred(event)) {
        w.resolve(event);
        return false;
      }
      return true;
    });
  };

  /** The first event (already seen or still to come) after index `from` matching `pred`. */
  wait(what: string, pred: (e: AgentdEvent) => boolean, from = 0): Promise<AgentdEvent> {
    const seen = this.all.slice(from).find(pred);
    if (seen) {
      return Promise.resolve(seen);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${what}; saw ${this.all.map((e) => e.kind).join(",")}`)), BOUND_MS);
      this.waiters.push({ pred, resolve: (e) => (clearTimeout(timer), resolve(e)) });
    });
  }

  kind<K extends EventKind>(kind: K): Extract<AgentdEvent, { kind: K }>[] {
    return this.all.filter((e): e is Extract<AgentdEvent, { kind: K }> => e.kind === kind);
  }

  /**
   * Waits for the `processing_end` that closes the cycle the input `text` ran in (follow-ups
   * run in the cycle of the input they followed).
   */
  async finished(text: string): Promise<Extract<AgentdEvent, { kind: "processing_end" }>> {
    const input = await this.wait(`user_input ${text}`, (e) => e.kind === "user_input" && e.data.text === text);
    const end = await this.wait(`processing_end after ${text}`, (e) => e.kind === "processing_end", this.all.indexOf(input));
    return end as Extract<AgentdEvent, { kind: "processing_end" }>;
  }
}

/** A new session in a temp dir (approvals asked when `ask`), watched from its first event. */
async function session(client: AgentdClient, title: string, ask = false): Promise<{ id: string; cwd: string; events: Events; watch: SessionWatch }> {
  const cwd = tempDir();
  const snapshot = await client.request("session/create", ask ? { cwd, title, config: { approval: { mode: "ask" } } } : { cwd, title });
  assert.equal(snapshot.state, "idle");
  assert.equal(snapshot.title, title);
  const events = new Events();
  const watch = await client.watchSession(snapshot.session_id, 0, events.push);
  return { id: snapshot.session_id, cwd, events, watch };
}

function transcriptOf(cwd: string, events: AgentdEvent[]): Transcript {
  const transcript = new Transcript(cwd);
  events.forEach((e) => transcript.apply(e));
  return transcript;
}

test("create, submit with a tool round trip, and the transcript it streams", async () => {
  const client = newClient();
  const s = await session(client, "round trip");
  const listed = await client.request("session/list", {});
  assert.ok(listed.sessions.some((x) => x.session_id === s.id && x.title === "round trip"));
  const submitted = await client.request("session/submit", { session_id: s.id, text: "run: echo hello-from-tool" });
  assert.equal(submitted.disposition, "started");
  const end = await s.events.finished("run: echo hello-from-tool");
  assert.equal(end.data.reason, "completed");

  const [start] = s.events.kind("tool_call_start");
  assert.equal(start?.data.tool_name, "shell");
  assert.deepEqual(start?.data.arguments, { command: "echo hello-from-tool" });
  const [toolEnd] = s.events.kind("tool_call_end");
  assert.match(toolEnd?.data.output ?? "", /hello-from-tool/);
  const answer = s.events.kind("assistant_text_end").map((e) => e.data.text).join("");
  assert.match(answer, /^result: .*hello-from-tool/);
  assert.ok(s.events.kind("assistant_text_delta").length > 1, "the answer streams in pieces");

  const transcript = transcriptOf(s.cwd, s.events.all);
  const kinds = transcript.items.map((i) => i.kind);
  assert.deepEqual(kinds.filter((k) => k !== "usage"), ["user", "tool", "assistant"]);
  const [user, tool, assistant] = transcript.items.filter((i) => i.kind !== "usage");
  assert.deepEqual(user, { id: user?.id, kind: "user", text: "run: echo hello-from-tool" });
  assert.ok(tool?.kind === "tool" && tool.status === "ok" && tool.tool === "shell");
  assert.match(tool.args, /"command": "echo hello-from-tool"/);
  assert.match(tool.output, /hello-from-tool/);
  assert.ok(assistant?.kind === "assistant" && assistant.done && assistant.text === answer);
  const usage = transcript.items.find((i) => i.kind === "usage");
  assert.ok(usage?.kind === "usage" && /in \/ \d+ out/.test(usage.text), JSON.stringify(usage));
  // Streaming ops rebuild the same text as the final event.
  const replay = new Transcript(s.cwd);
  let streamed = "";
  for (const e of s.events.all) {
    for (const op of replay.apply(e)) {
      if (op.op === "add" && op.item.kind === "assistant") {
        streamed = op.item.text;
      } else if (op.op === "append" && op.id === assistant.id) {
        streamed += op.text;
      }
    }
  }
  assert.equal(streamed, answer);
});

test("reasoning streams into its own (folded) item before the answer", async () => {
  const client = newClient();
  const s = await session(client, "reasoning");
  await client.request("session/submit", { session_id: s.id, text: "think: tides" });
  await s.events.finished("think: tides");
  assert.equal(s.events.kind("assistant_reasoning_delta").map((e) => e.data.delta).join(""), "pondering tides");
  const items = transcriptOf(s.cwd, s.events.all).items.filter((i) => i.kind !== "usage");
  assert.deepEqual(
    items.map((i) => [i.kind, "text" in i ? i.text : ""]),
    [
      ["user", "think: tides"],
      ["reasoning", "pondering tides"],
      ["assistant", "thought about tides"],
    ],
  );
});

test("steer and follow-up while the session works; the queue shows the follow-up", async () => {
  const client = newClient();
  const s = await session(client, "steer");
  const gate = path.join(s.cwd, "go");
  const prompt = `run: while [ ! -e ${gate} ]; do sleep 0.05; done; echo released`;
  await client.request("session/submit", { session_id: s.id, text: prompt });
  await s.events.wait("tool_call_start", (e) => e.kind === "tool_call_start");
  const steered = await client.request("session/steer", { session_id: s.id, text: "ALSO-THIS" });
  assert.equal(steered.disposition, "steering");
  const queued = await client.request("session/follow_up", { session_id: s.id, text: "and then this" });
  assert.equal(queued.disposition, "follow_up");
  const queue = await client.request("session/queue", { session_id: s.id });
  assert.deepEqual(queue.follow_up, [{ input_id: queued.input_id, text: "and then this" }]);
  fs.writeFileSync(gate, "");
  await s.events.finished(prompt);
  assert.deepEqual(s.events.kind("steering_injected").map((e) => e.data.text), ["ALSO-THIS"]);
  const answer = s.events.kind("assistant_text_end").map((e) => e.data.text).join("");
  assert.match(answer, /released.* \| steered: ALSO-THIS/s);
  await s.events.finished("and then this");
  assert.ok(s.events.kind("assistant_text_end").some((e) => e.data.text === "echo: and then this"));
  const steering = transcriptOf(s.cwd, s.events.all).items.filter((i) => i.kind === "steering");
  assert.deepEqual(steering.map((i) => i.kind === "steering" && i.text), ["ALSO-THIS"]);
});

/** Whether `pid` is gone (or a zombie nobody reaped yet: it runs no more). */
function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 1).trim().startsWith("Z");
  } catch {
    return true;
  }
}

test("abort stops the work and the process it started is gone", async () => {
  const client = newClient();
  const s = await session(client, "abort");
  const pidFile = path.join(s.cwd, "pid");
  const prompt = `run: echo $$ > ${pidFile}.tmp && mv ${pidFile}.tmp ${pidFile} && exec sleep 600`;
  await client.request("session/submit", { session_id: s.id, text: prompt });
  await until("the command's pid file", () => fs.existsSync(pidFile));
  const pid = Number(fs.readFileSync(pidFile, "utf8").trim());
  assert.ok(pid > 1 && !gone(pid), `the command runs as ${pid}`);
  const aborted = await client.request("session/abort", { session_id: s.id });
  assert.equal(aborted.aborted, true);
  assert.equal(aborted.state, "idle");
  const end = await s.events.finished(prompt);
  assert.equal(end.data.reason, "aborted");
  await until(`process ${pid} to end`, () => gone(pid));
  const transcript = transcriptOf(s.cwd, s.events.all);
  assert.ok(transcript.items.some((i) => i.kind === "notice" && i.text === "Stopped: aborted."));
  assert.equal((await client.request("session/get", { session_id: s.id })).state, "idle");
});

test("attach to a session agentctl started, replaying it from the start", async () => {
  const cwd = tempDir();
  const id = (await runAgentctl(["new", "--cwd", cwd, "--title", "from cli"])).trim();
  await runAgentctl(["submit", id, "hello from cli", "--follow"]);
  const client = newClient();
  const listed = await client.request("session/list", {});
  assert.ok(listed.sessions.some((x) => x.session_id === id && x.title === "from cli" && x.cwd === cwd));
  const events = new Events();
  await client.watchSession(id, 0, events.push);
  await events.finished("hello from cli");
  assert.equal(events.all[0]?.kind, "session_start");
  assert.deepEqual(
    events.all.map((e) => e.seq),
    events.all.map((_, i) => i + 1),
  );
  const items = transcriptOf(cwd, events.all).items.filter((i) => i.kind === "user" || i.kind === "assistant");
  assert.deepEqual(
    items.map((i) => ("text" in i ? i.text : "")),
    ["hello from cli", "echo: hello from cli"],
  );
  // Live from here: a submit from this client streams to it too.
  await client.request("session/submit", { session_id: id, text: "second" });
  await events.finished("second");
  await runAgentctl(["close", id]);
  await events.wait("session_end", (e) => e.kind === "session_end");
});

test("an approval waits for an answer; Allow runs the command and the request shows settled", async () => {
  const client = newClient();
  const s = await session(client, "approve", true);
  const prompt = "run: echo approved > out.txt";
  await client.request("session/submit", { session_id: s.id, text: prompt });
  const asked = await s.events.wait("approval_requested", (e) => e.kind === "approval_requested");
  assert.ok(asked.kind === "approval_requested");
  assert.equal(asked.data.summary, "$ echo approved > out.txt");
  await s.events.wait("awaiting_input", (e) => e.kind === "state_changed" && e.data.state === "awaiting_input");
  const snapshot = await client.request("session/get", { session_id: s.id });
  assert.equal(snapshot.state, "awaiting_input");
  const listed = (snapshot.pending ?? []).map(pendingItem);
  assert.equal(listed.length, 1);
  assert.ok(!fs.existsSync(path.join(s.cwd, "out.txt")), "nothing runs before the answer");

  const transcript = transcriptOf(s.cwd, s.events.all);
  const [item] = transcript.pending();
  assert.deepEqual(item, listed[0], "the event and session/get describe the same request");
  assert.ok(item);
  assert.deepEqual(item.options, ["Allow", "Always", "Deny"]);
  assert.equal(item.detail, "$ echo approved > out.txt");
  const response = responseFor(item, "Allow");
  assert.deepEqual(response, { decision: "allow" });
  const answered = await client.request("session/respond", { session_id: s.id, request_id: item.requestId, ...response });
  assert.equal(answered.pending, 0);
  await s.events.finished(prompt);
  const resolved = s.events.kind("approval_resolved");
  assert.deepEqual(resolved.map((e) => [e.data.decision, e.data.by]), [["allow", "client"]]);
  assert.equal(fs.readFileSync(path.join(s.cwd, "out.txt"), "utf8"), "approved\n");
  const after = transcriptOf(s.cwd, s.events.all);
  assert.deepEqual(after.pending(), []);
  assert.ok(after.items.some((i) => i.kind === "request" && i.resolved === "allow"));
  const second = await client.request("session/respond", { session_id: s.id, request_id: item.requestId, decision: "deny" }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(second instanceof RpcError && second.kind === "request_not_found", String(second));
});

test("an edit asks with its diff, and its tool item names the file for the diff view", async () => {
  const client = newClient();
  const s = await session(client, "edit", true);
  fs.writeFileSync(path.join(s.cwd, "notes.txt"), "old line\n");
  const args = { file_path: "notes.txt", old_string: "old line", new_string: "new line" };
  const prompt = `call: edit_file ${JSON.stringify(args)}`;
  await client.request("session/submit", { session_id: s.id, text: prompt });
  await s.events.wait("approval_requested", (e) => e.kind === "approval_requested");
  const [item] = transcriptOf(s.cwd, s.events.all).pending();
  assert.ok(item);
  assert.match(item.detail, /notes\.txt/);
  assert.match(item.detail, /^-old line$/m);
  assert.match(item.detail, /^\+new line$/m);
  await client.request("session/respond", { session_id: s.id, request_id: item.requestId, ...responseFor(item, "Allow") });
  await s.events.finished(prompt);
  assert.equal(fs.readFileSync(path.join(s.cwd, "notes.txt"), "utf8"), "new line\n");
  const tool = transcriptOf(s.cwd, s.events.all).items.find((i) => i.kind === "tool");
  assert.ok(tool?.kind === "tool" && tool.status === "ok", JSON.stringify(tool));
  assert.deepEqual(tool.files, [path.join(s.cwd, "notes.txt")]);
});

test("Show Changes works back the agent's edit; Undo is refused over the user's change until forced; Redo", async () => {
  const client = newClient();
  const s = await session(client, "undo");
  const file = path.join(s.cwd, "notes.txt");
  fs.writeFileSync(file, "one\ntwo\nthree\n");
  const prompt = `call: edit_file ${JSON.stringify({ file_path: "notes.txt", old_string: "two", new_string: "TWO" })}`;
  await client.request("session/submit", { session_id: s.id, text: prompt });
  await s.events.finished(prompt);
  assert.equal(fs.readFileSync(file, "utf8"), "one\nTWO\nthree\n");

  // What Show Changes opens: the file before the agent's edit against the file now.
  const { diff } = await client.request("session/diff", { session_id: s.id });
  const changes = parseDiff(diff);
  assert.deepEqual(changes.map((c) => [c.path, c.status]), [["notes.txt", "modified"]], diff);
  assert.equal(contentBefore(changes[0]!, fs.readFileSync(file, "utf8")), "one\ntwo\nthree\n");

  // The user edits the file too: the undo is refused, naming it, and nothing changes.
  fs.writeFileSync(file, "one\nTWO, and mine\nthree\n");
  assert.equal(contentBefore(changes[0]!, fs.readFileSync(file, "utf8")), undefined, "the diff document shows it instead");
  const refusal = await client.request("session/rollback", { session_id: s.id, files: true }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.deepEqual(refusedFiles(refusal), ["notes.txt"], String(refusal));
  assert.equal(fs.readFileSync(file, "utf8"), "one\nTWO, and mine\nthree\n");

  // Force: the agent's starting point is back, the user's version kept for the redo.
  const undone = await client.request("session/rollback", { session_id: s.id, files: true, force: true });
  assert.deepEqual(undone.files?.restored, ["notes.txt"]);
  assert.deepEqual(undone.files?.kept, ["notes.txt"]);
  assert.equal(fs.readFileSync(file, "utf8"), "one\ntwo\nthree\n");
  await s.events.wait("rollback", (e) => e.kind === "rollback");
  const redone = await client.request("session/redo", { session_id: s.id });
  assert.deepEqual(redone.files?.restored, ["notes.txt"]);
  assert.equal(fs.readFileSync(file, "utf8"), "one\nTWO, and mine\nthree\n");
  await s.events.wait("redo", (e) => e.kind === "redo");
  const notices = transcriptOf(s.cwd, s.events.all).items.flatMap((i) => (i.kind === "notice" ? [i.text] : []));
  assert.ok(notices.some((n) => n.startsWith("Undone:")) && notices.some((n) => n.startsWith("Redone:")), notices.join(" | "));
});

test("the attached session raises pending and live requests once, and diffs live edits", async () => {
  const client = newClient();
  const s = await session(client, "attached", true);
  const file = path.join(s.cwd, "notes.txt");
  fs.writeFileSync(file, "one\n");
  const first = `call: edit_file ${JSON.stringify({ file_path: "notes.txt", old_string: "one", new_string: "two" })}`;
  await client.request("session/submit", { session_id: s.id, text: first });
  await s.events.wait("approval_requested", (e) => e.kind === "approval_requested");

  // What the editor does on attach, with its views replaced by recorders.
  const requests: RequestItem[] = [];
  const states: SessionState[] = [];
  const ops: Op[] = [];
  const diffCalls: string[] = [];
  const attached = await AttachedSession.attach(
    client,
    s.id,
    {
      snapshot: async (callId, files) => void diffCalls.push(`snapshot ${callId} ${files.join(",")} ${fs.readFileSync(file, "utf8").trim()}`),
      open: async (callId, files, tool) => void diffCalls.push(`open ${callId} ${files.join(",")} ${tool}`),
    },
    { ops: (o) => ops.push(...o), state: (st) => states.push(st), request: (item) => requests.push(item) },
  );
  assert.equal(attached.state, "awaiting_input");
  assert.deepEqual(requests.map((r) => r.detail.includes("-one") && r.options.join("/")), ["Allow/Always/Deny"], "the pending approval, once");
  const [pending] = requests;
  assert.ok(pending);
  await client.request("session/respond", { session_id: s.id, request_id: pending.requestId, ...responseFor(pending, "Allow") });
  await s.events.finished(first);
  await until("the attached view to see the answer", () => attached.transcript.items.some((i) => i.kind === "assistant"));
  assert.equal(fs.readFileSync(file, "utf8"), "two\n");
  const [call1] = s.events.kind("tool_call_start").map((e) => `t${e.data.call_id}`);
  // The call started before the attach: no snapshot, but its end is live and opens the diff.
  assert.deepEqual(diffCalls, [`open ${call1} ${file} edit_file`]);

  const second = `call: edit_file ${JSON.stringify({ file_path: "notes.txt", old_string: "two", new_string: "three" })}`;
  await client.request("session/submit", { session_id: s.id, text: second });
  await until("the live request", () => requests.length === 2);
  const live = requests[1];
  assert.ok(live && live.type === "approval" && live.resolved === null);
  await client.request("session/respond", { session_id: s.id, request_id: live.requestId, ...responseFor(live, "Always") });
  await s.events.finished(second);
  await until("the attached view to finish", () => attached.state === "idle" && attached.transcript.items.filter((i) => i.kind === "assistant").length === 2);
  const call2 = s.events.kind("tool_call_start").map((e) => `t${e.data.call_id}`)[1];
  assert.deepEqual(diffCalls.slice(1), [`snapshot ${call2} ${file} two`, `open ${call2} ${file} edit_file`], "the snapshot is taken before the approved edit runs");
  assert.ok(states.includes("awaiting_input") && states[states.length - 1] === "idle", states.join(","));
  assert.ok(ops.some((op) => op.op === "update" && op.item.kind === "request" && op.item.resolved === "allow always"));
  assert.deepEqual(attached.transcript.pending(), []);
  await attached.detach();
});

test("Deny: the command never runs and the model is told", async () => {
  const client = newClient();
  const s = await session(client, "deny", true);
  const prompt = "run: echo denied > out.txt";
  await client.request("session/submit", { session_id: s.id, text: prompt });
  await s.events.wait("approval_requested", (e) => e.kind === "approval_requested");
  const [item] = transcriptOf(s.cwd, s.events.all).pending();
  assert.ok(item);
  await client.request("session/respond", { session_id: s.id, request_id: item.requestId, ...responseFor(item, "Deny"), message: "not now" });
  await s.events.finished(prompt);
  assert.ok(!fs.existsSync(path.join(s.cwd, "out.txt")));
  assert.deepEqual(s.events.kind("approval_resolved").map((e) => [e.data.decision, e.data.message]), [["deny", "not now"]]);
  const answer = s.events.kind("assistant_text_end").map((e) => e.data.text).join("");
  assert.match(answer, /^result: .*not now/s);
  assert.ok(transcriptOf(s.cwd, s.events.all).items.some((i) => i.kind === "request" && i.resolved === "deny: not now"));
});

test("a question from the model is answered with typed text", async () => {
  const client = newClient();
  const s = await session(client, "question", true);
  const prompt = 'call: ask_user {"question": "Which colour?", "options": ["red", "blue"]}';
  await client.request("session/submit", { session_id: s.id, text: prompt });
  await s.events.wait("question_requested", (e) => e.kind === "question_requested");
  const [item] = transcriptOf(s.cwd, s.events.all).pending();
  assert.ok(item);
  assert.equal(item.type, "question");
  assert.equal(item.detail, "Which colour?");
  assert.deepEqual(item.options, ["red", "blue", TYPE_ANSWER]);
  assert.deepEqual(responseFor(item, "blue"), { answer: "blue" });
  assert.equal(responseFor(item, TYPE_ANSWER), undefined, "the user types the answer");
  await client.request("session/respond", { session_id: s.id, request_id: item.requestId, answer: "green" });
  await s.events.finished(prompt);
  assert.deepEqual(s.events.kind("question_resolved").map((e) => e.data.answer), ["green"]);
  assert.match(s.events.kind("assistant_text_end").map((e) => e.data.text).join(""), /^result: .*green/s);
  assert.ok(transcriptOf(s.cwd, s.events.all).items.some((i) => i.kind === "request" && i.resolved === "answered: green"));
});

test("the prompt box offers the session's skills and commands", async () => {
  const client = newClient();
  const cwd = tempDir();
  fs.mkdirSync(path.join(cwd, ".agents/skills/lint"), { recursive: true });
  fs.writeFileSync(path.join(cwd, ".agents/skills/lint/SKILL.md"), "---\nname: lint\ndescription: Lints code.\n---\nLint.\n");
  fs.mkdirSync(path.join(cwd, ".agents/commands"), { recursive: true });
  fs.writeFileSync(path.join(cwd, ".agents/commands/greet.md"), "---\ndescription: Greets\nargument-hint: NAME\n---\nSay hello to $1.\n");
  const snapshot = await client.request("session/create", { cwd });
  const listed = await client.request("session/commands", { session_id: snapshot.session_id });
  assert.deepEqual(
    commandItems(listed).map((i) => [i.label, i.description, i.detail]),
    [
      ["/greet", "command", "NAME — Greets"],
      ["/lint", "skill", "Lints code."],
    ],
  );
});

test("daemon errors arrive typed, with the daemon's message", async () => {
  const client = newClient();
  const missing = "00000000-0000-4000-8000-000000000000";
  const error = await client.request("session/submit", { session_id: missing, text: "x" }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(error instanceof RpcError, String(error));
  assert.equal(error.kind, "session_not_found");
  assert.match(error.message, new RegExp(missing));
  const bad = await client.request("session/create", { cwd: "relative/dir" }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(bad instanceof RpcError, String(bad));
  assert.match(bad.message, /cwd|absolute|relative/i);
});

test("a socket other users could reach, or another user's, is refused before anything is sent", async () => {
  const dir = tempDir();
  const socket = path.join(dir, "agentd.sock");
  let connections = 0;
  const server = net.createServer((c) => {
    connections += 1;
    c.destroy();
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  const refusal = async (): Promise<string> => {
    const client = new AgentdClient({ socketPath: socket, reconnect: false });
    clients.push(client);
    const error = await client.request("daemon/info", {}).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof UnavailableError, String(error));
    return error.message;
  };
  try {
    fs.chmodSync(dir, 0o777);
    assert.match(await refusal(), /its directory .* is open to other users \(mode 0777; it must be 0700\)/);
    fs.chmodSync(dir, 0o700);
    if (process.geteuid?.() === 0) {
      fs.lchownSync(socket, 4242, 4242);
      assert.match(await refusal(), /it is a socket of uid 4242, not a socket of yours/);
    } else {
      assert.notEqual(process.env["CI"], "true", "under CI=true this runs as root, to give the socket to another user");
    }
    assert.equal(connections, 0, "nothing reached the server");
  } finally {
    server.close();
  }
});

test("a client starts the daemon through agentctl when nothing answers", async () => {
  const runtime = process.env["XDG_RUNTIME_DIR"] ?? tempDir();
  const socket = path.join(runtime, "autostart", "agentd.sock");
  const env = { ...process.env, AGENTD_SOCKET: socket, XDG_STATE_HOME: path.join(runtime, "autostart-state") };
  assert.ok(!fs.existsSync(socket));
  const client = newClient(env, socket);
  const info = await client.request("daemon/info", {});
  assert.equal(info.socket, socket);
  assert.equal(client.connections, 1);
  await client.request("daemon/shutdown", {});
});

test("with no socket set, agentctl socket-path finds the daemon, and its refusal is shown as it said it", async () => {
  const found = new AgentdClient({ agentctlPath: agentctl, reconnect: false });
  clients.push(found);
  const info = await found.request("daemon/info", {});
  assert.equal(info.socket, socketPath);
  assert.equal(found.socketPath, socketPath);
  // The fallback runtime directory (no XDG_RUNTIME_DIR), made open to every user: agentctl
  // refuses it before connecting, and nothing is sent.
  const tmp = tempDir();
  const uid = process.geteuid?.() ?? os.userInfo().uid;
  fs.mkdirSync(path.join(tmp, `agentd-${uid}`), { mode: 0o777 });
  fs.chmodSync(path.join(tmp, `agentd-${uid}`), 0o777);
  const { AGENTD_SOCKET: _socket, XDG_RUNTIME_DIR: _runtime, ...rest } = process.env;
  const refused = new AgentdClient({ agentctlPath: agentctl, env: { ...rest, TMPDIR: tmp }, reconnect: false });
  clients.push(refused);
  const error = await refused.request("daemon/info", {}).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(error instanceof UnavailableError, String(error));
  assert.match(error.message, /socket-path --json` failed: .*refusing to use the runtime directory: .* has mode 0777, so other users may reach/s);
  assert.equal(refused.socketPath, undefined);
});

test("reconnect after a daemon restart: every event once, resumed with since_seq", async () => {
  const client = newClient();
  const s = await session(client, "restart");
  await client.request("session/submit", { session_id: s.id, text: "before restart" });
  await s.events.finished("before restart");
  const before = await client.request("daemon/info", {});
  const daemonEvents: DaemonEvent[] = [];
  await client.watchDaemon((e) => daemonEvents.push(e));
  const states: string[] = [];
  client.onState((state) => states.push(state));

  await runAgentctl(["daemon", "stop"]);
  // While this client reconnects (starting the daemon itself if it comes first), agentctl
  // starts it and runs an input: its events come from the log replay, the live stream, or both.
  await runAgentctl(["submit", s.id, "after restart", "--follow"]);
  await s.events.finished("after restart");

  const after = await client.request("daemon/info", {});
  assert.notEqual(after.pid, before.pid, "a new daemon answers");
  assert.ok(states.includes("disconnected") && client.connections >= 2, `states ${states.join(",")}`);
  const snapshot = await client.request("session/get", { session_id: s.id });
  await s.events.wait(`seq ${snapshot.last_seq}`, (e) => e.seq >= snapshot.last_seq);
  const seqs = s.events.all.map((e) => e.seq);
  assert.deepEqual(seqs, seqs.map((_, i) => i + 1), "contiguous from 1, none twice");
  assert.equal(s.watch.duplicatesDropped, 0, "the resubscription started after the newest event seen");
  assert.ok(s.watch.resubscriptions >= 1);
  assert.ok(s.events.kind("user_input").map((e) => e.data.text).includes("after restart"));
  // The daemon-wide watch (the Sessions view's) was resubscribed too.
  const created = await client.request("session/create", { cwd: s.cwd, title: "after restart" });
  await until("session_created", () => daemonEvents.some((e) => e.kind === "session_created" && e.session_id === created.session_id));
});
