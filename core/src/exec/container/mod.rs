//! [`ContainerExecutionEnvironment`]: the session's commands in a container of its own, on a
//! Docker or Podman engine (`engine.rs`), made from the session's image when the session
//! starts and removed when it ends; the workspace is bind-mounted at the same path, so the
//! paths in the transcript are the user's.
//!
//! Commands are started by the container's worker (`worker.rs`, exec'd once), each in a new
//! session and process group, and write their output to two FIFOs the daemon made in the
//! container's control directory (its own, mounted read-only at `/.agentd`), which the
//! daemon reads as it reads a local command's pipes: the shared loop (`exec/child.rs`)
//! streams, caps, times out and aborts them (TERM to the group, KILL two seconds later, by
//! the worker). The file tools work on the workspace from this side of the mount, held
//! beneath it as a sandbox's writes are: the rest of the container's file system is the
//! shell's.

mod engine;
mod worker;

pub(crate) use engine::{ContainerSpec, Engine, Labels};

use super::child::{self, Child};
use super::process::{self, MARKER_VAR};
use super::{
    DirEntry, Error, ExecRequest, ExecResult, ExecutionEnvironment, GrepOptions,
    LocalExecutionEnvironment, LocalOptions, OutputSink, ProtectedPaths, files, local, sh_quote,
};
use async_trait::async_trait;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;
use tokio::net::unix::pipe;
use tokio_util::sync::CancellationToken;
use worker::Worker;

/// What every container environment of one daemon shares: the label naming the daemon, and
/// the directory the control directories are made in.
pub(crate) struct ContainerHost {
    /// The [`engine::DAEMON_LABEL`] value: the daemon's state directory.
    daemon: String,
    /// Where each container's control directory is made (private to the daemon's user).
    control: PathBuf,
}

impl ContainerHost {
    /// The host of daemon `daemon`, with control directories in `control`; those an earlier
    /// run left there are removed first (no container of this run has one yet).
    pub(crate) fn new(daemon: String, control: PathBuf) -> Self {
        if let Ok(entries) = std::fs::read_dir(&control) {
            for entry in entries.flatten() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        Self { daemon, control }
    }

    /// Removes the containers earlier runs of this daemon left on the engines at
    /// `engines` (`None`: the default engine). Returns how many.
    pub(crate) async fn sweep(&self, engines: &[Option<String>]) -> usize {
        let mut removed = 0;
        for address in engines {
            match Engine::connect(address.as_deref()).await {
                Ok(engine) => removed += engine.sweep(&self.daemon, process::run_id()).await,
                Err(e) => tracing::debug!("no sweep of session containers: {e}"),
            }
        }
        removed
    }
}

/// A session's container, once made.
struct Live {
    engine: Engine,
    id: String,
    worker: Worker,
    /// The control directory: command scripts and output FIFOs.
    control: tempfile::TempDir,
}

/// Runs a session's tools in a container.
pub(crate) struct ContainerExecutionEnvironment {
    cwd: PathBuf,
    /// The workspace: the mount, and the root the file tools are held beneath (a real path).
    root: PathBuf,
    spec: ContainerSpec,
    host: Arc<ContainerHost>,
    session: String,
    /// The file tools' grep, glob and listing, on this side of the mount.
    files: LocalExecutionEnvironment,
    protected: Arc<ProtectedPaths>,
    live: tokio::sync::OnceCell<Live>,
    released: AtomicBool,
    /// `<run>.c<environment>.`: the [`MARKER_VAR`] prefix of every command.
    marker: String,
    commands: AtomicU64,
}

impl ContainerExecutionEnvironment {
    /// An environment for session `session` in `cwd`, whose container is made from `spec`
    /// when [`start`](Self::start) or the first operation needs it.
    pub(crate) fn new(
        cwd: PathBuf,
        spec: ContainerSpec,
        host: Arc<ContainerHost>,
        session: String,
        options: LocalOptions,
    ) -> Self {
        static ENVIRONMENTS: AtomicU64 = AtomicU64::new(0);
        let n = ENVIRONMENTS.fetch_add(1, Ordering::Relaxed);
        let root = std::fs::canonicalize(&cwd).unwrap_or_else(|_| cwd.clone());
        let protected = options.protected.clone();
        Self {
            files: LocalExecutionEnvironment::with_options(cwd.clone(), options),
            cwd,
            root,
            spec,
            host,
            session,
            protected,
            live: tokio::sync::OnceCell::new(),
            released: AtomicBool::new(false),
            marker: format!("{}.c{n}.", process::run_id()),
            commands: AtomicU64::new(0),
        }
    }

    /// Makes and starts the container if it is not running yet: the engine reached, the image
    /// found, the workspace mounted.
    pub(crate) async fn start(&self) -> Result<(), Error> {
        self.live().await.map(drop)
    }

