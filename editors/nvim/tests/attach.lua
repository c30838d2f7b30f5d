-- Attach to a session agentctl started: pick it from the list (title, state, directory),
-- see its past, complete its id, continue it, and fork it.
package.path = vim.fn.fnamemodify(arg[0], ":p:h") .. "/?.lua;" .. package.path
local H = require("helpers")
local agentd = require("agentd")
local id = os.getenv("AGENTD_TEST_SESSION") or H.fail("AGENTD_TEST_SESSION is not set")

local shown
vim.ui.select = function(items, opts, on_choice)
  shown = vim.tbl_map(opts.format_item, items)
  for _, item in ipairs(items) do
    if item.session_id == id then
      on_choice(item)
      return
    end
  end
  H.fail("the session is not in the list: " .. vim.inspect(shown))
end
vim.cmd("Agentd sessions")
local s = H.session()
H.eq(id, s.id, "the attached session")
H.truthy(shown[1]:find("from agentctl  [idle]  ", 1, true), "the list shows title and state: " .. shown[1])
H.truthy(shown[1]:find(vim.fn.fnamemodify(H.workdir, ":~"), 1, true), "the list shows the directory: " .. shown[1])

H.wait_event("processing_end")
local text = H.text(s.view.buf)
H.contains(text, "## You\nhello from agentctl")
H.contains(text, "## Agent\nReply to agentctl.")

local completions = vim.fn.getcompletion("Agentd attach ", "cmdline")
H.truthy(vim.tbl_contains(completions, id), "completion offers the id: " .. vim.inspect(completions))
H.eq({ "sessions", "steer", "submit" }, vim.fn.getcompletion("Agentd s", "cmdline"), "subcommands")
H.eq({ "allow", "always" }, vim.fn.getcompletion("Agentd respond al", "cmdline"), "decisions")

-- The selected lines of a file go with the prompt; `context` sends the whole file.
vim.fn.writefile({ "local x = 1", "local y = 2", "return x + y" }, H.workdir .. "/ctx.lua")
vim.cmd.edit(H.workdir .. "/ctx.lua")
vim.cmd("1,2Agentd submit second question")
H.wait_event("processing_end", 2)
H.contains(H.text(s.view.buf), "## You\nsecond question\n\nctx.lua lines 1-2:\n```lua\nlocal x = 1\nlocal y = 2\n```")
H.contains(H.text(s.view.buf), "## Agent\nSecond reply.")
vim.cmd("Agentd context third question")
H.wait_event("processing_end", 3)
H.contains(H.text(s.view.buf), "## You\nthird question\n\nctx.lua:\n```lua\nlocal x = 1\nlocal y = 2\nreturn x + y\n```")
vim.cmd.buffer(s.view.buf)

-- Deleting the transcript stops following; attaching again replays it whole.
vim.cmd("bdelete! " .. s.view.buf)
H.eq(nil, agentd.current_session(), "no session followed after :bdelete")
local before = #H.of_kind("user_input", id)
vim.cmd("Agentd attach " .. id)
H.wait("the replay", function()
  return #H.of_kind("user_input", id) == 2 * before
end)
s = agentd.current_session()
H.contains(H.text(s.view.buf), "## You\nhello from agentctl", 1)
H.contains(H.text(s.view.buf), "## Agent\nSecond reply.", 1)

vim.cmd("Agentd fork")
H.wait("the fork", function()
  local c = agentd.current_session()
  return c ~= nil and c.id ~= id
end)
local fork = agentd.current_session()
H.out("fork=" .. fork.id)
H.wait_event("session_start", 1, fork.id)
H.done()
