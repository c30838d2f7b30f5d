//! The `mcpServers` of ACP's `session/new` and `session/load` as agentd's `mcp_servers`:
//! stdio and HTTP servers are forwarded to the session (the daemon starts and reaches them);
//! SSE, which agentd does not speak, is refused with a clear error.

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema as acp;
use agentd_proto::McpServerConfig;
use std::collections::BTreeMap;

/// Longest server name agentd takes (it is part of every tool's name).
const MAX_NAME: usize = 32;

/// The servers as a session's `mcp_servers`, named after the client's names (characters
/// outside letters, digits, `_` and `-` made `_`).
pub(super) fn servers(list: &[acp::McpServer]) -> Result<BTreeMap<String, McpServerConfig>, Error> {
    let mut out = BTreeMap::new();
    for server in list {
        let (name, config) = match server {
            acp::McpServer::Stdio(s) => (
                &s.name,
                McpServerConfig {
                    command: Some(s.command.display().to_string()),
                    args: s.args.clone(),
                    env: s
                        .env
                        .iter()
                        .map(|v| (v.name.clone(), v.value.clone()))
                        .collect(),
                    ..McpServerConfig::default()
                },
            ),
            acp::McpServer::Http(s) => (
                &s.name,
                McpServerConfig {
                    url: Some(s.url.clone()),
                    headers: s
                        .headers
                        .iter()
                        .map(|h| (h.name.clone(), h.value.clone()))
                        .collect(),
                    ..McpServerConfig::default()
                },
            ),
            acp::McpServer::Sse(s) => {
                return Err(Error::invalid_params().data(format!(
                    "MCP server {:?} uses the SSE transport, which agentd does not speak; use its \
                     Streamable HTTP endpoint (type \"http\") or stdio",
                    s.name
                )));
            }
            _ => {
                return Err(Error::invalid_params()
                    .data("an MCP server of a transport agentd does not speak was given"));
            }
        };
        let key = name_of(name);
        if out.insert(key.clone(), config).is_some() {
            return Err(Error::invalid_params().data(format!(
                "two MCP servers are named {key:?} (after replacing characters agentd does not take in names)"
            )));
        }
    }
    Ok(out)
}

fn name_of(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_NAME)
        .collect();
    if clean.is_empty() {
        "server".to_owned()
    } else {
        clean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdio_and_http_are_forwarded_and_sse_refused() {
        let list = vec![
            acp::McpServer::Stdio(
                acp::McpServerStdio::new("my fs", "/usr/bin/fs-server")
                    .args(vec!["--root".into(), "/w".into()]),
            ),
            acp::McpServer::Http(acp::McpServerHttp::new("web", "https://x/mcp")),
        ];
        let forwarded = servers(&list).unwrap();
        assert_eq!(
            forwarded["my_fs"].command.as_deref(),
            Some("/usr/bin/fs-server")
        );
        assert_eq!(forwarded["my_fs"].args, ["--root", "/w"]);
        assert_eq!(forwarded["web"].url.as_deref(), Some("https://x/mcp"));
        let sse = vec![acp::McpServer::Sse(acp::McpServerSse::new(
            "old",
            "https://x/sse",
        ))];
        let err = servers(&sse).unwrap_err();
        assert!(
            format!("{:?}", err.data).contains("SSE transport"),
            "{err:?}"
        );
    }
}
