//! git run by the daemon itself, not for a tool: `worktree.rs`'s `git worktree add/remove`,
//! `status`, `rev-parse` and `branch -D` on the user's repository. Not sandboxed (it writes
//! the repository's `.git`, as the user's own git would), but with the repository's hooks off,
//! the environment's `GIT_*` unable to point it elsewhere, a time limit and a bounded read of
//! its output.

use super::process;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// A git command is given this long (a checkout of a large repository included).
const GIT_TIMEOUT: Duration = Duration::from_secs(300);
/// The most of each of a git command's outputs read.
const MAX_OUTPUT: u64 = 1 << 20;

/// Runs git in `dir` with `args`; its standard output, or why it failed.
pub(crate) async fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let mut command = tokio::process::Command::new("git");
    command
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
            "-C",
        ])
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_COMMON_DIR")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .env_remove("GIT_CONFIG_PARAMETERS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let shown = || format!("git {}", args.join(" "));
    let (mut child, _listed) =
        process::spawn(&mut command).map_err(|e| format!("cannot run git: {e}"))?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(format!("{}: no pipes", shown()));
    };
    let run = async {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let (mut stdout, mut stderr) = (stdout.take(MAX_OUTPUT), stderr.take(MAX_OUTPUT));
        let (a, b) = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
        a.and(b)?;
        Ok::<_, std::io::Error>((child.wait().await?, out, err))
    };
    let (status, out, err) = tokio::time::timeout(GIT_TIMEOUT, run)
        .await
        .map_err(|_| format!("{} took over {GIT_TIMEOUT:?}", shown()))?
        .map_err(|e| format!("{}: {e}", shown()))?;
    if status.success() {
        Ok(String::from_utf8_lossy(&out).into_owned())
    } else {
        Err(format!(
            "{}: {}",
            shown(),
            String::from_utf8_lossy(&err).trim()
        ))
    }
}
