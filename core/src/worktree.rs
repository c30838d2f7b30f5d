//! Sessions in git worktrees of their own (`session/create {worktree}`): made with `git
//! worktree add` on a new branch `agentd/NAME` from the repository's HEAD, under agentd's
//! state directory; removed with the session only when nothing in them would be lost. Through
//! the git CLI: gitoxide reads worktrees but cannot add or remove one, and the repository's
//! administrative files (`.git/worktrees/NAME`, the branch, its locks) must be written exactly
//! as git writes them.

use crate::exec::git;
use agentd_proto::Worktree;
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
/// `dir`; returns it and the repository's common git directory (which the session must be
/// able to write to commit).
pub(crate) async fn add(
    cwd: &Path,
    dir: &Path,
    name: Option<&str>,
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
    // git makes the directories leading to it.
    git(
        &top,
        &[
            "worktree", "add", "--quiet", "-b", &branch, &path_arg, &base,
        ],
    )
    .await?;
    Ok((
        Worktree {
            path: path_arg,
            branch,
            repository: top.display().to_string(),
            base,
        },
        PathBuf::from(common.trim_end_matches('\n')),
    ))
}

/// Removes `tree` and its branch when it holds nothing uncommitted or untracked and the
/// branch has no commits of its own; otherwise keeps both and says why.
pub(crate) async fn remove(tree: &Worktree) -> Result<(), String> {
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
    let status = git(path, &["status", "--porcelain", "--untracked-files=all"]).await?;
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
    git(repo, &["worktree", "remove", &tree.path]).await?;
    git(repo, &["branch", "-D", "--quiet", &tree.branch]).await?;
    Ok(())
}
