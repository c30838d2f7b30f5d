//! Container sessions on an engine that is not a local socket: the real test engine behind a
//! TLS endpoint (`agentd_tests::tls_engine`) reached as `tcp://127.0.0.1:PORT` with
//! `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH`, as a dockerd on another machine would be. The
//! daemon takes the remote path: no control directory mounted, output on the exec's stream,
//! file tools through the archive endpoints. Hostile engines (garbage, silence) and the record
//! of containers the next start sweeps are here too. The tests with an engine behind the
//! endpoint run on dockerd and on Podman (`crate::container::on_each_engine`).

use crate::Setup;
use agentd_tests::engine::{Engine, IMAGE};
use agentd_tests::mock::MockProvider;
use agentd_tests::tls_engine::TlsEngine;
use agentd_tests::{TestDaemon, sse};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A daemon whose engine is `tls`, with `config` (TOML) as its config file if given.
async fn daemon(tls: &TlsEngine, mock: &MockProvider, config: Option<&str>) -> TestDaemon {
    let mut builder = TestDaemon::builder();
    if let Some(config) = config {
        builder = builder.config(config);
    }
    builder
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("DOCKER_HOST", &tls.host)
        .env("DOCKER_TLS_VERIFY", "1")
        .env("DOCKER_CERT_PATH", &tls.certs.path().display().to_string())
        .start()
        .await
        .expect("daemon starts")
}

async fn remote_setup(tls: &TlsEngine) -> Setup {
    let mock = MockProvider::start().await.expect("mock starts");
    let daemon = daemon(tls, &mock, None).await;
    let mut client = daemon.client().await.expect("client connects");
    let workdir = tempfile::tempdir().expect("tempdir");
    let snapshot = client
        .call(
            "session/create",
            json!({"cwd": workdir.path().display().to_string(),
                "environment": {"kind": "container", "image": IMAGE}}),
        )
        .await
        .expect("the container session is created on the TLS engine");
    Setup {
        mock,
        daemon,
        session: snapshot["session_id"].as_str().unwrap().to_owned(),
        client,
        workdir,
    }
}

async fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + agentd_tests::WAIT;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_tls_engine_runs_shell_rounds_file_tools_abort_and_timeout(engine: &Engine) {
    let tls = TlsEngine::start(&engine.host).await.unwrap();
    let mut s = remote_setup(&tls).await;
    let dir = s.workdir.path().to_owned();
    let container = &engine.session_containers(&s.session).unwrap()[0];
    let mounts = engine
        .docker(&[
            "inspect",
            "--format",
            "{{range .Mounts}}{{.Destination}} {{end}}",
            container,
        ])
        .unwrap();
    assert_eq!(
        mounts.trim(),
        dir.display().to_string(),
        "the workspace only: no control directory of the daemon's is mounted"
    );
    std::fs::write(dir.join("notes.txt"), "old notes\n").unwrap();
    crate::container::push_ten_rounds(&mut s);
    s.mock.push_stream(sse::shell(
        "x",
        "echo made > shell.txt; ln -s /etc/passwd leak; exit 3",
    ));
    let tool = |id: &str, name: &str, args: Value| sse::tools("", &[(id, name, args)]);
    s.mock
        .push_stream(tool("r", "read_file", json!({"file_path": "shell.txt"})));
    s.mock.push_stream(tool(
        "e",
        "edit_file",
        json!({"file_path": "notes.txt", "old_string": "old", "new_string": "new"}),
    ));
    s.mock.push_stream(tool(
        "w",
        "write_file",
        json!({"file_path": "written.txt", "content": "written\n"}),
    ));
    s.mock
        .push_stream(tool("l", "read_file", json!({"file_path": "leak"})));
    s.mock.push_stream(tool(
        "o",
        "read_file",
        json!({"file_path": "../../etc/passwd"}),
    ));
    s.mock
        .push_stream(sse::shell("c", "cat written.txt; ls -ln written.txt"));
    s.mock.push_stream(sse::text("done"));
    let outputs = crate::tool_outputs(&s.run("work on the remote engine").await);
    assert_eq!(outputs.len(), 17, "{outputs:?}");
    crate::container::check_ten_rounds(&outputs);
    assert!(outputs[10].contains("[exit code: 3"), "{}", outputs[10]);
    assert!(outputs[11].contains("made"), "{}", outputs[11]);
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "new notes\n",
        "{}",
        outputs[12]
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("written.txt")).unwrap(),
        "written\n"
    );
    assert!(
        outputs[14].contains("symbolic link") && !outputs[14].contains("root:"),
        "{}",
        outputs[14]
    );
    assert!(
        outputs[15].contains("reach the workspace") && !outputs[15].contains("root:"),
        "{}",
        outputs[15]
    );
    assert!(outputs[16].contains("written"), "{}", outputs[16]);

    // A process tree aborted, then a timeout, through the remote path.
    let m = "0.4242424243";
    s.mock.push_stream(sse::shell(
        "t",
        &format!("sleep 600 {m} & (trap '' TERM; sleep 600 {m}) & echo ready; wait"),
    ));
    s.start("tree").await;
    let live = || {
        crate::live_processes(|args| {
            let text = args.join(" ");
            text.starts_with("sleep") && text.contains(m)
        })
    };
    wait_for("the tree in the container", || live().len() == 2).await;
    let aborted = s.call("session/abort", json!({})).await;
    assert_eq!(aborted["state"], "idle", "{aborted}");
    assert_eq!(live(), Vec::<i32>::new(), "the whole group is gone");
    s.until("processing_end").await;
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "t2",
            "shell",
            json!({"command": "echo started; sleep 600", "timeout_ms": 500}),
        )],
    ));
    s.mock.push_stream(sse::text("done"));
    let events = s.run("slow").await;
    let end = crate::of_kind(&events, "tool_call_end")[0]["data"].to_string();
    assert!(
        end.contains("started") && end.contains("timed out"),
        "{end}"
    );

    // A file past the read cap is refused from its stat, before any of it is downloaded.
    s.mock
        .push_stream(sse::shell("b", "yes | head -c 70000000 > big"));
    s.mock.push_stream(sse::tools(
        "",
        &[("h", "read_file", json!({"file_path": "big"}))],
    ));
    s.mock.push_stream(sse::text("done"));
    let outputs = crate::tool_outputs(&s.run("huge").await);
    assert!(
        outputs[1].contains("70000000 bytes") && outputs[1].contains("at most"),
        "{}",
        outputs[1]
    );
}

