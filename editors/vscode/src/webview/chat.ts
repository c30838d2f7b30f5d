/**
 * The chat view's page script: renders transcript items the extension sends (never as HTML:
 * every text goes through `textContent`), applies streaming ops, and sends the prompt box's
 * input back. The extension owns the transcript; this page only draws it.
 */

interface VsCodeApi {
  postMessage(message: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

/** The transcript item shapes of `src/transcript.ts`, as they arrive over postMessage. */
type Item =
  | { id: string; kind: "user" | "steering" | "reasoning" | "usage"; text: string }
  | { id: string; kind: "assistant"; text: string; done: boolean }
  | { id: string; kind: "tool"; tool: string; args: string; status: string; output: string; files: string[] }
  | { id: string; kind: "notice"; level: string; text: string }
  | { id: string; kind: "request"; requestId: string; title: string; detail: string; options: string[]; resolved: string | null };

type Op = { op: "add" | "update"; item: Item } | { op: "append"; id: string; text: string };

type FromHost =
  | { type: "reset"; title: string; state: string; items: Item[] }
  | { type: "ops"; ops: Op[] }
  | { type: "state"; state: string };

const vscode = acquireVsCodeApi();
const log = document.getElementById("log") as HTMLElement;
const header = document.getElementById("title") as HTMLElement;
const stateBadge = document.getElementById("state") as HTMLElement;
const prompt = document.getElementById("prompt") as HTMLTextAreaElement;

/** Tool output longer than this many lines starts folded. */
const FOLD_LINES = 12;

function el(tag: string, className: string, text?: string): HTMLElement {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** The element whose text an `append` op extends, per item. */
function textTarget(node: Element): HTMLElement | null {
  return node.querySelector(".text, .output");
}

function render(item: Item): HTMLElement {
  switch (item.kind) {
    case "user":
    case "steering": {
      const node = el("div", `msg ${item.kind}`);
      node.append(el("div", "who", item.kind === "user" ? "You" : "Steering"), el("div", "text", item.text));
      return node;
    }
    case "assistant": {
      const node = el("div", `msg assistant${item.done ? "" : " streaming"}`);
      node.append(el("div", "text", item.text));
      return node;
    }
    case "reasoning": {
      const node = el("details", "reasoning");
      node.append(el("summary", "", "Reasoning"), el("div", "text", item.text));
      return node;
    }
    case "usage":
      return el("div", "usage", item.text);
    case "notice":
      return el("div", `notice ${item.level}`, item.text);
    case "tool": {
      const node = el("details", `tool ${item.status}`) as HTMLDetailsElement;
      const lines = item.output.split("\n").length;
      node.open = item.status === "running" || lines <= FOLD_LINES;
      const summary = el("summary", "");
      summary.append(el("span", "name", item.tool), el("span", "status", item.status));
      node.append(summary, el("pre", "args", item.args), el("pre", "output", item.output));
      if (item.files.length > 0 && item.status !== "running") {
        const button = el("button", "diff", "Show diff");
        button.addEventListener("click", () => vscode.postMessage({ type: "openDiff", id: item.id }));
        node.append(button);
      }
      return node;
    }
    case "request": {
      const node = el("div", `request${item.resolved ? " resolved" : ""}`);
      node.append(el("div", "who", item.title), el("pre", "args", item.detail));
      if (item.resolved) {
        node.append(el("div", "status", item.resolved));
      } else {
        const row = el("div", "buttons");
        for (const option of item.options) {
          const button = el("button", "", option);
          button.addEventListener("click", () => vscode.postMessage({ type: "respond", requestId: item.requestId, choice: option }));
          row.append(button);
        }
        node.append(row);
      }
      return node;
    }
  }
}

function place(item: Item, replace: boolean): void {
  const node = render(item);
  node.dataset["id"] = item.id;
  const existing = log.querySelector(`[data-id="${CSS.escape(item.id)}"]`);
  if (existing && replace) {
    existing.replaceWith(node);
  } else if (!existing) {
    log.append(node);
  }
}

function apply(op: Op): void {
  if (op.op === "append") {
    const node = log.querySelector(`[data-id="${CSS.escape(op.id)}"]`);
    const target = node && textTarget(node);
    if (target) {
      target.textContent = (target.textContent ?? "") + op.text;
    }
    return;
  }
  place(op.item, op.op === "update");
}

function atBottom(): boolean {
  return window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
}

window.addEventListener("message", (event: MessageEvent<FromHost>) => {
  const message = event.data;
  const follow = atBottom();
  switch (message.type) {
    case "reset":
      header.textContent = message.title;
      stateBadge.textContent = message.state;
      log.replaceChildren();
      message.items.forEach((item) => place(item, true));
      break;
    case "ops":
      message.ops.forEach(apply);
      break;
    case "state":
      stateBadge.textContent = message.state;
      break;
  }
  if (follow) {
    window.scrollTo(0, document.body.scrollHeight);
  }
});

function send(mode: string): void {
  const text = prompt.value.trim();
  if (text === "") {
    return;
  }
  vscode.postMessage({ type: "input", mode, text });
  prompt.value = "";
}

for (const button of document.querySelectorAll<HTMLButtonElement>("button[data-mode]")) {
  button.addEventListener("click", () => send(button.dataset["mode"] ?? "submit"));
}
document.getElementById("abort")?.addEventListener("click", () => vscode.postMessage({ type: "abort" }));
prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    send("submit");
  }
});
vscode.postMessage({ type: "ready" });

// A module, so its names stay out of the page's global scope.
export {};
