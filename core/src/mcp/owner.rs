//! The task that owns a session's MCP servers: their connections, states and tools. Everyone
//! else holds an [`Mcp`] handle and asks through its channel; starts, restarts and tool-list
//! refreshes run in tasks of their own and report back, so the owner never waits on a
//! server and keeps answering. Servers start when the session gets its first input
//! ([`Mcp::wake`]), not when it is created or loaded: a session nobody talks to runs none.

use super::connect::{Connection, connect, list_tools};
use super::tool::{LeftOut, McpTool, build_tools};
use super::{Emit, Launcher};
use crate::tools::ToolRegistry;
use agentd_proto::{EventBody, McpServerConfig, McpServerState};
use rmcp::model::Tool;
use rmcp::service::{Peer, RoleClient};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Requests the owner queues at most.
const QUEUE: usize = 64;
/// Most left-out tools an event names (the reason counts them all).
const MAX_LEFT_OUT_NAMED: usize = 256;

/// A request to the owner.
pub(crate) enum Cmd {
    /// The tools to offer now, once no server is starting or refreshing.
    Tools(oneshot::Sender<Arc<ToolRegistry>>),
    /// A connection to call `server` through, (re)started first when it is down, and its
    /// generation (for `Lost`).
    Peer(String, oneshot::Sender<PeerReply>),
    /// A call found the server gone (crashed, closed its pipes).
    Lost {
        server: String,
        generation: u64,
        reason: String,
    },
    /// The server said its tool list changed.
    ListChanged { server: String, generation: u64 },
    Started {
        server: String,
        generation: u64,
        result: Result<Box<(Connection, Vec<Tool>)>, String>,
    },
    Refreshed {
        server: String,
        generation: u64,
        result: Result<Vec<Tool>, String>,
    },
    /// The session has input: start the servers not started yet, and those added later at
    /// once.
    Wake,
    /// The session's servers are now these, and whether its sandbox is read-only.
    Configure(BTreeMap<String, McpServerConfig>, bool),
    /// Stop every server, then reply.
    Stop(oneshot::Sender<()>),
}

/// A connection and the start it belongs to.
pub(super) type PeerReply = Result<(Peer<RoleClient>, u64), String>;

/// A handle on a session's MCP servers.
#[derive(Clone)]
pub(crate) struct Mcp {
    tx: mpsc::Sender<Cmd>,
}

impl Mcp {
    /// Starts the owner of `servers`; they start at [`Mcp::wake`]. A `read_only` session is
    /// offered only their read-only tools.
    pub(crate) fn start(
        launcher: Launcher,
        servers: &BTreeMap<String, McpServerConfig>,
        read_only: bool,
        emit: Emit,
        tasks: &tokio_util::task::TaskTracker,
    ) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let mut owner = Owner {
            launcher,
            servers: BTreeMap::new(),
            emit,
            me: tx.downgrade(),
            awake: false,
            read_only,
            waiting: Vec::new(),
            tools: Arc::new(ToolRegistry::default()),
        };
        owner.configure(servers.clone(), read_only);
        tasks.spawn(owner.run(rx));
        Self { tx }
    }

    /// Starts the servers in the background (the session has input). Never waits; the
    /// first [`Mcp::tools`] wakes them too.
    pub(crate) fn wake(&self) {
        let _ = self.tx.try_send(Cmd::Wake);
    }

    /// The servers' tools, starting them if they are not, and waiting for those starting
    /// (each within its startup timeout).
    pub(crate) async fn tools(&self) -> Arc<ToolRegistry> {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Cmd::Tools(reply)).await.is_err() {
            return Arc::default();
        }
        rx.await.unwrap_or_default()
    }

    pub(super) async fn peer(&self, server: &str) -> PeerReply {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Cmd::Peer(server.to_owned(), reply))
            .await
            .map_err(|_| "the session's MCP servers are stopped".to_owned())?;
        rx.await
            .unwrap_or_else(|_| Err("the session's MCP servers are stopped".to_owned()))
    }

    /// A handle from a weak sender, while the owner runs.
    pub(super) fn upgrade(weak: &mpsc::WeakSender<Cmd>) -> Option<Self> {
        weak.upgrade().map(|tx| Self { tx })
    }

    /// The connection of start `generation` of `server` is gone.
    pub(super) fn lost(&self, server: &str, generation: u64, reason: String) {
        let _ = self.tx.try_send(Cmd::Lost {
            server: server.to_owned(),
            generation,
            reason,
        });
    }

    /// The session's servers are now `servers`: those changed or gone stop, new ones start;
    /// `read_only` says whether its sandbox is read-only now. Never waits (the session's
    /// command handler calls it).
    pub(crate) fn reconfigure(&self, servers: BTreeMap<String, McpServerConfig>, read_only: bool) {
        if self
            .tx
            .try_send(Cmd::Configure(servers, read_only))
            .is_err()
        {
            tracing::warn!("the session's MCP servers are busy; the new server list applies later");
        }
    }

    /// Stops every server (each SIGTERM, then SIGKILL after the grace period).
    pub(crate) async fn stop(&self) {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Cmd::Stop(reply)).await.is_ok() {
            let _ = rx.await;
        }
    }
}

