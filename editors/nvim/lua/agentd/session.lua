--- The sessions this editor is attached to: each one's subscription (replayed from the start,
--- resumed with `since_seq` after a reconnect or a `lagged` end, so every event is applied
--- exactly once, in order), its state for the statusline, its pending approvals and questions,
--- its edits, and its transcript.
local conn = require("agentd.conn")
local requests = require("agentd.requests")
local transcript = require("agentd.transcript")

local M = {}

---@class agentd.Session
---@field id string
---@field state string idle, processing, awaiting_input or closed
---@field title? string
---@field cwd? string
---@field last_seq integer the newest event applied
---@field sub? string the current subscription
---@field view agentd.Transcript
---@field edits {name: string, arguments: any, status: string, call_id: string}[]
---@field pending table[] approvals and questions waiting for an answer, oldest first (the
--- event's data and its `kind`)
---@field calls table<string, table> tool calls started and not ended, by call id
---@field resumed integer how many times a `lagged` stream was resumed
---@field replay_until integer the newest seq when the session was attached: events up to it are
--- its past, whose requests are asked about only if still pending once it is all shown
---@field caught_up boolean whether the events up to `replay_until` are all shown
local Session = {}
Session.__index = Session

---@type table<string, agentd.Session>
M.all = {}

local EDIT_TOOLS = { edit_file = true, write_file = true, apply_patch = true }

--- Reloads buffers whose files an edit changed, once per burst of edits.
local checktime_queued = false
local function reload_changed_buffers()
  if checktime_queued then
    return
  end
  checktime_queued = true
  vim.schedule(function()
    checktime_queued = false
    pcall(vim.cmd.checktime)
  end)
end

---@private
function Session:subscribe()
  conn.call("session/subscribe", { session_id = self.id, since_seq = self.last_seq }, function(sub)
    self.sub = sub
  end, function(err)
    if conn.is_disconnect(err) then
      return
    end
    conn.notify(("agentd: cannot follow session %s: %s"):format(self.id, conn.describe(err)))
  end)
end

---@private
---@param ev table
function Session:apply(ev)
  local kind, d = ev.kind, ev.data or {}
  local asked
  if kind == "state_changed" then
    self.state = d.state
  elseif kind == "session_end" then
    self.state = "closed"
  elseif kind == "session_start" then
    self.title, self.cwd = d.title, d.cwd
  elseif kind == "tool_call_start" then
    self.calls[d.call_id] = { name = d.tool_name, arguments = d.arguments }
  elseif kind == "tool_call_end" then
    local call = self.calls[d.call_id]
    self.calls[d.call_id] = nil
    if call and EDIT_TOOLS[call.name] then
      self.edits[#self.edits + 1] = {
        name = call.name,
        arguments = call.arguments,
        call_id = d.call_id,
        status = d.error and ("failed: " .. d.error) or "applied",
      }
      if not d.error then
        reload_changed_buffers()
      end
    end
  elseif kind == "approval_requested" or kind == "question_requested" then
    local request = vim.tbl_extend("force", { kind = kind }, d)
    self.pending[#self.pending + 1] = request
    asked = request
  elseif kind == "approval_resolved" or kind == "question_resolved" then
    self.pending = vim.tbl_filter(function(p)
      return p.request_id ~= d.request_id
    end, self.pending)
  end
  self.view:render(ev)
  if not self.caught_up and ev.seq >= self.replay_until then
    self.caught_up = true
    for _, request in ipairs(self.pending) do
      requests.requested(self, request)
    end
  elseif asked and self.caught_up then
    requests.requested(self, asked)
  end
  conn.fire("AgentdEvent", { session_id = self.id, event = ev })
  if kind == "state_changed" or kind == "session_end" then
    conn.fire("AgentdStatus", { session_id = self.id, state = self.state })
  end
end

---@private
---@param item table
---@param subscription string?
function Session:on_item(item, subscription)
  if item.type == "event" then
    -- Replays after a reconnect may overlap what was already applied; seq says which.
    if item.seq > self.last_seq then
      self.last_seq = item.seq
      self:apply(item)
    end
    return
  end
  if self.sub ~= nil and subscription ~= self.sub then
    return
  end
  self.sub = nil
  if item.reason == "lagged" then
    self.resumed = self.resumed + 1
    self:subscribe()
  elseif item.reason == "session_closed" then
    self.state = "closed"
    conn.fire("AgentdStatus", { session_id = self.id, state = self.state })
  end
  -- daemon_shutdown: the connection drops next and the reconnection subscribes again.
end

--- Stops following the session (its buffer was unloaded or wiped).
function Session:detach()
  conn.unroute(self.id)
  M.all[self.id] = nil
  if self.sub and conn.connected() then
    conn.call("session/unsubscribe", { subscription = self.sub }, nil, function() end)
  end
end

--- The session with this id, attached (subscribed from its first event) if it was not yet.
---@param snapshot table a `session/get` or `session/create` result
---@param keymaps fun(buf: integer)
---@return agentd.Session
function M.attach(snapshot, keymaps)
  local existing = M.all[snapshot.session_id]
  if existing then
    return existing
  end
  local self = setmetatable({
    id = snapshot.session_id,
    state = snapshot.state,
    title = snapshot.title,
    cwd = snapshot.cwd,
    last_seq = 0,
    edits = {},
    pending = {},
    calls = {},
    resumed = 0,
    replay_until = snapshot.last_seq or 0,
    caught_up = false,
  }, Session)
  self.view = transcript.new(self.id, keymaps)
  M.all[self.id] = self
  conn.route(self.id, {
    on_item = function(item, subscription)
      self:on_item(item, subscription)
    end,
    resubscribe = function()
      self.sub = nil
      self:subscribe()
    end,
  })
  -- `:bdelete` unloads the buffer and its text with it: stop following until attached again.
  vim.api.nvim_create_autocmd("BufUnload", {
    buffer = self.view.buf,
    once = true,
    callback = function()
      self:detach()
    end,
  })
  self:subscribe()
  return self
end

return M
