//! Checkpoints through the real daemon: undo (`session/rollback {files: true}`, `agentctl
//! undo`), redo and diff of what the agent's tools did to the files, what is refused when
//! the user changed a file since, non-git workspaces, a 10,000-file repository, the user's
//! `.git` left byte for byte as it was, the disk cap, hostile workspaces, and sessions in
//! worktrees of their own.

use crate::{Setup, of_kind, setup_on, setup_with};
use agentd_tests::mock::MockProvider;
use agentd_tests::{TestDaemon, sse};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Runs git in `dir` as a user with a name and no signing; fails the test if it fails.
pub(crate) fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// Every file under `dir` (symlinks as their targets) with its mode: a byte-for-byte image.
fn image(dir: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            if meta.is_dir() {
                files.insert(rel, (meta.permissions().mode(), Vec::new()));
                stack.push(path);
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                files.insert(rel, (0o120000, target.display().to_string().into_bytes()));
            } else {
                files.insert(
                    rel,
                    (meta.permissions().mode(), std::fs::read(&path).unwrap()),
                );
            }
        }
    }
    files
}

/// The workspace without `.git`.
fn work_image(dir: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    image(dir)
        .into_iter()
        .filter(|(p, _)| p != ".git" && !p.starts_with(".git/"))
        .collect()
}

/// Runs one input whose single round runs `command` in the shell.
async fn agent_runs(s: &mut Setup, command: &str) -> Vec<Value> {
    s.mock.push_stream(sse::shell("c1", command));
    s.mock.push_stream(sse::text("done"));
    let events = s.run("change the files").await;
    let ends = of_kind(&events, "tool_call_end");
    assert_eq!(ends.len(), 1, "{events:?}");
    assert!(ends[0]["data"]["error"].is_null(), "{:?}", ends[0]);
    events
}

