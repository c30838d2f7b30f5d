--- Approvals and questions a session waits on: asking the user as they arrive (one prompt at a
--- time, and only for requests still pending when their turn comes) and sending the answer
--- with `session/respond`.
local config = require("agentd.config")
local conn = require("agentd.conn")

local M = {}

--- The words `:Agentd respond` takes for an approval, and the decision each sends.
M.DECISIONS = { allow = "allow", always = "allow_always", deny = "deny" }

--- Requests to ask about, oldest first: {session, request_id}.
---@type {session: agentd.Session, request_id: string}[]
local queue = {}
--- Whether a prompt is open now.
local asking = false

---@param session agentd.Session
---@param request_id string
---@return table?
local function pending(session, request_id)
  for _, p in ipairs(session.pending) do
    if p.request_id == request_id then
      return p
    end
  end
end

--- The prompt for a request: who asks, and the command, diff or question.
---@param session agentd.Session
---@param request table
---@return string
function M.describe(session, request)
  local who = session.title or session.id:sub(1, 8)
  if request.kind == "approval_requested" then
    return ("agentd (%s): allow %s?\n%s"):format(who, request.tool, request.summary or "")
  end
  return ("agentd (%s) asks: %s"):format(who, request.question)
end

--- Sends `text` as the answer: a decision word (and an optional message for the model) for an
--- approval, any text for a question.
---@param session agentd.Session
---@param request table
---@param text string
function M.answer(session, request, text)
  local params = { session_id = session.id, request_id = request.request_id }
  if request.kind == "approval_requested" then
    local word, message = text:match("^(%S+)%s*(.-)$")
    local decision = word and M.DECISIONS[word]
    if not decision then
      conn.notify(("agentd: answer an approval with allow, always or deny, not %q"):format(text))
      return
    end
    params.decision = decision
    if message ~= "" then
      params.message = message
    end
  else
    params.answer = text
  end
  conn.call("session/respond", params)
end

--- Asks the user about `request` now; `done()` runs once the prompt closes.
---@param session agentd.Session
---@param request table
---@param done? fun()
function M.ask(session, request, done)
  done = done or function() end
  local function reply(choice)
    if choice and choice ~= "" then
      M.answer(session, request, choice)
    end
    done()
  end
  local prompt = M.describe(session, request)
  if request.kind == "approval_requested" then
    vim.ui.select({ "allow", "always", "deny" }, { prompt = prompt, kind = "agentd.approval" }, reply)
  elseif request.options and #request.options > 0 then
    vim.ui.select(request.options, { prompt = prompt, kind = "agentd.question" }, reply)
  else
    vim.ui.input({ prompt = prompt .. " " }, reply)
  end
end

--- Asks about the next queued request that is still pending.
local function pump()
  if asking or #queue == 0 then
    return
  end
  local next_one = table.remove(queue, 1)
  local request = pending(next_one.session, next_one.request_id)
  if not request then
    pump()
    return
  end
  asking = true
  M.ask(next_one.session, request, function()
    asking = false
    pump()
  end)
end

--- A request is waiting (shown in the transcript already): ask about it unless `ask` is off.
---@param session agentd.Session
---@param request table
function M.requested(session, request)
  if not config.options.ask then
    return
  end
  queue[#queue + 1] = { session = session, request_id = request.request_id }
  vim.schedule(pump)
end

return M
