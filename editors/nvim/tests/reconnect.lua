-- The daemon restarts under an attached session; the plugin reconnects by itself and resumes
-- with since_seq: every event exactly once, in order, including those emitted while it was
-- away (another client's input), and the session takes input again.
package.path = vim.fn.fnamemodify(arg[0], ":p:h") .. "/?.lua;" .. package.path
local H = require("helpers")
local agentd = require("agentd")

vim.cmd("Agentd new")
local s = H.session()
H.out("session=" .. s.id)
vim.cmd("Agentd submit first")
H.wait_event("processing_end", 1)

-- The test restarts the daemon, then submits `second` from its own client.
vim.fn.writefile({}, H.workdir .. "/restart-now")
H.wait_note("connection lost", vim.log.levels.WARN)
H.wait("status disconnected", function()
  return vim.tbl_contains(H.states, "disconnected")
end)
H.wait_note("reconnected", vim.log.levels.INFO)
H.wait("the other client's input", function()
  return vim.uv.fs_stat(H.workdir .. "/submitted") ~= nil
end)
H.wait_event("processing_end", 2)

vim.cmd("Agentd submit third")
H.wait_event("processing_end", 3)
H.wait_idle()

local text = H.text(s.view.buf)
for _, needle in ipairs({ "## You\nfirst", "## You\nsecond", "## You\nthird", "One.", "Two.", "Three." }) do
  H.contains(text, needle, 1)
end
H.contains(text, "# agentd session", 1)
local seqs = {}
for i, e in ipairs(H.events) do
  seqs[i] = e.seq
  H.eq(i, e.seq, "the seq of event " .. i)
end
H.out("seqs=" .. table.concat(seqs, ","))
H.done()
