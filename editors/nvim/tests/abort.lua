-- Abort with one key: the transcript's <C-c> is mapped, and <Plug>(agentd-abort) stops the
-- work; the command's process is gone and the session is idle.
package.path = vim.fn.fnamemodify(arg[0], ":p:h") .. "/?.lua;" .. package.path
local H = require("helpers")
local agentd = require("agentd")

vim.cmd("Agentd new")
local s = H.session()
local buf = s.view.buf
local ctrl_c = vim.api.nvim_buf_call(buf, function()
  return vim.fn.maparg("<C-c>", "n", false, true)
end)
H.eq("agentd: abort the current work", ctrl_c.desc, "<C-c> in the transcript")

vim.cmd("Agentd submit sleep for a long time")
local pid
H.wait("the command's pid", function()
  for _, e in ipairs(H.of_kind("tool_call_output_delta")) do
    pid = pid or tonumber(e.data.delta:match("PID=(%d+)"))
  end
  return pid ~= nil
end)
H.out("pid=" .. pid)

--- Whether `pid` runs (a zombie has finished all the same).
local function running(p)
  local stat = io.open("/proc/" .. p .. "/stat")
  if not stat then
    return false
  end
  local text = stat:read("*a")
  stat:close()
  return text:match("%) (%a)") ~= "Z"
end
H.truthy(running(pid), "the command runs before the abort")
vim.cmd("Agentd follow_up later")
H.wait_note("queued as a follow-up")

vim.keymap.set("n", "<F2>", "<Plug>(agentd-abort)")
vim.api.nvim_feedkeys(vim.keycode("<F2>"), "x", false)
local ended = H.wait_event("processing_end")
H.eq("aborted", ended.data.reason, "processing_end reason")
H.wait("the command's process to be gone", function()
  return not running(pid)
end)
H.wait("status idle", function()
  return agentd.status() == "idle"
end)
H.contains(H.text(buf), "── aborted ──")
H.contains(H.text(buf), "✗ failed")
H.contains(H.text(buf), "  │ PID=" .. pid .. "\n  │ error: [Command aborted by the user.]\n")

-- The follow-up stayed queued: listed, then cleared.
H.wait_note("1 queued item(s) kept")
vim.cmd("Agentd queue clear")
H.wait_note("agentd: removed from the queue:\nfollow-up: later")
vim.cmd("Agentd queue")
H.wait_note("agentd queue:\n(empty)")

-- An error from the provider is shown in the transcript.
vim.cmd("Agentd submit again")
local failed = H.wait_event("processing_end", 2)
H.eq("error", failed.data.reason, "processing_end reason")
H.contains(H.text(buf), "✗ fatal error: Anthropic API error 401 authentication_error: invalid x-api-key")
H.done()