/// The workspace the search parity test walks: ignore rules of both kinds and at two
/// levels, hidden files and directories, links out of it, a binary file, names a shell
/// would split, each file a second newer than the one before.
fn search_workspace(dir: &std::path::Path) {
    let files: &[(&str, &[u8])] = &[
        (".git/HEAD", b"ref: refs/heads/main\n"),
        (".gitignore", b"target/\n*.log\n"),
        (".ignore", b"!keep.log\n"),
        ("src/main.rs", b"fn main() {\n    // TODO: more\n}\n"),
        ("src/lib.rs", b"pub fn lib() {}\n// todo later\n"),
        ("src/deep/mod.rs", b"fn deep() {}\n"),
        ("target/debug/x.rs", b"fn ignored() {}\n"),
        ("a.log", b"fn in a log\n"),
        ("keep.log", b"fn kept\n"),
        (".hidden.rs", b"fn hidden() {}\n"),
        (".config/x.rs", b"fn config() {}\n"),
        ("name with space.rs", b"fn spaced() {}\n"),
        ("quote'd $(x).rs", b"fn quoted() {}\n"),
        ("sub/.gitignore", b"gen.rs\n"),
        ("sub/gen.rs", b"fn generated() {}\n"),
        ("sub/ok.rs", b"fn ok() {}\n"),
        ("bin.dat", b"fn \0 binary\n"),
    ];
    for (n, (name, content)) in files.iter().enumerate() {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        let mtime = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + n as u64 * 10);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
    }
    std::os::unix::fs::symlink("/etc/passwd", dir.join("link.rs")).unwrap();
    std::os::unix::fs::symlink("/etc", dir.join("linkdir")).unwrap();
}

/// The searches the parity test runs, each a tool call.
fn searches() -> Vec<(&'static str, Value)> {
    vec![
        ("list_dir", json!({})),
        ("list_dir", json!({"path": "src", "depth": 3})),
        ("list_dir", json!({"path": ".", "depth": 2})),
        ("glob", json!({"pattern": "**/*.rs"})),
        ("glob", json!({"pattern": "*.log"})),
        ("glob", json!({"pattern": "*.rs", "path": "src"})),
        ("grep", json!({"pattern": "fn \\w+"})),
        (
            "grep",
            json!({"pattern": "todo", "case_insensitive": true, "output_mode": "count"}),
        ),
        (
            "grep",
            json!({"pattern": "fn", "glob_filter": "*.rs", "output_mode": "files_with_matches"}),
        ),
        ("grep", json!({"pattern": "main", "path": "src/main.rs"})),
        ("grep", json!({"pattern": "fn", "path": "src/../sub"})),
        ("grep", json!({"pattern": "("})),
        ("glob", json!({"pattern": "a[b"})),
        // What follows is checked on the container's side alone.
        ("grep", json!({"pattern": "fn", "max_results": 2})),
        ("list_dir", json!({"path": "missing"})),
        (
            "grep",
            json!({"pattern": "$(touch pwned)'; touch pwned2; '", "path": "src"}),
        ),
        ("glob", json!({"pattern": "*$(touch pwned3)*"})),
        ("grep", json!({"pattern": "root:", "path": "linkdir"})),
        ("list_dir", json!({"path": "linkdir"})),
    ]
}

