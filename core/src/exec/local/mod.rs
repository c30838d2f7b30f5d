//! [`LocalExecutionEnvironment`]: files on this machine (`exec/files.rs` does the work, off
//! the async threads), commands in new process groups (`command.rs`), stopped with
//! everything they started (`stop.rs`).

mod command;
mod hook;
mod server;
mod stop;

pub(crate) use hook::{HookCommand, TRANSCRIPT_IN_SANDBOX};
pub(crate) use server::{ServerCommand, ServerGroup, start_server};

pub(crate) use stop::describe_escaped;
pub use stop::end_leftovers;

use super::process::{self, ProcessId};
use super::sandbox::{Namespaces, SandboxPolicy};
use super::{
    DirEntry, EnvFilter, EnvPolicy, Error, ExecRequest, ExecResult, ExecutionEnvironment,
    GrepOptions, OutputSink, ProcessLedger, ProtectedPaths, files, search,
};
use async_trait::async_trait;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use stop::Targets;
use tokio_util::sync::CancellationToken;

/// How a [`LocalExecutionEnvironment`] runs commands, beyond its directory.
#[derive(Clone, Default)]
pub(crate) struct LocalOptions {
    /// Which variables commands inherit.
    pub(crate) env: EnvFilter,
    /// Where the process groups it starts are recorded (a daemon ends the leftovers of a
    /// crashed run at start-up); `None`: nowhere.
    pub(crate) ledger: Option<Arc<dyn ProcessLedger>>,
    /// agentd's own files, which its file operations refuse to open.
    pub(crate) protected: Arc<ProtectedPaths>,
    /// Directories and files sandboxed commands must not see (agentd's own state, config,
    /// keys and socket, the user's runtime directory): empty mounts cover them.
    pub(crate) hidden: Arc<[PathBuf]>,
}

/// Runs tools on the local machine (spec 4.2).
pub struct LocalExecutionEnvironment {
    cwd: PathBuf,
    options: LocalOptions,
    /// `<run>.<environment>.`: the [`MARKER_VAR`](super::process::MARKER_VAR) prefix of
    /// every command this environment starts, so its processes are found wherever they moved.
    marker: String,
    /// Commands started so far (the last part of each command's marker).
    commands: AtomicU64,
    /// Process groups started by this environment that may still be alive.
    groups: Mutex<HashSet<ProcessId>>,
    /// Sandboxed commands' temp dir, made on first use in the directory every
    /// environment's temp dir is in; removed when the environment is dropped (the session is
    /// unloaded or closed).
    temp: OnceLock<Result<(tempfile::TempDir, Arc<tempfile::TempDir>), String>>,
    /// The namespaces of the latest sandbox policy its commands ran under, which it keeps
    /// alive (other environments with the same policy may share them: see
    /// [`SandboxPolicy::mounts`]).
    namespaces: Mutex<Option<Arc<NamespaceCell>>>,
}

/// The directory holding every environment's temp dir (the namespaces make it writable,
/// Landlock holds each command to its own temp dir in it): made with the first, removed
/// with the last.
fn temp_parent() -> Result<Arc<tempfile::TempDir>, String> {
    static PARENT: Mutex<std::sync::Weak<tempfile::TempDir>> = Mutex::new(std::sync::Weak::new());
    let mut parent = PARENT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(made) = parent.upgrade() {
        return Ok(made);
    }
    let made = Arc::new(
        tempfile::Builder::new()
            .prefix("agentd-tmp-")
            .tempdir()
            .map_err(|e| e.to_string())?,
    );
    *parent = Arc::downgrade(&made);
    Ok(made)
}

/// Namespaces for one policy, built by the first command that needs them; `Err`: they
/// cannot be built here, and commands get Landlock alone.
type NamespaceCell = tokio::sync::OnceCell<Result<Arc<Namespaces>, String>>;

impl LocalExecutionEnvironment {
    /// An environment rooted at `cwd` whose commands inherit variables per `policy` (secrets
    /// filtered by the default patterns), recording its processes nowhere.
    pub fn new(cwd: PathBuf, policy: EnvPolicy) -> Self {
        Self::with_options(
            cwd,
            LocalOptions {
                env: EnvFilter::new(policy),
                ..LocalOptions::default()
            },
        )
    }

