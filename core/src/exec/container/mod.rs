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
//!
//! An engine that is not a local socket (`tcp://`, `https://`, `ssh://`) shares no file
//! system with the daemon: the workspace is a path on the engine's machine, each command is
//! exec'd with its output on the exec's stream (`remote.rs`), and the file tools go through
//! the engine's archive endpoints (`archive.rs`). Every container is in the daemon's record
//! (`record.rs`) from before its creation to its removal, for the next start's sweep.

mod archive;
mod engine;
mod record;
mod remote;
mod remote_files;
mod ssh_engine;
mod tls;
mod tree;
mod worker;

pub(crate) use engine::{ContainerSpec, Engine, EngineAddress, Labels};
pub(crate) use ssh_engine::parse as parse_ssh_engine;

use super::child::{self, Child};
use super::process::{self, MARKER_VAR};
use super::ssh::SshConnections;
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

/// What every container environment of one daemon shares: the label naming the daemon, the
/// directory the control directories are made in, and the record of its containers.
pub(crate) struct ContainerHost {
    /// The [`engine::DAEMON_LABEL`] value: the daemon's state directory.
    daemon: String,
    /// Where each container's control directory is made (private to the daemon's user).
    control: PathBuf,
    record: record::Record,
    /// What the record held at start: earlier runs' containers, for [`sweep`](Self::sweep).
    leftover: Vec<record::Entry>,
    /// The daemon's SSH connections, which `ssh://` engines are reached over.
    ssh: Arc<SshConnections>,
}

impl ContainerHost {
    /// The host of daemon `daemon`, with control directories in `control` and its record in
    /// `state` (`None`: none kept), reaching `ssh://` engines over `ssh`; the control
    /// directories an earlier run left are removed first (no container of this run has one
    /// yet).
    pub(crate) fn new(
        daemon: String,
        control: PathBuf,
        state: Option<PathBuf>,
        ssh: Arc<SshConnections>,
    ) -> Self {
        if let Ok(entries) = std::fs::read_dir(&control) {
            for entry in entries.flatten() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let record = record::Record::open(state);
        let leftover = record.entries();
        Self {
            daemon,
            control,
            record,
            leftover,
            ssh,
        }
    }

    /// Removes the containers earlier runs of this daemon left on the engines its record
    /// names, and no other: a start with nothing recorded connects to no engine. What an
    /// unreachable engine holds stays recorded for the next start. Returns how many.
    pub(crate) async fn sweep(&self) -> usize {
        let mut engines: Vec<&EngineAddress> = self.leftover.iter().map(|e| &e.engine).collect();
        engines.sort_by(|a, b| a.host.cmp(&b.host).then(a.certs.cmp(&b.certs)));
        engines.dedup();
        let mut removed = 0;
        for address in engines {
            let engine = match Engine::connect(address, &self.ssh).await {
                Ok(engine) => engine,
                Err(e) => {
                    tracing::warn!("cannot sweep the session containers an earlier run left: {e}");
                    continue;
                }
            };
            // By label (whatever the record missed), then by name (one whose labels were
            // never set: created while the daemon died).
            removed += engine.sweep(&self.daemon, process::run_id()).await;
            let mut swept = Vec::new();
            for entry in self.leftover.iter().filter(|e| &e.engine == address) {
                if engine.remove(&entry.name).await {
                    swept.push(entry.name.clone());
                }
            }
            self.record
                .remove(|e| &e.engine == address && swept.contains(&e.name));
        }
        removed
    }
}

/// A session's container, once made.
struct Live {
    engine: Engine,
    id: String,
    /// Its name, as recorded.
    name: String,
    worker: Worker,
    /// The control directory (command scripts and output FIFOs); `None`: a remote engine.
    control: Option<tempfile::TempDir>,
}

/// Runs a session's tools in a container.
pub(crate) struct ContainerExecutionEnvironment {
    cwd: PathBuf,
    /// The workspace: the mount, and the root the file tools are held beneath (a real path
    /// on a local engine; as given on a remote one, where it is the engine machine's).
    root: PathBuf,
    spec: ContainerSpec,
    address: EngineAddress,
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
        let mut address = EngineAddress::resolve(spec.engine.as_deref());
        if address.host.starts_with("ssh://") {
            address.ssh.clone_from(&spec.ssh);
        }
        let root = if address.is_local() {
            std::fs::canonicalize(&cwd).unwrap_or_else(|_| cwd.clone())
        } else {
            cwd.clone()
        };
        let protected = options.protected.clone();
        Self {
            address,
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
        let engine = Engine::connect(&self.address, &self.host.ssh).await?;
        let local = self.address.is_local();
        let control = if local {
            std::fs::create_dir_all(&self.host.control)
                .map_err(|e| Error::io(&self.host.control, e))?;
            let control = tempfile::Builder::new()
                .prefix("c-")
                .tempdir_in(&self.host.control)
                .map_err(|e| Error::io(&self.host.control, e))?;
            // The container's user opens the FIFOs and reads the scripts; the directory
            // above, the daemon's own, keeps everyone else out.
            std::fs::set_permissions(control.path(), std::fs::Permissions::from_mode(0o755))
                .map_err(|e| Error::io(control.path(), e))?;
            Some(control)
        } else {
            None
        };
        let short: String = self.session.chars().take(8).collect();
        let unique = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("agentd-{short}-{}", &unique[..12]);
        let entry = record::Entry {
            engine: self.address.clone(),
            name: name.clone(),
        };
        self.host.record.add(entry).map_err(|e| {
            Error::Unavailable(format!(
                "cannot record the session's container before making it: {e}"
            ))
        })?;
        let labels = Labels {
            daemon: &self.host.daemon,
            run: process::run_id(),
            session: &self.session,
        };
        let created = engine
            .create(
                &self.spec,
                &name,
                &self.root,
                control.as_ref().map(tempfile::TempDir::path),
                labels,
            )
            .await;
        let id = match created {
            Ok(id) => id,
            Err(e) => {
                self.forget(&engine, &name).await;
                return Err(e);
            }
        };
        tracing::info!(session = %self.session, container = %name, engine = %engine.address(), "session container started");
        Ok(Live {
            worker: Worker::new(engine.clone(), id.clone(), local),
            engine,
            id,
            name,
            control,
        })
    }

