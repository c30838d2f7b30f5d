//! Sessions whose tools run over SSH, against a real OpenSSH server on 127.0.0.1 started by
//! the test (`agentd_tests::sshd`): the daemon, the mock provider and the tools are real, and
//! "the remote machine" is this one reached through `sshd`, so the test can look at the
//! remote files and processes directly.

use crate::processes::wait_for;
use crate::{Setup, data_of, of_kind};
use agentd_tests::mock::MockProvider;
use agentd_tests::sse;
use agentd_tests::sshd::SshServer;
use agentd_tests::{RawClient, TestDaemon};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A daemon whose config names `server` as `[hosts.box]`, with a session on it in a fresh
/// remote directory.
async fn remote_setup(server: &SshServer) -> Setup {
    remote_setup_with(server, "").await
}

/// Like [`remote_setup`], with more keys for `[hosts.box]`.
async fn remote_setup_with(server: &SshServer, host_keys: &str) -> Setup {
    let mock = MockProvider::start().await.expect("mock starts");
    let daemon = TestDaemon::start_with_config(
        &[
            ("ANTHROPIC_BASE_URL", &mock.url),
            ("ANTHROPIC_API_KEY", "test-key"),
        ],
        Some(&format!("{}{host_keys}", server.host_entry("box"))),
    )
    .await
    .expect("daemon starts");
    let mut client = daemon.client().await.expect("client connects");
    let workdir = tempfile::tempdir().expect("tempdir");
    let snapshot = client
        .call(
            "session/create",
            json!({"environment": {"kind": "ssh", "host": "box",
                "cwd": workdir.path().display().to_string()}}),
        )
        .await
        .expect("the remote session is created");
    assert_eq!(snapshot["environment"]["kind"], "ssh", "{snapshot}");
    assert_eq!(snapshot["cwd"], workdir.path().display().to_string());
    Setup {
        mock,
        daemon,
        session: snapshot["session_id"].as_str().unwrap().to_owned(),
        client,
        workdir,
    }
}

/// The running sshd, or `None` (the test skips; under CI=true it fails instead).
fn server() -> Option<SshServer> {
    SshServer::start().expect("sshd starts")
}

/// Processes whose command line holds `marker`, but not the `bash -c` that started them.
fn live_with(marker: &str) -> Vec<i32> {
    crate::live_processes(|args| {
        let text = args.join(" ");
        text.contains(marker) && !text.contains("bash -c")
    })
}

/// A marker no other test's process carries: `sleep 600 0.<marker>` sleeps 600 s.
fn marker() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("0.{:07}{n:03}7", std::process::id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_edit_write_shell_grep_glob_and_list_run_on_the_remote() {
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    let dir = s.workdir.path().to_owned();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/lib.rs"), "fn old() {}\nfn other() {}\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "old notes\n").unwrap();
    s.mock.push_stream(sse::tools(
        "",
        &[("t1", "read_file", json!({"file_path": "src/lib.rs"}))],
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "t2",
            "edit_file",
            json!({"file_path": "src/lib.rs", "old_string": "fn old() {}", "new_string": "fn new() {}"}),
        )],
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "t3",
            "write_file",
            json!({"file_path": "deep/er/made.txt", "content": "made remotely\n"}),
        )],
    ));
    s.mock.push_stream(sse::shell(
        "t4",
        "pwd; echo \"visible=$AGENTD_TEST_VISIBLE secret=${AGENTD_TEST_SECRET_TOKEN:-filtered} key=${ANTHROPIC_API_KEY:-absent}\"; echo \"client=[$SSH_CLIENT] connection=${SSH_CONNECTION:+set}\"; echo to-stderr >&2; exit 3",
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[("t5", "grep", json!({"pattern": "fn (new|other)"}))],
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[("t6", "glob", json!({"pattern": "**/*.txt"}))],
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[("t7", "read_file", json!({"file_path": "missing.txt"}))],
    ));
    s.mock.push_stream(sse::text("done"));
    let events = s.run("work remotely").await;
    let outputs = crate::tool_outputs(&events);
    assert_eq!(outputs.len(), 7, "{outputs:?}");
    assert!(outputs[0].contains("fn old() {}"), "{}", outputs[0]);
    assert_eq!(
        std::fs::read_to_string(dir.join("src/lib.rs")).unwrap(),
        "fn new() {}\nfn other() {}\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("deep/er/made.txt")).unwrap(),
        "made remotely\n"
    );
    let shell = &outputs[3];
    assert!(shell.contains(&dir.display().to_string()), "{shell}");
    assert!(
        shell.contains("visible=remote-only secret=filtered key=absent"),
        "the remote's environment, filtered; never the daemon's: {shell}"
    );
    assert!(
        shell.contains("client=[] connection=set"),
        "no SSH_CLIENT, with which bash would source ~/.bashrc for every command: {shell}"
    );
    assert!(shell.contains("to-stderr"), "{shell}");
    assert!(shell.contains("3"), "the exit code is reported: {shell}");
    assert_eq!(
        outputs[4],
        "src/lib.rs:1:fn new() {}\nsrc/lib.rs:2:fn other() {}"
    );
    let globbed: Vec<&str> = outputs[5].lines().collect();
    assert_eq!(
        {
            let mut g = globbed.clone();
            g.sort();
            g
        },
        vec!["deep/er/made.txt", "notes.txt"],
        "{}",
        outputs[5]
    );
    assert_eq!(globbed[0], "deep/er/made.txt", "newest first");
    assert!(
        outputs[6].contains("file not found") && outputs[6].contains("missing.txt"),
        "{}",
        outputs[6]
    );
    // The system prompt describes the remote machine.
    let requests = s.mock.requests();
    let system = requests[0].body["system"].to_string();
    assert!(system.contains("over ssh on box"), "{system}");
}

