//! Every session of the daemon, by id. Creating a session resolves its provider, model and
//! profile from the daemon's configuration.

use super::{Error, Session, SessionSpec};
use crate::config::{Config, Price, ProviderConfig};
use crate::exec::{EnvPolicy, ExecutionEnvironment, LocalExecutionEnvironment, ReadOnly};
use crate::llm::{
    Provider, ProviderSet, RetryPolicy, anthropic::Anthropic, gemini::Gemini, openai::OpenAi,
    openai_chat::OpenAiChat,
};
use crate::profile::Profile;
use agentd_proto::{
    ConfigPatch, CreateParams, DaemonEvent, ProviderKind, SessionId, SessionSnapshot, SessionState,
};
use dashmap::DashMap;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;
use tokio_util::task::TaskTracker;

/// The daemon's sessions.
pub struct Registry {
    sessions: DashMap<SessionId, Arc<Session>>,
    config: Arc<Config>,
    /// Every usable provider, built once and shared by all sessions.
    providers: ProviderSet,
    prices: Arc<BTreeMap<String, Price>>,
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
        let mut providers = ProviderSet::default();
        for p in config.providers.values().filter(|p| p.is_usable()) {
            let (base, key) = (p.base_url.as_str(), p.api_key.clone());
            let provider: Arc<dyn Provider> = match p.kind {
                ProviderKind::Anthropic => {
                    Arc::new(Anthropic::new(http.clone(), base, key).with_betas(&p.beta_headers))
                }
                ProviderKind::Openai => Arc::new(OpenAi::new(http.clone(), base, key)),
                ProviderKind::OpenaiChat => Arc::new(OpenAiChat::new(http.clone(), base, key)),
                ProviderKind::Gemini => Arc::new(Gemini::new(http.clone(), base, key)),
            };
            providers.insert(&p.name, provider);
        }
        Self {
            sessions: DashMap::new(),
            prices: Arc::new(config.pricing.clone()),
            config,
            providers,
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
        self.usable(provider_name)?;
        let mut config = self
            .config
            .session_config(provider_name, params.model.as_deref())
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        if let Some(patch) = &params.config {
            config.apply(patch);
            crate::config::validate_session_config(&config)
                .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        }
        let profile = match params.profile.as_deref() {
            Some(name) => Profile::named(name).map_err(|e| Error::InvalidConfig(e.to_string()))?,
            None => Profile::for_provider(self.config.providers[provider_name].kind),
        };
        let local = LocalExecutionEnvironment::new(cwd.clone(), EnvPolicy::InheritAll);
        let env: Arc<dyn ExecutionEnvironment> = if params.read_only {
            Arc::new(ReadOnly(local))
        } else {
            Arc::new(local)
        };
        let id = SessionId(uuid::Uuid::new_v4().to_string());
        let spec = SessionSpec {
            id: id.clone(),
            env,
            cwd,
            title: params.title,
            profile,
            providers: self.providers.clone(),
            config,
            instructions: params.instructions,
            retry: self.retry.clone(),
            prices: self.prices.clone(),
        };
        let session = Session::spawn(spec, Some(self.daemon_events.clone()), &self.tasks);
        self.sessions.insert(id.clone(), session.clone());
        let _ = self
            .daemon_events
            .send(DaemonEvent::SessionCreated { session_id: id });
        Ok(session)
    }

    /// The provider called `name`, if it exists and can be used.
    fn usable(&self, name: &str) -> Result<&ProviderConfig, Error> {
        let p = self.config.providers.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.config.providers.keys().map(String::as_str).collect();
            Error::InvalidConfig(format!(
                "unknown provider {name:?}; configured: {}",
                known.join(", ")
            ))
        })?;
        if !p.is_usable() {
            return Err(Error::ProviderNotConfigured(p.setup_hint()));
        }
        Ok(p)
    }

    /// Applies `patch` to a session from its next LLM call. Switching provider without naming
    /// a model selects that provider's default model and context window.
    pub fn set_config(
        &self,
        id: &SessionId,
        mut patch: ConfigPatch,
    ) -> Result<SessionSnapshot, Error> {
        let session = self.get(id)?;
        if let Some(name) = &patch.provider {
            let p = self.usable(name)?;
            patch.model.get_or_insert_with(|| p.default_model.clone());
            patch
                .context_window_tokens
                .get_or_insert(p.context_window_tokens);
        }
        session.set_config(&patch)?;
        Ok(session.snapshot())
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
