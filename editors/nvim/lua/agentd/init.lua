--- agentd for Neovim: the public API behind `:Agentd` and the `<Plug>` mappings. Everything is
--- a call to the daemon; this module picks the session a command is about, gathers its input
--- (arguments, a prompt, the selection, the current file) and shows the answer.
local config = require("agentd.config")
local conn = require("agentd.conn")
local sessions = require("agentd.session")

local M = {}

--- The session commands act on when none is named: the one whose transcript is the current
--- buffer, else the last one created, attached or picked.
---@type string?
local current = nil

local notify = conn.notify

---@param opts? agentd.Options
function M.setup(opts)
  config.setup(opts)
end

--- The current session's state (`idle`, `processing`, `awaiting_input`, `closed`), or
--- `disconnected` while the daemon cannot be reached, or "" when there is no session.
---@return string
function M.status()
  local s = M.current_session()
  if not s then
    return ""
  end
  if conn.reconnecting() then
    return "disconnected"
  end
  return s.state or ""
end

---@return agentd.Session?
function M.current_session()
  local id = vim.b.agentd_session or current
  return id and sessions.all[id] or nil
end

--- The current session's id, or nil after telling the user how to get one.
---@return string?
local function need_session()
  local id = vim.b.agentd_session or current
  if not id then
    notify("agentd: no session yet: `:Agentd new` starts one, `:Agentd sessions` picks one")
  end
  return id
end

local function buffer_keymaps(buf)
  local function map(lhs, rhs, desc)
    vim.keymap.set("n", lhs, rhs, { buffer = buf, desc = "agentd: " .. desc, nowait = true })
  end
  map("<C-c>", M.abort, "abort the current work")
  map("i", function()
    M.submit()
  end, "submit a prompt")
  map("s", function()
    M.steer()
  end, "steer")
  map("f", function()
    M.follow_up()
  end, "queue a follow-up")
  map("gq", M.queue, "show the queue")
  map("gd", M.diff, "show the edits as a diff")
  map("q", "<Cmd>close<CR>", "close the window")
end

--- Attaches to a session from its snapshot, makes it current and shows its transcript.
---@param snapshot table
---@param focus? boolean
---@return agentd.Session
local function open(snapshot, focus)
  local s = sessions.attach(snapshot, buffer_keymaps)
  current = s.id
  s.view:show(focus ~= false)
  conn.fire("AgentdStatus", { session_id = s.id, state = s.state })
  return s
end

--- The directory a new session works in: the project root of the current file (a version
--- control or AGENTS.md marker), else the file's directory, else the working directory.
---@return string
local function project_dir()
  local file = vim.api.nvim_buf_get_name(0)
  if file == "" or vim.bo.buftype ~= "" then
    return vim.fn.getcwd()
  end
  local root = vim.fs.root(0, { ".git", ".hg", ".jj", "AGENTS.md" })
  return root or vim.fs.dirname(vim.fn.fnamemodify(file, ":p"))
end

--- Creates a session in the project and opens its transcript.
---@param opts? {title?: string, cwd?: string}
function M.new(opts)
  opts = opts or {}
  local params = vim.tbl_extend("force", {}, config.options.create, {
    cwd = opts.cwd or project_dir(),
    title = opts.title,
  })
  conn.call("session/create", params, function(snapshot)
    open(snapshot)
  end)
end

--- Attaches to any session by id (one started by agentctl or another editor too).
---@param id string
function M.attach(id)
  conn.call("session/get", { session_id = id }, function(snapshot)
    open(snapshot)
  end)
end

--- Picks a session with vim.ui.select (title, state, directory, parent) and attaches to it.
function M.sessions()
  conn.call("session/list", {}, function(result)
    local list = result.sessions or {}
    if #list == 0 then
      notify("agentd: no sessions yet; `:Agentd new` starts one", vim.log.levels.INFO)
      return
    end
    vim.ui.select(list, {
      prompt = "agentd sessions",
      kind = "agentd.session",
      format_item = function(s)
        local parent = s.parent_id and ("  ↳ " .. s.parent_id:sub(1, 8)) or ""
        return ("%s  [%s]  %s  %s%s"):format(
          s.title or "(untitled)",
          s.state,
          vim.fn.fnamemodify(s.cwd, ":~"),
          s.session_id:sub(1, 8),
          parent
        )
      end,
    }, function(choice)
      if choice then
        M.attach(choice.session_id)
      end
    end)
  end)
end

--- `text`, or the answer to a prompt; `send(text)` runs with it when it is not empty.
---@param text? string
---@param prompt string
---@param send fun(text: string)
local function with_text(text, prompt, send)
  if text and text ~= "" then
    send(text)
    return
  end
  vim.ui.input({ prompt = prompt }, function(input)
    if input and input ~= "" then
      send(input)
    end
  end)
end

