//! Every session of the daemon, by id. Creating a session resolves its provider, model and
//! profile from the daemon's configuration. Sessions stored by an earlier run are listed from
//! their records and loaded (history, event log, task) on first use, so start-up stays fast
//! with thousands of them.

use super::{Error, History, Restored, Session, SessionSpec};
use crate::config::{Config, Price, ProviderConfig};
use crate::exec::{EnvPolicy, ExecutionEnvironment, LocalExecutionEnvironment, ReadOnly};
use crate::llm::{
    Provider, ProviderSet, RetryPolicy, anthropic::Anthropic, gemini::Gemini, openai::OpenAi,
    openai_chat::OpenAiChat,
};
use crate::profile::Profile;
use crate::store::{ParentLink, SessionRecord, Store};
use crate::tools::SpawnRequest;
use agentd_proto::{
    ConfigPatch, CreateParams, DaemonEvent, EntryId, ForkOrigin, ProviderKind, QueueContents,
    SessionConfig, SessionId, SessionSnapshot, SessionState, SessionSummary, Usage,
};
use dashmap::DashMap;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::broadcast;
use tokio_util::task::TaskTracker;

/// A session as the registry holds it.
enum Slot {
    /// Stored by an earlier run and not used since: only its record is in memory.
    Stored(Box<SessionRecord>),
    /// Loaded and running.
    Live(Arc<Session>),
}

/// The daemon's sessions.
pub struct Registry {
    sessions: DashMap<SessionId, Slot>,
    store: Option<Store>,
    config: Arc<Config>,
    /// Every usable provider, built once and shared by all sessions.
    providers: ProviderSet,
    prices: Arc<BTreeMap<String, Price>>,
    daemon_events: broadcast::Sender<DaemonEvent>,
    tasks: TaskTracker,
    retry: RetryPolicy,
    /// Handed to sessions, which spawn and find their subagents through it.
    me: Weak<Registry>,
}

/// What a new session is made of besides its id.
struct NewSession {
    cwd: PathBuf,
    title: Option<String>,
    profile: Profile,
    config: SessionConfig,
    instructions: Option<String>,
    read_only: bool,
    history: History,
    forked_from: Option<ForkOrigin>,
    parent: Option<ParentLink>,
}

fn storage(e: crate::store::Error) -> Error {
    Error::Storage(e.to_string())
}

impl Registry {
    /// A registry using `config` for new sessions, holding the sessions `store` has (none:
    /// sessions live in memory only). Sessions that were processing when the daemon stopped
    /// are loaded at once, to record that their work was interrupted.
    pub fn new(config: Arc<Config>, store: Option<Store>) -> Arc<Self> {
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
        let registry = Arc::new_cyclic(|me| Self {
            sessions: DashMap::new(),
            store,
            prices: Arc::new(config.pricing.clone()),
            config,
            providers,
            daemon_events: broadcast::channel(256).0,
            tasks: TaskTracker::new(),
            retry: RetryPolicy::default(),
            me: me.clone(),
        });
        registry.load_stored();
        registry
    }

