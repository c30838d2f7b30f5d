//! Starting one server and taking its tool list: a stdio program through the exec layer
//! (own process group, recorded in the ledger, filtered environment plus its `env`), spoken
//! to with rmcp over its pipes, its stderr logged line by line (bounded); the whole start
//! bounded by the server's startup timeout, and what it lists bounded too. Either transport
//! speaks the 2026-07-28 stateless protocol to a server that knows it (`server/discover`,
//! tool-list changes on a `subscriptions/listen` stream), the 2025-11-25 handshake otherwise.

use super::Launcher;
use super::owner::Cmd;
use crate::exec::{ServerCommand, ServerGroup, start_server};
use agentd_proto::McpServerConfig;
use rmcp::model::{
    ClientConfig, Implementation, PaginatedRequestParams, ProtocolVersion, ServerNotification,
    SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

/// Longest JSON-RPC message a server may send (a longer one is dropped unread).
const MAX_MESSAGE_BYTES: usize = 8 << 20;
/// Most tools one listing may hold, over all its pages.
pub(super) const MAX_LISTED: usize = 4096;
/// Most pages of one listing.
const MAX_PAGES: usize = 64;
/// Most stderr lines of one server start logged; the rest are read and dropped.
const MAX_STDERR_LINES: usize = 1000;
/// Most characters of one stderr line logged.
const MAX_STDERR_LINE: usize = 1000;

/// A started server.
pub(super) struct Connection {
    service: RunningService<RoleClient, Client>,
    group: Option<ServerGroup>,
    /// The task reading tool-list changes on a 2026-07-28 connection.
    listener: Option<tokio::task::AbortHandle>,
}

impl Connection {
    pub(super) fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }

    /// Ends the session with the server, then its processes.
    pub(super) async fn close(self) {
        let Self {
            service,
            group,
            listener,
        } = self;
        if let Some(listener) = listener {
            listener.abort();
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), service.cancel()).await;
        if let Some(group) = group {
            group.stop().await;
        }
    }
}

/// What the server may tell the client: its tool list changed.
#[derive(Clone)]
pub(super) struct Client {
    server: String,
    generation: u64,
    owner: mpsc::WeakSender<Cmd>,
}

impl Client {
    /// Tells the owner the server's tool list changed.
    fn list_changed(&self) {
        if let Some(owner) = self.owner.upgrade() {
            // A full queue already holds work for the owner; a refresh is asked again later.
            let _ = owner.try_send(Cmd::ListChanged {
                server: self.server.clone(),
                generation: self.generation,
            });
        }
    }
}

impl ClientHandler for Client {
    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.list_changed();
    }

    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::default();
        config.client_info = Implementation::new("agentd", env!("CARGO_PKG_VERSION"));
        config
    }
}

/// Starts `name` and lists its tools, within its startup timeout.
pub(super) async fn connect(
    launcher: &Launcher,
    name: &str,
    config: &McpServerConfig,
    generation: u64,
    owner: mpsc::WeakSender<Cmd>,
) -> Result<(Connection, Vec<Tool>), String> {
    let timeout = Duration::from_secs(config.startup_timeout_secs());
    let client = Client {
        server: name.to_owned(),
        generation,
        owner,
    };
    let start = async {
        let mut connection = match (&config.command, &config.url) {
            (Some(program), _) => stdio(launcher, name, program, config, client.clone()).await?,
            (None, Some(url)) => Connection {
                service: super::http::serve(client.clone(), url, config).await?,
                group: None,
                listener: None,
            },
            (None, None) => return Err("it has neither command nor url".to_owned()),
        };
        connection.listener = listen(&connection.peer(), client).await?;
        let tools = list_tools(&connection.peer()).await?;
        Ok((connection, tools))
    };
    match tokio::time::timeout(timeout, start).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "it did not start and list its tools within {} s (startup_timeout_secs)",
            timeout.as_secs()
        )),
    }
}

