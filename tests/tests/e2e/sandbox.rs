//! Sandboxes through the real daemon: what `shell` and the file tools may write in `read_only`
//! and `workspace_write` sessions (through `../`, absolute paths and symlinks), the network
//! rule against a loopback server, how refusals reach the model, and that the daemon itself
//! and other sessions are never restricted.

use crate::dirs::{Dirs, untouched};
use crate::{Setup, round, setup_with, shell};
use agentd_tests::family::Family;
use serde_json::{Value, json};
use std::collections::BTreeMap;

const ANTHROPIC: Family = Family::Anthropic;

/// [`Dirs`] with `ws/existing.txt` and a symlink `ws/link` to the outside directory.
fn sandbox_dirs() -> Dirs {
    let dirs = Dirs::new();
    std::fs::write(dirs.ws.join("existing.txt"), "original\n").unwrap();
    std::os::unix::fs::symlink(&dirs.outside, dirs.ws.join("link")).unwrap();
    dirs
}

/// A session of `profile` in `dirs.ws` with `config`, on a fresh daemon.
async fn session(dirs: &Dirs, profile: &str, config: Value) -> Setup {
    let mut s = setup_with(json!({"profile": profile, "config": config})).await;
    let snapshot = s
        .client
        .call(
            "session/create",
            json!({"cwd": dirs.ws.display().to_string(), "profile": profile, "config": config}),
        )
        .await
        .unwrap();
    s.session = snapshot["session_id"].as_str().unwrap().to_owned();
    s
}

