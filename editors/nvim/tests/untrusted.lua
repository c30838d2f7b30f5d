-- agentctl refuses the socket (a runtime directory others can reach, or another user's process
-- serving it): the first command shows agentctl's reason and no connection is made. The Rust side
-- sets the case up and names what the refusal must say (AGENTD_TEST_EXPECT), and the socket
-- option when the case sets one (AGENTD_TEST_SOCKET).
package.path = vim.fn.fnamemodify(arg[0], ":p:h") .. "/?.lua;" .. package.path
local H = require("helpers")
local conn = require("agentd.conn")

local expect = os.getenv("AGENTD_TEST_EXPECT") or H.fail("AGENTD_TEST_EXPECT is not set")
local socket = os.getenv("AGENTD_TEST_SOCKET")
if socket then
  require("agentd").setup({ agentctl = os.getenv("AGENTD_TEST_AGENTCTL"), socket = socket })
end
vim.cmd("Agentd new")
H.wait_note(expect, vim.log.levels.ERROR)
H.eq(false, conn.connected(), "no connection")
H.done()
