//! The container engine, spoken to through the Docker Engine API (`bollard`; Podman serves the
//! same API): where it is, the version both sides speak, and the session containers it holds.
//!
//! Every container agentd makes carries three labels: [`DAEMON_LABEL`] (which daemon: its
//! state directory), [`RUN_LABEL`] (which run of it) and [`SESSION_LABEL`]. A daemon removes
//! its containers when their sessions end, and at start-up [`Engine::sweep`] removes those
//! its earlier runs left behind (a `kill -9`, an OOM kill), as `groups.json` does for
//! local processes.

use super::super::Error;
use super::super::ssh::{SshConnections, SshTarget};
use super::ssh_engine;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};
use bollard::{ClientVersion, Docker};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Which daemon made a container: its state directory.
pub(crate) const DAEMON_LABEL: &str = "dev.agentd.daemon";
/// Which run of that daemon (`exec::run_id`).
pub(crate) const RUN_LABEL: &str = "dev.agentd.run";
/// Which session the container serves.
pub(crate) const SESSION_LABEL: &str = "dev.agentd.session";
/// Where the control directory (the command scripts and output FIFOs) is mounted, read-only.
pub(super) const CONTROL_MOUNT: &str = "/.agentd";
/// How long one API request may take (a create, a removal); an exec's stream is not bound by
/// it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long an engine may take to answer the first request (the version): one that hangs is
/// given up on at session/create.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The engine docker reaches without `DOCKER_HOST`.
const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";
/// PID 2 of the container (under the engine's init): waits for commands, forever.
const KEEP_ALIVE: &str = "while :; do sleep 86400; done";

/// A container engine, its API version negotiated.
#[derive(Clone)]
pub(crate) struct Engine {
    docker: Docker,
    address: EngineAddress,
}

/// What a session's container is made from and may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContainerSpec {
    /// The engine's address (`unix:///run/docker.sock`, `tcp://HOST:2375`,
    /// `ssh://USER@HOST`); `None`: `DOCKER_HOST`, else the local socket.
    pub(crate) engine: Option<String>,
    /// For an `ssh://` engine, how its host is reached: the address's user, host and port
    /// over the `[hosts.NAME]` entry its host names (resolved by the registry).
    pub(crate) ssh: Option<SshTarget>,
    /// The image, which the engine must have (agentd never pulls).
    pub(crate) image: String,
    /// Whether commands may reach the network.
    pub(crate) network: bool,
    /// Memory cap in MiB (swap included).
    pub(crate) memory_mb: Option<u64>,
    /// Most processes at once.
    pub(crate) pids_limit: Option<u64>,
    /// CPU share in thousandths of a CPU.
    pub(crate) millicpus: Option<u64>,
    /// The user commands run as (`UID[:GID]` or a name the image knows); `None`: the
    /// daemon's own uid and gid, so files written to the workspace are the user's.
    pub(crate) user: Option<String>,
}

/// The labels of a new container.
pub(crate) struct Labels<'a> {
    pub(crate) daemon: &'a str,
    pub(crate) run: &'a str,
    pub(crate) session: &'a str,
}

/// Where an engine is and how it is reached, as docker resolves it: the configured address,
/// else `DOCKER_HOST`, else the local socket; TLS for `https://`, or for `tcp://` when
/// `DOCKER_TLS_VERIFY` is set, with `ca.pem`, `cert.pem` and `key.pem` from `DOCKER_CERT_PATH`
/// (default `~/.docker`). Recorded with each container (`record.rs`), so the next start reaches
/// the same engine the same way whatever its environment says.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct EngineAddress {
    /// `unix://…`, `tcp://…`, `https://…` or `ssh://…`.
    pub(crate) host: String,
    /// The TLS certificate directory, when the connection is TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) certs: Option<PathBuf>,
    /// How an `ssh://` engine's host is reached (`ssh_engine.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ssh: Option<SshTarget>,
}

impl EngineAddress {
    /// `configured` (a session's or a `[containers.NAME]` entry's `engine`) resolved against
    /// the environment.
    pub(crate) fn resolve(configured: Option<&str>) -> Self {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let host = match configured {
            Some(a) if a.starts_with('/') => format!("unix://{a}"),
            Some(a) => a.to_owned(),
            None => env("DOCKER_HOST").unwrap_or_else(|| DEFAULT_HOST.to_owned()),
        };
        let tls = host.starts_with("https://")
            || (host.starts_with("tcp://") && env("DOCKER_TLS_VERIFY").is_some());
        let certs = tls.then(|| {
            env("DOCKER_CERT_PATH").map_or_else(
                || {
                    directories::BaseDirs::new()
                        .map(|d| d.home_dir().join(".docker"))
                        .unwrap_or_else(|| PathBuf::from(".docker"))
                },
                PathBuf::from,
            )
        });
        Self {
            host,
            certs,
            ssh: None,
        }
    }

