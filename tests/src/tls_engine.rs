//! A remote-looking container engine for the tests: a TLS endpoint on 127.0.0.1 that checks
//! the client's certificate and forwards each connection to the test engine's Unix socket,
//! with a CA, a server certificate (for 127.0.0.1) and a client certificate made here, in
//! the directory layout `DOCKER_CERT_PATH` names (`ca.pem`, `cert.pem`, `key.pem`). The
//! daemon reaches it as `tcp://127.0.0.1:PORT` with `DOCKER_TLS_VERIFY=1`, as it would a
//! dockerd on another machine; the engine behind it is the real one.

use anyhow::{Context, Result};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use tokio::net::{TcpListener, UnixStream};

/// A running TLS endpoint in front of an engine's socket.
pub struct TlsEngine {
    /// The certificate directory (`DOCKER_CERT_PATH`).
    pub certs: tempfile::TempDir,
    /// `tcp://127.0.0.1:PORT` (`DOCKER_HOST`).
    pub host: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsEngine {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsEngine {
    /// Starts the endpoint in front of `socket` (the engine's `unix://` path).
    pub async fn start(socket: &str) -> Result<Self> {
        let certs = tempfile::tempdir()?;
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);
        let server_key = KeyPair::generate()?;
        let mut server = CertificateParams::new(Vec::<String>::new())?;
        server.subject_alt_names = vec![SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST))];
        let server_cert = server.signed_by(&server_key, &issuer)?;
        let client_key = KeyPair::generate()?;
        let client_cert = CertificateParams::new(vec!["agentd-test-client".to_owned()])?
            .signed_by(&client_key, &issuer)?;
        std::fs::write(certs.path().join("ca.pem"), ca_cert.pem())?;
        std::fs::write(certs.path().join("cert.pem"), client_cert.pem())?;
        std::fs::write(certs.path().join("key.pem"), client_key.serialize_pem())?;

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca_cert.der().clone())?;
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()?;
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                vec![CertificateDer::from(server_cert.der().to_vec())],
                PrivateKeyDer::from_pem_slice(server_key.serialize_pem().as_bytes())
                    .context("the server key")?,
            )?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let host = format!("tcp://{}", listener.local_addr()?);
        let socket = socket.trim_start_matches("unix://").to_owned();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                // As dockerd does (Go sets TCP_NODELAY on every connection): without it the
                // relay's small writes meet delayed ACKs.
                let _ = tcp.set_nodelay(true);
                let (acceptor, socket) = (acceptor.clone(), socket.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut engine) = UnixStream::connect(&socket).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut engine).await;
                });
            }
        });
        Ok(Self { certs, host, task })
    }
}
