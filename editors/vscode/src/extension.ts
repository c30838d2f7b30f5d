/**
 * The extension's entry point: builds the client from the settings, registers the commands,
 * the Sessions tree, the Transcript view and the status bar item, and keeps them on the
 * attached session. Every daemon error is shown as a VS Code error message, never a stack.
 */

import * as fs from "node:fs/promises";
import * as path from "node:path";
import * as vscode from "vscode";
import { AttachedSession } from "./attached";
import { ChatView, type FromPage } from "./chatView";
import { AgentdClient, type DaemonWatch } from "./client";
import { type CommandItem, commandItems, startOf } from "./commands";
import { contentBefore, type FileChange, parseDiff, refusedFiles } from "./changes";
import { BEFORE_SCHEME, EditDiffs } from "./diff";
import type { FilesRestored, SessionId, SessionState, SessionSummary } from "./protocol";
import { SessionsTree } from "./sessionsTree";
import { type RequestItem, responseFor } from "./transcript";

const STATUS_TEXT: Record<SessionState | "disconnected", string> = {
  idle: "$(hubot) agentd: idle",
  processing: "$(sync~spin) agentd: working",
  awaiting_input: "$(bell-dot) agentd: awaiting input",
  closed: "$(circle-slash) agentd: closed",
  disconnected: "$(debug-disconnect) agentd: disconnected",
};

