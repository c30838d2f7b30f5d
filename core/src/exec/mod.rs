//! Where tools run: the [`ExecutionEnvironment`] trait (spec 4.1), its local implementation,
//! and the SSH one ([`SshExecutionEnvironment`], `ssh/`) that runs the same tools on another
//! machine over one multiplexed OpenSSH connection, and the container one
//! ([`ContainerExecutionEnvironment`], `container/`) that runs them in a session's container.
//!
//! Only this module spawns processes. Every command runs in its own process group so that a
//! timeout or an abort can signal the command and everything it forked at once, and its
//! processes carry [`MARKER_VAR`] so the ones that leave the group are still found
//! (`process.rs`). The daemon is a child subreaper ([`become_subreaper`]) and records its
//! groups through a [`ProcessLedger`], so nothing it starts outlives it unnoticed. What a
//! tool call may write and reach is its [`SandboxPolicy`], applied by [`Sandboxed`]
//! (`sandbox.rs`: Landlock for commands, path rules for file tools, whose writes are opened
//! beneath their root in one step by `files.rs`). No tool reads or writes agentd's own files
//! ([`ProtectedPaths`], `protected.rs`), whatever the sandbox.

mod child;
mod container;
mod env_filter;
mod files;
mod git;
mod local;
mod process;
mod protected;
mod sandbox;
mod search;
mod spawn;
mod ssh;
mod utf8;

pub use env_filter::EnvPolicy;

pub(crate) use container::{
    ContainerExecutionEnvironment, ContainerHost, ContainerSpec, EngineAddress, parse_ssh_engine,
};

pub(crate) use env_filter::EnvFilter;
pub(crate) use files::{open_dirs, opened_real_path, read_small};
pub(crate) use git::{git, sandboxed as sandboxed_git};
pub(crate) use local::{
    HookCommand, LocalOptions, ServerCommand, ServerGroup, TRANSCRIPT_IN_SANDBOX, describe_escaped,
    start_server,
};
pub use local::{LocalExecutionEnvironment, end_leftovers};
pub(crate) use process::run_id;
pub use process::{
    AncestryError, ProcessId, become_subreaper, descends_from, identify, reap_orphans_forever,
};
pub(crate) use protected::fd_path;
pub use protected::{ProtectedPaths, create_protected_dir};
pub use sandbox::SandboxPolicy;
pub(crate) use sandbox::Sandboxed;
pub use search::{GrepMode, GrepOptions};
pub(crate) use ssh::{SshConnections, SshExecutionEnvironment, SshTarget};

use agentd_proto::{OutputStream, ProcessInfo};
use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The largest file the file tools read, locally and over SSH: a file is held whole in
/// memory (and over SSH on its way too).
pub(crate) const MAX_READ_BYTES: u64 = 64 * 1024 * 1024;

/// What an environment operation can fail with. Tools turn these into error results for the
/// model; they never end a session.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The path does not exist.
    #[error("file not found: {0}")]
    NotFound(PathBuf),
    /// The OS refused access.
    #[error("permission denied: {0}")]
    PermissionDenied(PathBuf),
    /// Any other I/O failure on a path.
    #[error("{path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The command could not be started.
    #[error("could not start command: {0}")]
    Spawn(std::io::Error),
    /// The environment does not allow this operation (for example a write when read-only).
    #[error("{0}")]
    NotAllowed(String),
    /// The environment cannot be reached (an SSH host that refuses the connection or fails
    /// host key verification); the message says which and why.
    #[error("{0}")]
    Unavailable(String),
    /// The tool call was aborted while the operation ran; it was abandoned.
    #[error("aborted: the file operation was abandoned")]
    Cancelled,
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        match source.kind() {
            std::io::ErrorKind::NotFound => Self::NotFound(path.to_owned()),
            std::io::ErrorKind::PermissionDenied => Self::PermissionDenied(path.to_owned()),
            _ => Self::Io {
                path: path.to_owned(),
                source,
            },
        }
    }
}

/// The result of one command (spec 4.1 `ExecResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecResult {
    /// Everything the command wrote to stdout (up to the retention cap).
    pub stdout: String,
    /// Everything the command wrote to stderr (up to the retention cap).
    pub stderr: String,
    /// Exit code; `None` when killed by a signal.
    pub exit_code: Option<i32>,
    /// Whether the timeout fired.
    pub timed_out: bool,
    /// Whether the caller's cancellation (an abort) stopped it.
    pub cancelled: bool,
    /// Wall-clock duration.
    pub duration: Duration,
    /// Processes the command started that had left its process group when it ended, timed
    /// out or was cancelled (ended with it in the last two cases; `stderr` names them too).
    pub escaped: Vec<ProcessInfo>,
}

