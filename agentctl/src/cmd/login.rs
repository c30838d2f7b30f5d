//! `agentctl login PROVIDER` and `agentctl logout PROVIDER`: store or remove a provider's API
//! key in the credentials file (`agentd_proto::credentials`), which the daemon reads whenever
//! a session is created, so a key works from the next session on without a restart.
//!
//! The key is read from stdin when stdin is not a terminal, else from a prompt that does not
//! echo; never from the command line, where `ps` and the shell's history would show it. The
//! file is written whole to a temporary file (0600) and renamed over the old one, so a
//! concurrent reader sees the old keys or the new ones, never half a file.

use crate::client::Connection;
use crate::daemon;
use crate::error::{Failure, Result};
use agentd_proto::credentials::{self, Credentials};
use agentd_proto::methods as m;
use agentd_proto::{DaemonInfo, Empty, KeySource};
use std::io::{BufRead, IsTerminal, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The provider whose key to store or remove.
#[derive(clap::Args)]
pub(crate) struct Provider {
    /// `anthropic`, `openai`, `gemini`, or a `[providers.NAME]` of the config file.
    provider: String,
}

/// The credentials file agentctl and the daemon share.
fn path() -> Result<PathBuf> {
    directories::ProjectDirs::from("", "", "agentd")
        .map(|d| credentials::credentials_path(d.config_dir()))
        .ok_or_else(|| Failure::failed("no home directory: set HOME (or AGENTD_CREDENTIALS)"))
}

/// The file's keys; none when it does not exist.
fn read(path: &Path) -> Result<Credentials> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Credentials::default()),
        Err(e) => {
            return Err(Failure::failed(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    // Where and what, never the file's text: it is keys.
    credentials::parse(&text).map_err(|e| {
        Failure::failed(format!(
            "{} is not a credentials file ({e}); move it away and log in again",
            path.display()
        ))
    })
}

/// Replaces the file with `creds`: a 0600 temporary file in the same directory (0700 when
/// created), synced, then renamed over it.
fn write(path: &Path, creds: &Credentials) -> Result<()> {
    let fail = |e: std::io::Error| Failure::failed(format!("cannot write {}: {e}", path.display()));
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(fail)?;
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        credentials::CREDENTIALS_FILE,
        std::process::id()
    ));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        let text = serde_json::to_string_pretty(creds).map_err(std::io::Error::other)?;
        file.write_all(text.as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result.map_err(fail)
}

/// Echo off on the terminal until dropped.
struct NoEcho {
    fd: std::io::Stdin,
    saved: nix::sys::termios::Termios,
}

impl NoEcho {
    fn new() -> nix::Result<Self> {
        use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
        let fd = std::io::stdin();
        let saved = tcgetattr(&fd)?;
        let mut quiet = saved.clone();
        quiet.local_flags.remove(LocalFlags::ECHO);
        // Still echo the newline, so the next output starts on its own line.
        quiet.local_flags.insert(LocalFlags::ECHONL);
        tcsetattr(&fd, SetArg::TCSAFLUSH, &quiet)?;
        Ok(Self { fd, saved })
    }
}

impl Drop for NoEcho {
    fn drop(&mut self) {
        let _ = nix::sys::termios::tcsetattr(
            &self.fd,
            nix::sys::termios::SetArg::TCSAFLUSH,
            &self.saved,
        );
    }
}

/// The key: one line typed at a prompt without echo, or all of stdin (surrounding whitespace,
/// such as the newline of `echo`, removed). At most a few KiB are read.
fn read_key(provider: &str) -> Result<String> {
    let limit = credentials::MAX_KEY_BYTES as u64 * 2;
    let text = if std::io::stdin().is_terminal() {
        // Echo goes off before the prompt shows, so nothing typed after it is ever echoed.
        let guard = NoEcho::new()
            .map_err(|e| Failure::failed(format!("cannot turn off echo on the terminal: {e}")))?;
        eprint!("API key for {provider} (input is hidden): ");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .take(limit)
            .read_line(&mut line)
            .map_err(|e| Failure::failed(format!("cannot read the key: {e}")))?;
        drop(guard);
        line
    } else {
        let mut text = String::new();
        std::io::stdin()
            .take(limit)
            .read_to_string(&mut text)
            .map_err(|e| Failure::failed(format!("cannot read the key from stdin: {e}")))?;
        text
    };
    let key = text.trim();
    if key.lines().count() > 1 {
        return Err(Failure::usage(
            "stdin holds more than one line; give the key alone",
        ));
    }
    credentials::check_key(key).map_err(|why| Failure::usage(format!("{why}; nothing stored")))?;
    Ok(key.to_owned())
}

/// The running daemon's view, if one answers (none is started).
async fn running(socket: Option<&Path>) -> Option<DaemonInfo> {
    let conn: Connection = daemon::connect(socket, false).await.ok()?;
    conn.call::<m::DaemonInfoMethod>(Empty {}).await.ok()
}

impl Provider {
    fn check_name(&self, info: Option<&DaemonInfo>) -> Result<()> {
        credentials::check_provider_name(&self.provider).map_err(Failure::usage)?;
        if let Some(info) = info
            && !info.providers.iter().any(|p| p.name == self.provider)
        {
            let known: Vec<&str> = info.providers.iter().map(|p| p.name.as_str()).collect();
            return Err(Failure::usage(format!(
                "the running agentd has no provider {:?} (configured: {}); add \
                 [providers.{}] to its config file and run `agentctl daemon reload` first",
                self.provider,
                known.join(", "),
                self.provider
            )));
        }
        Ok(())
    }

    /// `agentctl login PROVIDER`.
    pub(crate) async fn login(self, socket: Option<&Path>, json: bool) -> Result<u8> {
        let info = running(socket).await;
        self.check_name(info.as_ref())?;
        let key = read_key(&self.provider)?;
        let path = path()?;
        let mut creds = read(&path)?;
        creds.api_keys.insert(self.provider.clone(), key);
        write(&path, &creds)?;
        if json {
            println!(
                "{}",
                serde_json::json!({"provider": self.provider, "stored": path.display().to_string()})
            );
        } else {
            println!(
                "stored the key for {} in {} (mode 0600); new sessions use it at once, no restart needed",
                self.provider,
                path.display()
            );
        }
        Ok(0)
    }

    /// `agentctl logout PROVIDER`.
    pub(crate) async fn logout(self, socket: Option<&Path>, json: bool) -> Result<u8> {
        credentials::check_provider_name(&self.provider).map_err(Failure::usage)?;
        let path = path()?;
        let mut creds = read(&path)?;
        let removed = creds.api_keys.remove(&self.provider).is_some();
        if removed {
            write(&path, &creds)?;
        }
        // The daemon's view after the change: whether a key from its environment remains.
        let fallback = running(socket).await.and_then(|info| {
            info.providers
                .into_iter()
                .find(|p| p.name == self.provider && p.key_source == Some(KeySource::Environment))
                .map(|p| p.key_env)
        });
        if json {
            println!(
                "{}",
                serde_json::json!({"provider": self.provider, "removed": removed, "environment_key": fallback})
            );
            return Ok(0);
        }
        if removed {
            println!(
                "removed the key for {} from {}",
                self.provider,
                path.display()
            );
        } else {
            println!(
                "no key was stored for {} in {}",
                self.provider,
                path.display()
            );
        }
        if let Some(var) = fallback {
            println!(
                "note: the running agentd still has {var} from its environment; new sessions use that key"
            );
        }
        Ok(0)
    }
}
