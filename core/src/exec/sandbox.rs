//! What a session's work may write and reach: the [`SandboxPolicy`] a tool call runs under,
//! the path rules file tools are held to, the Landlock ruleset commands are held to, and
//! [`Sandboxed`], the environment wrapper that applies both to one call.
//!
//! Commands are restricted by the kernel: the ruleset is built in the daemon (where errors can
//! be reported) and applied in the child between `fork` and `exec`, so the daemon itself is
//! never restricted. Every path may be read and executed; writes are allowed only beneath the
//! policy's writable roots and on a few devices (`/dev/null` and kin) that commands need; with
//! the network off, TCP `connect` and `bind` are refused (Landlock ABI 4). Where the kernel
//! cannot enforce all of that, a sandboxed command is refused, never run unrestricted.
//!
//! File tools are held to the same roots by [`SandboxPolicy::check_write`]: the real path a
//! write would reach (symlinks and `..` resolved through the deepest existing ancestor) must
//! lie beneath a writable root, which names the root and the path below it; the environment
//! then opens that path beneath the root in one step (`files.rs`), so the check by name only
//! picks the root and words the refusal, and a symlink swapped in after it cannot carry the
//! write out.

use super::{
    DirEntry, Error, ExecRequest, ExecResult, ExecutionEnvironment, GrepOptions, OutputSink,
};
use agentd_proto::{SandboxMode, SessionConfig};
use async_trait::async_trait;
use std::path::{Component, Path, PathBuf};
use tokio_util::sync::CancellationToken;

#[cfg(target_os = "linux")]
mod namespace;
#[cfg(target_os = "linux")]
pub(crate) use namespace::Namespaces;

/// Elsewhere than Linux there are no namespaces to join (and no Landlock: sandboxed commands
/// are refused).
#[cfg(not(target_os = "linux"))]
pub(crate) enum Namespaces {}

#[cfg(not(target_os = "linux"))]
impl Namespaces {
    pub(crate) async fn build(_: &SandboxPolicy, _: &[PathBuf]) -> Result<Self, String> {
        Err("namespaces are Linux's".into())
    }

    pub(crate) fn policy(&self) -> &SandboxPolicy {
        match *self {}
    }

    pub(crate) fn hidden(&self) -> &[PathBuf] {
        match *self {}
    }
}

/// Devices every sandboxed command may write: output sinks and terminals. Missing ones are
/// skipped.
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// The restrictions one tool call runs under. `sandbox = "off"` has none (no policy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    mode: SandboxMode,
    /// Real (canonical) directories beneath which writes are allowed.
    writable: Vec<PathBuf>,
    network: bool,
}

impl SandboxPolicy {
    /// The policy of a session with `config` whose tools run in `env` (its working
    /// directory, and its temp dir for commands); `None` when the sandbox is off. Extra roots
    /// that do not exist are left out (nothing could be written beneath them anyway).
    pub fn new(
        config: &SessionConfig,
        env: &dyn ExecutionEnvironment,
    ) -> Result<Option<Self>, Error> {
        if config.sandbox == SandboxMode::Off {
            return Ok(None);
        }
        let real = |p: &Path| std::fs::canonicalize(p).map_err(|e| Error::io(p, e));
        let mut writable = vec![real(&env.temp_dir()?)?];
        if config.sandbox == SandboxMode::WorkspaceWrite {
            writable.push(real(env.working_directory())?);
            writable.extend(
                config
                    .sandbox_writable_roots
                    .iter()
                    .filter_map(|r| std::fs::canonicalize(r).ok()),
            );
        }
        Ok(Some(Self {
            mode: config.sandbox,
            writable,
            network: config.sandbox_network,
        }))
    }

    /// The policy of the daemon's own look at a workspace (the git snapshot): nothing
    /// writable, no network, whatever the session's sandbox. The same for every session.
    pub fn report() -> Self {
        Self {
            mode: SandboxMode::ReadOnly,
            writable: Vec::new(),
            network: false,
        }
    }

