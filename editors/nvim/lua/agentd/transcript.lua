--- The transcript view: one buffer per session, named `agentd://<session id>`, that renders the
--- session's events as they arrive. Assistant text and reasoning stream into the last lines;
--- each tool call is a block (header with live status, arguments, output) that grows in place
--- while later lines follow it. Reasoning and long tool outputs are folded.
local config = require("agentd.config")
local diff = require("agentd.diff")

local M = {}

local ns = vim.api.nvim_create_namespace("agentd.transcript")

--- Line prefixes. Folds are found by prefix (see `M.foldexpr`), so a block's lines keep their
--- fold wherever later insertions move them.
local REASONING = "  ┆ "
local OUTPUT = "  │ "
local FOLDED_OUTPUT = "  ┃ "
local ARG = "  "

---@class agentd.Call
---@field head integer extmark on the header line
---@field tail integer extmark on the block's last line
---@field name string
---@field out_lines integer output lines shown
---@field open_line boolean whether the last output line is unfinished
---@field prefix string the output prefix in use

---@class agentd.Transcript
---@field buf integer
---@field session_id string
---@field streaming? "text"|"reasoning" what the last line is receiving
---@field calls table<string, agentd.Call>
---@field in_response? boolean whether the current response's header is shown
local Transcript = {}
Transcript.__index = Transcript

--- The buffer's window options that make folds work: set whenever a window shows it.
---@param win integer
local function window_options(win)
  local function set(name, value)
    vim.api.nvim_set_option_value(name, value, { scope = "local", win = win })
  end
  set("foldmethod", "expr")
  set("foldexpr", "v:lua.require'agentd.transcript'.foldexpr()")
  set("foldlevel", 0)
  set("foldenable", true)
  set("wrap", true)
  set("linebreak", true)
end

--- Fold level of line `v:lnum`: 1 for reasoning and for the output of long tool calls.
---@return string
function M.foldexpr()
  local line = vim.fn.getline(vim.v.lnum)
  if vim.startswith(line, REASONING) or vim.startswith(line, FOLDED_OUTPUT) then
    return "1"
  end
  return "0"
end

--- Creates the buffer of `session_id` (or takes the one already named so).
---@param session_id string
---@param keymaps fun(buf: integer)
---@return agentd.Transcript
function M.new(session_id, keymaps)
  local name = "agentd://" .. session_id
  local buf = vim.fn.bufnr(name)
  if buf == -1 then
    buf = vim.api.nvim_create_buf(true, true)
    vim.api.nvim_buf_set_name(buf, name)
  end
  -- A buffer `:bdelete` unloaded (which detached its session) is loaded again, empty.
  vim.fn.bufload(buf)
  local bo = vim.bo[buf]
  bo.buftype = "nofile"
  bo.bufhidden = "hide"
  bo.swapfile = false
  bo.modifiable = false
  bo.filetype = "agentd"
  vim.b[buf].agentd_session = session_id
  vim.api.nvim_create_autocmd("BufWinEnter", {
    buffer = buf,
    callback = function()
      window_options(vim.api.nvim_get_current_win())
    end,
  })
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    window_options(win)
  end
  if config.options.keymaps then
    keymaps(buf)
  end
  local self = setmetatable({ buf = buf, session_id = session_id, calls = {} }, Transcript)
  self:write(function()
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, {})
  end)
  return self
end

--- Shows the buffer in a window (opening one as `open` says when none shows it) and returns it.
---@param focus boolean
---@return integer
function Transcript:show(focus)
  local win = vim.fn.win_findbuf(self.buf)[1]
  if not win then
    local from = vim.api.nvim_get_current_win()
    vim.cmd(config.options.open)
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, self.buf)
    window_options(win)
    local last = vim.api.nvim_buf_line_count(self.buf)
    vim.api.nvim_win_set_cursor(win, { last, 0 })
    if not focus then
      vim.api.nvim_set_current_win(from)
    end
  elseif focus then
    vim.api.nvim_set_current_win(win)
  end
  return win
end