    async fn live(&self) -> Result<&Live, Error> {
        if self.released.load(Ordering::Acquire) {
            return Err(Error::Unavailable(
                "the session's container was removed (the session ended)".into(),
            ));
        }
        self.live.get_or_try_init(|| self.make()).await
    }

    async fn make(&self) -> Result<Live, Error> {
        let engine = Engine::connect(self.spec.engine.as_deref()).await?;
        std::fs::create_dir_all(&self.host.control)
            .map_err(|e| Error::io(&self.host.control, e))?;
        let control = tempfile::Builder::new()
            .prefix("c-")
            .tempdir_in(&self.host.control)
            .map_err(|e| Error::io(&self.host.control, e))?;
        // The container's user opens the FIFOs and reads the scripts; the directory above,
        // the daemon's own, keeps everyone else out.
        std::fs::set_permissions(control.path(), std::fs::Permissions::from_mode(0o755))
            .map_err(|e| Error::io(control.path(), e))?;
        let short: String = self.session.chars().take(8).collect();
        let name = format!(
            "agentd-{short}-{}",
            control.path().file_name().map_or_else(String::new, |n| n
                .to_string_lossy()
                .trim_start_matches("c-")
                .to_ascii_lowercase())
        );
        let labels = Labels {
            daemon: &self.host.daemon,
            run: process::run_id(),
            session: &self.session,
        };
        let id = engine
            .create(&self.spec, &name, &self.root, control.path(), labels)
            .await?;
        tracing::info!(session = %self.session, container = %name, engine = engine.address(), "session container started");
        Ok(Live {
            worker: Worker::new(engine.clone(), id.clone()),
            engine,
            id,
            control,
        })
    }

    /// `path` resolved, with symlinks, when it leads into the workspace: the file tools reach
    /// nothing else (the rest of the container's file system is not on this side).
    async fn beneath(&self, path: &Path) -> Result<(PathBuf, PathBuf), Error> {
        let path = self.resolve(path);
        let real = self.files.real_path(&path).await?;
        match real.strip_prefix(&self.root) {
            Ok(rel) => Ok((path.clone(), rel.to_owned())),
            Err(_) => Err(Error::NotAllowed(format!(
                "{}: in a container session the file tools reach the workspace ({}) only; use \
                 the shell for the container's other files",
                path.display(),
                self.root.display()
            ))),
        }
    }

