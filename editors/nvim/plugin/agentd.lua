-- agentd for Neovim: the `:Agentd` command and the `<Plug>` mappings. Everything else loads on
-- first use (`lua/agentd/`).
if vim.g.loaded_agentd then
  return
end
vim.g.loaded_agentd = 1

vim.api.nvim_create_user_command("Agentd", function(opts)
  require("agentd").command(opts)
end, {
  nargs = "*",
  range = true,
  desc = "agentd: coding-agent sessions (new, submit, steer, follow_up, abort, close, sessions, attach, respond, ...)",
  complete = function(arglead, cmdline)
    return require("agentd").complete(arglead, cmdline)
  end,
})

vim.api.nvim_create_user_command("AgentdUndo", function(opts)
  require("agentd").undo(tonumber(opts.args), opts.bang)
end, {
  nargs = "?",
  bang = true,
  desc = "agentd: undo the last [N] inputs, files included (! restores files you changed too)",
})
vim.api.nvim_create_user_command("AgentdRedo", function(opts)
  require("agentd").redo(opts.bang)
end, { bang = true, desc = "agentd: bring back what the last undo took away" })
vim.api.nvim_create_user_command("AgentdDiff", function()
  require("agentd").changes()
end, { desc = "agentd: what the agent changed in the files for the last input" })

local function plug(modes, name, rhs, desc)
  vim.keymap.set(modes, "<Plug>(agentd-" .. name .. ")", rhs, { desc = "agentd: " .. desc, silent = true })
end

plug("n", "new", function()
  require("agentd").new()
end, "new session in this project")
plug("n", "sessions", function()
  require("agentd").sessions()
end, "pick a session")
plug("n", "submit", function()
  require("agentd").submit()
end, "submit a prompt")
plug("x", "submit", ":Agentd submit<CR>", "submit a prompt with the selection")
plug("n", "context", function()
  require("agentd").context()
end, "submit a prompt with the current file")
plug("n", "steer", function()
  require("agentd").steer()
end, "steer")
plug("n", "follow-up", function()
  require("agentd").follow_up()
end, "queue a follow-up")
plug("n", "abort", function()
  require("agentd").abort()
end, "abort the current work")
plug("n", "queue", function()
  require("agentd").queue()
end, "show the queue")
plug("n", "diff", function()
  require("agentd").diff()
end, "show the edits as a diff")
plug("n", "respond", function()
  require("agentd").respond()
end, "answer an approval or question")
for _, decision in ipairs({ "allow", "always", "deny" }) do
  plug("n", "respond-" .. decision, function()
    require("agentd").respond(decision)
  end, decision .. " the pending approval")
end
