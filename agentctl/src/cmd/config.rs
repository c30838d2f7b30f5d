//! `agentctl config SESSION [KEY=VALUE...]`: show a session's config, or change it from the next
//! LLM call (`session/set_config`). Keys are the flags of `agentctl new` without their dashes
//! (`max-turns=5`), plus the settings that have no flag; protocol field names are accepted too.

use super::{Context, resolve, table};
use crate::error::{Failure, Result};
use agentd_proto::methods as m;
use agentd_proto::{
    ApprovalMode, ConfigPatch, ReasoningEffort, SandboxMode, SessionConfig, SessionParams,
    SetConfigParams, UnknownName,
};
use serde::Serialize;
use serde_json::{Value, json};
use std::str::FromStr;
use std::time::Duration;

/// The keys, for `--help` and the man page (a test keeps it in step with [`SETTINGS`]).
const KEYS_HELP: &str = "\
Keys (as the flags of `agentctl new`):
  provider, model          switching provider without model picks its default model
  effort                   low, medium, high, or default
  max-turns, max-rounds    0 is unlimited
  timeout, max-timeout     shell command time limits: 30s, 5m, 1h
  max-output-tokens, loop-detection (true/false), loop-window, context-window,
  auto-compact (percent; 0 is off), max-subagent-depth, max-subagents
  approval                 auto, or ask (commands and file changes wait for an answer)
  approval-timeout, ask-user (true/false: offer the model the ask_user tool)
  sandbox                  read_only, workspace_write or off (what commands and file tools may write)
  writable-roots           more absolute directories workspace_write may write, comma-separated
  sandbox-network          whether sandboxed commands may use TCP (true/false)";

#[derive(clap::Args)]
#[command(after_help = KEYS_HELP)]
pub(crate) struct Config {
    session: String,
    /// Settings to change, such as `model=claude-opus-4-1 effort=high max-turns=20 timeout=2m`;
    /// none: print the config.
    #[arg(value_name = "KEY=VALUE")]
    pairs: Vec<String>,
}

/// How a setting's value is written.
#[derive(Clone, Copy)]
enum Kind {
    Text,
    /// A [`ReasoningEffort`], or `default`.
    Effort,
    /// A whole number of at most `max`.
    Count(u64),
    /// A duration (`30s`, `5m`), sent in milliseconds.
    Millis,
    Bool,
    /// One of a protocol enum's names (`-` may stand for `_`): [`choice`].
    Choice(fn(&str) -> std::result::Result<Value, UnknownName>),
    /// Absolute paths, comma-separated; empty for none.
    Paths,
}

/// One setting: the name people use, the protocol field, how its value is written, and what
/// it means.
struct Setting {
    key: &'static str,
    field: &'static str,
    kind: Kind,
    what: &'static str,
}

const U32: u64 = u32::MAX as u64;

