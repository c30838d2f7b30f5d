--- `:checkhealth agentd`: the Neovim version, the socket agentctl names, whether the daemon
--- answers (and what it runs), its providers, and whether agentctl is there to find and start it.
local M = {}

function M.check()
  local health = vim.health
  local config = require("agentd.config")
  local conn = require("agentd.conn")

  health.start("agentd: Neovim")
  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. tostring(vim.version()) .. " (0.10 or newer)")
  else
    health.error("Neovim 0.10 or newer is needed (vim.uv, vim.system, vim.fs.root)")
  end

  health.start("agentd: daemon")
  local info, err = conn.call_sync("daemon/info", {}, 3000)
  if info then
    health.info("socket: " .. tostring(conn.socket()) .. " (from agentctl socket-path)")
    health.ok(("agentd %s (protocol %d), pid %d, %d session(s)"):format(
      info.version,
      info.protocol,
      info.pid,
      info.sessions
    ))
    local ready = 0
    for _, p in ipairs(info.providers or {}) do
      if p.has_key then
        ready = ready + 1
        health.ok(("provider %s (%s), default model %s"):format(p.name, p.kind, p.default_model))
      else
        health.info(("provider %s (%s) has no key, so it cannot be used"):format(p.name, p.kind))
      end
    end
    if ready == 0 then
      health.warn("no provider has a key: sessions cannot reach a model", {
        "set ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY for the daemon, or configure a provider",
      })
    end
  elseif config.autostart() then
    health.warn("agentd does not answer: " .. tostring(err), {
      "it starts on first use through agentctl",
    })
  else
    health.error("agentd does not answer and auto-start is off: " .. tostring(err), {
      "start it with `agentd &` or `systemctl --user start agentd.socket`",
    })
  end

  health.start("agentd: agentctl")
  local agentctl = config.options.agentctl
  if vim.fn.executable(agentctl) == 1 then
    local out = vim.system({ agentctl, "--version" }, { text = true }):wait(5000)
    health.ok(("%s: %s"):format(vim.fn.exepath(agentctl), vim.trim(out.stdout or "")))
  else
    health.error(("agentctl (%q) is not executable: the plugin asks it where agentd listens"):format(agentctl), {
      "put agentctl on PATH, or set it with require('agentd').setup({ agentctl = '/path/to/agentctl' })",
    })
  end
end

return M
