/**
 * The agent's changes as `session/diff` gives them (a unified diff in git's style), split by
 * file and worked back to each file's content before them, for VS Code's diff editor; and the
 * files an undo or redo refused to overwrite because the user changed them. No `vscode`
 * import: its tests run under Node.
 */

import { RpcError } from "./client";

/** One file's part of a diff. */
export interface FileChange {
  /** The path relative to the session's directory. */
  path: string;
  status: "added" | "deleted" | "modified";
  /** No line diff (binary content, or only the mode changed): the diff document shows it. */
  opaque: boolean;
  hunks: Hunk[];
}

/** A hunk: where it starts in the new file, and its lines (each with its newline, if any). */
interface Hunk {
  newStart: number;
  old: string[];
  new: string[];
}

const HUNK = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@/;

/** The files of a unified diff, in order (anything unparsed ends up `opaque`). */
export function parseDiff(diff: string): FileChange[] {
  const files: FileChange[] = [];
  let file: FileChange | undefined;
  let hunk: Hunk | undefined;
  /** The side(s) the previous line was on, for "\ No newline at end of file". */
  let last: ("old" | "new")[] = [];
  for (const line of diff.split("\n")) {
    const header = /^diff --git a\/(.*) b\/(.*)$/.exec(line);
    if (header) {
      file = { path: header[2] ?? "", status: "modified", opaque: true, hunks: [] };
      files.push(file);
      hunk = undefined;
      continue;
    }
    if (!file) {
      continue;
    }
    if (!hunk) {
      if (line.startsWith("new file mode")) {
        file.status = "added";
      } else if (line.startsWith("deleted file mode")) {
        file.status = "deleted";
      }
    }
    const start = HUNK.exec(line);
    if (start) {
      hunk = { newStart: Number(start[1]), old: [], new: [] };
      file.hunks.push(hunk);
      file.opaque = false;
      continue;
    }
    if (!hunk) {
      continue;
    }
    const text = `${line.slice(1)}\n`;
    switch (line[0]) {
      case " ":
        hunk.old.push(text);
        hunk.new.push(text);
        last = ["old", "new"];
        break;
      case "-":
        hunk.old.push(text);
        last = ["old"];
        break;
      case "+":
        hunk.new.push(text);
        last = ["new"];
        break;
      case "\\":
        for (const side of last) {
          const lines = hunk[side];
          lines[lines.length - 1] = (lines[lines.length - 1] ?? "").replace(/\n$/, "");
        }
        break;
      default:
        hunk = undefined;
    }
  }
  return files;
}

/** `text` as lines, each with its newline (the last may have none). */
function linesOf(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

/**
 * The content `change` started from, given the content after it (`after`: the file as it is
 * now), or undefined when the file no longer matches what the change left (the user edited it
 * since): then only the diff document can show the change.
 */
export function contentBefore(change: FileChange, after: string): string | undefined {
  if (change.opaque) {
    return undefined;
  }
  const lines = linesOf(after);
  // From the last hunk back, so earlier line numbers stay right.
  for (const hunk of [...change.hunks].reverse()) {
    // A hunk that leaves no line names the line it follows (0: the start).
    const at = hunk.new.length === 0 ? hunk.newStart : hunk.newStart - 1;
    const here = lines.slice(at, at + hunk.new.length);
    if (here.length !== hunk.new.length || here.some((l, i) => l !== hunk.new[i])) {
      return undefined;
    }
    lines.splice(at, hunk.new.length, ...hunk.old);
  }
  return lines.join("");
}

/**
 * The files an undo or a redo refused to overwrite because the user changed them since (with
 * "and N more" last when the daemon listed only some), or undefined for any other error. The
 * daemon refuses the whole operation with a `files_changed` error naming them in its data;
 * `force` overrides.
 */
export function refusedFiles(error: unknown): string[] | undefined {
  if (!(error instanceof RpcError) || error.kind !== "files_changed") {
    return undefined;
  }
  const files = [...(error.data?.files ?? [])];
  const more = error.data?.more_files ?? 0;
  if (more > 0) {
    files.push(`and ${more} more`);
  }
  return files;
}
