//! Every session of the daemon, by id. Creating a session resolves its provider, model and
//! profile from the daemon's configuration. Sessions stored by an earlier run are listed from
//! their records and loaded on first use; loaded sessions that sit idle and unwatched are
//! unloaded again, so memory follows the sessions in use, not the sessions that exist.
//!
//! Loading and unloading happen outside the map's locks: the slot is marked busy, the disk
//! work runs in its own task, and lookups of a busy slot wait for it.
//!
//! A stored session whose record cannot be read stays in the map as *damaged*: listed with
//! the reason, refused with `session_damaged` by every lookup, never loaded or written, and
//! removed only by [`Registry::delete`].
//!
//! The config new sessions are made from ([`Current`]) can change while the daemon runs: a
//! reload (`daemon/reload`, SIGHUP) replaces it, and every create looks at the credentials
//! file first, so a key stored by `agentctl login` applies from the next session on. A running
//! session keeps the config and providers it was made with.

use super::{Error, History, Restored, Session, SessionSpec, Template};
use crate::config::{Config, Price, ProviderConfig};
use crate::exec::{
    EnvFilter, EnvPolicy, ExecutionEnvironment, LocalExecutionEnvironment, LocalOptions, ProcessId,
    ProcessLedger, ProtectedPaths, ReadOnly, SshConnections, SshExecutionEnvironment, SshTarget,
};
use crate::llm::{ProviderFactory, ProviderSet, RetryPolicy};
use crate::profile::Profile;
use crate::store::{ParentLink, ProcessRecords, RecordedGroup, SessionFiles, SessionRecord, Store};
use crate::tools::SpawnRequest;
use agentd_proto::{
    ConfigPatch, CreateParams, DaemonEvent, DamagedSession, EntryId, Environment, ForkOrigin,
    ProviderKind, RestartKey, SandboxMode, SessionId, SessionSnapshot, SessionState,
    SessionSummary, SshEnvironment,
};
use dashmap::DashMap;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Set when a busy slot's load or unload is over: `Some(Err)` if a load failed.
type Done = watch::Receiver<Option<Result<(), Error>>>;

/// A session as the registry holds it.
enum Slot {
    /// Stored and not loaded: only its record is in memory.
    Stored(Box<SessionRecord>),
    /// Being loaded or unloaded; look again when it is done.
    Busy(Box<SessionRecord>, Done),
    /// Loaded and running.
    Live(Arc<Session>),
    /// Stored with a record that cannot be read: nothing but a delete touches it.
    Damaged(Box<DamagedSession>),
}

/// What new sessions are made from: the config (with the credentials file's keys applied),
/// a client for every usable provider, and the prices. Replaced whole, never changed.
pub(crate) struct Current {
    /// The config.
    pub(crate) config: Arc<Config>,
    providers: ProviderSet,
    prices: Arc<BTreeMap<String, Price>>,
}

impl Current {
    fn new(factory: &ProviderFactory, config: Config) -> Self {
        let providers = factory.build(&config);
        Self {
            prices: Arc::new(config.pricing.clone()),
            config: Arc::new(config),
            providers,
        }
    }
}

/// The daemon's sessions.
pub struct Registry {
    sessions: DashMap<SessionId, Slot>,
    store: Option<Store>,
    /// The config for new sessions; the lock is held only to clone or swap the `Arc`.
    current: RwLock<Arc<Current>>,
    /// Builds providers; they share its HTTP client (one connection pool).
    factory: ProviderFactory,
    daemon_events: broadcast::Sender<DaemonEvent>,
    /// Session tasks and the registry's own background work, awaited at shutdown.
    tasks: TaskTracker,
    /// The root of the cancellation tree: daemon → session → turn → tool call.
    cancel: CancellationToken,
    retry: RetryPolicy,
    /// Handed to sessions, which spawn and find their subagents through it.
    me: Weak<Registry>,
    /// Where every environment records its process groups (the store's `groups.json`), so
    /// the next start ends what a crash left; `None` without a store.
    ledger: Option<Arc<dyn ProcessLedger>>,
    /// The SSH connections of remote sessions, one per host, shared by the sessions on it.
    ssh: SshConnections,
    /// agentd's own files, which no environment's file operations open.
    protected: Arc<ProtectedPaths>,
    /// What sandboxed commands must not see: see [`hidden_from_commands`].
    hidden: Arc<[PathBuf]>,
}

