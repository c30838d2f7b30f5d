//! `agentctl trust [DIR]`, `--list`, `--remove DIR`: which workspaces' hooks files
//! (`.agents/hooks.toml`) the daemon may run, kept in the config file as
//! `[trusted_workspaces."DIR"] hooks_sha256 = "…"`: the digest of the file as the user
//! trusted it, so a file written or changed afterwards (by a model, say) is not run until
//! trusted again, as direnv's `allow` works. The file is shown before it is trusted; the
//! config file is edited in place (comments kept) through a temporary file renamed over it,
//! and a running daemon reloads it (none is started).

use crate::client::Connection;
use crate::daemon;
use crate::error::{Failure, Result};
use agentd_proto::methods as m;
use agentd_proto::{
    DaemonInfo, Empty, MAX_PROJECT_HOOKS_BYTES, PROJECT_HOOKS_FILE, TRUST_DIGEST_KEY, TRUST_TABLE,
};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// `agentctl trust` arguments.
#[derive(clap::Args)]
pub(crate) struct Trust {
    /// The workspace (default: the current directory).
    dir: Option<PathBuf>,
    /// List the trusted workspaces.
    #[arg(long, conflicts_with_all = ["dir", "remove"])]
    list: bool,
    /// Stop trusting DIR.
    #[arg(long, value_name = "DIR", conflicts_with = "dir")]
    remove: Option<PathBuf>,
}

/// The config file the daemon reads: the running one's, else `$AGENTD_CONFIG`, else the
/// default place.
fn config_path(info: Option<&DaemonInfo>) -> Result<PathBuf> {
    if let Some(file) = info.and_then(|i| i.config_file.as_deref()) {
        return Ok(PathBuf::from(file));
    }
    if let Some(p) = std::env::var_os("AGENTD_CONFIG").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    directories::ProjectDirs::from("", "", "agentd")
        .map(|d| d.config_dir().join("config.toml"))
        .ok_or_else(|| Failure::failed("no home directory: set HOME (or AGENTD_CONFIG)"))
}

