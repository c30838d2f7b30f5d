/**
 * Edits by the agent as diffs: the content a file had when its editing tool call started is
 * kept under an `agentd-before:` URI, and the call's end opens VS Code's diff of that against
 * the file on disk. The daemon runs a call right after announcing it, so unless the call waited
 * for an approval the snapshot may already show the edit; then an `edit_file` is worked back
 * from its arguments, and any other edit opens the file itself.
 */

import * as fs from "node:fs/promises";
import * as path from "node:path";
import * as vscode from "vscode";
import type { Diffs } from "./attached";
import { beforeEdit } from "./transcript";

export const BEFORE_SCHEME = "agentd-before";

/** Most snapshots kept; the oldest go first (a long session edits many files). */
const MAX_SNAPSHOTS = 200;

export class EditDiffs implements vscode.TextDocumentContentProvider, Diffs {
  private readonly before = new Map<string, string>();
  /** Snapshots still being read, by call: the diff waits for them. */
  private readonly reading = new Map<string, Promise<void>>();

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.before.get(uri.query) ?? "";
  }

  /** Reads `files` as they are now, before the call `callId` changes them. */
  snapshot(callId: string, files: string[]): Promise<void> {
    const done = this.read(callId, files).finally(() => this.reading.delete(callId));
    this.reading.set(callId, done);
    return done;
  }

  private async read(callId: string, files: string[]): Promise<void> {
    await Promise.all(
      files.map(async (file) => {
        // A file the call creates has no content before.
        const text = await fs.readFile(file, "utf8").catch(() => "");
        this.before.set(key(callId, file), text);
        while (this.before.size > MAX_SNAPSHOTS) {
          const oldest = this.before.keys().next().value;
          if (oldest === undefined) {
            break;
          }
          this.before.delete(oldest);
        }
      }),
    );
  }

  /**
   * Opens the diff of each file the call (`tool` with `args`) changed, or the file itself when
   * its content before is unknown.
   */
  async open(callId: string, files: string[], tool: string, args: unknown): Promise<void> {
    await this.reading.get(callId);
    for (const file of files) {
      const k = key(callId, file);
      const target = vscode.Uri.file(file);
      const after = await fs.readFile(file, "utf8").catch(() => "");
      const snapshot = this.before.get(k);
      const before = snapshot !== undefined && snapshot !== after ? snapshot : beforeEdit(tool, args, after);
      if (before === undefined) {
        await vscode.commands.executeCommand("vscode.open", target, { preview: true, preserveFocus: true });
        continue;
      }
      this.before.set(k, before);
      const left = vscode.Uri.from({ scheme: BEFORE_SCHEME, path: file, query: k });
      await vscode.commands.executeCommand("vscode.diff", left, target, `${path.basename(file)} (agent edit)`, {
        preview: true,
        preserveFocus: true,
      });
    }
  }

  /** A read-only document of `text` standing for `file` as it was (`tag` tells versions apart). */
  document(tag: string, file: string, text: string): vscode.Uri {
    const k = key(tag, file);
    this.before.set(k, text);
    return vscode.Uri.from({ scheme: BEFORE_SCHEME, path: file, query: k });
  }
}

function key(callId: string, file: string): string {
  return `${callId}\n${file}`;
}
