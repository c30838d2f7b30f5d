/** The `/name` picker's items, from a `session/commands` answer of the real daemon. */

import { strict as assert } from "node:assert";
import { test } from "node:test";
import { commandItems, startOf } from "../commands";
import type { CommandsResponse } from "../protocol";

test("skills and prompt commands become picker items that start the prompt", () => {
  const listed: CommandsResponse = {
    commands: [
      { name: "fix", kind: "prompt", description: "Fix an issue", argument_hint: "ISSUE", scope: "user", path: "/c/fix.md" },
      { name: "lint", kind: "skill", description: "Lints code.", scope: "project", path: "/w/lint/SKILL.md" },
    ],
  };
  const items = commandItems(listed);
  assert.deepEqual(items, [
    { label: "/fix", description: "command", detail: "ISSUE — Fix an issue" },
    { label: "/lint", description: "skill", detail: "Lints code." },
  ]);
  assert.equal(startOf(items[0]!), "/fix ");
  assert.deepEqual(commandItems({ commands: [] }), []);
});
