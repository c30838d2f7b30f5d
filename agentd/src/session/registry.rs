//! Every session of the daemon, by id. Creating a session resolves its provider, model and
//! profile from the daemon's configuration.

use super::{Error, Session, SessionSpec};
use crate::config::{Config, ProviderKind};
use crate::exec::{EnvPolicy, LocalExecutionEnvironment};
use crate::llm::{Provider, RetryPolicy, anthropic::Anthropic};
use crate::profile::Profile;
use agentd_proto::{CreateParams, DaemonEvent, SessionId, SessionState};
use dashmap::DashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;
use tokio_util::task::TaskTracker;

/// The daemon's sessions.
pub struct Registry {
    sessions: DashMap<SessionId, Arc<Session>>,
    config: Arc<Config>,
    http: reqwest::Client,
    daemon_events: broadcast::Sender<DaemonEvent>,
    tasks: TaskTracker,
    retry: RetryPolicy,
}

impl Registry {
    /// An empty registry using `config` for new sessions.
    pub fn new(config: Arc<Config>) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(300))
            .user_agent(concat!("agentd/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Self {
            sessions: DashMap::new(),
            config,
            http,
            daemon_events: broadcast::channel(256).0,
            tasks: TaskTracker::new(),
            retry: RetryPolicy::default(),
        }
    }

    /// The daemon configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Daemon-wide notifications (session created, state changed).
    pub fn daemon_events(&self) -> broadcast::Receiver<DaemonEvent> {
        self.daemon_events.subscribe()
    }

    /// Creates and starts a session.
    pub fn create(&self, params: CreateParams) -> Result<Arc<Session>, Error> {
        let cwd = PathBuf::from(&params.cwd);
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
        let provider_name = params
            .provider
            .as_deref()
            .unwrap_or(&self.config.default_provider);
        let mut config = self
            .config
            .session_config(provider_name, params.model.as_deref())
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        if let Some(patch) = &params.config {
            config.apply(patch);
            crate::config::validate_session_config(&config)
                .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        }
        let provider_config = &self.config.providers[provider_name];
        if !provider_config.is_usable() {
            return Err(Error::ProviderNotConfigured(provider_config.setup_hint()));
        }
        let provider: Arc<dyn Provider> = match provider_config.kind {
            ProviderKind::Anthropic => Arc::new(Anthropic::new(
                self.http.clone(),
                &provider_config.base_url,
                provider_config.api_key.clone(),
            )),
        };
        let profile_name = params
            .profile
            .as_deref()
            .unwrap_or(match provider_config.kind {
                ProviderKind::Anthropic => "anthropic",
            });
        let profile =
            Profile::named(profile_name).map_err(|e| Error::InvalidConfig(e.to_string()))?;
        let id = SessionId(uuid::Uuid::new_v4().to_string());
        let spec = SessionSpec {
            id: id.clone(),
            env: Arc::new(LocalExecutionEnvironment::new(
                cwd.clone(),
                EnvPolicy::InheritAll,
            )),
            cwd,
            title: params.title,
            profile,
            provider,
            config,
            instructions: params.instructions,
            retry: self.retry.clone(),
        };
        let session = Session::spawn(spec, Some(self.daemon_events.clone()), &self.tasks);
        self.sessions.insert(id.clone(), session.clone());
        let _ = self
            .daemon_events
            .send(DaemonEvent::SessionCreated { session_id: id });
        Ok(session)
    }

    /// The session with this id.
    pub fn get(&self, id: &SessionId) -> Result<Arc<Session>, Error> {
        self.sessions
            .get(id)
            .map(|s| s.value().clone())
            .ok_or_else(|| Error::NotFound(id.clone()))
    }

    /// Every session, newest first.
    pub fn list(&self) -> Vec<Arc<Session>> {
        let mut all: Vec<Arc<Session>> = self.sessions.iter().map(|s| s.value().clone()).collect();
        all.sort_by(|a, b| b.created.cmp(&a.created));
        all
    }

    /// How many sessions there are, and how many are processing.
    pub fn counts(&self) -> (usize, usize) {
        let processing = self
            .sessions
            .iter()
            .filter(|s| s.state() == SessionState::Processing)
            .count();
        (self.sessions.len(), processing)
    }

    /// Aborts every session's work (they stay open), then waits for nothing else to run.
    /// Returns how many were processing.
    pub async fn shutdown(&self) -> usize {
        let sessions = self.list();
        let results = futures::future::join_all(sessions.iter().map(|s| s.abort(false))).await;
        let aborted = results
            .iter()
            .filter(|r| matches!(r, Ok(a) if a.aborted))
            .count();
        let _ = self.daemon_events.send(DaemonEvent::Shutdown {});
        aborted
    }
}
