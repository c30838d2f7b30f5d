//! The credentials file: the API keys `agentctl login` stores and the daemon reads whenever a
//! session is created, so a key works at once, without a restart. Both sides agree on its
//! place and format here; writing it is agentctl's job, reading it the daemon's.
//!
//! It lives beside the config file, `$XDG_CONFIG_HOME/agentd/credentials.json`
//! (`~/.config/agentd/credentials.json`; `AGENTD_CREDENTIALS` names another), mode 0600 in a
//! 0700 directory. A key stored there wins over the provider's environment variable: the
//! daemon's environment is the one it started with, which the user can neither see nor change
//! from their shell, while the file is what they said last.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Environment variable naming another credentials file.
pub const CREDENTIALS_ENV: &str = "AGENTD_CREDENTIALS";

/// The file's name in the config directory.
pub const CREDENTIALS_FILE: &str = "credentials.json";

/// The most the daemon reads of the file; a bigger one is refused.
pub const MAX_CREDENTIALS_BYTES: u64 = 1024 * 1024;

/// The most bytes one key may have.
pub const MAX_KEY_BYTES: usize = 4096;

/// The file's contents: a key per provider name.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    /// Provider name → API key.
    #[serde(default)]
    pub api_keys: BTreeMap<String, String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("providers", &self.api_keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The credentials file: `$AGENTD_CREDENTIALS`, else `credentials.json` in `config_dir` (the
/// directory holding `config.toml` by default).
pub fn credentials_path(config_dir: &Path) -> PathBuf {
    match std::env::var_os(CREDENTIALS_ENV).filter(|p| !p.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => config_dir.join(CREDENTIALS_FILE),
    }
}

/// Why `key` cannot be an API key, if it cannot: it goes into an HTTP header, so it must be
/// printable ASCII without spaces, and not empty or huge. The message never quotes the key.
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("the key is empty".into());
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(format!(
            "the key is {} bytes long; at most {MAX_KEY_BYTES} are accepted",
            key.len()
        ));
    }
    if let Some(at) = key.bytes().position(|b| !b.is_ascii_graphic()) {
        return Err(format!(
            "the key has a space, a control or a non-ASCII character at byte {}",
            at + 1
        ));
    }
    Ok(())
}

/// Whether `name` can be a provider's name: what `[providers.NAME]` and `agentctl login` accept.
pub fn check_provider_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a provider name (letters, digits, `_`, `-` and `.`, at most 64)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked_without_being_quoted() {
        assert_eq!(check_key("not-a-real-key_123"), Ok(()));
        assert_eq!(check_key(""), Err("the key is empty".into()));
        let err = check_key("sk secret").unwrap_err();
        assert!(err.contains("byte 3") && !err.contains("secret"), "{err}");
        assert!(check_key("sk\r\nX-Evil: 1").is_err());
        assert!(check_key(&"k".repeat(MAX_KEY_BYTES + 1)).is_err());
        let debug = format!(
            "{:?}",
            Credentials {
                api_keys: [("anthropic".to_owned(), "sk-secret".to_owned())].into()
            }
        );
        assert!(
            debug.contains("anthropic") && !debug.contains("sk-secret"),
            "{debug}"
        );
    }

    #[test]
    fn provider_names() {
        assert!(check_provider_name("my-llm.local_2").is_ok());
        assert!(check_provider_name("").is_err());
        assert!(check_provider_name("a b").is_err());
        assert!(check_provider_name("../x").is_err());
    }
}