/// One command to run.
#[derive(Debug, Clone)]
pub struct ExecRequest<'a> {
    /// The command line, run with `/bin/bash -c`.
    pub command: &'a str,
    /// Kill the process group after this long.
    pub timeout: Duration,
    /// Working directory; the environment's own if `None`.
    pub working_dir: Option<&'a Path>,
    /// What the command may write and reach; `None` runs it unrestricted. An environment
    /// that cannot enforce a policy refuses the command.
    pub sandbox: Option<&'a SandboxPolicy>,
}

/// Receives command output as it arrives.
pub type OutputSink<'a> = &'a (dyn Fn(OutputStream, &str) + Send + Sync);

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Path relative to the listed directory.
    pub name: String,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// Size in bytes for files.
    pub size: Option<u64>,
}

/// Where a session's tools read, write and run (spec 4.1). Implement it to run the same tools
/// somewhere else (a container, a remote host); wrap one to add a policy (see
/// `ReadOnly`).
#[async_trait]
pub trait ExecutionEnvironment: Send + Sync {
    /// The directory relative paths resolve against.
    fn working_directory(&self) -> &Path;
    /// `linux`, `darwin`, ...
    fn platform(&self) -> &str;
    /// A human-readable OS version.
    fn os_version(&self) -> String;
    /// The directory sandboxed commands get as their own temp dir (`TMPDIR`), created on
    /// first use and removed with the environment.
    fn temp_dir(&self) -> Result<PathBuf, Error> {
        Err(Error::NotAllowed(
            "this environment has no temp dir for sandboxed commands, so it cannot sandbox them"
                .into(),
        ))
    }
    /// Reads a whole regular file of at most 64 MiB; anything else (a FIFO, a
    /// device, a socket, a directory) is refused without blocking on it.
    async fn read_file(&self, path: &Path) -> Result<Vec<u8>, Error>;
    /// Writes a whole file, creating parent directories.
    async fn write_file(&self, path: &Path, content: &[u8]) -> Result<(), Error>;
    /// Removes a file.
    async fn remove_file(&self, path: &Path) -> Result<(), Error>;
    /// Writes a whole file (absolute `path`) beneath one of `policy`'s writable roots,
    /// creating parent directories: resolved and opened beneath the root in one step, so no
    /// symlink swapped in meanwhile carries the write out. An environment that cannot do that
    /// refuses the write.
    async fn write_file_confined(
        &self,
        path: &Path,
        _content: &[u8],
        _policy: &SandboxPolicy,
    ) -> Result<(), Error> {
        Err(cannot_confine(path))
    }
    /// Removes a file (absolute `path`; a symlink itself) beneath one of `policy`'s writable
    /// roots, as [`write_file_confined`](Self::write_file_confined) writes.
    async fn remove_file_confined(
        &self,
        path: &Path,
        _policy: &SandboxPolicy,
    ) -> Result<(), Error> {
        Err(cannot_confine(path))
    }
    /// Whether a path exists.
    async fn file_exists(&self, path: &Path) -> bool;
    /// Lists a directory down to `depth` levels (1 = direct children).
    async fn list_directory(&self, path: &Path, depth: usize) -> Result<Vec<DirEntry>, Error>;
    /// Runs a command in a new process group. On timeout or cancellation the group, and the
    /// processes that left it, get SIGTERM, then SIGKILL two seconds later (at once when all
    /// are gone sooner); the output collected so far is returned, read for at most a short
    /// drain after the command exits or is killed, whoever still holds its pipes. Processes
    /// that left the group are named in a warning at the end of `stderr`.
    async fn exec_command(
        &self,
        request: ExecRequest<'_>,
        output: OutputSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<ExecResult, Error>;
    /// Runs `script`, a short read-only report for the session's own use (the git snapshot
    /// of spec 6.4), in the working directory, and returns its stdout; `None` when it could
    /// not run or took longer than `timeout`. No model asked for it, so nothing streams, and
    /// an environment may run it on a cheaper path than a command's.
    async fn report(&self, script: &str, timeout: Duration) -> Option<String> {
        let request = ExecRequest {
            command: script,
            timeout,
            working_dir: None,
            sandbox: None,
        };
        self.exec_command(request, &|_, _| {}, &CancellationToken::new())
            .await
            .ok()
            .filter(|r| !r.timed_out)
            .map(|r| r.stdout)
    }
    /// Whether git could find a repository from the working directory. `false` only when
    /// that is certain, so that the git snapshot need not run git at all; the default
    /// cannot tell.
    async fn git_repository_possible(&self) -> bool {
        true
    }
    /// Gets ready to run commands under `policy` (locally: builds the namespaces its commands
    /// join), so that the first command does not wait for it. A session calls it when it
    /// starts working on an input, next to its first LLM call; a failure is left for the
    /// command to report. The default has nothing to prepare.
    async fn prepare_sandbox(&self, policy: &SandboxPolicy) {
        let _ = policy;
    }
    /// Terminates every process this environment started that is still alive (commands that
    /// left background children behind, in their groups or out of them), within the grace
    /// period. Called when a session aborts or closes.
    async fn terminate_all(&self);
    /// Frees what the environment holds beyond its processes (a session's container), once
    /// the session closes or its task ends (an unload, the daemon's shutdown). Later
    /// operations may fail. The default holds nothing.
    async fn release(&self) {}
    /// Searches file contents; returns the report (spec 4.1 `grep`).
    async fn grep(&self, options: GrepOptions) -> Result<String, Error>;
    /// Files under `base` matching `pattern`, newest first, relative to the working directory.
    async fn glob(&self, pattern: &str, base: &Path) -> Result<Vec<String>, Error>;

    /// Where a write to `path` would really lead: absolute, with symlinks and `..` resolved
    /// through its deepest existing ancestor, as the sandbox resolves writes. Approval rules
    /// match it. The default cannot tell.
    async fn real_path(&self, path: &Path) -> Result<PathBuf, Error> {
        Err(Error::NotAllowed(format!(
            "cannot resolve {} in this environment",
            path.display()
        )))
    }

    /// Resolves `path` against the working directory.
    fn resolve(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_owned()
        } else {
            self.working_directory().join(path)
        }
    }
}

