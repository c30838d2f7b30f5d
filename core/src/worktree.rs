//! Sessions in git worktrees of their own (`session/create {worktree}`): made with `git
//! worktree add` on a new branch `agentd/NAME` from the repository's HEAD, under agentd's
//! state directory; removed with the session only when nothing in them would be lost. Through
//! the git CLI: gitoxide reads worktrees but cannot add or remove one, and the repository's
//! administrative files (`.git/worktrees/NAME`, the branch, its locks) must be written exactly
//! as git writes them.
//!
//! A session in a worktree may write what committing from it takes, and no more of the
//! repository's git directory: the worktree's own administrative directory, the object
//! store, and the `agentd/` branches with their reflogs. The repository's other branches,
//! its config and its hooks stay out of its reach.
//!
//! The repository's configuration is still a session's to write where it runs in the main
//! tree under `workspace_write`, so the steps that run filter drivers, the checkout and
//! `status`, run sandboxed: the checkout as a command of the worktree's session would, `status`
//! read-only and without network.

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
/// `dir`, from the HEAD of `cwd`'s working tree (a worktree's own when `cwd` is in one),
/// checked out in the sandbox a session with `config` would have there (its network
/// setting; `options` say how local commands start); returns it and the directories its
/// session must be able to write to commit from it ([`writable_roots`]).
pub(crate) async fn add(
    cwd: &Path,
    dir: &Path,
    name: Option<&str>,
    config: &SessionConfig,
    options: LocalOptions,
) -> Result<(Worktree, Vec<PathBuf>), String> {
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
    // The main working tree (listed first) outlives any linked one `cwd` may be in.
    let list = git(&top, &["worktree", "list", "--porcelain", "-z"]).await?;
    let repository = list
        .split('\0')
        .next()
        .and_then(|l| l.strip_prefix("worktree "))
        .map_or_else(|| top.clone(), PathBuf::from);
    let base = git(&top, &["rev-parse", "--verify", "HEAD^{commit}"])
        .await
        .map_err(|e| format!("a worktree starts from HEAD, and there is none yet: {e}"))?;
    let branch = format!("agentd/{name}");
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let path = dir.join(format!("{name}-{suffix}"));
    let base = base.trim().to_owned();
    let path_arg = path.to_string_lossy().into_owned();
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
        repository: repository.display().to_string(),
        base,
    };
    let made = async {
        let roots = writable_roots(&path).await?;
        checkout(&tree, &roots, config, options)
            .await
            .map_err(|e| format!("the worktree's checkout failed: {e}"))?;
        Ok(roots)
    };
    match made.await {
        Ok(roots) => Ok((tree, roots)),
        Err(e) => {
            // Nobody would own it, and nothing in it is anyone's yet.
            let _ = git(&top, &["worktree", "remove", "--force", &tree.path]).await;
            let _ = git(&top, &["branch", "-D", "--quiet", &tree.branch]).await;
            Err(e)
        }
    }
}

/// What `git worktree add` would have run to check `tree` out, in the sandbox of a
/// `workspace_write` session there: the worktree, `roots` (where its index lives) and the
/// commands' temp dir writable; the network as `config` has it (a smudge filter such as
/// git-lfs's may fetch).
async fn checkout(
    tree: &Worktree,
    roots: &[PathBuf],
    config: &SessionConfig,
    options: LocalOptions,
) -> Result<(), String> {
    let env = LocalExecutionEnvironment::with_options(PathBuf::from(&tree.path), options);
    let mut config = config.clone();
    config.sandbox = SandboxMode::WorkspaceWrite;
    config.sandbox_writable_roots.extend_from_slice(roots);
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

/// What a session in the worktree at `path` must be able to write, beside the worktree
/// itself, to commit from it: its administrative directory (HEAD, index), the object store,
/// and the `agentd/` branches and their reflogs (a ref is written as a lock file beside it,
/// then renamed). Not the repository's other refs, config or hooks.
pub(crate) async fn writable_roots(path: &Path) -> Result<Vec<PathBuf>, String> {
    let dirs = git(
        path,
        &[
            "rev-parse",
            "--path-format=absolute",
            "--git-dir",
            "--git-common-dir",
        ],
    )
    .await?;
    let mut dirs = dirs.lines().map(PathBuf::from);
    let (Some(own), Some(common)) = (dirs.next(), dirs.next()) else {
        return Err(format!(
            "git rev-parse in {}: no git directories",
            path.display()
        ));
    };
    Ok(vec![
        own,
        common.join("objects"),
        common.join("refs/heads/agentd"),
        common.join("logs/refs/heads/agentd"),
    ])
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
