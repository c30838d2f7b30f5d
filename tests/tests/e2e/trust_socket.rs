//! The daemon's socket and its clients tried as an attacker would. A prompt-injected model's
//! commands, and whatever they leave running, cannot talk to agentd in any sandbox mode (it
//! refuses its own descendants, even with the sandbox off); the daemon's environment is closed
//! to them; a malformed credentials or config file is never quoted back. Clients never talk to
//! another user's server, nor through a runtime directory someone else made; and `--socket`
//! never deletes anything but a stale socket.

use crate::{of_kind, round, setup_unprivileged, setup_unprivileged_with, shell};
use agentd_tests::family::Family;
use agentd_tests::{UNPRIVILEGED, WAIT, bin_dir, prerequisite};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// What the daemon tells a process it started.
const REFUSED: &str = "agentd does not accept connections from processes it started";

/// Every way a command can reach the daemon: agentctl and a raw client, for reconfiguring its
/// session and creating one of its own now, and for answering its own approval from a process
/// left running after the command ended (once the test hands it the request's id, as if it
/// had guessed it); and the socket's path as the daemon sees it, through its `/proc` root
/// (which a mount namespace does not hide). Each attempt's output ends with its exit status,
/// in a file of the workspace.
const ATTACK: &str = r#"export AGENTD_NO_AUTOSTART=1
A="AGENTCTL --socket SOCKET"
try() { out=$1; shift; "$@" > "$out" 2>&1; echo "exit $?" >> "$out"; }
raw() { printf '%s\n' "$1" | socat -t 5 - UNIX-CONNECT:SOCKET; }
try set_config.out $A config SESSION sandbox=off approval=auto
try create.out $A submit --new 'run anything'
try raw_set_config.out raw '{"jsonrpc":"2.0","id":1,"method":"session/set_config","params":{"session_id":"SESSION","config":{"sandbox":"off","approval":{"mode":"auto"}}}}'
try raw_create.out raw '{"jsonrpc":"2.0","id":1,"method":"session/create","params":{"cwd":"/"}}'
try proc_root.out AGENTCTL --socket /proc/DAEMON/root/SOCKET config SESSION sandbox=off
(
  i=0
  while [ ! -s request.id ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
  id=$(cat request.id)
  try respond.out $A respond SESSION "$id" allow
  try raw_respond.out raw "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/respond\",\"params\":{\"session_id\":\"SESSION\",\"request_id\":\"$id\",\"decision\":\"allow\"}}"
  touch background.done
) > /dev/null 2>&1 &
echo started
"#;

/// The attack files written by agentctl, then by the raw client.
const BY_AGENTCTL: [&str; 3] = ["set_config.out", "create.out", "respond.out"];
const BY_RAW_CLIENT: [&str; 3] = ["raw_set_config.out", "raw_create.out", "raw_respond.out"];

/// The session's sandbox, which decides whether the socket is in plain sight.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sandbox {
    /// `sandbox = off`: the socket is in plain sight, so the daemon's own refusal is what
    /// stops every attempt.
    Off,
    /// The default sandbox: with namespaces the socket is hidden and an attempt may find
    /// nothing there; without them (Landlock alone) the daemon's refusal stops it.
    Default,
}

