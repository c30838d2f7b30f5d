//! `agentctl daemon status|stop|restart|reload`: the daemon's own life, through `daemon/info`,
//! `daemon/shutdown` and `daemon/reload`. These never start a daemon, except `restart`, which
//! starts one in this environment (so keys and config changed since are picked up). Under
//! systemd, `systemctl --user` owns the daemon and `restart` says so instead. `reload` needs
//! no restart at all: new sessions get the config file as it is now.

use super::status;
use crate::client::Connection;
use crate::daemon;
use crate::error::{EX_UNAVAILABLE, Failure, Result};
use agentd_proto::Empty;
use agentd_proto::methods as m;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(clap::Subcommand)]
pub(crate) enum DaemonCommand {
    /// Whether agentd runs, and its version, uptime, sessions and providers (exit 69 if not).
    Status,
    /// Stop agentd gracefully: running work is aborted, sessions stay stored.
    Stop,
    /// Stop agentd and start it again from this shell, with this shell's environment.
    Restart,
    /// Read config.toml again (as SIGHUP does): new sessions get the new config, running ones
    /// keep theirs; a file that does not load is refused and the old config stays.
    Reload,
}

/// Whether `pid` has exited: it no longer exists, or it is a zombie its parent has not
/// reaped yet (its work is over all the same).
fn exited(pid: nix::unistd::Pid) -> bool {
    // Signal 0 only asks whether the process exists.
    if nix::sys::signal::kill(pid, None).is_err() {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the parenthesised command name.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// Waits until the process `pid` has exited.
async fn gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut pause = Duration::from_millis(2);
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
    while Instant::now() < deadline {
        if exited(pid) {
            return true;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    false
}

/// Stops the daemon behind `conn`; returns its pid once it has exited.
async fn stop(conn: Connection, json: bool) -> Result<u32> {
    let info = conn.call::<m::DaemonInfoMethod>(Empty {}).await?;
    let r = conn.call::<m::DaemonShutdown>(Empty {}).await?;
    drop(conn);
    if !gone(info.pid).await {
        return Err(Failure::failed(format!(
            "agentd (pid {}) was asked to stop but is still running after 30 s",
            info.pid
        )));
    }
    if !json {
        println!(
            "stopped agentd (pid {}; work aborted in {} session(s), all sessions kept)",
            info.pid, r.aborted
        );
    }
    Ok(info.pid)
}

impl DaemonCommand {
    pub(crate) async fn run(self, socket: Option<&Path>, json: bool) -> Result<u8> {
        let conn = match daemon::connect(socket, false).await {
            // Not "not running": something is there that this user must not talk to.
            Err(f) if f.is_untrusted() => return Err(f),
            conn => conn,
        };
        match (self, conn) {
            (DaemonCommand::Status, Ok(conn)) => {
                let socket = daemon::socket_path(socket);
                status::run(&super::Context { conn, socket, json }).await
            }
            (DaemonCommand::Reload, Err(_)) => Err(Failure::unavailable(format!(
                "agentd is not running (nothing answers at {}); a daemon reads the config when it starts",
                daemon::socket_path(socket).display()
            ))),
            (DaemonCommand::Reload, Ok(conn)) => {
                let r = conn.call::<m::DaemonReload>(Empty {}).await?;
                super::print(json, &r, |r| {
                    println!(
                        "reloaded {}; new sessions use it, running sessions keep their settings",
                        r.config_file
                            .as_deref()
                            .unwrap_or("the built-in defaults (no config file)")
                    );
                    for w in &r.warnings {
                        println!("warning  {w}");
                    }
                    if !r.restart_needed.is_empty() {
                        let keys: Vec<&str> = r.restart_needed.iter().map(|k| k.as_str()).collect();
                        println!(
                            "note     changed, but applied only when agentd starts again: {}",
                            keys.join(", ")
                        );
                    }
                    let rows: Vec<Vec<String>> = r
                        .providers
                        .iter()
                        .map(|p| vec![p.name.clone(), p.kind.to_string(), p.status()])
                        .collect();
                    for line in super::table(&rows) {
                        println!("provider {line}");
                    }
                });
                Ok(0)
            }
            (DaemonCommand::Status | DaemonCommand::Stop, Err(_)) => {
                if json {
                    println!("{{\"running\":false}}");
                } else {
                    println!(
                        "agentd is not running (nothing answers at {})",
                        daemon::socket_path(socket).display()
                    );
                }
                Ok(EX_UNAVAILABLE)
            }
            (DaemonCommand::Stop, Ok(conn)) => {
                let info = conn.call::<m::DaemonInfoMethod>(Empty {}).await?;
                let systemd = daemon::under_systemd(&info);
                let pid = stop(conn, json).await?;
                if json {
                    println!("{{\"stopped\":{pid}}}");
                } else if systemd {
                    println!(
                        "note: systemd starts it again on the next connection while agentd.socket \
                         is active; `systemctl --user stop agentd.socket agentd.service` stops both"
                    );
                }
                Ok(0)
            }
            (DaemonCommand::Restart, conn) => {
                if let Ok(conn) = conn {
                    let info = conn.call::<m::DaemonInfoMethod>(Empty {}).await?;
                    if daemon::under_systemd(&info) {
                        return Err(Failure::usage(format!(
                            "agentd (pid {}) runs under systemd: restart it with \
                             `systemctl --user restart agentd.service`",
                            info.pid
                        )));
                    }
                    stop(conn, json).await?;
                }
                let conn = daemon::launch(&daemon::socket_path(socket)).await?;
                let info = conn.call::<m::DaemonInfoMethod>(Empty {}).await?;
                if json {
                    println!("{}", serde_json::to_string(&info).unwrap_or_default());
                } else {
                    println!("started agentd {} (pid {})", info.version, info.pid);
                }
                Ok(0)
            }
        }
    }
}
