-- The editor stops reading (the test stops it with SIGSTOP) while the session floods events:
-- the daemon drops the stream as lagged, and the plugin resumes it with since_seq, showing
-- every event once, in order.
package.path = vim.fn.fnamemodify(arg[0], ":p:h") .. "/?.lua;" .. package.path
local H = require("helpers")

vim.cmd("Agentd new")
local s = H.session()
H.wait_event("session_start")
-- Written whole, then renamed: the test reads it as soon as it exists.
vim.fn.writefile({ s.id }, H.workdir .. "/ready.tmp")
assert(vim.uv.fs_rename(H.workdir .. "/ready.tmp", H.workdir .. "/ready"))
H.wait("the flood", function()
  return vim.uv.fs_stat(H.workdir .. "/flooded") ~= nil
end)
local last = tonumber(vim.fn.readfile(H.workdir .. "/flooded")[1])
H.wait("every event up to " .. last, function()
  return s.last_seq >= last
end)
H.truthy(s.resumed >= 1, "the stream was dropped as lagged and resumed")
for i, e in ipairs(H.events) do
  H.eq(i, e.seq, "the seq of event " .. i)
end
local text = H.text(s.view.buf)
H.contains(text, "## You\ntalk a lot", 1)
H.contains(text, "## Agent\n" .. string.rep("w", 6000, " ") .. "\n", 1)
H.done()
