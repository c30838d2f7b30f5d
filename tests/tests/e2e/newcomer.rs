//! A newcomer with nothing but the README and docs/: from a fresh home with no daemon, the
//! README's quick start runs a first task, then docs/editors.md's set-up for each editor is
//! taken from the page itself (its snippets and its "First use" commands, never copies of
//! them) and run in the real editor against the daemon the quick start started: Neovim's
//! `init.lua` in headless Neovim, Emacs' init snippet in `emacs --batch`, the VS Code
//! extension's build-and-install lines with code-server standing in for `code`, and the Zed
//! entry's `agentctl acp` driven by acpx. Only the provider is the mock. An editor that is
//! missing fails the test under `CI=true`.
//!
//! The VS Code step stops at the installed extension: activating it needs a browser on the
//! workbench, which `editor_vscode_workbench.rs` already drives for the same `.vsix` (a second
//! browser run here would add minutes for nothing new).

use super::docs::{agentctl_lines, blocks, repo};
use agentd_tests::mock::MockProvider;
use agentd_tests::{bin_dir, prerequisite, sse};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

/// A guard against a hung editor, far above what one step takes on a loaded machine.
const STEP_BOUND: Duration = Duration::from_secs(300);

/// The newcomer's machine: a home of their own, a project, and the shell's `PATH`.
struct Newcomer {
    home: tempfile::TempDir,
    project: PathBuf,
    path: String,
    mock_url: String,
}

impl Newcomer {
    /// `program` as the newcomer runs it: in the project, with only their environment (the
    /// provider's URL is the mock's).
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> tokio::process::Command {
        let home = self.home.path();
        let mut cmd = tokio::process::Command::new(program);
        cmd.current_dir(&self.project)
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", home)
            .env("XDG_RUNTIME_DIR", home.join("run"))
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_STATE_HOME", home.join("state"))
            .env("XDG_DATA_HOME", home.join("data"))
            .env("ANTHROPIC_BASE_URL", &self.mock_url)
            .kill_on_drop(true);
        cmd
    }
}

/// Runs `cmd` with `stdin` to its end; fails naming `what` if it hangs.
async fn output(mut cmd: tokio::process::Command, stdin: &str, what: &str) -> Output {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{what} starts: {e}"));
    let mut input = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut input, stdin.as_bytes())
        .await
        .unwrap();
    drop(input);
    tokio::time::timeout(STEP_BOUND, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish"))
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The part of a page under `heading` (a whole line, `## ...` or `### ...`), up to the next
/// heading of the same or a higher level.
fn section<'a>(page: &'a str, heading: &str) -> &'a str {
    let level = heading.find(' ').unwrap();
    let start = page
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no `{heading}` section"));
    let body = &page[start + heading.len() + 2..];
    let end = body
        .match_indices("\n#")
        .find(|(i, _)| {
            let hashes = body[i + 1..].chars().take_while(|c| *c == '#').count();
            hashes <= level && body[i + 1 + hashes..].starts_with(' ')
        })
        .map_or(body.len(), |(i, _)| i);
    &body[..end]
}

/// The inline code spans of `text` (outside fenced blocks' own backticks).
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The commands a section's "First use:" sentence names that start with `prefix`.
fn first_use<'a>(section: &'a str, prefix: &str) -> Vec<&'a str> {
    let from = section.find("First use:").expect("a `First use:` sentence");
    let sentence = &section[from..];
    let end = sentence
        .char_indices()
        .find(|&(i, c)| c == '.' && sentence[i + 1..].starts_with(char::is_whitespace))
        .map_or(sentence.len(), |(i, _)| i);
    let sentence = &sentence[..end];
    let commands: Vec<&str> = code_spans(sentence)
        .into_iter()
        .filter(|c| c.starts_with(prefix))
        .collect();
    assert!(commands.len() >= 2, "{sentence}");
    commands
}

fn editors_page() -> String {
    std::fs::read_to_string(repo().join("docs/editors.md")).unwrap()
}

