//! The Neovim plugin (`editors/nvim`) in the real editor, headless, against the real daemon and
//! the mock provider: each test scripts the mock, runs one Lua scenario from
//! `editors/nvim/tests/` under `nvim --headless -u NONE -l`, and checks its exit status and what
//! the daemon and the mock saw.

use agentd_tests::mock::{Chunk, MockProvider, Reply};
use agentd_tests::{TestDaemon, bin_dir, prerequisite, sse};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Neovim 0.10 or newer: `AGENTD_TEST_NVIM` (the one `.ci/run` installs), else `nvim` on PATH.
/// An older one (Debian's 0.7 hangs on `-l`) counts as missing.
pub(crate) fn nvim() -> Option<PathBuf> {
    let found = match std::env::var_os("AGENTD_TEST_NVIM") {
        Some(p) => Some(PathBuf::from(p)).filter(|p| p.is_file()),
        None => std::env::var("PATH")
            .unwrap_or_default()
            .split(':')
            .map(|d| Path::new(d).join("nvim"))
            .find(|p| p.is_file()),
    };
    let recent = found.as_ref().is_some_and(|p| {
        std::process::Command::new(p)
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| {
                let text = String::from_utf8_lossy(&o.stdout).into_owned();
                let version = text.lines().next()?.strip_prefix("NVIM v")?.to_owned();
                let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
                Some((parts.next()??, parts.next()??) >= (0, 10))
            })
            .unwrap_or(false)
    });
    prerequisite(
        "Neovim 0.10 or newer (AGENTD_TEST_NVIM, or nvim on PATH)",
        recent,
    )
    .then_some(found)
    .flatten()
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../editors/nvim/tests")
        .join(name)
}

/// Runs the scenario `name` in `nvim` with the daemon's environment; returns its output after
/// asserting it passed.
async fn run(nvim: &Path, daemon: &TestDaemon, name: &str, workdir: &Path) -> Output {
    let out = start(nvim, daemon, name, workdir, &[])
        .wait_with_output()
        .await
        .expect("nvim runs");
    passed(name, &out, daemon);
    out
}

/// Starts the scenario `name` (with extra environment) without waiting for it.
fn start(
    nvim: &Path,
    daemon: &TestDaemon,
    name: &str,
    workdir: &Path,
    env: &[(&str, &str)],
) -> tokio::process::Child {
    let mut cmd = tokio::process::Command::from(daemon.program(nvim));
    cmd.args(["--headless", "-u", "NONE", "-i", "NONE", "-l"])
        .arg(script(name))
        .env("AGENTD_TEST_WORKDIR", workdir)
        .env("AGENTD_TEST_AGENTCTL", bin_dir().join("agentctl"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        // An empty value unsets the variable.
        if v.is_empty() {
            cmd.env_remove(k);
        } else {
            cmd.env(k, v);
        }
    }
    cmd.spawn().expect("nvim starts")
}

fn passed(name: &str, out: &Output, daemon: &TestDaemon) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("nvim test passed"),
        "{name} failed ({}):\n{stdout}\n{}\n--- agentd log ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        daemon.log_text()
    );
}

/// The session id a scenario printed (`session=<id>`).
fn session_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("session="))
        .expect("the scenario printed its session")
        .to_owned()
}

