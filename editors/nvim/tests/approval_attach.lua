-- Attaching to a session that already waits for an approval: its past replays without
-- prompting for the approval answered long ago, then the one still pending prompts, once.
package.path = vim.fn.fnamemodify(arg[0], ":p:h") .. "/?.lua;" .. package.path
local H = require("helpers")
local id = os.getenv("AGENTD_TEST_SESSION") or H.fail("AGENTD_TEST_SESSION is not set")

local prompts = {}
vim.ui.select = function(_, opts, on_choice)
  prompts[#prompts + 1] = opts.prompt
  on_choice("deny")
end

vim.cmd("Agentd attach " .. id)
H.wait("the prompt", function()
  return #prompts >= 1
end)
H.eq("agentd (waiting): allow shell?\n$ echo two > two.txt", prompts[1], "the pending approval")
H.wait_event("processing_end")
H.wait_idle()
H.eq(1, #prompts, "one prompt")
local text = H.text(require("agentd").current_session().view.buf)
H.contains(text, "? shell [c1] allowed by client")
H.contains(text, "? shell [c2] denied by client")
H.done()