    /// The policy the namespaces are built for: this one with the temp dir's parent (the
    /// directory holding every session's temp dir) writable in place of the temp dir, so
    /// that the sessions of one workspace under one policy share one set, built once. Each
    /// command's Landlock ruleset, built from the policy itself, still holds its writes to
    /// its own temp dir.
    pub(crate) fn mounts(&self) -> Self {
        let mut mounts = self.clone();
        if let Some(temp) = mounts.writable.first_mut()
            && let Some(parent) = temp.parent()
        {
            *temp = parent.to_owned();
        }
        mounts
    }

    /// `read_only` or `workspace_write`.
    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    /// The real directories beneath which writes are allowed; the temp dir first (a report's
    /// policy has none).
    pub fn writable_roots(&self) -> &[PathBuf] {
        &self.writable
    }

    /// The commands' own temp dir (`TMPDIR`); `None` for a report's policy.
    pub fn temp_dir(&self) -> Option<&Path> {
        self.writable.first().map(PathBuf::as_path)
    }

    /// Whether commands may open TCP connections and listen.
    pub fn network(&self) -> bool {
        self.network
    }

    /// One line for the model: what this sandbox lets commands do.
    pub fn describe(&self) -> String {
        let roots: Vec<String> = self
            .writable
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        format!(
            "sandbox {}: writes only under {}; network {}",
            self.mode.as_str(),
            roots.join(", "),
            if self.network { "on" } else { "off" }
        )
    }

    /// Where a write to `path` (absolute) goes, when the real path it reaches now lies
    /// beneath a writable root: that root and the real path. The write must be opened
    /// beneath the root (a later swap can change where the name leads).
    pub(crate) fn check_write(&self, path: &Path) -> Result<Beneath, Error> {
        self.inside(path, real_path(path, true)?)
    }

    /// As [`check_write`](Self::check_write) for removing `path`: a symlink itself is
    /// removed, so only its directory is resolved.
    pub(crate) fn check_remove(&self, path: &Path) -> Result<Beneath, Error> {
        self.inside(path, real_path(path, false)?)
    }

    fn inside(&self, asked: &Path, real: PathBuf) -> Result<Beneath, Error> {
        // The deepest root holding it: the fewest directories to open beneath it.
        let root = self
            .writable
            .iter()
            .filter(|root| real.starts_with(root))
            .max_by_key(|root| root.components().count());
        if let Some(root) = root {
            return Ok(Beneath {
                root: root.clone(),
                real,
            });
        }
        let reached = if real == asked {
            String::new()
        } else {
            format!(" (it resolves to {})", real.display())
        };
        Err(Error::NotAllowed(format!(
            "refused by the sandbox: {}{reached} is outside the writable roots ({})",
            asked.display(),
            self.describe()
        )))
    }
}

/// Where a write or removal under a policy goes: beneath which writable root, at which real
/// path (at the time of the check).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Beneath {
    /// The writable root (a real path).
    pub(crate) root: PathBuf,
    /// The real path, beneath `root`.
    pub(crate) real: PathBuf,
}

impl Beneath {
    /// The path below the root.
    pub(crate) fn relative(&self) -> &Path {
        self.real.strip_prefix(&self.root).unwrap_or(&self.real)
    }
}

