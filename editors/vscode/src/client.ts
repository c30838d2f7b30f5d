/**
 * The socket client: JSON-RPC 2.0 on agentd's Unix socket through `vscode-jsonrpc`. It owns
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
  createMessageConnection,
  ErrorCodes,
  type MessageConnection,
  type MessageReader,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter,
} from "vscode-jsonrpc/node";
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

/**
 * The largest message accepted from the daemon (a `tool_call_end` carries a command's full
 * output): past it the connection is dropped rather than buffering without end.
 */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/** What `lstat` found, in words. */
function kindOf(stats: fs.Stats): string {
  if (stats.isSymbolicLink()) return "symbolic link";
  if (stats.isDirectory()) return "directory";
  if (stats.isFile()) return "file";
  if (stats.isSocket()) return "socket";
  return "special file";
}

/**
 * Why the socket at `socketPath` (set by the user, not found by `agentctl socket-path`) must not
 * be used, or undefined. Node cannot read the peer's credentials of a Unix socket, so the places
 * must prove that the server is the user's own: the socket's directory is the user's and closed
 * to group and others (mode 0700), and the socket is the user's. Otherwise another user's
 * process could be listening there and read every prompt. A missing directory or socket is left
 * to the connection attempt (nothing answers, so agentd may be started, and it makes them right).
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
  /** The socket, as the user set it; absent: the one `agentctl socket-path` prints. */
  socketPath?: string;
  /**
   * `agentctl`: asked where the daemon listens (it checks the runtime directory and that the
   * server runs as this user, and starts the daemon when nothing answers), or, with
   * `socketPath`, run to start the daemon there. Absent: never run.
   */
  agentctlPath?: string;
  /** The environment `agentctl` (and so a daemon it starts) runs with; this process's if absent. */
  env?: NodeJS.ProcessEnv;
  /** Reconnect after the connection drops (default true). */
  reconnect?: boolean;
  /** The largest message accepted (default [`DEFAULT_MAX_MESSAGE_BYTES`]). */
  maxMessageBytes?: number;
}

/** How long `agentctl` may take (it may start the daemon). */
const AGENTCTL_TIMEOUT_MS = 30_000;
/** Reconnect backoff: first pause and cap. */
const RECONNECT_FIRST_MS = 50;
const RECONNECT_MAX_MS = 2_000;

/** The params of a subscription's notification (`session/event`, `daemon/event`). */
interface SubscriptionParams {
  subscription?: unknown;
  result?: unknown;
}

/**
 * One connection to agentd, re-established as long as the client is not disposed. The wire is
 * `vscode-jsonrpc` over the Unix socket: `Content-Length` framing (the daemon answers in the
 * framing the first bytes it reads use), its request ids and reply matching.
 */
export class AgentdClient {
  private readonly explicitSocket: string | undefined;
  private readonly agentctlPath: string | undefined;
  private readonly env: NodeJS.ProcessEnv;
  private readonly reconnect: boolean;
  private readonly maxMessageBytes: number;

  private found: string | undefined;
  private connection: Connection | undefined;
  private connecting: Promise<void> | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private reconnectPause = RECONNECT_FIRST_MS;
  private readonly routes = new Map<string, (result: unknown) => void>();
  private readonly watches = new Set<Watch>();
  private readonly stateListeners = new Set<(state: ConnectionState, error?: Error) => void>();
  private current: ConnectionState = "disconnected";
  /** Connections made so far (1 after the first; each reconnect adds one). */
  connections = 0;

  constructor(options: ClientOptions = {}) {
    this.explicitSocket = options.socketPath || undefined;
    this.agentctlPath = options.agentctlPath || undefined;
    this.env = options.env ?? process.env;
    this.reconnect = options.reconnect ?? true;
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  }