/// The system prompt's git snapshot and project docs are read on the remote, in the session's
/// remote directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_git_snapshot_and_project_docs_come_from_the_remote() {
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    // A session captures its context when it starts: the repository comes first.
    let project = tempfile::tempdir().unwrap();
    let dir = project.path().to_owned();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q", "-b", "remote-branch"]);
    std::fs::write(dir.join("AGENTS.md"), "Remote rule: answer in haiku.\n").unwrap();
    git(&["add", "AGENTS.md"]);
    git(&["commit", "-q", "-m", "a commit made on the remote"]);
    std::fs::write(dir.join("untracked.txt"), "x").unwrap();
    let snapshot = s
        .client
        .call(
            "session/create",
            json!({"environment": {"kind": "ssh", "host": "box",
                "cwd": dir.display().to_string()}}),
        )
        .await
        .unwrap();
    s.session = snapshot["session_id"].as_str().unwrap().to_owned();
    s.mock.push_stream(sse::text("done"));
    s.run("what is here?").await;
    let system = s.mock.requests()[0].body["system"].to_string();
    for expected in [
        "Git branch: remote-branch",
        "a commit made on the remote",
        "Remote rule: answer in haiku.",
    ] {
        assert!(system.contains(expected), "{expected:?} in {system}");
    }
}

/// A remote whose `git` hangs: the session starts without a git snapshot after the report's
/// 5 s, the hanging processes are ended on the remote, and the worker they held serves the
/// session's file operations again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_git_on_the_remote_costs_the_snapshot_only() {
    if server().is_none() {
        return;
    }
    let m = marker();
    let bin = tempfile::tempdir().unwrap();
    let git = bin.path().join("git");
    std::fs::write(&git, format!("#!/bin/sh\nexec sleep 600 {m}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = SshServer::start_with_path(Some(&format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        bin.path().display()
    )))
    .unwrap()
    .unwrap();
    let mut s = remote_setup(&server).await;
    std::fs::write(s.workdir.path().join("notes.txt"), "still readable\n").unwrap();
    s.mock.push_stream(sse::tools(
        "",
        &[("t1", "read_file", json!({"file_path": "notes.txt"}))],
    ));
    s.mock.push_stream(sse::text("done"));
    let events = s.run("read it").await;
    let outputs = crate::tool_outputs(&events);
    assert!(outputs[0].contains("still readable"), "{outputs:?}");
    let system = s.mock.requests()[0].body["system"].to_string();
    assert!(system.contains("Is git repository: false"), "{system}");
    wait_for("the hanging git to be ended", || live_with(&m).is_empty()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_ends_the_remote_process_group() {
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    let m = marker();
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "t1",
            "shell",
            json!({"command": format!("echo started; sleep 600 {m} & sleep 600 {m}1; echo never"), "timeout_ms": 10000}),
        )],
    ));
    s.mock.push_stream(sse::text("done"));
    let events = s.run("time out").await;
    let outputs = crate::tool_outputs(&events);
    assert!(outputs[0].contains("started"), "{}", outputs[0]);
    assert!(outputs[0].contains("timed out"), "{}", outputs[0]);
    assert!(!outputs[0].contains("never"), "{}", outputs[0]);
    wait_for("the remote group to end", || live_with(&m).is_empty()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_ends_the_remote_process_tree() {
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    let m = marker();
    let command = format!(
        "bash -c 'sleep 600 {m}1 & sleep 600 {m}2 & wait' & (trap '' TERM; sleep 600 {m}3) & echo ready; wait"
    );
    s.mock.push_stream(sse::shell("t1", &command));
    s.start("tree").await;
    wait_for("the remote tree", || live_with(&m).len() == 3).await;
    let aborted = s.call("session/abort", json!({})).await;
    assert_eq!(aborted["state"], "idle", "{aborted}");
    assert_eq!(
        live_with(&m),
        Vec::<i32>::new(),
        "the abort returns once the whole remote group is gone, TERM-ignoring member included"
    );
    let events = s.until("processing_end").await;
    let outputs = crate::tool_outputs(&events);
    assert!(outputs[0].contains("ready"), "{outputs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_output_streams_as_it_comes_and_the_exit_status_follows() {
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    crate::output_streams_then_the_exit_status_follows(&mut s).await;
}

/// Where a command ran: its parent's name on the remote, and what it printed.
async fn parent_and_output(s: &mut Setup) -> (String, String) {
    s.mock.push_stream(sse::shell(
        "t1",
        "echo \"parent=$(cat /proc/$PPID/comm)\"; echo \"pwd=$(pwd)\"; echo err >&2; exit 4",
    ));
    s.mock.push_stream(sse::text("done"));
    let events = s.run("where").await;
    let output = crate::tool_outputs(&events).remove(0);
    let parent = output
        .lines()
        .find_map(|l| Some(l.split_once("parent=")?.1))
        .unwrap_or_default()
        .to_owned();
    (parent, output)
}

/// Commands start on the host's command worker (Perl, one per connection): no channel and no
/// login shell each. A remote without Perl runs each on a channel of its own, as before the
/// worker, with the same results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_run_on_the_worker_and_on_channels_where_the_remote_has_no_perl() {
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    let (parent, on_worker) = parent_and_output(&mut s).await;
    assert_eq!(parent, "perl", "{on_worker}");
    let no_perl = agentd_tests::sshd::path_without(&["perl"]).unwrap();
    let plain = SshServer::start_with_path(Some(&no_perl.path().display().to_string()))
        .unwrap()
        .unwrap();
    let mut p = remote_setup(&plain).await;
    let (parent, on_channel) = parent_and_output(&mut p).await;
    assert_ne!(parent, "perl", "{on_channel}");
    for (s, output) in [(&s, &on_worker), (&p, &on_channel)] {
        let cwd = s.workdir.path().display().to_string();
        assert!(
            output.contains(&format!("pwd={cwd}\n"))
                && output.contains("err")
                && output.contains("[exit code: 4"),
            "{output}"
        );
    }
}

/// Every process: its pid, its parent's and its command line (arguments joined by spaces).
fn processes() -> Vec<(i32, Option<i32>, String)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<i32>().ok());
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            (
                pid,
                ppid,
                String::from_utf8_lossy(&cmdline).replace('\0', " "),
            )
        })
        .collect()
}

