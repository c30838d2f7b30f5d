/**
 * The socket client: JSON-RPC 2.0 over newline-delimited JSON on agentd's Unix socket. It owns
 * the connection (starting the daemon through `agentctl` when none answers, reconnecting after
 * the daemon restarts), request ids and their replies, and routes subscription notifications to
 * their watchers. A session watch remembers the newest seq it delivered and resubscribes with
 * `since_seq` after a reconnect or a `lagged` end, so its listener sees every event once.
 *
 * No `vscode` import: this module runs under plain Node, where its tests drive the real daemon.
 */

import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import {
  type AgentdEvent,
  type DaemonEvent,
  type ErrorData,
  type Method,
  type ParamsOf,
  type ResultOf,
  type SessionId,
  type StreamEndReason,
  type StreamItem,
  SUBSCRIPTIONS,
} from "./protocol";

/** The longest line accepted from the daemon; a `tool_call_end` carries a command's full output. */
export const DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024;

/** The socket agentctl and the daemon use by default: `$AGENTD_SOCKET`, else the runtime dir. */
export function defaultSocketPath(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env["AGENTD_SOCKET"];
  if (explicit) {
    return explicit;
  }
  const runtime = env["XDG_RUNTIME_DIR"];
  const dir = runtime ? path.join(runtime, "agentd") : path.join(os.tmpdir(), `agentd-${os.userInfo().uid}`);
  return path.join(dir, "agentd.sock");
}

/** What `lstat` found, in words. */
function kindOf(stats: fs.Stats): string {
  if (stats.isSymbolicLink()) return "symbolic link";
  if (stats.isDirectory()) return "directory";
  if (stats.isFile()) return "file";
  if (stats.isSocket()) return "socket";
  return "special file";
}

/**
 * Why the socket at `socketPath` must not be used, or undefined. Node cannot read the peer's
 * credentials of a Unix socket, so the places must prove that the server is the user's own: the
 * socket's directory is the user's and closed to group and others (mode 0700), and the socket is
 * the user's. Otherwise another user's process could be listening there and read every prompt.
 * A missing directory or socket is left to the connection attempt (nothing answers, so agentd may
 * be started, and it makes them right).
 */
export async function untrustedSocket(socketPath: string, uid = process.geteuid?.() ?? os.userInfo().uid): Promise<string | undefined> {
  const lstat = (p: string) => fs.promises.lstat(p).catch(() => undefined);
  const dir = path.dirname(socketPath);
  const refuse = `refusing to use ${socketPath}:`;
  const fix = "; remove it (agentd creates it again, mode 0700) or use another socket";
  const d = await lstat(dir);
  if (d) {
    if (!d.isDirectory()) {
      return `${refuse} ${dir} is not a directory (a ${kindOf(d)})${fix}`;
    }
    if (d.uid !== uid) {
      return `${refuse} its directory ${dir} belongs to uid ${d.uid}, not to you (uid ${uid})${fix}`;
    }
    if ((d.mode & 0o077) !== 0) {
      const mode = (d.mode & 0o7777).toString(8).padStart(4, "0");
      return `${refuse} its directory ${dir} is open to other users (mode ${mode}; it must be 0700)${fix}`;
    }
  }
  const s = await lstat(socketPath);
  if (s && (!s.isSocket() || s.uid !== uid)) {
    return `${refuse} it is a ${kindOf(s)} of uid ${s.uid}, not a socket of yours (uid ${uid})`;
  }
  return undefined;
}

/** A line longer than the bound: the connection is dropped rather than buffering without end. */
export class LineTooLongError extends Error {
  constructor(limit: number) {
    super(`agentd sent a line longer than ${limit} bytes`);
  }
}

/**
 * Splits a byte stream into lines. Bytes are kept until their newline arrives, so a message cut
 * anywhere (inside a multi-byte character too) decodes whole; a trailing `\r` is dropped.
 */
export class LineDecoder {
  private parts: Buffer[] = [];
  private size = 0;

  constructor(private readonly maxLineBytes: number = DEFAULT_MAX_LINE_BYTES) {}

