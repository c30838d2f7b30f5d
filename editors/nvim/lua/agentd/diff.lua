--- What an editing tool call changes, as diff text built from the call's own arguments (the
--- exact change the agent asked for): `edit_file` old/new strings, `write_file` contents,
--- `apply_patch` patches. The transcript shows it in the call's block; `:Agentd diff` shows
--- every edit of a session in one `diff` buffer.
local M = {}

local text_diff = (vim.text and vim.text.diff) or vim.diff

---@param s string
---@return string
local function ended(s)
  if s == "" or s:sub(-1) == "\n" then
    return s
  end
  return s .. "\n"
end

--- The diff of a call to an editing tool, or nil for other tools (and malformed arguments).
---@param name string
---@param args any
---@return string?
function M.of_call(name, args)
  if type(args) ~= "table" then
    return nil
  end
  if name == "edit_file" and type(args.file_path) == "string" and type(args.old_string) == "string" and type(args.new_string) == "string" then
    local hunks = text_diff(ended(args.old_string), ended(args.new_string), { ctxlen = 3 })
    local header = ("--- a/%s\n+++ b/%s%s\n"):format(
      args.file_path,
      args.file_path,
      args.replace_all and "  (every occurrence)" or ""
    )
    return ((header .. hunks):gsub("\n$", ""))
  end
  if name == "write_file" and type(args.file_path) == "string" and type(args.content) == "string" then
    local hunks = text_diff("", ended(args.content), { ctxlen = 0 })
    return ((("--- (whole file written)\n+++ b/%s\n"):format(args.file_path) .. hunks):gsub("\n$", ""))
  end
  if name == "apply_patch" and type(args.patch) == "string" then
    return (args.patch:gsub("\n$", ""))
  end
  return nil
end

--- Opens (or refreshes) the diff buffer of a session: every edit, in order, with its outcome.
---@param session_id string
---@param edits {name: string, arguments: any, status: string}[]
function M.show(session_id, edits)
  local name = "agentd://" .. session_id .. "/diff"
  local buf = vim.fn.bufnr(name)
  if buf == -1 then
    buf = vim.api.nvim_create_buf(true, true)
    vim.api.nvim_buf_set_name(buf, name)
    vim.bo[buf].buftype = "nofile"
    vim.bo[buf].bufhidden = "wipe"
    vim.bo[buf].swapfile = false
  end
  local lines = {}
  for _, e in ipairs(edits) do
    lines[#lines + 1] = ("# %s (%s)"):format(e.name, e.status)
    vim.list_extend(lines, vim.split(M.of_call(e.name, e.arguments) or "", "\n", { plain = true }))
  end
  if #lines == 0 then
    lines = { "# no edits in this session yet" }
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = "diff"
  local win = vim.fn.win_findbuf(buf)[1]
  if win then
    vim.api.nvim_set_current_win(win)
  else
    vim.cmd("tab sbuffer " .. buf)
  end
end

return M
