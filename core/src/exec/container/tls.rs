//! The transport to an engine over TLS (`https://`, or `tcp://` with `DOCKER_TLS_VERIFY`), as
//! docker's own client makes it: the engine's certificate checked against `ca.pem` alone (not
//! the system's roots, which would accept any public certificate for the host) and the client
//! known by `cert.pem` and `key.pem`.
//!
//! Written here rather than taken from bollard's `ssl` feature, whose client keeps no idle
//! connection (a TCP and TLS handshake for every request, four or so per command) and leaves
//! Nagle on, so a request written in pieces waits for a delayed ACK: 40 ms a command, measured
//! (`agentd-bench container`).

use bollard::{BollardRequest, ClientVersion, Docker};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How long an idle connection is kept for the next request.
const IDLE: Duration = Duration::from_secs(30);
/// Most idle connections kept: commands of a few sessions at once.
const MAX_IDLE: usize = 8;

/// A client for the engine at `host` (`tcp://` or `https://`) with the certificates in
/// `certs`. Fails, naming the file, when one is missing or is not what it should be.
pub(super) fn connect(
    host: &str,
    certs: &Path,
    timeout: u64,
    version: &ClientVersion,
) -> Result<Docker, String> {
    let config = client_config(certs)?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only()
        .enable_http1()
        .wrap_connector(http);
    let client = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(IDLE)
        .pool_max_idle_per_host(MAX_IDLE)
        .build(https);
    let address = format!(
        "https://{}",
        host.trim_start_matches("tcp://")
            .trim_start_matches("https://")
    );
    Docker::connect_with_custom_transport(
        move |request: BollardRequest| {
            let client = client.clone();
            Box::pin(async move {
                // hyper's own message is "client error (Connect)": the cause (a certificate
                // refused, a connection reset) is further down.
                client.request(request).await.map_err(|e| {
                    bollard::errors::Error::from(std::io::Error::other(crate::llm::error_chain(&e)))
                })
            })
        },
        Some(address),
        timeout,
        version,
    )
    .map_err(|e| e.to_string())
}

/// The TLS settings: `ca.pem` as the only root, `cert.pem` and `key.pem` as the client's
/// identity, the workspace's one crypto provider (ring).
fn client_config(certs: &Path) -> Result<rustls::ClientConfig, String> {
    let file = |name: &str| certs.join(name);
    let bad = |name: &str, e: &dyn std::fmt::Display| format!("{}: {e}", file(name).display());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(file("ca.pem")).map_err(|e| bad("ca.pem", &e))? {
        roots
            .add(cert.map_err(|e| bad("ca.pem", &e))?)
            .map_err(|e| bad("ca.pem", &e))?;
    }
    if roots.is_empty() {
        return Err(bad("ca.pem", &"no certificate in it"));
    }
    let chain = CertificateDer::pem_file_iter(file("cert.pem"))
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| bad("cert.pem", &e))?;
    let key = PrivateKeyDer::from_pem_file(file("key.pem")).map_err(|e| bad("key.pem", &e))?;
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| bad("cert.pem", &e))
}