/// list_dir, glob and grep on a remote engine answer as they do in a local session of the
/// same workspace: the same ignore rules, hidden files, links left, order and report; a
/// hostile pattern stays a pattern, a link out of the workspace is not followed, and
/// `apply_patch` deletes and moves files there.
async fn a_tls_engine_lists_globs_and_greps_as_a_local_session_does(engine: &Engine) {
    let tls = TlsEngine::start(&engine.host).await.unwrap();
    let mut s = remote_setup(&tls).await;
    let dir = s.workdir.path().to_owned();
    search_workspace(&dir);
    // The gemini profile has list_dir; the openai one, apply_patch.
    let mut create = async |profile: &str, container: bool| {
        let mut params = json!({"cwd": dir.display().to_string(), "profile": profile});
        if container {
            params["environment"] = json!({"kind": "container", "image": IMAGE});
        }
        s.client.call("session/create", params).await.unwrap()["session_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let sessions = [create("gemini", false).await, create("gemini", true).await];
    let patching = create("openai", true).await;
    let mut answers = Vec::new();
    for session in sessions {
        s.session = session;
        for (n, (tool, args)) in searches().into_iter().enumerate() {
            s.mock
                .push_stream(sse::tools("", &[(&format!("q{n}"), tool, args)]));
        }
        s.mock.push_stream(sse::text("done"));
        let outputs = crate::tool_outputs(&s.run("search").await);
        assert_eq!(outputs.len(), searches().len(), "{outputs:?}");
        answers.push(outputs);
    }
    let (local, remote) = (&answers[0], &answers[1]);
    for n in 0..13 {
        assert_eq!(
            remote[n],
            local[n],
            "{:?} differs in the container from the local session",
            searches()[n]
        );
    }
    assert!(
        remote[3].contains("src/main.rs") && !remote[3].contains("target/"),
        "{}",
        remote[3]
    );
    assert!(
        remote[6].contains("sub/ok.rs:1:fn ok") && !remote[6].contains("bin.dat"),
        "{}",
        remote[6]
    );
    assert!(remote[11].contains("invalid regex"), "{}", remote[11]);
    let cut: Vec<&str> = remote[13].lines().collect();
    assert_eq!(cut.len(), 3, "{}", remote[13]);
    assert!(cut[2].contains("max_results = 2"), "{}", remote[13]);
    assert!(remote[14].contains("not found"), "{}", remote[14]);
    assert!(remote[15].contains("No matches"), "{}", remote[15]);
    assert!(remote[16].contains("No files match"), "{}", remote[16]);
    for planted in ["pwned", "pwned2", "pwned3", "src/pwned", "src/pwned2"] {
        assert!(!dir.join(planted).exists(), "{planted} was made");
    }
    assert!(
        remote[17].contains("symbolic link") && !remote[17].contains("root:"),
        "{}",
        remote[17]
    );
    assert!(remote[18].contains("symbolic link"), "{}", remote[18]);

    // A walk that prints more than it may is stopped, with what it started, and said so:
    // Nine levels of 250-byte names, then 7,500 files, each record over 2 KB.
    let mut deep = dir.join("deep");
    for level in 0..9 {
        deep.push(format!("{level:x}").repeat(250));
    }
    std::fs::create_dir_all(&deep).unwrap();
    for n in 0..7_500 {
        std::fs::write(deep.join(format!("{n}")), "").unwrap();
    }
    s.mock.push_stream(sse::tools(
        "",
        &[("d", "list_dir", json!({"path": "deep", "depth": 10}))],
    ));
    s.mock.push_stream(sse::text("done"));
    let outputs = crate::tool_outputs(&s.run("huge listing").await);
    assert!(outputs[0].contains("more than 16 MiB"), "{}", outputs[0]);
    let walking = || {
        crate::live_processes(|args| {
            args.first().is_some_and(|a| a == "find" || a == "stat")
                && args.iter().any(|a| a.contains("/deep"))
        })
    };
    wait_for("the walk to be stopped", || walking().is_empty()).await;

    s.session = patching;
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "p",
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Delete File: sub/ok.rs\n*** Update File: keep.log\n*** Move to: moved/kept.log\n@@\n-fn kept\n+fn moved\n*** End Patch\n"}),
        )],
    ));
    s.mock.push_stream(sse::text("done"));
    let outputs = crate::tool_outputs(&s.run("patch").await);
    assert!(!dir.join("sub/ok.rs").exists(), "{}", outputs[0]);
    assert!(!dir.join("keep.log").exists(), "{}", outputs[0]);
    assert_eq!(
        std::fs::read_to_string(dir.join("moved/kept.log")).unwrap(),
        "fn moved\n"
    );
}