  /** The complete lines `chunk` finishes, in order. Throws [`LineTooLongError`]. */
  push(chunk: Buffer): string[] {
    const lines: string[] = [];
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      if (nl < 0) {
        break;
      }
      const piece = chunk.subarray(start, nl);
      this.check(this.size + piece.length);
      const whole = this.parts.length === 0 ? piece : Buffer.concat([...this.parts, piece]);
      this.parts = [];
      this.size = 0;
      const end = whole.length > 0 && whole[whole.length - 1] === 0x0d ? whole.length - 1 : whole.length;
      lines.push(whole.toString("utf8", 0, end));
      start = nl + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.check(this.size + rest.length);
      // Copy: the caller's buffer may be reused.
      this.parts.push(Buffer.from(rest));
      this.size += rest.length;
    }
    return lines;
  }

  private check(size: number): void {
    if (size > this.maxLineBytes) {
      this.parts = [];
      this.size = 0;
      throw new LineTooLongError(this.maxLineBytes);
    }
  }
}

/** An error the daemon answered with. */
export class RpcError extends Error {
  constructor(
    readonly method: string,
    readonly code: number,
    message: string,
    readonly data: ErrorData | undefined,
  ) {
    super(message);
  }

  /** `data.kind` (`session_not_found`, `session_busy`, ...), or undefined for protocol errors. */
  get kind(): string | undefined {
    return this.data?.kind;
  }
}

/** The daemon could not be reached (and could not be started), or the connection was lost. */
export class UnavailableError extends Error {}

export type ConnectionState = "disconnected" | "connecting" | "connected" | "disposed";

export interface ClientOptions {
  /** The socket; [`defaultSocketPath`] when absent. */
  socketPath?: string;
  /** `agentctl`, run to start the daemon when nothing answers; absent: never start it. */
  agentctlPath?: string;
  /** The environment `agentctl` (and so a daemon it starts) runs with; this process's if absent. */
  env?: NodeJS.ProcessEnv;
  /** Reconnect after the connection drops (default true). */
  reconnect?: boolean;
  /** The longest line accepted (default [`DEFAULT_MAX_LINE_BYTES`]). */
  maxLineBytes?: number;
}

interface Pending {
  method: string;
  resolve: (result: unknown) => void;
  reject: (error: Error) => void;
  /** Runs before any later line is read (a subscription must route its first notification). */
  onResult?: (result: unknown) => void;
}

/** How long `agentctl` may take to start the daemon. */
const AUTOSTART_TIMEOUT_MS = 30_000;
/** Reconnect backoff: first pause and cap. */
const RECONNECT_FIRST_MS = 50;
const RECONNECT_MAX_MS = 2_000;

/** One connection to agentd, re-established as long as the client is not disposed. */
export class AgentdClient {
  readonly socketPath: string;
  private readonly agentctlPath: string | undefined;
  private readonly env: NodeJS.ProcessEnv;
  private readonly reconnect: boolean;
  private readonly maxLineBytes: number;

  private socket: net.Socket | undefined;
  private connecting: Promise<void> | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private reconnectPause = RECONNECT_FIRST_MS;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly routes = new Map<string, (result: unknown) => void>();
  private readonly watches = new Set<Watch>();
  private readonly stateListeners = new Set<(state: ConnectionState, error?: Error) => void>();
  private current: ConnectionState = "disconnected";
  /** Connections made so far (1 after the first; each reconnect adds one). */
  connections = 0;

  constructor(options: ClientOptions = {}) {
    this.socketPath = options.socketPath || defaultSocketPath(options.env);
    this.agentctlPath = options.agentctlPath || undefined;
    this.env = options.env ?? process.env;
    this.reconnect = options.reconnect ?? true;
    this.maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  }

  get state(): ConnectionState {
    return this.current;
  }

  /** Calls `listener` on every state change (with the error that caused a disconnect). */
  onState(listener: (state: ConnectionState, error?: Error) => void): { dispose(): void } {
    this.stateListeners.add(listener);
    return { dispose: () => this.stateListeners.delete(listener) };
  }

  /** Connects now if not connected (starting the daemon if allowed); resolves once connected. */
  connect(): Promise<void> {
    if (this.current === "disposed") {
      return Promise.reject(new UnavailableError("the agentd client was disposed"));
    }
    if (this.socket) {
      return Promise.resolve();
    }
    if (!this.connecting) {
      this.clearReconnect();
      this.setState("connecting");
      this.connecting = this.establish().finally(() => {
        this.connecting = undefined;
      });
    }
    return this.connecting;
  }