async fn stdio(
    launcher: &Launcher,
    name: &str,
    program: &str,
    config: &McpServerConfig,
    client: Client,
) -> Result<Connection, String> {
    // Off the async workers: the lookup in PATH, the variables and the spawn (which holds
    // its thread until the program is exec'd) would otherwise compete with the session's
    // own start, which is answering session/create meanwhile.
    let (options, config_owned, cwd) = (
        launcher.options.clone(),
        config.clone(),
        config.cwd.clone().unwrap_or_else(|| launcher.cwd.clone()),
    );
    let program_owned = program.to_owned();
    let process = tokio::task::spawn_blocking(move || {
        start_server(
            &options,
            &ServerCommand {
                program: &program_owned,
                args: &config_owned.args,
                env: &config_owned.env,
                cwd: &cwd,
            },
        )
    })
    .await
    .map_err(|e| format!("cannot start {program}: {e}"))?
    .map_err(|e| format!("cannot start {program}: {e}"))?;
    tracing::info!(
        server = name,
        pid = process.group.pid(),
        "MCP server started"
    );
    tokio::spawn(log_stderr(name.to_owned(), process.stderr));
    let transport = AsyncRwTransport::<RoleClient, _, _>::new(process.stdout, process.stdin)
        .with_max_line_length(MAX_MESSAGE_BYTES);
    // Dropped on failure: the group is killed with it.
    let group = process.group;
    let service = client
        .serve_with_lifecycle(transport, lifecycle())
        .await
        .map_err(|e| format!("the MCP handshake failed: {e}"))?;
    Ok(Connection {
        service,
        group: Some(group),
        listener: None,
    })
}

/// How a connection starts: `server/discover` at 2026-07-28 first, the 2025-11-25
/// `initialize` handshake when the server answers it as a server that predates it.
pub(super) fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// On a 2026-07-28 connection to a server whose tool list can change, the task reading
/// those changes from a `subscriptions/listen` stream (older servers send them unasked, to
/// [`Client`]'s handler).
async fn listen(
    peer: &Peer<RoleClient>,
    client: Client,
) -> Result<Option<tokio::task::AbortHandle>, String> {
    let Some(info) = peer.peer_info() else {
        return Ok(None);
    };
    tracing::info!(
        server = client.server,
        protocol = %info.protocol_version,
        "MCP protocol"
    );
    let changes = info
        .capabilities
        .tools
        .as_ref()
        .is_some_and(|t| t.list_changed == Some(true));
    if info.protocol_version.has_initialize() || !changes {
        return Ok(None);
    }
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut subscription = peer
        .listen(filter)
        .await
        .map_err(|e| format!("subscriptions/listen failed: {e}"))?;
    let task = tokio::spawn(async move {
        while let Ok(Some(notification)) = subscription.next().await {
            if let ServerNotification::ToolListChangedNotification(_) = notification {
                client.list_changed();
            }
        }
    });
    Ok(Some(task.abort_handle()))
}

/// Every page of the server's tool list, up to [`MAX_LISTED`] tools and [`MAX_PAGES`] pages.
pub(super) async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<Tool>, String> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let page = peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        tools.extend(page.tools);
        if tools.len() >= MAX_LISTED {
            tools.truncate(MAX_LISTED);
            break;
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok(tools)
}

/// Logs the server's stderr, each line cut to [`MAX_STDERR_LINE`] bytes, the first
/// [`MAX_STDERR_LINES`] lines only; the rest is read and dropped, so the server never blocks
/// on it and no line is held whole.
async fn log_stderr(server: String, mut stderr: tokio::net::unix::pipe::Receiver) {
    let mut buf = [0u8; 8192];
    let mut line = Vec::new();
    let mut logged = 0;
    let mut log = |line: &mut Vec<u8>| {
        if logged < MAX_STDERR_LINES {
            let text = String::from_utf8_lossy(line);
            tracing::info!(server = %server, "MCP server stderr: {text}");
            logged += 1;
            if logged == MAX_STDERR_LINES {
                tracing::info!(server = %server, "MCP server stderr: further lines are not logged");
            }
        }
        line.clear();
    };
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for chunk in buf[..n].split_inclusive(|&b| b == b'\n') {
            let (text, ends) = match chunk.strip_suffix(b"\n") {
                Some(text) => (text, true),
                None => (chunk, false),
            };
            let room = MAX_STDERR_LINE.saturating_sub(line.len());
            line.extend_from_slice(&text[..text.len().min(room)]);
            if ends {
                log(&mut line);
            }
        }
    }
    if !line.is_empty() {
        log(&mut line);
    }
}