const SETTINGS: &[Setting] = &[
    Setting {
        key: "provider",
        field: "provider",
        kind: Kind::Text,
        what: "provider name; its default model too unless model is given",
    },
    Setting {
        key: "model",
        field: "model",
        kind: Kind::Text,
        what: "model",
    },
    Setting {
        key: "effort",
        field: "reasoning_effort",
        kind: Kind::Effort,
        what: "low, medium, high, or default",
    },
    Setting {
        key: "max-turns",
        field: "max_turns",
        kind: Kind::Count(U32),
        what: "most model turns in the session; 0 is unlimited",
    },
    Setting {
        key: "max-rounds",
        field: "max_tool_rounds_per_input",
        kind: Kind::Count(U32),
        what: "most tool rounds for one input; 0 is unlimited",
    },
    Setting {
        key: "timeout",
        field: "default_command_timeout_ms",
        kind: Kind::Millis,
        what: "time limit of a shell command that sets none (raises max-timeout if above it)",
    },
    Setting {
        key: "max-timeout",
        field: "max_command_timeout_ms",
        kind: Kind::Millis,
        what: "the longest any shell command may run",
    },
    Setting {
        key: "max-output-tokens",
        field: "max_output_tokens",
        kind: Kind::Count(U32),
        what: "most output tokens of one LLM call",
    },
    Setting {
        key: "loop-detection",
        field: "enable_loop_detection",
        kind: Kind::Bool,
        what: "warn the model when its tool calls repeat (true or false)",
    },
    Setting {
        key: "loop-window",
        field: "loop_detection_window",
        kind: Kind::Count(u64::MAX),
        what: "recent tool calls loop detection looks at",
    },
    Setting {
        key: "context-window",
        field: "context_window_tokens",
        kind: Kind::Count(u64::MAX),
        what: "the model's context window in tokens",
    },
    Setting {
        key: "auto-compact",
        field: "auto_compact_percent",
        kind: Kind::Count(100),
        what: "compact at this % of the context window; 0 is off",
    },
    Setting {
        key: "max-subagent-depth",
        field: "max_subagent_depth",
        kind: Kind::Count(U32),
        what: "how deep subagents may nest; 0 turns them off",
    },
    Setting {
        key: "max-subagents",
        field: "max_concurrent_subagents",
        kind: Kind::Count(U32),
        what: "most subagents working at once",
    },
    Setting {
        key: "approval",
        field: "approval.mode",
        kind: Kind::Choice(choice::<ApprovalMode>),
        what: "ask: commands and file changes wait for an answer (agentctl respond)",
    },
    Setting {
        key: "approval-timeout",
        field: "approval.timeout_ms",
        kind: Kind::Millis,
        what: "how long a request waits for an answer before it is refused",
    },
    Setting {
        key: "ask-user",
        field: "approval.ask_user",
        kind: Kind::Bool,
        what: "offer the model the ask_user tool (always offered with approval=ask)",
    },
    Setting {
        key: "sandbox",
        field: "sandbox",
        kind: Kind::Choice(choice::<SandboxMode>),
        what: "what commands and file tools may write: read_only, workspace_write or off",
    },
    Setting {
        key: "writable-roots",
        field: "sandbox_writable_roots",
        kind: Kind::Paths,
        what: "more directories workspace_write may write (comma-separated)",
    },
    Setting {
        key: "sandbox-network",
        field: "sandbox_network",
        kind: Kind::Bool,
        what: "whether sandboxed commands may use TCP",
    },
];

fn known_keys() -> String {
    SETTINGS
        .iter()
        .map(|s| s.key)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The setting `name` names: its key, the key with underscores, or the protocol field.
fn setting(name: &str) -> Option<&'static Setting> {
    let dashed = name.replace('_', "-");
    SETTINGS.iter().find(|s| s.key == dashed || s.field == name)
}

/// `message` from the daemon with its protocol field names (`max_tool_rounds_per_input`) put
/// in the words people typed: the `config` keys, or with `flags` the `new` flags
/// (`--max-rounds`) where there is one.
pub(crate) fn in_our_words(message: &str, flags: bool) -> String {
    const FLAGS: [&str; 9] = [
        "provider",
        "model",
        "effort",
        "max-turns",
        "max-rounds",
        "timeout",
        "sandbox",
        "writable-roots",
        "sandbox-network",
    ];
    let mut settings: Vec<&Setting> = SETTINGS.iter().collect();
    // Longest first, so no field is replaced inside a longer one.
    settings.sort_by_key(|s| std::cmp::Reverse(s.field.len()));
    let mut out = message.to_owned();
    for s in settings {
        // Plain words (`provider`, `model`) read the same either way, and replacing them
        // would garble prose and kinds (`provider_not_configured`).
        if !s.field.contains('_') {
            continue;
        }
        let word = if flags && FLAGS.contains(&s.key) {
            format!("--{}", s.key)
        } else {
            s.key.to_owned()
        };
        out = out.replace(s.field, &word);
    }
    out
}

/// Parses a duration such as `30s`, `5m` or `1h30m` (more than zero).
pub(crate) fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let d = humantime::parse_duration(text.trim()).map_err(|e| {
        format!("{e}: write a duration such as 30s, 5m or 1h (a bare number needs a unit)")
    })?;
    if d.is_zero() {
        return Err("must be more than 0".into());
    }
    Ok(d)
}

/// The value of a [`Kind::Choice`] setting of type `T`.
fn choice<T: FromStr<Err = UnknownName> + Serialize>(
    value: &str,
) -> std::result::Result<Value, UnknownName> {
    value.replace('-', "_").parse::<T>().map(|v| json!(v))
}

