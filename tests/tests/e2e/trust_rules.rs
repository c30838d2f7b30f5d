//! Approval rules tried as an attacker would: a prompt-injected model in an `ask` session of
//! a daemon that runs as an ordinary user, the sandbox off so that the rules alone decide.
//! A command chained onto an allowed one is asked about, never run; a denied program is
//! denied however it is spelled; a write through a workspace symlink is matched where it
//! leads. Before agentd parsed lines and resolved paths, every call here ran.

use crate::{Setup, of_kind, setup_unprivileged};
use agentd_tests::mock::MockProvider;
use agentd_tests::sshd::SshServer;
use agentd_tests::{TestDaemon, sse};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// An `ask` session with the sandbox off and `approval` (allow and deny rules), in a work
/// directory holding a git repository and `files`, all the daemon's user's.
async fn session(approval: Value, files: &[&str]) -> Setup {
    let mut approval = approval;
    approval["mode"] = json!("ask");
    let s = setup_unprivileged(json!({"config": {"sandbox": "off", "approval": approval}})).await;
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(s.workdir.path())
        .status()
        .expect("git runs");
    assert!(status.success());
    for file in files {
        std::fs::write(s.workdir.path().join(file), "keep me").unwrap();
    }
    s.daemon.give(s.workdir.path()).unwrap();
    s
}

/// What one model response with `calls` led to: the calls asked about, with the summary
/// shown (each answered `deny`), each call a rule decided (decision and rule), and each
/// call's error, if any.
struct Outcome {
    asked: BTreeMap<String, String>,
    ruled: BTreeMap<String, (String, String)>,
    errors: BTreeMap<String, String>,
}

async fn respond_denying(s: &mut Setup, calls: &[(&str, &str, Value)]) -> Outcome {
    s.mock.push_stream(sse::tools("", calls));
    s.mock.push_stream(sse::text("done"));
    let since = s.call("session/get", json!({})).await["last_seq"].as_u64();
    s.client.subscribe(&s.session, since).await.unwrap();
    s.call("session/submit", json!({"text": "go"})).await;
    let mut asked = BTreeMap::new();
    let mut events = Vec::new();
    loop {
        let event = s.client.item().await.unwrap();
        match event["kind"].as_str() {
            Some("approval_requested") => {
                let call = event["data"]["call_id"].as_str().unwrap().to_owned();
                let summary = event["data"]["summary"].as_str().unwrap().to_owned();
                asked.insert(call, summary);
                let id = event["data"]["request_id"].clone();
                s.call(
                    "session/respond",
                    json!({"request_id": id, "decision": "deny"}),
                )
                .await;
            }
            Some("processing_end") => break,
            _ => {}
        }
        events.push(event);
    }
    let field = |e: &Value, f: &str| e["data"][f].as_str().unwrap_or_default().to_owned();
    Outcome {
        asked,
        ruled: of_kind(&events, "approval_resolved")
            .into_iter()
            .filter(|e| e["data"]["by"] == "rule")
            .map(|e| {
                (
                    field(e, "call_id"),
                    (field(e, "decision"), field(e, "message")),
                )
            })
            .collect(),
        errors: of_kind(&events, "tool_call_end")
            .into_iter()
            .filter(|e| e["data"]["error"].is_string())
            .map(|e| (field(e, "call_id"), field(e, "error")))
            .collect(),
    }
}

/// The calls asked about.
fn asked(outcome: &Outcome) -> BTreeSet<String> {
    outcome.asked.keys().cloned().collect()
}

fn shell(id: &'static str, command: &str) -> (&'static str, &'static str, Value) {
    (id, "shell", json!({"command": command}))
}

