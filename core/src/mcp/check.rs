//! `agentd --check-mcp` (which `agentctl doctor` runs): start each enabled server of the
//! config file as a session would, list its tools, stop it, and say which failed.

use super::Launcher;
use super::connect::connect;
use crate::config::Config;
use crate::exec::LocalOptions;
use crate::session::Registry;

/// How one configured MCP server fared when started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpCheck {
    /// The server's name (`[mcp_servers.NAME]`).
    pub server: String,
    /// How many tools it listed, or why it failed.
    pub result: Result<usize, String>,
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
                let result = match connect(launcher, name, c, 0, owner).await {
                    Ok((connection, tools)) => {
                        connection.close().await;
                        Ok(tools.len())
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