  /** Sends a request (connecting first if needed) and resolves with its result. */
  async request<M extends Method>(method: M, params: ParamsOf<M>): Promise<ResultOf<M>> {
    await this.connect();
    return (await this.call(method, params)) as ResultOf<M>;
  }

  /**
   * Watches a session's events from `sinceSeq` (0: all of them; absent: from now on), calling
   * `onEvent` once per event in seq order, across reconnects and lag, until the session closes
   * or the watch is stopped.
   */
  async watchSession(
    sessionId: SessionId,
    sinceSeq: number | undefined,
    onEvent: (event: AgentdEvent) => void,
    onEnd?: (reason: StreamEndReason) => void,
  ): Promise<SessionWatch> {
    const since = sinceSeq ?? (await this.request("session/get", { session_id: sessionId })).last_seq;
    const watch = new SessionWatch(this, sessionId, since, onEvent, onEnd);
    // Connected first: a connection made now resubscribes the watches it finds.
    await this.connect();
    this.watches.add(watch);
    try {
      await watch.subscribe();
    } catch (e) {
      this.watches.delete(watch);
      throw e;
    }
    return watch;
  }

  /** Watches daemon-wide notifications (sessions created, deleted, changing state). */
  async watchDaemon(onEvent: (event: DaemonEvent) => void): Promise<DaemonWatch> {
    const watch = new DaemonWatch(this, onEvent);
    await this.connect();
    this.watches.add(watch);
    try {
      await watch.subscribe();
    } catch (e) {
      this.watches.delete(watch);
      throw e;
    }
    return watch;
  }

  /** Closes the connection for good; pending requests fail. */
  dispose(): void {
    this.setState("disposed");
    this.clearReconnect();
    this.watches.clear();
    this.dropSocket(new UnavailableError("the agentd client was disposed"));
  }

  /** @internal Subscribes `route` to the notifications of the subscription `method` returns. */
  async subscribe(method: string, params: unknown, route: (result: unknown) => void): Promise<string> {
    await this.connect();
    let id = "";
    await this.call(method, params, (result) => {
      if (typeof result !== "string") {
        throw new UnavailableError(`${method} returned ${JSON.stringify(result)}, not a subscription id`);
      }
      id = result;
      this.routes.set(id, route);
    });
    return id;
  }

  /** @internal Ends a subscription's routing (and asks the daemon to end it if connected). */
  async unsubscribe(method: string, id: string, watch: Watch): Promise<void> {
    this.watches.delete(watch);
    this.routes.delete(id);
    if (this.socket) {
      await this.call(method, { subscription: id }).catch(() => undefined);
    }
  }

  /** @internal Stops routing an ended subscription's notifications. */
  unroute(id: string | undefined): void {
    if (id !== undefined) {
      this.routes.delete(id);
    }
  }

  /** @internal Forgets a watch whose stream ended for good. */
  forget(watch: Watch, id: string | undefined): void {
    this.watches.delete(watch);
    if (id !== undefined) {
      this.routes.delete(id);
    }
  }