/// Asserts that the calls `ids` failed with `says` (or one of its `|`-separated
/// alternatives) in what the model got.
fn refused(results: &BTreeMap<String, (bool, String)>, ids: &[&str], says: &str) {
    for id in ids {
        let (is_error, content) = &results[*id];
        assert!(
            *is_error && says.split('|').any(|s| content.contains(s)),
            "{id}: {content}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_commands_create_change_and_delete_nothing() {
    if !agentd_tests::landlock(3) {
        return;
    }
    let dirs = sandbox_dirs();
    let mut s = session(&dirs, "anthropic", json!({"sandbox": "read_only"})).await;
    let o = dirs.outside.display();
    let results = round(
        &mut s,
        &[
            shell("create", "touch new.txt".into()),
            shell("change", "echo changed > existing.txt".into()),
            shell("delete", "rm existing.txt".into()),
            shell("create-outside", format!("touch {o}/new.txt")),
            shell("change-outside", format!("echo changed >> {o}/victim.txt")),
            shell("delete-outside", format!("rm {o}/victim.txt")),
            shell("mkdir", "mkdir sub".into()),
            shell(
                "temp",
                "echo scratch > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo x > /dev/null".into(),
            ),
        ],
    )
    .await;
    refused(
        &results,
        &[
            "create",
            "change",
            "delete",
            "create-outside",
            "change-outside",
            "delete-outside",
            "mkdir",
        ],
        "Read-only file system|Permission denied",
    );
    // The model is told why, so it can take another way.
    refused(
        &results,
        &["create"],
        "[sandbox read_only: writes only under /",
    );
    assert!(!results["temp"].0, "{}", results["temp"].1);
    assert!(
        results["temp"].1.starts_with("scratch\n"),
        "{:?}",
        results["temp"]
    );
    assert_eq!(
        Dirs::files(&dirs.ws),
        BTreeMap::from([("existing.txt".to_owned(), "original\n".to_owned())])
    );
    assert_eq!(Dirs::files(&dirs.outside), untouched());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_sessions_imply_the_read_only_sandbox() {
    let dirs = sandbox_dirs();
    let mut s = setup_with(json!({})).await;
    let cwd = dirs.ws.display().to_string();
    let snapshot = s
        .client
        .call("session/create", json!({"cwd": cwd, "read_only": true}))
        .await
        .unwrap();
    assert_eq!(snapshot["config"]["sandbox"], "read_only");
    s.session = snapshot["session_id"].as_str().unwrap().to_owned();
    let refusal = s
        .request("session/set_config", json!({"config": {"sandbox": "off"}}))
        .await;
    assert_eq!(
        refusal["error"]["data"]["kind"], "invalid_config",
        "{refusal}"
    );
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a read-only session's sandbox is always read_only"),
        "{refusal}"
    );
    let refusal = s
        .client
        .request(
            "session/create",
            json!({"cwd": cwd, "read_only": true, "config": {"sandbox": "workspace_write"}}),
        )
        .await
        .unwrap();
    assert_eq!(
        refusal["error"]["data"]["kind"], "invalid_config",
        "{refusal}"
    );
    let refusal = s
        .client
        .request(
            "session/create",
            json!({"cwd": cwd, "config": {"sandbox_writable_roots": ["relative/dir"]}}),
        )
        .await
        .unwrap();
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sandbox_writable_roots must hold absolute paths, got \"relative/dir\""),
        "{refusal}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_write_keeps_the_shell_and_write_and_edit_inside() {
    if !agentd_tests::landlock(3) {
        return;
    }
    let dirs = sandbox_dirs();
    let extra = tempfile::tempdir().unwrap();
    let extra = std::fs::canonicalize(extra.path()).unwrap();
    let mut s = session(
        &dirs,
        "anthropic",
        json!({"sandbox": "workspace_write", "sandbox_writable_roots": [extra]}),
    )
    .await;
    let o = dirs.outside.display();
    let write = |id: &'static str, path: String| {
        (
            id,
            "write_file",
            json!({"file_path": path, "content": "new\n"}),
        )
    };
    let edit = |id: &'static str, path: String| {
        (
            id,
            "edit_file",
            json!({"file_path": path, "old_string": "original", "new_string": "edited"}),
        )
    };
    let results = round(
        &mut s,
        &[
            shell(
                "sh-in",
                "echo a > sh.txt && mkdir -p d && echo b > d/sh.txt".into(),
            ),
            shell("sh-extra", format!("echo e > {}/sh.txt", extra.display())),
            shell("sh-rel", "echo x > ../outside/sh-rel.txt".into()),
            shell("sh-abs", format!("echo x > {o}/sh-abs.txt")),
            shell("sh-link", "echo x > link/sh-link.txt".into()),
            shell("sh-change", "echo x >> link/victim.txt".into()),
            shell("sh-delete", "rm ../outside/victim.txt".into()),
            write("wf-in", "d/wf.txt".into()),
            write("wf-rel", "../outside/wf-rel.txt".into()),
            write("wf-abs", format!("{o}/wf-abs.txt")),
            write("wf-link", "link/wf-link.txt".into()),
            write("wf-dotdot", "nope/../../outside/wf-dotdot.txt".into()),
            edit("ed-in", "existing.txt".into()),
            edit("ed-rel", "../outside/victim.txt".into()),
            edit("ed-abs", format!("{o}/victim.txt")),
            edit("ed-link", "link/victim.txt".into()),
        ],
    )
    .await;
    for id in ["sh-in", "sh-extra", "wf-in", "ed-in"] {
        assert!(!results[id].0, "{id}: {}", results[id].1);
    }
    refused(
        &results,
        &["sh-rel", "sh-abs", "sh-link", "sh-change", "sh-delete"],
        "Read-only file system|Permission denied",
    );
    refused(
        &results,
        &["wf-rel", "wf-abs", "wf-link", "ed-rel", "ed-abs", "ed-link"],
        "refused by the sandbox: ",
    );
    refused(&results, &["wf-link", "ed-link"], "(it resolves to ");
    refused(&results, &["wf-dotdot"], "`..` after");
    assert_eq!(Dirs::files(&dirs.outside), untouched());
    assert_eq!(
        Dirs::files(&dirs.ws),
        BTreeMap::from([
            ("existing.txt".to_owned(), "edited\n".to_owned()),
            ("sh.txt".to_owned(), "a\n".to_owned()),
        ])
    );
    assert_eq!(
        Dirs::files(&dirs.ws.join("d")),
        BTreeMap::from([
            ("sh.txt".to_owned(), "b\n".to_owned()),
            ("wf.txt".to_owned(), "new\n".to_owned()),
        ])
    );
    assert_eq!(
        std::fs::read_to_string(extra.join("sh.txt")).unwrap(),
        "e\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_write_keeps_apply_patch_inside() {
    if !agentd_tests::landlock(3) {
        return;
    }
    let dirs = sandbox_dirs();
    let mut s = session(&dirs, "openai", json!({"sandbox": "workspace_write"})).await;
    let o = dirs.outside.display();
    let patch = |id: &'static str, body: String| {
        (
            id,
            "apply_patch",
            json!({"patch": format!("*** Begin Patch\n{body}*** End Patch\n")}),
        )
    };
    let update = "@@\n-original\n+patched\n";
    let results = round(
        &mut s,
        &[
            patch("add-in", "*** Add File: sub/added.txt\n+added\n".into()),
            patch("add-rel", "*** Add File: ../outside/added.txt\n+x\n".into()),
            patch("add-abs", format!("*** Add File: {o}/added.txt\n+x\n")),
            patch("add-link", "*** Add File: link/added.txt\n+x\n".into()),
            patch("update-link", format!("*** Update File: link/victim.txt\n{update}")),
            patch("delete-rel", "*** Delete File: ../outside/victim.txt\n".into()),
            patch(
                "move-out",
                format!("*** Update File: existing.txt\n*** Move to: {o}/moved.txt\n{update}"),
            ),
            // All or nothing: the file inside is put back when the one outside is refused.
            patch(
                "half",
                "*** Update File: existing.txt\n@@\n-original\n+half\n*** Add File: link/half.txt\n+x\n"
                    .into(),
            ),
        ],
    )
    .await;
    assert!(!results["add-in"].0, "{}", results["add-in"].1);
    refused(
        &results,
        &[
            "add-rel",
            "add-abs",
            "add-link",
            "update-link",
            "delete-rel",
            "move-out",
            "half",
        ],
        "refused by the sandbox: ",
    );
    refused(&results, &["half"], "no file was changed");
    assert_eq!(Dirs::files(&dirs.outside), untouched());
    assert_eq!(
        Dirs::files(&dirs.ws),
        BTreeMap::from([("existing.txt".to_owned(), "original\n".to_owned())])
    );
    assert_eq!(
        std::fs::read_to_string(dirs.ws.join("sub/added.txt")).unwrap(),
        "added\n"
    );
}

