/**
 * `session/diff`'s unified diff split by file and worked back to the content before, as the
 * Show Changes view does; the daemon's own diffs are checked in daemon.test.ts.
 */

import { strict as assert } from "node:assert";
import { test } from "node:test";
import { contentBefore, parseDiff, refusedFiles } from "../changes";
import { RpcError } from "../client";

const DIFF = [
  "diff --git a/src/a.txt b/src/a.txt",
  "--- a/src/a.txt",
  "+++ b/src/a.txt",
  "@@ -1,4 +1,4 @@",
  " one",
  "-two",
  "+TWO",
  " three",
  " four",
  "@@ -9,2 +9,1 @@",
  " nine",
  "-ten",
  "diff --git a/new.txt b/new.txt",
  "new file mode 100644",
  "--- /dev/null",
  "+++ b/new.txt",
  "@@ -0,0 +1,1 @@",
  "+fresh",
  "\\ No newline at end of file",
  "diff --git a/gone.txt b/gone.txt",
  "deleted file mode 100644",
  "--- a/gone.txt",
  "+++ /dev/null",
  "@@ -1,2 +0,0 @@",
  "-old",
  "-lines",
  "diff --git a/logo.png b/logo.png",
  "Binary files a/logo.png and b/logo.png differ",
  "",
].join("\n");

test("a diff splits by file, and each is worked back to its content before", () => {
  const files = parseDiff(DIFF);
  assert.deepEqual(
    files.map((f) => [f.path, f.status, f.opaque]),
    [
      ["src/a.txt", "modified", false],
      ["new.txt", "added", false],
      ["gone.txt", "deleted", false],
      ["logo.png", "modified", true],
    ],
  );
  const [a, added, gone, binary] = files;
  const after = "one\nTWO\nthree\nfour\n5\n6\n7\n8\nnine\n";
  assert.equal(contentBefore(a!, after), "one\ntwo\nthree\nfour\n5\n6\n7\n8\nnine\nten\n");
  assert.equal(contentBefore(added!, "fresh"), "");
  assert.equal(contentBefore(gone!, ""), "old\nlines\n");
  assert.equal(contentBefore(binary!, "x"), undefined);
});

test("a file changed since the agent's change is not worked back", () => {
  const [a] = parseDiff(DIFF);
  assert.equal(contentBefore(a!, "one\nTwo (the user's)\nthree\nfour\n5\n6\n7\n8\nnine\n"), undefined);
  assert.equal(contentBefore(a!, "one\n"), undefined);
});

test("an undo refused over the user's changes names the files from its data; other errors name none", () => {
  const message = "files changed since the agent changed them (kept as they are; nothing was restored): src/a.txt, b, c.txt; pass force";
  const refusal = new RpcError("session/rollback", -32016, message, { kind: "files_changed", retryable: false, files: ["src/a.txt", "b, c.txt"] });
  assert.deepEqual(refusedFiles(refusal), ["src/a.txt", "b, c.txt"]);
  const many = new RpcError("session/redo", -32016, message, { kind: "files_changed", retryable: false, files: ["a"], more_files: 7 });
  assert.deepEqual(refusedFiles(many), ["a", "and 7 more"]);
  assert.equal(refusedFiles(new RpcError("session/rollback", -32011, "session busy", { kind: "session_busy", retryable: false })), undefined);
  // The message alone is not enough: a daemon error without the kind names no files.
  assert.equal(refusedFiles(new RpcError("session/rollback", -32602, message, undefined)), undefined);
  assert.equal(refusedFiles(new Error(message)), undefined);
});