  private call(method: string, params: unknown, onResult?: (result: unknown) => void): Promise<unknown> {
    const socket = this.socket;
    if (!socket) {
      return Promise.reject(new UnavailableError(`not connected to agentd at ${this.socketPath}`));
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const entry: Pending = { method, resolve, reject };
      if (onResult) {
        entry.onResult = onResult;
      }
      this.pending.set(id, entry);
      socket.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
    });
  }

  private async establish(): Promise<void> {
    let socket: net.Socket;
    try {
      socket = await this.open();
    } catch (first) {
      const code = (first as NodeJS.ErrnoException).code;
      const nobody = code === "ENOENT" || code === "ECONNREFUSED";
      if (!nobody || !this.agentctlPath) {
        const error = new UnavailableError(`cannot reach agentd at ${this.socketPath}: ${(first as Error).message}`);
        this.lost(error);
        throw error;
      }
      try {
        await this.startDaemon(this.agentctlPath);
        socket = await this.open();
      } catch (e) {
        const error = e instanceof UnavailableError ? e : new UnavailableError(`cannot reach agentd at ${this.socketPath}: ${(e as Error).message}`);
        this.lost(error);
        throw error;
      }
    }
    if (this.current === "disposed") {
      socket.destroy();
      throw new UnavailableError("the agentd client was disposed");
    }
    this.attach(socket);
    this.connections += 1;
    this.reconnectPause = RECONNECT_FIRST_MS;
    this.setState("connected");
    // Resubscribe every watch on the new connection; each resumes after the newest seq it saw.
    await Promise.all([...this.watches].map((w) => w.subscribe().catch((e: Error) => w.failed(e))));
  }

  private async open(): Promise<net.Socket> {
    const why = await untrustedSocket(this.socketPath);
    if (why) {
      throw new UnavailableError(why);
    }
    return new Promise((resolve, reject) => {
      const socket = net.createConnection({ path: this.socketPath });
      socket.once("connect", () => {
        socket.removeListener("error", reject);
        resolve(socket);
      });
      socket.once("error", reject);
    });
  }

  /** Runs `agentctl status`, which starts the daemon on this socket when nothing answers. */
  private startDaemon(agentctl: string): Promise<void> {
    return new Promise((resolve, reject) => {
      execFile(
        agentctl,
        ["--socket", this.socketPath, "status"],
        { env: this.env, timeout: AUTOSTART_TIMEOUT_MS },
        (error, _stdout, stderr) => {
          if (error) {
            const said = stderr.trim() || error.message;
            reject(new UnavailableError(`agentd is not running and \`${agentctl} status\` could not start it: ${said}`));
          } else {
            resolve();
          }
        },
      );
    });
  }

  private attach(socket: net.Socket): void {
    this.socket = socket;
    const decoder = new LineDecoder(this.maxLineBytes);
    socket.on("data", (chunk: Buffer) => {
      let lines: string[];
      try {
        lines = decoder.push(chunk);
      } catch (e) {
        socket.destroy(e as Error);
        return;
      }
      for (const line of lines) {
        if (this.socket !== socket) {
          return;
        }
        this.dispatch(line);
      }
    });
    socket.on("error", () => {
      // "close" follows and carries the consequences.
    });
    socket.on("close", () => {
      if (this.socket === socket) {
        this.dropSocket(new UnavailableError(`the connection to agentd at ${this.socketPath} was lost`));
      }
    });
  }

  private dispatch(line: string): void {
    if (line.trim() === "") {
      return;
    }
    let message: {
      id?: unknown;
      method?: unknown;
      params?: { subscription?: unknown; result?: unknown };
      result?: unknown;
      error?: { code: number; message: string; data?: ErrorData };
    };
    try {
      message = JSON.parse(line);
    } catch {
      return;
    }
    if (typeof message.method === "string") {
      if (message.id === undefined) {
        const sub = message.params?.subscription;
        if (typeof sub === "string") {
          this.routes.get(sub)?.(message.params?.result);
        }
      }
      return;
    }
    if (typeof message.id !== "number") {
      return;
    }
    const entry = this.pending.get(message.id);
    if (!entry) {
      return;
    }
    this.pending.delete(message.id);
    if (message.error) {
      entry.reject(new RpcError(entry.method, message.error.code, message.error.message, message.error.data));
      return;
    }
    try {
      entry.onResult?.(message.result);
      entry.resolve(message.result);
    } catch (e) {
      entry.reject(e as Error);
    }
  }

  private dropSocket(error: Error): void {
    const socket = this.socket;
    this.socket = undefined;
    this.routes.clear();
    for (const entry of this.pending.values()) {
      entry.reject(error);
    }
    this.pending.clear();
    if (socket) {
      socket.destroy();
      this.lost(error);
    }
  }

  /** After a failed or lost connection: say so, and try again later while anyone watches. */
  private lost(error: Error): void {
    if (this.current === "disposed") {
      return;
    }
    this.setState("disconnected", error);
    if (this.reconnect && this.watches.size > 0 && !this.reconnectTimer) {
      const pause = this.reconnectPause;
      this.reconnectPause = Math.min(pause * 2, RECONNECT_MAX_MS);
      this.reconnectTimer = setTimeout(() => {
        this.reconnectTimer = undefined;
        this.connect().catch(() => undefined);
      }, pause);
    }
  }

  private clearReconnect(): void {
    if (this.reconnectTimer) {
      clearTimeout(this.reconnectTimer);
      this.reconnectTimer = undefined;
    }
  }

  private setState(state: ConnectionState, error?: Error): void {
    if (this.current === "disposed" && state !== "disposed") {
      return;
    }
    this.current = state;
    for (const listener of this.stateListeners) {
      listener(state, error);
    }
  }
}