--- Runs `change` with the buffer writable, keeping windows that were at the end at the end.
---@private
---@param change fun()
function Transcript:write(change)
  if not vim.api.nvim_buf_is_valid(self.buf) then
    return
  end
  local last = vim.api.nvim_buf_line_count(self.buf)
  local following = {}
  for _, win in ipairs(vim.fn.win_findbuf(self.buf)) do
    if vim.api.nvim_win_get_cursor(win)[1] >= last then
      following[#following + 1] = win
    end
  end
  vim.bo[self.buf].modifiable = true
  change()
  vim.bo[self.buf].modifiable = false
  local now = vim.api.nvim_buf_line_count(self.buf)
  for _, win in ipairs(following) do
    vim.api.nvim_win_set_cursor(win, { now, 0 })
  end
end

--- Whether the buffer holds nothing yet (a fresh buffer has one empty line).
---@private
function Transcript:empty()
  return vim.api.nvim_buf_line_count(self.buf) == 1 and vim.api.nvim_buf_get_lines(self.buf, 0, 1, false)[1] == ""
end

--- Appends whole lines at the end and ends any streaming.
---@private
---@param lines string[]
function Transcript:append(lines)
  self.streaming = nil
  self:write(function()
    if self:empty() then
      vim.api.nvim_buf_set_lines(self.buf, 0, -1, false, lines)
    else
      vim.api.nvim_buf_set_lines(self.buf, -1, -1, false, lines)
    end
  end)
end

--- Splits `text` into lines, each with `prefix`.
---@param text string
---@param prefix string
---@return string[]
local function prefixed(text, prefix)
  local lines = vim.split(text, "\n", { plain = true })
  for i, l in ipairs(lines) do
    lines[i] = prefix .. l
  end
  return lines
end

--- Streams `delta` into the last line: `kind` text or reasoning; a change of kind starts a
--- new line (reasoning under its own folded header).
---@private
---@param kind "text"|"reasoning"
---@param delta string
function Transcript:stream(kind, delta)
  if self.streaming ~= kind then
    if kind == "reasoning" then
      self:append({ REASONING .. "reasoning", REASONING })
    else
      self:append({ "" })
    end
    self.streaming = kind
  end
  local prefix = kind == "reasoning" and REASONING or ""
  local pieces = vim.split(delta, "\n", { plain = true })
  self:write(function()
    local last = vim.api.nvim_buf_line_count(self.buf) - 1
    local col = #vim.api.nvim_buf_get_lines(self.buf, last, last + 1, false)[1]
    local rest = {}
    for i = 2, #pieces do
      rest[#rest + 1] = prefix .. pieces[i]
    end
    vim.api.nvim_buf_set_text(self.buf, last, col, last, col, { pieces[1] })
    if #rest > 0 then
      vim.api.nvim_buf_set_lines(self.buf, -1, -1, false, rest)
    end
  end)
end

---@param n integer
---@return string
local function count(n)
  return tostring(math.floor(n or 0))
end

--- One usage as a short phrase.
---@param u table
---@return string
local function usage_text(u)
  local parts = { "in " .. count(u.input_tokens), "out " .. count(u.output_tokens) }
  if (u.cache_read_tokens or 0) > 0 then
    parts[#parts + 1] = "cached " .. count(u.cache_read_tokens)
  end
  if (u.reasoning_tokens or 0) > 0 then
    parts[#parts + 1] = "reasoning " .. count(u.reasoning_tokens)
  end
  if u.cost_usd then
    parts[#parts + 1] = ("$%.4f"):format(u.cost_usd)
  end
  if (u.unreported_calls or 0) > 0 then
    parts[#parts + 1] = count(u.unreported_calls) .. " call(s) unreported"
  end
  return table.concat(parts, " ")
end

--- The lines showing a tool call's arguments: a diff for edits, the command for shells, else
--- the JSON.
---@param name string
---@param args any
---@return string[]
local function argument_lines(name, args)
  local change = diff.of_call(name, args)
  if change then
    return prefixed(change, ARG)
  end
  if type(args) == "table" and type(args.command) == "string" then
    return prefixed("$ " .. args.command, ARG)
  end
  local ok, json = pcall(vim.json.encode, args)
  return prefixed(ok and json or vim.inspect(args), ARG)
end

---@private
---@param ev table
function Transcript:tool_start(ev)
  local d = ev.data
  local head = ("⚙ %s [%s] running"):format(d.tool_name, d.call_id)
  local lines = { head }
  vim.list_extend(lines, argument_lines(d.tool_name, d.arguments))
  self:append(lines)
  local last = vim.api.nvim_buf_line_count(self.buf) - 1
  self.calls[d.call_id] = {
    head = vim.api.nvim_buf_set_extmark(self.buf, ns, last - #lines + 1, 0, {}),
    tail = vim.api.nvim_buf_set_extmark(self.buf, ns, last, 0, {}),
    name = d.tool_name,
    out_lines = 0,
    open_line = false,
    prefix = OUTPUT,
  }
end

--- Adds output text to a call's block, in place; past `fold_lines` lines the block's output
--- is re-prefixed so it folds.
---@private
---@param call agentd.Call
---@param text string
function Transcript:call_output(call, text)
  local pieces = vim.split(text, "\n", { plain = true })
  self:write(function()
    local tail = vim.api.nvim_buf_get_extmark_by_id(self.buf, ns, call.tail, {})[1]
    if call.open_line then
      local col = #vim.api.nvim_buf_get_lines(self.buf, tail, tail + 1, false)[1]
      vim.api.nvim_buf_set_text(self.buf, tail, col, tail, col, { pieces[1] })
      table.remove(pieces, 1)
    end
    if #pieces > 0 then
      local lines = {}
      for i, p in ipairs(pieces) do
        lines[i] = call.prefix .. p
      end
      vim.api.nvim_buf_set_lines(self.buf, tail + 1, tail + 1, false, lines)
      tail = tail + #lines
      call.out_lines = call.out_lines + #lines
      vim.api.nvim_buf_set_extmark(self.buf, ns, tail, 0, { id = call.tail })
    end
    -- A delta ending in a newline leaves an empty unfinished line for the next delta.
    call.open_line = true
    if call.prefix == OUTPUT and call.out_lines > config.options.fold_lines then
      call.prefix = FOLDED_OUTPUT
      local first = tail - call.out_lines + 1
      local shown = vim.api.nvim_buf_get_lines(self.buf, first, tail + 1, false)
      for i, l in ipairs(shown) do
        shown[i] = FOLDED_OUTPUT .. l:sub(#OUTPUT + 1)
      end
      vim.api.nvim_buf_set_lines(self.buf, first, tail + 1, false, shown)
      -- Replaced lines take their marks to the first of them: put the tail back.
      vim.api.nvim_buf_set_extmark(self.buf, ns, tail, 0, { id = call.tail })
    end
  end)
end

---@private
---@param ev table
function Transcript:tool_end(ev)
  local d = ev.data
  local call = self.calls[d.call_id]
  if not call then
    -- Its start is before the replayed range (or lost in a crash): a block of its own.
    self:tool_start({ data = { tool_name = d.tool_name, call_id = d.call_id, arguments = vim.empty_dict() } })
    call = self.calls[d.call_id]
  end
  if call.out_lines == 0 and d.output and d.output ~= "" then
    self:call_output(call, (d.output:gsub("\n$", "")))
  elseif call.open_line then
    -- Drop the empty line a trailing newline left open.
    self:write(function()
      local tail = vim.api.nvim_buf_get_extmark_by_id(self.buf, ns, call.tail, {})[1]
      local line = vim.api.nvim_buf_get_lines(self.buf, tail, tail + 1, false)[1]
      if line == call.prefix and call.out_lines > 1 then
        vim.api.nvim_buf_set_lines(self.buf, tail, tail + 1, false, {})
        call.out_lines = call.out_lines - 1
        call.open_line = false
        vim.api.nvim_buf_set_extmark(self.buf, ns, tail - 1, 0, { id = call.tail })
      end
    end)
  end
  if d.error then
    -- A failed command's error repeats the output already streamed, then says how it ended:
    -- after streamed output, that last line is what is new.
    local shown = call.out_lines > 0 and d.error:match("([^\n]*)\n*$") or d.error
    call.open_line = false
    self:call_output(call, "error: " .. shown)
  end
  local status = d.error and "✗ failed" or "✓ done"
  self:write(function()
    local head = vim.api.nvim_buf_get_extmark_by_id(self.buf, ns, call.head, {})[1]
    local text = ("⚙ %s [%s] %s in %d ms"):format(d.tool_name, d.call_id, status, d.duration_ms or 0)
    vim.api.nvim_buf_set_lines(self.buf, head, head + 1, false, { text })
  end)
  self.calls[d.call_id] = nil
end

local handlers = {}

function handlers.session_start(self, ev)
  local d = ev.data
  local cfg = d.config or {}
  self:append({
    ("# %s  (%s)"):format(d.title or "agentd session", ev.session_id),
    ("cwd %s · %s/%s · profile %s"):format(d.cwd, cfg.provider or "?", cfg.model or "?", d.profile or "?"),
  })
end

function handlers.user_input(self, ev)
  self:append({ "", "## You" })
  self:append(prefixed(ev.data.text, ""))
end

function handlers.steering_injected(self, ev)
  self:append({ "", "## You (steering)" })
  self:append(prefixed(ev.data.text, ""))
end

--- The header of a response comes with its first text or reasoning (reasoning may come
--- before `assistant_text_start`): a response with tool calls only shows just the calls.
---@param self agentd.Transcript
local function response_header(self)
  if not self.in_response then
    self.in_response = true
    self:append({ "", "## Agent" })
  end
end

function handlers.assistant_text_delta(self, ev)
  response_header(self)
  self:stream("text", ev.data.delta)
end

function handlers.assistant_reasoning_delta(self, ev)
  response_header(self)
  self:stream("reasoning", ev.data.delta)
end

function handlers.assistant_text_end(self)
  self.streaming = nil
  self.in_response = false
end

function handlers.tool_call_start(self, ev)
  self:tool_start(ev)
end

function handlers.tool_call_output_delta(self, ev)
  local call = self.calls[ev.data.call_id]
  if call then
    self:call_output(call, ev.data.delta)
  end
end

function handlers.tool_call_end(self, ev)
  self:tool_end(ev)
end

function handlers.usage(self, ev)
  self:append({ ("· usage: %s · session %s"):format(usage_text(ev.data.call), usage_text(ev.data.total)) })
end

function handlers.warning(self, ev)
  self:append(prefixed(ev.data.message, "! warning: "))
end

function handlers.error(self, ev)
  self:append(prefixed(ev.data.message, ev.data.fatal and "✗ fatal error: " or "✗ error: "))
end

function handlers.loop_detection(self, ev)
  self:append(prefixed(ev.data.message, "! loop detected: "))
end

function handlers.turn_limit(self, ev)
  self:append({ ("! turn limit %s reached (%d)"):format(ev.data.limit, ev.data.count or 0) })
end

function handlers.processing_end(self, ev)
  self:append({ ("── %s ──"):format(ev.data.reason) })
end

function handlers.compaction(self, ev)
  local d = ev.data
  self:append({
    ("· compacted%s: %d entries summarized, ~%d → ~%d tokens"):format(
      d.automatic and " (automatic)" or "",
      d.entries_summarized,
      d.tokens_before,
      d.tokens_after
    ),
  })
end

function handlers.subagent_spawned(self, ev)
  self:append(prefixed(ev.data.task, ("↳ subagent %s: "):format(ev.data.agent_id)))
end

function handlers.subagent_finished(self, ev)
  local d = ev.data
  self:append({
    ("↳ subagent %s %s after %d turns"):format(d.agent_id, d.success and "finished" or "failed", d.turns_used or 0),
  })
end

function handlers.rollback(self, ev)
  self:append({ ("↶ rolled back: %d entries off the branch"):format(ev.data.removed) })
end

function handlers.redo(self)
  self:append({ "↷ redone: the entries the rollback took are back on the branch" })
end

function handlers.events_missing(self, ev)
  self:append({
    ("! events %d–%d were lost when the daemon stopped"):format(ev.data.first_seq, ev.data.last_seq),
  })
end

function handlers.mcp_server_state(self, ev)
  local d = ev.data
  -- Starting is a moment, not news; ready, failed and stopped are.
  if d.state == "starting" then
    return
  end
  local what = d.state == "ready" and ("ready, %d tools"):format(#(d.tools or {})) or d.state
  local line = ("%s MCP server %s: %s"):format(d.state == "failed" and "!" or "·", d.server, what)
  if d.reason then
    line = ("%s (%s)"):format(line, d.reason)
  end
  self:append(prefixed(line, ""))
end

function handlers.session_end(self, ev)
  self:append({ ("── session closed (%s) ──"):format(ev.data.reason) })
end

function handlers.approval_requested(self, ev)
  local d = ev.data
  self:append({ "", ("? approval needed: %s [%s]"):format(d.tool, d.call_id) })
  self:append(prefixed(d.summary, ARG))
  self:append({ "  answer with :Agentd respond allow|always|deny" })
end

local DECIDED = { allow = "allowed", allow_always = "allowed always", deny = "denied" }

function handlers.approval_resolved(self, ev)
  local d = ev.data
  local line = ("? %s [%s] %s by %s"):format(d.tool, d.call_id, DECIDED[d.decision] or d.decision, d.by)
  self:append(prefixed(d.message and (line .. ": " .. d.message) or line, ""))
end

function handlers.question_requested(self, ev)
  local d = ev.data
  self:append({ "", ("? question [%s]"):format(d.call_id) })
  self:append(prefixed(d.question, ARG))
  if d.options and #d.options > 0 then
    self:append({ "  options: " .. table.concat(d.options, " / ") })
  end
  self:append({ "  answer with :Agentd respond {answer}" })
end

function handlers.question_resolved(self, ev)
  local d = ev.data
  self:append(prefixed(d.answer or "(no answer)", ("? answered by %s: "):format(d.by)))
end

function handlers.client_tool_requested(self, ev)
  local d = ev.data
  self:append({ ("? client tool %s [%s] waits for the client that provides it"):format(d.tool, d.call_id) })
end

function handlers.client_tool_resolved(self, ev)
  local d = ev.data
  self:append({ ("? client tool [%s] %s by %s"):format(d.call_id, d.is_error and "failed" or "answered", d.by) })
end

--- Renders one event. Kinds without a view (state and queue changes: the status shows them)
--- add nothing.
---@param ev table
function Transcript:render(ev)
  if not vim.api.nvim_buf_is_valid(self.buf) then
    return
  end
  local handler = handlers[ev.kind]
  if handler then
    handler(self, ev)
  end
end

return M
