-- Nothing answers on the socket: the first command starts agentd through agentctl, and the
-- session works.
package.path = vim.fn.fnamemodify(arg[0], ":p:h") .. "/?.lua;" .. package.path
local H = require("helpers")
local conn = require("agentd.conn")

H.eq(false, conn.connected(), "no connection before the first command")
vim.cmd("Agentd new")
local s = H.session()
vim.cmd("Agentd submit hi")
H.wait_event("processing_end")
H.contains(H.text(s.view.buf), "## Agent\nHello.")
local info, err = conn.call_sync("daemon/info", {}, 30000)
H.truthy(info, "daemon/info: " .. tostring(err))
H.out("pid=" .. info.pid)
H.done()
