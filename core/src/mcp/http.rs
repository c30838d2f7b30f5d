//! Streamable HTTP servers: rmcp's client transport (on its own reqwest; sessionless requests
//! to a server that speaks the 2026-07-28 protocol, a session otherwise), with the bearer
//! token read from the variable `bearer_token_env_var` names when the server starts (never
//! stored, logged or shown) and the configured headers; every response bounded by rmcp's
//! size limits, set here.

use super::connect::{Client, lifecycle};
use agentd_proto::McpServerConfig;
use rmcp::ClientServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use std::collections::HashMap;
use std::sync::Once;

/// Longest SSE event or JSON response a server may send.
const MAX_RESPONSE_BYTES: usize = 8 << 20;
/// Longest error body read.
const MAX_ERROR_BYTES: usize = 64 << 10;

/// A session with the server at `url`, initialized.
pub(super) async fn serve(
    client: Client,
    url: &str,
    config: &McpServerConfig,
) -> Result<RunningService<RoleClient, Client>, String> {
    install_crypto();
    let token = match &config.bearer_token_env_var {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            format!(
                "the variable {var} (bearer_token_env_var) is not set in the daemon's environment"
            )
        })?),
        None => None,
    };
    let mut headers = HashMap::new();
    for (name, value) in &config.headers {
        let name = http::HeaderName::try_from(name.as_str())
            .map_err(|_| format!("header {name:?} is not a valid header name"))?;
        let value = http::HeaderValue::try_from(value.as_str())
            .map_err(|_| format!("the value of header {name} is not a valid header value"))?;
        headers.insert(name, value);
    }
    let mut transport_config = StreamableHttpClientTransportConfig::default();
    transport_config.uri = url.into();
    transport_config.auth_header = token;
    transport_config.custom_headers = headers;
    transport_config.max_sse_event_size = MAX_RESPONSE_BYTES;
    transport_config.max_json_response_size = MAX_RESPONSE_BYTES;
    transport_config.max_error_response_size = MAX_ERROR_BYTES;
    let transport = StreamableHttpClientTransport::from_config(transport_config);
    client
        .serve_with_lifecycle(transport, lifecycle())
        .await
        .map_err(|e| format!("the MCP handshake with {url} failed: {e}"))
}

/// rmcp's reqwest has rustls without a crypto provider: ring, the providers' own.
fn install_crypto() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Another part of the process may have installed one first; that one is used.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