    /// An environment rooted at `cwd` that runs commands per `options`.
    pub(crate) fn with_options(cwd: PathBuf, options: LocalOptions) -> Self {
        static ENVIRONMENTS: AtomicU64 = AtomicU64::new(0);
        let n = ENVIRONMENTS.fetch_add(1, Ordering::Relaxed);
        Self {
            cwd,
            options,
            marker: format!("{}.{n}.", process::run_id()),
            commands: AtomicU64::new(0),
            groups: Mutex::new(HashSet::new()),
            temp: OnceLock::new(),
            namespaces: Mutex::new(None),
        }
    }

    fn track(&self, group: ProcessId, alive: bool) {
        let changed = {
            let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
            if alive {
                groups.insert(group)
            } else {
                groups.remove(&group)
            }
        };
        if let (true, Some(ledger)) = (changed, &self.options.ledger) {
            if alive {
                ledger.started(group);
            } else {
                ledger.ended(group);
            }
        }
    }
}

#[async_trait]
impl ExecutionEnvironment for LocalExecutionEnvironment {
    fn working_directory(&self) -> &Path {
        &self.cwd
    }

    fn platform(&self) -> &str {
        std::env::consts::OS
    }

    fn os_version(&self) -> String {
        match nix::sys::utsname::uname() {
            Ok(u) => format!(
                "{} {}",
                u.sysname().to_string_lossy(),
                u.release().to_string_lossy()
            ),
            Err(_) => std::env::consts::OS.to_owned(),
        }
    }

    fn temp_dir(&self) -> Result<PathBuf, Error> {
        let made = self.temp.get_or_init(|| {
            let parent = temp_parent()?;
            let dir = tempfile::Builder::new()
                .prefix("session-")
                .tempdir_in(parent.path())
                .map_err(|e| e.to_string())?;
            Ok((dir, parent))
        });
        match made {
            Ok((dir, _)) => Ok(dir.path().to_owned()),
            Err(e) => Err(Error::NotAllowed(format!(
                "cannot make the temp dir for sandboxed commands in {}: {e}",
                std::env::temp_dir().display()
            ))),
        }
    }

    async fn read_file(&self, path: &Path) -> Result<Vec<u8>, Error> {
        let (path, protected) = (self.resolve(path), self.options.protected.clone());
        blocking(move |_| files::read_regular(&path, &protected)).await
    }

    async fn write_file(&self, path: &Path, content: &[u8]) -> Result<(), Error> {
        let (path, protected) = (self.resolve(path), self.options.protected.clone());
        let content = content.to_vec();
        blocking(move |_| files::write_unconfined(&path, &content, &protected)).await
    }

    async fn remove_file(&self, path: &Path) -> Result<(), Error> {
        let (path, protected) = (self.resolve(path), self.options.protected.clone());
        blocking(move |_| files::remove_unconfined(&path, &protected)).await
    }

    async fn write_file_confined(
        &self,
        path: &Path,
        content: &[u8],
        policy: &SandboxPolicy,
    ) -> Result<(), Error> {
        let (path, protected) = (self.resolve(path), self.options.protected.clone());
        let (content, policy) = (content.to_vec(), policy.clone());
        blocking(move |_| {
            let target = policy.check_write(&path)?;
            files::write_beneath(&path, &target.root, target.relative(), &content, &protected)
        })
        .await
    }

    async fn remove_file_confined(&self, path: &Path, policy: &SandboxPolicy) -> Result<(), Error> {
        let (path, protected) = (self.resolve(path), self.options.protected.clone());
        let policy = policy.clone();
        blocking(move |_| {
            let target = policy.check_remove(&path)?;
            files::remove_beneath(&path, &target.root, target.relative(), &protected)
        })
        .await
    }

    async fn file_exists(&self, path: &Path) -> bool {
        tokio::fs::try_exists(self.resolve(path))
            .await
            .unwrap_or(false)
    }

    async fn list_directory(&self, path: &Path, depth: usize) -> Result<Vec<DirEntry>, Error> {
        let (root, protected) = (self.resolve(path), self.options.protected.clone());
        blocking(move |stop| files::list(&root, depth.max(1), &protected, stop)).await
    }

    async fn real_path(&self, path: &Path) -> Result<PathBuf, Error> {
        let path = self.resolve(path);
        blocking(move |_| super::sandbox::real_path(&path, true)).await
    }