  /** The socket: the one set, else the one `agentctl socket-path` last printed. */
  get socketPath(): string | undefined {
    return this.explicitSocket ?? this.found;
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
    if (this.connection) {
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
    this.drop(new UnavailableError("the agentd client was disposed"));
  }

  /**
   * @internal Subscribes `route` to the notifications of the subscription `method` returns.
   * The route is in place before the next message is read: `vscode-jsonrpc` hands over one
   * message per macrotask, and the reply's continuations run as microtasks before it.
   */
  async subscribe(method: string, params: unknown, route: (result: unknown) => void): Promise<string> {
    await this.connect();
    const id = await this.call(method, params);
    if (typeof id !== "string") {
      throw new UnavailableError(`${method} returned ${JSON.stringify(id)}, not a subscription id`);
    }
    this.routes.set(id, route);
    return id;
  }

  /** @internal Ends a subscription's routing (and asks the daemon to end it if connected). */
  async unsubscribe(method: string, id: string, watch: Watch): Promise<void> {
    this.watches.delete(watch);
    this.routes.delete(id);
    if (this.connection) {
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

  private async call(method: string, params: unknown): Promise<unknown> {
    const connection = this.connection;
    if (!connection) {
      throw new UnavailableError(`not connected to agentd at ${this.socketPath}`);
    }
    connection.inflight += 1;
    try {
      return await connection.rpc.sendRequest(method, params);
    } catch (e) {
      if (e instanceof ResponseError && e.code !== ErrorCodes.PendingResponseRejected) {
        throw new RpcError(method, e.code, e.message, e.data as ErrorData | undefined);
      }
      throw new UnavailableError(`the connection to agentd at ${this.socketPath} was lost (${method} got no answer)`);
    } finally {
      connection.inflight -= 1;
    }
  }

  private async establish(): Promise<void> {
    let socket: net.Socket;
    try {
      socket = await this.open();
    } catch (e) {
      const error = e instanceof UnavailableError ? e : new UnavailableError(`cannot reach agentd at ${this.socketPath}: ${(e as Error).message}`);
      this.lost(error);
      throw error;
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

  /**
   * A connected socket: on the socket set (checked here, started through agentctl when nothing
   * answers), else on the one `agentctl socket-path` names once it has checked it.
   */
  private async open(): Promise<net.Socket> {
    const explicit = this.explicitSocket;
    if (!explicit) {
      if (!this.agentctlPath) {
        throw new UnavailableError("no agentd socket: set agentd.socketPath, or agentd.agentctlPath to find it with `agentctl socket-path`");
      }
      const found = socketOf(await this.askAgentctl(["socket-path", "--json"]), this.agentctlPath);
      this.found = found;
      return connectTo(found);
    }
    const why = await untrustedSocket(explicit);
    if (why) {
      throw new UnavailableError(why);
    }
    try {
      return await connectTo(explicit);
    } catch (first) {
      const code = (first as NodeJS.ErrnoException).code;
      if ((code !== "ENOENT" && code !== "ECONNREFUSED") || !this.agentctlPath) {
        throw first;
      }
      // `agentctl status` starts the daemon on this socket when nothing answers.
      await this.askAgentctl(["--socket", explicit, "status"]);
      return connectTo(explicit);
    }
  }

  /** Runs agentctl with `args`; its stdout, or an error carrying what it said on stderr. */
  private askAgentctl(args: string[]): Promise<string> {
    const agentctl = this.agentctlPath ?? "agentctl";
    return new Promise((resolve, reject) => {
      execFile(agentctl, args, { env: this.env, timeout: AGENTCTL_TIMEOUT_MS }, (error, stdout, stderr) => {
        if (error) {
          const said = stderr.trim() || error.message;
          reject(new UnavailableError(`\`${agentctl} ${args.join(" ")}\` failed: ${said}`));
        } else {
          resolve(stdout);
        }
      });
    });
  }

  private attach(socket: net.Socket): void {
    const guarded = boundedReader(socket, this.maxMessageBytes);
    const rpc = createMessageConnection(guarded, new StreamMessageWriter(socket));
    const connection: Connection = { rpc, socket, inflight: 0 };
    this.connection = connection;
    rpc.onNotification((_method: string, params: unknown) => {
      const { subscription, result } = (params ?? {}) as SubscriptionParams;
      if (typeof subscription === "string") {
        this.routes.get(subscription)?.(result);
      }
    });
    // A bad header or a message over the bound: this connection is done.
    rpc.onError(() => socket.destroy());
    socket.on("error", () => {
      // "close" follows and carries the consequences.
    });
    socket.on("close", () => {
      if (this.connection === connection) {
        this.drop(new UnavailableError(`the connection to agentd at ${this.socketPath} was lost`), false);
      }
    });
    rpc.listen();
  }

  /**
   * Leaves the connection (new requests go to the next one). Its pending requests fail as
   * `UnavailableError` (see `call`): at once when the client leaves, or, when the daemon closed
   * it (`daemon/shutdown` answers, then closes), once the replies already read are handled.
   */
  private drop(error: Error, now = true): void {
    const connection = this.connection;
    this.connection = undefined;
    this.routes.clear();
    if (connection) {
      connection.socket.destroy();
      if (now) {
        connection.rpc.dispose();
      } else {
        settle(connection);
      }
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

/** One connection: the socket, its JSON-RPC layer, and how many requests wait on it. */
interface Connection {
  rpc: MessageConnection;
  socket: net.Socket;
  inflight: number;
}

/**
 * How many event-loop turns a closed connection gets to hand over the replies it read:
 * `vscode-jsonrpc` handles one queued message per turn, so this bounds the messages, not time.
 */
const SETTLE_TURNS = 10_000;

/** Disposes a closed connection once no request waits on it, or after [`SETTLE_TURNS`]. */
function settle(connection: Connection, turns = SETTLE_TURNS): void {
  if (connection.inflight === 0 || turns === 0) {
    connection.rpc.dispose();
  } else {
    setImmediate(() => settle(connection, turns - 1));
  }
}

/** A connection to the Unix socket at `socketPath`. */
function connectTo(socketPath: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ path: socketPath });
    socket.once("connect", () => {
      socket.removeListener("error", reject);
      resolve(socket);
    });
    socket.once("error", reject);
  });
}

/** The socket in `agentctl socket-path --json`'s output. */
function socketOf(stdout: string, agentctl: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(stdout);
  } catch {
    parsed = undefined;
  }
  const socket = (parsed as { socket?: unknown } | undefined)?.socket;
  if (typeof socket !== "string" || socket === "") {
    throw new UnavailableError(`\`${agentctl} socket-path --json\` printed no socket: ${stdout.slice(0, 200)}`);
  }
  return socket;
}

/**
 * `vscode-jsonrpc`'s reader on `socket`, with a bound it does not have: the bytes read since
 * the last whole message was handed over may not pass `maxBytes` (the reader itself would
 * keep a message of any announced length).
 */
function boundedReader(socket: net.Socket, maxBytes: number): MessageReader {
  const reader = new StreamMessageReader(socket);
  // No partial-message notices: their timer re-arms itself and would outlive the connection.
  reader.partialMessageTimeout = 0;
  let sinceLast = 0;
  socket.on("data", (chunk: Buffer) => {
    sinceLast += chunk.length;
    if (sinceLast > maxBytes) {
      socket.destroy(new MessageTooLargeError(maxBytes));
    }
  });
  const listen = reader.listen.bind(reader);
  reader.listen = (callback) =>
    listen((message) => {
      sinceLast = 0;
      callback(message);
    });
  return reader;
}

/** More than the bound arrived without a whole message: the connection is dropped. */
export class MessageTooLargeError extends Error {
  constructor(limit: number) {
    super(`agentd sent a message larger than ${limit} bytes`);
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
