-- The client's NDJSON framing: a message split anywhere across reads, several in one read,
-- blank lines, and a line past the cap (which drops the connection instead of buffering).
package.path = vim.fn.fnamemodify(arg[0], ":p:h") .. "/?.lua;" .. package.path
local H = require("helpers")
local Client = require("agentd.client")

local function fresh()
  return setmetatable({ chunks = {}, buffered = 0 }, Client)
end

local one = '{"jsonrpc":"2.0","method":"session/event","params":{"result":{"delta":"é\\n"}}}'
local two = '{"jsonrpc":"2.0","id":7,"result":true}'
local stream = one .. "\n\n" .. two .. "\n"
-- Every split into two reads, and one byte per read.
for cut = 0, #stream do
  local c = fresh()
  local lines = c:split(stream:sub(1, cut))
  vim.list_extend(lines, c:split(stream:sub(cut + 1)))
  H.eq({ one, two }, lines, "split at " .. cut)
end
local c, lines = fresh(), {}
for i = 1, #stream do
  vim.list_extend(lines, c:split(stream:sub(i, i)))
end
H.eq({ one, two }, lines, "one byte per read")
H.eq(0, c.buffered, "nothing left over")

-- Past the cap: nil, not an ever-growing buffer.
local big = fresh()
local piece = string.rep("x", 1024 * 1024)
local result = {}
for _ = 1, 81 do
  result = big:split(piece)
  if result == nil then
    break
  end
end
H.eq(nil, result, "a line past the cap")
H.done()
