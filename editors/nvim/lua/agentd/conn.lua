--- The plugin's one connection to the daemon: connecting on first use (starting agentd through
--- agentctl when nothing answers), reconnecting after the daemon goes away, routing
--- `session/event` notifications to the session that owns them, and showing daemon errors with
--- vim.notify.
local Client = require("agentd.client")
local config = require("agentd.config")

local M = {}

---@type agentd.Client?
local client = nil
--- Callbacks waiting for the connection being made, or nil when none is being made.
---@type (fun(err: string?, client: agentd.Client?))[]?
local waiting = nil
--- Per session: what to do with its stream items, and how to subscribe again after a reconnect.
---@type table<string, {on_item: fun(item: table, subscription: string?), resubscribe: fun()}>
local routes = {}
--- Set while a reconnection loop runs.
local reconnecting = false

--- The open connection, if it goes to the configured socket; one to another socket (the
--- option changed) is closed.
---@return agentd.Client?
local function live()
  if client and not client.closed and client.path ~= config.socket() then
    client:shutdown("the socket is now " .. config.socket())
  end
  if client and not client.closed then
    return client
  end
end

local function notify(msg, level)
  vim.notify(msg, level or vim.log.levels.ERROR, { title = "agentd" })
end
M.notify = notify

--- Whether `err` only says the connection went (or is going) away: the reconnection deals
--- with it, so it is not worth a notification.
---@param err agentd.RpcError|string
---@return boolean
function M.is_disconnect(err)
  return type(err) == "table" and (err.code == -1 or (err.data ~= nil and err.data.kind == "shutting_down"))
end

--- A daemon error as a sentence: its message, which names what was wrong.
---@param err agentd.RpcError|string
---@return string
function M.describe(err)
  if type(err) == "string" then
    return err
  end
  return tostring(err.message or vim.inspect(err))
end

local function fire(pattern, data)
  vim.api.nvim_exec_autocmds("User", { pattern = pattern, data = data, modeline = false })
end
M.fire = fire

local function on_notification(method, params)
  if method ~= "session/event" then
    return
  end
  local item = params.result
  local route = type(item) == "table" and routes[item.session_id]
  if route then
    route.on_item(item, params.subscription)
  end
end

local on_close

local function open(cb)
  Client.connect(config.socket(), { on_notification = on_notification, on_close = on_close }, cb)
end

--- Keeps trying to connect with a growing pause, then subscribes every routed session again.
local function reconnect()
  if reconnecting then
    return
  end
  reconnecting = true
  local deadline = vim.uv.now() + config.options.reconnect_for_ms
  local pause = 50
  local function attempt()
    open(function(err, c)
      if c then
        client = c
        reconnecting = false
        notify("agentd: reconnected", vim.log.levels.INFO)
        fire("AgentdStatus")
        for _, route in pairs(routes) do
          route.resubscribe()
        end
        return
      end
      if vim.uv.now() >= deadline then
        reconnecting = false
        notify(("agentd: gave up reconnecting to %s: %s"):format(config.socket(), err))
        return
      end
      vim.defer_fn(attempt, pause)
      pause = math.min(pause * 2, 2000)
    end)
  end
  attempt()
end

on_close = function(reason, closed)
  if closed ~= client then
    return
  end
  client = nil
  if next(routes) ~= nil then
    notify("agentd: connection lost (" .. reason .. "); reconnecting", vim.log.levels.WARN)
    reconnect()
  end
  fire("AgentdStatus")
end

--- Starts the daemon with `agentctl status`, which starts it when nothing answers and waits
--- until it does (the same rule and environment as agentctl's own auto-start).
---@param cb fun(err: string?)
local function autostart(cb)
  local agentctl = config.options.agentctl
  if vim.fn.executable(agentctl) ~= 1 then
    cb(("nothing answers at %s, and agentctl (%q) is not executable to start agentd"):format(
      config.socket(),
      agentctl
    ))
    return
  end
  vim.system({ agentctl, "--socket", config.socket(), "status" }, { text = true }, function(out)
    vim.schedule(function()
      if out.code == 0 then
        cb(nil)
      else
        local said = vim.trim(out.stderr or "")
        cb(said ~= "" and said or ("agentctl status exited with " .. out.code))
      end
    end)
  end)
end

--- Calls `cb(err, client)` with a connected client, connecting (and auto-starting) if needed.
---@param cb fun(err: string?, client: agentd.Client?)
function M.with(cb)
  local c = live()
  if c then
    cb(nil, c)
    return
  end
  if waiting then
    table.insert(waiting, cb)
    return
  end
  waiting = { cb }
  local function finish(err, c)
    client = c
    local all = waiting or {}
    waiting = nil
    fire("AgentdStatus")
    for _, w in ipairs(all) do
      w(err, c)
    end
  end
  open(function(err, c)
    if c then
      finish(nil, c)
      return
    end
    local absent = err and (err:match("^ENOENT") or err:match("^ECONNREFUSED"))
    if not (absent and config.autostart()) then
      finish(("cannot reach agentd at %s: %s"):format(config.socket(), err))
      return
    end
    autostart(function(start_err)
      if start_err then
        finish(start_err)
        return
      end
      open(function(err2, c2)
        finish(err2 and ("cannot reach agentd at %s: %s"):format(config.socket(), err2), c2)
      end)
    end)
  end)
end

--- Calls `method`; `on_result(result)` on success. A failure is shown with vim.notify, or
--- handed to `on_error(err)` when given.
---@param method string
---@param params table
---@param on_result? fun(result: any)
---@param on_error? fun(err: agentd.RpcError|string)
function M.call(method, params, on_result, on_error)
  local function fail(err)
    if on_error then
      on_error(err)
    else
      notify("agentd: " .. M.describe(err))
    end
  end
  M.with(function(err, c)
    if not c then
      fail(err or "not connected")
      return
    end
    c:request(method, params, function(rpc_err, result)
      if rpc_err then
        fail(rpc_err)
      elseif on_result then
        on_result(result)
      end
    end)
  end)
end

--- Calls `method` and waits for its answer (for completion and health checks): the result, or
--- nil and the error. Never starts the daemon.
---@param method string
---@param params table
---@param timeout_ms integer
---@return any, string?
function M.call_sync(method, params, timeout_ms)
  local done, result, failure = false, nil, nil
  local function go(c)
    c:request(method, params, function(err, r)
      done, result, failure = true, r, err and M.describe(err)
    end)
  end
  if live() then
    go(client)
  else
    open(function(err, c)
      if not c then
        done, failure = true, ("cannot reach agentd at %s: %s"):format(config.socket(), err)
        return
      end
      client = client or c
      if client ~= c then
        c:shutdown("a connection was already open")
      end
      go(client)
    end)
  end
  if not vim.wait(timeout_ms, function()
    return done
  end, 10) then
    return nil, ("agentd did not answer %s within %d ms"):format(method, timeout_ms)
  end
  return result, failure
end

--- Routes the stream items of `session_id` to `route` (replacing any earlier route).
---@param session_id string
---@param route {on_item: fun(item: table, subscription: string?), resubscribe: fun()}
function M.route(session_id, route)
  routes[session_id] = route
end

---@param session_id string
function M.unroute(session_id)
  routes[session_id] = nil
end

--- Whether a connection is open now.
---@return boolean
function M.connected()
  return live() ~= nil
end

--- Whether a reconnection loop is running.
---@return boolean
function M.reconnecting()
  return reconnecting
end

return M