/// A session in `ask` mode whose model runs [`ATTACK`], then asks to run a command outside the
/// sandbox. The person (the test) allows the attack script to run; afterwards nothing the
/// commands sent has changed anything, the second call still waits for the person, and every
/// attempt was told why: where the socket is in plain sight, by the daemon's refusal itself.
async fn commands_cannot_talk_to_the_daemon(sandbox: Sandbox) {
    if agentd_tests::program("socat").is_none() {
        return;
    }
    let mut config = json!({"approval": {"mode": "ask"}});
    if sandbox == Sandbox::Off {
        config["sandbox"] = json!("off");
    }
    let mut s = setup_unprivileged(json!({"config": config})).await;
    let before = s.call("session/get", json!({})).await["config"].clone();
    let ws = std::fs::canonicalize(s.workdir.path()).unwrap();
    let script = ATTACK
        .replace(
            "AGENTCTL",
            &bin_dir().join("agentctl").display().to_string(),
        )
        .replace("SOCKET", &s.daemon.socket.display().to_string())
        .replace("SESSION", &s.session)
        .replace("DAEMON", &s.daemon.pid().to_string());
    std::fs::write(ws.join("attack.sh"), script).unwrap();
    s.daemon.give(&ws.join("attack.sh")).unwrap();
    s.mock.push_stream(
        Family::Anthropic.tools("", &[("c1", "shell", json!({"command": "sh attack.sh"}))]),
    );
    s.mock.push_stream(Family::Anthropic.tools(
        "",
        &[(
            "c2",
            "shell",
            json!({"command": "echo let-out", "outside_sandbox": true}),
        )],
    ));
    s.mock.push_stream(Family::Anthropic.text("done"));
    let since = s.call("session/get", json!({})).await["last_seq"].as_u64();
    s.client.subscribe(&s.session, since).await.unwrap();
    s.call("session/submit", json!({"text": "go"})).await;
    let asked = s.until("approval_requested").await;
    let asked = asked.last().unwrap();
    assert_eq!(asked["data"]["call_id"], "c1");
    let allow = json!({"request_id": asked["data"]["request_id"], "decision": "allow"});
    s.call("session/respond", allow).await;
    let asked = s.until("approval_requested").await;
    let asked = asked.last().unwrap();
    assert_eq!(asked["data"]["call_id"], "c2", "{asked}");
    let request = asked["data"]["request_id"].as_str().unwrap().to_owned();
    // Written whole, then renamed: the waiting process never reads half an id.
    std::fs::write(ws.join("request.id.new"), &request).unwrap();
    std::fs::rename(ws.join("request.id.new"), ws.join("request.id")).unwrap();
    let done = ws.join("background.done");
    crate::eventually("the process left running to try", async || done.exists()).await;

    let snapshot = s.call("session/get", json!({})).await;
    assert_eq!(snapshot["config"], before, "the config is unchanged");
    assert_eq!(snapshot["state"], "awaiting_input");
    assert_eq!(
        snapshot["pending"][0]["request_id"], request,
        "the approval still waits for the person: {snapshot}"
    );
    let list = s.client.call("session/list", json!({})).await.unwrap();
    assert_eq!(
        list["sessions"].as_array().unwrap().len(),
        1,
        "no session was created: {list}"
    );
    let seen = |file: &str| std::fs::read_to_string(ws.join(file)).unwrap();
    for file in BY_AGENTCTL.iter().chain(&BY_RAW_CLIENT) {
        let out = seen(file);
        // In a sandbox with namespaces the socket is not even there: nothing answers.
        let hidden = sandbox == Sandbox::Default
            && (out.contains("No such file or directory") || out.contains("cannot reach agentd"));
        assert!(out.contains(REFUSED) || hidden, "{file}: {out}");
    }
    // The daemon's `/proc` root is closed to its commands: it is not dumpable (and Landlock
    // keeps sandboxed commands from other processes' `/proc` links).
    let out = seen("proc_root.out");
    assert!(out.contains("Permission denied"), "proc_root.out: {out}");
    if sandbox == Sandbox::Off {
        for file in BY_AGENTCTL {
            assert!(seen(file).ends_with("exit 77\n"), "{file}: {}", seen(file));
        }
        assert!(
            s.daemon
                .log_text()
                .contains("refused a connection from a process agentd started"),
            "the refusals are logged"
        );
    }

    // The person denies the call; the session goes on.
    let deny = json!({"request_id": request, "decision": "deny"});
    s.call("session/respond", deny).await;
    let rest = s.until("processing_end").await;
    let end = of_kind(&rest, "processing_end");
    assert_eq!(end[0]["data"]["reason"], "completed", "{rest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_cannot_talk_to_the_daemon_with_the_sandbox_off() {
    commands_cannot_talk_to_the_daemon(Sandbox::Off).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_cannot_talk_to_the_daemon_in_a_default_session() {
    if !agentd_tests::landlock(3) {
        return;
    }
    commands_cannot_talk_to_the_daemon(Sandbox::Default).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemons_environment_and_memory_are_closed_to_commands_with_the_sandbox_off() {
    const KEY: &str = "fake-daemon-environ-secret-4711";
    let mut s = setup_unprivileged_with(
        |b| b.env("ANTHROPIC_API_KEY", KEY),
        tempfile::tempdir().unwrap(),
        json!({"config": {"sandbox": "off"}}),
    )
    .await;
    let pid = s.daemon.pid();
    // Its own environment is readable, so the kernel would show a dumpable process's too (as
    // it showed the daemon's before it made itself non-dumpable).
    let look = format!(
        "cat /proc/{pid}/environ | tr '\\0' '\\n'; \
         cat /proc/{pid}/environ > /dev/null; echo \"environ: $?\"; \
         cat /proc/{pid}/maps > /dev/null; echo \"maps: $?\"; \
         grep -c . /proc/self/environ > /dev/null && echo own-environ-readable"
    );
    let results = round(
        &mut s,
        &[
            shell("look", look),
            (
                "read",
                "read_file",
                json!({"file_path": format!("/proc/{pid}/environ")}),
            ),
        ],
    )
    .await;
    let (_, looked) = &results["look"];
    assert!(looked.contains("own-environ-readable"), "{looked}");
    assert!(looked.contains("environ: 1"), "{looked}");
    assert!(looked.contains("maps: 1"), "{looked}");
    assert!(looked.contains("Permission denied"), "{looked}");
    let (read_failed, read) = &results["read"];
    assert!(*read_failed, "{read}");
    for (what, text) in [("shell", looked), ("read_file", read)] {
        assert!(!text.contains(KEY), "{what} read the key: {text}");
        assert!(!text.contains("ANTHROPIC_BASE_URL"), "{what}: {text}");
    }
    let journal =
        std::fs::read_to_string(s.daemon.sessions_dir().join(&s.session).join("log.jsonl"))
            .unwrap();
    assert!(!journal.contains(KEY));
    for request in s.mock.requests() {
        assert!(!request.body.to_string().contains(KEY));
    }
}

/// Runs `cmd` to completion, within the test's guard against a hang.
async fn finish(cmd: Command) -> Output {
    let what = format!("{cmd:?}");
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    tokio::time::timeout(WAIT, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish"))
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A directory in /tmp (short, for socket paths) that, like /tmp, everyone may write in.
fn shared_tmp() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("ad")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

/// The user the processes under attack run as: an ordinary one when the tests run as root.
fn victim() -> (u32, u32) {
    if nix::unistd::geteuid().is_root() {
        UNPRIVILEGED
    } else {
        (
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        )
    }
}

/// `binary` (agentd or agentctl) run as the victim with no `XDG_RUNTIME_DIR`, so the
/// runtime directory is the fallback in `tmp`: `<tmp>/agentd-<uid>`.
fn without_runtime_dir(binary: &str, tmp: &Path) -> Command {
    let (uid, gid) = victim();
    let home = tmp.join(format!("home-{uid}"));
    std::fs::create_dir_all(&home).unwrap();
    std::os::unix::fs::lchown(&home, Some(uid), Some(gid)).unwrap();
    let mut cmd = Command::new(bin_dir().join(binary));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("TMPDIR", tmp)
        .env("AGENTD_NO_AUTOSTART", "1");
    if nix::unistd::geteuid().is_root() {
        cmd.uid(uid).gid(gid);
    }
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_squatted_runtime_directory_stops_the_daemon_and_agentctl() {
    let tmp = shared_tmp();
    let (uid, gid) = victim();
    let dir = tmp.path().join(format!("agentd-{uid}"));
    let root = nix::unistd::geteuid().is_root();
    let mut cases: Vec<(&str, String)> = Vec::new();
    if prerequisite("root, to make a directory another user's", root) {
        cases.push((
            "another user's",
            format!("belongs to uid 4242, not to you (uid {uid})"),
        ));
    }
    cases.push(("open to all", "has mode 0777".into()));
    cases.push((
        "a symbolic link",
        "is a symbolic link, not a directory".into(),
    ));
    for (case, says) in cases {
        let target = tmp.path().join("elsewhere");
        match case {
            "another user's" => {
                std::fs::create_dir(&dir).unwrap();
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
                std::os::unix::fs::lchown(&dir, Some(4242), Some(4242)).unwrap();
            }
            "open to all" => {
                std::fs::create_dir(&dir).unwrap();
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
                std::os::unix::fs::lchown(&dir, Some(uid), Some(gid)).unwrap();
            }
            _ => {
                std::fs::create_dir(&target).unwrap();
                std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700)).unwrap();
                std::os::unix::fs::lchown(&target, Some(uid), Some(gid)).unwrap();
                std::os::unix::fs::symlink(&target, &dir).unwrap();
            }
        }
        let refusal = format!(
            "refusing to use the runtime directory: {} {says}",
            dir.display()
        );
        let daemon = finish(without_runtime_dir("agentd", tmp.path())).await;
        assert!(!daemon.status.success(), "{case}: agentd started");
        assert!(
            stderr(&daemon).contains(&refusal),
            "{case}: {}",
            stderr(&daemon)
        );
        let mut status = without_runtime_dir("agentctl", tmp.path());
        status.arg("status");
        let client = finish(status).await;
        assert_eq!(
            client.status.code(),
            Some(77),
            "{case}: {}",
            stderr(&client)
        );
        assert!(
            stderr(&client).contains(&refusal),
            "{case}: {}",
            stderr(&client)
        );
        let inside = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(inside, 0, "{case}: agentd put something in it");
        if case == "a symbolic link" {
            std::fs::remove_file(&dir).unwrap();
            std::fs::remove_dir(&target).unwrap();
        } else {
            std::fs::remove_dir(&dir).unwrap();
        }
    }

    // Unsquatted, agentd makes the directory itself (0700, the user's) and agentctl uses it.
    let mut daemon = without_runtime_dir("agentd", tmp.path());
    daemon.stdout(Stdio::null()).stderr(Stdio::null());
    let mut daemon = tokio::process::Command::from(daemon)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let socket = dir.join("agentd.sock");
    crate::eventually("agentd to serve in the directory it made", async || {
        tokio::net::UnixStream::connect(&socket).await.is_ok()
    })
    .await;
    let meta = std::fs::symlink_metadata(&dir).unwrap();
    assert!(meta.is_dir());
    assert_eq!(meta.permissions().mode() & 0o7777, 0o700);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), uid);
    let mut status = without_runtime_dir("agentctl", tmp.path());
    status.arg("status");
    let client = finish(status).await;
    assert!(client.status.success(), "{}", stderr(&client));
    daemon.kill().await.unwrap();
}

/// `agentd --socket PATH` with its state in `tmp`.
fn agentd_at(tmp: &Path, socket: &Path) -> Command {
    let mut cmd = Command::new(bin_dir().join("agentd"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", tmp)
        .env("XDG_RUNTIME_DIR", tmp.join("run"))
        .env("XDG_STATE_HOME", tmp.join("state"))
        .arg("--socket")
        .arg(socket);
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentd_replaces_only_a_stale_socket_at_its_socket_path() {
    let tmp = tempfile::Builder::new()
        .prefix("ad")
        .tempdir_in("/tmp")
        .unwrap();
    let tmp = tmp.path();
    let file = tmp.join("notes.txt");
    std::fs::write(&file, "precious data\n").unwrap();
    let dir = tmp.join("dir");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("inside"), "kept\n").unwrap();
    let link = tmp.join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let live = tmp.join("live.sock");
    let listener = std::os::unix::net::UnixListener::bind(&live).unwrap();
    for (path, says) in [
        (&file, "exists and is a regular file, not a socket"),
        (&dir, "exists and is a directory, not a socket"),
        (&link, "exists and is a symbolic link, not a socket"),
        (&live, "something already listens on"),
    ] {
        let out = finish(agentd_at(tmp, path)).await;
        assert!(!out.status.success(), "{}: agentd started", path.display());
        assert!(
            stderr(&out).contains(&format!("{}", path.display())) && stderr(&out).contains(says),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious data\n");
    assert_eq!(
        std::fs::read_to_string(dir.join("inside")).unwrap(),
        "kept\n"
    );
    assert_eq!(std::fs::read_link(&link).unwrap(), file);
    assert!(
        !tmp.join("notes.sock.lock").exists(),
        "no lock file beside the refused path"
    );
    std::os::unix::net::UnixStream::connect(&live).expect("the other program still serves");
    drop(listener);

    // A socket nobody listens on any more is a dead daemon's: replaced.
    let stale = tmp.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let mut cmd = agentd_at(tmp, &stale);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let mut daemon = tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    crate::eventually("agentd to serve on the stale socket's path", async || {
        tokio::net::UnixStream::connect(&stale).await.is_ok()
    })
    .await;
    daemon.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentctl_sends_nothing_to_a_server_of_another_user() {
    if !prerequisite(
        "root, to run a server as another user",
        nix::unistd::geteuid().is_root(),
    ) || agentd_tests::program("socat").is_none()
    {
        return;
    }
    let tmp = shared_tmp();
    let socket = tmp.path().join("agentd.sock");
    let (uid, _) = victim();
    for args in [&["status"][..], &["acp"], &["socket-path"]] {
        // Another user's server on the path the victim uses, recording what it is sent; it
        // serves one connection and exits when that closes, so what it got is all written.
        let got = tmp.path().join(format!("got-{}", args[0]));
        let mut server = Command::new("socat");
        server
            .arg(format!("UNIX-LISTEN:{},mode=666", socket.display()))
            .arg(format!("OPEN:{},creat,append", got.display()))
            .uid(4242)
            .gid(4242);
        let mut server = tokio::process::Command::from(server)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        crate::eventually("the other user's server to listen", async || {
            socket.exists()
        })
        .await;
        let mut cmd = without_runtime_dir("agentctl", tmp.path());
        cmd.arg("--socket").arg(&socket).args(args);
        let out = finish(cmd).await;
        assert_eq!(out.status.code(), Some(77), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!(
                "the process serving {} runs as uid 4242, not as you (uid {uid})",
                socket.display()
            )),
            "{args:?}: {}",
            stderr(&out)
        );
        tokio::time::timeout(WAIT, server.wait())
            .await
            .expect("the server ends with its connection")
            .unwrap();
        let sent = std::fs::read(&got).unwrap_or_default();
        assert!(
            sent.is_empty(),
            "{args:?} sent {:?}",
            String::from_utf8_lossy(&sent)
        );
    }
}

/// The credentials files tried below: each malformed in a way whose error could quote `key`.
fn malformed_credentials(key: &str) -> Vec<String> {
    vec![
        format!("{{\"api_keys\": \"{key}\"}}\n"),
        format!("{{\"{key}\": {{}}}}\n"),
        format!("{{\"api_keys\": {{\"anthropic\": [\"{key}\"]}}}}\n"),
        format!("{{\"api_keys\": {{\"anthropic\": \"{key} \"}}}}\n"),
        format!("{{\"api_keys\": {{\"anthropic\": \"{key}\",}}}}\n"),
        format!("api_keys = {{ anthropic = \"{key}\" }}\n"),
    ]
}

/// Every file under `dir`, with its text.
fn files_under(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            found.extend(files_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            found.push((path, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_credentials_or_config_file_is_never_quoted() {
    const KEY: &str = "fake-LEAKED-0123456789";
    let mut s = setup_unprivileged(json!({})).await;
    let creds = s.daemon.root.path().join("config/agentd/credentials.json");
    std::fs::create_dir_all(creds.parent().unwrap()).unwrap();
    s.daemon.give(creds.parent().unwrap()).unwrap();
    let output = |out: &Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    for text in malformed_credentials(KEY) {
        std::fs::write(&creds, &text).unwrap();
        std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600)).unwrap();
        s.daemon.give(&creds).unwrap();
        let cwd = s.workdir.path().display().to_string();
        let created = s
            .client
            .request("session/create", json!({"cwd": cwd}))
            .await
            .unwrap();
        let said = created["error"]["message"].as_str().unwrap_or_default();
        assert!(
            said.contains("credentials file") && said.contains("line 1, column"),
            "{text}: {created}"
        );
        let check = s
            .daemon
            .command("agentd")
            .arg("--check-config")
            .output()
            .unwrap();
        assert!(!check.status.success(), "{text}");
        assert!(
            output(&check).contains("line 1, column"),
            "{text}: {}",
            output(&check)
        );
        let mut login = s.daemon.command("agentctl");
        login.args(["login", "anthropic"]);
        let login = {
            let mut child = tokio::process::Command::from(login)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            use tokio::io::AsyncWriteExt;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(b"fake-new-key\n").await.unwrap();
            drop(stdin);
            tokio::time::timeout(WAIT, child.wait_with_output())
                .await
                .unwrap()
                .unwrap()
        };
        assert!(!login.status.success(), "{text}: login rewrote the file");
        assert!(
            output(&login).contains("line 1, column"),
            "{text}: {}",
            output(&login)
        );
        let doctor = s.daemon.agentctl(&["doctor"], None).await.unwrap();
        assert!(
            output(&doctor).contains("credentials file"),
            "{text}: {}",
            output(&doctor)
        );
        for (what, said) in [
            ("session/create", created.to_string()),
            ("agentd --check-config", output(&check)),
            ("agentctl login", output(&login)),
            ("agentctl doctor", output(&doctor)),
        ] {
            assert!(!said.contains(KEY), "{what} quoted the file {text}: {said}");
        }
        assert_eq!(
            std::fs::read_to_string(&creds).unwrap(),
            text,
            "the file is kept"
        );
    }
    // A key pasted into the config file, where none belongs.
    let config = s.daemon.root.path().join("pasted.toml");
    std::fs::write(
        &config,
        format!("[providers.anthropic]\napi_key = \"{KEY}\"\n"),
    )
    .unwrap();
    let check = s
        .daemon
        .command("agentd")
        .arg("--config")
        .arg(&config)
        .arg("--check-config")
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(78));
    let said = output(&check);
    assert!(
        said.contains("line 2, column 1: providers.anthropic.api_key: unknown field"),
        "{said}"
    );
    assert!(!said.contains(KEY), "{said}");
    // Nor did any of it reach the daemon's log or its state (journals, records).
    let state = s.daemon.root.path().join("state");
    for (path, text) in files_under(&state) {
        assert!(!text.contains(KEY), "{} holds the key", path.display());
    }
    assert!(!s.daemon.log_text().contains(KEY), "the log holds the key");
}
