-- Approvals and a question: each prompts as it arrives (showing the command or the diff), is
-- answered from the prompt or with `:Agentd respond`, and the session goes on.
package.path = vim.fn.fnamemodify(arg[0], ":p:h") .. "/?.lua;" .. package.path
local H = require("helpers")
local agentd = require("agentd")
require("agentd").setup({
  agentctl = os.getenv("AGENTD_TEST_AGENTCTL"),
  create = { config = { approval = { mode = "ask" } } },
})

-- The prompts: the first approval is allowed from the prompt, the second dismissed (answered
-- below with :Agentd respond), the question answered with an option.
local prompts = {}
local picks = { "allow", nil, "blue" }
vim.ui.select = function(items, opts, on_choice)
  prompts[#prompts + 1] = { prompt = opts.prompt, items = items }
  on_choice(picks[#prompts])
end

vim.cmd("Agentd new approvals")
local s = H.session()
vim.cmd("Agentd submit do the things")

H.wait("the first prompt", function()
  return #prompts >= 1
end)
H.eq("agentd (approvals): allow shell?\n$ echo approved > out.txt", prompts[1].prompt, "the command in the prompt")
H.eq({ "allow", "always", "deny" }, prompts[1].items, "the choices")

H.wait("the second prompt", function()
  return #prompts >= 2
end)
H.truthy(prompts[2].prompt:find("allow write_file?\n", 1, true), "the tool in the prompt: " .. prompts[2].prompt)
H.truthy(prompts[2].prompt:find("+two", 1, true), "the diff in the prompt: " .. prompts[2].prompt)
H.wait("status awaiting_input while the approval waits", function()
  return agentd.status() == "awaiting_input"
end)
vim.cmd("Agentd respond maybe")
H.wait_note('answer an approval with allow, always or deny, not "maybe"', vim.log.levels.ERROR)
vim.cmd("Agentd respond deny not now")

H.wait("the question", function()
  return #prompts >= 3
end)
H.eq("agentd (approvals) asks: Which color?", prompts[3].prompt, "the question")
H.eq({ "red", "blue" }, prompts[3].items, "the options")

H.wait_event("processing_end")
H.wait_idle()
local text = H.text(s.view.buf)
H.contains(text, "? approval needed: shell [c1]\n  $ echo approved > out.txt")
H.contains(text, "? shell [c1] allowed by client")
H.contains(text, "? approval needed: write_file [w1]")
H.contains(text, "? write_file [w1] denied by client: not now")
H.contains(text, "? question [q1]\n  Which color?\n  options: red / blue")
H.contains(text, "? answered by client: blue")
H.eq(3, #prompts, "one prompt per request")
vim.cmd("Agentd respond allow")
H.wait_note("nothing is waiting for an answer")
H.done()