/// A model that flips a directory of its workspace between a real one and a link to the
/// container's `/` while it writes and reads through it gains nothing its user lacks: the
/// engine, which works as root and follows a link swapped in after the check, neither
/// writes nor reads the files; the container's user (not root here) does.
async fn a_write_raced_through_a_swapped_link_is_the_container_users(engine: &Engine) {
    let tls = TlsEngine::start(&engine.host).await.unwrap();
    let mock = MockProvider::start().await.unwrap();
    let config = format!("[containers.user]\nimage = \"{IMAGE}\"\nuser = \"1000:1000\"\n");
    let daemon = daemon(&tls, &mock, Some(&config)).await;
    let mut client = daemon.client().await.unwrap();
    let workdir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(workdir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let created = client
        .call(
            "session/create",
            json!({"cwd": workdir.path().display().to_string(),
                "environment": {"kind": "container", "image": "user"}}),
        )
        .await
        .unwrap();
    let mut s = Setup {
        session: created["session_id"].as_str().unwrap().to_owned(),
        mock,
        daemon,
        client,
        workdir,
    };
    let container = engine.session_containers(&s.session).unwrap()[0].clone();
    engine
        .docker(&[
            "exec",
            "-u",
            "0",
            &container,
            "sh",
            "-c",
            "echo root-only > /secret; chmod 600 /secret",
        ])
        .unwrap();
    s.mock.push_stream(sse::shell(
        "f",
        "(while :; do mkdir sub; echo mine > sub/secret; rm -rf sub; ln -s / sub; rm -f sub; done) \
         >/dev/null 2>&1 & echo $! > flipper.pid; id -u",
    ));
    for n in 0..40 {
        let call = if n % 2 == 0 {
            (
                "write_file",
                json!({"file_path": "sub/pwned", "content": "pwned\n"}),
            )
        } else {
            ("read_file", json!({"file_path": "sub/secret"}))
        };
        s.mock
            .push_stream(sse::tools("", &[(&format!("w{n}"), call.0, call.1)]));
    }
    s.mock
        .push_stream(sse::shell("k", "kill $(cat flipper.pid); echo stopped"));
    s.mock.push_stream(sse::text("done"));
    let outputs = crate::tool_outputs(&s.run("race").await);
    assert!(outputs[0].contains("1000"), "{}", outputs[0]);
    assert!(outputs.last().unwrap().contains("stopped"));
    for output in &outputs {
        assert!(!output.contains("root-only"), "{output}");
    }
    let planted = engine
        .docker(&[
            "exec",
            "-u",
            "0",
            &container,
            "sh",
            "-c",
            "ls /pwned 2>&1; cat /secret",
        ])
        .unwrap();
    assert!(
        planted.contains("No such file") && planted.contains("root-only"),
        "{planted}"
    );
}

/// An engine that answers garbage, and one that never answers: a clear error at
/// `session/create`, in bounded time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_or_silent_engine_is_a_clear_error() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .start()
        .await
        .unwrap();
    let mut client = daemon.client().await.unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let garbage = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addresses = [
        format!("tcp://{}", garbage.local_addr().unwrap()),
        format!("tcp://{}", silent.local_addr().unwrap()),
    ];
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        while let Ok((mut c, _)) = garbage.accept().await {
            let _ = c.write_all(&[0xff; 70_000]).await;
        }
    });
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((c, _)) = silent.accept().await {
            held.push(c);
        }
    });
    for address in &addresses {
        let err = client
            .call(
                "session/create",
                json!({"cwd": workdir.path().display().to_string(),
                    "environment": {"kind": "container", "image": IMAGE, "engine": address}}),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cannot reach the container engine") && err.contains(address),
            "{err}"
        );
    }
    held.abort();
}