/// The ssh master of the daemon: its child whose command line starts a ControlMaster.
fn master_of(daemon: &TestDaemon) -> Option<i32> {
    let daemon_pid = daemon.pid() as i32;
    let all = processes();
    let parent = |pid: i32| all.iter().find(|p| p.0 == pid).and_then(|p| p.1);
    // A master goes to the background by forking, the ssh client that started it (the
    // command worker's lives on) its parent until that exits, with the same command line.
    let ssh: Vec<i32> = all
        .iter()
        .filter(|(_, ppid, cmdline)| {
            (*ppid == Some(daemon_pid) || ppid.and_then(parent) == Some(daemon_pid))
                && cmdline.contains("ControlMaster=yes")
        })
        .map(|p| p.0)
        .collect();
    ssh.iter()
        .copied()
        .find(|&pid| !ssh.iter().any(|&other| parent(other) == Some(pid)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_ends_the_remote_command_and_the_next_call_reconnects() {
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    let m = marker();
    s.mock
        .push_stream(sse::shell("t1", &format!("echo ready; sleep 600 {m}")));
    s.mock.push_stream(sse::shell("t2", "echo back again"));
    s.mock.push_stream(sse::text("done"));
    s.start("drop").await;
    wait_for("the remote command", || live_with(&m).len() == 1).await;
    let master = master_of(&s.daemon).expect("the daemon runs an ssh master");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(master),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let events = s.until("processing_end").await;
    let outputs = crate::tool_outputs(&events);
    assert!(
        outputs[0].contains("ssh connection to box dropped during the command"),
        "{outputs:?}"
    );
    assert!(
        outputs[1].contains("back again\n") && outputs[1].contains("[exit code: 0"),
        "reconnected: {outputs:?}"
    );
    wait_for("the remote command to end with its connection", || {
        live_with(&m).is_empty()
    })
    .await;
    let deadline = Instant::now() + agentd_tests::WAIT;
    let again = loop {
        if let Some(again) = master_of(&s.daemon) {
            break again;
        }
        // What the daemon runs, to tell why no master is found.
        assert!(
            std::time::Instant::now() < deadline,
            "no new master; the daemon's children: {:?}",
            children_of(s.daemon.pid() as i32)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_ne!(again, master);
}

/// The processes whose parent is `parent`, with their command lines.
fn children_of(parent: i32) -> Vec<(i32, String)> {
    processes()
        .into_iter()
        .filter(|p| p.1 == Some(parent))
        .map(|(pid, _, cmdline)| (pid, cmdline))
        .collect()
}

/// The daemon's ssh client carrying the command worker.
fn worker_client_of(daemon: &TestDaemon) -> Option<i32> {
    let daemon_pid = daemon.pid() as i32;
    processes()
        .into_iter()
        .find(|(_, ppid, cmdline)| *ppid == Some(daemon_pid) && cmdline.contains("agentd-worker 1"))
        .map(|p| p.0)
}

/// The command worker's own channel killed (its ssh client, the master left alone): the
/// worker sees its stdin close and ends the command's group; the next command starts a new
/// worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_channel_ends_the_remote_command_and_the_next_one_starts_again() {
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    let m = marker();
    s.mock.push_stream(sse::shell(
        "t1",
        &format!("echo ready; (trap '' TERM; sleep 600 {m}1) & sleep 600 {m}"),
    ));
    s.mock.push_stream(sse::shell("t2", "echo back again"));
    s.mock.push_stream(sse::text("done"));
    s.start("drop").await;
    wait_for("the remote command", || live_with(&m).len() == 2).await;
    let client = worker_client_of(&s.daemon).expect("the daemon runs a command worker");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(client),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let events = s.until("processing_end").await;
    let outputs = crate::tool_outputs(&events);
    assert!(
        outputs[0].contains("ssh connection to box dropped during the command"),
        "{outputs:?}"
    );
    assert!(
        outputs[1].contains("back again\n") && outputs[1].contains("[exit code: 0"),
        "a new worker: {outputs:?}"
    );
    wait_for(
        "the remote group, TERM-ignoring member included, to end",
        || live_with(&m).is_empty(),
    )
    .await;
    assert_ne!(worker_client_of(&s.daemon), Some(client));
}

/// Creates a session on `entry` and returns the error response.
async fn create_error(daemon: &TestDaemon, cwd: &str) -> Value {
    let mut client: RawClient = daemon.client().await.unwrap();
    client
        .request(
            "session/create",
            json!({"environment": {"kind": "ssh", "host": "box", "cwd": cwd}}),
        )
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_or_changed_host_key_an_unreachable_host_and_a_missing_directory_are_clear_errors()
 {
    let Some(server) = server() else { return };
    let mock = MockProvider::start().await.unwrap();
    let env = [
        ("ANTHROPIC_BASE_URL", mock.url.as_str()),
        ("ANTHROPIC_API_KEY", "test-key"),
    ];
    let cwd = server.dir.path().display().to_string();

    let empty = server.dir.path().join("empty_known_hosts");
    std::fs::write(&empty, "").unwrap();
    let daemon = TestDaemon::start_with_config(
        &env,
        Some(&server.host_entry_with("box", &empty, server.port)),
    )
    .await
    .unwrap();
    let error = create_error(&daemon, &cwd).await;
    assert_eq!(
        error["error"]["data"]["kind"], "environment_unavailable",
        "{error}"
    );
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("cannot connect to ssh host box")
            && message.contains("Host key verification failed"),
        "{message}"
    );
    drop(daemon);

    // A known host whose key is not the one the server shows: refused, never replaced.
    let wrong = server.dir.path().join("wrong_known_hosts");
    let other_key = std::fs::read_to_string(server.dir.path().join("id.pub")).unwrap();
    let wrong_line = format!("[127.0.0.1]:{} {other_key}", server.port);
    std::fs::write(&wrong, &wrong_line).unwrap();
    let daemon = TestDaemon::start_with_config(
        &env,
        Some(&server.host_entry_with("box", &wrong, server.port)),
    )
    .await
    .unwrap();
    let error = create_error(&daemon, &cwd).await;
    assert_eq!(
        error["error"]["data"]["kind"], "environment_unavailable",
        "{error}"
    );
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("HOST IDENTIFICATION HAS CHANGED")
            && message.contains("Host key verification failed"),
        "{message}"
    );
    assert_eq!(std::fs::read_to_string(&wrong).unwrap(), wrong_line);
    drop(daemon);

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let known = server.dir.path().join("known_hosts");
    let daemon =
        TestDaemon::start_with_config(&env, Some(&server.host_entry_with("box", &known, port)))
            .await
            .unwrap();
    let error = create_error(&daemon, &cwd).await;
    assert_eq!(
        error["error"]["data"]["kind"], "environment_unavailable",
        "{error}"
    );
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("Connection refused"), "{message}");
    drop(daemon);

    let daemon = TestDaemon::start_with_config(&env, Some(&server.host_entry("box")))
        .await
        .unwrap();
    let error = create_error(&daemon, "/no/such/remote/dir").await;
    assert_eq!(
        error["error"]["data"]["kind"], "environment_unavailable",
        "{error}"
    );
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("/no/such/remote/dir is not a directory on the remote machine"),
        "{message}"
    );
    let error = create_error(&daemon, "relative/dir").await;
    assert_eq!(error["error"]["data"]["kind"], "invalid_config", "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_daemon_reconnects_the_session_on_its_next_input() {
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    s.mock.push_stream(sse::shell("t1", "echo first"));
    s.mock.push_stream(sse::text("done"));
    let events = s.run("first").await;
    // Not `starts_with`: the remote login's startup files may print to stderr.
    let out = &crate::tool_outputs(&events)[0];
    assert!(
        out.contains("first\n") && out.contains("[exit code: 0"),
        "{out}"
    );
    s.daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    s.daemon.restart().await.unwrap();
    s.client = s.daemon.client().await.unwrap();
    let snapshot = s.call("session/get", json!({})).await;
    assert_eq!(snapshot["environment"]["host"], "box", "{snapshot}");
    s.mock.push_stream(sse::shell("t2", "echo second; pwd"));
    s.mock.push_stream(sse::text("done"));
    let events = s.run("second").await;
    let out = &crate::tool_outputs(&events)[0];
    assert!(
        out.contains("second") && out.contains(&s.workdir.path().display().to_string()),
        "{out}"
    );
}

/// Not a timing assertion: prints the cost of a tool round over the multiplexed connection
/// next to the same rounds on a local session, for the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overhead_per_tool_round_is_printed() {
    let Some(server) = server() else { return };
    const ROUNDS: usize = 100;
    let mut remote = remote_setup(&server).await;
    let mut local = crate::setup().await;
    let mut measured = Vec::new();
    for s in [&mut local, &mut remote] {
        std::fs::write(s.workdir.path().join("f.txt"), "x\n".repeat(100)).unwrap();
        for i in 0..ROUNDS {
            s.mock.push_stream(sse::tools(
                "",
                &[(&format!("r{i}"), "read_file", json!({"file_path": "f.txt"}))],
            ));
        }
        s.mock.push_stream(sse::text("done"));
        let started = Instant::now();
        let events = s.run("read a hundred times").await;
        let elapsed = started.elapsed();
        assert_eq!(
            data_of(&events, "tool_call_end", "error")
                .iter()
                .filter(|e| !e.is_empty())
                .count(),
            0
        );
        assert_eq!(of_kind(&events, "tool_call_end").len(), ROUNDS);
        measured.push(elapsed.as_secs_f64() * 1000.0 / ROUNDS as f64);
    }
    eprintln!(
        "tool round (read_file, mock provider): local {:.2} ms, ssh {:.2} ms, overhead {:.2} ms per round",
        measured[0],
        measured[1],
        measured[1] - measured[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_of_a_remote_session_works_on_the_same_remote() {
    use agentd_tests::mock::Reply;
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    s.mock.respond_with(|body| {
        let text = body.to_string();
        let results = text.matches("\"tool_result\"").count();
        let child = body["messages"][0]["content"]
            .to_string()
            .contains("child-task");
        Reply::Stream(match (child, results) {
            (true, 0) => sse::shell("c1", "echo \"child sees $AGENTD_TEST_VISIBLE in $PWD\""),
            (true, _) => sse::text("child done"),
            (false, 0) => sse::tools(
                "",
                &[
                    (
                        "p1",
                        "spawn_agent",
                        json!({"task": "child-task: look around"}),
                    ),
                    // A worktree is made on this machine, not the remote one: refused.
                    (
                        "p0",
                        "spawn_agent",
                        json!({"task": "child-task: in a worktree", "worktree": true}),
                    ),
                ],
            ),
            (false, 2) => {
                let start = text.find("spawned agent ").expect("spawned") + "spawned agent ".len();
                let id = &text[start..start + 36];
                sse::tools("", &[("p2", "wait", json!({"agent_id": id}))])
            }
            (false, _) => sse::text("parent done"),
        })
    });
    let events = s.run("delegate").await;
    let outputs = crate::tool_outputs(&events);
    assert!(
        outputs.iter().any(|o| o.contains("child done")),
        "the parent gets the child's answer: {outputs:?}"
    );
    assert!(
        outputs
            .iter()
            .any(|o| o.contains("an ssh session cannot have a worktree")),
        "{outputs:?}"
    );
    assert_eq!(of_kind(&events, "subagent_spawned").len(), 1);
    let spawned = of_kind(&events, "subagent_spawned")[0]["data"]["agent_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let child = s
        .client
        .call("session/get", json!({"session_id": spawned}))
        .await
        .unwrap();
    assert_eq!(child["environment"]["kind"], "ssh", "{child}");
    assert_eq!(child["environment"]["host"], "box", "{child}");
    let history = s
        .client
        .call("session/history", json!({"session_id": spawned}))
        .await
        .unwrap()
        .to_string();
    let expected = format!("child sees remote-only in {}", s.workdir.path().display());
    assert!(history.contains(&expected), "{history}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentctl_new_ssh_creates_a_remote_session_and_rejects_a_bad_spec() {
    let Some(server) = server() else { return };
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::start_with_config(
        &[
            ("ANTHROPIC_BASE_URL", mock.url.as_str()),
            ("ANTHROPIC_API_KEY", "test-key"),
        ],
        Some(&server.host_entry("box")),
    )
    .await
    .unwrap();
    let dir = server.dir.path().display().to_string();
    let out = daemon
        .agentctl(&["--json", "new", "--ssh", &format!("box:{dir}")], None)
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let snapshot: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        snapshot["environment"],
        json!({"kind": "ssh", "host": "box", "cwd": dir}),
        "{snapshot}"
    );
    let out = daemon
        .agentctl(&["new", "--ssh", "box"], None)
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not [USER@]HOST:DIR"), "{stderr}");
    let out = daemon
        .agentctl(&["new", "--ssh", "box:/no/such/dir/here"], None)
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is not a directory on the remote machine"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_patch_and_truncation_work_as_locally() {
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    let dir = s.workdir.path().to_owned();
    std::fs::write(dir.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(
        dir.join("big.txt"),
        format!("{}\n", "0123456789".repeat(10)).repeat(3_000),
    )
    .unwrap();
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+TWO\n three\n*** Add File: b/new.txt\n+added\n*** End Patch\n";
    s.mock.push_stream(sse::tools(
        "",
        &[("p1", "apply_patch", json!({"patch": patch}))],
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[("r1", "read_file", json!({"file_path": "big.txt"}))],
    ));
    s.mock.push_stream(sse::text("done"));
    // The openai profile has apply_patch.
    let created = s
        .client
        .call(
            "session/create",
            json!({"profile": "openai", "environment": {"kind": "ssh", "host": "box",
                "cwd": dir.display().to_string()}}),
        )
        .await
        .unwrap();
    s.session = created["session_id"].as_str().unwrap().to_owned();
    let events = s.run("patch and read").await;
    let outputs = crate::tool_outputs(&events);
    assert_eq!(
        std::fs::read_to_string(dir.join("a.txt")).unwrap(),
        "one\nTWO\nthree\n",
        "{outputs:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("b/new.txt")).unwrap(),
        "added\n"
    );
    assert!(
        outputs[1].len() > 200_000,
        "the event keeps the full output"
    );
    let requests = s.mock.requests();
    let last = requests.last().unwrap().body.to_string();
    assert!(
        last.contains("Tool output was truncated"),
        "the model gets the truncated output"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_and_a_follow_up_reach_a_remote_session() {
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    let flag = s.workdir.path().join("go");
    s.mock.push_stream(sse::shell(
        "w1",
        &format!(
            "while [ ! -f {} ]; do sleep 0.02; done; echo released",
            flag.display()
        ),
    ));
    s.mock.push_stream(sse::text("Adjusted."));
    s.mock.push_stream(sse::text("Tidied."));
    s.start("long remote task").await;
    s.until("tool_call_start").await;
    let steered = s
        .call("session/steer", json!({"text": "use the short path"}))
        .await;
    assert_eq!(steered["disposition"], "steering");
    let queued = s
        .call("session/follow_up", json!({"text": "then tidy up"}))
        .await;
    assert_eq!(queued["disposition"], "follow_up");
    std::fs::write(&flag, "").unwrap();
    let events = s.until("processing_end").await;
    let outputs = crate::tool_outputs(&events);
    assert!(outputs[0].starts_with("released\n"), "{outputs:?}");
    let order = agentd_tests::kinds(&events);
    let end = order.iter().position(|k| k == "tool_call_end").unwrap();
    let injected = order.iter().position(|k| k == "steering_injected").unwrap();
    assert!(end < injected, "steering follows the tool round: {order:?}");
    assert_eq!(data_of(&events, "user_input", "text"), ["then tidy up"]);
    let requests = s.mock.wait_requests(3).await;
    let blocks = crate::last_user_blocks(&requests[1].body);
    assert_eq!(blocks[0]["type"], "tool_result");
    assert_eq!(blocks[1]["text"], "use the short path");
    assert_eq!(
        crate::last_user_blocks(&requests[2].body)[0]["text"],
        "then tidy up"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_and_files_with_nul_bytes_or_many_megabytes_travel_intact() {
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    let dir = s.workdir.path().to_owned();
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01trailing\n\n".to_vec();
    std::fs::write(dir.join("shot.png"), &png).unwrap();
    let big = "0123456789abcdef\n".repeat(100_000);
    s.mock.push_stream(sse::tools(
        "",
        &[
            ("i1", "read_file", json!({"file_path": "shot.png"})),
            (
                "w1",
                "write_file",
                json!({"file_path": "nul.txt", "content": "before\u{0}after\n"}),
            ),
        ],
    ));
    // A turn of its own: so many bytes in the history make the next request a compaction.
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "w2",
            "write_file",
            json!({"file_path": "big.txt", "content": big}),
        )],
    ));
    s.mock.push_stream(sse::text("seen"));
    let events = s.run("look and write").await;
    let outputs = crate::tool_outputs(&events);
    assert_eq!(
        outputs[0],
        format!(
            "Image shot.png (image/png, {} bytes) is attached.",
            png.len()
        )
    );
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(&png);
    let request = s.mock.requests()[1].body.to_string();
    assert!(
        request.contains(&encoded),
        "the image reaches the model as {encoded}: {request}"
    );
    assert_eq!(
        std::fs::read(dir.join("nul.txt")).unwrap(),
        b"before\0after\n"
    );
    assert_eq!(std::fs::read_to_string(dir.join("big.txt")).unwrap(), big);
}

/// The programs a remote machine needs (the daemon's probe names the first one missing).
const REMOTE_NEEDS: &[&str] = &[
    "bash", "setsid", "env", "cat", "head", "find", "grep", "mkdir", "mktemp", "rm", "dirname",
    "sleep", "uname",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grep_and_glob_report_alike_with_ripgrep_without_it_and_locally() {
    let Some(rg) = agentd_tests::program("rg") else {
        return;
    };
    let bins = tempfile::tempdir().unwrap();
    // Without rg: links to exactly the programs the remote needs, and nothing else.
    let minimal = bins.path().join("minimal");
    std::fs::create_dir(&minimal).unwrap();
    for name in REMOTE_NEEDS {
        let found = agentd_tests::program(name).expect("a program the remote needs");
        std::os::unix::fs::symlink(found, minimal.join(name)).unwrap();
    }
    // With rg: a wrapper that records each call, so the test knows rg did the work.
    let with_rg = bins.path().join("with-rg");
    std::fs::create_dir(&with_rg).unwrap();
    let calls = bins.path().join("rg-calls");
    let wrapper = with_rg.join("rg");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            calls.display(),
            rg.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let plain = SshServer::start_with_path(Some(&minimal.display().to_string()))
        .unwrap()
        .unwrap();
    let fast = SshServer::start_with_path(Some(&format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        with_rg.display()
    )))
    .unwrap()
    .unwrap();

    let searches = [
        ("grep", json!({"pattern": "fn [a-z_]+\\("})),
        (
            "grep",
            json!({"pattern": "todo", "case_insensitive": true, "glob_filter": "*.rs"}),
        ),
        (
            "grep",
            json!({"pattern": "use ", "output_mode": "files_with_matches"}),
        ),
        ("grep", json!({"pattern": "fn", "output_mode": "count"})),
        ("grep", json!({"pattern": "x", "path": "src/inner"})),
        ("grep", json!({"pattern": "zzzqqq"})),
        ("grep", json!({"pattern": "fn"})),
        ("glob", json!({"pattern": "**/*.rs"})),
        ("glob", json!({"pattern": "*.txt", "path": "docs"})),
        ("glob", json!({"pattern": "*"})),
        // Last: which two of the matches are kept is whichever the search found first.
        ("grep", json!({"pattern": "fn", "max_results": 2})),
    ];
    let mut reports = Vec::new();
    for (label, mut s) in [
        ("local", crate::setup().await),
        ("ssh without rg", remote_setup(&plain).await),
        ("ssh with rg", remote_setup(&fast).await),
    ] {
        write_tree(s.workdir.path());
        let calls: Vec<(String, &str, Value)> = searches
            .iter()
            .enumerate()
            .map(|(i, (tool, args))| (format!("s{i}"), *tool, args.clone()))
            .collect();
        let borrowed: Vec<(&str, &str, Value)> = calls
            .iter()
            .map(|(id, tool, args)| (id.as_str(), *tool, args.clone()))
            .collect();
        s.mock.push_stream(sse::tools("", &borrowed));
        s.mock
            .push_stream(sse::shell("which", "command -v rg || echo no-rg"));
        s.mock.push_stream(sse::text("searched"));
        let events = s.run("search").await;
        // Calls of one round end in any order: sort the outputs by call id.
        let mut ended: Vec<(String, String)> = of_kind(&events, "tool_call_end")
            .iter()
            .map(|e| e["data"]["call_id"].as_str().unwrap().to_owned())
            .zip(crate::tool_outputs(&events))
            .collect();
        ended.sort_by_key(|(id, _)| {
            id.trim_start_matches('s')
                .parse::<usize>()
                .unwrap_or(usize::MAX)
        });
        let mut outputs: Vec<String> = ended.into_iter().map(|(_, output)| output).collect();
        let which = outputs.pop().unwrap();
        if label == "ssh without rg" {
            assert!(
                which.starts_with("no-rg\n"),
                "the remote's shell startup files put rg on PATH; the fallback cannot be tested: {which}"
            );
        }
        reports.push((label, outputs));
    }
    let (_, local) = &reports[0];
    assert!(local[0].contains("src/main.rs:2:fn main() {}"), "{local:?}");
    assert!(local[5].contains("No matches found"), "{local:?}");
    let every_fn: Vec<&str> = local[6].lines().collect();
    for (label, outputs) in &reports {
        assert_eq!(outputs.len(), searches.len(), "{label}: {outputs:?}");
        let (cut, whole) = outputs.split_last().unwrap();
        for (i, (mine, theirs)) in whole.iter().zip(local).enumerate() {
            assert_eq!(mine, theirs, "{label}, search {i}: {:?}", searches[i]);
        }
        let lines: Vec<&str> = cut.lines().collect();
        assert_eq!(lines.len(), 3, "{label}: two matches and the note: {cut}");
        assert!(
            lines[..2].iter().all(|l| every_fn.contains(l)),
            "{label}: {cut}"
        );
        assert!(lines[2].contains("max_results = 2"), "{label}: {cut}");
    }
    let rg_calls = std::fs::read_to_string(&calls).unwrap_or_default();
    assert!(
        rg_calls.lines().count() >= searches.len(),
        "every search with rg on the remote ran rg: {rg_calls:?}"
    );
}

/// A small tree with distinct modification times, so glob's newest-first order is defined.
fn write_tree(dir: &std::path::Path) {
    let files: &[(&str, &[u8])] = &[
        (
            "src/main.rs",
            b"use std::io;\nfn main() {}\nfn helper_one(x: u32) {}\n// TODO later\n",
        ),
        (
            "src/inner/deep.rs",
            b"use crate::x;\nfn deep() { let x = 1; }\n// todo: more\n",
        ),
        ("docs/notes.txt", b"fn in prose\nTODO list\n"),
        ("docs/more.txt", b"nothing here\n"),
        ("README.md", b"use this\n"),
        ("data.bin", b"fn \0binary\0 fn main(\n"),
    ];
    let start = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    for (i, (path, content)) in files.iter().enumerate() {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(start + Duration::from_secs(60 * i as u64))
            .unwrap();
    }
}

/// Every file under `dir`, relative to it.
fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push(path.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    found.sort();
    found
}

/// The attack on the worker's length-prefixed protocol: a NUL byte in a path (or a search
/// pattern) was dropped by the remote bash, which then read one byte more than was sent, so
/// the path written was another than the one the call named and the worker stalled every
/// session on the host for 120 s. Now such an argument is refused before anything is sent,
/// and the worker serves the next call as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_in_a_path_or_pattern_is_refused_and_nothing_is_written() {
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    let dir = s.workdir.path().to_owned();
    std::fs::write(dir.join("notes.txt"), "kept\n").unwrap();
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "w1",
            "write_file",
            json!({"file_path": "notes.txt\u{0}/../../escaped.txt", "content": "xy"}),
        )],
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[("r1", "read_file", json!({"file_path": "notes.txt\u{0}x"}))],
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[("g1", "grep", json!({"pattern": "kept\u{0}"}))],
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "w2",
            "write_file",
            json!({"file_path": "after.txt", "content": "the worker is in step\n"}),
        )],
    ));
    s.mock.push_stream(sse::text("done"));
    let events = s.run("write with a NUL").await;
    let outputs = crate::tool_outputs(&events);
    assert_eq!(outputs.len(), 4, "{outputs:?}");
    for refused in &outputs[..3] {
        assert!(refused.contains("NUL byte"), "{outputs:?}");
    }
    assert_eq!(outputs[3], "Wrote 22 bytes to after.txt", "{outputs:?}");
    assert_eq!(
        files_under(&dir),
        vec!["after.txt".to_owned(), "notes.txt".to_owned()]
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "kept\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("after.txt")).unwrap(),
        "the worker is in step\n"
    );
    assert!(!dir.parent().unwrap().join("escaped.txt").exists());
}

