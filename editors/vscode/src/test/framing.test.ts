/**
 * The client's wire handling without a daemon: NDJSON lines cut anywhere, the line bound, the
 * first notification of a subscription arriving in the same read as its subscribe reply, and
 * the protocol names checked against the committed schema.
 */

import { strict as assert } from "node:assert";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { AgentdClient, LineDecoder, LineTooLongError, RpcError, UnavailableError } from "../client";
import { EVENT_KINDS, METHOD_NAMES, SUBSCRIPTIONS } from "../protocol";

test("lines cut at every byte, inside multi-byte characters, decode whole", () => {
  const messages = ['{"a":"héllo → 世界"}', '{"b":2}', "", '{"c":"\\r kept"}'];
  const bytes = Buffer.from(messages.map((m, i) => (i === 1 ? `${m}\r\n` : `${m}\n`)).join(""));
  const decoder = new LineDecoder(1024);
  const lines: string[] = [];
  for (let i = 0; i < bytes.length; i++) {
    lines.push(...decoder.push(bytes.subarray(i, i + 1)));
  }
  assert.deepEqual(lines, messages);
});

test("several lines in one chunk, and a tail kept for the next", () => {
  const decoder = new LineDecoder(1024);
  assert.deepEqual(decoder.push(Buffer.from('{"a":1}\n{"b":2}\n{"c"')), ['{"a":1}', '{"b":2}']);
  assert.deepEqual(decoder.push(Buffer.from(":3}\n")), ['{"c":3}']);
});

test("a line over the bound is refused, not buffered without end", () => {
  const decoder = new LineDecoder(8);
  assert.deepEqual(decoder.push(Buffer.from("12345678\n")), ["12345678"]);
  decoder.push(Buffer.from("12345"));
  assert.throws(() => decoder.push(Buffer.from("6789")), LineTooLongError);
  assert.deepEqual(decoder.push(Buffer.from("\nok\n")), ["", "ok"]);
});

/** A one-connection NDJSON server on a temp socket whose replies the test writes. */
async function fakeServer(onLine: (line: unknown, reply: (text: string) => void) => void): Promise<{ socket: string; close(): void }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "agentd-fake-"));
  const socket = path.join(dir, "fake.sock");
  const server = net.createServer((conn) => {
    const decoder = new LineDecoder();
    conn.on("data", (chunk: Buffer) => {
      for (const line of decoder.push(chunk)) {
        onLine(JSON.parse(line), (text) => conn.write(text));
      }
    });
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
      const second = item(4);
      reply(`${JSON.stringify({ jsonrpc: "2.0", id: m.id, result: "sub-1" })}\n${item(3)}\n${second.slice(0, 10)}`);
      setImmediate(() => reply(`${second.slice(10)}\n`));
    } else {
      reply(`${JSON.stringify({ jsonrpc: "2.0", id: m.id, error: { code: -32010, message: "no such session", data: { kind: "session_not_found", retryable: false } } })}\n`);
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
    reply(`${lines.join("\n")}\n`);
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