    /// The script the worker runs for a command: its directory, the marker, then bash where
    /// the image has it, else sh.
    fn script(&self, cwd: &Path, command: &str, marker: &str) -> String {
        format!(
            "cd -- {} || exit 125\nexport {MARKER_VAR}={}\nc={}\ncommand -v bash >/dev/null 2>&1 && exec bash -c \"$c\"\nexec sh -c \"$c\"\n",
            sh_quote(&cwd.display().to_string()),
            sh_quote(marker),
            sh_quote(command),
        )
    }
}

/// A command's files in the control directory, removed when it is over.
struct CommandFiles {
    paths: [PathBuf; 3],
}

impl Drop for CommandFiles {
    fn drop(&mut self) {
        for path in &self.paths {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[async_trait]
impl ExecutionEnvironment for ContainerExecutionEnvironment {
    fn working_directory(&self) -> &Path {
        &self.cwd
    }

    fn platform(&self) -> &str {
        "linux"
    }

    fn os_version(&self) -> String {
        format!("a container of image {}", self.spec.image)
    }

    async fn read_file(&self, path: &Path) -> Result<Vec<u8>, Error> {
        let (shown, rel) = self.beneath(path).await?;
        let (root, protected) = (self.root.clone(), self.protected.clone());
        local::blocking(move |_| files::read_beneath(&shown, &root, &rel, &protected)).await
    }

    async fn write_file(&self, path: &Path, content: &[u8]) -> Result<(), Error> {
        let (shown, rel) = self.beneath(path).await?;
        let (root, protected, content) =
            (self.root.clone(), self.protected.clone(), content.to_vec());
        local::blocking(move |_| files::write_beneath(&shown, &root, &rel, &content, &protected))
            .await
    }

    async fn remove_file(&self, path: &Path) -> Result<(), Error> {
        let (shown, rel) = self.beneath(path).await?;
        let (root, protected) = (self.root.clone(), self.protected.clone());
        local::blocking(move |_| files::remove_beneath(&shown, &root, &rel, &protected)).await
    }

    async fn file_exists(&self, path: &Path) -> bool {
        match self.beneath(path).await {
            Ok((shown, _)) => self.files.file_exists(&shown).await,
            Err(_) => false,
        }
    }

    async fn real_path(&self, path: &Path) -> Result<PathBuf, Error> {
        let (_, rel) = self.beneath(path).await?;
        Ok(self.root.join(rel))
    }

    async fn list_directory(&self, path: &Path, depth: usize) -> Result<Vec<DirEntry>, Error> {
        let (shown, _) = self.beneath(path).await?;
        self.files.list_directory(&shown, depth).await
    }

    async fn git_repository_possible(&self) -> bool {
        self.files.git_repository_possible().await
    }

    async fn exec_command(
        &self,
        request: ExecRequest<'_>,
        output: OutputSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<ExecResult, Error> {
        let started = Instant::now();
        if request.sandbox.is_some() {
            return Err(Error::NotAllowed(
                "a container session's commands are held by the container, not by a sandbox \
                 policy"
                    .into(),
            ));
        }
        if request.command.contains('\0') {
            return Err(Error::NotAllowed(
                "the command holds a NUL byte, which no command line can carry".to_owned(),
            ));
        }
        let live = self.live().await?;
        let n = self.commands.fetch_add(1, Ordering::Relaxed);
        let cwd = request
            .working_dir
            .map(|d| self.resolve(d))
            .unwrap_or_else(|| self.cwd.clone());
        let dir = live.control.path();
        let files = CommandFiles {
            paths: [
                dir.join(format!("{n}.sh")),
                dir.join(format!("{n}.out")),
                dir.join(format!("{n}.err")),
            ],
        };
        let [script, out, err] = &files.paths;
        let marker = format!("{}{n}", self.marker);
        std::fs::write(script, self.script(&cwd, request.command, &marker)).map_err(|e| {
            Error::Spawn(std::io::Error::new(
                e.kind(),
                format!("{}: {e}", script.display()),
            ))
        })?;
        let fifo = |path: &Path| -> Result<pipe::Receiver, Error> {
            nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o666))
                .map_err(|e| Error::Spawn(std::io::Error::from(e)))?;
            // Mode bits are cut by the umask: set them as meant.
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
                .map_err(Error::Spawn)?;
            pipe::OpenOptions::new()
                .open_receiver(path)
                .map_err(Error::Spawn)
        };
        let (stdout, stderr) = (fifo(out)?, fifo(err)?);
        let (_group, process, mut control) = live.worker.start(n).await.map_err(|why| {
            Error::Spawn(std::io::Error::other(format!(
                "cannot start the command in the session's container: {why}"
            )))
        })?;
        let mut child = Child::new(process, Some(stdout), Some(stderr));
        let finished =
            child::run(&mut child, &mut control, request.timeout, cancel, output).await?;
        let (process, _, _) = child.into_parts();
        let stopped = finished.stopped.is_some();
        let lost = process.lost && !stopped;
        control.settle(finished.status.is_some() && !process.lost);
        let mut stderr = finished.stderr;
        if lost {
            if !stderr.is_empty() && !stderr.ends_with('\n') {
                stderr.push('\n');
            }
            let why = if live.engine.running(&live.id).await {
                "its worker ended"
            } else {
                "the container stopped"
            };
            stderr.push_str(&format!(
                "[the command's end was not seen: {why}; the command was ended]\n"
            ));
        }
        Ok(ExecResult {
            stdout: finished.stdout,
            stderr,
            exit_code: if stopped || lost {
                None
            } else {
                finished.status.and_then(|s| s.code())
            },
            timed_out: finished.timed_out,
            cancelled: finished.cancelled,
            duration: started.elapsed(),
            escaped: Vec::new(),
        })
    }

    /// Each command's group is ended by its own stop (or, once it exited, by the worker), so
    /// nothing is left to end here but processes that left their group with a `setsid` of
    /// their own: those run until the container is removed with the session, as over SSH.
    async fn terminate_all(&self) {}

    async fn release(&self) {
        if self.released.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(live) = self.live.get() {
            live.engine.remove(&live.id).await;
            tracing::info!(session = %self.session, "session container removed");
        }
    }

    async fn grep(&self, mut options: GrepOptions) -> Result<String, Error> {
        let (shown, _) = self.beneath(&options.path).await?;
        options.path = shown;
        self.files.grep(options).await
    }

    async fn glob(&self, pattern: &str, base: &Path) -> Result<Vec<String>, Error> {
        let (shown, _) = self.beneath(base).await?;
        self.files.glob(pattern, &shown).await
    }
}

impl Drop for ContainerExecutionEnvironment {
    /// A session that ended without [`release`](ExecutionEnvironment::release) (its task
    /// crashed) still has its container removed, when a runtime is there to do it.
    fn drop(&mut self) {
        if self.released.load(Ordering::Acquire) {
            return;
        }
        if let (Some(live), Ok(runtime)) = (self.live.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(async move { live.engine.remove(&live.id).await });
        }
    }
}
