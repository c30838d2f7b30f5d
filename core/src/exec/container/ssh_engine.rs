//! `ssh://[USER@]HOST[:PORT]` engines: the Engine API spoken over `docker system dial-stdio`
//! (or `podman system dial-stdio`) run on the engine's machine through the SSH environment's
//! connection to it (`exec/ssh`: one master per host, host keys checked against the
//! known-hosts file and never added, no prompt), as bollard's custom transport. HOST may name
//! a `[hosts.NAME]` entry, whose host name, user, port, key, ssh configuration and
//! known-hosts file apply (the address's user and port first; the registry resolves it into
//! [`EngineAddress::ssh`]).
//!
//! Each HTTP connection of the engine client is one `dial-stdio` on a channel of the master;
//! hyper keeps a few idle ones for the next requests, and an exec's attach stream holds its
//! own for as long as the command runs, so each command takes one new connection. A channel
//! costs the remote user's shell startup (sshd runs the command through it, and bash reads
//! `~/.bashrc` for ssh commands): so one spare is always dialled ahead, and a command after
//! the model's turn finds it ready. A master that died is started again by the next
//! connection, as for the SSH environment.

use super::super::Error;
use super::super::ssh::{Dialed, MuxClient, SshConnections};
use super::engine::EngineAddress;
use bollard::{BollardRequest, ClientVersion, Docker};
use futures::future::BoxFuture;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

/// Finds the engine's CLI on the remote `PATH`: `docker`, else `podman`.
const FIND: &str = r#"for p in docker podman; do
  command -v "$p" >/dev/null 2>&1 && { printf '%s\n' "$p"; exit 0; }
done
echo "neither docker nor podman is on the remote PATH" >&2; exit 127"#;
/// Relays the stream to the remote's engine: `$1` the CLI [`FIND`] named.
const DIAL: &str = r#"exec "$1" system dial-stdio"#;
/// How long finding the CLI may take once connected.
const FIND_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle connections (each an ssh channel and a `dial-stdio`) kept for the next requests...
const MAX_IDLE: usize = 2;
/// ...for this long.
const IDLE: Duration = Duration::from_secs(30);

/// The parts of an `ssh://` address.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SshAddress {
    pub(crate) user: Option<String>,
    /// A `[hosts.NAME]` name, or a host name, address or ssh configuration alias.
    pub(crate) host: String,
    pub(crate) port: Option<u16>,
}

/// Parses `ssh://[USER@]HOST[:PORT][/]` (HOST may be `[IPv6]`). A password or a path is
/// refused, the message never repeating the address (it may hold a password).
pub(crate) fn parse(address: &str) -> Result<SshAddress, String> {
    let rest = address
        .strip_prefix("ssh://")
        .ok_or("not an ssh:// address")?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains('/') {
        return Err(
            "an ssh:// engine address takes no path: the remote's default engine is \
                    used (its DOCKER_HOST, or podman's own socket)"
                .into(),
        );
    }
    let (user, host_port) = match authority.rsplit_once('@') {
        Some((user, rest)) => (Some(user), rest),
        None => (None, authority),
    };
    if let Some(user) = user {
        if user.contains(':') {
            return Err(
                "an ssh:// engine address holds a password, which is never used (keys \
                        or the ssh agent authenticate, without a prompt): remove it"
                    .into(),
            );
        }
        if !plain(user) {
            return Err("the user in the ssh:// engine address is not a user name".into());
        }
    }
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or("an unclosed [ in the ssh:// address")?;
        (host, after.strip_prefix(':'))
    } else {
        match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    let port = port
        .map(|p| p.parse::<u16>().ok().filter(|&p| p > 0))
        .map(|p| p.ok_or("the port in the ssh:// engine address is not a port"))
        .transpose()?;
    if !plain(host) {
        return Err("the host in the ssh:// engine address is not a host name".into());
    }
    Ok(SshAddress {
        user: user.map(str::to_owned),
        host: host.to_owned(),
        port,
    })
}

/// A name that is passed to `ssh` as one argument and cannot be taken for an option.
fn plain(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
}

/// `address` for messages and logs: an `ssh://` address's password left out.
pub(super) fn shown(address: &str) -> std::borrow::Cow<'_, str> {
    let Some(rest) = address.strip_prefix("ssh://") else {
        return address.into();
    };
    match rest.split_once('@') {
        Some((user, host)) if user.contains(':') => {
            let user = user.split(':').next().unwrap_or_default();
            format!("ssh://{user}@{host}").into()
        }
        _ => address.into(),
    }
}

