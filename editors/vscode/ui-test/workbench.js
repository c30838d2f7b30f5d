/**
 * A user's walk through the extension in a real VS Code: code-server's workbench in headless
 * Chromium, driven with playwright-core. Run by tests/tests/e2e/editor_vscode_workbench.rs,
 * which starts agentd (with a scripted mock provider: `run: CMD` asks for a shell call,
 * `call: TOOL {JSON}` for any call, anything else is echoed) and code-server with the built
 * .vsix installed, and passes:
 *   WORKBENCH_URL  code-server's address, with `?folder=` the workspace
 *   WORKSPACE      that folder (it holds notes.txt)
 *   SHOTS          where the screenshot of each step goes
 *   PLAYWRIGHT     the playwright-core module;  CHROMIUM  the browser
 * Every wait is bounded far above what a step takes; none is a timing assertion.
 */

"use strict";

const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: tests/tests/e2e/editor_vscode_workbench.rs runs this`);
  }
  return value;
};
const url = env("WORKBENCH_URL");
const workspace = env("WORKSPACE");
const shots = env("SHOTS");
const { chromium } = require(env("PLAYWRIGHT"));

/** A guard against a hang; never a timing assertion. */
const BOUND_MS = 60_000;

let page;
let step = 0;

/** Saves a screenshot named after the step. */
async function shot(name) {
  step += 1;
  const file = path.join(shots, `${String(step).padStart(2, "0")}-${name}.png`);
  await page.screenshot({ path: file });
  console.log(`screenshot ${file}`);
}

/** An error the extension showed (each starts with "agentd:"). */
function errorToast() {
  return page.locator(".notification-toast:has(.codicon-error)", { hasText: "agentd" }).first();
}

/** Waits for `locator`, failing at once with the extension's error if one shows first. */
async function see(locator, during) {
  const error = errorToast();
  const failed = error.waitFor().then(async () => {
    throw new Error(`the extension showed an error during ${during}: ${await error.innerText()}`);
  });
  failed.catch(() => undefined);
  await Promise.race([locator.waitFor(), failed]);
}

/** Fails when the extension showed an error. */
async function noErrors(during) {
  if (await errorToast().isVisible()) {
    throw new Error(`the extension showed an error during ${during}: ${await errorToast().innerText()}`);
  }
}

/** Runs a command from the command palette, as typed there. */
async function command(title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor();
  await input.fill(`>${title}`);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first().waitFor();
  await page.keyboard.press("Enter");
}

/** Types `text` into the open input box and accepts it. */
async function answerInputBox(text) {
  const input = page.locator(".quick-input-widget input");
  await input.waitFor();
  await input.fill(text);
  await page.keyboard.press("Enter");
}

/** Fails unless notes.txt holds `text`. */
function expectNotes(text, after) {
  const now = fs.readFileSync(path.join(workspace, "notes.txt"), "utf8");
  if (now !== text) {
    throw new Error(`after ${after} notes.txt holds ${JSON.stringify(now)}, not ${JSON.stringify(text)}`);
  }
}

/** The Transcript view's page (a webview: an iframe holding an iframe). */
function transcript() {
  return page.frameLocator("iframe.webview.ready").frameLocator("#active-frame");
}

/** Sends `text` from the Transcript view's prompt box. */
async function submit(text) {
  const prompt = transcript().locator("#prompt");
  await prompt.fill(text);
  await prompt.press("Control+Enter");
}

async function main() {
  fs.mkdirSync(shots, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "agentd-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: env("CHROMIUM"),
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  context.setDefaultTimeout(BOUND_MS);
  page = context.pages()[0] ?? (await context.newPage());
  try {
    await walk();
  } catch (e) {
    await page.screenshot({ path: path.join(shots, "failure.png") }).catch(() => undefined);
    throw e;
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

async function walk() {
  await page.goto(url);
  const icon = page.locator('.activitybar .action-item a[aria-label^="agentd"]').first();
  await icon.waitFor();
  await shot("workbench");

  // The agentd view, from its icon in the activity bar; opening it activates the extension.
  await icon.click();
  await page.locator(".pane-header", { hasText: "Sessions" }).waitFor();
  await page.locator(".statusbar-item", { hasText: "agentd" }).first().waitFor();
  await transcript().locator("#prompt").waitFor();
  await noErrors("opening the view");
  await shot("agentd-view");

  // A new session: the palette, its title, and it is attached (the Transcript shows it).
  await command("agentd: New Session");
  await answerInputBox("ui test");
  await see(transcript().locator("#title", { hasText: "ui test" }), "creating the session");
  await page.locator(".pane-body .monaco-list-row", { hasText: "ui test" }).first().waitFor();
  await page.locator(".statusbar-item", { hasText: "agentd: idle" }).waitFor();
  await noErrors("creating the session");
  await shot("session-created");

  // A prompt from the Transcript view, and its answer streaming in.
  await submit("hello from the workbench");
  await see(transcript().locator("#log", { hasText: "echo: hello from the workbench" }), "the first answer");
  await noErrors("the first answer");
  await shot("answer");

  // A command asks first (approval mode `ask`): the notification's Allow runs it.
  await submit("run: echo approved-by-ui");
  const approval = page.locator(".notification-toast", { hasText: "echo approved-by-ui" }).last();
  await see(approval.locator(".monaco-button", { hasText: /^Allow$/ }), "the command's approval");
  await shot("approval");
  await approval.locator(".monaco-button", { hasText: /^Allow$/ }).click();
  await see(transcript().locator("#log", { hasText: "result: approved-by-ui" }), "the approval");
  await noErrors("the approval");
  await shot("approved");

  // An edit, allowed: its diff opens; then Show Changes diffs the whole input.
  const edit = { file_path: "notes.txt", old_string: "written by hand", new_string: "edited by the agent" };
  await submit(`call: edit_file ${JSON.stringify(edit)}`);
  const editApproval = page.locator(".notification-toast", { hasText: "Allow edit_file?" }).last();
  await see(editApproval, "the edit's approval");
  await editApproval.locator(".monaco-button", { hasText: /^Allow$/ }).click();
  await page.locator(".tab", { hasText: "notes.txt (agent edit)" }).waitFor();
  await transcript().locator("#log", { hasText: "result:" }).last().waitFor();
  await page.locator(".statusbar-item", { hasText: "agentd: idle" }).waitFor();
  await command("agentd: Show Changes");
  await see(page.locator(".tab", { hasText: "notes.txt (agent changes)" }), "Show Changes");
  await page.locator(".monaco-diff-editor .original .view-lines", { hasText: "written by hand" }).waitFor();
  await page.locator(".monaco-diff-editor .modified .view-lines", { hasText: "edited by the agent" }).waitFor();
  await noErrors("the diff");
  await shot("diff");

  // Undo: the file is as it was before the agent's edit.
  await command("agentd: Undo Last Input");
  await see(page.locator(".notification-toast", { hasText: "undid the last input" }), "the undo");
  await transcript().locator("#log", { hasText: "Undone:" }).waitFor();
  expectNotes("written by hand\n", "the undo");
  await noErrors("the undo");
  await shot("undo");

  // Redo brings the edit back; after the user's own edit, Undo asks first, naming the file.
  await command("agentd: Redo");
  await see(page.locator(".notification-toast", { hasText: "redid what the undo took back" }), "the redo");
  expectNotes("edited by the agent\n", "the redo");
  fs.writeFileSync(path.join(workspace, "notes.txt"), "edited by the agent, and by me\n");
  await command("agentd: Undo Last Input");
  const dialog = page.locator(".monaco-dialog-box", { hasText: "notes.txt" });
  await see(dialog, "the refused undo");
  await shot("undo-refused");
  await dialog.locator(".monaco-button", { hasText: /^Force$/ }).click();
  await see(page.locator(".notification-toast", { hasText: "your versions of notes.txt are kept" }), "the forced undo");
  expectNotes("written by hand\n", "the forced undo");
  await shot("undo-forced");

  // A long command, allowed, then the view's Abort button.
  await submit("run: sleep 120");
  const long = page.locator(".notification-toast", { hasText: "sleep 120" }).last();
  await see(long, "the long command's approval");
  await long.locator(".monaco-button", { hasText: /^Allow$/ }).click();
  await page.locator(".statusbar-item", { hasText: "agentd: working" }).waitFor();
  await transcript().locator("#abort").click();
  await see(page.locator(".statusbar-item", { hasText: "agentd: idle" }), "the abort");
  await noErrors("the abort");
  await shot("aborted");
}

main().then(
  () => console.log(`workbench walk done: ${step} screenshots in ${shots}`),
  (e) => {
    console.error(e instanceof Error ? (e.stack ?? e.message) : String(e));
    process.exit(1);
  },
);