    /// Looks for what git's discovery would find, without running git: a `.git` in the
    /// working directory or any ancestor, or an ancestor that may itself be a bare
    /// repository (it holds `HEAD`). `GIT_DIR` names one from anywhere.
    async fn git_repository_possible(&self) -> bool {
        if std::env::var_os("GIT_DIR").is_some() {
            return true;
        }
        let cwd = self.cwd.clone();
        tokio::task::spawn_blocking(move || {
            cwd.ancestors().any(|dir| {
                [".git", "HEAD"]
                    .iter()
                    .any(|name| std::fs::symlink_metadata(dir.join(name)).is_ok())
            })
        })
        .await
        .unwrap_or(true)
    }

    async fn prepare_sandbox(&self, policy: &SandboxPolicy) {
        // An error is cached for the command, which reports it.
        let _ = self.namespaces(policy).await;
    }

    async fn exec_command(
        &self,
        request: ExecRequest<'_>,
        output: OutputSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<ExecResult, Error> {
        self.command(request, output, cancel).await
    }

    /// Runs the report in a read-only sandbox without network: it reads a workspace whose
    /// configuration the model may have written (a `.git/config` naming programs), so what
    /// it runs must not reach beyond what a sandboxed command could. Where no sandbox can
    /// be built there is no report.
    async fn report(&self, script: &str, timeout: Duration) -> Option<String> {
        let policy = SandboxPolicy::report();
        let request = ExecRequest {
            command: script,
            timeout,
            working_dir: None,
            sandbox: Some(&policy),
        };
        match self
            .exec_command(request, &|_, _| {}, &CancellationToken::new())
            .await
        {
            Ok(result) => (!result.timed_out).then_some(result.stdout),
            Err(e) => {
                tracing::warn!("no workspace report: {e}");
                None
            }
        }
    }

    async fn grep(&self, mut options: GrepOptions) -> Result<String, Error> {
        options.path = self.resolve(&options.path);
        let (root, protected) = (self.cwd.clone(), self.options.protected.clone());
        blocking(move |stop| search::grep(&root, &options, &protected, stop)).await
    }

    async fn glob(&self, pattern: &str, base: &Path) -> Result<Vec<String>, Error> {
        let (root, base, pattern) = (self.cwd.clone(), self.resolve(base), pattern.to_owned());
        let protected = self.options.protected.clone();
        blocking(move |stop| search::glob(&root, &base, &pattern, &protected, stop)).await
    }

    async fn terminate_all(&self) {
        // The namespaces' holder goes too (the next command builds them again): a closed
        // session leaves nothing running.
        drop(
            self.namespaces
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        let groups: Vec<ProcessId> = {
            let mut g = self.groups.lock().unwrap_or_else(|e| e.into_inner());
            g.drain().collect()
        };
        if self.commands.load(Ordering::Relaxed) == 0 {
            return;
        }
        // Every command of this environment, wherever its processes moved.
        Targets::recorded(&groups, Some(self.marker.clone()))
            .end()
            .await;
        if let Some(ledger) = &self.options.ledger {
            for group in groups {
                ledger.ended(group);
            }
        }
    }
}

/// Runs filesystem work off the async threads. `f` is given a flag that is set when the
/// caller stops waiting (an aborted call drops its future): long walks check it and stop.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce(&AtomicBool) -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    /// Sets the flag when the waiting future is dropped, finished or not.
    struct Abandon(Arc<AtomicBool>);
    impl Drop for Abandon {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let _abandon = Abandon(stop.clone());
    tokio::task::spawn_blocking(move || f(&stop))
        .await
        .map_err(|e| Error::Io {
            path: PathBuf::new(),
            source: std::io::Error::other(e),
        })?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The git snapshot is skipped only where git could find nothing.
    #[tokio::test]
    async fn a_repository_is_possible_where_git_could_find_one() {
        let root = tempfile::tempdir().unwrap();
        let cwd = root.path().join("a/b");
        std::fs::create_dir_all(&cwd).unwrap();
        let env = LocalExecutionEnvironment::new(cwd.clone(), EnvPolicy::InheritCore);
        assert!(!env.git_repository_possible().await);
        // A work tree's `.git` (a directory, or a file naming one) in an ancestor.
        std::fs::write(root.path().join("a/.git"), "gitdir: /elsewhere\n").unwrap();
        assert!(env.git_repository_possible().await);
        std::fs::remove_file(root.path().join("a/.git")).unwrap();
        // A bare repository around it.
        std::fs::write(root.path().join("HEAD"), "ref: refs/heads/main\n").unwrap();
        assert!(env.git_repository_possible().await);
    }
}
