-- Undo, redo and the agent's changes: `:AgentdDiff` shows the edit as a diff buffer,
-- `:AgentdUndo` puts the file back and `:AgentdRedo` brings the edit again; an undo over the
-- user's own change names the file, and restores it only when the user picks "restore anyway",
-- keeping the user's version for the redo. The mock edits hello.txt ("old line" to "new line").
package.path = vim.fn.fnamemodify(arg[0], ":p:h") .. "/?.lua;" .. package.path
local H = require("helpers")

local file = H.workdir .. "/hello.txt"
local function content()
  -- nil while a restore replaces the file
  local ok, lines = pcall(vim.fn.readfile, file)
  return ok and table.concat(lines, "\n") or nil
end
local function wait_content(want)
  H.wait("hello.txt to read " .. want, function()
    return content() == want
  end)
end

vim.cmd("Agentd new undo")
local s = H.session()
vim.cmd("Agentd submit edit the file")
H.wait_event("processing_end")
H.wait_idle()
H.eq("first\nnew line\nlast", content(), "the agent's edit")

vim.cmd("AgentdDiff")
local name = "agentd://" .. s.id .. "/changes"
H.wait("the diff buffer", function()
  return vim.fn.bufnr(name) ~= -1
end)
local diff = vim.fn.bufnr(name)
H.eq("diff", vim.bo[diff].filetype, "the diff buffer's filetype")
H.contains(H.text(diff), "+++ b/hello.txt")
H.contains(H.text(diff), "-old line\n+new line")

-- A buffer showing the file follows the undo.
vim.cmd.edit(file)
local visiting = vim.api.nvim_get_current_buf()
vim.cmd("AgentdUndo")
wait_content("first\nold line\nlast")
H.wait_note("restored hello.txt")
H.wait("the buffer reloaded", function()
  return H.text(visiting) == "first\nold line\nlast"
end)
vim.cmd("AgentdRedo")
wait_content("first\nnew line\nlast")
H.wait("the redo in the transcript", function()
  return H.text(s.view.buf):find("↷ redone", 1, true) ~= nil
end)
H.contains(H.text(s.view.buf), "↶ rolled back: ")

-- The user changes the file: the undo asks, and keeping the change restores nothing.
vim.fn.writefile({ "first", "my line", "last" }, file)
local prompts, pick = {}, 2
vim.ui.select = function(items, opts, on_choice)
  prompts[#prompts + 1] = opts.prompt
  on_choice(items[pick])
end
vim.cmd("AgentdUndo")
H.wait_note("nothing was restored: you changed hello.txt")
H.eq("agentd: you changed hello.txt since the agent did", prompts[1], "the prompt names the file")
H.eq("first\nmy line\nlast", content(), "the user's change stays")
-- "restore anyway": the undo is forced, and the redo brings the user's version back.
pick = 1
vim.cmd("AgentdUndo")
wait_content("first\nold line\nlast")
H.wait_note("your versions of hello.txt are kept")
vim.cmd("AgentdRedo")
wait_content("first\nmy line\nlast")
H.done()
