//! Every session of the daemon, by id. Creating a session resolves its provider, model and
//! profile from the daemon's configuration. Sessions stored by an earlier run are listed from
//! their records and loaded on first use; loaded sessions that sit idle and unwatched are
//! unloaded again, so memory follows the sessions in use, not the sessions that exist.
//!
//! Loading and unloading happen outside the map's locks: the slot is marked busy, the disk
//! work runs in its own task, and lookups of a busy slot wait for it.

use super::{Error, History, Restored, Session, SessionSpec, Template};
use crate::config::{Config, Price, ProviderConfig};
use crate::exec::{
    EnvFilter, EnvPolicy, ExecutionEnvironment, LocalExecutionEnvironment, LocalOptions, ProcessId,
    ProcessLedger, ReadOnly,
};
use crate::llm::{Provider, ProviderSet, RetryPolicy};
use crate::profile::Profile;
use crate::store::{ParentLink, ProcessRecords, RecordedGroup, SessionFiles, SessionRecord, Store};
use crate::tools::SpawnRequest;
use agentd_proto::{
    ConfigPatch, CreateParams, DaemonEvent, EntryId, ForkOrigin, ProviderKind, SandboxMode,
    SessionId, SessionSnapshot, SessionState, SessionSummary,
};
use dashmap::DashMap;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
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
    /// sessions live in memory only). Must be called inside a tokio runtime: it starts the
    /// recovery of sessions that were processing when the daemon stopped, and the unloading
    /// of idle ones.
    pub fn new(config: Arc<Config>, store: Option<Store>) -> Arc<Self> {
        let http = crate::llm::http_client();
        let mut providers = ProviderSet::default();
        for p in config.providers.values().filter(|p| p.is_usable()) {
            let provider: Arc<dyn Provider> = crate::llm::client(http.clone(), p);
            providers.insert(&p.name, provider);
        }
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
            prices: Arc::new(config.pricing.clone()),
            config,
            providers,
            daemon_events: broadcast::channel(256).0,
            tasks: TaskTracker::new(),
            cancel: CancellationToken::new(),
            retry: RetryPolicy::default(),
            me: me.clone(),
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
        if let Some(after) = registry.config.evict_idle_after {
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
        for warning in loaded.warnings {
            tracing::warn!("{warning}");
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

    fn environment(&self, cwd: PathBuf, read_only: bool) -> Arc<dyn ExecutionEnvironment> {
        let tools = &self.config.tools;
        let local = LocalExecutionEnvironment::with_options(
            cwd,
            LocalOptions {
                env: EnvFilter::new(EnvPolicy::InheritAll).with(
                    &tools.env_deny,
                    &tools.env_allow,
                    self.config.key_variables(),
                ),
                ledger: self.ledger.clone(),
            },
        );
        if read_only {
            Arc::new(ReadOnly(local))
        } else {
            Arc::new(local)
        }
    }

    /// A spec for session `id` from its parts.
    fn spec(&self, id: SessionId, new: NewSession, files: Option<SessionFiles>) -> SessionSpec {
        let NewSession {
            template,
            title,
            history,
            forked_from,
            parent,
        } = new;
        SessionSpec {
            id,
            env: self.environment(template.cwd.clone(), template.read_only),
            cwd: template.cwd,
            title,
            profile: template.profile,
            providers: self.providers.clone(),
            config: template.config,
            instructions: template.instructions,
            retry: self.retry.clone(),
            prices: self.prices.clone(),
            read_only: template.read_only,
            files,
            history,
            forked_from,
            restored: None,
            parent,
            registry: Some(self.me.clone()),
            cancel: self.cancel.child_token(),
        }
    }

    /// Creates the session's directory (when the registry has a store) and starts it.
    async fn start(&self, new: NewSession) -> Result<Arc<Session>, Error> {
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
        let spec = self.spec(id.clone(), new, files);
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
        };
        let new = NewSession {
            template,
            title: record.title.clone(),
            history: History::restore(loaded.entries, record.leaf.clone(), record.history_len),
            forked_from: record.forked_from.clone(),
            parent: record.parent.clone(),
        };
        let mut spec = self.spec(id, new, Some(files));
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

    /// The daemon configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Daemon-wide notifications (session created, state changed).
    pub fn daemon_events(&self) -> broadcast::Receiver<DaemonEvent> {
        self.daemon_events.subscribe()
    }

    /// Creates and starts a session.
    pub async fn create(&self, params: CreateParams) -> Result<Arc<Session>, Error> {
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
            if params.read_only && patch.sandbox.is_some_and(|m| m != SandboxMode::ReadOnly) {
                return Err(Error::InvalidConfig(
                    "sandbox: a read-only session's sandbox is always read_only".into(),
                ));
            }
            config.apply(patch);
            crate::config::validate_session_config(&config)
                .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        }
        let profile = match params.profile.as_deref() {
            Some(name) => Profile::named(name).map_err(|e| Error::InvalidConfig(e.to_string()))?,
            None => Profile::for_provider(self.config.providers[provider_name].kind),
        };
        crate::tools::session_tools(&profile.tools, &config).map_err(Error::InvalidConfig)?;
        self.start(NewSession {
            template: Template {
                cwd,
                profile,
                config,
                instructions: params.instructions,
                read_only: params.read_only,
            },
            title: params.title,
            history: History::default(),
            forked_from: None,
            parent: None,
        })
        .await
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
            let cwd = template.cwd.join(path);
            if !inside || !cwd.is_dir() {
                return Err(Error::InvalidParams(format!(
                    "working_dir {dir:?} must be an existing subdirectory of {}",
                    template.cwd.display()
                )));
            }
            // The child works in a part of its parent's tree and may write where it may.
            let parent_cwd = std::mem::replace(&mut template.cwd, cwd);
            template.config.sandbox_writable_roots.push(parent_cwd);
        }
        if let Some(model) = request.model {
            template.config.model = model;
        }
        template.config.max_turns = request.max_turns.unwrap_or(0);
        let title: String = request.task.chars().take(60).collect();
        self.start(NewSession {
            template,
            title: Some(format!("subagent: {title}")),
            history: History::default(),
            forked_from: None,
            parent: Some(ParentLink {
                session_id: parent.clone(),
                depth: depth + 1,
            }),
        })
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
        self.start(NewSession {
            template: source.template(),
            title: title.or_else(|| source.title().map(str::to_owned)),
            history: History::restore(copied, leaf.clone(), len),
            forked_from: Some(ForkOrigin {
                session_id: id.clone(),
                entry_id: leaf,
            }),
            parent: None,
        })
        .await
    }

    /// Closes a session if it is open and deletes it with everything stored about it.
    pub async fn delete(&self, id: &SessionId) -> Result<(), Error> {
        let session = self.get(id).await?;
        session.close("deleted").await;
        // Nothing may be written into the directory while it is removed: an unloaded session
        // has written everything; a watched one keeps its task for its subscribers, and
        // writes nothing after what it has queued.
        if session.evict().await.is_none() {
            session.saved().await;
        }
        drop(session);
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
    pub async fn set_config(
        &self,
        id: &SessionId,
        mut patch: ConfigPatch,
    ) -> Result<SessionSnapshot, Error> {
        let session = self.get(id).await?;
        if let Some(name) = &patch.provider {
            let p = self.usable(name)?;
            patch.model.get_or_insert_with(|| p.default_model.clone());
            patch
                .context_window_tokens
                .get_or_insert(p.context_window_tokens);
        }
        session.set_config(patch).await?;
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
            .map(|slot| match slot.value() {
                Slot::Live(s) => s.summary(),
                Slot::Stored(r) | Slot::Busy(r, _) => r.summary(),
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
                Slot::Stored(_) | Slot::Busy(..) => None,
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
