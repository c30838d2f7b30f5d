//! `agentctl doctor`: report the setup without changing anything (it never starts the
//! daemon).

use crate::daemon;
use crate::error::{Failure, Result};
use agentd_proto::Empty;
use agentd_proto::methods as m;

pub(crate) async fn run(flag: Option<&std::path::Path>) -> Result<u8> {
    let socket = daemon::socket_path(flag);
    println!("agentctl {}", env!("CARGO_PKG_VERSION"));
    let conn = match daemon::connect(flag, false).await {
        Ok(conn) => conn,
        Err(Failure(code, _)) => {
            println!("socket   {} (nothing answers)", socket.display());
            println!(
                "hint     run any agentctl command to start agentd, or `systemctl --user start agentd.socket`"
            );
            println!(
                "log      {} (where agentctl-started daemons log)",
                daemon::log_path().display()
            );
            return Ok(code);
        }
    };
    let info = conn.call::<m::DaemonInfoMethod>(Empty {}).await?;
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
    println!(
        "log      {} (when started by agentctl)",
        daemon::log_path().display()
    );
    for p in &info.providers {
        let key = if p.has_key { "key set" } else { "no key" };
        println!(
            "provider {:<12} {:<12} {key:<8} {}",
            p.name, p.kind, p.base_url
        );
    }
    Ok(0)
}