/// A snippet with the docs' placeholder for the checkout replaced by this one.
fn with_checkout(snippet: &str) -> String {
    assert!(
        snippet.contains("/path/to/agentd"),
        "the snippet names the checkout as /path/to/agentd:\n{snippet}"
    );
    snippet.replace(
        "/path/to/agentd",
        repo().canonicalize().unwrap().to_str().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_gets_from_the_readme_to_a_first_task_and_to_each_editor() {
    let mock = MockProvider::start().await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(home.path().join("run")).unwrap();
    std::fs::write(project.join("README.md"), "# hello\n").unwrap();
    let mut newcomer = Newcomer {
        home,
        project,
        path: std::env::var("PATH").unwrap_or_default(),
        mock_url: mock.url.clone(),
    };
    quick_start(&newcomer, &mock).await;

    // docs/editors.md: the plugins and `agentctl acp` want `agentctl` on PATH.
    newcomer.path = format!("{}:{}", bin_dir().display(), newcomer.path);
    neovim(&newcomer, &mock).await;
    emacs(&newcomer, &mock).await;
    acp(&newcomer, &mock).await;
    vscode(&newcomer).await;

    let mut stop = newcomer.command(bin_dir().join("agentctl"));
    stop.args(["daemon", "stop"]);
    let out = output(stop, "", "agentctl daemon stop").await;
    assert!(out.status.success(), "{}", text(&out));
}

/// The README's quick start: the build line is the one the harness ran (`bin_dir`), the key is
/// piped to `login`, the first task's `agentctl` starts the daemon itself, and the answer
/// arrives.
async fn quick_start(newcomer: &Newcomer, mock: &MockProvider) {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let quick = section(&readme, "## Quick start");
    let steps: Vec<&str> = blocks(quick, &["sh"])[0].lines().collect();
    assert_eq!(steps[0], "cargo build --release", "{steps:?}");
    assert_eq!(
        blocks(quick, &["sh"])[1].trim(),
        "cargo test --workspace",
        "the README's second command"
    );

    mock.push_stream(sse::shell("t1", "ls"));
    mock.push_stream(sse::text("A small project with a README."));
    let mut answer = None;
    for step in &steps[1..] {
        let args = &agentctl_lines(step)[0];
        let stdin = if args[0] == "login" {
            "quick-start-key\n"
        } else {
            ""
        };
        let mut cmd = newcomer.command(bin_dir().join("agentctl"));
        cmd.args(args);
        let out = output(cmd, stdin, step).await;
        assert!(out.status.success(), "{step}: {}", text(&out));
        if args[0] == "submit" {
            answer = Some(String::from_utf8_lossy(&out.stdout).into_owned());
        }
    }
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "a tool round and the answer");
    assert_eq!(
        requests[0].header("x-api-key"),
        Some("quick-start-key"),
        "the key `login` stored"
    );
    assert!(
        requests[1].body.to_string().contains("README.md"),
        "the model saw the tool's output"
    );
    assert_eq!(answer.unwrap().trim(), "A small project with a README.");
}

/// The newest request's last user message, as text.
fn last_prompt(mock: &MockProvider) -> String {
    let request = mock.requests().pop().expect("a request");
    request.body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(Value::to_string)
        .unwrap_or_default()
}

/// docs/editors.md's Neovim snippet as the newcomer's `init.lua`, in headless Neovim, then its
/// "First use" commands; the answer shows in the transcript and the documented status line
/// says idle. Every `<Plug>` mapping the snippet binds exists.
async fn neovim(newcomer: &Newcomer, mock: &MockProvider) {
    let Some(nvim) = super::editor_nvim::nvim() else {
        return;
    };
    let page = editors_page();
    let docs = section(&page, "### Neovim");
    let init = newcomer.home.path().join("config/nvim/init.lua");
    std::fs::create_dir_all(init.parent().unwrap()).unwrap();
    std::fs::write(&init, with_checkout(blocks(docs, &["lua"])[0])).unwrap();
    let commands = first_use(docs, ":Agentd ");
    let answer = "Hello from the mock, in Neovim.";
    mock.push_stream(sse::text(answer));
    let driver = newcomer.home.path().join("newcomer.lua");
    std::fs::write(
        &driver,
        format!(
            r#"
local function wait(what, cond)
  if not vim.wait(120000, cond, 20) then
    io.stderr:write("FAIL: timed out waiting for " .. what .. "\n")
    os.exit(1)
  end
end
for _, m in ipairs(vim.list_extend(vim.api.nvim_get_keymap("n"), vim.api.nvim_get_keymap("x"))) do
  if (m.rhs or ""):find("^<Plug>%(agentd") and vim.fn.maparg(m.rhs, m.mode) == "" then
    io.stderr:write("FAIL: the snippet maps " .. m.rhs .. ", which the plugin does not define\n")
    os.exit(1)
  end
end
for _, command in ipairs(vim.json.decode([==[{commands}]==])) do
  vim.cmd(command:sub(2))
  wait("a session after " .. command, function() return require("agentd").current_session() ~= nil end)
end
local function transcript()
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(buf):find("^agentd://") then
      return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
    end
  end
  return ""
end
wait("the answer in the transcript", function() return transcript():find({answer:?}, 1, true) ~= nil end)
local status = function() return vim.api.nvim_eval_statusline(vim.o.statusline, {{}}).str end
wait("the status line to say idle", function() return status():find("idle", 1, true) ~= nil end)
io.stdout:write("transcript:\n" .. transcript() .. "\nstatus line: " .. status() .. "\n")
os.exit(0)
"#,
            commands = serde_json::to_string(&commands).unwrap(),
        ),
    )
    .unwrap();
    let mut cmd = newcomer.command(&nvim);
    cmd.args(["--headless", "-i", "NONE", "-c"])
        .arg(format!("luafile {}", driver.display()));
    let out = output(cmd, "", "nvim").await;
    assert!(out.status.success(), "Neovim:\n{}", text(&out));
    let submitted = commands
        .last()
        .unwrap()
        .trim_start_matches(":Agentd submit ");
    assert!(last_prompt(mock).contains(submitted), "{}", text(&out));
}

/// docs/editors.md's Emacs snippet as the newcomer's init file, in `emacs --batch`, then its
/// "First use" commands through `M-x` (`call-interactively`; the prompt is read from stdin as
/// batch Emacs reads the minibuffer); the answer shows in the transcript, `agentd-status-mode`
/// says idle in the mode line, and the snippet's prefix key reaches `agentd-new`.
async fn emacs(newcomer: &Newcomer, mock: &MockProvider) {
    let Some(emacs) = agentd_tests::program("emacs") else {
        return;
    };
    let page = editors_page();
    let docs = section(&page, "### Emacs");
    let init = newcomer.home.path().join(".emacs.d/init.el");
    std::fs::create_dir_all(init.parent().unwrap()).unwrap();
    std::fs::write(&init, with_checkout(blocks(docs, &["elisp"])[0])).unwrap();
    let commands: Vec<String> = first_use(docs, "M-x ")
        .iter()
        .map(|c| format!("(call-interactively #'{})", c.trim_start_matches("M-x ")))
        .collect();
    let answer = "Hello from the mock, in Emacs.";
    mock.push_stream(sse::text(answer));
    let driver = format!(
        r#"(progn
  (defun newcomer-wait (what pred)
    (with-timeout (120 (princ (format "FAIL: timed out waiting for %s\n" what)) (kill-emacs 1))
      (while (not (funcall pred)) (accept-process-output nil 0.02))))
  {commands}
  (newcomer-wait "the answer in the transcript"
    (lambda () (seq-some (lambda (b) (with-current-buffer b (string-search {answer:?} (buffer-string))))
                         (buffer-list))))
  ;; Batch Emacs formats no mode line: its `:eval' entries are evaluated as redisplay would.
  (defun newcomer-mode-line ()
    (mapconcat (lambda (e) (if (eq (car-safe e) :eval) (format "%s" (eval (cadr e) t)) ""))
               global-mode-string ""))
  (newcomer-wait "the mode line to say idle"
    (lambda () (string-search "idle" (newcomer-mode-line))))
  (unless (eq (lookup-key global-map (kbd "C-c a n")) 'agentd-new)
    (princ "FAIL: C-c a n is not agentd-new\n") (kill-emacs 1))
  (princ (format "mode line: %s\n" (newcomer-mode-line)))
  (kill-emacs 0))"#,
        commands = commands.join("\n  "),
    );
    let mut cmd = newcomer.command(&emacs);
    cmd.arg("--batch")
        .arg("-l")
        .arg(&init)
        .args(["--eval", &driver]);
    let prompt = "What is this project?";
    let out = output(cmd, &format!("{prompt}\n"), "emacs").await;
    assert!(
        out.status.success() && !text(&out).contains("FAIL"),
        "Emacs:\n{}",
        text(&out)
    );
    assert!(last_prompt(mock).contains(prompt), "{}", text(&out));
}

/// docs/editors.md's Zed entry (`command` and `args`) is what acpx runs as its agent, and the
/// page's try-it-by-hand line answers `initialize`.
async fn acp(newcomer: &Newcomer, mock: &MockProvider) {
    let acpx_bin = repo().join("target/acpx/node_modules/.bin");
    if !prerequisite(
        "acpx with Node 22 (target/acpx, installed by .ci/run)",
        acpx_bin.join("acpx").is_file() && acpx_bin.join("node").is_file(),
    ) {
        return;
    }
    let page = editors_page();
    let docs = section(
        &page,
        "## ACP editors (Zed, JetBrains, CodeCompanion, avante.nvim, agent-shell)",
    );
    let zed: Value = serde_json::from_str(blocks(docs, &["json"])[0]).unwrap();
    let server = &zed["agent_servers"]["agentd"];
    let mut agent = vec![server["command"].as_str().unwrap().to_owned()];
    agent.extend(
        server["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned()),
    );

    let by_hand = code_spans(docs)
        .into_iter()
        .find(|c| c.ends_with("| agentctl acp"))
        .expect("a try-it-by-hand line");
    let mut cmd = newcomer.command("sh");
    cmd.args(["-c", by_hand]);
    let out = output(cmd, "", by_hand).await;
    let answer: Value = serde_json::from_str(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("{by_hand}: {e}\n{}", text(&out)));
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");

    let answer = "Hello from the mock, over ACP.";
    mock.push_stream(sse::text(answer));
    let mut cmd = newcomer.command(acpx_bin.join("acpx"));
    cmd.env("PATH", format!("{}:{}", acpx_bin.display(), newcomer.path))
        .args(["--agent", &agent.join(" ")])
        .args(["--format", "json", "--cwd"])
        .arg(&newcomer.project)
        .args(["exec", "Say hello"]);
    let out = output(cmd, "", "acpx").await;
    assert!(out.status.success(), "acpx:\n{}", text(&out));
    let said: String = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| {
            m["params"]["update"]["content"]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(said, answer, "{}", text(&out));
}

/// The files of `from` a fresh clone has (tracked ones: no `node_modules`, `out` or `.vsix`),
/// copied under `to`.
fn clone_part(from: &str, to: &Path) {
    let listed = std::process::Command::new("git")
        .args(["ls-files", "-z", from])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(listed.status.success(), "git ls-files");
    for file in listed.stdout.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let file = std::str::from_utf8(file).unwrap();
        let target = to.join(file);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(repo().join(file), target).unwrap();
    }
}

/// docs/editors.md's VS Code lines, run as written from a fresh clone of the extension, with
/// `code` a shim for code-server (`.ci/run` installs it, and code-server's own
/// `--install-extension` is VS Code's): the `.vsix` builds and installs under the name and
/// version of the extension's manifest. npm works offline from the cache `.ci/run`'s `npm ci`
/// filled, with the harness's own home (tests never reach the network); code-server gets the
/// newcomer's.
async fn vscode(newcomer: &Newcomer) {
    let Some(_) = super::editor_vscode::toolchain() else {
        return;
    };
    let Some(wb) = super::editor_vscode_workbench::workbench() else {
        return;
    };
    let page = editors_page();
    let docs = section(&page, "### VS Code");
    let lines = blocks(docs, &["sh"])[0];

    let clone = newcomer.home.path().join("clone");
    clone_part("editors/vscode", &clone);
    let shims = newcomer.home.path().join("shims");
    std::fs::create_dir_all(&shims).unwrap();
    let data = newcomer.home.path().join("code-server");
    let code = shims.join("code");
    std::fs::write(
        &code,
        format!(
            "#!/bin/sh\nHOME={home} PATH={node_dir}:$PATH exec {node} {entry} --user-data-dir {data}/data --extensions-dir {data}/extensions --disable-telemetry --disable-update-check \"$@\"\n",
            node = wb.node.display(),
            home = newcomer.home.path().display(),
            node_dir = wb.node.parent().unwrap().display(),
            entry = wb.code_server.display(),
            data = data.display(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&code, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let mut cmd = tokio::process::Command::new("sh");
    cmd.args(["-ec", lines])
        .current_dir(&clone)
        .env(
            "PATH",
            format!(
                "{}:{}",
                shims.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("npm_config_offline", "true")
        // The gallery on a closed local port: nothing is looked up on the network.
        .env(
            "EXTENSIONS_GALLERY",
            r#"{"serviceUrl":"http://127.0.0.1:9/gallery","itemUrl":"http://127.0.0.1:9/item"}"#,
        )
        .kill_on_drop(true);
    let out = output(cmd, "", "the VS Code lines").await;
    assert!(
        out.status.success() && text(&out).contains("successfully installed"),
        "docs/editors.md's VS Code lines:\n{lines}\n{}",
        text(&out)
    );

    let manifest: Value =
        serde_json::from_slice(&std::fs::read(repo().join("editors/vscode/package.json")).unwrap())
            .unwrap();
    let id = format!(
        "{}.{}@{}",
        manifest["publisher"].as_str().unwrap(),
        manifest["name"].as_str().unwrap(),
        manifest["version"].as_str().unwrap()
    );
    let mut list = tokio::process::Command::new(&code);
    list.args(["--list-extensions", "--show-versions"])
        .kill_on_drop(true);
    let out = output(list, "", "code --list-extensions").await;
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.trim() == id),
        "{id} is not installed:\n{}",
        text(&out)
    );
}
