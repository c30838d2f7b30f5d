//! A real OpenSSH server on 127.0.0.1 for the SSH environment's tests: `sshd -D` as the
//! current user on a free port, with a generated host key, a generated client key authorized
//! in a temp dir, a known-hosts file holding the host key and an ssh configuration naming the
//! client key. OpenSSH reads `~/.ssh` from the passwd entry, not `$HOME`, so the daemon is
//! pointed at these files through a `[hosts.NAME]` entry ([`SshServer::host_entry`]).

use crate::prerequisite;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `sshd` and the files a client needs to reach it.
pub struct SshServer {
    child: Child,
    /// The temp dir holding keys, configs and the log.
    pub dir: tempfile::TempDir,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    /// The user it lets in (the current one).
    pub user: String,
}

/// `sshd`, from `PATH` or `/usr/sbin` (Debian's `openssh-server`), a [`prerequisite`].
pub fn sshd_program() -> Option<PathBuf> {
    let found = ["/usr/sbin/sshd", "/usr/local/sbin/sshd"]
        .iter()
        .map(PathBuf::from)
        .chain(
            std::env::var("PATH")
                .unwrap_or_default()
                .split(':')
                .map(|d| Path::new(d).join("sshd")),
        )
        .find(|p| p.is_file());
    let usable = found.is_some()
        && crate::program("ssh").is_some()
        && crate::program("ssh-keygen").is_some();
    prerequisite("sshd (openssh-server) with ssh and ssh-keygen", usable)
        .then_some(found)
        .flatten()
}

/// A directory for a remote `PATH` holding links to every program on this `PATH` but
/// `missing`: a remote machine without them (`perl`, `rg`).
pub fn path_without(missing: &[&str]) -> Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new().prefix("path").tempdir_in("/tmp")?;
    for bin in std::env::var("PATH").unwrap_or_default().split(':') {
        for entry in std::fs::read_dir(bin).into_iter().flatten().flatten() {
            let name = entry.file_name();
            let link = dir.path().join(&name);
            if missing.iter().any(|m| name == **m) || link.symlink_metadata().is_ok() {
                continue;
            }
            std::os::unix::fs::symlink(entry.path(), link)?;
        }
    }
    Ok(dir)
}

/// A directory holding an executable `docker` made of `script` (sh), for the front of a
/// server's `PATH` ([`SshServer::start_with_first`]): an `ssh://` engine's remote CLI, or a
/// hostile stand-in for it.
pub fn docker_stand_in(script: &str) -> Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new().prefix("bin").tempdir_in("/tmp")?;
    let docker = dir.path().join("docker");
    std::fs::write(&docker, format!("#!/bin/sh\n{script}\n"))?;
    std::fs::set_permissions(&docker, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

fn keygen(path: &Path) -> Result<()> {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "agentd-test", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .status()?;
    if !status.success() {
        bail!("ssh-keygen failed for {}", path.display());
    }
    Ok(())
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl SshServer {
    /// Starts a server, or `None` when sshd is missing (and the test may skip).
    pub fn start() -> Result<Option<Self>> {
        Self::start_with_path(None)
    }

    /// Like [`Self::start`], with `PATH` set to `path` for every session (the user's shell
    /// startup files may still add to it).
    pub fn start_with_path(path: Option<&str>) -> Result<Option<Self>> {
        let Some(sshd) = sshd_program() else {
            return Ok(None);
        };
        let dir = tempfile::Builder::new().prefix("sshd").tempdir_in("/tmp")?;
        let d = dir.path();
        keygen(&d.join("host_key"))?;
        keygen(&d.join("id"))?;
        std::fs::copy(d.join("id.pub"), d.join("authorized_keys"))?;
        let user = nix::unistd::User::from_uid(nix::unistd::geteuid())?
            .context("the current user has no passwd entry")?
            .name;
        let root = nix::unistd::geteuid().is_root();
        if root {
            // Privilege separation needs it; systemd makes it at boot, a container may not.
            std::fs::create_dir_all("/run/sshd")?;
        }
        let host_key = std::fs::read_to_string(d.join("host_key.pub"))?;
        // A free port can be taken between the probe and the bind: try a few.
        for _ in 0..5 {
            let port = free_port()?;
            std::fs::write(
                d.join("sshd_config"),
                format!(
                    "Port {port}\nListenAddress 127.0.0.1\nHostKey {dir}/host_key\n\
                     AuthorizedKeysFile {dir}/authorized_keys\nPidFile none\nStrictModes no\n\
                     PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                     PermitRootLogin prohibit-password\nAllowUsers {user}\nMaxSessions 128\n\
                     MaxStartups 64\nAcceptEnv AGENTD_TEST_*\nLogLevel ERROR\n{path}",
                    dir = d.display(),
                    path = path
                        .map(|p| format!("SetEnv PATH={p}\n"))
                        .unwrap_or_default()
                ),
            )?;
            std::fs::write(
                d.join("known_hosts"),
                format!("[127.0.0.1]:{port} {host_key}"),
            )?;
            std::fs::write(
                d.join("ssh_config"),
                format!(
                    "Host *\n  IdentityFile {dir}/id\n  IdentitiesOnly yes\n  \
                     GlobalKnownHostsFile /dev/null\n  \
                     SetEnv AGENTD_TEST_VISIBLE=remote-only AGENTD_TEST_SECRET_TOKEN=hunter2\n",
                    dir = d.display()
                ),
            )?;
            let log = std::fs::File::create(d.join("sshd.log"))?;
            let mut child = Command::new(&sshd)
                .args(["-D", "-e", "-f"])
                .arg(d.join("sshd_config"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()?;
            let deadline = Instant::now() + crate::WAIT;
            loop {
                if let Some(status) = child.try_wait()? {
                    let log = std::fs::read_to_string(d.join("sshd.log")).unwrap_or_default();
                    if log.contains("Address already in use") {
                        break;
                    }
                    bail!("sshd exited with {status}: {log}");
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Ok(Some(Self {
                        child,
                        dir,
                        port,
                        user,
                    }));
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    bail!("sshd did not listen on port {port}");
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        bail!("no free port for sshd after 5 tries")
    }

    /// Like [`Self::start`], with `bin` first on the sessions' `PATH`.
    pub fn start_with_first(bin: &Path) -> Result<Option<Self>> {
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Self::start_with_path(Some(&path))
    }

    /// A `[hosts.NAME]` table reaching this server as its user, with its keys.
    pub fn host_entry(&self, name: &str) -> String {
        self.host_entry_with(name, &self.dir.path().join("known_hosts"), self.port)
    }

    /// Like [`Self::host_entry`] with another known-hosts file and port.
    pub fn host_entry_with(&self, name: &str, known_hosts: &Path, port: u16) -> String {
        format!(
            "[hosts.{name}]\nhostname = \"127.0.0.1\"\nport = {port}\nuser = \"{}\"\n\
             ssh_config = \"{}\"\nknown_hosts = \"{}\"\n",
            self.user,
            self.dir.path().join("ssh_config").display(),
            known_hosts.display()
        )
    }
}

impl Drop for SshServer {
    fn drop(&mut self) {
        // Its connections first (children of the listener until it dies), so no client's
        // master is left holding one.
        let listener = self.child.id() as i32;
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<i32>().ok());
            if ppid == Some(listener) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
