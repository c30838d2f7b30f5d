//! The sandbox tried as an attacker would: a prompt-injected model in a default
//! (`workspace_write`) session of a daemon that runs as an ordinary user. Its commands find
//! agentd's socket, state, config and stored keys gone, reach nothing with the network off
//! (no UDP datagram, no abstract Unix socket), and a `.git/config` they plant runs nothing
//! when the daemon looks at the workspace for the next session.

use crate::{Setup, round, setup_unprivileged, shell};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A default session of an unprivileged daemon with `config`, its work directory a git
/// repository the daemon's user owns.
async fn session(config: Value) -> Setup {
    let mut s = setup_unprivileged(json!({})).await;
    s.call("session/set_config", json!({"config": config}))
        .await;
    s
}

fn namespaces_ready() -> bool {
    agentd_tests::landlock(3) && agentd_tests::program("bwrap").is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_find_agentds_socket_state_config_and_keys_gone() {
    if !namespaces_ready() {
        return;
    }
    let mut s = session(json!({})).await;
    let out = s
        .daemon
        .agentctl(&["login", "anthropic"], Some("fake-stored-secret-42"))
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let root = s.daemon.root.path().to_owned();
    let creds = root.join("config/agentd/credentials.json");
    assert!(creds.is_file(), "login stored no key");
    let look = format!(
        "ls -A {run}; ls -A {state}; ls -A {config}; cat {creds}; \
         test -e {socket} && echo SOCKET-VISIBLE; echo done",
        run = root.join("run").display(),
        state = root.join("state/agentd").display(),
        config = root.join("config/agentd").display(),
        creds = creds.display(),
        socket = s.daemon.socket.display(),
    );
    let results = round(&mut s, &[shell("look", look.clone())]).await;
    let (_, seen) = &results["look"];
    assert!(seen.contains("done"), "{seen}");
    for secret in [
        "fake-stored-secret-42",
        "SOCKET-VISIBLE",
        "agentd.sock",
        "sessions",
    ] {
        assert!(!seen.contains(secret), "{secret} visible: {seen}");
    }
    let journal =
        std::fs::read_to_string(s.daemon.sessions_dir().join(&s.session).join("log.jsonl"))
            .unwrap();
    assert!(!journal.contains("fake-stored-secret-42"));

    // The same look with the sandbox off sees them: the test can tell.
    s.call("session/set_config", json!({"config": {"sandbox": "off"}}))
        .await;
    let results = round(&mut s, &[shell("look", look)]).await;
    let (_, seen) = &results["look"];
    assert!(seen.contains("SOCKET-VISIBLE"), "{seen}");
}

/// Sends a UDP datagram to `udp` and connects to the abstract Unix socket `name` from a
/// command; says which got out.
fn escape_attempt(udp: u16, name: &str) -> String {
    format!(
        "python3 - <<'EOF'\n\
         import socket\n\
         try:\n    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n    \
         u.sendto(b'leak', ('127.0.0.1', {udp}))\n    print('udp sent')\n\
         except OSError as e:\n    print('udp refused', e)\n\
         try:\n    a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n    \
         a.connect('\\0{name}')\n    a.sendall(b'leak')\n    print('abstract connected')\n\
         except OSError as e:\n    print('abstract refused', e)\n\
         EOF"
    )
}

/// What reached the test's UDP socket and abstract listener (both non-blocking).
fn leaked(
    udp: &std::net::UdpSocket,
    abstract_: &std::os::unix::net::UnixListener,
) -> Vec<&'static str> {
    let mut leaked = Vec::new();
    let mut buf = [0u8; 16];
    if udp.recv_from(&mut buf).is_ok() {
        leaked.push("udp");
    }
    if abstract_.accept().is_ok() {
        leaked.push("abstract");
    }
    leaked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_network_off_no_datagram_or_abstract_socket_gets_out_and_on_no_abstract_one() {
    if !namespaces_ready() || agentd_tests::program("python3").is_none() {
        return;
    }
    use std::os::linux::net::SocketAddrExt;
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let port = udp.local_addr().unwrap().port();
    let name = format!("agentd-test-{}", std::process::id() ^ rand_suffix());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();

    let mut s = session(json!({})).await;
    let results = round(&mut s, &[shell("net", escape_attempt(port, &name))]).await;
    let (_, said) = &results["net"];
    assert!(said.contains("udp") && said.contains("abstract"), "{said}");
    assert_eq!(leaked(&udp, &listener), Vec::<&str>::new(), "{said}");

    // With the network on, the datagram gets out (the test can tell); abstract sockets stay
    // closed where Landlock can scope them (ABI 6), since they are local input, not network.
    s.call(
        "session/set_config",
        json!({"config": {"sandbox_network": true}}),
    )
    .await;
    let results = round(&mut s, &[shell("net", escape_attempt(port, &name))]).await;
    let (_, said) = &results["net"];
    let expected = if agentd_tests::landlock_abi() >= 6 {
        vec!["udp"]
    } else {
        vec!["udp", "abstract"]
    };
    assert_eq!(leaked(&udp, &listener), expected, "{said}");

    // And with the sandbox off, both: what closed the abstract socket was the sandbox.
    s.call("session/set_config", json!({"config": {"sandbox": "off"}}))
        .await;
    let results = round(&mut s, &[shell("net", escape_attempt(port, &name))]).await;
    let (_, said) = &results["net"];
    assert_eq!(leaked(&udp, &listener), vec!["udp", "abstract"], "{said}");
}

/// A `.git/config` whose fsmonitor, hooks, pager and signature program each leave a mark in
/// `marks` when run.
fn plant(ws: &Path, marks: &Path) -> String {
    let evil = ws.join("evil.sh");
    format!(
        "git init -q . && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m one && \
         printf '#!/bin/sh\\ntouch {marks}/$1-ran\\necho 0\\n' > {evil} && chmod +x {evil} && \
         git config core.fsmonitor '{evil} fsmonitor' && \
         git config core.hooksPath {ws}/hooks && mkdir -p hooks && \
         cp {evil} hooks/post-index-change && \
         git config core.pager '{evil} pager' && \
         git config log.showSignature true && git config gpg.program '{evil} gpg' && \
         git config filter.x.clean '{evil} filter' && echo '* filter=x' > .gitattributes && \
         echo planted",
        evil = evil.display(),
        marks = marks.display(),
        ws = ws.display(),
    )
}

/// A default session whose model ran `plant(workspace, marks)`; `marks` is a directory
/// outside the workspace that the daemon's user may write, for what the plant runs to mark.
async fn planted(plant: fn(&Path, &Path) -> String) -> (Setup, PathBuf, PathBuf) {
    let mut s = session(json!({})).await;
    let ws = std::fs::canonicalize(s.workdir.path()).unwrap();
    let marks = tempfile::tempdir().unwrap();
    let marks = std::fs::canonicalize(marks.keep()).unwrap();
    s.daemon.give(&marks).unwrap();
    let results = round(&mut s, &[shell("plant", plant(&ws, &marks))]).await;
    assert!(
        results["plant"].1.contains("planted"),
        "{:?}",
        results["plant"]
    );
    (s, ws, marks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_git_config_runs_nothing_when_the_next_session_starts() {
    if !namespaces_ready() || agentd_tests::program("git").is_none() {
        return;
    }
    let (mut s, ws, marks) = planted(plant).await;

    // The next session in this directory looks at the repository.
    let system = next_system_prompt(&mut s, &ws).await;
    assert!(system.contains("one"), "the snapshot was taken: {system}");
    assert!(
        listed(&marks).is_empty(),
        "the daemon ran {:?}",
        listed(&marks)
    );

    // The planted config does run programs when git runs as it normally would.
    the_plant_runs_in_plain_git(&s, &ws, &marks, "fsmonitor-ran");
}

/// `git status` in `ws`, run by the daemon's user as git normally runs, leaves `mark` in
/// `marks` (so the plant the test found inert under agentd is live); then `marks` goes.
fn the_plant_runs_in_plain_git(s: &Setup, ws: &Path, marks: &Path, mark: &str) {
    let control = s
        .daemon
        .program("git")
        .args(["status", "--porcelain"])
        .current_dir(ws)
        .output()
        .unwrap();
    assert!(control.status.success(), "{control:?}");
    assert!(marks.join(mark).exists(), "the plant is inert");
    std::fs::remove_dir_all(marks).unwrap();
}

/// A repository of the workspace with a filter driver planted for every file: the script
/// marks each run in `marks` and, smudging, turns "base" into "smudged" (cleaning, back).
fn plant_filter(ws: &Path, marks: &Path) -> String {
    let evil = ws.join("evil.sh");
    format!(
        "git init -q . && echo base > a.txt && git add a.txt && \
         git -c user.email=a@b -c user.name=a commit -q -m one && \
         printf '#!/bin/sh\\ntouch {marks}/$1-ran\\n[ $1 = smudge ] && exec sed s/base/smudged/\\nexec sed s/smudged/base/\\n' > {evil} && \
         chmod +x {evil} && git config filter.evil.smudge '{evil} smudge' && \
         git config filter.evil.clean '{evil} clean' && \
         echo '* filter=evil' > .git/info/attributes && echo planted",
        evil = evil.display(),
        marks = marks.display(),
    )
}

/// Sets `file`'s modification time back, so that git no longer trusts its index entry and
/// reads (and cleans) the file to compare it.
fn backdate(file: &Path) {
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30);
    std::fs::File::options()
        .write(true)
        .open(file)
        .unwrap()
        .set_modified(old)
        .unwrap();
}

/// Names of the files in `dir`.
fn listed(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// A model plants a filter driver in the repository's `.git`, which its session may write;
/// agentd's own git runs such filters when it checks a new worktree out and when it checks
/// one at its session's deletion. They run, but only as far as the model's own commands
/// reach: the checkout in a worktree session's sandbox, the check read-only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_a_model_plants_runs_sandboxed_when_agentd_makes_or_removes_a_worktree() {
    if !namespaces_ready() || agentd_tests::program("git").is_none() {
        return;
    }
    let (mut s, ws, marks) = planted(plant_filter).await;

    let created = s
        .client
        .call(
            "session/create",
            json!({"cwd": ws.display().to_string(), "worktree": "planted"}),
        )
        .await
        .unwrap();
    let tree = Path::new(created["worktree"]["path"].as_str().unwrap()).to_owned();
    // The smudge filter ran (the checkout is smudged), and wrote nothing outside.
    assert_eq!(
        std::fs::read_to_string(tree.join("a.txt")).unwrap(),
        "smudged\n"
    );
    assert!(
        listed(&marks).is_empty(),
        "the checkout ran {:?}",
        listed(&marks)
    );

    backdate(&tree.join("a.txt"));
    let deleted = s
        .client
        .call(
            "session/delete",
            json!({"session_id": created["session_id"]}),
        )
        .await
        .unwrap();
    assert!(deleted["worktree_kept"].is_null(), "{deleted}");
    assert!(!tree.exists());
    assert!(
        listed(&marks).is_empty(),
        "the check ran {:?}",
        listed(&marks)
    );

    // The plant is live: plain git runs it.
    backdate(&ws.join("a.txt"));
    the_plant_runs_in_plain_git(&s, &ws, &marks, "clean-ran");
}

/// A number no other run of this test picks at the same time.
fn rand_suffix() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
}

/// Live processes whose command line mentions `needle`.
fn processes_naming(needle: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|p| std::fs::read(p.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(needle))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_namespaces_holder_ends_with_the_session_and_with_a_killed_daemon() {
    if !namespaces_ready() {
        return;
    }
    let mut s = session(json!({})).await;
    let ws = std::fs::canonicalize(s.workdir.path()).unwrap();
    let ws = ws.display().to_string();
    let results = round(&mut s, &[shell("run", "echo inside".into())]).await;
    assert!(results["run"].1.contains("inside"));
    assert!(
        processes_naming(&ws).iter().any(|c| c.starts_with("bwrap")),
        "no holder: {:?}",
        processes_naming(&ws)
    );
    s.call("session/close", json!({})).await;
    crate::eventually("the holder to end with its session", async || {
        processes_naming(&ws).is_empty()
    })
    .await;

    let mut client = s.daemon.client().await.unwrap();
    let id = s
        .daemon
        .create_session(&mut client, s.workdir.path(), json!({}))
        .await
        .unwrap();
    s.session = id;
    let results = round(&mut s, &[shell("run", "echo again".into())]).await;
    assert!(results["run"].1.contains("again"));
    assert!(!processes_naming(&ws).is_empty());
    s.daemon
        .stop_with(nix::sys::signal::Signal::SIGKILL)
        .await
        .unwrap();
    crate::eventually("the holder to end with the killed daemon", async || {
        processes_naming(&ws).is_empty()
    })
    .await;
}

/// The system prompt of a new session in `dir`, after one turn.
pub(crate) async fn next_system_prompt(s: &mut Setup, dir: &Path) -> String {
    let mut client = s.daemon.client().await.unwrap();
    let id = s
        .daemon
        .create_session(&mut client, dir, json!({}))
        .await
        .unwrap();
    s.mock
        .push_stream(agentd_tests::family::Family::Anthropic.text("ok"));
    client.subscribe(&id, None).await.unwrap();
    client
        .call("session/submit", json!({"session_id": id, "text": "hi"}))
        .await
        .unwrap();
    client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    s.mock.requests().last().unwrap().body["system"].to_string()
}

/// Two sessions of one workspace share their namespaces (one holder per workspace and policy),
/// which bind the parent of both sessions' temp dirs read-write; a command of one still cannot
/// write the other's temp dir or the parent. (It can read them: reads are not confined, as
/// SECURITY.md says, and the two sessions share a writable workspace anyway.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_cannot_reach_a_sibling_sessions_temp_dir() {
    if !namespaces_ready() {
        return;
    }
    let mut s = session(json!({})).await;
    let first = s.session.clone();
    let results = round(
        &mut s,
        &[shell(
            "mine",
            "echo secret-of-the-first > \"$TMPDIR/note\" && printf 'tmp=%s\\n' \"$TMPDIR\"".into(),
        )],
    )
    .await;
    let theirs = results["mine"]
        .1
        .lines()
        .find_map(|l| l.strip_prefix("tmp="))
        .unwrap_or_else(|| panic!("no TMPDIR: {}", results["mine"].1))
        .to_owned();
    assert!(
        Path::new(&theirs).join("note").is_file(),
        "the temp dir has the same path outside the sandbox: {theirs}"
    );
    let parent = Path::new(&theirs).parent().unwrap().display().to_string();

    let mut client = s.daemon.client().await.unwrap();
    s.session = s
        .daemon
        .create_session(&mut client, s.workdir.path(), json!({}))
        .await
        .unwrap();
    assert_ne!(s.session, first);
    let attack = format!(
        "echo planted > {theirs}/planted; echo more >> {theirs}/note; rm -f {theirs}/note; \
         mkdir {parent}/mine; echo own > \"$TMPDIR/own\" && echo own-ok; \
         test \"$TMPDIR\" != {theirs} && echo other-dir"
    );
    let results = round(&mut s, &[shell("attack", attack)]).await;
    let seen = &results["attack"].1;
    assert!(
        seen.contains("own-ok") && seen.contains("other-dir"),
        "its own temp dir works: {seen}"
    );
    assert!(
        !Path::new(&theirs).join("planted").exists(),
        "wrote into it: {seen}"
    );
    assert_eq!(
        std::fs::read_to_string(Path::new(&theirs).join("note")).unwrap(),
        "secret-of-the-first\n",
        "changed or removed the sibling's file: {seen}"
    );
    assert!(
        !Path::new(&parent).join("mine").exists(),
        "wrote the parent: {seen}"
    );
}
