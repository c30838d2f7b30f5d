-- A small harness for the headless tests (`nvim --headless -u NONE -l tests/<name>.lua`, run by
-- tests/tests/e2e/editor_nvim.rs against a real daemon): the plugin on the runtimepath,
-- notifications and events recorded, waits bounded by the same 30 s guard as the Rust tests,
-- and a failure that exits non-zero with the reason.
local H = {}

H.root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h")
vim.opt.rtp:prepend(H.root)
vim.cmd.runtime("plugin/agentd.lua")

--- Every notification: {msg, level}.
H.notes = {}
vim.notify = function(msg, level)
  H.notes[#H.notes + 1] = { msg = msg, level = level or vim.log.levels.INFO }
  io.stderr:write(("notify[%s]: %s\n"):format(level or "-", msg))
end

--- Every event the plugin applied, in order, as `User AgentdEvent` announced them.
H.events = {}
vim.api.nvim_create_autocmd("User", {
  pattern = "AgentdEvent",
  callback = function(args)
    H.events[#H.events + 1] = args.data.event
  end,
})

--- Every state `User AgentdStatus` announced.
H.states = {}
vim.api.nvim_create_autocmd("User", {
  pattern = "AgentdStatus",
  callback = function()
    H.states[#H.states + 1] = require("agentd").status()
  end,
})

function H.fail(msg)
  io.stderr:write("FAIL: " .. msg .. "\n")
  io.stderr:flush()
  os.exit(1)
end

--- Waits for `cond()`; the bound only guards against a hang.
function H.wait(what, cond)
  if not vim.wait(30000, cond, 10) then
    H.fail("timed out waiting for " .. what)
  end
end

function H.eq(want, got, what)
  if not vim.deep_equal(want, got) then
    H.fail(("%s: want %s, got %s"):format(what, vim.inspect(want), vim.inspect(got)))
  end
end

function H.truthy(v, what)
  if not v then
    H.fail(what)
  end
  return v
end

--- The events of `kind` applied so far (of the session `id`, if given).
function H.of_kind(kind, id)
  return vim.tbl_filter(function(e)
    return e.kind == kind and (id == nil or e.session_id == id)
  end, H.events)
end

--- Waits for the `n`th event of `kind` (default: the first).
function H.wait_event(kind, n, id)
  H.wait(("event %s #%d"):format(kind, n or 1), function()
    return #H.of_kind(kind, id) >= (n or 1)
  end)
  return H.of_kind(kind, id)[n or 1]
end

--- Waits for the current session to be idle (its `state_changed` follows `processing_end`).
function H.wait_idle()
  H.wait("status idle", function()
    return require("agentd").status() == "idle"
  end)
end

--- The current session, once there is one.
function H.session()
  H.wait("a current session", function()
    return require("agentd").current_session() ~= nil
  end)
  return require("agentd").current_session()
end

function H.lines(buf)
  return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end

function H.text(buf)
  return table.concat(H.lines(buf), "\n")
end

--- Asserts that `text` contains `needle` (plain) `times` times (default: at least once).
function H.contains(text, needle, times)
  local n, from = 0, 1
  while true do
    local s, e = text:find(needle, from, true)
    if not s then
      break
    end
    n, from = n + 1, e + 1
  end
  if (times and n ~= times) or (not times and n == 0) then
    H.fail(("expected %s %q in:\n%s"):format(times and (times .. " times") or "", needle, text))
  end
end

--- The first notification at `level` whose message contains `needle`.
function H.note(needle, level)
  for _, n in ipairs(H.notes) do
    if n.msg:find(needle, 1, true) and (level == nil or n.level == level) then
      return n
    end
  end
end

function H.wait_note(needle, level)
  H.wait("a notification with " .. needle, function()
    return H.note(needle, level) ~= nil
  end)
  return H.note(needle, level)
end

--- Errors reach the user as notifications without a Lua stack trace.
function H.no_stack_traces()
  for _, n in ipairs(H.notes) do
    if n.msg:find("stack traceback", 1, true) or n.msg:find("%.lua:%d+:") then
      H.fail("a notification shows a Lua error: " .. n.msg)
    end
  end
end

--- Writes a line to stdout, for the Rust side (`print` goes to stderr under `-l`).
function H.out(line)
  io.stdout:write(line, "\n")
  io.stdout:flush()
end

function H.done()
  H.no_stack_traces()
  H.out("nvim test passed")
  os.exit(0)
end

--- The workdir the Rust test made for this scenario.
H.workdir = os.getenv("AGENTD_TEST_WORKDIR") or H.fail("AGENTD_TEST_WORKDIR is not set")
vim.cmd.cd(H.workdir)
require("agentd").setup({ agentctl = os.getenv("AGENTD_TEST_AGENTCTL") or "agentctl" })

return H
