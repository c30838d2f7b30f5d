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
    /// Provider name → API key. Read with every name and key checked, so that a bad one is
    /// reported where it is in the file (see [`parse`]).
    #[serde(default, deserialize_with = "checked_keys")]
    pub api_keys: BTreeMap<String, String>,
}

/// Where and how the credentials file is malformed. It never holds any of the file's text
/// (the file is keys): only the place and the kind of problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// The kind of problem, in words of this module's (or serde_json's fixed syntax
    /// messages), never the file's.
    pub problem: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.problem
        )
    }
}

impl std::error::Error for ParseError {}

/// Reads the credentials file's text: what `agentctl login` writes, every provider name and
/// key well-formed. The error says where and what kind of problem, never quoting the file.
pub fn parse(text: &str) -> Result<Credentials, ParseError> {
    serde_json::from_str(text).map_err(|e| ParseError {
        line: e.line(),
        column: e.column(),
        problem: problem(&e),
    })
}

/// Prefix of the errors [`checked_keys`] raises (its own words, safe to show).
const UNUSABLE: &str = "unusable ";

/// What kind of problem `e` is, without its text when that could hold the file's: serde's
/// messages quote the value they did not expect (`invalid type: string "sk-..."`) and the
/// field they did not know. Syntax errors are serde_json's fixed phrases.
fn problem(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let full = e.to_string();
    let message = full
        .strip_suffix(&format!(" at line {} column {}", e.line(), e.column()))
        .unwrap_or(&full);
    match e.classify() {
        Category::Syntax => format!("not valid JSON ({message})"),
        Category::Eof => format!("the file ends too early ({message})"),
        Category::Io => "cannot be read".into(),
        Category::Data => {
            let expected = message
                .rsplit_once(", expected ")
                .map(|(_, expected)| expected);
            if message.starts_with(UNUSABLE) {
                message.to_owned()
            } else if let Some(unexpected) = message.strip_prefix("invalid type: ") {
                // `string "..."`, `integer `5``, `map`: the kind is the text before a literal.
                let kind = unexpected
                    .split(['"', '`', ','])
                    .next()
                    .unwrap_or_default()
                    .trim();
                format!(
                    "a value of the wrong type ({kind}, expected {})",
                    expected.unwrap_or("another type")
                )
            } else if message.starts_with("unknown field ") {
                format!(
                    "an unknown field (expected {})",
                    expected.unwrap_or("no fields")
                )
            } else if message.starts_with("missing field ")
                || message.starts_with("duplicate field ")
            {
                // The field's name is this module's.
                message.to_owned()
            } else {
                "a value `agentctl login` does not write".into()
            }
        }
    }
}

/// Deserializes `api_keys`, refusing a provider name or a key that is unusable, in words that
/// quote neither (a swapped name and key would show the key).
fn checked_keys<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    struct Keys;
    impl<'de> serde::de::Visitor<'de> for Keys {
        type Value = BTreeMap<String, String>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object of provider names and keys")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            use serde::de::Error;
            let mut keys = BTreeMap::new();
            while let Some(name) = map.next_key::<String>()? {
                if check_provider_name(&name).is_err() {
                    return Err(A::Error::custom(format!(
                        "{UNUSABLE}provider name (letters, digits, `_`, `-` and `.`, at most 64)"
                    )));
                }
                let key: String = map.next_value()?;
                check_key(&key).map_err(|why| A::Error::custom(format!("{UNUSABLE}key: {why}")))?;
                keys.insert(name, key);
            }
            Ok(keys)
        }
    }
    deserializer.deserialize_map(Keys)
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
    fn a_malformed_file_is_described_without_quoting_it() {
        const KEY: &str = "dummy-SECRET0123456789";
        let good = format!("{{\n  \"api_keys\": {{\n    \"anthropic\": \"{KEY}\"\n  }}\n}}\n");
        assert_eq!(parse(&good).unwrap().api_keys["anthropic"], KEY);
        let cases = [
            // (file, line, what the problem says)
            (
                format!("{{\"api_keys\": \"{KEY}\"}}"),
                1,
                "a value of the wrong type (string, expected an object of provider names and keys)",
            ),
            (
                format!("{{\"{KEY}\": {{}}}}"),
                1,
                "an unknown field (expected `api_keys`)",
            ),
            (
                format!("{{\"api_keys\": {{\"anthropic\": [\"{KEY}\"]}}}}"),
                1,
                "a value of the wrong type (sequence, expected a string)",
            ),
            (
                format!("{{\"api_keys\": {{\"anthropic\": \"{KEY} x\"}}}}"),
                1,
                "unusable key: the key has a space",
            ),
            (
                format!("{{\"api_keys\": {{\"{KEY}/\": \"anthropic\"}}}}"),
                1,
                "unusable provider name",
            ),
            (
                format!("{{\"api_keys\":\n {{\"anthropic\": \"{KEY}\",}}}}"),
                2,
                "not valid JSON (trailing comma)",
            ),
            (
                format!("{{\"api_keys\": {{\"anthropic\": {KEY}}}}}"),
                1,
                "not valid JSON (expected value)",
            ),
            (
                format!("{{\"api_keys\": {{\"anthropic\": \"{KEY}"),
                1,
                "the file ends too early",
            ),
            (
                format!("api_keys = {{ anthropic = \"{KEY}\" }}"),
                1,
                "not valid JSON",
            ),
        ];
        for (text, line, says) in cases {
            let e = parse(&text).unwrap_err();
            let shown = e.to_string();
            assert!(!shown.contains("SECRET"), "{text}: {shown}");
            assert_eq!(e.line, line, "{text}: {shown}");
            assert!(shown.contains(says), "{text}: {shown}");
        }
    }

    #[test]
    fn provider_names() {
        assert!(check_provider_name("my-llm.local_2").is_ok());
        assert!(check_provider_name("").is_err());
        assert!(check_provider_name("a b").is_err());
        assert!(check_provider_name("../x").is_err());
    }
}
