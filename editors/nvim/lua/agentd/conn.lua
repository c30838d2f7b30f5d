--- The plugin's one connection to the daemon: connecting on first use to the socket `agentctl
--- socket-path` names (agentctl checks who serves it, and starts agentd when nothing answers),
--- reconnecting after the daemon goes away, routing
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

--- The `socket` option the open connection was made with.
---@type string?
local opened_for = nil

--- The open connection, if it was made for the `socket` option as it is; one made for another
--- (the option changed) is closed.
---@return agentd.Client?
local function live()
  if client and not client.closed and opened_for ~= config.options.socket then
    client:shutdown("the socket option changed")
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

--- Asks `agentctl socket-path` where the daemon listens: the `socket` option when set, else
--- agentctl's rule. agentctl answers only once the runtime directory is the user's and the
--- process serving the socket runs as the user, and with `autostart` starts agentd when nothing
--- answers. `cb(err, path, unavailable)`: `err` is agentctl's own words; `unavailable` says
--- that nothing answers (and nothing was started).
---@param autostart boolean
---@param cb fun(err: string?, path: string?, unavailable: boolean?)
local function socket_path(autostart, cb)
  local agentctl = config.options.agentctl
  if vim.fn.executable(agentctl) ~= 1 then
    cb(("agentctl (%q) is not executable; the plugin asks it where agentd listens"):format(agentctl))
    return
  end
  local cmd = { agentctl, "--json" }
  if config.options.socket then
    vim.list_extend(cmd, { "--socket", config.options.socket })
  end
  table.insert(cmd, "socket-path")
  local env = (autostart and config.autostart()) and {} or { AGENTD_NO_AUTOSTART = "1" }
  vim.system(cmd, { text = true, env = env }, function(out)
    vim.schedule(function()
      if out.code == 0 then
        local ok, found = pcall(vim.json.decode, out.stdout or "")
        if ok and type(found) == "table" and type(found.socket) == "string" then
          cb(nil, found.socket)
        else
          cb("agentctl socket-path printed no socket: " .. vim.trim(out.stdout or ""))
        end
        return
      end
      local said = vim.trim(out.stderr or "")
      local ok, failure = pcall(vim.json.decode, said)
      if ok and type(failure) == "table" and type(failure.message) == "string" then
        cb(failure.message, nil, failure.kind == "unavailable")
      else
        cb(said ~= "" and said or ("agentctl socket-path exited with " .. out.code))
      end
    end)
  end)
end

--- Connects to the socket agentctl names; `cb(err, client, unavailable)`.
---@param autostart boolean
---@param cb fun(err: string?, client: agentd.Client?, unavailable: boolean?)
local function open(autostart, cb)
  local option = config.options.socket
  socket_path(autostart, function(err, path, unavailable)
    if not path then
      cb(err, nil, unavailable)
      return
    end
    Client.connect(path, { on_notification = on_notification, on_close = on_close }, function(cerr, c)
      if c then
        opened_for = option
        cb(nil, c)
      else
        cb(("cannot reach agentd at %s: %s"):format(path, cerr), nil, true)
      end
    end)
  end)
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
    open(false, function(err, c, unavailable)
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
      if not unavailable or vim.uv.now() >= deadline then
        reconnecting = false
        notify("agentd: gave up reconnecting: " .. err)
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

--- Calls `cb(err, client)` with a connected client, connecting (and auto-starting) if needed;
--- `err` is agentctl's refusal when it refuses the socket.
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
  open(true, finish)
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
    open(false, function(err, c)
      if not c then
        done, failure = true, err
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

--- The socket of the open connection, if any.
---@return string?
function M.socket()
  local c = live()
  return c and c.path
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