    /// Whether the engine shares this machine's file system: a local socket. Every other
    /// engine is spoken to through its API alone (no bind mount of the daemon's paths, no
    /// FIFOs, file tools through the archive endpoints).
    pub(crate) fn is_local(&self) -> bool {
        self.host.starts_with("unix://")
    }
}

impl std::fmt::Display for EngineAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&ssh_engine::shown(&self.host))?;
        if let Some(certs) = &self.certs {
            write!(f, " (TLS, certificates in {})", certs.display())?;
        }
        Ok(())
    }
}

impl Engine {
    /// Connects to the engine at `address` and agrees on the API version. Fails with a
    /// message saying where it looked.
    /// An `ssh://` engine is reached over the connection `ssh` holds to its host.
    pub(crate) async fn connect(
        address: &EngineAddress,
        ssh: &SshConnections,
    ) -> Result<Self, Error> {
        let unreachable = |e: &dyn std::fmt::Display| {
            Error::Unavailable(format!(
                "cannot reach the container engine at {address}: {e} (is dockerd, or `podman \
                 system service`, running there? set DOCKER_HOST or the container's engine)"
            ))
        };
        let timeout = REQUEST_TIMEOUT.as_secs();
        let agreed = agreed_versions().get(address).copied();
        let version = agreed.as_ref().unwrap_or(bollard::API_DEFAULT_VERSION);
        let host = address.host.as_str();
        let docker = if let Some(certs) = &address.certs {
            Ok(super::tls::connect(host, certs, timeout, version).map_err(|e| unreachable(&e))?)
        } else if host.starts_with("unix://") {
            Docker::connect_with_unix(host, timeout, version)
        } else if host.starts_with("tcp://") || host.starts_with("http://") {
            Docker::connect_with_http(host, timeout, version)
        } else if host.starts_with("ssh://") {
            // Not bollard's ssh transport, which adds unknown host keys to known_hosts.
            let docker = ssh_engine::docker(address, ssh, timeout, version)
                .await
                .map_err(|e| {
                    Error::Unavailable(format!(
                        "cannot reach the container engine at {address}: {e}"
                    ))
                })?;
            Ok(docker)
        } else {
            return Err(unreachable(
                &"not an engine address (unix://, tcp://, https:// or ssh://)",
            ));
        }
        .map_err(|e| unreachable(&e))?;
        let answered = async {
            match agreed {
                Some(_) => docker.ping().await.map(|_| docker),
                None => docker.negotiate_version().await,
            }
        };
        let docker = tokio::time::timeout(CONNECT_TIMEOUT, answered)
            .await
            .map_err(|_| unreachable(&"no answer"))?
            .map_err(|e| unreachable(&e))?;
        if agreed.is_none() {
            agreed_versions().insert(address.clone(), docker.client_version());
        }
        Ok(Self {
            docker,
            address: address.clone(),
        })
    }

    pub(super) fn docker(&self) -> &Docker {
        &self.docker
    }

    pub(crate) fn address(&self) -> &EngineAddress {
        &self.address
    }

