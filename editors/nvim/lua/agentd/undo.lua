--- Undo, redo and the agent's changes to the files (`:AgentdUndo`, `:AgentdRedo`, `:AgentdDiff`)
--- over the daemon's `session/rollback {files = true, force}`, `session/redo` and `session/diff`.
--- The daemon refuses to overwrite a file the user changed since the agent did, naming it; the
--- user is then asked whether to restore anyway (their version is kept for a redo).
local conn = require("agentd.conn")

local M = {}

local INFO = vim.log.levels.INFO

--- What an undo's or a redo's `files` did, in a few words.
---@param files? {restored: string[], kept?: string[], not_restored?: string[]}
---@return string
local function files_text(files)
  if not files then
    return ""
  end
  local parts = {}
  if #files.restored > 0 then
    parts[#parts + 1] = "restored " .. table.concat(files.restored, ", ")
  else
    parts[#parts + 1] = "no file to restore"
  end
  if files.kept and #files.kept > 0 then
    parts[#parts + 1] = ("your versions of %s are kept (:AgentdRedo brings them back)"):format(
      table.concat(files.kept, ", ")
    )
  end
  if files.not_restored and #files.not_restored > 0 then
    parts[#parts + 1] = "not restored: " .. table.concat(files.not_restored, "; ")
  end
  return "; " .. table.concat(parts, "; ")
end

--- The files a `files_changed` refusal names (from its data) as changed by the user since the
--- agent changed them, or nil for any other error.
---@param err agentd.RpcError|string
---@return string?
local function changed_files(err)
  local data = type(err) == "table" and err.data
  if type(data) ~= "table" or data.kind ~= "files_changed" or type(data.files) ~= "table" then
    return nil
  end
  local files = table.concat(data.files, ", ")
  if type(data.more_files) == "number" and data.more_files > 0 then
    files = ("%s and %d more"):format(files, data.more_files)
  end
  return files
end

--- Calls `method`; when the daemon refuses because the user changed files, asks whether to
--- force it (unless `params.force` already does). `done(result)` on success.
---@param method string
---@param params table
---@param done fun(result: table)
local function forcible(method, params, done)
  conn.call(method, params, done, function(err)
    local files = changed_files(err)
    if not files or params.force then
      conn.notify("agentd: " .. conn.describe(err))
      return
    end
    local restore = "restore anyway (your versions are kept for :AgentdRedo)"
    vim.ui.select({ restore, "keep my changes" }, {
      prompt = ("agentd: you changed %s since the agent did"):format(files),
    }, function(choice)
      if choice == restore then
        forcible(method, vim.tbl_extend("force", params, { force = true }), done)
      else
        conn.notify(("agentd: nothing was restored: you changed %s (`:AgentdUndo!` restores anyway)"):format(files), INFO)
      end
    end)
  end)
end

--- Buffers showing a file the undo or redo put back are reloaded.
local function reload()
  vim.cmd.checktime()
end

--- Undoes the last `turns` inputs of session `id`: the conversation, and the files the agent
--- changed in them. `force` restores files the user changed since too.
---@param id string
---@param turns? integer
---@param force? boolean
function M.undo(id, turns, force)
  forcible("session/rollback", { session_id = id, turns = turns or 1, files = true, force = force or nil }, function(r)
    reload()
    conn.notify(("agentd: undid %d entries%s"):format(r.removed, files_text(r.files)), INFO)
  end)
end

--- Brings back what the last undo of session `id` took away.
---@param id string
---@param force? boolean
function M.redo(id, force)
  forcible("session/redo", { session_id = id, force = force or nil }, function(r)
    reload()
    conn.notify(("agentd: redone; %d entries on the branch%s"):format(r.entries, files_text(r.files)), INFO)
  end)
end

--- Opens what the agent changed in the files for the newest input of session `id` (or
--- `input_id`) as a `diff` buffer.
---@param id string
---@param input_id? string
function M.diff(id, input_id)
  conn.call("session/diff", { session_id = id, input_id = input_id }, function(r)
    if r.diff == "" then
      conn.notify("agentd: the agent changed no file for that input", INFO)
      return
    end
    local name = "agentd://" .. id .. "/changes"
    local buf = vim.fn.bufnr(name)
    if buf == -1 then
      buf = vim.api.nvim_create_buf(true, true)
      vim.api.nvim_buf_set_name(buf, name)
      vim.bo[buf].buftype = "nofile"
      vim.bo[buf].bufhidden = "wipe"
      vim.bo[buf].swapfile = false
    end
    vim.bo[buf].modifiable = true
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split((r.diff:gsub("\n$", "")), "\n", { plain = true }))
    vim.bo[buf].modifiable = false
    vim.bo[buf].filetype = "diff"
    local win = vim.fn.win_findbuf(buf)[1]
    if win then
      vim.api.nvim_set_current_win(win)
    else
      vim.cmd("tab sbuffer " .. buf)
    end
  end)
end

return M