--- The most of a file sent as context; more is an error that asks for a selection.
local MAX_CONTEXT_BYTES = 256 * 1024

--- Lines `first`..`last` of the current buffer, fenced, with the file's name.
---@param first integer
---@param last integer
---@return string?
local function fenced(first, last)
  local lines = vim.api.nvim_buf_get_lines(0, first - 1, last, false)
  local body = table.concat(lines, "\n")
  if #body > MAX_CONTEXT_BYTES then
    notify(("agentd: %d bytes is too much context (at most %d); select a part"):format(#body, MAX_CONTEXT_BYTES))
    return nil
  end
  local file = vim.api.nvim_buf_get_name(0)
  file = file == "" and "[No Name]" or vim.fn.fnamemodify(file, ":.")
  local whole = first == 1 and last == vim.api.nvim_buf_line_count(0)
  local where = whole and file or ("%s lines %d-%d"):format(file, first, last)
  -- The fence names the language; detection may be off (`:filetype off`), so ask for it.
  local ft = vim.bo.filetype ~= "" and vim.bo.filetype or (vim.filetype.match({ buf = 0 }) or "")
  return ("%s:\n```%s\n%s\n```"):format(where, ft, body)
end

---@param method string
---@param verb string
---@return fun(text?: string, range?: {integer, integer})
local function input_command(method, verb)
  return function(text, range)
    local id = need_session()
    if not id then
      return
    end
    local context = range and fenced(range[1], range[2])
    if range and not context then
      return
    end
    with_text(text, ("agentd %s> "):format(verb), function(t)
      if context then
        t = t .. "\n\n" .. context
      end
      conn.call(method, { session_id = id, text = t }, function(r)
        if r.queued then
          notify("agentd: queued as " .. (r.disposition == "follow_up" and "a follow-up" or r.disposition), vim.log.levels.INFO)
        end
      end)
    end)
  end
end

--- Submits a prompt (with the lines in `range` as context): it starts the work when the
--- session is idle, else it is queued as a follow-up.
M.submit = input_command("session/submit", "submit")
--- Queues a steering message, injected after the current tool round.
M.steer = input_command("session/steer", "steer")
--- Queues a follow-up, run after the current input completes.
M.follow_up = input_command("session/follow_up", "follow-up")

--- Submits a prompt with the current file (or the lines in `range`) as context.
---@param text? string
---@param range? {integer, integer}
function M.context(text, range)
  M.submit(text, range or { 1, vim.api.nvim_buf_line_count(0) })
end

--- Aborts the current work; queued items stay queued and are listed.
function M.abort()
  local id = need_session()
  if not id then
    return
  end
  conn.call("session/abort", { session_id = id }, function(r)
    if not r.aborted then
      notify("agentd: nothing to abort (the session is " .. r.state .. ")", vim.log.levels.INFO)
    end
    local q = r.queue or {}
    local kept = #(q.steering or {}) + #(q.follow_up or {})
    if kept > 0 then
      notify(
        ("agentd: %d queued item(s) kept; they go with the next submit (`:Agentd queue clear` removes them)"):format(kept),
        vim.log.levels.INFO
      )
    end
  end)
end

--- Closes the current session.
function M.close()
  local id = need_session()
  if id then
    conn.call("session/close", { session_id = id })
  end
end

--- Forks the current session into a new one and opens it.
function M.fork()
  local id = need_session()
  if id then
    conn.call("session/fork", { session_id = id }, function(snapshot)
      open(snapshot)
    end)
  end
end

---@param q table
---@param title string
local function show_queue(q, title)
  local lines = { title }
  for _, item in ipairs(q.steering or {}) do
    lines[#lines + 1] = "steering: " .. item.text
  end
  for _, item in ipairs(q.follow_up or {}) do
    lines[#lines + 1] = "follow-up: " .. item.text
  end
  if #lines == 1 then
    lines[#lines + 1] = "(empty)"
  end
  notify(table.concat(lines, "\n"), vim.log.levels.INFO)
end

--- Shows the queued steering and follow-up items.
function M.queue()
  local id = need_session()
  if id then
    conn.call("session/queue", { session_id = id }, function(q)
      show_queue(q, "agentd queue:")
    end)
  end
end

--- Removes every queued item and shows what was removed.
function M.queue_clear()
  local id = need_session()
  if id then
    conn.call("session/queue_clear", { session_id = id }, function(q)
      show_queue(q, "agentd: removed from the queue:")
    end)
  end
end

--- Opens every edit of the current session as a diff.
function M.diff()
  local s = M.current_session()
  if not s then
    need_session()
    return
  end
  require("agentd.diff").show(s.id, s.edits)
end

--- `:AgentdUndo[!] [N]`: undoes the current session's last N inputs (1), files included; with
--- `!`, files the user changed since are restored too.
---@param turns? integer
---@param force? boolean
function M.undo(turns, force)
  local id = need_session()
  if id then
    require("agentd.undo").undo(id, turns, force)
  end
end

--- `:AgentdRedo[!]`: brings back what the last undo took away.
---@param force? boolean
function M.redo(force)
  local id = need_session()
  if id then
    require("agentd.undo").redo(id, force)
  end
end

--- `:AgentdDiff`: what the agent changed in the files for the newest input, as a diff buffer.
function M.changes()
  local id = need_session()
  if id then
    require("agentd.undo").diff(id)
  end
end

--- Answers the oldest pending request of the current session: an approval with `allow`,
--- `always` or `deny` (optionally followed by a message for the model), a question with any
--- text. Without an answer, asks for one, showing the command, diff or question.
---@param answer? string
function M.respond(answer)
  local s = M.current_session()
  if not s then
    need_session()
    return
  end
  local request = s.pending[1]
  if not request then
    notify("agentd: nothing is waiting for an answer in this session", vim.log.levels.INFO)
    return
  end
  local requests = require("agentd.requests")
  if answer and answer ~= "" then
    requests.answer(s, request, answer)
  else
    requests.ask(s, request)
  end
end

--- The subcommands of `:Agentd`: each gets the text after its name and the command's range.
---@type table<string, fun(args: string, range?: {integer, integer})>
local subcommands = {
  new = function(args)
    M.new({ title = args ~= "" and args or nil })
  end,
  submit = function(args, range)
    M.submit(args, range)
  end,
  context = function(args, range)
    M.context(args, range)
  end,
  steer = function(args, range)
    M.steer(args, range)
  end,
  follow_up = function(args, range)
    M.follow_up(args, range)
  end,
  abort = function()
    M.abort()
  end,
  close = function()
    M.close()
  end,
  sessions = function()
    M.sessions()
  end,
  attach = function(args)
    if args == "" then
      M.sessions()
    else
      M.attach(args)
    end
  end,
  fork = function()
    M.fork()
  end,
  queue = function(args)
    if args == "clear" then
      M.queue_clear()
    elseif args == "" then
      M.queue()
    else
      notify(("agentd: `:Agentd queue` takes nothing or `clear`, not %q"):format(args))
    end
  end,
  diff = function()
    M.diff()
  end,
  respond = function(args)
    M.respond(args)
  end,
}

--- Runs `:Agentd {subcommand} [args]`. Errors become notifications, never a stack trace.
---@param opts table the user command's arguments
function M.command(opts)
  local name, rest = opts.args:match("^%s*(%S+)%s*(.-)%s*$")
  if not name then
    notify("agentd: `:Agentd` needs a subcommand: " .. table.concat(M.subcommand_names(), ", "))
    return
  end
  local run = subcommands[name]
  if not run then
    notify(("agentd: unknown subcommand %q (one of %s)"):format(name, table.concat(M.subcommand_names(), ", ")))
    return
  end
  local range = opts.range > 0 and { opts.line1, opts.line2 } or nil
  local ok, err = pcall(run, rest, range)
  if not ok then
    notify("agentd: " .. tostring(err))
  end
end

---@return string[]
function M.subcommand_names()
  local names = vim.tbl_keys(subcommands)
  table.sort(names)
  return names
end

--- The current session's skills and prompt commands as `/name` (none without a session).
---@return string[]
function M.command_names()
  local id = vim.b.agentd_session or current
  local result = id and conn.connected() and conn.call_sync("session/commands", { session_id = id }, 1000)
  local names = {}
  for _, c in ipairs(result and result.commands or {}) do
    names[#names + 1] = "/" .. c.name
  end
  return names
end

--- Completion for `:Agentd`: subcommands, then session ids, decisions or `clear`, and the
--- session's `/name` skills and commands as the first word of a prompt.
---@param arglead string
---@param cmdline string
---@return string[]
function M.complete(arglead, cmdline)
  local words = vim.split(vim.trim(cmdline:gsub("^%S*", "", 1)), "%s+", { trimempty = true })
  local completing_first = #words == 0 or (#words == 1 and arglead ~= "")
  local candidates
  if completing_first then
    candidates = M.subcommand_names()
  elseif words[1] == "attach" then
    candidates = {}
    local result = conn.connected() and conn.call_sync("session/list", {}, 1000)
    for _, s in ipairs(result and result.sessions or {}) do
      candidates[#candidates + 1] = s.session_id
    end
  elseif words[1] == "respond" then
    candidates = { "allow", "always", "deny" }
  elseif words[1] == "queue" then
    candidates = { "clear" }
  elseif
    (words[1] == "submit" or words[1] == "steer" or words[1] == "follow_up")
    and vim.startswith(arglead, "/")
    and (#words == 1 or (#words == 2 and arglead ~= ""))
  then
    candidates = M.command_names()
  else
    return {}
  end
  return vim.tbl_filter(function(c)
    return vim.startswith(c, arglead)
  end, candidates)
end

return M
