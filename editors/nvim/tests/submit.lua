-- Create a session, submit with tool round trips (a shell call, a long output, an edit), and
-- check the transcript, the folds, the diff and the status. Daemon errors are notifications.
package.path = vim.fn.fnamemodify(arg[0], ":p:h") .. "/?.lua;" .. package.path
local H = require("helpers")
local agentd = require("agentd")

-- Errors before anything exists: said plainly, no stack trace.
vim.cmd("Agentd submit hello")
H.wait_note("no session yet", vim.log.levels.ERROR)
vim.cmd("Agentd frobnicate")
H.wait_note('unknown subcommand "frobnicate"', vim.log.levels.ERROR)
vim.cmd("Agentd attach not-a-session")
H.wait_note("session not-a-session not found", vim.log.levels.ERROR)
H.eq("", agentd.status(), "status without a session")

-- MCP servers from the `create` params: one that cannot start, and mcp-server-time when the
-- harness gives its path (always under CI). They start with the first input.
local servers = { missing = { command = "agentd-no-such-mcp-server" } }
local time = os.getenv("AGENTD_TEST_MCP_TIME")
if time then
  servers.time = { command = time, args = { "--local-timezone", "UTC" } }
end
agentd.setup({ agentctl = os.getenv("AGENTD_TEST_AGENTCTL"), create = { config = { mcp_servers = servers } } })

vim.cmd("Agentd new nvim submit test")
local s = H.session()
local buf = s.view.buf
H.eq("agentd://" .. s.id, vim.api.nvim_buf_get_name(buf), "transcript buffer name")
H.truthy(#vim.fn.win_findbuf(buf) > 0, "the transcript is shown in a window")
H.out("session=" .. s.id)

vim.cmd("Agentd submit look around")
H.wait_event("processing_end")
H.wait_idle()
H.truthy(vim.tbl_contains(H.states, "processing"), "the status went through processing: " .. vim.inspect(H.states))

local text = H.text(buf)
H.contains(text, "# nvim submit test  (" .. s.id .. ")")
H.contains(text, "## You\nlook around")
H.contains(text, "⚙ shell [t1] ✓ done in")
H.contains(text, "  $ echo hi-from-tool")
H.contains(text, "  │ hi-from-tool")
H.contains(text, "⚙ shell [t2] ✓ done in")
H.contains(text, "  ┃ 30\n· usage")
H.contains(text, "⚙ edit_file [t3] ✓ done in")
H.contains(text, "  --- a/notes.txt")
H.contains(text, "  -beta")
H.contains(text, "  +gamma")
H.contains(text, "## Agent\n  ┆ reasoning\n  ┆ Considering the files.\n  ┆ Second thought.\nLet me look.")
H.contains(text, "## Agent\nAll done here.")
H.contains(text, "· usage: in 100 out 20 cached 50 · session in")
H.contains(text, "── completed ──")
H.contains(text, "## You", 1)
H.contains(text, "! MCP server missing: failed (cannot start agentd-no-such-mcp-server")
if time then
  H.contains(text, "· MCP server time: ready, 2 tools")
end
H.truthy(not text:find(": starting", 1, true), "a starting server is not shown")

-- The long output is folded; the short one is not.
local win = vim.fn.win_findbuf(buf)[1]
local long, short, reasoning
for i, l in ipairs(H.lines(buf)) do
  if l == "  ┆ Second thought." then
    reasoning = i
  elseif l == "  ┃ 15" then
    long = i
  elseif l == "  │ hi-from-tool" then
    short = i
  end
end
vim.api.nvim_win_call(win, function()
  H.truthy(vim.fn.foldclosed(reasoning) ~= -1, "the reasoning is folded")
  H.truthy(vim.fn.foldclosed(long) ~= -1, "the long output is folded")
  H.eq(-1, vim.fn.foldclosed(short), "the short output is not folded")
end)

-- The edits as a diff.
vim.api.nvim_set_current_win(win)
vim.cmd("Agentd diff")
local diff_buf = vim.api.nvim_get_current_buf()
H.eq("agentd://" .. s.id .. "/diff", vim.api.nvim_buf_get_name(diff_buf), "diff buffer name")
H.eq("diff", vim.bo[diff_buf].filetype, "diff filetype")
H.contains(H.text(diff_buf), "# edit_file (applied)\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-beta\n+gamma")

-- The queue is empty and says so; closing ends the session.
vim.api.nvim_set_current_win(win)
vim.cmd("Agentd queue")
H.wait_note("agentd queue:\n(empty)")
vim.cmd("Agentd close")
H.wait_event("session_end")
H.wait("status closed", function()
  return agentd.status() == "closed"
end)
H.contains(H.text(buf), "── session closed")
vim.cmd("Agentd submit more")
H.wait_note("is closed", vim.log.levels.ERROR)
H.done()