/// Where `path` (absolute) really leads: the real path of its deepest existing ancestor
/// followed by the components that do not exist yet (which can hold neither symlinks nor
/// `..`). With `follow_last` false an existing last component is not resolved (a removal
/// acts on the link itself).
pub(super) fn real_path(path: &Path, follow_last: bool) -> Result<PathBuf, Error> {
    if !follow_last {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(Error::NotAllowed(format!(
                "{} does not name a file",
                path.display()
            )));
        };
        return Ok(real_path(parent, true)?.join(name));
    }
    let components: Vec<Component<'_>> = path.components().collect();
    let mut existing = components.len();
    let base = loop {
        let prefix: PathBuf = components[..existing].iter().collect();
        match std::fs::symlink_metadata(&prefix) {
            Ok(_) => break prefix,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && existing > 1 => existing -= 1,
            Err(e) => return Err(Error::io(&prefix, e)),
        }
    };
    let mut real = std::fs::canonicalize(&base).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::NotAllowed(format!(
            "{} is a symbolic link to a path that does not exist",
            base.display()
        )),
        _ => Error::io(&base, e),
    })?;
    for component in &components[existing..] {
        match component {
            Component::Normal(name) => real.push(name),
            Component::CurDir => {}
            _ => {
                return Err(Error::NotAllowed(format!(
                    "{}: `..` after {}, which does not exist",
                    path.display(),
                    real.display()
                )));
            }
        }
    }
    Ok(real)
}

/// A Landlock ruleset the kernel enforces in full (built with every feature a hard
/// requirement), for a child to apply to itself before `exec` ([`Restriction::apply`]).
#[cfg(target_os = "linux")]
pub(crate) struct Restriction(std::os::fd::OwnedFd);

/// The Landlock ruleset for `policy`, built and checked in the daemon; the child applies it
/// with [`Restriction::apply`]. Fails when the kernel cannot enforce all of it.
#[cfg(target_os = "linux")]
pub(crate) fn ruleset(policy: &SandboxPolicy) -> Result<Restriction, Error> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
        RulesetCreatedAttr, Scope, path_beneath_rules,
    };
    // ABI 3 covers every write (truncate included). IoctlDev (ABI 5) is not handled, so
    // terminals keep working; ABI 4's TCP rules are asked for only with the network off.
    let fs = ABI::V3;
    let build = || -> Result<landlock::RulesetCreated, landlock::RulesetError> {
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(fs))?;
        if !policy.network {
            ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
        }
        // Abstract Unix sockets (X11's, some session buses') take input that runs programs
        // outside the sandbox, and the network switch is about the network: closed in every
        // mode where the kernel can (ABI 6, Linux 6.12); with the network off the network
        // namespace closes them too.
        if landlock_abi() >= 6 {
            ruleset = ruleset.scope(Scope::AbstractUnixSocket)?;
        }
        ruleset
            .create()?
            .add_rules(path_beneath_rules(["/"], AccessFs::from_read(fs)))?
            .add_rules(path_beneath_rules(WRITABLE_DEVICES, AccessFs::from_all(fs)))?
            .add_rules(path_beneath_rules(&policy.writable, AccessFs::from_all(fs)))
    };
    let refused = |why: &dyn std::fmt::Display| {
        Error::NotAllowed(format!(
            "cannot start the command in its sandbox: this kernel cannot enforce it with \
             Landlock ({why}); the command was not run. Landlock ABI 3 is needed (4 with \
             sandbox_network = false), or set sandbox = \"off\""
        ))
    };
    let created = build().map_err(|e| refused(&e))?;
    Option::<std::os::fd::OwnedFd>::from(created)
        .map(Restriction)
        .ok_or_else(|| refused(&"the kernel offers no Landlock"))
}

/// The Landlock ABI this kernel offers (0: none), asked once.
#[cfg(target_os = "linux")]
fn landlock_abi() -> i64 {
    static ABI: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *ABI.get_or_init(|| {
        const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
        // SAFETY: with a null attribute, size 0 and the VERSION flag the call only reports
        // the ABI version (or fails); it creates nothing.
        let version = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        version.max(0)
    })
}

