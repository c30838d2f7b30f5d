/**
 * The Sessions tree view: every session the daemon holds (title, state, cwd), subagents under
 * their parent, refreshed on the daemon's session notifications. Clicking one attaches to it.
 */

import * as vscode from "vscode";
import type { AgentdClient } from "./client";
import type { SessionState, SessionSummary } from "./protocol";

const STATE_ICONS: Record<SessionState, string> = {
  idle: "circle-outline",
  processing: "sync~spin",
  awaiting_input: "bell-dot",
  closed: "circle-slash",
};

export class SessionsTree implements vscode.TreeDataProvider<SessionSummary> {
  private readonly changed = new vscode.EventEmitter<SessionSummary | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private sessions: SessionSummary[] = [];
  private error: string | undefined;

  constructor(private client: () => AgentdClient) {}

  /** Lists the sessions again. */
  async refresh(): Promise<void> {
    try {
      this.sessions = (await this.client().request("session/list", {})).sessions;
      this.error = undefined;
    } catch (e) {
      this.sessions = [];
      this.error = (e as Error).message;
    }
    this.changed.fire(undefined);
  }

  /** Why the list is empty, if the daemon could not be asked. */
  get problem(): string | undefined {
    return this.error;
  }

  getTreeItem(s: SessionSummary): vscode.TreeItem {
    const hasChildren = this.sessions.some((c) => c.parent_id === s.session_id);
    const item = new vscode.TreeItem(
      s.title || s.session_id.slice(0, 8),
      hasChildren ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None,
    );
    item.id = s.session_id;
    item.description = `${s.state.replace("_", " ")} · ${s.cwd}`;
    item.tooltip = new vscode.MarkdownString(
      [`**${s.title ?? "(untitled)"}**`, `id: \`${s.session_id}\``, `state: ${s.state}`, `cwd: \`${s.cwd}\``, `model: ${s.provider}/${s.model}`, s.parent_id ? `parent: \`${s.parent_id}\`` : ""]
        .filter(Boolean)
        .join("\n\n"),
    );
    item.iconPath = new vscode.ThemeIcon(STATE_ICONS[s.state]);
    item.contextValue = s.state;
    item.command = { command: "agentd.attach", title: "Attach", arguments: [s.session_id] };
    return item;
  }

  getChildren(parent?: SessionSummary): SessionSummary[] {
    if (parent) {
      return this.sessions.filter((s) => s.parent_id === parent.session_id);
    }
    const ids = new Set(this.sessions.map((s) => s.session_id));
    return this.sessions.filter((s) => !s.parent_id || !ids.has(s.parent_id));
  }

  getParent(s: SessionSummary): SessionSummary | undefined {
    return this.sessions.find((p) => p.session_id === s.parent_id);
  }
}
