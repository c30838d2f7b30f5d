//! `agentctl status`: the daemon's version, uptime, sessions and providers.

use super::{Context, print};
use crate::error::Result;
use agentd_proto::Empty;
use agentd_proto::methods as m;

pub(crate) async fn run(ctx: &Context) -> Result<u8> {
    let info = ctx.conn.call::<m::DaemonInfoMethod>(Empty {}).await?;
    print(ctx.json, &info, |i| {
        println!(
            "agentd {} (protocol {}), pid {}, up {}s",
            i.version,
            i.protocol,
            i.pid,
            i.uptime_ms / 1000
        );
        println!("socket   {}", i.socket);
        println!(
            "sessions {} ({} processing, {} loaded)",
            i.sessions, i.sessions_processing, i.sessions_loaded
        );
        for p in &i.providers {
            println!(
                "provider {} [{}] {} ({}, default model {})",
                p.name,
                p.kind,
                p.base_url,
                p.status(),
                p.default_model
            );
        }
    });
    Ok(0)
}
