//! git run by the daemon itself, not for a tool: `worktree.rs`'s `git worktree add/remove`,
//! `status`, `rev-parse`, `reset` and `branch -D` on the user's repository. Always with the
//! repository's hooks and fsmonitor off, the environment's `GIT_*` unable to point it
//! elsewhere, a time limit and a bounded read of its output.
//!
//! [`git`] runs unsandboxed (it writes the repository's `.git`, as the user's own git would),
//! so it is kept to subcommands that run no program the configuration names. Checkouts and
//! `status` run filter drivers (`filter.NAME.clean`/`smudge`/`process` in `.git/config`,
//! picked by `.gitattributes`), which cannot be turned off by name and which a session's
//! model can write: [`sandboxed`] runs those in a sandbox, so that they reach no further than
//! the model's own commands could.

use super::{ExecRequest, ExecutionEnvironment, SandboxPolicy, process, sh_quote};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// A git command is given this long (a checkout of a large repository included).
const GIT_TIMEOUT: Duration = Duration::from_secs(300);
/// The most of each of a git command's outputs read.
const MAX_OUTPUT: u64 = 1 << 20;
/// What every git run of the daemon's sets: no hooks, no fsmonitor, no pager.
const SETTINGS: [&str; 6] = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "--no-pager",
    "--no-optional-locks",
];
/// Variables that would point git at another repository or add settings.
const REDIRECTS: [&str; 6] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_CONFIG_PARAMETERS",
];

/// Runs git in `dir` with `args`; its standard output, or why it failed.
pub(crate) async fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let mut command = tokio::process::Command::new("git");
    command.args(SETTINGS).arg("-C").arg(dir).args(args);
    for var in REDIRECTS {
        command.env_remove(var);
    }
    command
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

/// Runs git with `args` in `env`'s working directory under `policy` (the sandbox a command of
/// the session would have, or a read-only one); its standard output, or why it failed.
pub(crate) async fn sandboxed(
    env: &dyn ExecutionEnvironment,
    policy: &SandboxPolicy,
    args: &[&str],
) -> Result<String, String> {
    let shown = || format!("git {}", args.join(" "));
    let words: Vec<String> = SETTINGS.iter().chain(args).map(|a| sh_quote(a)).collect();
    let script = format!(
        "unset {}; exec git {}",
        REDIRECTS.join(" "),
        words.join(" ")
    );
    let request = ExecRequest {
        command: &script,
        timeout: GIT_TIMEOUT,
        working_dir: None,
        sandbox: Some(policy),
    };
    let result = env
        .exec_command(
            request,
            &|_, _| {},
            &tokio_util::sync::CancellationToken::new(),
        )
        .await
        .map_err(|e| format!("{}: {e}", shown()))?;
    match result.exit_code {
        _ if result.timed_out => Err(format!("{} took over {GIT_TIMEOUT:?}", shown())),
        Some(0) => Ok(result.stdout),
        _ => Err(format!("{}: {}", shown(), result.stderr.trim())),
    }
}