/// The record of containers drives the next start's sweep: a container it names on the TLS
/// engine (made by hand, without the daemon's labels, as a daemon killed between recording
/// and labelling would leave) is removed at the next start, and a start with nothing recorded
/// connects to no engine at all.
async fn the_record_drives_the_sweep_and_an_empty_one_connects_nowhere(engine: &Engine) {
    let tls = TlsEngine::start(&engine.host).await.unwrap();
    // An engine address that counts the connections made to it.
    let counter = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let counted = format!("tcp://{}", counter.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let seen = connections.clone();
    let counting = tokio::spawn(async move {
        while counter.accept().await.is_ok() {
            seen.fetch_add(1, Ordering::SeqCst);
        }
    });
    let mock = MockProvider::start().await.unwrap();
    let mut daemon = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("DOCKER_HOST", &counted)
        .start()
        .await
        .unwrap();
    let mut client = daemon.client().await.unwrap();
    let workdir = tempfile::tempdir().unwrap();
    client
        .call(
            "session/create",
            json!({"cwd": workdir.path().display().to_string()}),
        )
        .await
        .unwrap();
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "nothing recorded: no engine is reached at start"
    );
    counting.abort();

    let name = format!("agentd-orphan-{}", std::process::id());
    engine
        .docker(&["run", "-d", "--name", &name, IMAGE, "sleep", "600"])
        .unwrap();
    let state = daemon.root.path().join("state/agentd");
    let record = json!({"containers": [{
        "engine": {"host": tls.host, "certs": tls.certs.path()},
        "name": name,
    }]});
    daemon
        .stop_with(nix::sys::signal::Signal::SIGKILL)
        .await
        .unwrap();
    std::fs::write(state.join("containers.json"), record.to_string()).unwrap();
    daemon.restart().await.unwrap();
    wait_for("the next start to remove the recorded container", || {
        engine
            .docker(&["ps", "-aq", "--filter", &format!("name=^{name}$")])
            .unwrap()
            .trim()
            .is_empty()
    })
    .await;
    wait_for("the record to be cleared", || {
        std::fs::read_to_string(state.join("containers.json")).is_ok_and(|r| !r.contains(&name))
    })
    .await;
}

/// A TLS engine is known by `ca.pem` alone, as docker's client knows it: an endpoint whose
/// certificate another CA signed (a machine in the middle, or one holding a public
/// certificate for the host) is refused, saying why, and so is a certificate directory
/// without the client's key. The genuine endpoint, asked the same way, is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_another_ca_certified_or_a_missing_key_is_refused() {
    let Some(engine) = Engine::get() else { return };
    let genuine = TlsEngine::start(&engine.host).await.unwrap();
    let impostor = TlsEngine::start(&engine.host).await.unwrap();
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&genuine, &mock, None).await;
    let mut client = daemon.client().await.unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let create = |engine: &str| {
        json!({"cwd": workdir.path().display().to_string(),
            "environment": {"kind": "container", "image": IMAGE, "engine": engine}})
    };
    let err = client
        .call("session/create", create(&impostor.host))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot reach the container engine")
            && err.contains(&impostor.host)
            && err.contains("certificate"),
        "{err}"
    );
    let served = client
        .call("session/create", create(&genuine.host))
        .await
        .expect("the genuine engine is served");
    client
        .call("session/close", json!({"session_id": served["session_id"]}))
        .await
        .unwrap();

    let keyless = tempfile::tempdir().unwrap();
    for file in ["ca.pem", "cert.pem"] {
        std::fs::copy(genuine.certs.path().join(file), keyless.path().join(file)).unwrap();
    }
    let daemon = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("DOCKER_HOST", &genuine.host)
        .env("DOCKER_TLS_VERIFY", "1")
        .env("DOCKER_CERT_PATH", &keyless.path().display().to_string())
        .start()
        .await
        .unwrap();
    let err = daemon
        .client()
        .await
        .unwrap()
        .call("session/create", create(&genuine.host))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot reach the container engine") && err.contains("key.pem"),
        "{err}"
    );
}

crate::container::on_each_engine!(
    a_tls_engine_runs_shell_rounds_file_tools_abort_and_timeout,
    a_tls_engine_lists_globs_and_greps_as_a_local_session_does,
    a_write_raced_through_a_swapped_link_is_the_container_users,
    the_record_drives_the_sweep_and_an_empty_one_connects_nowhere,
);