    /// Removes container `name` and, once it is gone, its record.
    async fn forget(&self, engine: &Engine, name: &str) {
        if engine.remove(name).await {
            self.host
                .record
                .remove(|e| e.name == name && e.engine == self.address);
        }
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

    /// Runs a started command to its end (the shared loop) and reports how it ended.
    #[allow(clippy::too_many_arguments)]
    async fn finish<O, E>(
        &self,
        live: &Live,
        mut child: Child<worker::ContainerProcess, O, E>,
        mut control: worker::Stopper,
        request: ExecRequest<'_>,
        cancel: &CancellationToken,
        output: OutputSink<'_>,
        started: Instant,
    ) -> Result<ExecResult, Error>
    where
        O: tokio::io::AsyncRead + Unpin,
        E: tokio::io::AsyncRead + Unpin,
    {
        let mut finished =
            child::run(&mut child, &mut control, request.timeout, cancel, output).await?;
        let (process, _, _) = child.into_parts();
        let lost = process.lost && finished.stopped.is_none();
        control.settle(finished.status.is_some() && !process.lost);
        let mut stderr = std::mem::take(&mut finished.stderr);
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
        Ok(finished.result(stderr, lost, started))
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
        if let Some(files) = self.remote_files().await? {
            return self.read_remote(&files, path).await;
        }
        let (shown, rel) = self.beneath(path).await?;
        let (root, protected) = (self.root.clone(), self.protected.clone());
        local::blocking(move |_| files::read_beneath(&shown, &root, &rel, &protected)).await
    }

    async fn write_file(&self, path: &Path, content: &[u8]) -> Result<(), Error> {
        if let Some(files) = self.remote_files().await? {
            return self.write_remote(&files, path, content).await;
        }
        let (shown, rel) = self.beneath(path).await?;
        let (root, protected, content) =
            (self.root.clone(), self.protected.clone(), content.to_vec());
        local::blocking(move |_| files::write_beneath(&shown, &root, &rel, &content, &protected))
            .await
    }

    async fn remove_file(&self, path: &Path) -> Result<(), Error> {
        if let Some(files) = self.remote_files().await? {
            return self.remove_remote(&files, path).await;
        }
        let (shown, rel) = self.beneath(path).await?;
        let (root, protected) = (self.root.clone(), self.protected.clone());
        local::blocking(move |_| files::remove_beneath(&shown, &root, &rel, &protected)).await
    }

    async fn file_exists(&self, path: &Path) -> bool {
        if let Ok(Some(files)) = self.remote_files().await {
            let Ok((shown, rel)) = self.lexical(path) else {
                return false;
            };
            return matches!(
                files.resolve(&shown, &rel).await,
                Ok((_, kind)) if kind != archive::Kind::Missing
            );
        }
        match self.beneath(path).await {
            Ok((shown, _)) => self.files.file_exists(&shown).await,
            Err(_) => false,
        }
    }

    async fn real_path(&self, path: &Path) -> Result<PathBuf, Error> {
        if let Some(files) = self.remote_files().await? {
            let (shown, rel) = self.lexical(path)?;
            let (path, kind) = files.resolve(&shown, &rel).await?;
            return match kind {
                archive::Kind::Missing => Err(Error::NotFound(shown)),
                _ => Ok(path),
            };
        }
        let (_, rel) = self.beneath(path).await?;
        Ok(self.root.join(rel))
    }

    async fn list_directory(&self, path: &Path, depth: usize) -> Result<Vec<DirEntry>, Error> {
        if let Some(files) = self.remote_files().await? {
            return self.list_remote(&files, path, depth).await;
        }
        let (shown, _) = self.beneath(path).await?;
        self.files.list_directory(&shown, depth).await
    }

    async fn git_repository_possible(&self) -> bool {
        self.address.is_local() && self.files.git_repository_possible().await
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
        let marker = format!("{}{n}", self.marker);
        let Some(control) = &live.control else {
            let (process, stdout, stderr, control) = self
                .start_remote(live, n, &self.script(&cwd, request.command, &marker), None)
                .await?;
            let child = Child::new(process, Some(stdout), Some(stderr));
            return self
                .finish(live, child, control, request, cancel, output, started)
                .await;
        };
        let dir = control.path();
        let files = CommandFiles {
            paths: [
                dir.join(format!("{n}.sh")),
                dir.join(format!("{n}.out")),
                dir.join(format!("{n}.err")),
            ],
        };
        let [script, out, err] = &files.paths;
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
        let (_group, process, control) = live.worker.start(n).await.map_err(|why| {
            Error::Spawn(std::io::Error::other(format!(
                "cannot start the command in the session's container: {why}"
            )))
        })?;
        let child = Child::new(process, Some(stdout), Some(stderr));
        let result = self
            .finish(live, child, control, request, cancel, output, started)
            .await;
        drop(files);
        result
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
            self.forget(&live.engine, &live.name).await;
            tracing::info!(session = %self.session, "session container removed");
        }
    }

    async fn grep(&self, mut options: GrepOptions) -> Result<String, Error> {
        if let Some(files) = self.remote_files().await? {
            return self.grep_remote(&files, options).await;
        }
        let (shown, _) = self.beneath(&options.path).await?;
        options.path = shown;
        self.files.grep(options).await
    }

    async fn glob(&self, pattern: &str, base: &Path) -> Result<Vec<String>, Error> {
        if let Some(files) = self.remote_files().await? {
            return self.glob_remote(&files, pattern, base).await;
        }
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
            let (host, address) = (self.host.clone(), self.address.clone());
            runtime.spawn(async move {
                if live.engine.remove(&live.name).await {
                    host.record
                        .remove(|e| e.name == live.name && e.engine == address);
                }
            });
        }
    }
}
