-- The session's skills and prompt commands complete after `:Agentd submit /`, and a command
-- is expanded by the daemon (the transcript shows what was typed).
package.path = vim.fn.fnamemodify(arg[0], ":p:h") .. "/?.lua;" .. package.path
local H = require("helpers")
local agentd = require("agentd")

local dir = os.getenv("AGENTD_TEST_WORKDIR")
vim.fn.mkdir(dir .. "/.agents/skills/lint", "p")
vim.fn.mkdir(dir .. "/.agents/commands", "p")
vim.fn.writefile({ "---", "name: lint", "description: Lints code.", "---", "Lint." }, dir .. "/.agents/skills/lint/SKILL.md")
vim.fn.writefile({ "---", "description: Greets someone", "---", "Say hello to $1." }, dir .. "/.agents/commands/greet.md")
vim.cmd.cd(dir)

vim.cmd("Agentd new commands test")
local s = H.session()
H.eq({ "/greet", "/lint" }, agentd.complete("/", "Agentd submit /"), "completion after a slash")
H.eq({ "/greet" }, agentd.complete("/g", "Agentd submit /g"), "completion of a prefix")
H.eq({}, agentd.complete("/", "Agentd submit hello /"), "only the first word is a command")

vim.cmd("Agentd submit /greet World")
H.wait_event("processing_end")
H.wait_idle()
H.contains(H.text(s.view.buf), "## You\n/greet World")
H.out("session=" .. s.id)
H.done()
