--- The plugin's options: defaults and `setup()` merging. Where the daemon listens is
--- agentctl's to say (`agentctl socket-path`, see agentd.conn).
local M = {}

---@class agentd.Options
---@field socket? string socket path, still checked by agentctl; nil: the one `agentctl socket-path` names
---@field agentctl string the agentctl program, which finds the socket and starts the daemon when none answers
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

--- Whether the daemon may be started: the option, and agentctl's own `AGENTD_NO_AUTOSTART`.
---@return boolean
function M.autostart()
  return M.options.autostart and vim.env.AGENTD_NO_AUTOSTART ~= "1"
end

return M
