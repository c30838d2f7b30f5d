//! What the system prompt says about where the session runs (spec 6.3-6.5), captured once at
//! session start through the execution environment: platform, date, a git snapshot, and the
//! project's instruction files.

use crate::exec::ExecutionEnvironment;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Budget for project instruction files (spec 6.5).
pub(crate) const PROJECT_DOCS_BUDGET: usize = 32 * 1024;
const TRUNCATION_MARKER: &str = "[Project instructions truncated at 32KB]";

/// A git snapshot at session start (spec 6.4).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GitSnapshot {
    /// The repository's top directory.
    pub(crate) root: PathBuf,
    /// The current branch.
    pub(crate) branch: String,
    /// Tracked files with changes.
    pub(crate) modified: usize,
    /// Untracked files.
    pub(crate) untracked: usize,
    /// The latest commits, one line each.
    pub(crate) recent_commits: Vec<String>,
}

/// Facts for the system prompt, captured at session start.
#[derive(Debug, Clone)]
pub(crate) struct EnvironmentContext {
    /// The git snapshot, when the working directory is in a repository.
    pub(crate) git: Option<GitSnapshot>,
    /// OS name and version.
    pub(crate) os_version: String,
    /// The date the session started, `YYYY-MM-DD`.
    pub(crate) date: String,
    /// Project instructions, root first, within the budget.
    pub(crate) project_docs: String,
}

/// The git snapshot's script. The repository's own configuration is the model's to write
/// (it lives in the workspace), so git must run nothing it names: no fsmonitor, no hooks
/// (`--no-optional-locks` also keeps `status` from writing the index, which would run
/// `post-index-change`), no pager, no signature program, no submodules' configurations.
/// Filter and diff drivers cannot all be turned off by name, so the report also runs in a
/// read-only sandbox (see `ExecutionEnvironment::report`).
const GIT_SNAPSHOT: &str = "g() { GIT_OPTIONAL_LOCKS=0 git --no-pager --no-optional-locks \
    -c core.fsmonitor=false -c core.hooksPath=/dev/null -c core.pager=cat \
    -c log.showSignature=false -c diff.external= -c core.untrackedCache=false \
    -c status.showUntrackedFiles=normal \"$@\" 2>/dev/null; }; \
    g rev-parse --show-toplevel || exit 0; \
    echo '---'; g rev-parse --abbrev-ref HEAD; echo '---'; \
    g status --porcelain --ignore-submodules=all; \
    echo '---'; g log --no-show-signature --oneline -n 10";

/// The longest branch name or commit line the snapshot keeps: the repository is the
/// model's to write (a commit subject can be megabytes), and the snapshot goes into every
/// request's system prompt.
const MAX_SNAPSHOT_LINE: usize = 200;

/// `line` cut at [`MAX_SNAPSHOT_LINE`] bytes (on a character boundary), marked when cut.
fn cut(line: &str) -> String {
    if line.len() <= MAX_SNAPSHOT_LINE {
        return line.to_owned();
    }
    let mut end = MAX_SNAPSHOT_LINE;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &line[..end])
}

async fn git_snapshot(env: &dyn ExecutionEnvironment) -> Option<GitSnapshot> {
    // Most of a session's start when there is nothing to find: a shell and git.
    if !env.git_repository_possible().await {
        return None;
    }
    let report = env.report(GIT_SNAPSHOT, Duration::from_secs(5)).await?;
    let mut sections = report.split("---\n");
    let root = sections.next()?.trim();
    if root.is_empty() {
        return None;
    }
    let branch = cut(sections.next().unwrap_or_default().trim());
    let status: Vec<&str> = sections
        .next()
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.is_empty())
        .collect();
    let untracked = status.iter().filter(|l| l.starts_with("??")).count();
    let recent_commits = sections
        .next()
        .unwrap_or_default()
        .lines()
        .take(10)
        .map(cut)
        .collect();
    Some(GitSnapshot {
        root: PathBuf::from(root),
        branch,
        modified: status.len() - untracked,
        untracked,
        recent_commits,
    })
}

/// The instruction files from `root` down to `cwd`, root first (deeper files come later and
/// take precedence), cut at the budget with the spec's marker.
async fn project_docs(
    env: &dyn ExecutionEnvironment,
    root: &Path,
    cwd: &Path,
    names: &[&str],
) -> String {
    let mut dirs: Vec<&Path> = cwd
        .ancestors()
        .take_while(|d| d.starts_with(root))
        .collect();
    dirs.reverse();
    let mut out = String::new();
    for dir in dirs {
        for name in names {
            let path = dir.join(name);
            let Ok(bytes) = env.read_file(&path).await else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            out.push_str(&format!(
                "<!-- {} -->\n{}\n",
                path.display(),
                text.trim_end()
            ));
        }
    }
    if out.len() > PROJECT_DOCS_BUDGET {
        let mut cut = PROJECT_DOCS_BUDGET;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('\n');
        out.push_str(TRUNCATION_MARKER);
    }
    out
}

impl EnvironmentContext {
    /// Captures the context for a session in `env` whose profile reads `doc_names`.
    pub(crate) async fn capture(env: &dyn ExecutionEnvironment, doc_names: &[&str]) -> Self {
        let git = git_snapshot(env).await;
        let cwd = env.working_directory();
        let root = git.as_ref().map_or(cwd, |g| g.root.as_path());
        Self {
            project_docs: project_docs(env, root, cwd, doc_names).await,
            git,
            ..Self::minimal(env)
        }
    }

    /// What is known without running anything (no git snapshot, no project docs): the
    /// context while a capture runs, or when it failed.
    pub(crate) fn minimal(env: &dyn ExecutionEnvironment) -> Self {
        Self {
            git: None,
            os_version: env.os_version(),
            date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()[..10]
                .to_owned(),
            project_docs: String::new(),
        }
    }
}
