//! What clients ask to be made or changed: `session/create` (its directory, environment,
//! provider, profile and settings checked against the current config), forks, and a
//! session's switch to another provider.

use super::Registry;
use super::build::NewSession;
use crate::config::{Config, ProviderConfig};
use crate::exec::LocalOptions;
use crate::profile::Profile;
use crate::session::{Error, History, Session, Template};
use agentd_proto::{
    ConfigPatch, CreateParams, EntryId, Environment, ForkOrigin, SandboxMode, SessionConfig,
    SessionId, SessionSnapshot, SshEnvironment, Worktree, WorktreeRequest,
};
use std::path::PathBuf;
use std::sync::Arc;

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

impl Registry {
    /// Creates and starts a session.
    pub async fn create(&self, params: CreateParams) -> Result<Arc<Session>, Error> {
        let current = self.current_with_credentials().await?;
        let config = &current.config;
        let cwd = match &params.environment {
            Environment::Local | Environment::Container(_) => {
                let cwd = PathBuf::from(&params.cwd);
                if params.cwd.is_empty() {
                    return Err(Error::InvalidConfig(
                        "cwd is missing: a local or container session needs its working directory (the container's workspace)".into(),
                    ));
                }
                if !cwd.is_absolute() {
                    return Err(Error::InvalidConfig(format!(
                        "cwd must be an absolute path, got {:?}",
                        params.cwd
                    )));
                }
                // A remote engine's workspace is a path on the engine's machine.
                let remote = match &params.environment {
                    Environment::Container(c) => !crate::exec::EngineAddress::resolve(
                        Self::container_spec(config, c).engine.as_deref(),
                    )
                    .is_local(),
                    _ => false,
                };
                if !remote && !cwd.is_dir() {
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
        let (cwd, worktree) = match &params.worktree {
            None | Some(WorktreeRequest::Flag(false)) => (cwd, None),
            Some(request) => {
                let name = match request {
                    WorktreeRequest::Name(name) => Some(name.as_str()),
                    WorktreeRequest::Flag(_) => None,
                };
                let options = self.local_options(&current.config);
                let (tree, roots) = self
                    .add_worktree(&params.environment, &cwd, name, &config, options)
                    .await?;
                // Committing from the worktree writes some of the repository's git directory.
                config.sandbox_writable_roots.extend(roots);
                (PathBuf::from(&tree.path), Some(tree))
            }
        };
        // The container is a container session's sandbox; Landlock cannot reach into it.
        if matches!(params.environment, Environment::Container(_)) {
            let asked = params.config.as_ref().and_then(|p| p.sandbox);
            if asked.is_some_and(|m| m != SandboxMode::Off) {
                return Err(Error::InvalidConfig(
                    "sandbox: a container session is held by its container (its limits and network), not by a sandbox mode; leave out sandbox".into(),
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
            worktree,
        };
        // A remote session is created only once its host answers, its key verified and its
        // directory found; the probe's connection is the one the session goes on using.
        // A container session is created only once its container runs: the engine reached,
        // the image found, the workspace mounted.
        let prepared = match &template.environment {
            Environment::Container(c) => {
                let id = SessionId(uuid::Uuid::new_v4().to_string());
                let env = self.container_environment(&current.config, c, &template.cwd, &id);
                env.start()
                    .await
                    .map_err(|e| Error::EnvironmentUnavailable(e.to_string()))?;
                let env: Arc<dyn crate::exec::ExecutionEnvironment> = if template.read_only {
                    Arc::new(crate::exec::ReadOnly(env))
                } else {
                    Arc::new(env)
                };
                Some((id, env))
            }
            _ => None,
        };
        let _probe = match &template.environment {
            Environment::Local | Environment::Container(_) => None,
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
                prepared,
                title: params.title,
                history: History::default(),
                forked_from: None,
                parent: None,
            },
        )
        .await
    }

    /// A new worktree of `cwd`'s repository for a session, under the state directory, and
    /// what the session must be able to write to commit from it.
    pub(super) async fn add_worktree(
        &self,
        environment: &Environment,
        cwd: &std::path::Path,
        name: Option<&str>,
        config: &SessionConfig,
        options: LocalOptions,
    ) -> Result<(Worktree, Vec<PathBuf>), Error> {
        if !environment.is_local() {
            return Err(Error::InvalidParams(
                "worktree: an ssh session cannot have a worktree yet (they are made on this \
                 machine); create one on the remote host and give its directory as cwd"
                    .into(),
            ));
        }
        // Beside the state directory, not in it: tools may not touch agentd's own files.
        let Some(state) = self.store.as_ref().and_then(|s| s.dir().parent()?.parent()) else {
            return Err(Error::InvalidParams(
                "worktree: worktrees are kept for the daemon's stored sessions only".into(),
            ));
        };
        crate::worktree::add(cwd, &state.join("agentd-worktrees"), name, config, options)
            .await
            .map_err(Error::InvalidParams)
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
                prepared: None,
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
}
