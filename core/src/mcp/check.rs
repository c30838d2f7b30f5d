//! `agentd --check-mcp` (which `agentctl doctor` and `agentctl mcp list` run): start each
//! enabled server of the config file as a session would, list its tools, stop it, and say
//! which tools a session would be offered, or why it failed.

use super::Launcher;
use super::connect::connect;
use super::tool::build_tools;
use crate::config::Config;
use crate::exec::LocalOptions;
use crate::session::Registry;

/// How one configured MCP server fared when started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpCheck {
    /// The server's name (`[mcp_servers.NAME]`).
    pub server: String,
    /// The tools a session would be offered (`mcp__SERVER__TOOL`, in the order the model
    /// sees them) and those left out (the server's own names), or why it failed.
    pub result: Result<(Vec<String>, Vec<String>), String>,
}

/// Starts every enabled server of `config` at once, in the current directory with the
/// environment commands get, each within its startup timeout; lists its tools and stops it.
pub async fn check_mcp_servers(config: &Config) -> Vec<McpCheck> {
    let launcher = Launcher {
        options: LocalOptions {
            env: Registry::env_filter(config),
            ..LocalOptions::default()
        },
        cwd: std::env::current_dir().unwrap_or_else(|_| "/".into()),
    };
    // Nothing listens: the servers' notifications are dropped.
    let owner = tokio::sync::mpsc::channel(1).0.downgrade();
    let checks = config
        .mcp_servers
        .iter()
        .filter(|(_, c)| c.enabled)
        .map(|(name, c)| {
            let (launcher, owner) = (&launcher, owner.clone());
            async move {
                let result = match connect(launcher, name, c, 0, owner.clone()).await {
                    Ok((connection, listed)) => {
                        connection.close().await;
                        let servers = std::iter::once((name.as_str(), c, listed.as_slice()));
                        let (tools, left_out) = build_tools(servers, false, &owner);
                        let offered = tools
                            .origins()
                            .map(|(_, _, offered)| offered.to_owned())
                            .collect();
                        let left_out = left_out.into_iter().flat_map(|(_, l)| l.limits).collect();
                        Ok((offered, left_out))
                    }
                    Err(why) => Err(why),
                };
                McpCheck {
                    server: name.clone(),
                    result,
                }
            }
        });
    futures::future::join_all(checks).await
}