enum State {
    /// Not started yet: the session has had no input since it was created or loaded.
    Asleep,
    Starting,
    Ready(Box<Connection>),
    /// Down: failed to start, or lost; started again on its next use.
    Failed,
}

struct Server {
    config: McpServerConfig,
    /// Counts starts, so a report about an earlier connection is told apart.
    generation: u64,
    state: State,
    /// Its tools as last listed.
    listed: Vec<Tool>,
    /// Those of them not offered (their own names).
    left_out: LeftOut,
    refreshing: bool,
    stale: bool,
    /// Calls waiting for it to start.
    peers: Vec<oneshot::Sender<PeerReply>>,
    /// The start under way: aborting it drops the half-started server, whose process group
    /// is killed with it.
    start: Option<tokio::task::AbortHandle>,
}

struct Owner {
    launcher: Launcher,
    servers: BTreeMap<String, Server>,
    emit: Emit,
    me: mpsc::WeakSender<Cmd>,
    /// Whether the session has had input: servers configured from then on start at once.
    awake: bool,
    /// Whether the session's sandbox is read-only: only read-only tools are offered.
    read_only: bool,
    waiting: Vec<oneshot::Sender<Arc<ToolRegistry>>>,
    tools: Arc<ToolRegistry>,
}

impl Owner {
    async fn run(mut self, mut rx: mpsc::Receiver<Cmd>) {
        // Tools and connections hold weak senders: once the session drops its handle, the
        // channel closes and the servers stop.
        while let Some(cmd) = rx.recv().await {
            match cmd {
                Cmd::Tools(reply) => {
                    self.wake();
                    self.waiting.push(reply);
                }
                Cmd::Wake => self.wake(),
                Cmd::Peer(server, reply) => self.peer(&server, reply),
                Cmd::Lost {
                    server,
                    generation,
                    reason,
                } => self.lost(&server, generation, reason),
                Cmd::ListChanged { server, generation } => {
                    if let Some(s) = self.servers.get_mut(&server)
                        && s.generation == generation
                    {
                        s.stale = true;
                        self.refresh_stale();
                    }
                }
                Cmd::Started {
                    server,
                    generation,
                    result,
                } => self.started(&server, generation, result),
                Cmd::Refreshed {
                    server,
                    generation,
                    result,
                } => self.refreshed(&server, generation, result),
                Cmd::Configure(servers, read_only) => self.configure(servers, read_only),
                Cmd::Stop(reply) => {
                    self.stop_all().await;
                    let _ = reply.send(());
                }
            }
            self.answer_waiting();
        }
        self.stop_all().await;
    }

    fn report(&self, server: &str, state: McpServerState, reason: Option<String>) {
        let ready = state == McpServerState::Ready;
        let tools = ready.then(|| {
            self.tools
                .origins()
                .filter(|(s, _, _)| *s == server)
                .map(|(_, _, name)| name.to_owned())
                .collect()
        });
        let empty = LeftOut::default();
        let left_out = match self.servers.get(server) {
            Some(s) if ready => &s.left_out,
            _ => &empty,
        };
        let mut why = Vec::new();
        if !left_out.limits.is_empty() {
            why.push(format!(
                "{} of its tools are not offered: past the {} a server may offer or the room \
                 their definitions may take, or with a schema that cannot be used",
                left_out.limits.len(),
                McpTool::MAX_PER_SERVER
            ));
        }
        if !left_out.writes.is_empty() {
            why.push(format!(
                "{} of its tools are not offered: the session's sandbox is read-only and the \
                 server does not mark them read-only (readOnlyHint, without destructiveHint)",
                left_out.writes.len()
            ));
        }
        let reason = reason.or_else(|| (!why.is_empty()).then(|| why.join("; ")));
        let named = left_out.limits.iter().chain(&left_out.writes);
        (self.emit)(EventBody::McpServerState {
            server: server.to_owned(),
            state,
            reason,
            tools,
            left_out: named.take(MAX_LEFT_OUT_NAMED).cloned().collect(),
        });
    }

