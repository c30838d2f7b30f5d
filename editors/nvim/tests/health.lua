-- `:checkhealth agentd` against a running daemon and against a socket nothing answers; the
-- help file's tags build without error and `:help` finds them.
package.path = vim.fn.fnamemodify(arg[0], ":p:h") .. "/?.lua;" .. package.path
local H = require("helpers")

local function checkhealth()
  vim.cmd("checkhealth agentd")
  local text = H.text(0)
  vim.cmd("bwipeout!")
  return text
end

local ok = checkhealth()
H.contains(ok, "Neovim " .. tostring(vim.version()) .. " (0.10 or newer)")
H.contains(ok, "OK agentd ")
H.contains(ok, "provider anthropic (anthropic)")
H.contains(ok, "OK " .. os.getenv("AGENTD_TEST_AGENTCTL") .. ": agentctl ")
if ok:find("ERROR", 1, true) or ok:find("WARNING", 1, true) then
  H.fail("the check reports a problem:\n" .. ok)
end

require("agentd").setup({
  agentctl = os.getenv("AGENTD_TEST_AGENTCTL"),
  socket = H.workdir .. "/nothing.sock",
  autostart = false,
})
local down = checkhealth()
H.contains(down, "ERROR agentd does not answer and auto-start is off: cannot reach agentd at " .. H.workdir .. "/nothing.sock")

-- The help file: tags generated without error (duplicates and bad tags fail here), and found.
local dir = vim.fn.tempname()
vim.fn.mkdir(dir .. "/doc", "p")
vim.fn.writefile(vim.fn.readfile(H.root .. "/doc/agentd.txt"), dir .. "/doc/agentd.txt")
local built, err = pcall(vim.cmd.helptags, dir .. "/doc")
H.truthy(built, "helptags failed: " .. tostring(err))
H.eq("", vim.v.errmsg, "no error message from helptags")
local tags = table.concat(vim.fn.readfile(dir .. "/doc/tags"), "\n")
for _, tag in ipairs({ "agentd.txt", ":Agentd", ":Agentd-respond", "agentd.status()", "<Plug>(agentd-abort)", "agentd-transcript" }) do
  H.contains(tags, tag .. "\tagentd.txt\t")
end
vim.opt.rtp:prepend(dir)
local found, help_err = pcall(vim.cmd.help, ":Agentd-attach")
H.truthy(found, "help :Agentd-attach: " .. tostring(help_err))
H.truthy(vim.api.nvim_buf_get_name(0):find("agentd.txt$"), "help opened agentd.txt")
H.done()