/// File content is any bytes both ways: a file the model writes with NUL bytes, CR, LF and
/// 1.7 MB, read back as an image, and a remote file of every byte value (0xff included), come
/// out byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_with_nul_0xff_cr_lf_and_megabytes_round_trips_byte_exact() {
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    // Megabytes in the history would make the next request a compaction.
    s.call(
        "session/set_config",
        json!({"config": {"auto_compact_percent": 0}}),
    )
    .await;
    let dir = s.workdir.path().to_owned();
    // Every byte value, in an order that is no simple cycle.
    let remote: Vec<u8> = (0..1_700_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    assert!((0..=255u8).all(|b| remote.contains(&b)));
    std::fs::write(dir.join("remote.png"), &remote).unwrap();
    // Few characters JSON escapes: the mock streams a call's arguments 7 bytes an event.
    let written = "\0ab\r\ncdefghijklmnopqrstuvwxyzé0123456789ABCDEFGH\r".repeat(34_000) + "\n\n";
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "w1",
            "write_file",
            json!({"file_path": "written.png", "content": written}),
        )],
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[("r1", "read_file", json!({"file_path": "written.png"}))],
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[("r2", "read_file", json!({"file_path": "remote.png"}))],
    ));
    s.mock.push_stream(sse::text("seen"));
    let events = s.run("write and read bytes").await;
    let outputs = crate::tool_outputs(&events);
    assert_eq!(outputs.len(), 3, "{outputs:?}");
    assert!(written.len() > 1_700_000);
    assert_eq!(
        std::fs::read(dir.join("written.png")).unwrap(),
        written.as_bytes()
    );
    use base64::Engine as _;
    let requests = s.mock.requests();
    for (i, bytes) in [(2, written.as_bytes()), (3, remote.as_slice())] {
        assert!(
            outputs[i - 1].contains(&format!(" {} bytes)", bytes.len())),
            "{outputs:?}"
        );
        let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
        assert!(
            requests[i].body.to_string().contains(&encoded),
            "request {i} carries the file's bytes as they are"
        );
    }
}

