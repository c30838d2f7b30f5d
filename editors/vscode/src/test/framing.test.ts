/**
 * The client's wire handling without a daemon: `Content-Length` messages cut anywhere, the
 * message bound, the first notification of a subscription arriving in the same read as its subscribe reply, and
 * the protocol names checked against the committed schema.
 */

import { strict as assert } from "node:assert";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { StreamMessageReader } from "vscode-jsonrpc/node";
import { AgentdClient, RpcError, UnavailableError } from "../client";
import { EVENT_KINDS, METHOD_NAMES, SUBSCRIPTIONS } from "../protocol";

/** `text` in the `Content-Length` framing the client speaks. */
function frame(text: string): string {
  return `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`;
}

/** A one-connection server on a temp socket, reading requests with `vscode-jsonrpc`; the test writes the raw replies. */
async function fakeServer(onMessage: (message: unknown, reply: (bytes: string | Buffer) => void) => void): Promise<{ socket: string; close(): void }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentd-fake-"));
  fs.chmodSync(dir, 0o700);
  const socket = path.join(dir, "fake.sock");
  const server = net.createServer((conn) => {
    conn.on("error", () => undefined);
    new StreamMessageReader(conn).listen((message) => onMessage(message, (bytes) => conn.write(bytes)));
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  return {
    socket,
    close: () => {
      server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

test("a reply cut at every byte, inside multi-byte characters, arrives whole", async () => {
  const title = "héllo → 世界";
  const server = await fakeServer((msg, reply) => {
    const bytes = Buffer.from(frame(JSON.stringify({ jsonrpc: "2.0", id: (msg as { id: number }).id, result: { title } })));
    let i = 0;
    const next = (): void => {
      if (i < bytes.length) {
        reply(bytes.subarray(i, i + 1));
        i += 1;
        setImmediate(next);
      }
    };
    next();
  });
  const client = new AgentdClient({ socketPath: server.socket, reconnect: false });
  try {
    const got = await client.request("session/get", { session_id: "s" });
    assert.equal(got.title, title);
  } finally {
    client.dispose();
    server.close();
  }
});

test("a message over the bound drops the connection, not buffered without end", { timeout: 60_000 }, async () => {
  const server = await fakeServer((_msg, reply) => {
    // Announces 100 MB, and keeps sending.
    reply(`Content-Length: 100000000\r\n\r\n{"jsonrpc":"2.0","id":1,"result":"${"x".repeat(4096)}`);
    reply("x".repeat(4096));
  });
  const client = new AgentdClient({ socketPath: server.socket, reconnect: false, maxMessageBytes: 1024 });
  try {
    await assert.rejects(client.request("daemon/info", {}), (e: unknown) => e instanceof UnavailableError && /was lost/.test(e.message));
    assert.equal(client.state, "disconnected");
  } finally {
    client.dispose();
    server.close();
  }
});

test("a subscription's first items, in the same read as its reply, reach the watcher", async () => {
  const server = await fakeServer((msg, reply) => {
    const m = msg as { id: number; method: string };
    if (m.method === "session/subscribe") {
      const item = (seq: number) =>
        JSON.stringify({
          jsonrpc: "2.0",
          method: "session/event",
          params: { subscription: "sub-1", result: { type: "event", session_id: "s", seq, ts: "t", kind: "warning", data: { message: `w${seq}` } } },
        });
      // The reply and two events in one write, the second event split over two writes.
      const bytes = Buffer.from([JSON.stringify({ jsonrpc: "2.0", id: m.id, result: "sub-1" }), item(3), item(4)].map(frame).join(""));
      const cut = bytes.length - 10;
      reply(bytes.subarray(0, cut));
      setImmediate(() => reply(bytes.subarray(cut)));
    } else {
      reply(frame(JSON.stringify({ jsonrpc: "2.0", id: m.id, error: { code: -32010, message: "no such session", data: { kind: "session_not_found", retryable: false } } })));
    }
  });
  const client = new AgentdClient({ socketPath: server.socket, reconnect: false });
  try {
    const seen: number[] = [];
    let resolveTwo: () => void = () => undefined;
    const two = new Promise<void>((resolve) => (resolveTwo = resolve));
    await client.watchSession("s", 2, (event) => {
      seen.push(event.seq);
      if (seen.length === 2) {
        resolveTwo();
      }
    });
    await two;
    assert.deepEqual(seen, [3, 4]);
    const error = await client.request("session/get", { session_id: "x" }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(error instanceof RpcError);
    assert.equal(error.kind, "session_not_found");
    assert.equal(error.code, -32010);
    assert.equal(error.message, "no such session");
  } finally {
    client.dispose();
    server.close();
  }
});

test("a lagged stream resubscribes after the newest event it delivered", async () => {
  const sinces: unknown[] = [];
  const event = (sub: string, seq: number) =>
    JSON.stringify({ jsonrpc: "2.0", method: "session/event", params: { subscription: sub, result: { type: "event", session_id: "s", seq, ts: "t", kind: "warning", data: { message: "" } } } });
  const server = await fakeServer((msg, reply) => {
    const m = msg as { id: number; params: { since_seq?: unknown } };
    sinces.push(m.params.since_seq);
    const sub = `sub-${sinces.length}`;
    const lines = [JSON.stringify({ jsonrpc: "2.0", id: m.id, result: sub })];
    if (sinces.length === 1) {
      // Events 1 and 2, then the daemon drops this slow subscriber.
      lines.push(event(sub, 1), event(sub, 2), JSON.stringify({ jsonrpc: "2.0", method: "session/event", params: { subscription: sub, result: { type: "end", session_id: "s", last_seq: 2, reason: "lagged" } } }));
    } else {
      // The replay overlaps what was delivered once (seq 2); the watcher must not see it twice.
      lines.push(event(sub, 2), event(sub, 3));
    }
    reply(lines.map(frame).join(""));
  });
  const client = new AgentdClient({ socketPath: server.socket, reconnect: false });
  try {
    const seen: number[] = [];
    let done: () => void = () => undefined;
    const three = new Promise<void>((resolve) => (done = resolve));
    const watch = await client.watchSession("s", 0, (e) => {
      seen.push(e.seq);
      if (e.seq === 3) {
        done();
      }
    });
    await three;
    assert.deepEqual(sinces, [0, 2]);
    assert.deepEqual(seen, [1, 2, 3]);
    assert.equal(watch.duplicatesDropped, 1);
    assert.equal(watch.resubscriptions, 1);
  } finally {
    client.dispose();
    server.close();
  }
});

test("no daemon and no agentctl: a clear error naming the socket", async () => {
  const socket = path.join(os.tmpdir(), `agentd-none-${process.pid}.sock`);
  const client = new AgentdClient({ socketPath: socket, reconnect: false });
  await assert.rejects(client.request("daemon/info", {}), (e: unknown) => e instanceof UnavailableError && e.message.includes(socket));
  client.dispose();
});

test("method and event names match the committed schema", () => {
  const schemaPath = path.join(__dirname, "../../../../proto/schema/agentd-protocol.json");
  const schema = JSON.parse(fs.readFileSync(schemaPath, "utf8")) as {
    methods: Record<string, unknown>;
    subscriptions: Record<string, { notification: string; unsubscribe: string }>;
    $defs: { Event: { oneOf: { properties: { kind: { const: string } } }[] } };
  };
  for (const method of METHOD_NAMES) {
    assert.ok(method in schema.methods, `${method} is not in the schema`);
  }
  for (const sub of Object.values(SUBSCRIPTIONS)) {
    const entry = schema.subscriptions[sub.subscribe];
    assert.ok(entry, `${sub.subscribe} is not in the schema`);
    assert.equal(entry.notification, sub.notification);
    assert.equal(entry.unsubscribe, sub.unsubscribe);
  }
  const kinds = schema.$defs.Event.oneOf.map((v) => v.properties.kind.const).sort();
  assert.deepEqual([...EVENT_KINDS].sort(), kinds);
});
