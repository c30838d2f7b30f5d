/**
 * The Transcript view: a webview with a strict Content-Security-Policy (no inline script or
 * style, only this extension's own files, scripts by nonce) that draws the attached session's
 * transcript and hands the prompt box's input to the extension.
 */

import * as crypto from "node:crypto";
import * as vscode from "vscode";
import type { Item, Op } from "./transcript";

/** What the page sends. */
export type FromPage =
  | { type: "ready" }
  | { type: "input"; mode: "submit" | "steer" | "follow_up"; text: string }
  | { type: "abort" }
  | { type: "openDiff"; id: string }
  | { type: "respond"; requestId: string; choice: string };

export class ChatView implements vscode.WebviewViewProvider {
  private view: vscode.WebviewView | undefined;
  private current: { title: string; state: string; items: Item[] } = { title: "No session", state: "", items: [] };

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly onMessage: (message: FromPage) => void,
  ) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const media = vscode.Uri.joinPath(this.extensionUri, "media");
    const script = vscode.Uri.joinPath(this.extensionUri, "out", "webview");
    view.webview.options = { enableScripts: true, localResourceRoots: [media, script] };
    view.webview.html = this.html(view.webview);
    view.webview.onDidReceiveMessage((message: FromPage) => {
      if (message.type === "ready") {
        this.post({ type: "reset", ...this.current });
      } else {
        this.onMessage(message);
      }
    });
    view.onDidDispose(() => {
      this.view = undefined;
    });
  }

  /** Shows a whole transcript (after an attach). */
  reset(title: string, state: string, items: Item[]): void {
    this.current = { title, state, items };
    this.post({ type: "reset", ...this.current });
  }

  /** Streams changes to the shown transcript. */
  ops(ops: Op[]): void {
    this.post({ type: "ops", ops });
  }

  state(state: string): void {
    this.current.state = state;
    this.post({ type: "state", state });
  }

  /** Brings the view forward. */
  reveal(): void {
    if (this.view) {
      this.view.show(true);
    } else {
      void vscode.commands.executeCommand("agentd.chat.focus");
    }
  }

  private post(message: unknown): void {
    void this.view?.webview.postMessage(message);
  }

  private html(webview: vscode.Webview): string {
    const nonce = crypto.randomBytes(16).toString("base64");
    const css = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "media", "chat.css"));
    const js = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "out", "webview", "chat.js"));
    const csp = [
      "default-src 'none'",
      `style-src ${webview.cspSource}`,
      `script-src 'nonce-${nonce}'`,
      `img-src ${webview.cspSource}`,
      `font-src ${webview.cspSource}`,
    ].join("; ");
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${css}">
</head>
<body>
<header><span id="title"></span><span id="state"></span></header>
<main id="log"></main>
<footer>
<textarea id="prompt" placeholder="Ask, or steer while it works (Ctrl+Enter sends)"></textarea>
<div class="buttons">
<button data-mode="submit">Send</button>
<button class="secondary" data-mode="steer">Steer</button>
<button class="secondary" data-mode="follow_up">Follow up</button>
<button class="secondary" id="abort">Abort</button>
</div>
</footer>
<script type="module" nonce="${nonce}" src="${js}"></script>
</body>
</html>`;
  }
}