    fn load_stored(&self) {
        let Some(store) = &self.store else { return };
        let loaded = match store.load() {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("cannot list stored sessions: {e}");
                return;
            }
        };
        for warning in loaded.warnings {
            tracing::warn!("{warning}");
        }
        let mut interrupted = Vec::new();
        for record in loaded.records {
            if record.state == SessionState::Processing {
                interrupted.push(record.id.clone());
            }
            self.sessions
                .insert(record.id.clone(), Slot::Stored(Box::new(record)));
        }
        for id in interrupted {
            if let Err(e) = self.get(&id) {
                tracing::error!(session = %id, "cannot load an interrupted session: {e}");
            }
        }
    }

    fn environment(&self, cwd: PathBuf, read_only: bool) -> Arc<dyn ExecutionEnvironment> {
        let local = LocalExecutionEnvironment::new(cwd, EnvPolicy::InheritAll);
        if read_only {
            Arc::new(ReadOnly(local))
        } else {
            Arc::new(local)
        }
    }

    /// Stores (when the registry has a store) and starts a new session.
    fn start(&self, new: NewSession) -> Result<Arc<Session>, Error> {
        let id = SessionId(uuid::Uuid::new_v4().to_string());
        let files = match &self.store {
            Some(store) => {
                let now = super::now();
                let record = SessionRecord {
                    id: id.clone(),
                    title: new.title.clone(),
                    cwd: new.cwd.clone(),
                    profile: new.profile.id.to_owned(),
                    instructions: new.instructions.clone(),
                    read_only: new.read_only,
                    created: now.clone(),
                    updated: now,
                    state: SessionState::Idle,
                    config: new.config.clone(),
                    usage: Usage::default(),
                    leaf: None,
                    history_len: 0,
                    queue: QueueContents::default(),
                    forked_from: new.forked_from.clone(),
                    parent: new.parent.clone(),
                };
                Some(Arc::new(store.create(&record).map_err(storage)?))
            }
            None => None,
        };
        let spec = SessionSpec {
            id: id.clone(),
            env: self.environment(new.cwd.clone(), new.read_only),
            cwd: new.cwd,
            title: new.title,
            profile: new.profile,
            providers: self.providers.clone(),
            config: new.config,
            instructions: new.instructions,
            retry: self.retry.clone(),
            prices: self.prices.clone(),
            read_only: new.read_only,
            files,
            history: new.history,
            forked_from: new.forked_from,
            restored: None,
            parent: new.parent,
            registry: Some(self.me.clone()),
        };
        let session = Session::spawn(spec, Some(self.daemon_events.clone()), &self.tasks);
        self.sessions
            .insert(id.clone(), Slot::Live(session.clone()));
        let _ = self
            .daemon_events
            .send(DaemonEvent::SessionCreated { session_id: id });
        Ok(session)
    }

    /// Loads a stored session: its history, the end of its event log, and its task.
    fn restore(&self, record: &SessionRecord) -> Result<Arc<Session>, Error> {
        let store = self
            .store
            .as_ref()
            .ok_or_else(|| Error::NotFound(record.id.clone()))?;
        let id = &record.id;
        let mut warnings = Vec::new();
        let files = store.open(id, |w| warnings.push(w));
        let entries = files
            .load_history(|n, e| warnings.push(format!("history.jsonl line {n} skipped: {e}")))
            .map_err(storage)?;
        let last_seq = files.last_seq().map_err(storage)?;
        let profile = Profile::named(&record.profile).unwrap_or_else(|e| {
            warnings.push(format!("{e}; using the provider's profile"));
            let kind = self
                .config
                .providers
                .get(&record.config.provider)
                .map_or(ProviderKind::Openai, |p| p.kind);
            Profile::for_provider(kind)
        });
        for w in &warnings {
            tracing::warn!(session = %id, "{w}");
        }
        let spec = SessionSpec {
            id: id.clone(),
            env: self.environment(record.cwd.clone(), record.read_only),
            cwd: record.cwd.clone(),
            title: record.title.clone(),
            profile,
            providers: self.providers.clone(),
            config: record.config.clone(),
            instructions: record.instructions.clone(),
            retry: self.retry.clone(),
            prices: self.prices.clone(),
            read_only: record.read_only,
            files: Some(Arc::new(files)),
            history: History::restore(entries, record.leaf.clone(), record.history_len),
            forked_from: record.forked_from.clone(),
            parent: record.parent.clone(),
            registry: Some(self.me.clone()),
            restored: Some(Restored {
                last_seq,
                created: record.created.clone(),
                updated: record.updated.clone(),
                state: record.state,
                usage: record.usage,
                queue: record.queue.clone(),
                warnings,
            }),
        };
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
        self.start(NewSession {
            cwd,
            title: params.title,
            profile,
            config,
            instructions: params.instructions,
            read_only: params.read_only,
            history: History::default(),
            forked_from: None,
            parent: None,
        })
    }

    /// Creates a subagent of `parent` for `request` (not yet started), within the parent's
    /// depth and concurrency limits. The child works on the same filesystem with its own
    /// execution environment, so aborting one session kills only its own processes.
    pub fn spawn_child(
        &self,
        parent: &Session,
        request: SpawnRequest,
    ) -> Result<Arc<Session>, Error> {
        let config = parent.config();
        let depth = parent.depth() + 1;
        if depth > config.max_subagent_depth {
            return Err(Error::InvalidParams(format!(
                "cannot spawn a subagent: max_subagent_depth is {} and this session is at depth {}; do the task yourself",
                config.max_subagent_depth,
                parent.depth()
            )));
        }
        let working = self
            .children_of(parent.id())
            .iter()
            .filter(|c| c.state() == SessionState::Processing)
            .count();
        if working >= config.max_concurrent_subagents as usize {
            return Err(Error::InvalidParams(format!(
                "cannot spawn a subagent: {working} are working (max_concurrent_subagents = {}); wait for one first",
                config.max_concurrent_subagents
            )));
        }
        let (parent_cwd, profile, mut config, instructions, read_only) = parent.fork_spec();
        let cwd = match &request.working_dir {
            None => parent_cwd,
            Some(dir) => {
                let path = std::path::Path::new(dir);
                let inside = path.components().all(|c| {
                    matches!(
                        c,
                        std::path::Component::Normal(_) | std::path::Component::CurDir
                    )
                });
                let cwd = parent_cwd.join(path);
                if !inside || !cwd.is_dir() {
                    return Err(Error::InvalidParams(format!(
                        "working_dir {dir:?} must be an existing subdirectory of {}",
                        parent_cwd.display()
                    )));
                }
                cwd
            }
        };
        if let Some(model) = request.model {
            config.model = model;
        }
        config.max_turns = request.max_turns.unwrap_or(0);
        let title: String = request.task.chars().take(60).collect();
        self.start(NewSession {
            cwd,
            title: Some(format!("subagent: {title}")),
            profile,
            config,
            instructions,
            read_only,
            history: History::default(),
            forked_from: None,
            parent: Some(ParentLink {
                session_id: parent.id().clone(),
                depth,
            }),
        })
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
    pub fn fork(
        &self,
        id: &SessionId,
        entry: Option<EntryId>,
        title: Option<String>,
    ) -> Result<Arc<Session>, Error> {
        let source = self.get(id)?;
        let branch = match &entry {
            None => source.history(),
            Some(e) => source.history_until(e).ok_or_else(|| {
                Error::InvalidParams(format!(
                    "entry {e} is not on session {id}'s current branch (see session/history)"
                ))
            })?,
        };
        let (cwd, profile, config, instructions, read_only) = source.fork_spec();
        let leaf = branch.last().map(|e| e.id.clone());
        let len = branch.len();
        let copied = branch.iter().map(|e| (**e).clone()).collect();
        self.start(NewSession {
            cwd,
            title: title.or_else(|| source.title().map(str::to_owned)),
            profile,
            config,
            instructions,
            read_only,
            history: History::restore(copied, leaf.clone(), len),
            forked_from: Some(ForkOrigin {
                session_id: id.clone(),
                entry_id: leaf,
            }),
            parent: None,
        })
    }

    /// Closes a session if it is open and deletes it with everything stored about it.
    pub async fn delete(&self, id: &SessionId) -> Result<(), Error> {
        let live = match self.sessions.get(id).as_deref() {
            None => return Err(Error::NotFound(id.clone())),
            Some(Slot::Live(s)) => Some(s.clone()),
            Some(Slot::Stored(_)) => None,
        };
        if let Some(session) = live {
            session.close("deleted").await;
        }
        if let Some(store) = &self.store {
            store.delete(id).map_err(storage)?;
        }
        self.sessions.remove(id);
        let _ = self.daemon_events.send(DaemonEvent::SessionDeleted {
            session_id: id.clone(),
        });
        Ok(())
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

    /// The session with this id, loaded from the store on first use.
    pub fn get(&self, id: &SessionId) -> Result<Arc<Session>, Error> {
        if let Some(Slot::Live(s)) = self.sessions.get(id).as_deref() {
            return Ok(s.clone());
        }
        let mut slot = self
            .sessions
            .get_mut(id)
            .ok_or_else(|| Error::NotFound(id.clone()))?;
        match &*slot {
            Slot::Live(s) => Ok(s.clone()),
            Slot::Stored(record) => {
                let session = self.restore(record)?;
                *slot = Slot::Live(session.clone());
                Ok(session)
            }
        }
    }

    /// Every session's summary, newest first.
    pub fn summaries(&self) -> Vec<SessionSummary> {
        let mut all: Vec<SessionSummary> = self
            .sessions
            .iter()
            .map(|slot| match slot.value() {
                Slot::Live(s) => s.summary(),
                Slot::Stored(r) => r.summary(),
            })
            .collect();
        all.sort_by(|a, b| b.created.cmp(&a.created));
        all
    }

    fn live(&self) -> Vec<Arc<Session>> {
        self.sessions
            .iter()
            .filter_map(|slot| match slot.value() {
                Slot::Live(s) => Some(s.clone()),
                Slot::Stored(_) => None,
            })
            .collect()
    }

    /// How many sessions there are, and how many are processing.
    pub fn counts(&self) -> (usize, usize) {
        let processing = self
            .live()
            .iter()
            .filter(|s| s.state() == SessionState::Processing)
            .count();
        (self.sessions.len(), processing)
    }

    /// Aborts every session's work (they stay open), then waits for nothing else to run.
    /// Returns how many were processing.
    pub async fn shutdown(&self) -> usize {
        let sessions = self.live();
        let results = futures::future::join_all(sessions.iter().map(|s| s.abort(false))).await;
        let aborted = results
            .iter()
            .filter(|r| matches!(r, Ok(a) if a.aborted))
            .count();
        let _ = self.daemon_events.send(DaemonEvent::Shutdown {});
        aborted
    }
}