/// A client for the engine at `address` (an `ssh://` one) over the connection `ssh` holds
/// to its host: the host reached (its key known), the engine's CLI found there.
pub(super) async fn docker(
    address: &EngineAddress,
    ssh: &SshConnections,
    timeout: u64,
    version: &ClientVersion,
) -> Result<Docker, Error> {
    let target = match (parse(&address.host), &address.ssh) {
        (Err(why), _) => return Err(Error::Unavailable(why)),
        (Ok(_), Some(target)) => target,
        (Ok(_), None) => {
            return Err(Error::Unavailable(
                "the ssh:// engine's connection was not resolved".into(),
            ));
        }
    };
    let link = ssh.get(target)?;
    link.open().await?;
    let found = link
        .check("finding docker or podman", FIND, &[], 64, FIND_TIMEOUT)
        .await?;
    let program = match (found.code, found.stdout.as_slice()) {
        (Some(0), b"docker\n") => "docker",
        (Some(0), b"podman\n") => "podman",
        (Some(0), _) => {
            return Err(Error::Unavailable(format!(
                "ssh host {}: finding docker or podman gave an unexpected answer",
                target.label
            )));
        }
        _ => {
            let why: String = found.stderr.trim().chars().take(500).collect();
            return Err(Error::Unavailable(format!(
                "ssh host {}: {why} (the engine's CLI runs `system dial-stdio` there)",
                target.label
            )));
        }
    };
    let client = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(MAX_IDLE)
        .pool_idle_timeout(IDLE)
        .build(Dialer {
            link,
            program,
            spare: Arc::default(),
        });
    let transport = move |request: BollardRequest| {
        let client = client.clone();
        async move {
            client
                .request(request)
                .await
                .map_err(|e| bollard::errors::Error::IOError {
                    err: std::io::Error::other(crate::llm::error_chain(&e)),
                })
        }
    };
    // "docker" as the host, as the docker CLI names an engine it dials.
    Docker::connect_with_custom_transport(transport, Some("http://docker"), timeout, version)
        .map_err(|e| Error::Unavailable(e.to_string()))
}

/// hyper's connector: each connection a `dial-stdio` on a channel of the master, which it
/// starts again if it died; the next one is dialled as one is handed out.
#[derive(Clone)]
struct Dialer {
    link: Arc<super::super::ssh::Connection>,
    program: &'static str,
    /// The connection dialled ahead (its remote side starting while unused).
    spare: Arc<Mutex<Option<Dialed>>>,
}

impl tower_service::Service<hyper::Uri> for Dialer {
    type Response = Stream;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Stream, Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: hyper::Uri) -> Self::Future {
        let (link, program, spare) = (self.link.clone(), self.program, self.spare.clone());
        Box::pin(async move {
            link.open().await?;
            let next = link.dial(DIAL, &[program])?;
            let ready = spare
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .replace(next)
                .and_then(|mut ready| ready.alive().then_some(ready));
            let dialed = match ready {
                Some(ready) => ready,
                None => link.dial(DIAL, &[program])?,
            };
            Ok(Stream::new(dialed))
        })
    }
}

/// One `dial-stdio`: its stdout read, its stdin written; dropped, its channel closes.
struct Stream {
    stdin: TokioIo<tokio::process::ChildStdin>,
    stdout: TokioIo<tokio::process::ChildStdout>,
    _client: MuxClient,
}

impl Stream {
    fn new(dialed: Dialed) -> Self {
        Self {
            stdin: TokioIo::new(dialed.stdin),
            stdout: TokioIo::new(dialed.stdout),
            _client: dialed.client,
        }
    }
}

impl hyper::rt::Read for Stream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stdout).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for Stream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stdin).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stdin).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stdin).poll_shutdown(cx)
    }
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_and_passwords_and_paths_are_refused_unrepeated() {
        let parsed = |a: &str| parse(a).map(|s| (s.user, s.host, s.port));
        assert_eq!(parsed("ssh://box"), Ok((None, "box".into(), None)));
        assert_eq!(
            parsed("ssh://me@10.0.0.2:2222/"),
            Ok((Some("me".into()), "10.0.0.2".into(), Some(2222)))
        );
        assert_eq!(
            parsed("ssh://me@[::1]:22"),
            Ok((Some("me".into()), "::1".into(), Some(22)))
        );
        for bad in [
            "ssh://me:hunter2@box",
            "ssh://box/var/run/docker.sock",
            "ssh://-oProxyCommand=x",
            "ssh://box:0",
            "ssh://box:99999",
            "ssh://me@",
            "ssh://a b",
            "ssh://[::1",
        ] {
            let why = parse(bad).expect_err(bad);
            assert!(!why.contains("hunter2"), "{why}");
        }
        assert_eq!(shown("ssh://me:hunter2@box:22"), "ssh://me@box:22");
        assert_eq!(shown("ssh://me@box"), "ssh://me@box");
        assert_eq!(shown("tcp://a:b@box"), "tcp://a:b@box");
    }
}
