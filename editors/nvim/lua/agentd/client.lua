--- One JSON-RPC 2.0 connection to agentd over its Unix socket: newline-delimited JSON framing
--- (robust to messages split across reads), request ids with their callbacks, and
--- notifications handed to the owner. It knows nothing of sessions; `agentd.conn` does.
local uv = vim.uv or vim.loop

---@class agentd.RpcError
---@field code integer
---@field message string
---@field data? {kind?: string, retryable?: boolean, session_id?: string}

---@class agentd.Client
---@field private pipe uv.uv_pipe_t
---@field private next_id integer
---@field private pending table<integer, fun(err: agentd.RpcError?, result: any)>
---@field private chunks string[] the unfinished line, in pieces
---@field private buffered integer bytes in `chunks`
---@field private on_notification fun(method: string, params: table)
---@field private on_close fun(reason: string, client: agentd.Client)
---@field closed boolean
---@field path string the socket
local Client = {}
Client.__index = Client

--- The largest line accepted from the daemon: its own cap on a response (64 MiB) plus room for
--- the envelope. A longer line means a broken peer; the connection is dropped rather than
--- buffering without end.
local MAX_LINE = 80 * 1024 * 1024

--- Connects to `path` (which `agentctl socket-path` checked); `cb(err, client)` runs on the
--- main loop.
---@param path string
---@param handlers {on_notification: fun(method: string, params: table), on_close: fun(reason: string, client: agentd.Client)}
---@param cb fun(err: string?, client: agentd.Client?)
function Client.connect(path, handlers, cb)
  local pipe = assert(uv.new_pipe(false))
  pipe:connect(path, function(err)
    vim.schedule(function()
      if err then
        pipe:close()
        cb(err)
        return
      end
      local self = setmetatable({
        pipe = pipe,
        next_id = 1,
        pending = {},
        chunks = {},
        buffered = 0,
        on_notification = handlers.on_notification,
        on_close = handlers.on_close,
        closed = false,
        path = path,
      }, Client)
      self:start_reading()
      cb(nil, self)
    end)
  end)
end

---@private
function Client:start_reading()
  self.pipe:read_start(function(err, data)
    if err or not data then
      vim.schedule(function()
        self:shutdown(err and ("read failed: " .. err) or "the daemon closed the connection")
      end)
      return
    end
    local lines = self:split(data)
    if lines == nil then
      vim.schedule(function()
        self:shutdown("a message from the daemon exceeded " .. MAX_LINE .. " bytes")
      end)
    elseif #lines > 0 then
      vim.schedule(function()
        for _, line in ipairs(lines) do
          self:dispatch(line)
        end
      end)
    end
  end)
end

--- Adds `data` to the unfinished line and returns the lines it completes (nil past the cap).
--- Only the new data is searched for line ends, so a long line read in small pieces costs
--- linear time.
---@private
---@param data string
---@return string[]?
function Client:split(data)
  local lines = {}
  local start = 1
  while true do
    local nl = data:find("\n", start, true)
    if not nl then
      break
    end
    self.chunks[#self.chunks + 1] = data:sub(start, nl - 1)
    local line = table.concat(self.chunks)
    self.chunks, self.buffered = {}, 0
    if line:find("%S") then
      lines[#lines + 1] = line
    end
    start = nl + 1
  end
  if start <= #data then
    self.chunks[#self.chunks + 1] = data:sub(start)
    self.buffered = self.buffered + #data - start + 1
    if self.buffered > MAX_LINE then
      return nil
    end
  end
  return lines
end

---@private
---@param line string
function Client:dispatch(line)
  if self.closed then
    return
  end
  local ok, msg = pcall(vim.json.decode, line, { luanil = { object = true, array = true } })
  if not ok or type(msg) ~= "table" then
    vim.notify("agentd: ignored a message that is not JSON: " .. line:sub(1, 200), vim.log.levels.WARN)
    return
  end
  local handled, err
  if msg.method then
    handled, err = pcall(self.on_notification, msg.method, msg.params or {})
  else
    local cb = msg.id and self.pending[msg.id]
    if not cb then
      return
    end
    self.pending[msg.id] = nil
    if msg.error then
      handled, err = pcall(cb, msg.error, nil)
    else
      handled, err = pcall(cb, nil, msg.result)
    end
  end
  -- A bug in a view must not show the user a stack trace, nor stop the messages after it.
  if not handled then
    vim.notify("agentd: failed to handle a message from the daemon: " .. tostring(err), vim.log.levels.ERROR)
  end
end

--- Sends a request; `cb(err, result)` runs on the main loop with the result or the error object
--- (a lost connection is an error too, so every callback runs exactly once).
---@param method string
---@param params table
---@param cb fun(err: agentd.RpcError?, result: any)
function Client:request(method, params, cb)
  if self.closed then
    cb({ code = -1, message = "not connected to agentd" }, nil)
    return
  end
  local id = self.next_id
  self.next_id = id + 1
  self.pending[id] = cb
  if next(params) == nil then
    params = vim.empty_dict()
  end
  local line = vim.json.encode({ jsonrpc = "2.0", id = id, method = method, params = params }) .. "\n"
  self.pipe:write(line, function(err)
    if err then
      vim.schedule(function()
        self:shutdown("write failed: " .. err)
      end)
    end
  end)
end

--- Closes the connection and fails the requests still waiting; `on_close(reason, self)` runs
--- once.
---@param reason string
function Client:shutdown(reason)
  if self.closed then
    return
  end
  self.closed = true
  if not self.pipe:is_closing() then
    self.pipe:read_stop()
    self.pipe:close()
  end
  local pending = self.pending
  self.pending = {}
  for _, cb in pairs(pending) do
    cb({ code = -1, message = "connection to agentd lost: " .. reason }, nil)
  end
  self.on_close(reason, self)
end

return Client
