//! Making a session from its parts: the spec a session task starts from, the execution
//! environment its tools run in (local or over ssh, read-only or not, confined away from
//! agentd's own files), and its directory in the store; restoring a stored one.

use super::current::Current;
use super::{Family, Registry, Slot, crashed, storage};
use crate::checkpoint::Checkpoints;
use crate::config::Config;
use crate::exec::{
    ContainerExecutionEnvironment, ContainerSpec, EnvFilter, EnvPolicy, ExecutionEnvironment,
    LocalExecutionEnvironment, LocalOptions, ProtectedPaths, ReadOnly, SshExecutionEnvironment,
    SshTarget,
};
use crate::hooks::{Hooks, HooksSpec, project_hooks};
use crate::profile::Profile;
use crate::session::{Error, History, Restored, Session, SessionSpec, Template};
use crate::skills::{Catalog, Roots};
use crate::store::{ParentLink, SessionFiles, SessionRecord};
use agentd_proto::{
    ContainerEnvironment, DaemonEvent, Environment, ForkOrigin, ProviderKind, SessionId,
    SshEnvironment,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// agentd's own directories and files (`protected`: runtime directory and socket, state,
/// config and credentials) and the sockets of the user's services that act on request (the
/// runtime directory with the session bus and gpg-agent, ssh-agent, X11, tmux), which
/// sandboxed commands find empty: through them a command could run a program outside its
/// sandbox or use the user's keys.
pub(super) fn hidden_from_commands(protected: &ProtectedPaths) -> Arc<[PathBuf]> {
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

/// What a new session is made of besides its id.
pub(super) struct NewSession {
    pub(super) template: Template,
    /// The id and environment made for it already (a container session's container is
    /// started before `session/create` answers); `None`: made with the session.
    pub(super) prepared: Option<(SessionId, Arc<dyn ExecutionEnvironment>)>,
    pub(super) title: Option<String>,
    pub(super) history: History,
    pub(super) forked_from: Option<ForkOrigin>,
    pub(super) parent: Option<ParentLink>,
}

impl Registry {
    /// Which variables commands inherit (the daemon's own locally, the remote's over ssh).
    pub(crate) fn env_filter(config: &Config) -> EnvFilter {
        let tools = &config.tools;
        EnvFilter::new(EnvPolicy::InheritAll).with(
            &tools.env_deny,
            &tools.env_allow,
            config.key_variables(),
        )
    }

    /// How local commands (and MCP servers) start: filtered variables, the ledger.
    pub(super) fn local_options(&self, config: &Config) -> LocalOptions {
        LocalOptions {
            env: Self::env_filter(config),
            ledger: self.ledger.clone(),
            protected: self.protected.clone(),
            hidden: self.hidden.clone(),
        }
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

    pub(super) fn ssh_environment(
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

    /// What a container session's container is made from: the client's values over the
    /// `[containers.NAME]` entry its `image` names, over the defaults.
    pub(super) fn container_spec(
        config: &Config,
        container: &ContainerEnvironment,
    ) -> ContainerSpec {
        let entry = config.containers.get(&container.image);
        let engine = container
            .engine
            .clone()
            .or_else(|| entry.and_then(|e| e.engine.clone()));
        ContainerSpec {
            ssh: Self::ssh_engine(config, engine.as_deref()),
            engine,
            image: entry.map_or_else(|| container.image.clone(), |e| e.image.clone()),
            network: container
                .network
                .or_else(|| entry.and_then(|e| e.network))
                .unwrap_or(false),
            memory_mb: container
                .memory_mb
                .or_else(|| entry.and_then(|e| e.memory_mb))
                .or(Some(4096)),
            pids_limit: container
                .pids_limit
                .or_else(|| entry.and_then(|e| e.pids_limit))
                .or(Some(1024)),
            millicpus: container
                .millicpus
                .or_else(|| entry.and_then(|e| e.millicpus)),
            user: entry.and_then(|e| e.user.clone()),
        }
    }

    /// For an `ssh://` engine (the session's, the entry's or `DOCKER_HOST`), how its host
    /// is reached: as an ssh environment naming the same host, user and port would be.
    fn ssh_engine(config: &Config, engine: Option<&str>) -> Option<SshTarget> {
        let address = crate::exec::EngineAddress::resolve(engine);
        let parsed = crate::exec::parse_ssh_engine(&address.host).ok()?;
        let as_environment = SshEnvironment {
            host: parsed.host,
            user: parsed.user,
            port: parsed.port,
            identity_file: None,
            cwd: String::new(),
        };
        Some(Self::ssh_target(config, &as_environment))
    }

    /// A container session's environment; its container is made on first use (or by
    /// [`ContainerExecutionEnvironment::start`]).
    pub(super) fn container_environment(
        &self,
        config: &Config,
        container: &ContainerEnvironment,
        cwd: &Path,
        id: &SessionId,
    ) -> ContainerExecutionEnvironment {
        ContainerExecutionEnvironment::new(
            cwd.to_owned(),
            Self::container_spec(config, container),
            self.containers.clone(),
            id.0.clone(),
            self.local_options(config),
        )
    }

    pub(super) fn environment(
        &self,
        config: &Config,
        template: &Template,
        id: &SessionId,
    ) -> Result<Arc<dyn ExecutionEnvironment>, Error> {
        let cwd = template.cwd.clone();
        Ok(match (&template.environment, template.read_only) {
            (Environment::Container(c), false) => {
                Arc::new(self.container_environment(config, c, &cwd, id))
            }
            (Environment::Container(c), true) => {
                Arc::new(ReadOnly(self.container_environment(config, c, &cwd, id)))
            }
            (Environment::Local, read_only) => {
                let local =
                    LocalExecutionEnvironment::with_options(cwd, self.local_options(config));
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

    /// The hooks of a new session: the config file's, and those of its workspace when the
    /// user trusted it as it is (a workspace over ssh has none that run here). `None` when
    /// there are none and nothing to say about a workspace's.
    #[allow(clippy::too_many_arguments)] // what a session is made from, each part used once
    fn hooks(
        &self,
        current: &Current,
        id: &SessionId,
        template: &Template,
        env: &Arc<dyn ExecutionEnvironment>,
        files: &Option<SessionFiles>,
        subagent: bool,
        resumed: bool,
    ) -> Option<Arc<Hooks>> {
        let config = &current.config;
        let local = matches!(template.environment, Environment::Local);
        let (project, warnings) = if local {
            project_hooks(&template.cwd, &config.trusted_workspaces, &self.protected)
        } else {
            (Vec::new(), Vec::new())
        };
        if config.hooks.is_empty() && project.is_empty() && warnings.is_empty() {
            return None;
        }
        Some(Arc::new(Hooks::new(HooksSpec {
            hooks: config.hooks.iter().cloned().chain(project).collect(),
            warnings,
            options: self.local_options(config),
            cwd: if local {
                template.cwd.clone()
            } else {
                directories::BaseDirs::new()
                    .map_or_else(|| PathBuf::from("/"), |d| d.home_dir().to_owned())
            },
            session_env: local.then(|| env.clone()),
            config: template.config.clone(),
            project_dir: template.cwd.clone(),
            session_id: id.0.clone(),
            transcript: files.as_ref().map(SessionFiles::log),
            subagent,
            resumed,
        })))
    }

    /// The skills and commands of a session made from `template`, found off the async
    /// workers: the workspace's when it is on this machine, and the user's.
    async fn catalog(&self, template: &Template) -> Result<Arc<Catalog>, Error> {
        let project = template
            .environment
            .is_local()
            .then(|| template.cwd.clone());
        let (protected, cache) = (self.protected.clone(), self.skill_files.clone());
        tokio::task::spawn_blocking(move || {
            Arc::new(Catalog::discover(
                &Roots::for_user(project),
                &protected,
                &cache,
            ))
        })
        .await
        .map_err(crashed)
    }

    /// The checkpoints of a new or restored session, or why it has none.
    fn checkpoints(
        &self,
        config: &Config,
        id: &SessionId,
        cwd: &Path,
        read_only: bool,
        environment: &Environment,
        files: &Option<SessionFiles>,
    ) -> Result<Checkpoints, String> {
        let limits = &config.checkpoints;
        match (&self.checkpoints, files, environment) {
            _ if !limits.enabled => {
                Err("checkpoints are off ([checkpoints] enabled = false)".into())
            }
            _ if read_only => Err("a read-only session changes no files".into()),
            (_, _, Environment::Ssh(_)) => Err(
                "checkpoints are not kept for sessions over ssh yet: the files are on the remote \
                 host (use git there to undo changes)"
                    .into(),
            ),
            (_, _, Environment::Container(c))
                if !crate::exec::EngineAddress::resolve(
                    Self::container_spec(config, c).engine.as_deref(),
                )
                .is_local() =>
            {
                Err(
                    "checkpoints are not kept for sessions on a remote container engine: the \
                     files are on the engine's machine"
                        .into(),
                )
            }
            (Some(budget), Some(_), Environment::Local | Environment::Container(_)) => {
                budget.set_max(limits.max_total_bytes);
                // agentd's own state is never recorded, should the workspace hold it.
                let state = self
                    .store_dir()
                    .and_then(|d| d.parent())
                    .map(Path::to_owned);
                Ok(Checkpoints::new(
                    budget.clone(),
                    &id.0,
                    cwd.to_owned(),
                    state.into_iter().collect(),
                    limits.max_file_bytes,
                ))
            }
            _ => Err("checkpoints are kept for the daemon's stored sessions only".into()),
        }
    }

    /// A spec for session `id` from its parts, with the providers of `current`.
    fn spec(
        &self,
        current: &Current,
        id: SessionId,
        new: NewSession,
        files: Option<SessionFiles>,
        resumed: bool,
        catalog: Arc<Catalog>,
    ) -> Result<SessionSpec, Error> {
        let NewSession {
            template,
            prepared,
            title,
            history,
            forked_from,
            parent,
        } = new;
        let env = match prepared {
            Some((_, env)) => env,
            None => self.environment(&current.config, &template, &id)?,
        };
        let hooks = self.hooks(
            current,
            &id,
            &template,
            &env,
            &files,
            parent.is_some(),
            resumed,
        );
        // An ssh environment's directory is the session's (a subagent's may be deeper).
        let environment = match template.environment {
            Environment::Local => Environment::Local,
            Environment::Container(c) => Environment::Container(c),
            Environment::Ssh(ssh) => Environment::Ssh(SshEnvironment {
                cwd: template.cwd.display().to_string(),
                ..ssh
            }),
        };
        // MCP servers run on this machine, in the session's directory when it is here too.
        let mcp = crate::mcp::Launcher {
            options: self.local_options(&current.config),
            cwd: match &environment {
                Environment::Local | Environment::Container(_) => template.cwd.clone(),
                Environment::Ssh(_) => directories::BaseDirs::new()
                    .map_or_else(|| PathBuf::from("/"), |d| d.home_dir().to_owned()),
            },
        };
        let checkpoints = self.checkpoints(
            &current.config,
            &id,
            &template.cwd,
            template.read_only,
            &environment,
            &files,
        );
        Ok(SessionSpec {
            checkpoints,
            family: Some(Family::new(self.me.clone(), id.clone(), parent.clone())),
            id,
            env,
            environment,
            worktree: template.worktree,
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
            mcp: Some(mcp),
            hooks,
            catalog,
            parent,
            cancel: self.cancel.child_token(),
        })
    }

    /// Creates the session's directory (when the registry has a store) and starts it with
    /// the providers of `current`.
    pub(super) async fn start(
        &self,
        current: &Current,
        new: NewSession,
    ) -> Result<Arc<Session>, Error> {
        if self.cancel.is_cancelled() {
            return Err(Error::ShuttingDown);
        }
        let id = match &new.prepared {
            Some((id, _)) => id.clone(),
            None => SessionId(uuid::Uuid::new_v4().to_string()),
        };
        // The session's directory is made while its skills are found.
        let files = async {
            match &self.store {
                Some(store) => {
                    let (store, id) = (store.clone(), id.clone());
                    tokio::task::spawn_blocking(move || store.create(&id))
                        .await
                        .map_err(crashed)?
                        .map(Some)
                        .map_err(storage)
                }
                None => Ok(None),
            }
        };
        let (files, catalog) = tokio::try_join!(files, self.catalog(&new.template))?;
        let spec = self.spec(current, id.clone(), new, files, false, catalog)?;
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
    pub(super) async fn restore(&self, mut record: SessionRecord) -> Result<Arc<Session>, Error> {
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
        let current = self.current.load();
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
            worktree: record.worktree.clone(),
        };
        let new = NewSession {
            template,
            prepared: None,
            title: record.title.clone(),
            history: History::restore(loaded.entries, record.leaf.clone(), record.history_len),
            forked_from: record.forked_from.clone(),
            parent: record.parent.clone(),
        };
        let catalog = self.catalog(&new.template).await?;
        let mut spec = self.spec(&current, id, new, Some(files), true, catalog)?;
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
}
