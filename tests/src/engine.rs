//! The container engines the container tests and benchmark use: dockerd at
//! `AGENTD_TEST_DOCKER_HOST`, else `DOCKER_HOST`, else `unix:///var/run/docker.sock` (`.ci/run`
//! starts Debian's dockerd there), and Podman's Docker API service at
//! `AGENTD_TEST_PODMAN_HOST`, else `target/podman/podman.sock` (`.ci/run` starts `podman system
//! service` there), each with the test image imported from a busybox rootfs when the engine
//! does not have it yet (no image registry is reachable). The `docker` CLI drives both: Podman
//! serves the same API.

use anyhow::{Context, Result, bail};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The image the tests run: busybox (no bash, no perl), as a one-layer import.
pub const IMAGE: &str = "agentd-test/busybox:2";
/// The label the daemon puts on the containers it makes, naming the session.
pub const SESSION_LABEL: &str = "dev.agentd.session";

/// A running engine with the test image.
#[derive(Debug, Clone)]
pub struct Engine {
    /// Its address, as `DOCKER_HOST` takes it.
    pub host: String,
}

impl Engine {
    /// dockerd, or `None` when it does not answer (the caller skips; under CI=true the
    /// [`prerequisite`](crate::prerequisite) fails instead).
    pub fn get() -> Option<&'static Engine> {
        static DOCKERD: OnceLock<Option<Engine>> = OnceLock::new();
        let host = || {
            std::env::var("AGENTD_TEST_DOCKER_HOST")
                .or_else(|_| std::env::var("DOCKER_HOST"))
                .unwrap_or_else(|_| "unix:///var/run/docker.sock".to_owned())
        };
        Self::found(
            &DOCKERD,
            host,
            "a container engine (dockerd on DOCKER_HOST or /var/run/docker.sock) with \
             busybox-static for the test image",
        )
    }

    /// Podman's API service, or `None` as for [`get`](Self::get).
    pub fn podman() -> Option<&'static Engine> {
        static PODMAN: OnceLock<Option<Engine>> = OnceLock::new();
        let host = || {
            std::env::var("AGENTD_TEST_PODMAN_HOST").unwrap_or_else(|_| {
                let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
                let target = std::fs::canonicalize(&target).unwrap_or(target);
                format!("unix://{}/podman/podman.sock", target.display())
            })
        };
        Self::found(
            &PODMAN,
            host,
            "Podman (`podman system service` on AGENTD_TEST_PODMAN_HOST or \
             target/podman/podman.sock, started by .ci/run) with busybox-static for the test image",
        )
    }

    fn found(
        cell: &'static OnceLock<Option<Engine>>,
        host: impl FnOnce() -> String,
        what: &str,
    ) -> Option<&'static Engine> {
        let found = cell.get_or_init(|| match Self::find(host()) {
            Ok(engine) => Some(engine),
            Err(e) => {
                eprintln!("no container engine: {e:#}");
                None
            }
        });
        if crate::prerequisite(what, found.is_some()) {
            found.as_ref()
        } else {
            None
        }
    }

    fn find(host: String) -> Result<Self> {
        let engine = Self { host };
        engine.docker(&["version", "--format", "{{.Server.APIVersion}}"])?;
        if engine.docker(&["image", "inspect", IMAGE]).is_err() {
            engine.import_busybox()?;
        }
        Ok(engine)
    }

    /// A directory holding `docker`, the CLI pointed at this engine, for the front of an
    /// ssh server's `PATH`: what an `ssh://` engine's host runs.
    pub fn remote_cli(&self) -> Result<tempfile::TempDir> {
        let cli = crate::program("docker").context("the docker CLI")?;
        crate::sshd::docker_stand_in(&format!(
            "DOCKER_HOST='{}' exec '{}' \"$@\"",
            self.host,
            cli.display()
        ))
    }

    /// Runs `docker ARGS` against the engine; its stdout, or an error with its stderr.
    pub fn docker(&self, args: &[&str]) -> Result<String> {
        let out = Command::new("docker")
            .args(["-H", &self.host])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("docker (the CLI) runs")?;
        if !out.status.success() {
            bail!(
                "docker {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The ids of the containers carrying `label` (`KEY=VALUE`), stopped ones included.
    pub fn containers(&self, label: &str) -> Result<Vec<String>> {
        let listed = self.docker(&["ps", "-aq", "--filter", &format!("label={label}")])?;
        Ok(listed.lines().map(str::to_owned).collect())
    }

    /// The containers of session `session`.
    pub fn session_containers(&self, session: &str) -> Result<Vec<String>> {
        self.containers(&format!("{SESSION_LABEL}={session}"))
    }

    /// Imports [`IMAGE`]: Debian's static busybox with a link per applet, and `/tmp` that
    /// every user may write (as images have it), for containers of a user other than root.
    fn import_busybox(&self) -> Result<()> {
        let busybox = Path::new("/bin/busybox");
        if !busybox.exists() {
            bail!("no /bin/busybox (Debian's busybox-static) to build the test image from");
        }
        let root = tempfile::tempdir()?;
        let bin = root.path().join("bin");
        std::fs::create_dir_all(&bin)?;
        let tmp = root.path().join("tmp");
        std::fs::create_dir_all(&tmp)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777))?;
        std::fs::copy(busybox, bin.join("busybox"))?;
        let applets = Command::new(busybox).arg("--list").output()?;
        for applet in String::from_utf8_lossy(&applets.stdout).lines() {
            if applet != "busybox" {
                std::os::unix::fs::symlink("busybox", bin.join(applet))?;
            }
        }
        let tar = Command::new("tar")
            .args(["-C"])
            .arg(root.path())
            .args(["-c", "."])
            .stdout(Stdio::piped())
            .spawn()?;
        let status = Command::new("docker")
            .args(["-H", &self.host, "import", "-", IMAGE])
            .stdin(tar.stdout.context("tar's stdout")?)
            .stdout(Stdio::null())
            .status()?;
        if !status.success() {
            bail!("docker import of the busybox rootfs failed");
        }
        Ok(())
    }
}
