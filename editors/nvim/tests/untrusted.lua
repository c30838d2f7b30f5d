-- A socket whose directory other users can reach, or that is not the user's own, is refused
-- before anything is sent (Neovim cannot ask the kernel who listens there): the first command
-- says why and no connection is made. The Rust side sets the case up and names what the refusal
-- must say (AGENTD_TEST_EXPECT).
package.path = vim.fn.fnamemodify(arg[0], ":p:h") .. "/?.lua;" .. package.path
local H = require("helpers")
local conn = require("agentd.conn")

local expect = os.getenv("AGENTD_TEST_EXPECT") or H.fail("AGENTD_TEST_EXPECT is not set")
vim.cmd("Agentd new")
local note = H.wait_note("refusing to use " .. os.getenv("AGENTD_SOCKET"))
H.contains(note.msg, expect)
H.eq(false, conn.connected(), "no connection")
H.done()