#[cfg(target_os = "linux")]
impl Restriction {
    /// Restricts the calling process (a child about to `exec`): `no_new_privs`, then the
    /// ruleset. Makes only system calls, as code between the spawn and the `exec` must; a
    /// failure of either is an error, so the command never runs unrestricted.
    pub(crate) fn apply(&self) -> Result<(), nix::errno::Errno> {
        use nix::errno::Errno;
        use std::os::fd::AsRawFd;
        // SAFETY: prctl and landlock_restrict_self with valid arguments, on a ruleset
        // descriptor this keeps open.
        unsafe {
            Errno::result(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
            Errno::result(libc::syscall(
                libc::SYS_landlock_restrict_self,
                self.0.as_raw_fd(),
                0u32,
            ))?;
        }
        Ok(())
    }
}

/// An environment that runs one tool call under a policy: file writes and removals are
/// held to its roots (opened beneath them, see [`ExecutionEnvironment::write_file_confined`]),
/// and commands get it in their [`ExecRequest`]. Without a policy it passes everything
/// through (sandbox off, or a call allowed to run outside it). Every file operation ends at
/// once with [`Error::Cancelled`] when the call's token fires: what it was doing on the
/// blocking pool is abandoned, so no file, however strange, holds an abort.
pub(crate) struct Sandboxed<'a> {
    inner: &'a dyn ExecutionEnvironment,
    policy: Option<&'a SandboxPolicy>,
    cancel: &'a CancellationToken,
}

impl<'a> Sandboxed<'a> {
    /// `inner` under `policy`, for a call cancelled by `cancel`.
    pub(crate) fn new(
        inner: &'a dyn ExecutionEnvironment,
        policy: Option<&'a SandboxPolicy>,
        cancel: &'a CancellationToken,
    ) -> Self {
        Self {
            inner,
            policy,
            cancel,
        }
    }

    /// `op`, unless the call is cancelled first.
    async fn cancellable<T>(
        &self,
        op: impl std::future::Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(Error::Cancelled),
            result = op => result,
        }
    }
}

#[async_trait]
impl ExecutionEnvironment for Sandboxed<'_> {
    fn working_directory(&self) -> &Path {
        self.inner.working_directory()
    }
    fn platform(&self) -> &str {
        self.inner.platform()
    }
    fn os_version(&self) -> String {
        self.inner.os_version()
    }
    fn temp_dir(&self) -> Result<PathBuf, Error> {
        self.inner.temp_dir()
    }
    async fn read_file(&self, path: &Path) -> Result<Vec<u8>, Error> {
        self.cancellable(self.inner.read_file(path)).await
    }
    async fn write_file(&self, path: &Path, content: &[u8]) -> Result<(), Error> {
        let path = self.inner.resolve(path);
        self.cancellable(async {
            match self.policy {
                Some(policy) => self.inner.write_file_confined(&path, content, policy).await,
                None => self.inner.write_file(&path, content).await,
            }
        })
        .await
    }
    async fn remove_file(&self, path: &Path) -> Result<(), Error> {
        let path = self.inner.resolve(path);
        self.cancellable(async {
            match self.policy {
                Some(policy) => self.inner.remove_file_confined(&path, policy).await,
                None => self.inner.remove_file(&path).await,
            }
        })
        .await
    }
    async fn file_exists(&self, path: &Path) -> bool {
        self.cancellable(async { Ok(self.inner.file_exists(path).await) })
            .await
            .unwrap_or(false)
    }
    async fn real_path(&self, path: &Path) -> Result<PathBuf, Error> {
        self.cancellable(self.inner.real_path(path)).await
    }
    async fn list_directory(&self, path: &Path, depth: usize) -> Result<Vec<DirEntry>, Error> {
        self.cancellable(self.inner.list_directory(path, depth))
            .await
    }
    async fn exec_command(
        &self,
        request: ExecRequest<'_>,
        output: OutputSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<ExecResult, Error> {
        let request = ExecRequest {
            sandbox: self.policy,
            ..request
        };
        self.inner.exec_command(request, output, cancel).await
    }
    async fn terminate_all(&self) {
        self.inner.terminate_all().await
    }
    async fn grep(&self, options: GrepOptions) -> Result<String, Error> {
        self.cancellable(self.inner.grep(options)).await
    }
    async fn glob(&self, pattern: &str, base: &Path) -> Result<Vec<String>, Error> {
        self.cancellable(self.inner.glob(pattern, base)).await
    }
}

#[cfg(test)]
mod tests;
