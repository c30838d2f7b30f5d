//! Sessions in git worktrees of their own (`session/create {worktree}`): made with `git
//! worktree add` on a new branch `agentd/NAME` from the repository's HEAD, under agentd's
//! state directory; removed with the session only when nothing in them would be lost. Through
//! the git CLI: gitoxide reads worktrees but cannot add or remove one, and the repository's
//! administrative files (`.git/worktrees/NAME`, the branch, its locks) must be written exactly
//! as git writes them.
//!
//! The repository's configuration is a session's to write (its common `.git` is a writable
//! root of every worktree session, and `workspace_write` sessions write the main tree's), so
//! the steps that run filter drivers, the checkout and `status`, run sandboxed: the checkout
//! as a command of the session would, `status` read-only and without network.

use crate::exec::{LocalExecutionEnvironment, LocalOptions, SandboxPolicy, git, sandboxed_git};
use agentd_proto::{SandboxMode, SessionConfig, Worktree};
use std::path::{Path, PathBuf};

/// Whether `name` makes a safe branch and directory name.
fn valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && !name.ends_with(".lock")
        && !name.contains("..")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Makes a worktree of `cwd`'s repository named `name` (a random one when `None`) under
/// `dir`, checked out in the sandbox a session with `config` would have there (its
/// network setting; `options` say how local commands start); returns it and the
/// repository's common git directory (which the session must be able to write to commit).
pub(crate) async fn add(
    cwd: &Path,
    dir: &Path,
    name: Option<&str>,
    config: &SessionConfig,
    options: LocalOptions,
) -> Result<(Worktree, PathBuf), String> {
    let picked;
    let name = match name {
        Some(name) if valid(name) => name,
        Some(name) => {
            return Err(format!(
                "worktree name {name:?}: use up to 64 letters, digits, '.', '_' or '-', \
                 not starting with '.' or '-'"
            ));
        }
        None => {
            picked = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
            &picked
        }
    };
    let top = git(cwd, &["rev-parse", "--show-toplevel"])
        .await
        .map_err(|e| {
            format!(
                "a worktree needs a git repository at {}: {e}",
                cwd.display()
            )
        })?;
    let top = PathBuf::from(top.trim_end_matches('\n'));
    let common = git(
        &top,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .await?;
    let base = git(&top, &["rev-parse", "--verify", "HEAD^{commit}"])
        .await
        .map_err(|e| format!("a worktree starts from HEAD, and there is none yet: {e}"))?;
    let branch = format!("agentd/{name}");
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let path = dir.join(format!("{name}-{suffix}"));
    let base = base.trim().to_owned();
    let path_arg = path.to_string_lossy().into_owned();
    let common = PathBuf::from(common.trim_end_matches('\n'));
    // git makes the directories leading to it. Without its checkout, which runs smudge
    // filters: that comes next, sandboxed.
    git(
        &top,
        &[
            "worktree",
            "add",
            "--quiet",
            "--no-checkout",
            "-b",
            &branch,
            &path_arg,
            &base,
        ],
    )
    .await?;
    let tree = Worktree {
        path: path_arg,
        branch,
        repository: top.display().to_string(),
        base,
    };
    if let Err(e) = checkout(&tree, &common, config, options).await {
        let _ = git(&top, &["worktree", "remove", "--force", &tree.path]).await;
        let _ = git(&top, &["branch", "-D", "--quiet", &tree.branch]).await;
        return Err(format!("the worktree's checkout failed: {e}"));
    }
    Ok((tree, common))
}

/// What `git worktree add` would have run to check `tree` out, in the sandbox of a
/// `workspace_write` session there: the worktree, the repository's common directory (where
/// the worktree's index lives) and the commands' temp dir writable; the network as
/// `config` has it (a smudge filter such as git-lfs's may fetch).
async fn checkout(
    tree: &Worktree,
    common: &Path,
    config: &SessionConfig,
    options: LocalOptions,
) -> Result<(), String> {
    let env = LocalExecutionEnvironment::with_options(PathBuf::from(&tree.path), options);
    let mut config = config.clone();
    config.sandbox = SandboxMode::WorkspaceWrite;
    config.sandbox_writable_roots.push(common.to_owned());
    let policy = SandboxPolicy::new(&config, &env)
        .map_err(|e| e.to_string())?
        .ok_or("no sandbox")?;
    sandboxed_git(
        &env,
        &policy,
        &["reset", "--hard", "--quiet", "--no-recurse-submodules"],
    )
    .await
    .map(drop)
}

/// Removes `tree` and its branch when it holds nothing uncommitted or untracked and the
/// branch has no commits of its own; otherwise keeps both and says why. `options` say how
/// local commands start (the check runs as one).
pub(crate) async fn remove(tree: &Worktree, options: LocalOptions) -> Result<(), String> {
    let path = Path::new(&tree.path);
    if !path.is_dir() {
        return Err(format!(
            "{} is gone; its branch {} is kept",
            tree.path, tree.branch
        ));
    }
    let kept = |why: String| {
        Err(format!(
            "worktree {} and branch {} are kept: {why}",
            tree.path, tree.branch
        ))
    };
    // `status` runs the clean filters the configuration names: read-only, without network.
    let env = LocalExecutionEnvironment::with_options(path.to_owned(), options);
    let status = match sandboxed_git(
        &env,
        &SandboxPolicy::report(),
        &["status", "--porcelain", "--untracked-files=all"],
    )
    .await
    {
        Ok(status) => status,
        Err(e) => return kept(format!("it could not be checked ({e})")),
    };
    if !status.is_empty() {
        let files: Vec<&str> = status.lines().take(10).collect();
        return kept(format!(
            "it has uncommitted or untracked files ({})",
            files.join(", ")
        ));
    }
    let repo = Path::new(&tree.repository);
    let tip = git(
        repo,
        &[
            "rev-parse",
            "--verify",
            &format!("refs/heads/{}", tree.branch),
        ],
    )
    .await?;
    if tip.trim() != tree.base {
        return kept(format!(
            "the branch has commits of its own (at {})",
            tip.trim()
        ));
    }
    // Forced: without it, `worktree remove` checks the worktree with an unsandboxed
    // `status` of its own; the check above was that one.
    git(repo, &["worktree", "remove", "--force", &tree.path]).await?;
    git(repo, &["branch", "-D", "--quiet", &tree.branch]).await?;
    Ok(())
}
