//! `agentctl mcp list SESSION`: the session's MCP servers, each with its state and tools (or
//! why it failed), read from its config and its `mcp_server_state` events.

use super::stream::{EventStream, Next};
use super::{Context, print, resolve, table};
use crate::error::Result;
use agentd_proto::methods as m;
use agentd_proto::{EventBody, McpServerState, SessionParams};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(clap::Subcommand)]
pub(crate) enum Mcp {
    /// A session's MCP servers: state, tools, or why one failed.
    List {
        /// The session (its id or a unique prefix).
        session: String,
    },
}

/// One server as `mcp list` shows it.
#[derive(Serialize)]
struct Server {
    server: String,
    /// `disabled`, or the last state reported (`configured` before any).
    state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    tools: Vec<String>,
}

impl Mcp {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let Self::List { session } = self;
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
        print(ctx.json, &servers, |servers| {
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
        Ok(0)
    }
}
