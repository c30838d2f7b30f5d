-- Steer and queue a follow-up while the session works; the queue shows both; the steering
-- reaches the model after the tool round and the follow-up runs after the input.
package.path = vim.fn.fnamemodify(arg[0], ":p:h") .. "/?.lua;" .. package.path
local H = require("helpers")
local agentd = require("agentd")

vim.cmd("Agentd new")
local s = H.session()
vim.cmd("Agentd submit start working")
-- The mock's first answer runs a command that waits for the file `go`.
H.wait_event("tool_call_start")
H.eq("processing", agentd.status(), "status while working")
vim.cmd("Agentd steer focus on the tests")
vim.cmd("Agentd follow_up then write the docs")
H.wait_note("queued as a follow-up")
H.wait("both queued", function()
  for _, e in ipairs(H.of_kind("queue_changed")) do
    local q = e.data.queue
    if #q.steering == 1 and #q.follow_up == 1 then
      return true
    end
  end
end)
vim.cmd("Agentd queue")
H.wait_note("steering: focus on the tests\nfollow-up: then write the docs")
vim.fn.writefile({}, H.workdir .. "/go")

H.wait_event("processing_end")
local text = H.text(s.view.buf)
H.contains(text, "## You\nstart working")
H.contains(text, "  │ released")
H.contains(text, "## You (steering)\nfocus on the tests")
H.contains(text, "## Agent\nSteered.")
H.contains(text, "## You\nthen write the docs")
H.contains(text, "## Agent\nDocs written.")
H.eq(1, #H.of_kind("processing_end"), "one processing cycle")
H.wait_idle()
H.done()
