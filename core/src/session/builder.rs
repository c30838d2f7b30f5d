//! [`SessionBuilder`]: how a host program (spec 1.2) starts a session without the daemon.

use super::{Error, History, Session, SessionSpec};
use crate::exec::ExecutionEnvironment;
use crate::llm::{Provider, ProviderSet, RetryPolicy};
use crate::profile::Profile;
use agentd_proto::{Environment, SessionConfig, SessionId};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The parts of a session a host chooses; [`SessionBuilder::spawn`] starts it. The session
/// lives in memory only: it is not stored, and it has no subagents (their tools answer that
/// subagents are not available).
pub struct SessionBuilder {
    spec: SessionSpec,
}

impl Session {
    /// A session in `cwd` whose tools run in `env` under `profile`, calling `provider` (known
    /// to the session's config as `provider_name`) with `model`. The settings start as the
    /// daemon's defaults; [`SessionBuilder::configure`] edits them.
    pub fn builder(
        cwd: PathBuf,
        profile: Profile,
        env: Arc<dyn ExecutionEnvironment>,
        provider_name: &str,
        provider: Arc<dyn Provider>,
        model: &str,
    ) -> SessionBuilder {
        let providers = ProviderSet::default();
        providers.insert(provider_name, provider);
        SessionBuilder {
            spec: SessionSpec {
                id: SessionId::from(uuid::Uuid::new_v4().to_string()),
                cwd,
                title: None,
                profile,
                env,
                environment: Environment::Local,
                worktree: None,
                providers,
                config: crate::config::default_session_config(provider_name, model),
                instructions: None,
                retry: RetryPolicy::default(),
                prices: Arc::default(),
                read_only: false,
                files: None,
                history: History::default(),
                forked_from: None,
                restored: None,
                parent: None,
                mcp: None,
                hooks: None,
                catalog: Arc::default(),
                checkpoints: Err(
                    "checkpoints are kept for the daemon's stored sessions only".into()
                ),
                family: None,
                cancel: CancellationToken::new(),
            },
        }
    }
}

impl SessionBuilder {
    /// Its id (default: a random UUID).
    pub fn id(mut self, id: SessionId) -> Self {
        self.spec.id = id;
        self
    }

    /// Its title, for lists.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.spec.title = Some(title.into());
        self
    }

    /// Instructions appended last to the system prompt.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.spec.instructions = Some(instructions.into());
        self
    }

    /// Edits its settings, which start as the daemon's defaults for the provider and model
    /// given to [`Session::builder`]. The result is checked as a client's `session/create` is;
    /// `provider` must still name the session's provider.
    pub fn configure(mut self, edit: impl FnOnce(&mut SessionConfig)) -> Result<Self, Error> {
        let mut config = self.spec.config.clone();
        edit(&mut config);
        crate::config::validate_session_config(&config)
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        if self.spec.providers.get(&config.provider).is_none() {
            return Err(Error::InvalidConfig(format!(
                "provider {:?} is not the session's provider",
                config.provider
            )));
        }
        self.spec.config = config;
        Ok(self)
    }

    /// What the session's snapshots say `env` is (default: the local machine).
    pub fn environment(mut self, environment: Environment) -> Self {
        self.spec.environment = environment;
        self
    }

    /// A token whose cancellation stops the session for good: its work is aborted and its
    /// task ends. Its turns are children of it.
    pub fn cancel_on(mut self, token: CancellationToken) -> Self {
        self.spec.cancel = token;
        self
    }

    /// Starts the session's task (on the current tokio runtime) and emits `session_start`.
    pub fn spawn(self) -> Arc<Session> {
        Session::spawn(self.spec, None, &TaskTracker::new())
    }
}