/// Runs one input whose single round writes `content` to `path` with the file tool.
async fn agent_writes(s: &mut Setup, path: &str, content: &str) {
    s.mock.push_stream(sse::tools(
        "",
        &[(
            "w1",
            "write_file",
            json!({"file_path": path, "content": content}),
        )],
    ));
    s.mock.push_stream(sse::text("done"));
    let events = s.run("write it").await;
    let ends = of_kind(&events, "tool_call_end");
    assert!(
        ends.len() == 1 && ends[0]["data"]["error"].is_null(),
        "{events:?}"
    );
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_puts_every_kind_of_change_back_in_one_go_and_redo_brings_it_back() {
    let workdir = tempfile::tempdir().unwrap();
    let w = workdir.path();
    std::fs::write(w.join("edit.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(w.join("gone.txt"), "delete me\n").unwrap();
    std::fs::write(w.join("old-name.txt"), "rename me\n").unwrap();
    std::fs::write(w.join("blob.bin"), [0u8, 1, 2, 3, 255]).unwrap();
    std::fs::write(w.join("run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(w.join("run.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::symlink("edit.txt", w.join("link")).unwrap();
    std::fs::write(w.join(".gitignore"), "ignored.log\n").unwrap();
    std::fs::write(w.join("ignored.log"), "the user's log\n").unwrap();
    git(w, &["init", "-q"]);
    git(w, &["add", "-A"]);
    git(w, &["commit", "-qm", "start"]);
    let git_before = image(&w.join(".git"));
    let before = work_image(w);

    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::start(&mock.url).await.unwrap();
    let mut s = setup_on(mock, daemon, workdir, json!({})).await;
    let w = s.workdir.path().to_owned();
    agent_runs(
        &mut s,
        "printf 'one\\n2\\nthree\\n' > edit.txt && echo new > new.txt && rm gone.txt && \
         mkdir -p sub && mv old-name.txt sub/new-name.txt && printf '\\000\\377\\001' > blob.bin && \
         ln -sf new.txt link && chmod +x run.sh && echo 'agent line' >> ignored.log",
    )
    .await;
    let after = work_image(&w);
    assert_ne!(after, before);

    let diff = s.call("session/diff", json!({})).await;
    let text = diff["diff"].as_str().unwrap();
    for expected in [
        "diff --git a/edit.txt b/edit.txt",
        "-two\n+2\n",
        "new file mode 100644",
        "deleted file mode 100644",
        "Binary files a/blob.bin and b/blob.bin differ",
        "old mode 100644\nnew mode 100755",
        "+++ b/sub/new-name.txt",
    ] {
        assert!(text.contains(expected), "{expected:?} not in:\n{text}");
    }
    assert!(!text.contains("ignored.log"), "{text}");

    let undo = s.call("session/rollback", json!({"files": true})).await;
    assert_eq!(undo["removed"], 4, "{undo}");
    let restored = strings(&undo["files"]["restored"]);
    for path in [
        "edit.txt",
        "new.txt",
        "gone.txt",
        "old-name.txt",
        "sub/new-name.txt",
        "blob.bin",
        "link",
        "run.sh",
    ] {
        assert!(
            restored.contains(&path.to_owned()),
            "{path} not in {restored:?}"
        );
    }
    // The directory the agent made went with the file it made there.
    let undone = work_image(&w);
    let mut expected = before.clone();
    // Ignored files are never recorded, so never put back.
    expected.insert("ignored.log".into(), after["ignored.log"].clone());
    assert_eq!(undone, expected);
    assert_eq!(
        std::fs::read_link(w.join("link")).unwrap(),
        Path::new("edit.txt")
    );
    let history = s.call("session/history", json!({})).await;
    assert_eq!(history["total"], 0, "{history}");

    // The redo outlives the daemon.
    s.daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    s.daemon.restart().await.unwrap();
    s.client = s.daemon.client().await.unwrap();
    let redo = s.call("session/redo", json!({})).await;
    assert_eq!(redo["entries"], 4, "{redo}");
    assert_eq!(work_image(&w), after);

    // Nothing of it reached the user's repository.
    assert_eq!(image(&w.join(".git")), git_before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_the_user_changed_since_is_reported_and_kept_unless_forced() {
    let mut s = setup_with(json!({})).await;
    let w = s.workdir.path().to_owned();
    std::fs::write(w.join("a.txt"), "a\n").unwrap();
    std::fs::write(w.join("b.txt"), "b\n").unwrap();
    agent_runs(&mut s, "echo agent > a.txt && echo agent > b.txt").await;
    // The user edits one of them, and makes a file of their own.
    std::fs::write(w.join("a.txt"), "mine\n").unwrap();
    std::fs::write(w.join("c.txt"), "my new file\n").unwrap();

    let refused = s.request("session/rollback", json!({"files": true})).await;
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("a.txt") && !message.contains("b.txt"),
        "{refused}"
    );
    // Typed: clients read the files from the data, not the message.
    assert_eq!(refused["error"]["code"], -32016, "{refused}");
    assert_eq!(refused["error"]["data"]["kind"], "files_changed");
    assert_eq!(refused["error"]["data"]["files"], json!(["a.txt"]));
    assert!(
        refused["error"]["data"]["more_files"].is_null(),
        "{refused}"
    );
    assert_eq!(std::fs::read_to_string(w.join("a.txt")).unwrap(), "mine\n");
    assert_eq!(std::fs::read_to_string(w.join("b.txt")).unwrap(), "agent\n");
    assert_eq!(s.call("session/history", json!({})).await["total"], 4);

    // agentctl names them too, and says how to go on.
    let out = s
        .daemon
        .agentctl(&["undo", &s.session], None)
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("a.txt") && stderr.contains("--force"),
        "{stderr}"
    );

    let out = s
        .daemon
        .agentctl(&["undo", &s.session, "--force"], None)
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("your version of a.txt is kept"), "{stdout}");
    assert_eq!(std::fs::read_to_string(w.join("a.txt")).unwrap(), "a\n");
    assert_eq!(std::fs::read_to_string(w.join("b.txt")).unwrap(), "b\n");
    // A file only the user touched is never changed.
    assert_eq!(
        std::fs::read_to_string(w.join("c.txt")).unwrap(),
        "my new file\n"
    );

    // A redo over a file the user changed after the undo is refused the same way.
    std::fs::write(w.join("b.txt"), "mine too\n").unwrap();
    let refused = s.request("session/redo", json!({})).await;
    assert_eq!(
        refused["error"]["data"]["kind"], "files_changed",
        "{refused}"
    );
    assert_eq!(refused["error"]["data"]["files"], json!(["b.txt"]));
    let out = s
        .daemon
        .agentctl(&["redo", &s.session], None)
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("\n  b.txt\n") && stderr.contains("redo --force"),
        "{stderr}"
    );
    std::fs::write(w.join("b.txt"), "b\n").unwrap();

    // The user's version was kept: the redo brings it back.
    let out = s
        .daemon
        .agentctl(&["redo", &s.session], None)
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(w.join("a.txt")).unwrap(), "mine\n");
    assert_eq!(std::fs::read_to_string(w.join("b.txt")).unwrap(), "agent\n");
    let again = s.request("session/redo", json!({})).await;
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nothing to redo"),
        "{again}"
    );
}

/// A refusal over many files lists a bounded number of them and counts the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_over_many_files_lists_some_and_counts_the_rest() {
    let mut s = setup_with(json!({})).await;
    let w = s.workdir.path().to_owned();
    agent_runs(&mut s, "for i in $(seq 150); do echo agent > f$i.txt; done").await;
    for i in 1..=150 {
        std::fs::write(w.join(format!("f{i}.txt")), "mine\n").unwrap();
    }
    let refused = s.request("session/rollback", json!({"files": true})).await;
    let data = &refused["error"]["data"];
    assert_eq!(data["kind"], "files_changed", "{refused}");
    assert_eq!(
        data["files"].as_array().map(Vec::len),
        Some(100),
        "{refused}"
    );
    assert_eq!(data["more_files"], 50);
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains(" and 50 more; pass force"), "{message}");
    let out = s
        .daemon
        .agentctl(&["undo", &s.session], None)
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("... and 50 more"), "{stderr}");
    assert_eq!(std::fs::read_to_string(w.join("f1.txt")).unwrap(), "mine\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_of_ten_thousand_files_outside_git_is_undone() {
    ten_thousand_files_are_undone(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_of_ten_thousand_files_is_undone() {
    ten_thousand_files_are_undone(true).await;
}

/// 10,000 files in 100 directories, and an ignored one; in a git repository when `repository`
/// (committed, the ignored file left out), else in a plain directory.
async fn ten_thousand_files_are_undone(repository: bool) {
    let mut s = setup_with(json!({})).await;
    let w = s.workdir.path().to_owned();
    for d in 0..100 {
        std::fs::create_dir(w.join(format!("d{d}"))).unwrap();
        for f in 0..100 {
            std::fs::write(w.join(format!("d{d}/f{f}.txt")), format!("{d} {f}\n")).unwrap();
        }
    }
    // .gitignore is honoured outside git repositories too.
    std::fs::write(w.join(".gitignore"), "build/\n").unwrap();
    std::fs::create_dir(w.join("build")).unwrap();
    std::fs::write(w.join("build/out.o"), "old\n").unwrap();
    if repository {
        git(&w, &["init", "-q"]);
        git(&w, &["add", "-A"]);
        git(&w, &["commit", "-qm", "start"]);
    }
    let before = work_image(&w);
    agent_runs(
        &mut s,
        "echo changed > d7/f7.txt && rm d9/f9.txt && echo new > d0/new.txt && echo new > build/out.o",
    )
    .await;
    // A second input that only reads leaves the first one's changes to undo.
    agent_runs(&mut s, "cat d7/f7.txt").await;
    let out = s
        .daemon
        .agentctl(&["undo", &s.session, "--turns", "2"], None)
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut expected = before;
    expected.insert(
        "build/out.o".into(),
        (expected["build/out.o"].0, b"new\n".to_vec()),
    );
    assert_eq!(work_image(&w), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_disk_cap_removes_the_oldest_checkpoints_and_large_files_are_named() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .config("[checkpoints]\nmax_total_bytes = 250000\nmax_file_bytes = 150000\n")
        .start()
        .await
        .unwrap();
    let mut s = setup_on(mock, daemon, tempfile::tempdir().unwrap(), json!({})).await;
    let w = s.workdir.path().to_owned();
    // Each input writes 100 KB that does not compress.
    for _ in 0..3 {
        agent_runs(&mut s, "head -c 100000 /dev/urandom > random.bin").await;
    }
    let store = s
        .daemon
        .sessions_dir()
        .join(&s.session)
        .join("checkpoints/objects");
    let size: u64 = walk_sizes(&store);
    assert!(size <= 250_000, "the store holds {size} bytes");

    // The oldest input's checkpoints are gone, and the undo says so.
    let undo = s
        .call("session/rollback", json!({"files": true, "turns": 3}))
        .await;
    let not = strings(&undo["files"]["not_restored"]).join("\n");
    assert!(not.contains("max_total_bytes"), "{undo}");

    // A file over max_file_bytes is never recorded; an undo names it.
    agent_runs(&mut s, "head -c 200000 /dev/zero > large.bin").await;
    let undo = s.call("session/rollback", json!({"files": true})).await;
    let not = strings(&undo["files"]["not_restored"]).join("\n");
    assert!(
        not.contains("large.bin") && not.contains("max_file_bytes"),
        "{undo}"
    );
    assert!(w.join("large.bin").exists());
}

fn walk_sizes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                walk_sizes(&e.path())
            } else {
                meta.len()
            }
        })
        .sum()
}