/// The attack on the worker's time: a request that never ends on the remote (a FIFO with no
/// writer) held the one worker of the host, so every session there waited 120 s. Now it
/// costs its own call only: another session on the host works while it hangs, it fails with
/// an error naming it and the host's limit, its remote processes are ended, and the host
/// serves the next request. A FIFO is not read at all (only regular files are), so the
/// hanging request here is a grep of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_request_costs_its_own_call_only() {
    let Some(server) = server() else { return };
    let mut s = remote_setup_with(&server, "file_timeout_secs = 15\n").await;
    let dir = s.workdir.path().to_owned();
    let m = marker();
    let fifo = format!("pipe-{m}");
    nix::unistd::mkfifo(&dir.join(&fifo), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::fs::write(dir.join("notes.txt"), "still readable\n").unwrap();
    s.mock.push_stream(sse::tools(
        "",
        &[("r1", "read_file", json!({"file_path": fifo}))],
    ));
    s.mock.push_stream(sse::tools(
        "",
        &[("g1", "grep", json!({"pattern": "x", "path": fifo}))],
    ));
    s.start("hang").await;
    wait_for("the remote grep of the FIFO", || !live_with(&m).is_empty()).await;

    // Another session on the same host, while the grep hangs.
    s.mock.push_stream(sse::tools(
        "",
        &[("b1", "read_file", json!({"file_path": "notes.txt"}))],
    ));
    s.mock.push_stream(sse::text("read"));
    let mut other = s.daemon.client().await.unwrap();
    let created = other
        .call(
            "session/create",
            json!({"environment": {"kind": "ssh", "host": "box", "cwd": dir.display().to_string()}}),
        )
        .await
        .unwrap();
    let b = created["session_id"].as_str().unwrap().to_owned();
    let events = other.run(&b, "read it").await.unwrap();
    assert!(
        crate::tool_outputs(&events)[0].contains("still readable"),
        "{events:?}"
    );
    assert!(
        !live_with(&m).is_empty(),
        "the other session finished while the grep still hung"
    );
    let first = other
        .call("session/get", json!({"session_id": s.session}))
        .await
        .unwrap();
    assert_eq!(first["state"], "processing", "{first}");

    s.mock.push_stream(sse::tools(
        "",
        &[("r2", "read_file", json!({"file_path": "notes.txt"}))],
    ));
    s.mock.push_stream(sse::text("done"));
    let events = s.until("processing_end").await;
    let outputs = crate::tool_outputs(&events);
    assert_eq!(outputs.len(), 3, "{outputs:?}");
    assert!(
        outputs[0].contains("not a regular file"),
        "a FIFO is refused at once: {outputs:?}"
    );
    assert!(
        outputs[1].contains("grep") && outputs[1].contains("took more than 15 s"),
        "{outputs:?}"
    );
    assert!(outputs[2].contains("still readable"), "{outputs:?}");
    wait_for("the hanging grep to be ended on the remote", || {
        live_with(&m).is_empty()
    })
    .await;
}