fn cannot_confine(path: &Path) -> Error {
    Error::NotAllowed(format!(
        "{}: this environment cannot hold file writes to a sandbox's writable roots, so \
         nothing was written (set sandbox = \"off\" to write without it)",
        path.display()
    ))
}

/// Where an environment records the process groups it starts, so that processes a crashed
/// daemon left behind can be ended when it starts again (see [`end_leftovers`]).
pub(crate) trait ProcessLedger: Send + Sync {
    /// A command's process group started.
    fn started(&self, group: ProcessId);
    /// The group is gone (or was killed).
    fn ended(&self, group: ProcessId);
}

/// An environment that refuses every write and delegates everything else (spec 4.4).
pub(crate) struct ReadOnly<E>(pub E);

#[async_trait]
impl<E: ExecutionEnvironment> ExecutionEnvironment for ReadOnly<E> {
    fn working_directory(&self) -> &Path {
        self.0.working_directory()
    }
    fn platform(&self) -> &str {
        self.0.platform()
    }
    fn os_version(&self) -> String {
        self.0.os_version()
    }
    fn temp_dir(&self) -> Result<PathBuf, Error> {
        self.0.temp_dir()
    }
    async fn prepare_sandbox(&self, policy: &SandboxPolicy) {
        self.0.prepare_sandbox(policy).await;
    }
    async fn read_file(&self, path: &Path) -> Result<Vec<u8>, Error> {
        self.0.read_file(path).await
    }
    async fn write_file(&self, _path: &Path, _content: &[u8]) -> Result<(), Error> {
        Err(Error::NotAllowed(
            "write operations are disabled in read-only mode".into(),
        ))
    }
    async fn remove_file(&self, _path: &Path) -> Result<(), Error> {
        Err(Error::NotAllowed(
            "write operations are disabled in read-only mode".into(),
        ))
    }
    // The policy's refusal, which names the roots, comes first where it applies.
    async fn write_file_confined(
        &self,
        path: &Path,
        content: &[u8],
        policy: &SandboxPolicy,
    ) -> Result<(), Error> {
        let (policy, owned) = (policy.clone(), path.to_owned());
        local::blocking(move |_| policy.check_write(&owned)).await?;
        self.write_file(path, content).await
    }
    async fn remove_file_confined(&self, path: &Path, policy: &SandboxPolicy) -> Result<(), Error> {
        let (policy, owned) = (policy.clone(), path.to_owned());
        local::blocking(move |_| policy.check_remove(&owned)).await?;
        self.remove_file(path).await
    }
    async fn file_exists(&self, path: &Path) -> bool {
        self.0.file_exists(path).await
    }
    async fn real_path(&self, path: &Path) -> Result<PathBuf, Error> {
        self.0.real_path(path).await
    }
    async fn list_directory(&self, path: &Path, depth: usize) -> Result<Vec<DirEntry>, Error> {
        self.0.list_directory(path, depth).await
    }
    async fn exec_command(
        &self,
        request: ExecRequest<'_>,
        output: OutputSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<ExecResult, Error> {
        self.0.exec_command(request, output, cancel).await
    }
    async fn report(&self, script: &str, timeout: Duration) -> Option<String> {
        self.0.report(script, timeout).await
    }
    async fn git_repository_possible(&self) -> bool {
        self.0.git_repository_possible().await
    }
    async fn terminate_all(&self) {
        self.0.terminate_all().await
    }
    async fn release(&self) {
        self.0.release().await
    }
    async fn grep(&self, options: GrepOptions) -> Result<String, Error> {
        self.0.grep(options).await
    }
    async fn glob(&self, pattern: &str, base: &Path) -> Result<Vec<String>, Error> {
        self.0.glob(pattern, base).await
    }
}

/// `text` in single quotes for a POSIX shell.
pub(crate) fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}