    fn configure(&mut self, wanted: BTreeMap<String, McpServerConfig>, read_only: bool) {
        let sandbox_changed = std::mem::replace(&mut self.read_only, read_only) != read_only;
        let gone: Vec<String> = self
            .servers
            .iter()
            .filter(|(name, s)| {
                wanted
                    .get(*name)
                    .is_none_or(|w| *w != s.config || !w.enabled)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            if let Some(server) = self.servers.remove(&name) {
                self.retire(&name, server);
            }
        }
        for (name, config) in wanted {
            if !config.enabled || self.servers.contains_key(&name) {
                continue;
            }
            self.servers.insert(
                name.clone(),
                Server {
                    config,
                    generation: 0,
                    state: State::Asleep,
                    listed: Vec::new(),
                    left_out: LeftOut::default(),
                    refreshing: false,
                    stale: false,
                    peers: Vec::new(),
                    start: None,
                },
            );
            if self.awake {
                self.launch(&name);
            }
        }
        self.rebuild();
        // The ready servers offer other tools now.
        if sandbox_changed {
            let ready: Vec<String> = self
                .servers
                .iter()
                .filter(|(_, s)| matches!(s.state, State::Ready(_)))
                .map(|(name, _)| name.clone())
                .collect();
            for name in ready {
                self.report(&name, McpServerState::Ready, None);
            }
        }
    }

    /// Starts every server still asleep, at once.
    fn wake(&mut self) {
        if self.awake {
            return;
        }
        self.awake = true;
        let asleep: Vec<String> = self
            .servers
            .iter()
            .filter(|(_, s)| matches!(s.state, State::Asleep))
            .map(|(name, _)| name.clone())
            .collect();
        for name in asleep {
            self.launch(&name);
        }
    }

    /// Ends a server taken out of the set, in the background.
    fn retire(&self, name: &str, server: Server) {
        for peer in server.peers {
            let _ = peer.send(Err(format!("MCP server {name} was stopped")));
        }
        if let Some(start) = server.start {
            start.abort();
        }
        match server.state {
            // Never started: nothing to report.
            State::Asleep => return,
            State::Ready(connection) => {
                tokio::spawn(connection.close());
            }
            State::Starting | State::Failed => {}
        }
        self.report(
            name,
            McpServerState::Stopped,
            Some("removed from the session's configuration".into()),
        );
    }

    fn launch(&mut self, name: &str) {
        let Some(server) = self.servers.get_mut(name) else {
            return;
        };
        server.generation += 1;
        server.state = State::Starting;
        server.stale = false;
        let (launcher, config, generation, me) = (
            self.launcher.clone(),
            server.config.clone(),
            server.generation,
            self.me.clone(),
        );
        let server_name = name.to_owned();
        let start = tokio::spawn(async move {
            let name = server_name;
            let result = connect(&launcher, &name, &config, generation, me.clone())
                .await
                .map(Box::new);
            match me.upgrade() {
                Some(owner) => {
                    let _ = owner
                        .send(Cmd::Started {
                            server: name,
                            generation,
                            result,
                        })
                        .await;
                }
                None => {
                    if let Ok(started) = result {
                        started.0.close().await;
                    }
                }
            }
        });
        server.start = Some(start.abort_handle());
        self.report(name, McpServerState::Starting, None);
    }

    fn started(
        &mut self,
        name: &str,
        generation: u64,
        result: Result<Box<(Connection, Vec<Tool>)>, String>,
    ) {
        let result = result.map(|started| *started);
        let Some(server) = self
            .servers
            .get_mut(name)
            .filter(|s| s.generation == generation)
        else {
            if let Ok((connection, _)) = result {
                tokio::spawn(connection.close());
            }
            return;
        };
        server.start = None;
        let (state, reason) = match result {
            Ok((connection, listed)) => {
                for peer in server.peers.drain(..) {
                    let _ = peer.send(Ok((connection.peer(), generation)));
                }
                server.listed = listed;
                server.state = State::Ready(Box::new(connection));
                (McpServerState::Ready, None)
            }
            Err(why) => {
                tracing::warn!(server = name, "MCP server failed to start: {why}");
                for peer in server.peers.drain(..) {
                    let _ = peer.send(Err(format!("MCP server {name} failed to start: {why}")));
                }
                server.state = State::Failed;
                (McpServerState::Failed, Some(why))
            }
        };
        self.rebuild();
        self.report(name, state, reason);
    }

    fn peer(&mut self, name: &str, reply: oneshot::Sender<PeerReply>) {
        let Some(server) = self.servers.get_mut(name) else {
            let _ = reply.send(Err(format!("the session has no MCP server {name}")));
            return;
        };
        match &server.state {
            State::Ready(connection) => {
                let _ = reply.send(Ok((connection.peer(), server.generation)));
            }
            State::Starting => server.peers.push(reply),
            State::Failed | State::Asleep => {
                server.peers.push(reply);
                self.launch(name);
            }
        }
    }

    fn lost(&mut self, name: &str, generation: u64, reason: String) {
        let Some(server) = self.servers.get_mut(name) else {
            return;
        };
        if generation != server.generation {
            return;
        }
        if let State::Ready(_) = server.state
            && let State::Ready(connection) = std::mem::replace(&mut server.state, State::Failed)
        {
            tracing::warn!(server = name, "MCP server lost: {reason}");
            tokio::spawn(connection.close());
            self.report(
                name,
                McpServerState::Failed,
                Some(format!("{reason}; it is started again on its next use")),
            );
        }
    }

    /// Asks every ready server whose list changed for it again (one listing at a time per
    /// server); an LLM call waits for the listings under way.
    fn refresh_stale(&mut self) {
        for (name, server) in &mut self.servers {
            let State::Ready(connection) = &server.state else {
                continue;
            };
            if !server.stale || server.refreshing {
                continue;
            }
            server.stale = false;
            server.refreshing = true;
            let (peer, me, generation, name) = (
                connection.peer(),
                self.me.clone(),
                server.generation,
                name.clone(),
            );
            let timeout = Duration::from_secs(server.config.startup_timeout_secs());
            tokio::spawn(async move {
                let result = tokio::time::timeout(timeout, list_tools(&peer))
                    .await
                    .unwrap_or_else(|_| Err("tools/list did not answer in time".into()));
                if let Some(owner) = me.upgrade() {
                    let _ = owner
                        .send(Cmd::Refreshed {
                            server: name,
                            generation,
                            result,
                        })
                        .await;
                }
            });
        }
    }

    fn refreshed(&mut self, name: &str, generation: u64, result: Result<Vec<Tool>, String>) {
        let Some(server) = self
            .servers
            .get_mut(name)
            .filter(|s| s.generation == generation)
        else {
            return;
        };
        server.refreshing = false;
        match result {
            // A server repeating the notification costs a listing each time, never an event.
            Ok(listed) if listed != server.listed => {
                server.listed = listed;
                self.rebuild();
                self.report(name, McpServerState::Ready, None);
            }
            Ok(_) => {}
            Err(why) => tracing::warn!(server = name, "MCP tool list refresh failed: {why}"),
        }
        // Changed again while it was being listed.
        self.refresh_stale();
    }

    /// The tools of every server that has listed some, in name order.
    fn rebuild(&mut self) {
        let servers = self
            .servers
            .iter()
            .filter(|(_, s)| matches!(s.state, State::Ready(_) | State::Failed))
            .map(|(name, s)| (name.as_str(), &s.config, s.listed.as_slice()));
        let (tools, left_out) = build_tools(servers, self.read_only, &self.me);
        self.tools = Arc::new(tools);
        for server in self.servers.values_mut() {
            server.left_out = LeftOut::default();
        }
        for (name, names) in left_out {
            if let Some(server) = self.servers.get_mut(&name) {
                server.left_out = names;
            }
        }
    }

    fn answer_waiting(&mut self) {
        let busy = self
            .servers
            .values()
            .any(|s| matches!(s.state, State::Starting) || s.refreshing);
        if busy {
            return;
        }
        for reply in self.waiting.drain(..) {
            let _ = reply.send(self.tools.clone());
        }
    }

    async fn stop_all(&mut self) {
        let mut closing = Vec::new();
        for (name, server) in std::mem::take(&mut self.servers) {
            for peer in server.peers {
                let _ = peer.send(Err(format!("MCP server {name} was stopped")));
            }
            if let Some(start) = server.start {
                start.abort();
            }
            if let State::Ready(connection) = server.state {
                closing.push(connection.close());
                (self.emit)(EventBody::McpServerState {
                    server: name,
                    state: McpServerState::Stopped,
                    reason: None,
                    tools: None,
                    left_out: Vec::new(),
                });
            }
        }
        futures::future::join_all(closing).await;
        self.tools = Arc::default();
    }
}
