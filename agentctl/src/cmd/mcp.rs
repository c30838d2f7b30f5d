//! `agentctl mcp list SESSION`: the session's MCP servers, each with its state and tools (or
//! why it failed), read from its config and its `mcp_server_state` events. Without a session:
//! the config file's servers, each started and stopped by `agentd --check-mcp --json` (no
//! daemon needed).

use super::stream::{EventStream, Next};
use super::{Context, print, resolve, table};
use crate::daemon;
use crate::error::{Failure, Result};
use agentd_proto::methods as m;
use agentd_proto::{EventBody, McpServerState, SessionParams};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(clap::Subcommand)]
pub(crate) enum Mcp {
    /// A session's MCP servers: state, tools, or why one failed. Without a session, the
    /// config file's servers, each started (as a session would), listed and stopped.
    List {
        /// The session (its id or a unique prefix).
        session: Option<String>,
    },
}

/// One server as `mcp list` shows it.
#[derive(Serialize, Deserialize)]
struct Server {
    server: String,
    /// `disabled`, or the last state reported (`configured` before any).
    state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    tools: Vec<String>,
}

/// `mcp list` without a session: the config file's servers, started and stopped by
/// `agentd --check-mcp --json`.
pub(crate) fn list_configured(json: bool) -> Result<u8> {
    let out = std::process::Command::new(daemon::agentd_binary())
        .args(["--check-mcp", "--json"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| Failure::failed(format!("cannot run agentd --check-mcp: {e}")))?;
    let servers: Vec<Server> = serde_json::from_slice(&out.stdout).map_err(|_| {
        Failure::failed(format!(
            "agentd --check-mcp failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    })?;
    show(json, &servers);
    Ok(0)
}

/// Prints `servers`: JSON, or a table of state and tools (or why one failed).
fn show(json: bool, servers: &Vec<Server>) {
    print(json, servers, |servers| {
        let mut rows = vec![vec!["SERVER".into(), "STATE".into(), "TOOLS".into()]];
        for s in servers {
            let detail = match &s.reason {
                Some(r) => r.clone(),
                None => s.tools.join(", "),
            };
            rows.push(vec![s.server.clone(), s.state.clone(), detail]);
        }
        for line in table(&rows) {
            println!("{line}");
        }
    });
}

impl Mcp {
    /// `mcp list` without a session needs no daemon.
    pub(crate) fn offline(&self) -> bool {
        matches!(self, Self::List { session: None })
    }

    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let Self::List { session } = self;
        let Some(session) = session else {
            return list_configured(ctx.json);
        };
        let session_id = resolve(&ctx.conn, &session).await?;
        let snapshot = ctx
            .conn
            .call::<m::SessionGet>(SessionParams {
                session_id: session_id.clone(),
            })
            .await?;
        let mut servers: BTreeMap<String, Server> = snapshot
            .config
            .mcp_servers
            .iter()
            .map(|(name, c)| {
                let state = if c.enabled { "configured" } else { "disabled" };
                (
                    name.clone(),
                    Server {
                        server: name.clone(),
                        state: state.to_owned(),
                        reason: None,
                        tools: Vec::new(),
                    },
                )
            })
            .collect();
        if snapshot.last_seq > 0 {
            let mut stream = EventStream::open(&ctx.conn, session_id, 0, ctx.json).await?;
            loop {
                let event = match stream.next().await? {
                    Next::Event(e) => e,
                    Next::End(_) => break,
                };
                if let EventBody::McpServerState {
                    server,
                    state,
                    reason,
                    tools,
                    ..
                } = &event.body
                    && let Some(entry) = servers.get_mut(server)
                {
                    entry.state = state.to_string();
                    entry.reason = reason.clone();
                    if let Some(tools) = tools {
                        entry.tools = tools.clone();
                    } else if *state != McpServerState::Ready {
                        entry.tools.clear();
                    }
                }
                if event.seq >= snapshot.last_seq {
                    break;
                }
            }
        }
        let servers: Vec<Server> = servers.into_values().collect();
        show(ctx.json, &servers);
        Ok(0)
    }
}