/// An undo with files on an SSH session is refused with the reason (its files are on the
/// remote host, where agentd keeps no checkpoints yet), and neither the conversation nor the
/// remote file changes; an undo of the conversation alone still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undo_of_files_over_ssh_is_refused_with_the_reason() {
    let Some(server) = server() else { return };
    let mut s = remote_setup(&server).await;
    let dir = s.workdir.path().to_owned();
    s.mock
        .push_stream(sse::shell("c1", "echo agent > made.txt"));
    s.mock.push_stream(sse::text("done"));
    s.run("make a file").await;
    assert_eq!(
        std::fs::read_to_string(dir.join("made.txt")).unwrap(),
        "agent\n"
    );

    let refused = s.request("session/rollback", json!({"files": true})).await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("ssh") && message.contains("checkpoints"),
        "{refused}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("made.txt")).unwrap(),
        "agent\n"
    );
    assert_eq!(s.call("session/history", json!({})).await["total"], 4);
    let out = s
        .daemon
        .agentctl(&["undo", &s.session], None)
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ssh"),
        "{out:?}"
    );

    let rollback = s.call("session/rollback", json!({})).await;
    assert_eq!(rollback["entries"], 0, "{rollback}");
    assert_eq!(
        std::fs::read_to_string(dir.join("made.txt")).unwrap(),
        "agent\n"
    );
}