/// Whether `branch` exists in `repo`.
pub(crate) fn has_branch(repo: &Path, branch: &str) -> bool {
    std::process::Command::new("git")
        .args([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ])
        .current_dir(repo)
        .output()
        .unwrap()
        .status
        .success()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_in_worktrees_of_one_repository_keep_their_changes_apart() {
    let workdir = tempfile::tempdir().unwrap();
    let repo = workdir.path().to_owned();
    std::fs::write(repo.join("shared.txt"), "base\n").unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "start"]);
    // The user's uncommitted change does not carry over.
    std::fs::write(repo.join("shared.txt"), "the user's draft\n").unwrap();
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::start(&mock.url).await.unwrap();
    let mut s = setup_on(mock, daemon, workdir, json!({"worktree": "alpha"})).await;
    let alpha = s.call("session/get", json!({})).await;
    let tree = &alpha["worktree"];
    assert_eq!(tree["branch"], "agentd/alpha", "{alpha}");
    assert_eq!(tree["repository"], repo.display().to_string());
    assert_eq!(alpha["cwd"], tree["path"]);
    let alpha_dir = PathBuf::from(tree["path"].as_str().unwrap());
    assert!(
        !alpha_dir.starts_with(&repo)
            && alpha_dir.starts_with(
                s.daemon
                    .sessions_dir()
                    .join("../../agentd-worktrees")
                    .canonicalize()
                    .unwrap()
            )
    );
    assert_eq!(
        std::fs::read_to_string(alpha_dir.join("shared.txt")).unwrap(),
        "base\n"
    );
    let alpha_id = s.session.clone();

    let beta = s
        .client
        .call(
            "session/create",
            json!({"cwd": repo.display().to_string(), "worktree": true}),
        )
        .await
        .unwrap();
    let beta_dir = PathBuf::from(beta["worktree"]["path"].as_str().unwrap());
    let beta_branch = beta["worktree"]["branch"].as_str().unwrap().to_owned();
    assert!(beta_branch.starts_with("agentd/"), "{beta}");

    // Both edit the same file, each in its own tree; alpha's change is committed there.
    agent_writes(&mut s, "shared.txt", "alpha\n").await;
    git(&alpha_dir, &["commit", "-qam", "alpha"]);
    s.session = beta["session_id"].as_str().unwrap().to_owned();
    agent_writes(&mut s, "shared.txt", "beta\n").await;
    assert_eq!(
        std::fs::read_to_string(alpha_dir.join("shared.txt")).unwrap(),
        "alpha\n"
    );
    assert_eq!(
        std::fs::read_to_string(beta_dir.join("shared.txt")).unwrap(),
        "beta\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("shared.txt")).unwrap(),
        "the user's draft\n"
    );

    // agentctl show says where.
    let out = s.daemon.agentctl(&["show", &alpha_id], None).await.unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("agentd/alpha"), "{shown}");

    // A clean worktree goes with its session, branch and all.
    let clean = s
        .client
        .call(
            "session/create",
            json!({"cwd": repo.display().to_string(), "worktree": "clean"}),
        )
        .await
        .unwrap();
    let clean_dir = PathBuf::from(clean["worktree"]["path"].as_str().unwrap());
    assert!(clean_dir.join("shared.txt").exists());
    let deleted = s
        .client
        .call("session/delete", json!({"session_id": clean["session_id"]}))
        .await
        .unwrap();
    assert!(deleted["worktree_kept"].is_null(), "{deleted}");
    assert!(!clean_dir.exists());
    assert!(!has_branch(&repo, "agentd/clean"));

    // One with uncommitted changes stays, and so does one whose branch has commits; the user
    // is told why.
    let deleted = s
        .client
        .call("session/delete", json!({"session_id": s.session}))
        .await
        .unwrap();
    let why = deleted["worktree_kept"].as_str().unwrap_or_default();
    assert!(why.contains("uncommitted"), "{deleted}");
    assert_eq!(
        std::fs::read_to_string(beta_dir.join("shared.txt")).unwrap(),
        "beta\n"
    );
    assert!(has_branch(&repo, &beta_branch));
    let out = s.daemon.agentctl(&["rm", &alpha_id], None).await.unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("commits of its own"), "{out:?}");
    assert!(alpha_dir.join("shared.txt").exists());
    assert!(has_branch(&repo, "agentd/alpha"));
}