async fn daemon() -> (MockProvider, TestDaemon, tempfile::TempDir) {
    let mock = MockProvider::start().await.expect("mock starts");
    let daemon = TestDaemon::start(&mock.url).await.expect("daemon starts");
    (mock, daemon, tempfile::tempdir().expect("tempdir"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_submits_and_renders_a_tool_round_trip() {
    let Some(nvim) = nvim() else { return };
    let (mock, daemon, workdir) = daemon().await;
    std::fs::write(workdir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    // Reasoning, text, then two calls: a short output and a long one.
    let event = |data: serde_json::Value| {
        Chunk::Data(format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap()
        ))
    };
    let mut first = vec![
        sse::message_start(),
        event(json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""}})),
        event(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "Considering the files.\nSecond thought."}})),
        event(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "signature_delta", "signature": "sig"}})),
        event(json!({"type": "content_block_stop", "index": 0})),
    ];
    first.extend(sse::text_block(1, "Let me look."));
    first.extend(sse::tool_block(
        2,
        "t1",
        "shell",
        &json!({"command": "echo hi-from-tool"}),
    ));
    first.extend(sse::tool_block(
        3,
        "t2",
        "shell",
        &json!({"command": "seq 1 30"}),
    ));
    first.extend(sse::message_end("tool_use"));
    mock.push_stream(first);
    mock.push_stream(sse::tools(
        "",
        &[(
            "t3",
            "edit_file",
            json!({"file_path": "notes.txt", "old_string": "beta", "new_string": "gamma"}),
        )],
    ));
    mock.push_stream(sse::text("All done here."));
    // A ready MCP server for the transcript (a prerequisite under CI).
    let time = crate::mcp::mcp_python("mcp-server-time");
    let env: Vec<(&str, &str)> = time
        .iter()
        .map(|t| ("AGENTD_TEST_MCP_TIME", t.to_str().unwrap()))
        .collect();
    let out = start(&nvim, &daemon, "submit.lua", workdir.path(), &env)
        .wait_with_output()
        .await
        .expect("nvim runs");
    passed("submit.lua", &out, &daemon);

    let session = session_of(&out);
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "three model calls");
    let results = requests[1].body["messages"].to_string();
    assert!(results.contains("hi-from-tool"), "{results}");
    assert_eq!(
        std::fs::read_to_string(workdir.path().join("notes.txt")).unwrap(),
        "alpha\ngamma\n"
    );
    let mut client = daemon.client().await.unwrap();
    let snapshot = client
        .call("session/get", json!({"session_id": session}))
        .await
        .unwrap();
    assert_eq!(snapshot["state"], "closed");
    assert_eq!(snapshot["title"], "nvim submit test");
    assert_eq!(
        snapshot["cwd"],
        workdir.path().canonicalize().unwrap().display().to_string()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steers_and_queues_a_follow_up_while_the_session_works() {
    let Some(nvim) = nvim() else { return };
    let (mock, daemon, workdir) = daemon().await;
    mock.push_stream(sse::shell(
        "t1",
        "while [ ! -f go ]; do sleep 0.05; done; echo released",
    ));
    mock.push_stream(sse::text("Steered."));
    mock.push_stream(sse::text("Docs written."));
    run(&nvim, &daemon, "steer.lua", workdir.path()).await;

    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let second = requests[1].body["messages"].to_string();
    assert!(second.contains("focus on the tests"), "{second}");
    assert!(!second.contains("then write the docs"), "{second}");
    let third = requests[2].body["messages"].to_string();
    assert!(third.contains("then write the docs"), "{third}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborts_with_one_key_then_clears_the_queue_and_shows_a_provider_error() {
    let Some(nvim) = nvim() else { return };
    let (mock, daemon, workdir) = daemon().await;
    mock.push_stream(sse::shell("t1", "sleep 1000 & echo PID=$!; wait"));
    mock.push(Reply::Status(
        401,
        vec![],
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#
            .into(),
    ));
    let out = run(&nvim, &daemon, "abort.lua", workdir.path()).await;
    let pid = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("pid=").map(str::to_owned))
        .expect("the scenario printed the pid");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(
        stat.is_empty()
            || stat
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
        "the command's process {pid} still runs: {stat}"
    );
    assert_eq!(
        mock.requests().len(),
        2,
        "the cleared follow-up never ran; the next submit did"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attaches_to_a_session_started_by_agentctl_and_forks_it() {
    let Some(nvim) = nvim() else { return };
    let (mock, daemon, workdir) = daemon().await;
    mock.push_stream(sse::text("Reply to agentctl."));
    let cwd = workdir.path().display().to_string();
    let created = daemon
        .agentctl(
            &["--json", "new", "--title", "from agentctl", "--cwd", &cwd],
            None,
        )
        .await
        .unwrap();
    assert!(created.status.success(), "{created:?}");
    let snapshot: serde_json::Value = serde_json::from_slice(&created.stdout).unwrap();
    let session = snapshot["session_id"].as_str().unwrap().to_owned();
    let submitted = daemon
        .agentctl(
            &["submit", "--follow", &session, "hello from agentctl"],
            None,
        )
        .await
        .unwrap();
    assert!(submitted.status.success(), "{submitted:?}");

    mock.push_stream(sse::text("Second reply."));
    mock.push_stream(sse::text("Third reply."));
    let out = start(
        &nvim,
        &daemon,
        "attach.lua",
        workdir.path(),
        &[("AGENTD_TEST_SESSION", &session)],
    )
    .wait_with_output()
    .await
    .unwrap();
    passed("attach.lua", &out, &daemon);

    let fork = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("fork=").map(str::to_owned))
        .expect("the scenario printed the fork");
    let mut client = daemon.client().await.unwrap();
    let forked = client
        .call("session/get", json!({"session_id": fork}))
        .await
        .unwrap();
    assert_eq!(forked["forked_from"]["session_id"], session.as_str());
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let with_selection = requests[1].body["messages"].to_string();
    assert!(
        with_selection.contains(
            "second question\\n\\nctx.lua lines 1-2:\\n```lua\\nlocal x = 1\\nlocal y = 2\\n```"
        ),
        "{with_selection}"
    );
}

/// Waits until `path` exists (the scenario's signal), or the scenario fails first.
async fn wait_file(path: &Path, nvim: &mut tokio::process::Child) {
    let deadline = std::time::Instant::now() + agentd_tests::WAIT;
    while !path.exists() {
        if let Ok(Some(status)) = nvim.try_wait() {
            panic!("the scenario ended ({status}) before {}", path.display());
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {}",
            path.display()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_after_a_daemon_restart_without_loss_or_duplicates() {
    let Some(nvim) = nvim() else { return };
    let (mock, mut daemon, workdir) = daemon().await;
    mock.push_stream(sse::text("One."));
    mock.push_stream(sse::text("Two."));
    mock.push_stream(sse::text("Three."));
    let mut child = start(&nvim, &daemon, "reconnect.lua", workdir.path(), &[]);
    wait_file(&workdir.path().join("restart-now"), &mut child).await;
    daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    daemon.restart().await.unwrap();

    // Input from another client while the plugin is away or catching up.
    let mut client = daemon.client().await.unwrap();
    let sessions = client.call("session/list", json!({})).await.unwrap();
    let session = sessions["sessions"][0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    client.run(&session, "second").await.unwrap();
    std::fs::write(workdir.path().join("submitted"), "").unwrap();

    let out = child.wait_with_output().await.unwrap();
    passed("reconnect.lua", &out, &daemon);
    assert_eq!(session_of(&out), session);

    // What the plugin applied is the daemon's whole log, once each.
    let seqs: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("seqs="))
        .expect("the scenario printed its seqs")
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    let last = client
        .call("session/get", json!({"session_id": session}))
        .await
        .unwrap()["last_seq"]
        .as_u64()
        .unwrap();
    assert_eq!(seqs, (1..=last).collect::<Vec<_>>());
    assert_eq!(mock.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completes_skills_and_commands_and_the_daemon_expands_them() {
    let Some(nvim) = nvim() else { return };
    let (mock, daemon, workdir) = daemon().await;
    mock.push_stream(sse::text("Hello, World."));
    run(&nvim, &daemon, "commands.lua", workdir.path()).await;
    let requests = mock.wait_requests(1).await;
    assert!(
        requests[0].body["messages"]
            .to_string()
            .contains("Say hello to World."),
        "{}",
        requests[0].body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkhealth_reports_the_daemon_and_the_help_tags_build() {
    let Some(nvim) = nvim() else { return };
    let (_mock, daemon, workdir) = daemon().await;
    run(&nvim, &daemon, "health.lua", workdir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_the_daemon_through_agentctl_when_none_answers() {
    let Some(nvim) = nvim() else { return };
    let (mock, mut daemon, workdir) = daemon().await;
    // Its environment (socket, directories, the mock provider) stays; the daemon goes.
    daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    mock.push_stream(sse::text("Hello."));
    let out = run(&nvim, &daemon, "autostart.lua", workdir.path()).await;
    let pid: i32 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("pid=").map(str::to_owned))
        .expect("the scenario printed the daemon's pid")
        .parse()
        .unwrap();
    // The daemon agentctl started outlives the editor; stop it.
    let mut client = daemon.client().await.unwrap();
    let info = client.call("daemon/info", json!({})).await.unwrap();
    assert_eq!(info["pid"], pid);
    client.call("daemon/shutdown", json!({})).await.unwrap();
    let deadline = std::time::Instant::now() + agentd_tests::WAIT;
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            !s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
    {
        assert!(
            std::time::Instant::now() < deadline,
            "agentd {pid} did not stop"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_messages_split_across_reads() {
    let Some(nvim) = nvim() else { return };
    let (_mock, daemon, workdir) = daemon().await;
    run(&nvim, &daemon, "framing.lua", workdir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_and_questions_are_asked_and_answered() {
    let Some(nvim) = nvim() else { return };
    let (mock, daemon, workdir) = daemon().await;
    mock.push_stream(sse::tools(
        "",
        &[("c1", "shell", json!({"command": "echo approved > out.txt"}))],
    ));
    mock.push_stream(sse::tools(
        "",
        &[(
            "w1",
            "write_file",
            json!({"file_path": "notes.txt", "content": "one\ntwo\n"}),
        )],
    ));
    mock.push_stream(sse::tools(
        "",
        &[(
            "q1",
            "ask_user",
            json!({"question": "Which color?", "options": ["red", "blue"]}),
        )],
    ));
    mock.push_stream(sse::text("Understood."));
    run(&nvim, &daemon, "approval.lua", workdir.path()).await;

    assert_eq!(
        std::fs::read_to_string(workdir.path().join("out.txt")).unwrap(),
        "approved\n"
    );
    assert!(
        !workdir.path().join("notes.txt").exists(),
        "the denied write did not run"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let denied = requests[2].body["messages"].to_string();
    assert!(denied.contains("not now"), "{denied}");
    let answered = requests[3].body["messages"].to_string();
    assert!(answered.contains("blue"), "{answered}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_a_lagged_stream_without_loss_or_duplicates() {
    let Some(nvim) = nvim() else { return };
    let (mock, daemon, workdir) = daemon().await;
    // Far more events than the daemon buffers for a subscriber that does not read.
    mock.push_stream(sse::text(&vec!["w"; 6000].join(" ")));
    let mut child = start(&nvim, &daemon, "lagged.lua", workdir.path(), &[]);
    let ready = workdir.path().join("ready");
    wait_file(&ready, &mut child).await;
    let session = std::fs::read_to_string(&ready).unwrap().trim().to_owned();

    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    // This client does not subscribe (on a loaded machine it could lag too): it waits for the
    // session to be idle again.
    let mut client = daemon.client().await.unwrap();
    let params = json!({"session_id": session});
    client
        .call(
            "session/submit",
            json!({"session_id": session, "text": "talk a lot"}),
        )
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + agentd_tests::WAIT;
    let last = loop {
        let snapshot = client.call("session/get", params.clone()).await.unwrap();
        if snapshot["state"] == "idle" && snapshot["turns"].as_u64() == Some(2) {
            break snapshot["last_seq"].as_u64().unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the flood did not end"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    // Written whole, then renamed: the scenario reads it as soon as it exists.
    let flooded = workdir.path().join("flooded");
    std::fs::write(flooded.with_extension("tmp"), last.to_string()).unwrap();
    std::fs::rename(flooded.with_extension("tmp"), flooded).unwrap();

    let out = child.wait_with_output().await.unwrap();
    passed("lagged.lua", &out, &daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attaching_to_a_waiting_session_prompts_only_for_what_is_pending() {
    let Some(nvim) = nvim() else { return };
    let (mock, daemon, workdir) = daemon().await;
    mock.push_stream(sse::shell("c1", "echo one"));
    mock.push_stream(sse::shell("c2", "echo two > two.txt"));
    mock.push_stream(sse::text("Understood."));
    let mut client = daemon.client().await.unwrap();
    let session = daemon
        .create_session(
            &mut client,
            workdir.path(),
            json!({"title": "waiting", "config": {"approval": {"mode": "ask"}}}),
        )
        .await
        .unwrap();
    client.subscribe(&session, Some(0)).await.unwrap();
    client
        .call(
            "session/submit",
            json!({"session_id": session, "text": "go"}),
        )
        .await
        .unwrap();
    let first = client
        .events_until("approval_requested", |_| true)
        .await
        .unwrap();
    let request = first.last().unwrap()["data"]["request_id"].clone();
    client
        .call(
            "session/respond",
            json!({"session_id": session, "request_id": request, "decision": "allow"}),
        )
        .await
        .unwrap();
    client
        .events_until("approval_requested", |e| e["data"]["call_id"] == "c2")
        .await
        .unwrap();

    let out = start(
        &nvim,
        &daemon,
        "approval_attach.lua",
        workdir.path(),
        &[("AGENTD_TEST_SESSION", &session)],
    )
    .wait_with_output()
    .await
    .unwrap();
    passed("approval_attach.lua", &out, &daemon);
    assert!(
        !workdir.path().join("two.txt").exists(),
        "the denied command did not run"
    );
    assert_eq!(mock.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shows_agentctls_refusal_of_a_socket_and_connects_to_nothing() {
    use std::os::unix::fs::PermissionsExt;
    let Some(nvim) = nvim() else { return };
    let (_mock, daemon, workdir) = daemon().await;
    // Without XDG_RUNTIME_DIR the socket is in <TMPDIR>/agentd-UID, which is open to others here.
    let tmp = tempfile::tempdir().unwrap();
    let uid = nix::unistd::geteuid().as_raw();
    let runtime = tmp.path().join(format!("agentd-{uid}"));
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o777)).unwrap();
    let says = format!(
        "refusing to use the runtime directory: {} has mode 0777",
        runtime.display()
    );
    let out = start(
        &nvim,
        &daemon,
        "untrusted.lua",
        workdir.path(),
        &[
            ("AGENTD_TEST_EXPECT", &says),
            ("TMPDIR", tmp.path().to_str().unwrap()),
            ("AGENTD_SOCKET", ""),
            ("XDG_RUNTIME_DIR", ""),
        ],
    )
    .wait_with_output()
    .await
    .unwrap();
    passed("untrusted.lua", &out, &daemon);

    // Another user's server on the socket the `socket` option names: agentctl still asks the
    // kernel who serves it, and the plugin sends it nothing.
    if prerequisite(
        "root, to run a server as another user",
        nix::unistd::geteuid().is_root(),
    ) && agentd_tests::program("socat").is_some()
    {
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let socket = tmp.path().join("other.sock");
        let got = tmp.path().join("got");
        let mut server = std::process::Command::new("socat");
        std::os::unix::process::CommandExt::uid(&mut server, 4242);
        std::os::unix::process::CommandExt::gid(&mut server, 4242);
        server
            .arg(format!("UNIX-LISTEN:{},mode=666", socket.display()))
            .arg(format!("OPEN:{},creat,append", got.display()));
        let mut server = tokio::process::Command::from(server)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        crate::eventually("the other user's server to listen", async || {
            socket.exists()
        })
        .await;
        let says = format!(
            "the process serving {} runs as uid 4242, not as you",
            socket.display()
        );
        let out = start(
            &nvim,
            &daemon,
            "untrusted.lua",
            workdir.path(),
            &[
                ("AGENTD_TEST_EXPECT", &says),
                ("AGENTD_TEST_SOCKET", socket.to_str().unwrap()),
            ],
        )
        .wait_with_output()
        .await
        .unwrap();
        passed("untrusted.lua", &out, &daemon);
        tokio::time::timeout(agentd_tests::WAIT, server.wait())
            .await
            .expect("the server ends with its connection")
            .unwrap();
        let sent = std::fs::read(&got).unwrap_or_default();
        assert!(sent.is_empty(), "sent {:?}", String::from_utf8_lossy(&sent));
    }
    // Neither `Agentd new` reached the daemon: no session exists.
    let mut client = daemon.client().await.unwrap();
    let list = client.call("session/list", json!({})).await.unwrap();
    assert_eq!(list["sessions"], json!([]), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_redo_and_the_agents_changes() {
    let Some(nvim) = nvim() else { return };
    let (mock, daemon, workdir) = daemon().await;
    std::fs::write(workdir.path().join("hello.txt"), "first\nold line\nlast\n").unwrap();
    mock.push_stream(sse::tools(
        "",
        &[(
            "c1",
            "edit_file",
            json!({"file_path": "hello.txt", "old_string": "old line", "new_string": "new line"}),
        )],
    ));
    mock.push_stream(sse::text("Edited."));
    run(&nvim, &daemon, "undo.lua", workdir.path()).await;
}
