/**
 * The items of the prompt box's `/name` picker: the session's skills and prompt commands, as
 * `session/commands` lists them. No `vscode` import, so it is tested under Node.
 */

import type { CommandsResponse } from "./protocol";

/** One pick: what it inserts, and how it is shown. */
export interface CommandItem {
  label: string;
  description: string;
  detail?: string;
}

/** The picker's items, in the daemon's order (prompt commands, then skills). */
export function commandItems(listed: CommandsResponse): CommandItem[] {
  return listed.commands.map((c) => {
    const item: CommandItem = { label: `/${c.name}`, description: c.kind === "skill" ? "skill" : "command" };
    const detail = c.argument_hint ? `${c.argument_hint} — ${c.description}` : c.description;
    if (detail) {
      item.detail = detail;
    }
    return item;
  });
}

/** The text a picked item starts the prompt with: `/name ` (then the arguments). */
export function startOf(item: CommandItem): string {
  return `${item.label} `;
}