    /// Makes and starts a session's container from `spec`: the workspace `cwd` (a path on the
    /// engine's machine) mounted at the same path, `control` read-only at [`CONTROL_MOUNT`]
    /// (a local engine's), the engine's init as PID 1,
    /// `name` as its name. Returns its id; a container that could not start is removed.
    pub(crate) async fn create(
        &self,
        spec: &ContainerSpec,
        name: &str,
        cwd: &Path,
        control: Option<&Path>,
        labels: Labels<'_>,
    ) -> Result<String, Error> {
        if let Err(e) = self.docker.inspect_image(&spec.image).await {
            return Err(match status(&e) {
                Some(404) => Error::Unavailable(format!(
                    "the image {:?} is not on the container engine at {}: build or pull it there \
                     first (agentd never pulls images)",
                    spec.image, self.address
                )),
                _ => self.failed("cannot look up the image", &e),
            });
        }
        let bind = |source: &Path, target: &str, read_only: bool| Mount {
            source: Some(source.display().to_string()),
            target: Some(target.to_owned()),
            typ: Some(MountType::BIND),
            read_only: Some(read_only),
            ..Mount::default()
        };
        let mib = |mb: u64| i64::try_from(mb.saturating_mul(1 << 20)).unwrap_or(i64::MAX);
        let host = HostConfig {
            mounts: Some(
                std::iter::once(bind(cwd, &cwd.display().to_string(), false))
                    .chain(control.map(|c| bind(c, CONTROL_MOUNT, true)))
                    .collect(),
            ),
            init: Some(true),
            memory: spec.memory_mb.map(mib),
            // Swap counts against the same cap: a command cannot page its way past it.
            memory_swap: spec.memory_mb.map(mib),
            pids_limit: spec
                .pids_limit
                .map(|p| i64::try_from(p).unwrap_or(i64::MAX)),
            nano_cpus: spec
                .millicpus
                .map(|m| i64::try_from(m.saturating_mul(1_000_000)).unwrap_or(i64::MAX)),
            network_mode: (!spec.network).then(|| "none".to_owned()),
            security_opt: Some(vec!["no-new-privileges:true".to_owned()]),
            // Gone as soon as it stops: the worker stops everything when the daemon's end of
            // its exec closes (a daemon killed), so a crash leaves no container behind either.
            auto_remove: Some(true),
            ..HostConfig::default()
        };
        let user = user(spec);
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            entrypoint: Some(vec!["/bin/sh".into(), "-c".into(), KEEP_ALIVE.into()]),
            cmd: Some(Vec::new()),
            working_dir: Some(cwd.display().to_string()),
            user: Some(user),
            labels: Some(HashMap::from([
                (DAEMON_LABEL.to_owned(), labels.daemon.to_owned()),
                (RUN_LABEL.to_owned(), labels.run.to_owned()),
                (SESSION_LABEL.to_owned(), labels.session.to_owned()),
            ])),
            network_disabled: (!spec.network).then_some(true),
            host_config: Some(host),
            ..ContainerCreateBody::default()
        };
        let options = CreateContainerOptionsBuilder::default().name(name).build();
        let created = self
            .docker
            .create_container(Some(options), body)
            .await
            .map_err(|e| self.failed("cannot create the container", &e))?;
        if let Err(e) = self.docker.start_container(&created.id, None).await {
            self.remove(&created.id).await;
            return Err(self.failed("cannot start the container", &e));
        }
        Ok(created.id)
    }

    /// Removes a container and whatever runs in it; a container already gone is fine.
    /// Returns whether it is gone.
    pub(crate) async fn remove(&self, id: &str) -> bool {
        let options = RemoveContainerOptionsBuilder::default().force(true).build();
        match self.docker.remove_container(id, Some(options)).await {
            Ok(()) => true,
            // Gone, or going (the engine's auto-remove of a stopped container).
            Err(e) if matches!(status(&e), Some(404 | 409)) => true,
            Err(e) => {
                tracing::warn!(container = id, engine = %self.address, "cannot remove a session container: {e}");
                false
            }
        }
    }

    /// Removes the containers daemon `daemon` made in runs other than `run`: what a crashed
    /// run left. Returns how many.
    pub(crate) async fn sweep(&self, daemon: &str, run: &str) -> usize {
        let filters = HashMap::from([("label", vec![format!("{DAEMON_LABEL}={daemon}")])]);
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let listed = match self.docker.list_containers(Some(options)).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(engine = %self.address, "cannot list the containers an earlier run left: {e}");
                return 0;
            }
        };
        let mut removed = 0;
        for container in listed {
            let theirs = container
                .labels
                .as_ref()
                .and_then(|l| l.get(RUN_LABEL))
                .is_some_and(|r| r != run);
            if let (true, Some(id)) = (theirs, container.id) {
                self.remove(&id).await;
                removed += 1;
            }
        }
        removed
    }

    /// Whether the container is running.
    pub(crate) async fn running(&self, id: &str) -> bool {
        self.docker
            .inspect_container(id, None)
            .await
            .ok()
            .and_then(|c| c.state)
            .and_then(|s| s.running)
            .unwrap_or(false)
    }

    fn failed(&self, what: &str, e: &bollard::errors::Error) -> Error {
        let why = match e {
            bollard::errors::Error::DockerResponseServerError { message, .. } => message.clone(),
            e => e.to_string(),
        };
        Error::Unavailable(format!(
            "{what} on the container engine at {}: {why}",
            self.address
        ))
    }
}

/// The API version agreed with each engine, by address: Podman answers `/version` in about
/// a third of a second (it runs its OCI runtime and conmon for their versions), so later
/// sessions on the same engine check it with `/_ping` (under a millisecond) and reuse the
/// version. (An engine replaced meanwhile by an older one refuses the first request, naming
/// the version.)
fn agreed_versions() -> std::sync::MutexGuard<'static, HashMap<EngineAddress, ClientVersion>> {
    static AGREED: std::sync::LazyLock<Mutex<HashMap<EngineAddress, ClientVersion>>> =
        std::sync::LazyLock::new(Mutex::default);
    AGREED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The user a container's commands run as: the spec's, else the daemon's uid and gid.
fn user(spec: &ContainerSpec) -> String {
    spec.user
        .clone()
        .unwrap_or_else(|| format!("{}:{}", nix::unistd::geteuid(), nix::unistd::getegid()))
}

/// The HTTP status the engine answered with, if it answered.
pub(super) fn status(e: &bollard::errors::Error) -> Option<u16> {
    match e {
        bollard::errors::Error::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}
