--- The plugin's options: defaults, `setup()` merging, and the socket path as agentd and
--- agentctl compute it.
local M = {}

---@class agentd.Options
---@field socket? string socket path; nil: $AGENTD_SOCKET, else the daemon's default path
---@field agentctl string the agentctl program that starts the daemon when none answers
---@field autostart boolean start the daemon through agentctl when none answers
---@field create table extra `session/create` params (provider, model, profile, ...)
---@field fold_lines integer tool outputs longer than this many lines are folded
---@field open string how the transcript window opens: a command such as "vsplit", "split", "tabnew"
---@field keymaps boolean buffer-local keys in transcript buffers
---@field reconnect_for_ms integer how long to keep trying to reconnect after losing the daemon
---@field ask boolean prompt for approvals and questions as they arrive
M.defaults = {
  socket = nil,
  agentctl = "agentctl",
  autostart = true,
  create = {},
  fold_lines = 8,
  open = "vsplit",
  keymaps = true,
  reconnect_for_ms = 5 * 60 * 1000,
  ask = true,
}

---@type agentd.Options
M.options = vim.deepcopy(M.defaults)

---@param opts? table
function M.setup(opts)
  vim.validate({ opts = { opts, "table", true } })
  local merged = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  vim.validate({
    socket = { merged.socket, "string", true },
    agentctl = { merged.agentctl, "string" },
    autostart = { merged.autostart, "boolean" },
    create = { merged.create, "table" },
    fold_lines = { merged.fold_lines, "number" },
    open = { merged.open, "string" },
    keymaps = { merged.keymaps, "boolean" },
    reconnect_for_ms = { merged.reconnect_for_ms, "number" },
    ask = { merged.ask, "boolean" },
  })
  M.options = merged
end

local function nonempty(name)
  local v = vim.env[name]
  if v ~= nil and v ~= "" then
    return v
  end
end

--- The socket: the `socket` option, else `$AGENTD_SOCKET`, else
--- `$XDG_RUNTIME_DIR/agentd/agentd.sock`, else `<tmp>/agentd-<uid>/agentd.sock` (the same rule as
--- agentd's `default_socket_path`, whose temp dir is `$TMPDIR` or /tmp).
---@return string
function M.socket()
  local explicit = M.options.socket or nonempty("AGENTD_SOCKET")
  if explicit then
    return explicit
  end
  local runtime = nonempty("XDG_RUNTIME_DIR")
  if runtime then
    return runtime .. "/agentd/agentd.sock"
  end
  local tmp = (nonempty("TMPDIR") or "/tmp"):gsub("/+$", "")
  return ("%s/agentd-%d/agentd.sock"):format(tmp, (vim.uv or vim.loop).getuid())
end

--- Whether the daemon may be started: the option, and agentctl's own `AGENTD_NO_AUTOSTART`.
---@return boolean
function M.autostart()
  return M.options.autostart and vim.env.AGENTD_NO_AUTOSTART ~= "1"
end

return M
