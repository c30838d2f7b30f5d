//! The checks on `mcp_servers` (the config file's `[mcp_servers.NAME]` and a session's own):
//! each server is either a command or a URL, with values that cannot surprise the client.
//! Errors name the key (`mcp_servers.NAME.KEY`) and never quote a value of `env` or
//! `headers`, which may hold secrets.

use agentd_proto::McpServerConfig;
use std::collections::BTreeMap;

/// Most servers one session may have.
pub(crate) const MAX_SERVERS: usize = 32;
/// Longest server name: it is part of every tool name (`mcp__NAME__TOOL`, at most 64).
pub(crate) const MAX_NAME_CHARS: usize = 32;
/// Longest startup or tool-call timeout, in seconds.
const MAX_TIMEOUT_SECS: u64 = 24 * 3600;
/// Most arguments, variables, headers or tool names one server's lists may hold.
const MAX_LIST: usize = 1024;

/// Checks every server; the error names the first bad key.
pub(crate) fn validate(servers: &BTreeMap<String, McpServerConfig>) -> Result<(), String> {
    if servers.len() > MAX_SERVERS {
        return Err(format!(
            "mcp_servers may name at most {MAX_SERVERS} servers, got {}",
            servers.len()
        ));
    }
    for (name, server) in servers {
        check_name(name)?;
        check_server(server).map_err(|(key, why)| format!("mcp_servers.{name}.{key} {why}"))?;
    }
    Ok(())
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "mcp_servers: {:?} is not a valid server name (1 to {MAX_NAME_CHARS} letters, digits, `_` or `-`)",
            name.chars().take(64).collect::<String>()
        ))
    }
}

type Problem = (&'static str, String);

fn check_server(s: &McpServerConfig) -> Result<(), Problem> {
    let bad = |key, why: &str| Err((key, why.to_owned()));
    match (&s.command, &s.url) {
        (Some(_), Some(_)) => {
            return bad(
                "url",
                "and command exclude each other: a server is started (command) or reached (url)",
            );
        }
        (None, None) => {
            return bad(
                "command",
                "or url is needed: a stdio server's program, or a Streamable HTTP server's endpoint",
            );
        }
        (Some(command), None) => {
            if command.trim().is_empty() || command.contains('\0') {
                return bad("command", "must name a program");
            }
            if s.bearer_token_env_var.is_some() {
                return bad(
                    "bearer_token_env_var",
                    "is for url servers; give a stdio server its token in env",
                );
            }
            if !s.headers.is_empty() {
                return bad("headers", "are for url servers");
            }
            if s.args.iter().any(|a| a.contains('\0')) {
                return bad("args", "must not hold NUL characters");
            }
            if let Some(key) = s.env.keys().find(|k| !is_variable_name(k)) {
                return Err(("env", format!("has an invalid variable name {key:?}")));
            }
            if s.env.values().any(|v| v.contains('\0')) {
                return bad("env", "values must not hold NUL characters");
            }
            if let Some(cwd) = &s.cwd
                && !cwd.is_absolute()
            {
                return bad("cwd", "must be an absolute path");
            }
        }
        (None, Some(url)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return bad("url", "must start with http:// or https://");
            }
            if url.len() > 8192 || url.chars().any(char::is_control) {
                return bad("url", "is not a usable URL");
            }
            if !s.args.is_empty() || !s.env.is_empty() || s.cwd.is_some() {
                return bad("args", "env and cwd are for command servers");
            }
            if let Some(var) = &s.bearer_token_env_var
                && !is_variable_name(var)
            {
                return bad(
                    "bearer_token_env_var",
                    "must be a variable name (letters, digits and `_`)",
                );
            }
            if let Some(key) = s.headers.keys().find(|k| !is_header_name(k)) {
                return Err(("headers", format!("has an invalid header name {key:?}")));
            }
            if s.headers
                .values()
                .any(|v| v.chars().any(|c| c.is_control() && c != '\t'))
            {
                return bad("headers", "values must not hold control characters");
            }
        }
    }
    for (key, secs) in [
        ("startup_timeout_secs", s.startup_timeout_secs),
        ("tool_timeout_secs", s.tool_timeout_secs),
    ] {
        if secs.is_some_and(|s| s == 0 || s > MAX_TIMEOUT_SECS) {
            return Err((key, format!("must be 1 to {MAX_TIMEOUT_SECS}")));
        }
    }
    for (key, len) in [
        ("args", s.args.len()),
        ("env", s.env.len()),
        ("headers", s.headers.len()),
        (
            "enabled_tools",
            s.enabled_tools.as_ref().map_or(0, Vec::len),
        ),
        ("disabled_tools", s.disabled_tools.len()),
    ] {
        if len > MAX_LIST {
            return Err((key, format!("may hold at most {MAX_LIST} entries")));
        }
    }
    Ok(())
}

fn is_variable_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(toml: &str) -> Result<(), String> {
        let server: McpServerConfig = toml::from_str(toml).map_err(|e| e.to_string())?;
        validate(&BTreeMap::from([("srv".to_owned(), server)]))
    }

    #[test]
    fn a_server_is_a_command_or_a_url() {
        assert_eq!(one("command = \"npx\"\nargs = [\"-y\", \"x\"]"), Ok(()));
        assert_eq!(
            one("url = \"https://example.com/mcp\"\nbearer_token_env_var = \"TOKEN\""),
            Ok(())
        );
        for (text, says) in [
            ("args = []", "mcp_servers.srv.command or url is needed"),
            (
                "command = \"x\"\nurl = \"http://a\"",
                "mcp_servers.srv.url and command exclude",
            ),
            ("url = \"ftp://a\"", "mcp_servers.srv.url must start with"),
            (
                "command = \"x\"\ncwd = \"rel\"",
                "mcp_servers.srv.cwd must be an absolute",
            ),
            (
                "command = \"x\"\nheaders = { A = \"b\" }",
                "mcp_servers.srv.headers are for url",
            ),
            (
                "url = \"http://a\"\nenv = { A = \"b\" }",
                "env and cwd are for command",
            ),
            (
                "command = \"x\"\nenv = { \"A B\" = \"secret\" }",
                "invalid variable name \"A B\"",
            ),
            (
                "command = \"x\"\nstartup_timeout_secs = 0",
                "startup_timeout_secs must be 1 to",
            ),
            (
                "command = \"x\"\ntool_timeout_secs = 100000",
                "tool_timeout_secs must be 1 to",
            ),
            (
                "url = \"http://a\"\nbearer_token_env_var = \"sk-123\"",
                "bearer_token_env_var must be a variable",
            ),
            (
                "url = \"http://a\"\nheaders = { X = \"a\\nb\" }",
                "must not hold control",
            ),
            ("command = \"x\"\ntimeout = 3", "unknown field `timeout`"),
        ] {
            let err = one(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
            assert!(!err.contains("secret"), "{err}");
        }
    }

    #[test]
    fn names_are_short_and_plain_and_servers_few() {
        let server = McpServerConfig {
            command: Some("x".into()),
            ..McpServerConfig::default()
        };
        for bad in ["", "a b", "a.b", &"x".repeat(33)] {
            let err = validate(&BTreeMap::from([(bad.to_owned(), server.clone())])).unwrap_err();
            assert!(err.contains("not a valid server name"), "{err}");
        }
        let many: BTreeMap<_, _> = (0..=MAX_SERVERS)
            .map(|i| (format!("s{i}"), server.clone()))
            .collect();
        assert!(validate(&many).unwrap_err().contains("at most 32 servers"));
    }
}
