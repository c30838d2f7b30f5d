//! Every session of the daemon, by id. Creating a session resolves its provider, model and
//! profile from the daemon's configuration. Sessions stored by an earlier run are listed from
//! their records and loaded on first use; loaded sessions that sit idle and unwatched are
//! unloaded again, so memory follows the sessions in use, not the sessions that exist.
//!
//! The registry is one struct whose work is split by concern:
//! - `slots`: the map of sessions (stored, busy, live, damaged), loading, unloading, deleting;
//! - `create`: `session/create`, forks and config switches, checked against the current config;
//! - `build`: making a session from its parts: its spec, execution environment and directory;
//! - `current`: the config new sessions are made from, replaced by reloads and credentials;
//! - `subagents`: spawning a session's children within its limits, and the [`Family`]
//!   through which a session reaches its own children and parent, never the registry;
//! - `ledger`: the process groups every environment records, for the next start to end.

mod build;
mod create;
mod current;
mod ledger;
mod slots;
mod subagents;

use super::Error;
use crate::config::Config;
use crate::exec::{ContainerHost, ProcessLedger, ProtectedPaths, SshConnections};
use crate::llm::RetryPolicy;
use crate::store::Store;
use agentd_proto::{DaemonEvent, SessionId};
use build::hidden_from_commands;
use current::CurrentCell;
use dashmap::DashMap;
use ledger::Ledger;
use slots::{Slot, evict_idle};
use std::path::PathBuf;
use std::sync::{Arc, Weak};
pub(crate) use subagents::Family;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The daemon's sessions.
pub struct Registry {
    sessions: DashMap<SessionId, Slot>,
    store: Option<Store>,
    /// The config for new sessions.
    current: CurrentCell,
    daemon_events: broadcast::Sender<DaemonEvent>,
    /// Session tasks and the registry's own background work, awaited at shutdown.
    tasks: TaskTracker,
    /// The root of the cancellation tree: daemon → session → turn → tool call.
    cancel: CancellationToken,
    retry: RetryPolicy,
    /// Itself, for the tasks it starts and the [`Family`] of each session.
    me: Weak<Registry>,
    /// Where every environment records its process groups (the store's `groups.json`), so
    /// the next start ends what a crash left; `None` without a store.
    ledger: Option<Arc<dyn ProcessLedger>>,
    /// The SSH connections of remote sessions, one per host, shared by the sessions on it.
    ssh: Arc<SshConnections>,
    /// What container sessions share: the label naming this daemon, where their control
    /// directories go.
    containers: Arc<ContainerHost>,
    /// agentd's own files, which no environment's file operations open.
    protected: Arc<ProtectedPaths>,
    /// What sandboxed commands must not see: see [`hidden_from_commands`].
    hidden: Arc<[PathBuf]>,
    /// The disk cap all sessions' checkpoints share; `None` without a store.
    checkpoints: Option<Arc<crate::checkpoint::Budget>>,
    /// What the last discoveries of skills and commands read, for the next session's.
    skill_files: Arc<crate::skills::Cache>,
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
        let evict_idle_after = config.evict_idle_after;
        let hidden = hidden_from_commands(&protected);
        let checkpoints = store.as_ref().map(|s| {
            crate::checkpoint::Budget::new(s.dir().to_owned(), config.checkpoints.max_total_bytes)
        });
        let ssh = Arc::new(SshConnections::new(
            agentd_proto::socket::runtime_dir(nix::unistd::geteuid().as_raw()).join("ssh"),
        ));
        let containers = Arc::new(ContainerHost::new(
            store.as_ref().map_or_else(
                || format!("embedded-{}", crate::exec::run_id()),
                |s| s.dir().parent().unwrap_or(s.dir()).display().to_string(),
            ),
            agentd_proto::socket::runtime_dir(nix::unistd::geteuid().as_raw()).join("containers"),
            store
                .as_ref()
                .map(|s| s.dir().parent().unwrap_or(s.dir()).to_owned()),
            ssh.clone(),
        ));
        let current = CurrentCell::new(config);
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
            daemon_events: broadcast::channel(256).0,
            tasks: TaskTracker::new(),
            cancel: CancellationToken::new(),
            retry: RetryPolicy::default(),
            me: me.clone(),
            ssh,
            containers: containers.clone(),
            protected: Arc::new(protected),
            hidden,
            checkpoints,
            skill_files: Arc::default(),
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
        if registry.store.is_some() {
            registry.tasks.spawn(async move {
                let removed = containers.sweep().await;
                if removed > 0 {
                    tracing::warn!(removed, "removed session containers a previous agentd left");
                }
            });
        }
        if let Some(after) = evict_idle_after {
            registry
                .tasks
                .spawn(evict_idle(Arc::downgrade(&registry), after));
        }
        registry
    }

    /// The store's sessions directory, if sessions are stored.
    pub fn store_dir(&self) -> Option<&std::path::Path> {
        self.store.as_ref().map(Store::dir)
    }

    /// Daemon-wide notifications (session created, state changed).
    pub fn daemon_events(&self) -> broadcast::Receiver<DaemonEvent> {
        self.daemon_events.subscribe()
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
}