class Extension implements vscode.Disposable {
  private client: AgentdClient;
  private daemonWatch: DaemonWatch | undefined;
  private attached: AttachedSession | undefined;
  private readonly diffs = new EditDiffs();
  private readonly tree: SessionsTree;
  private readonly chat: ChatView;
  private readonly status: vscode.StatusBarItem;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(context: vscode.ExtensionContext) {
    this.client = this.newClient();
    this.tree = new SessionsTree(() => this.client);
    this.chat = new ChatView(context.extensionUri, (m) => void this.guard(() => this.fromPage(m)));
    this.status = vscode.window.createStatusBarItem("agentd.status", vscode.StatusBarAlignment.Left, 50);
    this.status.name = "agentd";
    this.status.command = "agentd.sessions";
    this.status.text = "$(hubot) agentd";
    this.status.show();
    this.disposables.push(
      this.status,
      vscode.window.createTreeView("agentd.sessions", { treeDataProvider: this.tree, showCollapseAll: true }),
      vscode.window.registerWebviewViewProvider("agentd.chat", this.chat, { webviewOptions: { retainContextWhenHidden: true } }),
      vscode.workspace.registerTextDocumentContentProvider(BEFORE_SCHEME, this.diffs),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration("agentd")) {
          void this.guard(() => this.reconnect());
        }
      }),
    );
    const commands: Record<string, (...args: never[]) => Promise<unknown>> = {
      "agentd.newSession": () => this.newSession(),
      "agentd.submit": (text?: string) => this.input("submit", text),
      "agentd.submitSelection": () => this.submitSelection(),
      "agentd.steer": (text?: string) => this.input("steer", text),
      "agentd.followUp": (text?: string) => this.input("follow_up", text),
      "agentd.abort": (s?: SessionSummary) => this.abort(s?.session_id),
      "agentd.close": (s?: SessionSummary) => this.close(s?.session_id),
      "agentd.fork": (s?: SessionSummary) => this.fork(s?.session_id),
      "agentd.sessions": () => this.pickSession(),
      "agentd.attach": (id?: string) => this.attachCommand(id),
      "agentd.queue": () => this.showQueue(),
      "agentd.clearQueue": () => this.clearQueue(),
      "agentd.respond": (choice?: string) => this.respondCommand(choice),
      "agentd.refreshSessions": () => this.start(),
      "agentd.undo": () => this.undo(),
      "agentd.redo": () => this.redo(),
      "agentd.showChanges": () => this.showChanges(),
    };
    for (const [name, run] of Object.entries(commands)) {
      this.disposables.push(vscode.commands.registerCommand(name, (...args: never[]) => this.guard(() => run(...args))));
    }
    void this.guard(() => this.start());
  }

  dispose(): void {
    void this.attached?.detach();
    this.client.dispose();
    this.disposables.forEach((d) => d.dispose());
  }

  private newClient(): AgentdClient {
    const config = vscode.workspace.getConfiguration("agentd");
    const socketPath = config.get<string>("socketPath") ?? "";
    const agentctlPath = config.get<string>("agentctlPath") ?? "agentctl";
    const client = new AgentdClient({ ...(socketPath ? { socketPath } : {}), ...(agentctlPath ? { agentctlPath } : {}) });
    client.onState((state) => {
      if (state === "disconnected") {
        this.status.text = STATUS_TEXT.disconnected;
      } else if (state === "connected") {
        this.showState(this.attached?.state);
        void this.tree.refresh();
      }
    });
    return client;
  }

  /** Connects (starting the daemon if allowed) and follows the daemon's session changes. */
  private async start(): Promise<void> {
    // Once per client; a later refresh retries when the first attempt found no daemon.
    this.daemonWatch ??= await this.client.watchDaemon((event) => {
      void this.tree.refresh();
      if (event.kind === "session_deleted" && event.session_id === this.attached?.id) {
        void this.detach();
      }
    });
    await this.tree.refresh();
  }

  /** After a settings change: a new client on the new socket, the same session attached. */
  private async reconnect(): Promise<void> {
    const id = this.attached?.id;
    await this.detach();
    await this.daemonWatch?.stop().catch(() => undefined);
    this.daemonWatch = undefined;
    this.client.dispose();
    this.client = this.newClient();
    await this.start();
    if (id) {
      await this.attach(id);
    }
  }

  private async guard(run: () => Promise<unknown>): Promise<void> {
    try {
      await run();
    } catch (e) {
      void vscode.window.showErrorMessage(`agentd: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  private showState(state: SessionState | undefined): void {
    this.status.text = state ? STATUS_TEXT[state] : "$(hubot) agentd";
    this.status.tooltip = this.attached ? `${this.attached.title} (${this.attached.id})` : "agentd: no session attached";
    void vscode.commands.executeCommand("setContext", "agentd.state", state ?? "");
  }

  private async attach(id: SessionId): Promise<void> {
    await this.detach();
    // The listener is called while `AttachedSession.attach` runs (the snapshot's state, the
    // replay), before it returns the session: until then `attached` is undefined, and the
    // replay's ops are left to the `chat.reset` below, which shows the whole transcript.
    let attached: AttachedSession | undefined;
    attached = await AttachedSession.attach(this.client, id, this.diffs, {
      ops: (ops) => {
        if (attached !== undefined && this.attached === attached) {
          this.chat.ops(ops);
        }
      },
      state: (state) => {
        if (this.attached === attached || !this.attached) {
          this.chat.state(state);
          this.showState(state);
        }
      },
      request: (item) => void this.guard(() => this.notify(id, item)),
    });
    this.attached = attached;
    this.chat.reset(attached.title, attached.state, attached.transcript.items);
    this.showState(attached.state);
    this.chat.reveal();
  }

  private async detach(): Promise<void> {
    const attached = this.attached;
    this.attached = undefined;
    await attached?.detach();
    this.chat.reset("No session", "", []);
    this.showState(undefined);
  }

  /** The attached session, or (with none) one the user picks. */
  private async target(explicit?: SessionId): Promise<SessionId | undefined> {
    if (explicit) {
      return explicit;
    }
    if (this.attached) {
      return this.attached.id;
    }
    return (await this.pick("Session"))?.session_id;
  }

  private async pick(placeHolder: string): Promise<SessionSummary | undefined> {
    const { sessions } = await this.client.request("session/list", {});
    if (sessions.length === 0) {
      void vscode.window.showInformationMessage("agentd: no sessions yet (agentd: New Session creates one).");
      return undefined;
    }
    const picked = await vscode.window.showQuickPick(
      sessions.map((s) => ({
        label: s.title || s.session_id.slice(0, 8),
        description: `${s.state.replace("_", " ")} · ${s.cwd}`,
        detail: `${s.session_id}${s.parent_id ? ` · subagent of ${s.parent_id.slice(0, 8)}` : ""} · ${s.provider}/${s.model}`,
        session: s,
      })),
      { placeHolder, matchOnDescription: true, matchOnDetail: true },
    );
    return picked?.session;
  }

  /** The project root of the active file, else its directory, else the first folder. */
  private sessionCwd(): string | undefined {
    const uri = vscode.window.activeTextEditor?.document.uri;
    if (uri?.scheme === "file") {
      return vscode.workspace.getWorkspaceFolder(uri)?.uri.fsPath ?? path.dirname(uri.fsPath);
    }
    return vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  }

  private async newSession(): Promise<void> {
    const cwd = this.sessionCwd();
    if (!cwd) {
      throw new Error("open a folder or a file first: a session works in a directory");
    }
    const title = await vscode.window.showInputBox({ prompt: `New session in ${cwd}`, placeHolder: "Title (optional)" });
    if (title === undefined) {
      return;
    }
    const mode = vscode.workspace.getConfiguration("agentd").get<string>("approvalMode");
    const snapshot = await this.client.request("session/create", {
      cwd,
      ...(title ? { title } : {}),
      ...(mode === "ask" || mode === "auto" ? { config: { approval: { mode } } } : {}),
    });
    await this.attach(snapshot.session_id);
  }

  private async pickSession(): Promise<void> {
    const picked = await this.pick("Attach to a session");
    if (picked) {
      await this.attach(picked.session_id);
    }
  }

  private async attachCommand(id?: string): Promise<void> {
    const wanted = id ?? (await vscode.window.showInputBox({ prompt: "Session id (or a unique prefix)" }))?.trim();
    if (!wanted) {
      return;
    }
    const { sessions } = await this.client.request("session/list", {});
    const matches = sessions.filter((s) => s.session_id.startsWith(wanted));
    if (matches.length !== 1 || !matches[0]) {
      throw new Error(matches.length === 0 ? `no session id starts with ${wanted}` : `${wanted} matches ${matches.length} sessions; give more of the id`);
    }
    await this.attach(matches[0].session_id);
  }

  private async input(mode: "submit" | "steer" | "follow_up", given?: string): Promise<void> {
    const id = await this.target();
    if (!id) {
      return;
    }
    const prompts = { submit: "Prompt", steer: "Steer the work in progress", follow_up: "Follow-up, run after the current input" };
    const text = given ?? (await this.ask(id, prompts[mode]));
    if (!text?.trim()) {
      return;
    }
    await this.send(id, mode, text);
  }

  /**
   * Reads a prompt, offering the session's skills and prompt commands: picking one starts the
   * prompt with `/name ` and the arguments follow; any other text is sent as typed (the daemon
   * expands what names a command or a skill).
   */
  private async ask(id: SessionId, prompt: string): Promise<string | undefined> {
    const listed = await this.client.request("session/commands", { session_id: id }).catch(() => undefined);
    const items = listed ? commandItems(listed) : [];
    if (items.length === 0) {
      return vscode.window.showInputBox({ prompt, ignoreFocusOut: true });
    }
    const pick = vscode.window.createQuickPick<CommandItem>();
    pick.title = prompt;
    pick.placeholder = "A prompt, or / for the session's skills and commands";
    pick.items = items;
    pick.ignoreFocusOut = true;
    pick.matchOnDetail = true;
    const text = await new Promise<string | undefined>((resolve) => {
      pick.onDidAccept(() => {
        const [item] = pick.activeItems;
        // Still choosing a name: the pick starts the prompt, and the arguments follow.
        if (item && !/\s/.test(pick.value)) {
          pick.value = startOf(item);
          return;
        }
        resolve(pick.value);
        pick.hide();
      });
      pick.onDidHide(() => resolve(undefined));
      pick.show();
    });
    pick.dispose();
    return text;
  }

  private async send(id: SessionId, mode: "submit" | "steer" | "follow_up", text: string): Promise<void> {
    const method = mode === "submit" ? "session/submit" : mode === "steer" ? "session/steer" : "session/follow_up";
    const r = await this.client.request(method, { session_id: id, text });
    if (r.queued) {
      void vscode.window.setStatusBarMessage(`agentd: queued as ${r.disposition.replace("_", "-")}`, 4000);
    }
  }

  /** Sends the selection (or the current file's name) with a question. */
  private async submitSelection(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      throw new Error("no active editor");
    }
    const id = await this.target();
    if (!id) {
      return;
    }
    const question = await vscode.window.showInputBox({ prompt: "Prompt (the selection is attached)", ignoreFocusOut: true });
    if (question === undefined) {
      return;
    }
    const doc = editor.document;
    const file = vscode.workspace.asRelativePath(doc.uri);
    const sel = editor.selection;
    const context = sel.isEmpty
      ? `File: ${file}`
      : `File: ${file}, lines ${sel.start.line + 1}-${sel.end.line + 1}:\n\`\`\`${doc.languageId}\n${doc.getText(sel)}\n\`\`\``;
    await this.send(id, "submit", question.trim() ? `${question.trim()}\n\n${context}` : context);
  }

  private async abort(explicit?: SessionId): Promise<void> {
    const id = await this.target(explicit);
    if (!id) {
      return;
    }
    const r = await this.client.request("session/abort", { session_id: id });
    const queued = r.queue.steering.length + r.queue.follow_up.length;
    const note = queued > 0 ? ` ${queued} queued item(s) kept (agentd: Clear Queue removes them).` : "";
    void vscode.window.setStatusBarMessage(`agentd: ${r.aborted ? "aborted" : "nothing was running"}.${note}`, 5000);
  }

  private async close(explicit?: SessionId): Promise<void> {
    const id = await this.target(explicit);
    if (id) {
      await this.client.request("session/close", { session_id: id });
    }
  }

  private async fork(explicit?: SessionId): Promise<void> {
    const id = await this.target(explicit);
    if (id) {
      const forked = await this.client.request("session/fork", { session_id: id });
      await this.attach(forked.session_id);
    }
  }

  private async showQueue(): Promise<void> {
    const id = await this.target();
    if (!id) {
      return;
    }
    const q = await this.client.request("session/queue", { session_id: id });
    const items = [
      ...q.steering.map((i) => ({ label: i.text, description: "steering" })),
      ...q.follow_up.map((i) => ({ label: i.text, description: "follow-up" })),
    ];
    if (items.length === 0) {
      void vscode.window.showInformationMessage("agentd: the queue is empty.");
      return;
    }
    const clear = { label: "$(trash) Clear the queue", description: "" };
    if ((await vscode.window.showQuickPick([...items, clear], { placeHolder: "Queued input" })) === clear) {
      await this.clearQueue();
    }
  }

  private async clearQueue(): Promise<void> {
    const id = await this.target();
    if (id) {
      const removed = await this.client.request("session/queue_clear", { session_id: id });
      void vscode.window.setStatusBarMessage(`agentd: removed ${removed.steering.length + removed.follow_up.length} queued item(s)`, 4000);
    }
  }

  /**
   * Undoes the last input with the files the agent changed for it. When the user changed some
   * of them since, the daemon refuses the whole undo, naming them: the warning lists them and
   * Force restores anyway (their versions are kept; Redo brings them back).
   */
  private async undo(): Promise<void> {
    const id = await this.target();
    if (!id) {
      return;
    }
    const r = await this.forcible("Undo", (force) => this.client.request("session/rollback", { session_id: id, files: true, ...(force ? { force } : {}) }));
    if (r) {
      this.filesMessage(`undid the last input (${r.removed} entries off the branch)`, r.files);
    }
  }

  /** Brings back what the last undo took away, files included. */
  private async redo(): Promise<void> {
    const id = await this.target();
    if (!id) {
      return;
    }
    const r = await this.forcible("Redo", (force) => this.client.request("session/redo", { session_id: id, ...(force ? { force } : {}) }));
    if (r) {
      this.filesMessage("redid what the undo took back", r.files);
    }
  }

  /** Runs `run`; over files the user changed, asks, and runs it again with `force` if told. */
  private async forcible<T>(what: string, run: (force: boolean) => Promise<T>): Promise<T | undefined> {
    try {
      return await run(false);
    } catch (e) {
      const files = refusedFiles(e);
      if (!files) {
        throw e;
      }
      const force = "Force";
      const choice = await vscode.window.showWarningMessage(
        `agentd: ${what} would overwrite files you changed since the agent did: ${files.join(", ")}`,
        { modal: true, detail: "Nothing was changed. Force restores them anyway; your versions are kept, and agentd: Redo brings them back." },
        force,
      );
      return choice === force ? run(true) : undefined;
    }
  }

  private filesMessage(done: string, files: FilesRestored | null | undefined): void {
    const parts = [`agentd: ${done}`];
    if (files) {
      parts.push(files.restored.length > 0 ? `restored ${files.restored.join(", ")}` : "no file to restore");
      if (files.kept?.length) {
        parts.push(`your versions of ${files.kept.join(", ")} are kept for a redo`);
      }
      if (files.not_restored?.length) {
        parts.push(`not restored: ${files.not_restored.join("; ")}`);
      }
    }
    void vscode.window.showInformationMessage(`${parts.join("; ")}.`);
  }

  /**
   * The agent's changes for the last input (`session/diff`): VS Code's diff editor for each file
   * that can be worked back to its content before (one file: a diff; several: the multi-file
   * changes view), else the unified diff as a document.
   */
  private async showChanges(): Promise<void> {
    const id = await this.target();
    if (!id) {
      return;
    }
    const [{ diff, input_id }, { cwd }] = await Promise.all([
      this.client.request("session/diff", { session_id: id }),
      this.client.request("session/get", { session_id: id }),
    ]);
    if (diff.trim() === "") {
      void vscode.window.showInformationMessage("agentd: the last input changed no file.");
      return;
    }
    const pairs = await Promise.all(parseDiff(diff).map((change) => this.sides(input_id, cwd, change)));
    const shown = pairs.filter((p): p is [vscode.Uri, vscode.Uri, vscode.Uri] => p !== undefined);
    if (shown.length === 0 || shown.length < pairs.length) {
      const doc = await vscode.workspace.openTextDocument({ language: "diff", content: diff });
      await vscode.window.showTextDocument(doc, { preview: true });
      return;
    }
    const [only] = shown;
    if (shown.length === 1 && only) {
      const [file, before, after] = only;
      await vscode.commands.executeCommand("vscode.diff", before, after, `${path.basename(file.fsPath)} (agent changes)`, { preview: true });
    } else {
      await vscode.commands.executeCommand("vscode.changes", "agentd: changes of the last input", shown);
    }
  }

  /** A file's label, its content before the change and after it, when it can be worked back. */
  private async sides(inputId: string, cwd: string, change: FileChange): Promise<[vscode.Uri, vscode.Uri, vscode.Uri] | undefined> {
    const file = path.join(cwd, change.path);
    const now = change.status === "deleted" ? "" : await fs.readFile(file, "utf8").catch(() => undefined);
    const before = now === undefined ? undefined : contentBefore(change, now);
    if (before === undefined) {
      return undefined;
    }
    const uri = vscode.Uri.file(file);
    const after = change.status === "deleted" ? this.diffs.document(`${inputId}:after`, file, "") : uri;
    return [uri, this.diffs.document(`${inputId}:before`, file, before), after];
  }

  /** Shows a waiting request as a notification whose buttons answer it. */
  private async notify(session: SessionId, item: RequestItem): Promise<void> {
    const show = "Show";
    const text =
      item.type === "approval"
        ? `agentd: ${item.title} ${item.detail.split("\n", 1)[0] ?? ""}`
        : `agentd asks: ${item.detail}`;
    const choice = await vscode.window.showWarningMessage(text, ...item.options, show);
    if (choice === show) {
      this.chat.reveal();
    } else if (choice) {
      await this.respond(session, item, choice);
    }
  }

  /** Answers a request with one of its options (typing the answer when the option says so). */
  private async respond(session: SessionId, item: RequestItem, choice: string): Promise<void> {
    let response = responseFor(item, choice);
    if (!response) {
      const answer = await vscode.window.showInputBox({ prompt: item.detail, ignoreFocusOut: true });
      if (answer === undefined) {
        return;
      }
      response = { answer };
    }
    await this.client.request("session/respond", { session_id: session, request_id: item.requestId, ...response });
  }

  /** `agentd.respond [choice]`: answers the oldest waiting request of the attached session. */
  private async respondCommand(choice?: string): Promise<void> {
    const attached = this.attached;
    if (!attached) {
      throw new Error("no session attached (agentd: Sessions attaches one)");
    }
    const pending = attached.transcript.pending();
    const picked =
      pending.length > 1
        ? (await vscode.window.showQuickPick(pending.map((item) => ({ label: item.title, detail: item.detail, item }))))?.item
        : pending[0];
    if (!picked) {
      if (pending.length === 0) {
        void vscode.window.showInformationMessage("agentd: nothing is waiting for an answer.");
      }
      return;
    }
    const answer = choice ?? (await vscode.window.showQuickPick(picked.options, { placeHolder: `${picked.title} ${picked.detail.split("\n", 1)[0] ?? ""}` }));
    if (answer) {
      await this.respond(attached.id, picked, answer);
    }
  }

  private async fromPage(message: FromPage): Promise<void> {
    switch (message.type) {
      case "input": {
        const id = await this.target();
        if (id) {
          await this.send(id, message.mode, message.text);
        }
        return;
      }
      case "abort":
        return this.abort();
      case "openDiff":
        return this.attached?.showDiff(message.id);
      case "respond": {
        const item = this.attached?.transcript.pending().find((i) => i.requestId === message.requestId);
        if (!item || !this.attached) {
          throw new Error("that request is no longer waiting");
        }
        return this.respond(this.attached.id, item, message.choice);
      }
      case "ready":
        return;
    }
  }
}

export function activate(context: vscode.ExtensionContext): void {
  context.subscriptions.push(new Extension(context));
}

export function deactivate(): void {}