/// A loopback server that answers every connection with `hello`.
fn loopback_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::Write;
            let _ = (&stream).write_all(b"hello\n");
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_off_blocks_tcp_and_on_allows_it() {
    if !agentd_tests::landlock(4) || agentd_tests::program("python3").is_none() {
        return;
    }
    let dirs = sandbox_dirs();
    let port = loopback_server();
    let mut s = session(&dirs, "anthropic", json!({"sandbox": "workspace_write"})).await;
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && head -n1 <&3");
    let listen =
        "python3 -c 'import socket; socket.socket().bind((\"127.0.0.1\", 0)); print(\"bound\")'";
    let results = round(
        &mut s,
        &[
            shell("connect", connect.clone()),
            shell("bind", listen.into()),
        ],
    )
    .await;
    refused(&results, &["connect"], "Permission denied");
    refused(&results, &["bind"], "PermissionError");
    refused(&results, &["connect"], "network off");

    s.call(
        "session/set_config",
        json!({"config": {"sandbox_network": true}}),
    )
    .await;
    let results = round(
        &mut s,
        &[shell("connect", connect), shell("bind", listen.into())],
    )
    .await;
    assert!(
        results["connect"].1.starts_with("hello\n"),
        "{:?}",
        results["connect"]
    );
    assert!(
        results["bind"].1.starts_with("bound\n"),
        "{:?}",
        results["bind"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_and_other_sessions_are_not_restricted() {
    if !agentd_tests::landlock(3) {
        return;
    }
    let dirs = sandbox_dirs();
    let mut s = session(
        &dirs,
        "anthropic",
        json!({"sandbox": "read_only", "sandbox_writable_roots": ["/nonexistent-root"]}),
    )
    .await;
    let sandboxed = s.session.clone();
    let results = round(&mut s, &[shell("w", "touch refused.txt".into())]).await;
    refused(&results, &["w"], "Read-only file system|Permission denied");

    // Another session of the same daemon, sandbox off, writes outside its cwd.
    let free = s
        .client
        .call(
            "session/create",
            json!({"cwd": dirs.ws.display().to_string(), "config": {"sandbox": "off"}}),
        )
        .await
        .unwrap();
    s.session = free["session_id"].as_str().unwrap().to_owned();
    let o = dirs.outside.display();
    let results = round(&mut s, &[shell("w", format!("echo free > {o}/free.txt"))]).await;
    assert!(!results["w"].0, "{}", results["w"].1);
    assert_eq!(
        std::fs::read_to_string(dirs.outside.join("free.txt")).unwrap(),
        "free\n"
    );

    // The daemon still writes its state: the sandboxed session's config survives a restart.
    s.session = sandboxed;
    s.call(
        "session/set_config",
        json!({"config": {"sandbox": "workspace_write", "sandbox_network": true}}),
    )
    .await;
    s.daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    s.daemon.restart().await.unwrap();
    s.client = s.daemon.client().await.unwrap();
    let config = &s.call("session/get", json!({})).await["config"];
    assert_eq!(
        (
            &config["sandbox"],
            &config["sandbox_writable_roots"],
            &config["sandbox_network"]
        ),
        (
            &json!("workspace_write"),
            &json!(["/nonexistent-root"]),
            &json!(true)
        )
    );
    let results = round(&mut s, &[shell("w", "touch now-allowed.txt".into())]).await;
    assert!(!results["w"].0, "{}", results["w"].1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentctl_sets_and_shows_the_sandbox() {
    let dirs = sandbox_dirs();
    let s = setup_with(json!({})).await;
    let cwd = dirs.ws.display().to_string();
    let out = s
        .daemon
        .agentctl(
            &[
                "--json",
                "new",
                "--cwd",
                &cwd,
                "--sandbox",
                "read-only",
                "--writable-roots",
                "/a,/b",
                "--sandbox-network",
            ],
            None,
        )
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let snapshot: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &snapshot["config"];
    assert_eq!(
        (
            &c["sandbox"],
            &c["sandbox_writable_roots"],
            &c["sandbox_network"]
        ),
        (&json!("read_only"), &json!(["/a", "/b"]), &json!(true))
    );
    let id = snapshot["session_id"].as_str().unwrap();
    let out = s
        .daemon
        .agentctl(
            &["config", id, "sandbox=workspace-write", "writable-roots="],
            None,
        )
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Vec<String>> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect();
    assert_eq!(
        lines,
        vec![vec!["sandbox", "workspace_write"], vec!["writable-roots"]]
    );
    let out = s.daemon.agentctl(&["show", id], None).await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().any(|l| l
            .split_whitespace()
            .take(2)
            .eq(["sandbox", "workspace_write"])),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().take(2).eq(["sandbox-network", "true"])),
        "{text}"
    );
    let out = s
        .daemon
        .agentctl(
            &["new", "--cwd", &cwd, "--read-only", "--sandbox", "off"],
            None,
        )
        .await
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("a read-only session's sandbox is always read_only"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A refused write tells the model how to ask; the call that asks to leave the sandbox waits
/// for a person (whose yes runs it unconfined), and a session that does not ask refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_may_let_a_command_out_of_the_sandbox() {
    let dirs = sandbox_dirs();
    let o = dirs.outside.display().to_string();
    let mut s = session(
        &dirs,
        "anthropic",
        json!({"sandbox": "workspace_write", "approval": {"mode": "ask", "allow": ["shell"]}}),
    )
    .await;
    let inside = shell("confined", format!("touch {o}/new.txt"));
    let results = round(&mut s, &[inside]).await;
    refused(
        &results,
        &["confined"],
        "outside_sandbox: true to ask the user",
    );
    assert_eq!(Dirs::files(&dirs.outside), untouched());

    let outside = (
        "unconfined",
        "shell",
        json!({"command": format!("touch {o}/new.txt"), "outside_sandbox": true}),
    );
    s.mock.push_stream(ANTHROPIC.tools("", &[outside]));
    s.mock.push_stream(ANTHROPIC.text("done"));
    let since = s.call("session/get", json!({})).await["last_seq"].as_u64();
    s.client.subscribe(&s.session, since).await.unwrap();
    s.call("session/submit", json!({"text": "again"})).await;
    // The allow rule for `shell` does not cover leaving the sandbox: a person is asked.
    let events = s.until("approval_requested").await;
    let asked = events.last().unwrap();
    let summary = asked["data"]["summary"].as_str().unwrap();
    assert!(summary.starts_with("outside the sandbox"), "{summary}");
    s.call(
        "session/respond",
        json!({"request_id": asked["data"]["request_id"], "decision": "allow"}),
    )
    .await;
    s.until("processing_end").await;
    assert!(dirs.outside.join("new.txt").exists());

    // Without anyone to ask, leaving the sandbox is refused.
    std::fs::remove_file(dirs.outside.join("new.txt")).unwrap();
    s.call(
        "session/set_config",
        json!({"config": {"approval": {"mode": "auto"}}}),
    )
    .await;
    let again = (
        "auto",
        "shell",
        json!({"command": format!("touch {o}/new.txt"), "outside_sandbox": true}),
    );
    let results = round(&mut s, &[again]).await;
    refused(&results, &["auto"], "needs the user's approval");
    assert_eq!(Dirs::files(&dirs.outside), untouched());
}