/// The JSON value of `value` for `s`, or a message saying what is wrong.
fn parse_value(s: &Setting, value: &str) -> std::result::Result<Value, String> {
    match s.kind {
        Kind::Text if value.trim().is_empty() => Err("must not be empty".into()),
        Kind::Text => Ok(json!(value)),
        Kind::Effort => match value {
            "default" | "none" => Ok(Value::Null),
            _ => value
                .parse::<ReasoningEffort>()
                .map(|e| json!(e))
                .map_err(|_| format!("use {}, or default", ReasoningEffort::NAMES.join(", "))),
        },
        Kind::Count(max) => match value.parse::<u64>() {
            Ok(n) if n <= max => Ok(json!(n)),
            Ok(_) => Err(format!("must be at most {max}")),
            Err(_) => Err(format!("not a whole number from 0 to {max}")),
        },
        Kind::Millis => {
            let d = parse_duration(value)?;
            Ok(json!(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)))
        }
        Kind::Bool => match value {
            "true" | "on" | "yes" | "1" => Ok(json!(true)),
            "false" | "off" | "no" | "0" => Ok(json!(false)),
            _ => Err("use true or false".into()),
        },
        Kind::Choice(parse) => parse(value).map_err(|e| format!("use {}", e.choices())),
        Kind::Paths => {
            let paths: Vec<&str> = value
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .collect();
            match paths.iter().find(|p| !p.starts_with('/')) {
                Some(p) => Err(format!("{p:?} is not an absolute path")),
                None => Ok(json!(paths)),
            }
        }
    }
}

/// The patch `pairs` ask for; a usage error names the pair that is wrong.
fn patch(pairs: &[String]) -> Result<ConfigPatch> {
    let mut fields = serde_json::Map::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(Failure::usage(format!(
                "expected KEY=VALUE, got {pair:?} (keys: {})",
                known_keys()
            )));
        };
        let Some(s) = setting(key.trim()) else {
            return Err(Failure::usage(format!(
                "unknown setting {key:?}; known: {}",
                known_keys()
            )));
        };
        let value = parse_value(s, value.trim())
            .map_err(|why| Failure::usage(format!("bad value for {}: {value:?}: {why}", s.key)))?;
        // A dotted field is nested: `approval.mode` is `{"approval": {"mode": ...}}`.
        let mut object = &mut fields;
        let mut path = s.field.split('.').peekable();
        while let Some(name) = path.next() {
            if path.peek().is_none() {
                object.insert(name.to_owned(), value);
                break;
            }
            let inner = object
                .entry(name.to_owned())
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            let Value::Object(inner) = inner else {
                unreachable!("only settings make nested objects")
            };
            object = inner;
        }
    }
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| Failure::usage(format!("bad settings: {e}")))
}

/// The value of `s` in `config`, written as `config` takes it.
fn shown(s: &Setting, config: &Value) -> String {
    let v = s.field.split('.').fold(config, |v, name| &v[name]);
    match s.kind {
        Kind::Effort if v.is_null() => "default".into(),
        Kind::Paths => v
            .as_array()
            .map(|a| {
                let paths: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
                paths.join(",")
            })
            .unwrap_or_default(),
        Kind::Millis => v
            .as_u64()
            .map(|ms| humantime::format_duration(Duration::from_millis(ms)).to_string())
            .unwrap_or_else(|| v.to_string()),
        _ => v.as_str().map_or_else(|| v.to_string(), str::to_owned),
    }
}

/// Prints `config` one setting per line, the keys `agentctl config` takes.
/// With `only`, just those protocol fields, without their meaning.
pub(crate) fn print_config(config: &SessionConfig, only: Option<&[&str]>) {
    let value = serde_json::to_value(config).unwrap_or_default();
    let rows: Vec<Vec<String>> = SETTINGS
        .iter()
        .filter(|s| {
            let top = s.field.split('.').next().unwrap_or_default();
            only.is_none_or(|keys| keys.contains(&top))
        })
        .map(|s| {
            let mut row = vec![s.key.to_owned(), shown(s, &value)];
            if only.is_none() {
                row.push(format!("# {}", s.what));
            }
            row
        })
        .collect();
    for line in table(&rows) {
        println!("{line}");
    }
}

