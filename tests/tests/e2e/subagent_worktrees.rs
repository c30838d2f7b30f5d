//! Subagents in git worktrees of their own (`spawn_agent {worktree}`): the child edits and
//! commits there while the parent's tree stays as it was, its worktree and branch outlive
//! it, its sandbox keeps it out of the parent's tree and the repository's other refs,
//! unsafe names are refused, and deleting the children removes a clean worktree and keeps
//! one with work in it.

use crate::checkpoints::{git, has_branch};
use crate::subagents::{call, first_user, results, spawned, text, tools};
use crate::{of_kind, setup_on};
use agentd_tests::TestDaemon;
use agentd_tests::family::Family;
use agentd_tests::mock::{MockProvider, Reply};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The commit `rev` names in `repo`.
fn rev(repo: &Path, rev: &str) -> String {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--verify", rev])
        .current_dir(repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The child's hostile calls, each of which the sandbox must refuse.
fn hostile(repo: &Path) -> Vec<(String, String)> {
    let r = repo.display();
    [
        ("h-parent", format!("echo hostile > {r}/shared.txt")),
        ("h-new", format!("echo hostile > {r}/planted.txt")),
        ("h-ref", "git update-ref refs/heads/main HEAD".to_owned()),
        ("h-ref-file", format!("echo 0 > {r}/.git/refs/heads/main")),
        (
            "h-hook",
            format!("echo 'touch /tmp/x' > {r}/.git/hooks/post-commit"),
        ),
        ("h-config", format!("echo '[core]' >> {r}/.git/config")),
    ]
    .into_iter()
    .map(|(id, command)| (id.to_owned(), command))
    .collect()
}

/// The child that works: it edits, commits, leaves an untracked file, and tries to get out.
fn worker(body: &Value, repo: &Path) -> Reply {
    if results(body) > 0 {
        return text("child-A-OUTPUT");
    }
    let mut calls = vec![call(
        "c-commit",
        "shell",
        json!({"command": "echo child > shared.txt && git -c user.name=t -c user.email=t@t \
                -c commit.gpgsign=false commit -qam child && echo draft > draft.txt"}),
    )];
    calls.extend(
        hostile(repo)
            .into_iter()
            .map(|(id, command)| call(&id, "shell", json!({"command": command}))),
    );
    tools(calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_in_its_own_worktree_commits_there_and_cannot_reach_the_parents_tree() {
    if !agentd_tests::landlock(3) {
        return;
    }
    let workdir = tempfile::tempdir().unwrap();
    let repo = workdir.path().canonicalize().unwrap();
    std::fs::write(repo.join("shared.txt"), "base\n").unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "start"]);
    let base = rev(&repo, "main");
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::start(&mock.url).await.unwrap();
    let mut s = setup_on(
        mock,
        daemon,
        workdir,
        json!({"config": {"sandbox": "workspace_write"}}),
    )
    .await;
    let repo_for_mock = repo.clone();
    s.mock.respond_with(move |body| {
        let who = first_user(body);
        if who.contains("child-A") {
            return worker(body, &repo_for_mock);
        }
        if who.contains("child-B") {
            return text("child-B-OUTPUT");
        }
        match results(body) {
            0 => tools(vec![
                call(
                    "s-a",
                    "spawn_agent",
                    json!({"task": "child-A: edit and commit", "worktree_name": "work"}),
                ),
                call(
                    "s-b",
                    "spawn_agent",
                    json!({"task": "child-B: look around", "worktree": true}),
                ),
                call(
                    "bad-dots",
                    "spawn_agent",
                    json!({"task": "x", "worktree_name": ".."}),
                ),
                call(
                    "bad-slash",
                    "spawn_agent",
                    json!({"task": "x", "worktree_name": "a/../../b"}),
                ),
                call(
                    "bad-option",
                    "spawn_agent",
                    json!({"task": "x", "worktree_name": "-x"}),
                ),
                call(
                    "bad-both",
                    "spawn_agent",
                    json!({"task": "x", "worktree": true, "working_dir": "."}),
                ),
            ]),
            6 => tools(
                spawned(body)
                    .iter()
                    .enumerate()
                    .map(|(i, id)| call(&format!("w{i}"), "wait", json!({"agent_id": id})))
                    .collect(),
            ),
            _ => text("parent done"),
        }
    });
    let events = s.run("parent task").await;

    // Two children, each told where its worktree is; the bad names were refused.
    let spawned_events = of_kind(&events, "subagent_spawned");
    assert_eq!(spawned_events.len(), 2, "{events:?}");
    let requests = s.mock.requests();
    let last = &requests.last().unwrap().body;
    let outputs: Vec<(String, String)> = Family::Anthropic.results(last);
    let output = |id: &str| {
        outputs
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, c)| c.clone())
            .unwrap_or_default()
    };
    for bad in ["bad-dots", "bad-slash", "bad-option"] {
        assert!(
            output(bad).contains("worktree name"),
            "{bad}: {}",
            output(bad)
        );
    }
    assert!(
        output("bad-both").contains("not both"),
        "{}",
        output("bad-both")
    );
    let ends = of_kind(&events, "tool_call_end");
    let mut failed: Vec<&str> = ends
        .iter()
        .filter(|e| e["data"]["error"].is_string())
        .map(|e| e["data"]["call_id"].as_str().unwrap())
        .collect();
    failed.sort_unstable();
    assert_eq!(
        failed,
        ["bad-both", "bad-dots", "bad-option", "bad-slash"],
        "{ends:?}"
    );
    let tree_of = |task: &str| {
        spawned_events
            .iter()
            .find(|e| e["data"]["task"].as_str().unwrap().starts_with(task))
            .map(|e| (e["data"]["agent_id"].clone(), e["data"]["worktree"].clone()))
            .unwrap()
    };
    let (a_id, a_tree) = tree_of("child-A");
    let (b_id, b_tree) = tree_of("child-B");
    assert_eq!(a_tree["branch"], "agentd/work", "{a_tree}");
    assert_eq!(a_tree["base"], base.as_str());
    assert_eq!(a_tree["repository"], repo.display().to_string());
    assert!(output("s-a").contains(a_tree["path"].as_str().unwrap()));
    assert!(output("s-a").contains("agentd/work"), "{}", output("s-a"));
    let a_dir = PathBuf::from(a_tree["path"].as_str().unwrap());
    let b_dir = PathBuf::from(b_tree["path"].as_str().unwrap());
    assert!(!a_dir.starts_with(&repo) && !b_dir.starts_with(&repo));

    // The child committed in its worktree; the parent's tree and branch are as they were.
    let child_request = requests
        .iter()
        .find(|r| first_user(&r.body).contains("child-A") && results(&r.body) > 0)
        .unwrap();
    let child_out = Family::Anthropic.results(&child_request.body);
    let child = |id: &str| {
        child_out
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, c)| c.clone())
            .unwrap_or_default()
    };
    assert!(
        child("c-commit").contains("exit code: 0"),
        "{}",
        child("c-commit")
    );
    for (id, _) in hostile(&repo) {
        let out = child(&id);
        assert!(
            out.contains("Read-only file system") || out.contains("Permission denied"),
            "{id}: {out}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(a_dir.join("shared.txt")).unwrap(),
        "child\n"
    );
    assert_ne!(rev(&repo, "agentd/work"), base);
    assert_eq!(rev(&repo, "main"), base);
    assert_eq!(
        std::fs::read_to_string(repo.join("shared.txt")).unwrap(),
        "base\n"
    );
    assert!(!repo.join("planted.txt").exists());
    assert!(!repo.join(".git/hooks/post-commit").exists());
    let config = std::fs::read_to_string(repo.join(".git/config")).unwrap();
    assert_eq!(config.matches("[core]").count(), 1, "{config}");

    // Both children ended; their worktrees and branches stay.
    let b_branch = b_tree["branch"].as_str().unwrap();
    assert!(a_dir.is_dir() && b_dir.is_dir());
    assert!(has_branch(&repo, "agentd/work") && has_branch(&repo, b_branch));

    // Deleting them removes the clean one and keeps the one with work in it, saying why.
    let deleted = s
        .client
        .call("session/delete", json!({"session_id": b_id}))
        .await
        .unwrap();
    assert!(deleted["worktree_kept"].is_null(), "{deleted}");
    assert!(!b_dir.exists());
    assert!(!has_branch(&repo, b_branch));
    let deleted = s
        .client
        .call("session/delete", json!({"session_id": a_id}))
        .await
        .unwrap();
    let why = deleted["worktree_kept"].as_str().unwrap_or_default();
    assert!(why.contains("draft.txt"), "{deleted}");
    assert!(a_dir.join("draft.txt").exists());
    assert!(has_branch(&repo, "agentd/work"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worktree_is_refused_outside_a_git_repository() {
    let mut s = crate::setup().await;
    s.mock.respond_with(|body| match results(body) {
        0 => tools(vec![call(
            "s",
            "spawn_agent",
            json!({"task": "x", "worktree": true}),
        )]),
        _ => text("parent done"),
    });
    let events = s.run("parent task").await;
    assert!(of_kind(&events, "subagent_spawned").is_empty());
    let end = of_kind(&events, "tool_call_end")[0];
    let error = end["data"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("needs a git repository"), "{end}");
}