fn write(id: &'static str, path: &str) -> (&'static str, &'static str, Value) {
    (
        id,
        "write_file",
        json!({"file_path": path, "content": "#!/bin/sh\necho planted\n"}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_chained_onto_an_allowed_one_are_asked_about_not_run() {
    let chains = [
        ("semicolon", "git status; rm -f v_semicolon"),
        ("newline", "git status\nrm -f v_newline"),
        ("substitution", "git status $(rm -f v_substitution)"),
        ("backticks", "git status `rm -f v_backticks`"),
        ("pipe_to_sh", "git status | sh -c 'rm -f v_pipe_to_sh'"),
        ("and", "git status && rm -f v_and"),
    ];
    let victims: Vec<String> = chains.iter().map(|(id, _)| format!("v_{id}")).collect();
    let files: Vec<&str> = victims.iter().map(String::as_str).collect();
    let mut s = session(json!({"allow": ["shell(git status*)"]}), &files).await;
    let mut calls: Vec<_> = chains.iter().map(|(id, c)| shell(id, c)).collect();
    calls.push(shell("plain", "git status --short"));

    let outcome = respond_denying(&mut s, &calls).await;
    let chained: BTreeSet<String> = chains.iter().map(|(id, _)| (*id).to_owned()).collect();
    assert_eq!(asked(&outcome), chained);
    assert_eq!(
        outcome.ruled,
        BTreeMap::from([(
            "plain".to_owned(),
            ("allow".to_owned(), "shell(git status*)".to_owned())
        )])
    );
    for victim in &victims {
        assert!(s.workdir.path().join(victim).exists(), "{victim} removed");
    }
    // The person asked reads why no rule covered it.
    for (id, says) in [
        ("semicolon", "$ git status; rm -f v_semicolon"),
        (
            "substitution",
            "no allow rule can cover this command: it has a command substitution",
        ),
    ] {
        let summary = &outcome.asked[id];
        assert!(summary.contains(says), "{id}: {summary}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_program_is_denied_however_it_is_spelled() {
    let spellings = [
        ("path", "/bin/rm -f v_path"),
        ("command", "command rm -f v_command"),
        ("backslash", "\\rm -f v_backslash"),
        ("env", "env X=1 rm -f v_env"),
        ("assignment", "x=1 rm -f v_assignment"),
        ("and", "true && rm -f v_and"),
        ("sh_c", "sh -c 'rm -f v_sh_c'"),
    ];
    let victims: Vec<String> = spellings.iter().map(|(id, _)| format!("v_{id}")).collect();
    let mut files: Vec<&str> = victims.iter().map(String::as_str).collect();
    files.push("v_hidden");
    // Everything may run but `rm`.
    let mut s = session(json!({"allow": ["shell"], "deny": ["shell(rm *)"]}), &files).await;
    let mut calls: Vec<_> = spellings.iter().map(|(id, c)| shell(id, c)).collect();
    calls.push(shell("plain", "ls"));
    // The rules cannot see what `sh` reads: asked about, not run under the bare allow.
    calls.push(shell("hidden", "echo 'rm -f v_hidden' | sh"));

    let outcome = respond_denying(&mut s, &calls).await;
    let mut expected: BTreeMap<String, (String, String)> = spellings
        .iter()
        .map(|(id, _)| {
            (
                (*id).to_owned(),
                ("deny".to_owned(), "shell(rm *)".to_owned()),
            )
        })
        .collect();
    expected.insert("plain".into(), ("allow".into(), "shell".into()));
    assert_eq!(outcome.ruled, expected);
    assert_eq!(asked(&outcome), BTreeSet::from(["hidden".to_owned()]));
    for (id, _) in &spellings {
        assert!(
            outcome.errors[*id].contains("`shell(rm *)` denies this call"),
            "{id}: {}",
            outcome.errors[*id]
        );
    }
    for file in &files {
        assert!(s.workdir.path().join(file).exists(), "{file} removed");
    }

    // In `auto` mode nobody is asked: what the deny rules cannot see is refused.
    s.call(
        "session/set_config",
        json!({"config": {"approval": {"mode": "auto", "deny": ["shell(rm *)"]}}}),
    )
    .await;
    let outcome = respond_denying(
        &mut s,
        &[
            shell("hidden", "echo 'rm -f v_hidden' | sh"),
            shell("eval", "eval \"$(echo rm -f v_path)\""),
            shell("plain", "ls"),
        ],
    )
    .await;
    assert!(outcome.asked.is_empty());
    for id in ["hidden", "eval"] {
        let error = &outcome.errors[id];
        assert!(
            error.contains("deny rules for `shell`") && error.contains("cannot check"),
            "{id}: {error}"
        );
    }
    assert!(!outcome.errors.contains_key("plain"));
    for file in &files {
        assert!(s.workdir.path().join(file).exists(), "{file} removed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_a_workspace_symlink_is_matched_where_it_leads() {
    let mut s = session(json!({"allow": ["write_file(src/**)"]}), &[]).await;
    let ws = s.workdir.path().to_owned();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::os::unix::fs::symlink("../.git/hooks", ws.join("src/hooks")).unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.join("src/out")).unwrap();
    s.daemon.give(&ws).unwrap();
    s.daemon.give(outside.path()).unwrap();
    let planted = [
        ws.join(".git/hooks/pre-commit"),
        outside.path().join("planted"),
    ];
    let calls = [
        write("hook", "src/hooks/pre-commit"),
        write("outside", "src/out/planted"),
        write("plain", "src/ok.sh"),
    ];

    let outcome = respond_denying(&mut s, &calls).await;
    assert_eq!(
        asked(&outcome),
        BTreeSet::from(["hook".to_owned(), "outside".to_owned()])
    );
    assert_eq!(
        outcome.ruled,
        BTreeMap::from([(
            "plain".to_owned(),
            ("allow".to_owned(), "write_file(src/**)".to_owned())
        )])
    );
    assert!(ws.join("src/ok.sh").is_file());
    assert_nothing_planted(&planted);

    // A deny rule naming where they lead refuses them without a question.
    let real_outside = outside.path().canonicalize().unwrap();
    let far = format!("write_file({}/**)", real_outside.display());
    s.call(
        "session/set_config",
        json!({"config": {"approval": {
            "mode": "ask",
            "allow": ["write_file(src/**)"],
            "deny": ["write_file(.git/**)", far],
        }}}),
    )
    .await;
    let outcome = respond_denying(&mut s, &calls[..2]).await;
    assert!(outcome.asked.is_empty());
    assert_eq!(
        outcome.ruled,
        BTreeMap::from([
            (
                "hook".to_owned(),
                ("deny".to_owned(), "write_file(.git/**)".to_owned())
            ),
            ("outside".to_owned(), ("deny".to_owned(), far.clone())),
        ])
    );
    assert_nothing_planted(&planted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_ssh_a_write_is_matched_where_it_leads_on_the_remote() {
    // Fails under CI=true when sshd is missing, as every SSH test does.
    let Some(server) = SshServer::start().expect("sshd starts") else {
        return;
    };
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::start_with_config(
        &[
            ("ANTHROPIC_BASE_URL", &mock.url),
            ("ANTHROPIC_API_KEY", "test-key"),
        ],
        Some(&server.host_entry("box")),
    )
    .await
    .unwrap();
    let mut client = daemon.client().await.unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let ws = workdir.path();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::os::unix::fs::symlink("../.git/hooks", ws.join("src/hooks")).unwrap();
    let created = client
        .call(
            "session/create",
            json!({
                "environment": {"kind": "ssh", "host": "box", "cwd": ws.display().to_string()},
                "config": {"approval": {"mode": "ask", "allow": ["write_file(src/**)"]}},
            }),
        )
        .await
        .unwrap();
    let mut s = Setup {
        mock,
        daemon,
        session: created["session_id"].as_str().unwrap().to_owned(),
        client,
        workdir,
    };
    let calls = [
        write("hook", "src/hooks/pre-commit"),
        write("plain", "src/ok.sh"),
    ];
    let outcome = respond_denying(&mut s, &calls).await;
    assert_eq!(asked(&outcome), BTreeSet::from(["hook".to_owned()]));
    assert_eq!(
        outcome.ruled,
        BTreeMap::from([(
            "plain".to_owned(),
            ("allow".to_owned(), "write_file(src/**)".to_owned())
        )])
    );
    let ws = s.workdir.path();
    assert!(ws.join("src/ok.sh").is_file());
    assert_nothing_planted(&[ws.join(".git/hooks/pre-commit")]);
}

fn assert_nothing_planted(paths: &[impl AsRef<Path>]) {
    for path in paths {
        let path = path.as_ref();
        assert!(!path.exists(), "{} was written", path.display());
    }
}
