//! `agentctl doctor`: report the setup without changing anything (it never starts the
//! daemon). Without a daemon it still checks the config, with `agentd --check-config` run in
//! this environment: the one a daemon started from here would get.

use super::table;
use crate::daemon;
use crate::error::{EX_FAILURE, EX_NOPERM, EX_UNAVAILABLE, Result};
use agentd_proto::methods as m;
use agentd_proto::{DaemonInfo, Empty};
use serde::Serialize;
use serde_json::json;

/// What `agentd --check-config` said.
#[derive(Serialize)]
struct ConfigCheck {
    /// Whether it accepted the config.
    ok: bool,
    /// Its report: the config source and each provider's status, or the error naming the key.
    output: String,
}

/// Runs `agentd --check-config`; `None` when no agentd binary can be run.
fn check_config() -> Option<ConfigCheck> {
    let out = std::process::Command::new(daemon::agentd_binary())
        .arg("--check-config")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = if out.status.success() {
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    Some(ConfigCheck {
        ok: out.status.success(),
        output: text.trim_end().to_owned(),
    })
}

/// Runs `agentd --check-mcp`: the config file's MCP servers started and stopped, one line
/// each; `None` when no agentd binary can be run.
fn check_mcp() -> Option<ConfigCheck> {
    let out = std::process::Command::new(daemon::agentd_binary())
        .arg("--check-mcp")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    Some(ConfigCheck {
        ok: out.status.success(),
        output: String::from_utf8_lossy(&out.stdout).trim_end().to_owned(),
    })
}

/// Prints what `agentd --check-mcp` said, a line per server.
fn print_mcp(check: Option<&ConfigCheck>) {
    for line in check.iter().flat_map(|c| c.output.lines()) {
        println!("{}", line.replacen("mcp ", "mcp      ", 1));
    }
}

pub(crate) async fn run(flag: Option<&std::path::Path>, json: bool) -> Result<u8> {
    let socket = daemon::socket_path(flag);
    let log = daemon::log_path();
    let (info, refused): (Option<DaemonInfo>, Option<String>) =
        match daemon::connect(flag, false).await {
            Ok(conn) => (
                Some(conn.call::<m::DaemonInfoMethod>(Empty {}).await?),
                None,
            ),
            Err(f) if f.is_untrusted() => (None, Some(f.message)),
            Err(_) => (None, None),
        };
    let check = check_config();
    // The servers only when the config loads (the daemon would not start otherwise).
    let mcp = check.as_ref().filter(|c| c.ok).and_then(|_| check_mcp());
    let code = match (&info, &check) {
        (None, _) if refused.is_some() => EX_NOPERM,
        (None, _) => EX_UNAVAILABLE,
        (Some(_), Some(c)) if !c.ok => EX_FAILURE,
        _ if mcp.as_ref().is_some_and(|m| !m.ok) => EX_FAILURE,
        _ => 0,
    };
    if json {
        let providers: Vec<_> = info
            .iter()
            .flat_map(|i| &i.providers)
            .map(|p| json!({"name": p.name, "kind": p.kind, "base_url": p.base_url, "status": p.status(), "ready": p.ready, "key_source": p.key_source, "not_ready": p.not_ready, "default_model": p.default_model}))
            .collect();
        let report = json!({
            "agentctl": env!("CARGO_PKG_VERSION"),
            "socket": socket.display().to_string(),
            "reachable": info.is_some(),
            "refused": refused,
            "daemon": info,
            "log": log.display().to_string(),
            "config_check": check,
            "mcp_check": mcp,
            "providers": providers,
        });
        println!("{report}");
        return Ok(code);
    }
    println!("agentctl {}", env!("CARGO_PKG_VERSION"));
    let Some(info) = info else {
        match &refused {
            Some(why) => println!("socket   {} (REFUSED: {why})", socket.display()),
            None => {
                println!("socket   {} (nothing answers)", socket.display());
                println!(
                    "hint     run any agentctl command to start agentd, or `systemctl --user start agentd.socket`"
                );
            }
        }
        println!(
            "log      {} (where agentctl-started daemons log)",
            log.display()
        );
        match check {
            Some(c) if c.ok => {
                println!("config   ok, as a daemon started from here would see it:");
                for line in c.output.lines().skip(1) {
                    println!("         {}", line.trim());
                }
            }
            Some(c) => println!("config   BAD: {}", c.output.trim_start_matches("agentd: ")),
            None => {
                println!("config   not checked: no agentd binary found beside agentctl or on PATH")
            }
        }
        print_mcp(mcp.as_ref());
        return Ok(code);
    };
    println!("socket   {} (ok)", info.socket);
    println!(
        "daemon   agentd {} (protocol {}), pid {}, up {}s",
        info.version,
        info.protocol,
        info.pid,
        info.uptime_ms / 1000
    );
    if info.version != env!("CARGO_PKG_VERSION") {
        println!("warning  agentctl and agentd versions differ");
    }
    println!(
        "config   {}",
        info.config_file
            .as_deref()
            .unwrap_or("built-in defaults (no config file)")
    );
    if let Some(c) = check.filter(|c| !c.ok) {
        println!(
            "warning  the config as it is now would not load: {}",
            c.output.trim_start_matches("agentd: ")
        );
    }
    println!("log      {} (when started by agentctl)", log.display());
    print_mcp(mcp.as_ref());
    let rows: Vec<Vec<String>> = info
        .providers
        .iter()
        .map(|p| {
            vec![
                p.name.clone(),
                p.kind.to_string(),
                p.status(),
                p.base_url.clone(),
            ]
        })
        .collect();
    for line in table(&rows) {
        println!("provider {line}");
    }
    // What to do about each provider that is not ready, in the daemon's words: it knows how
    // it was started, and so which fix works.
    for hint in info.providers.iter().filter_map(|p| p.not_ready.as_deref()) {
        println!("hint     {hint}");
    }
    Ok(code)
}