/// agentd's own directories and files (`protected`: runtime directory and socket, state,
/// config and credentials) and the sockets of the user's services that act on request (the
/// runtime directory with the session bus and gpg-agent, ssh-agent, X11, tmux), which
/// sandboxed commands find empty: through them a command could run a program outside its
/// sandbox or use the user's keys.
fn hidden_from_commands(protected: &ProtectedPaths) -> Arc<[PathBuf]> {
    let uid = nix::unistd::geteuid().as_raw();
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let services = [
        Some(PathBuf::from("/tmp/.X11-unix")),
        Some(
            var("TMUX_TMPDIR")
                .unwrap_or_else(|| PathBuf::from("/tmp"))
                .join(format!("tmux-{uid}")),
        ),
        var("XDG_RUNTIME_DIR"),
        var("SSH_AUTH_SOCK"),
    ];
    let paths = protected
        .paths()
        .iter()
        .cloned()
        .chain(services.into_iter().flatten().filter(|p| p.is_absolute()));
    // Real paths, and none beneath another (it could not be mounted over once its parent is
    // an empty read-only tmpfs).
    ProtectedPaths::new(paths, None).paths().into()
}

/// The real path of a subagent's working directory `cwd` (`dir` as the model gave it,
/// beneath the parent's directory `parent`): opened as a directory and read back from the
/// open descriptor, so the check and the child see the same directory. Under a sandbox it
/// must lie inside the parent's writable roots (its directory, plus `sandbox_writable_roots`
/// in `workspace_write`), so a symlink cannot send the child, and its writes, elsewhere; it
/// may never be one of agentd's own directories.
fn child_directory(
    dir: &str,
    cwd: &Path,
    parent: &Path,
    config: &agentd_proto::SessionConfig,
    protected: &ProtectedPaths,
) -> Result<PathBuf, Error> {
    let real = crate::exec::opened_real_path(cwd, true, protected).map_err(|e| {
        Error::InvalidParams(format!(
            "working_dir {dir:?} must be an existing subdirectory of {}: {e}",
            parent.display()
        ))
    })?;
    let mut roots = vec![parent.to_owned()];
    match config.sandbox {
        SandboxMode::Off => return Ok(real),
        SandboxMode::ReadOnly => {}
        SandboxMode::WorkspaceWrite => roots.extend(config.sandbox_writable_roots.clone()),
    }
    let roots: Vec<PathBuf> = roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .collect();
    if roots.iter().any(|root| real.starts_with(root)) {
        return Ok(real);
    }
    let shown: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    Err(Error::InvalidParams(format!(
        "working_dir {dir:?} leads to {}, outside the writable roots of this session ({}); \
         a subagent works only inside them",
        real.display(),
        shown.join(", ")
    )))
}

/// The store's group records as environments see them.
struct Ledger(ProcessRecords);

impl ProcessLedger for Ledger {
    fn started(&self, group: ProcessId) {
        self.0.add(recorded(group));
    }
    fn ended(&self, group: ProcessId) {
        self.0.remove(recorded(group));
    }
}

fn recorded(group: ProcessId) -> RecordedGroup {
    RecordedGroup {
        pgid: group.pid,
        start_time: group.start_time,
    }
}

/// What a new session is made of besides its id.
struct NewSession {
    template: Template,
    title: Option<String>,
    history: History,
    forked_from: Option<ForkOrigin>,
    parent: Option<ParentLink>,
}

fn storage(e: crate::store::Error) -> Error {
    Error::Storage(e.to_string())
}

fn crashed(e: tokio::task::JoinError) -> Error {
    Error::Internal(format!("a background task failed: {e}"))
}

impl Registry {
    /// A registry using `config` for new sessions, holding the sessions `store` has (none:
    /// sessions live in memory only), whose environments never let a tool open `protected`.
    /// Must be called inside a tokio runtime: it starts the recovery of sessions that were
    /// processing when the daemon stopped, and the unloading of idle ones.
    pub fn new(config: Config, store: Option<Store>, protected: ProtectedPaths) -> Arc<Self> {
        let factory = ProviderFactory::default();
        let evict_idle_after = config.evict_idle_after;
        let hidden = hidden_from_commands(&protected);
        let current = RwLock::new(Arc::new(Current::new(&factory, config)));
        let ledger = store.as_ref().and_then(|s| {
            s.process_records(crate::exec::run_id())
                .map(|r| Arc::new(Ledger(r)) as Arc<dyn ProcessLedger>)
                .map_err(|e| tracing::warn!("cannot record process groups: {e}"))
                .ok()
        });
        let registry = Arc::new_cyclic(|me| Self {
            sessions: DashMap::new(),
            store,
            ledger,
            current,
            factory,
            daemon_events: broadcast::channel(256).0,
            tasks: TaskTracker::new(),
            cancel: CancellationToken::new(),
            retry: RetryPolicy::default(),
            me: me.clone(),
            ssh: SshConnections::new(
                agentd_proto::socket::runtime_dir(nix::unistd::geteuid().as_raw()).join("ssh"),
            ),
            protected: Arc::new(protected),
            hidden,
        });
        let interrupted = registry.load_stored();
        let me = registry.clone();
        registry.tasks.spawn(async move {
            for id in interrupted {
                if let Err(e) = me.get(&id).await {
                    tracing::error!(session = %id, "cannot load an interrupted session: {e}");
                }
            }
        });
        if let Some(after) = evict_idle_after {
            registry
                .tasks
                .spawn(evict_idle(Arc::downgrade(&registry), after));
        }
        registry
    }