/// A model that turns the workspace against the checkpoint store: a file far over
/// max_file_bytes, a FIFO, symlinks to /etc/shadow and to a secret outside the workspace,
/// and a directory swapped for a symlink to outside while an undo runs. The store stays
/// small (nothing behind a symlink or over the cap is read), the checkpoints and the undo
/// finish, and nothing outside the workspace is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_workspace_costs_the_store_little_and_an_undo_never_leaves_it() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .config("[checkpoints]\nmax_file_bytes = 100000\n")
        .start()
        .await
        .unwrap();
    let mut s = setup_on(mock, daemon, tempfile::tempdir().unwrap(), json!({})).await;
    let w = s.workdir.path().to_owned();
    let outside = tempfile::tempdir().unwrap();
    let o = outside.path();
    // A secret that does not compress: were it read, the store would grow by its size.
    let secret: Vec<u8> = (0..2_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(o.join("id_ed25519"), &secret).unwrap();
    std::fs::write(o.join("f"), "outside\n").unwrap();
    let outside_before = image(o);

    let events = agent_runs(
        &mut s,
        &format!(
            "head -c 3000000 /dev/urandom > huge.bin && mkfifo pipe && \
             ln -s /etc/shadow shadow && ln -s {key} key && mkdir sub && echo agent > sub/f",
            key = o.join("id_ed25519").display()
        ),
    )
    .await;
    assert!(of_kind(&events, "warning").is_empty(), "{events:?}");
    let store = s.daemon.sessions_dir().join(&s.session).join("checkpoints");
    let size = walk_sizes(&store);
    assert!(size < 200_000, "the store holds {size} bytes");
    let diff = s.call("session/diff", json!({})).await;
    let text = diff["diff"].as_str().unwrap();
    assert!(text.contains("new file mode 120000"), "{text}");
    assert!(
        !text.contains("pipe") && !text.contains("huge.bin"),
        "{text}"
    );

    // Something swaps `sub` for a symlink to outside, again and again, while the undo runs.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, w, o) = (stop.clone(), w.clone(), o.to_owned());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::rename(w.join("sub"), w.join("sub.real"));
                let _ = std::os::unix::fs::symlink(&o, w.join("sub"));
                let _ = std::fs::remove_file(w.join("sub"));
                let _ = std::fs::rename(w.join("sub.real"), w.join("sub"));
            }
        })
    };
    let undo = s
        .call("session/rollback", json!({"files": true, "force": true}))
        .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    assert_eq!(image(o), outside_before, "{undo}");
    // The links went, what they point at stayed; what was never recorded is named.
    assert!(
        !w.join("key").exists() && !w.join("shadow").exists(),
        "{undo}"
    );
    assert!(w.join("pipe").exists() && w.join("huge.bin").exists());
    let not = strings(&undo["files"]["not_restored"]).join("\n");
    assert!(not.contains("huge.bin"), "{undo}");
}