/** A subscription the client re-establishes after a reconnect. */
interface Watch {
  subscribe(): Promise<void>;
  failed(error: Error): void;
}

/** A session's event stream, delivered once per event in seq order across reconnects and lag. */
export class SessionWatch implements Watch {
  private id: string | undefined;
  private stopped = false;
  /** Events that arrived a second time and were not delivered (a resumption overlap). */
  duplicatesDropped = 0;
  /** Times the stream was re-established after the first subscription. */
  resubscriptions = 0;
  private subscribed = false;

  constructor(
    private readonly client: AgentdClient,
    readonly sessionId: SessionId,
    /** The seq of the newest event delivered (or the starting point). */
    public lastSeq: number,
    private readonly onEvent: (event: AgentdEvent) => void,
    private readonly onEnd: ((reason: StreamEndReason) => void) | undefined,
  ) {}

  /** @internal */
  async subscribe(): Promise<void> {
    if (this.stopped) {
      return;
    }
    if (this.subscribed) {
      this.resubscriptions += 1;
    }
    this.subscribed = true;
    const { subscribe } = SUBSCRIPTIONS.session;
    this.id = await this.client.subscribe(
      subscribe,
      { session_id: this.sessionId, since_seq: this.lastSeq },
      (result) => this.item(result as StreamItem),
    );
  }

  /** @internal */
  failed(error: Error): void {
    if (error instanceof RpcError) {
      // The session is gone (deleted) or the daemon refuses: this stream cannot resume.
      this.finish("unsubscribed");
    }
  }

  /** Stops watching. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.id !== undefined) {
      await this.client.unsubscribe(SUBSCRIPTIONS.session.unsubscribe, this.id, this);
    } else {
      this.client.forget(this, undefined);
    }
  }

  private item(item: StreamItem): void {
    if (this.stopped) {
      return;
    }
    if (item.type === "event") {
      const { type: _type, ...event } = item;
      if (event.seq <= this.lastSeq) {
        this.duplicatesDropped += 1;
        return;
      }
      this.lastSeq = event.seq;
      this.onEvent(event as AgentdEvent);
      return;
    }
    switch (item.reason) {
      case "lagged":
        // Fell behind its buffer: pick up again after the newest event delivered.
        this.client.unroute(this.id);
        this.subscribe().catch((e: Error) => this.failed(e));
        return;
      case "daemon_shutdown":
        // The connection closes next; the reconnect resubscribes.
        return;
      case "session_closed":
      case "unsubscribed":
        this.finish(item.reason);
        return;
    }
  }

  private finish(reason: StreamEndReason): void {
    this.stopped = true;
    this.client.forget(this, this.id);
    this.onEnd?.(reason);
  }
}

/** Daemon-wide notifications, resubscribed after a reconnect. */
export class DaemonWatch implements Watch {
  private id: string | undefined;
  private stopped = false;

  constructor(
    private readonly client: AgentdClient,
    private readonly onEvent: (event: DaemonEvent) => void,
  ) {}

  /** @internal */
  async subscribe(): Promise<void> {
    if (this.stopped) {
      return;
    }
    this.id = await this.client.subscribe(SUBSCRIPTIONS.daemon.subscribe, {}, (result) => {
      const event = result as DaemonEvent;
      if (event.kind === "lagged") {
        // Missed some: the listener re-lists; this watch resubscribes.
        this.client.unroute(this.id);
        this.subscribe().catch(() => undefined);
      }
      this.onEvent(event);
    });
  }

  /** @internal */
  failed(): void {}

  /** Stops watching. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.id !== undefined) {
      await this.client.unsubscribe(SUBSCRIPTIONS.daemon.unsubscribe, this.id, this);
    }
  }
}