impl Config {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        // Checked before anything is sent, so a typo changes nothing.
        let patch = (!self.pairs.is_empty())
            .then(|| patch(&self.pairs))
            .transpose()?;
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let (snapshot, changed) = match patch {
            None => (
                ctx.conn
                    .call::<m::SessionGet>(SessionParams { session_id })
                    .await?,
                None,
            ),
            Some(mut config) => {
                // As `new --timeout`: a default above the cap would be cut to the cap.
                if let (Some(t), None) = (
                    config.default_command_timeout_ms,
                    config.max_command_timeout_ms,
                ) {
                    let now = ctx
                        .conn
                        .call::<m::SessionGet>(SessionParams {
                            session_id: session_id.clone(),
                        })
                        .await?;
                    if t > now.config.max_command_timeout_ms {
                        config.max_command_timeout_ms = Some(t);
                    }
                }
                let fields = serde_json::to_value(&config).unwrap_or_default();
                let changed: Vec<String> = fields
                    .as_object()
                    .map(|o| o.keys().cloned().collect())
                    .unwrap_or_default();
                let snapshot = match ctx
                    .conn
                    .call::<m::SessionSetConfig>(SetConfigParams { session_id, config })
                    .await
                {
                    Ok(s) => s,
                    Err(e) => {
                        let mut f = Failure::from(e);
                        f.message = in_our_words(&f.message, false);
                        return Err(f);
                    }
                };
                (snapshot, Some(changed))
            }
        };
        if ctx.json {
            println!(
                "{}",
                serde_json::to_string(&snapshot.config).unwrap_or_default()
            );
            return Ok(0);
        }
        match changed {
            None => print_config(&snapshot.config, None),
            Some(fields) => {
                let mut fields: Vec<&str> = fields.iter().map(String::as_str).collect();
                // A provider switch without a model picks the provider's default model.
                if fields.contains(&"provider") {
                    fields.push("model");
                }
                print_config(&snapshot.config, Some(&fields));
            }
        }
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pairs: &[&str]) -> std::result::Result<Value, String> {
        let pairs: Vec<String> = pairs.iter().map(|p| p.to_string()).collect();
        patch(&pairs)
            .map(|p| serde_json::to_value(p).unwrap())
            .map_err(|f| f.message)
    }

    #[test]
    fn daemon_messages_name_keys_and_flags() {
        let said = "invalid config: loop_detection_window must be at least 2";
        assert_eq!(
            in_our_words(said, false),
            "invalid config: loop-window must be at least 2"
        );
        let said = "default_command_timeout_ms and max_command_timeout_ms must be at least 1";
        assert_eq!(
            in_our_words(said, true),
            "--timeout and max-timeout must be at least 1"
        );
        assert_eq!(
            in_our_words("max_tool_rounds_per_input", true),
            "--max-rounds"
        );
    }

    #[test]
    fn the_help_names_every_key() {
        for s in SETTINGS {
            assert!(KEYS_HELP.contains(s.key), "{}", s.key);
        }
    }

    #[test]
    fn pairs_become_a_patch() {
        assert_eq!(
            check(&[
                "model=m",
                "effort=default",
                "max-turns=3",
                "max_rounds=2",
                "timeout=90s",
                "loop-detection=off"
            ]),
            Ok(
                json!({"model": "m", "reasoning_effort": null, "max_turns": 3,
                "max_tool_rounds_per_input": 2, "default_command_timeout_ms": 90000,
                "enable_loop_detection": false})
            )
        );
        assert_eq!(
            check(&["max_tool_rounds_per_input=1"]),
            Ok(json!({"max_tool_rounds_per_input": 1}))
        );
        assert_eq!(
            check(&[
                "sandbox=read-only",
                "writable-roots=/a, /b",
                "sandbox-network=on"
            ]),
            Ok(
                json!({"sandbox": "read_only", "sandbox_writable_roots": ["/a", "/b"],
                "sandbox_network": true})
            )
        );
        assert_eq!(
            check(&["writable-roots="]),
            Ok(json!({"sandbox_writable_roots": []}))
        );
    }

    #[test]
    fn bad_pairs_name_the_key() {
        assert_eq!(
            check(&["max-turns=many"]),
            Err(
                "bad value for max-turns: \"many\": not a whole number from 0 to 4294967295".into()
            )
        );
        assert_eq!(
            check(&["auto-compact=101"]),
            Err("bad value for auto-compact: \"101\": must be at most 100".into())
        );
        assert!(
            check(&["colour=red"])
                .unwrap_err()
                .starts_with("unknown setting \"colour\"; known: provider, model,")
        );
        assert!(
            check(&["model"])
                .unwrap_err()
                .starts_with("expected KEY=VALUE, got \"model\"")
        );
        assert!(
            check(&["timeout=30"])
                .unwrap_err()
                .starts_with("bad value for timeout: \"30\": ")
        );
        assert_eq!(
            check(&["sandbox=none"]),
            Err("bad value for sandbox: \"none\": use read_only, workspace_write or off".into())
        );
        assert_eq!(
            check(&["writable-roots=/a,b"]),
            Err("bad value for writable-roots: \"/a,b\": \"b\" is not an absolute path".into())
        );
        assert_eq!(
            check(&["effort=max"]),
            Err("bad value for effort: \"max\": use low, medium, high, or default".into())
        );
    }
}