fn read_config(path: &Path) -> Result<toml_edit::DocumentMut> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(Failure::failed(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    text.parse().map_err(|e: toml_edit::TomlError| {
        Failure::failed(format!(
            "{} is not valid TOML ({}); fix it first",
            path.display(),
            e.message()
        ))
    })
}

/// Replaces the config file with `doc` through a temporary file (mode 0600, or the file's).
fn write_config(path: &Path, doc: &toml_edit::DocumentMut) -> Result<()> {
    let fail = |e: std::io::Error| Failure::failed(format!("cannot write {}: {e}", path.display()));
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(fail)?;
    let mode = std::fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o777);
    let temp = dir.join(format!(".config.toml.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&temp)?;
        file.write_all(doc.to_string().as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result.map_err(fail)
}

/// The workspace's hooks file, if it has one: at most the daemon's limit, a regular file.
fn hooks_file(dir: &Path) -> Result<Option<Vec<u8>>> {
    let path = dir.join(PROJECT_HOOKS_FILE);
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Failure::failed(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let fail = |why: String| Failure::failed(format!("{}: {why}; nothing trusted", path.display()));
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(fail("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_PROJECT_HOOKS_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(e.to_string()))?;
    if bytes.len() as u64 > MAX_PROJECT_HOOKS_BYTES {
        return Err(fail(format!("larger than {MAX_PROJECT_HOOKS_BYTES} bytes")));
    }
    Ok(Some(bytes))
}

/// The file's text for a terminal: control characters (escape sequences) shown as `?`, and
/// the characters that reorder or hide text (bidirectional overrides and isolates, zero-width
/// marks) named, so what is shown for review is what the bytes say.
fn printable(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .map(|c| match c {
            '\n' | '\t' => c.to_string(),
            c if c.is_control() => "?".to_owned(),
            '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{061c}'
            | '\u{feff}' => format!("<U+{:04X}>", u32::from(c)),
            c => c.to_string(),
        })
        .collect()
}

fn real_dir(dir: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(dir)
        .map_err(|e| Failure::usage(format!("{}: {e}", dir.display())))
        .and_then(|d| {
            d.to_str()
                .map(|_| d.clone())
                .ok_or_else(|| Failure::usage(format!("{}: not a UTF-8 path", d.display())))
        })
}

impl Trust {
    /// Runs it; a running daemon reloads its config afterwards.
    pub(crate) async fn run(self, socket: Option<&Path>, json: bool) -> Result<u8> {
        let conn: Option<Connection> = daemon::connect(socket, false).await.ok();
        let info = match &conn {
            Some(c) => c.call::<m::DaemonInfoMethod>(Empty {}).await.ok(),
            None => None,
        };
        let path = config_path(info.as_ref())?;
        let mut doc = read_config(&path)?;
        if self.list {
            let rows: Vec<(String, Option<String>)> = doc
                .get(TRUST_TABLE)
                .and_then(|t| t.as_table_like())
                .map(|t| {
                    t.iter()
                        .map(|(dir, v)| {
                            let digest = v
                                .get(TRUST_DIGEST_KEY)
                                .and_then(|d| d.as_str())
                                .map(str::to_owned);
                            (dir.to_owned(), digest)
                        })
                        .collect()
                })
                .unwrap_or_default();
            for (dir, digest) in rows {
                if json {
                    println!(
                        "{}",
                        serde_json::json!({"dir": dir, "hooks_sha256": digest})
                    );
                } else {
                    println!("{dir}  {}", digest.as_deref().unwrap_or("(no hooks file)"));
                }
            }
            return Ok(0);
        }
        let table = doc
            .entry(TRUST_TABLE)
            .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
            .as_table_like_mut()
            .ok_or_else(|| {
                Failure::failed(format!(
                    "{TRUST_TABLE} in {} is not a table",
                    path.display()
                ))
            })?;
        let message = if let Some(dir) = &self.remove {
            let key = real_dir(dir)
                .map(|d| d.display().to_string())
                .unwrap_or_else(|_| dir.display().to_string());
            if table.remove(&key).is_none() {
                return Err(Failure::usage(format!("{key} is not a trusted workspace")));
            }
            format!("{key} is no longer trusted")
        } else {
            let dir = real_dir(self.dir.as_deref().unwrap_or(Path::new(".")))?;
            let key = dir.display().to_string();
            let mut entry = toml_edit::Table::new();
            let message = match hooks_file(&dir)? {
                Some(bytes) => {
                    let digest: String = Sha256::digest(&bytes)
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect();
                    if !json {
                        println!(
                            "{}:\n{}",
                            dir.join(PROJECT_HOOKS_FILE).display(),
                            printable(&bytes)
                        );
                    }
                    entry.insert(TRUST_DIGEST_KEY, toml_edit::value(digest));
                    format!(
                        "trusted {key} with its hooks file as shown; if it changes, trust it again"
                    )
                }
                None => format!(
                    "trusted {key}; it has no {PROJECT_HOOKS_FILE} (one written later runs only once you trust it again)"
                ),
            };
            table.insert(&key, toml_edit::Item::Table(entry));
            message
        };
        write_config(&path, &doc)?;
        let reloaded = match &conn {
            Some(c) => Some(c.call::<m::DaemonReload>(Empty {}).await.map(|_| ())),
            None => None,
        };
        if json {
            println!(
                "{}",
                serde_json::json!({"config_file": path.display().to_string(), "message": message})
            );
        } else {
            println!("{message} ({})", path.display());
        }
        match reloaded {
            Some(Err(e)) => Err(Failure::failed(format!(
                "the running agentd could not reload {}: {e}",
                path.display()
            ))),
            _ => Ok(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn what_is_shown_for_review_is_what_the_bytes_say() {
        let text = "command = \"fmt\" # \u{202e}\u{2066}safe\u{2069}\n\u{1b}[2Jx\u{200b}";
        assert_eq!(
            printable(text.as_bytes()),
            "command = \"fmt\" # <U+202E><U+2066>safe<U+2069>\n?[2Jx<U+200B>"
        );
    }
}