    /// Lists the stored sessions; returns those that were processing when the daemon stopped.
    fn load_stored(&self) -> Vec<SessionId> {
        let Some(store) = &self.store else {
            return Vec::new();
        };
        let loaded = match store.load() {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("cannot list stored sessions: {e}");
                return Vec::new();
            }
        };
        for damaged in loaded.damaged {
            tracing::warn!(
                session = %damaged.session_id,
                "{}: {}; the session cannot be loaded (session/delete removes it)",
                damaged.path,
                damaged.reason
            );
            self.sessions
                .insert(damaged.session_id.clone(), Slot::Damaged(Box::new(damaged)));
        }
        let mut interrupted = Vec::new();
        for record in loaded.records {
            if record.state.is_working() || record.open {
                interrupted.push(record.id.clone());
            }
            self.sessions
                .insert(record.id.clone(), Slot::Stored(Box::new(record)));
        }
        interrupted
    }

    /// Which variables commands inherit (the daemon's own locally, the remote's over ssh).
    fn env_filter(config: &Config) -> EnvFilter {
        let tools = &config.tools;
        EnvFilter::new(EnvPolicy::InheritAll).with(
            &tools.env_deny,
            &tools.env_allow,
            config.key_variables(),
        )
    }

    /// Where an ssh environment connects: the client's values over the `[hosts.NAME]`
    /// entry it names, over the ssh configuration.
    fn ssh_target(config: &Config, ssh: &SshEnvironment) -> SshTarget {
        let host = config.hosts.get(&ssh.host).cloned().unwrap_or_default();
        SshTarget {
            label: ssh.host.clone(),
            destination: host.hostname.unwrap_or_else(|| ssh.host.clone()),
            user: ssh.user.clone().or(host.user),
            port: ssh.port.or(host.port),
            identity_file: ssh
                .identity_file
                .as_ref()
                .map(PathBuf::from)
                .or(host.identity_file),
            ssh_config: host.ssh_config,
            known_hosts: host.known_hosts,
        }
    }

    fn ssh_environment(
        &self,
        config: &Config,
        ssh: &SshEnvironment,
        cwd: &Path,
    ) -> Result<SshExecutionEnvironment, Error> {
        let timeout = config
            .hosts
            .get(&ssh.host)
            .map_or(crate::config::DEFAULT_FILE_TIMEOUT, |h| h.file_timeout());
        SshExecutionEnvironment::new(
            &self.ssh,
            &Self::ssh_target(config, ssh),
            cwd.to_owned(),
            Self::env_filter(config),
            timeout,
        )
        .map_err(|e| Error::EnvironmentUnavailable(e.to_string()))
    }

    fn environment(
        &self,
        config: &Config,
        template: &Template,
    ) -> Result<Arc<dyn ExecutionEnvironment>, Error> {
        let cwd = template.cwd.clone();
        Ok(match (&template.environment, template.read_only) {
            (Environment::Local, read_only) => {
                let local = LocalExecutionEnvironment::with_options(
                    cwd,
                    LocalOptions {
                        env: Self::env_filter(config),
                        ledger: self.ledger.clone(),
                        protected: self.protected.clone(),
                        hidden: self.hidden.clone(),
                    },
                );
                if read_only {
                    Arc::new(ReadOnly(local))
                } else {
                    Arc::new(local)
                }
            }
            (Environment::Ssh(ssh), false) => Arc::new(self.ssh_environment(config, ssh, &cwd)?),
            (Environment::Ssh(ssh), true) => {
                Arc::new(ReadOnly(self.ssh_environment(config, ssh, &cwd)?))
            }
        })
    }

    /// A spec for session `id` from its parts, with the providers of `current`.
    fn spec(
        &self,
        current: &Current,
        id: SessionId,
        new: NewSession,
        files: Option<SessionFiles>,
    ) -> Result<SessionSpec, Error> {
        let NewSession {
            template,
            title,
            history,
            forked_from,
            parent,
        } = new;
        let env = self.environment(&current.config, &template)?;
        // An ssh environment's directory is the session's (a subagent's may be deeper).
        let environment = match template.environment {
            Environment::Local => Environment::Local,
            Environment::Ssh(ssh) => Environment::Ssh(SshEnvironment {
                cwd: template.cwd.display().to_string(),
                ..ssh
            }),
        };
        Ok(SessionSpec {
            id,
            env,
            environment,
            cwd: template.cwd,
            title,
            profile: template.profile,
            providers: current.providers.clone(),
            config: template.config,
            instructions: template.instructions,
            retry: self.retry.clone(),
            prices: current.prices.clone(),
            read_only: template.read_only,
            files,
            history,
            forked_from,
            restored: None,
            parent,
            registry: Some(self.me.clone()),
            cancel: self.cancel.child_token(),
        })
    }

    /// Creates the session's directory (when the registry has a store) and starts it with
    /// the providers of `current`.
    async fn start(&self, current: &Current, new: NewSession) -> Result<Arc<Session>, Error> {
        if self.cancel.is_cancelled() {
            return Err(Error::ShuttingDown);
        }
        let id = SessionId(uuid::Uuid::new_v4().to_string());
        let files = match &self.store {
            Some(store) => {
                let (store, id) = (store.clone(), id.clone());
                Some(
                    tokio::task::spawn_blocking(move || store.create(&id))
                        .await
                        .map_err(crashed)?
                        .map_err(storage)?,
                )
            }
            None => None,
        };
        let spec = self.spec(current, id.clone(), new, files)?;
        let session = Session::spawn(spec, Some(self.daemon_events.clone()), &self.tasks);
        // A session the client is told about is stored, record and all.
        session.saved().await;
        self.sessions
            .insert(id.clone(), Slot::Live(session.clone()));
        let _ = self
            .daemon_events
            .send(DaemonEvent::SessionCreated { session_id: id });
        Ok(session)
    }

    /// Loads a stored session: its journal (off the async workers), then its task.
    async fn restore(&self, mut record: SessionRecord) -> Result<Arc<Session>, Error> {
        let store = self
            .store
            .as_ref()
            .ok_or_else(|| Error::NotFound(record.id.clone()))?;
        let files = store.files(&record.id);
        let (files, loaded) = tokio::task::spawn_blocking(move || {
            let loaded = files.load();
            (files, loaded)
        })
        .await
        .map_err(crashed)?;
        let loaded = loaded.map_err(storage)?;
        let id = record.id.clone();
        let mut warnings = loaded.warnings;
        let current = self.current();
        let profile = Profile::stored(&record.profile).unwrap_or_else(|e| {
            warnings.push(format!("{e} (the provider's profile is used)"));
            let kind = current
                .config
                .providers
                .get(&record.config.provider)
                .map_or(ProviderKind::Openai, |p| p.kind);
            Profile::for_provider(kind)
        });
        for w in &warnings {
            tracing::warn!(session = %id, "{w}");
        }
        // The journal is newer than the record wherever they differ.
        if let Some(usage) = loaded.usage {
            record.usage = usage;
        }
        if let Some(queue) = loaded.queue {
            record.queue = queue;
        }
        let interrupted = match loaded.state {
            Some(state) => state.is_working(),
            None => record.state.is_working(),
        };
        let template = Template {
            cwd: record.cwd.clone(),
            profile,
            config: record.config.clone(),
            instructions: record.instructions.clone(),
            read_only: record.read_only,
            environment: record.environment.clone(),
        };
        let new = NewSession {
            template,
            title: record.title.clone(),
            history: History::restore(loaded.entries, record.leaf.clone(), record.history_len),
            forked_from: record.forked_from.clone(),
            parent: record.parent.clone(),
        };
        let mut spec = self.spec(&current, id, new, Some(files))?;
        spec.restored = Some(Restored {
            last_seq: loaded.last_seq,
            unclean: record.open || loaded.repaired,
            interrupted,
            reader: loaded.reader,
            warnings,
            record,
        });
        Ok(Session::spawn(
            spec,
            Some(self.daemon_events.clone()),
            &self.tasks,
        ))
    }

    /// The store's sessions directory, if sessions are stored.
    pub fn store_dir(&self) -> Option<&std::path::Path> {
        self.store.as_ref().map(Store::dir)
    }

    /// The config new sessions are made from now.
    pub(crate) fn current(&self) -> Arc<Current> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The daemon configuration now.
    pub fn config(&self) -> Arc<Config> {
        self.current().config.clone()
    }

    /// The config a new session would be made from now: [`Registry::config`] with the
    /// credentials file as it is now; an unreadable credentials file leaves the keys as they
    /// were (the next create fails with its reason).
    pub async fn config_with_credentials(&self) -> Arc<Config> {
        match self.current_with_credentials().await {
            Ok(current) => current.config.clone(),
            Err(_) => self.config(),
        }
    }

    /// Replaces `seen` with `next` unless something else replaced it first; `false` then.
    fn swap(&self, seen: &Arc<Current>, next: Arc<Current>) -> bool {
        let mut slot = self.current.write().unwrap_or_else(|e| e.into_inner());
        if !Arc::ptr_eq(&slot, seen) {
            return false;
        }
        *slot = next;
        true
    }

    /// The config for a new session, with the credentials file as it is now: a key stored or
    /// removed by `agentctl login`/`logout` since the last look applies from here on. The file
    /// is read off the async workers, and no lock is held while it is.
    pub(crate) async fn current_with_credentials(&self) -> Result<Arc<Current>, Error> {
        let Some(path) = self.current().config.credentials_path.clone() else {
            return Ok(self.current());
        };
        let creds = tokio::task::spawn_blocking(move || crate::config::read_credentials(&path))
            .await
            .map_err(crashed)?
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        loop {
            let seen = self.current();
            if seen.config.credentials == creds {
                return Ok(seen);
            }
            let next = Arc::new(Current::new(
                &self.factory,
                seen.config.with_credentials(creds.clone()),
            ));
            if self.swap(&seen, next.clone()) {
                tracing::info!("the credentials file changed; new sessions use its keys");
                return Ok(next);
            }
        }
    }

    /// Reads the config and credentials files again; new sessions get the result, running
    /// ones keep what they have. On an error the config in use stays. Returns the new config
    /// and the keys that changed but apply only at the next start.
    pub async fn reload(&self) -> Result<(Arc<Config>, Vec<RestartKey>), crate::config::Error> {
        let old = self.current().config.clone();
        let loaded = {
            let old = old.clone();
            tokio::task::spawn_blocking(move || old.reload())
                .await
                .map_err(|e| crate::config::Error::Invalid(format!("the reload crashed: {e}")))?
        }?;
        let mut restart_needed = Vec::new();
        if loaded.server != old.server {
            restart_needed.push(RestartKey::Server);
        }
        if loaded.log_level != old.log_level {
            restart_needed.push(RestartKey::LogLevel);
        }
        if loaded.evict_idle_after != old.evict_idle_after {
            restart_needed.push(RestartKey::EvictIdleSecs);
        }
        let next = Arc::new(Current::new(&self.factory, loaded));
        // A reload wins over whatever replaced the config meanwhile: it read every file last.
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = next.clone();
        Ok((next.config.clone(), restart_needed))
    }

    /// Daemon-wide notifications (session created, state changed).
    pub fn daemon_events(&self) -> broadcast::Receiver<DaemonEvent> {
        self.daemon_events.subscribe()
    }

    /// Creates and starts a session.
    pub async fn create(&self, params: CreateParams) -> Result<Arc<Session>, Error> {
        let current = self.current_with_credentials().await?;
        let config = &current.config;
        let cwd = match &params.environment {
            Environment::Local => {
                let cwd = PathBuf::from(&params.cwd);
                if params.cwd.is_empty() {
                    return Err(Error::InvalidConfig(
                        "cwd is missing: a local session needs its working directory".into(),
                    ));
                }
                if !cwd.is_absolute() {
                    return Err(Error::InvalidConfig(format!(
                        "cwd must be an absolute path, got {:?}",
                        params.cwd
                    )));
                }
                if !cwd.is_dir() {
                    return Err(Error::InvalidConfig(format!(
                        "cwd {:?} is not a directory",
                        params.cwd
                    )));
                }
                cwd
            }
            Environment::Ssh(ssh) => self.check_ssh(ssh, &params.cwd)?,
        };
        let provider_name = params
            .provider
            .as_deref()
            .unwrap_or(&config.default_provider);
        usable(config, provider_name)?;
        let profile = match params.profile {
            Some(id) => Profile::named(id),
            None => Profile::for_provider(config.providers[provider_name].kind),
        };
        let mut config = config
            .session_config(provider_name, params.model.as_deref())
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        if let Some(patch) = &params.config {
            if params.read_only && patch.sandbox.is_some_and(|m| m != SandboxMode::ReadOnly) {
                return Err(Error::InvalidConfig(
                    "sandbox: a read-only session's sandbox is always read_only".into(),
                ));
            }
            config.apply(patch);
            crate::config::validate_session_config(&config)
                .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        }
        crate::tools::session_tools(&profile.tools, &config).map_err(Error::InvalidConfig)?;
        // Landlock confines local commands only; a remote session runs unconfined, and says so
        // rather than pretend.
        if matches!(params.environment, Environment::Ssh(_)) {
            let asked = params.config.as_ref().and_then(|p| p.sandbox);
            if params.read_only || asked.is_some_and(|m| m != SandboxMode::Off) {
                return Err(Error::InvalidConfig(
                    "sandbox: an ssh session cannot be sandboxed yet (Landlock confines local commands only),                      so it cannot be read-only either; leave out sandbox and read_only, or use approval mode ask"
                        .into(),
                ));
            }
            config.sandbox = SandboxMode::Off;
        }
        let template = Template {
            cwd,
            profile,
            config,
            instructions: params.instructions,
            read_only: params.read_only,
            environment: params.environment,
        };
        // A remote session is created only once its host answers, its key verified and its
        // directory found; the probe's connection is the one the session goes on using.
        let _probe = match &template.environment {
            Environment::Local => None,
            Environment::Ssh(ssh) => {
                let probe = self.ssh_environment(&current.config, ssh, &template.cwd)?;
                probe
                    .connect()
                    .await
                    .map_err(|e| Error::EnvironmentUnavailable(e.to_string()))?;
                Some(probe)
            }
        };
        self.start(
            &current,
            NewSession {
                template,
                title: params.title,
                history: History::default(),
                forked_from: None,
                parent: None,
            },
        )
        .await
    }

    /// The remote directory of a new ssh session, after checking what can be checked here.
    fn check_ssh(&self, ssh: &SshEnvironment, cwd: &str) -> Result<PathBuf, Error> {
        let bad = |message: String| Err(Error::InvalidConfig(message));
        if ssh.host.is_empty()
            || ssh.host.starts_with('-')
            || ssh.host.contains(char::is_whitespace)
        {
            return bad(format!(
                "environment.host {:?} is not a host name (nor a [hosts] entry)",
                ssh.host
            ));
        }
        if ssh
            .user
            .as_deref()
            .is_some_and(|u| u.is_empty() || u.starts_with('-'))
        {
            return bad(format!(
                "environment.user {:?} is not a user name",
                ssh.user
            ));
        }
        if ssh.port == Some(0) {
            return bad("environment.port must be between 1 and 65535".into());
        }
        if !ssh.cwd.starts_with('/') {
            return bad(format!(
                "environment.cwd must be an absolute path on the remote machine, got {:?}",
                ssh.cwd
            ));
        }
        if !cwd.is_empty() && cwd != ssh.cwd {
            return bad(format!(
                "cwd {cwd:?} differs from environment.cwd {:?}; give the remote directory once, in environment.cwd",
                ssh.cwd
            ));
        }
        Ok(PathBuf::from(&ssh.cwd))
    }

    /// Creates a subagent of the session `parent` (at `depth`) for `request`, not yet
    /// started, within the parent's depth and concurrency limits. The child works on the same
    /// filesystem with its own execution environment, so aborting one session kills only its
    /// own processes.
    pub(crate) async fn spawn_child(
        &self,
        parent: &SessionId,
        depth: u32,
        mut template: Template,
        request: SpawnRequest,
    ) -> Result<Arc<Session>, Error> {
        let config = &template.config;
        if depth + 1 > config.max_subagent_depth {
            return Err(Error::InvalidParams(format!(
                "cannot spawn a subagent: max_subagent_depth is {} and this session is at depth {depth}; do the task yourself",
                config.max_subagent_depth,
            )));
        }
        let working = self
            .children_of(parent)
            .iter()
            .filter(|c| c.state().is_working())
            .count();
        if working >= config.max_concurrent_subagents as usize {
            return Err(Error::InvalidParams(format!(
                "cannot spawn a subagent: {working} are working (max_concurrent_subagents = {}); wait for one first",
                config.max_concurrent_subagents
            )));
        }
        if let Some(dir) = &request.working_dir {
            let path = std::path::Path::new(dir);
            let inside = path.components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            });
            if !inside {
                return Err(Error::InvalidParams(format!(
                    "working_dir {dir:?} must be an existing subdirectory of {}",
                    template.cwd.display()
                )));
            }
            let cwd = template.cwd.join(path);
            // A remote directory is checked by the child's environment when it connects.
            let cwd = if template.environment.is_local() {
                let (config, parent, protected) = (
                    template.config.clone(),
                    template.cwd.clone(),
                    self.protected.clone(),
                );
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || {
                    child_directory(&dir, &cwd, &parent, &config, &protected)
                })
                .await
                .map_err(crashed)??
            } else {
                cwd
            };
            // The child works in a part of its parent's tree and may write where it may.
            let parent_cwd = std::mem::replace(&mut template.cwd, cwd);
            template.config.sandbox_writable_roots.push(parent_cwd);
        }
        if let Some(model) = request.model {
            template.config.model = model;
        }
        template.config.max_turns = request.max_turns.unwrap_or(0);
        let title: String = request.task.chars().take(60).collect();
        let current = self.current_with_credentials().await?;
        self.start(
            &current,
            NewSession {
                template,
                title: Some(format!("subagent: {title}")),
                history: History::default(),
                forked_from: None,
                parent: Some(ParentLink {
                    session_id: parent.clone(),
                    depth: depth + 1,
                }),
            },
        )
        .await
    }

    /// The loaded children of `parent`.
    pub fn children_of(&self, parent: &SessionId) -> Vec<Arc<Session>> {
        self.live()
            .into_iter()
            .filter(|s| s.parent_id() == Some(parent))
            .collect()
    }

    /// A new session whose history is a copy of `id`'s current branch up to `entry` (its
    /// newest entry when `None`), with the same directory, profile and config.
    pub async fn fork(
        &self,
        id: &SessionId,
        entry: Option<EntryId>,
        title: Option<String>,
    ) -> Result<Arc<Session>, Error> {
        let source = self.get(id).await?;
        let branch = match &entry {
            None => source.history().await?,
            Some(e) => source.history_until(e).await?.ok_or_else(|| {
                Error::InvalidParams(format!(
                    "entry {e} is not on session {id}'s current branch (see session/history)"
                ))
            })?,
        };
        let leaf = branch.last().map(|e| e.id.clone());
        let len = branch.len();
        let copied = branch.iter().map(|e| (**e).clone()).collect();
        let current = self.current_with_credentials().await?;
        self.start(
            &current,
            NewSession {
                template: source.template(),
                title: title.or_else(|| source.title().map(str::to_owned)),
                history: History::restore(copied, leaf.clone(), len),
                forked_from: Some(ForkOrigin {
                    session_id: id.clone(),
                    entry_id: leaf,
                }),
                parent: None,
            },
        )
        .await
    }

    /// Closes a session if it is open and deletes it with everything stored about it. A
    /// damaged session's directory is removed as it is.
    pub async fn delete(&self, id: &SessionId) -> Result<(), Error> {
        if matches!(self.sessions.get(id).as_deref(), Some(Slot::Damaged(_))) {
            return self.remove(id).await;
        }
        let session = self.get(id).await?;
        session.close(agentd_proto::SessionEndReason::Deleted).await;
        // Nothing may be written into the directory while it is removed: an unloaded session
        // has written everything; a watched one keeps its task for its subscribers, and
        // writes nothing after what it has queued.
        if session.evict().await.is_none() {
            session.saved().await;
        }
        drop(session);
        self.remove(id).await
    }

    /// Removes the session's directory, then its slot, and says so on the daemon's stream.
    async fn remove(&self, id: &SessionId) -> Result<(), Error> {
        if let Some(store) = &self.store {
            let (store, id) = (store.clone(), id.clone());
            tokio::task::spawn_blocking(move || store.delete(&id))
                .await
                .map_err(crashed)?
                .map_err(storage)?;
        }
        self.sessions.remove(id);
        let _ = self.daemon_events.send(DaemonEvent::SessionDeleted {
            session_id: id.clone(),
        });
        Ok(())
    }

    /// Applies `patch` to a session from its next LLM call. Switching provider without naming
    /// a model selects that provider's default model and context window.
    pub async fn set_config(
        &self,
        id: &SessionId,
        mut patch: ConfigPatch,
    ) -> Result<SessionSnapshot, Error> {
        let session = self.get(id).await?;
        let mut provider = None;
        if let Some(name) = &patch.provider {
            let current = self.current_with_credentials().await?;
            let p = usable(&current.config, name)?;
            patch.model.get_or_insert_with(|| p.default_model.clone());
            patch
                .context_window_tokens
                .get_or_insert(p.context_window_tokens);
            provider = current.providers.get(name).map(|c| (name.clone(), c));
        }
        session.set_config(patch, provider).await?;
        Ok(session.snapshot())
    }

    /// The session with this id, loaded from the store on first use.
    pub async fn get(&self, id: &SessionId) -> Result<Arc<Session>, Error> {
        loop {
            let mut done = {
                let mut slot = self
                    .sessions
                    .get_mut(id)
                    .ok_or_else(|| Error::NotFound(id.clone()))?;
                match &*slot {
                    Slot::Live(s) => return Ok(s.clone()),
                    Slot::Damaged(d) => return Err(Error::Damaged(d.clone())),
                    Slot::Busy(_, done) => done.clone(),
                    Slot::Stored(record) => {
                        let record = record.clone();
                        let (tx, rx) = watch::channel(None);
                        *slot = Slot::Busy(record.clone(), rx.clone());
                        let me = self.me.upgrade().ok_or(Error::ShuttingDown)?;
                        // Its own task: a caller that goes away must not leave the slot busy.
                        tokio::spawn(async move { me.load(record, tx).await });
                        rx
                    }
                }
            };
            if let Ok(result) = done.wait_for(Option::is_some).await
                && let Some(Err(e)) = &*result
            {
                return Err(e.clone());
            }
        }
    }

    async fn load(
        &self,
        record: Box<SessionRecord>,
        done: watch::Sender<Option<Result<(), Error>>>,
    ) {
        let id = record.id.clone();
        let result = self.restore((*record).clone()).await;
        let outcome = result.as_ref().map(|_| ()).map_err(Clone::clone);
        if let Err(e) = &outcome {
            tracing::error!(session = %id, "cannot load the session: {e}");
        }
        if let Some(mut slot) = self.sessions.get_mut(&id) {
            *slot = match result {
                Ok(session) => Slot::Live(session),
                Err(_) => Slot::Stored(record),
            };
        }
        done.send_replace(Some(outcome));
    }

    /// Unloads `id` if nothing but the registry holds it and its task agrees (idle or closed,
    /// unwatched).
    async fn evict(&self, id: &SessionId) {
        let (session, done) = {
            let Some(mut slot) = self.sessions.get_mut(id) else {
                return;
            };
            let Slot::Live(session) = &*slot else {
                return;
            };
            if Arc::strong_count(session) != 1 {
                return;
            }
            let session = session.clone();
            let (tx, rx) = watch::channel(None);
            *slot = Slot::Busy(Box::new(session.record()), rx);
            (session, tx)
        };
        let unloaded = session.evict().await;
        if let Some(mut slot) = self.sessions.get_mut(id) {
            *slot = match unloaded {
                Some(record) => {
                    tracing::debug!(session = %id, "unloaded an idle session");
                    Slot::Stored(Box::new(record))
                }
                None => Slot::Live(session),
            };
        }
        drop(done);
    }

    /// Every session's summary, newest first.
    pub fn summaries(&self) -> Vec<SessionSummary> {
        let mut all: Vec<SessionSummary> = self
            .sessions
            .iter()
            .filter_map(|slot| match slot.value() {
                Slot::Live(s) => Some(s.summary()),
                Slot::Stored(r) | Slot::Busy(r, _) => Some(r.summary()),
                Slot::Damaged(_) => None,
            })
            .collect();
        all.sort_by(|a, b| b.created.cmp(&a.created));
        all
    }

    /// Every damaged session, by id.
    pub fn damaged(&self) -> Vec<DamagedSession> {
        let mut all: Vec<DamagedSession> = self
            .sessions
            .iter()
            .filter_map(|slot| match slot.value() {
                Slot::Damaged(d) => Some((**d).clone()),
                _ => None,
            })
            .collect();
        all.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        all
    }

    fn live(&self) -> Vec<Arc<Session>> {
        self.sessions
            .iter()
            .filter_map(|slot| match slot.value() {
                Slot::Live(s) => Some(s.clone()),
                Slot::Stored(_) | Slot::Busy(..) | Slot::Damaged(_) => None,
            })
            .collect()
    }

    /// How many sessions there are, how many are processing, and how many are loaded.
    pub fn counts(&self) -> (usize, usize) {
        let processing = self
            .live()
            .iter()
            .filter(|s| s.state().is_working())
            .count();
        (self.sessions.len(), processing)
    }

    /// How many sessions are loaded (the rest cost only their record).
    pub fn loaded(&self) -> usize {
        self.sessions
            .iter()
            .filter(|slot| matches!(slot.value(), Slot::Live(_)))
            .count()
    }

    /// Stops everything: cancels the tree (every session's work is aborted, its processes
    /// killed, `processing_end` emitted), then waits until every session task has written
    /// all it has and ended. Returns how many sessions were processing.
    pub async fn shutdown(&self) -> usize {
        let (_, processing) = self.counts();
        self.cancel.cancel();
        self.tasks.close();
        self.tasks.wait().await;
        let _ = self.daemon_events.send(DaemonEvent::Shutdown {});
        processing
    }

    /// The unused sessions to unload: loaded, held only by the registry, idle or closed,
    /// untouched for `after`.
    fn idle_for(&self, after: Duration) -> Vec<SessionId> {
        self.sessions
            .iter()
            .filter_map(|slot| match slot.value() {
                Slot::Live(s)
                    if Arc::strong_count(s) == 1
                        && matches!(s.state(), SessionState::Idle | SessionState::Closed)
                        && s.view().active.elapsed() >= after =>
                {
                    Some(slot.key().clone())
                }
                _ => None,
            })
            .collect()
    }
}

/// The provider of `config` called `name`, if it exists and can be used; else an error saying
/// how to configure it.
fn usable<'a>(config: &'a Config, name: &str) -> Result<&'a ProviderConfig, Error> {
    let p = config
        .providers
        .get(name)
        .ok_or_else(|| Error::InvalidConfig(config.unknown_provider(name)))?;
    if !p.is_usable() {
        return Err(Error::ProviderNotConfigured(
            p.setup_hint(config.started_by),
        ));
    }
    Ok(p)
}

/// Unloads sessions idle for `after`, checking a few times per period, until shutdown.
async fn evict_idle(registry: Weak<Registry>, after: Duration) {
    let period = (after / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
    let Some(cancel) = registry.upgrade().map(|r| r.cancel.clone()) else {
        return;
    };
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(period) => {}
        }
        let Some(registry) = registry.upgrade() else {
            return;
        };
        for id in registry.idle_for(after) {
            registry.evict(&id).await;
        }
    }
}
