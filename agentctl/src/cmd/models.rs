//! `agentctl models`: configured providers and their models.

use super::{Context, print};
use crate::error::Result;
use agentd_proto::Empty;
use agentd_proto::methods as m;

pub(crate) async fn run(ctx: &Context) -> Result<u8> {
    let info = ctx.conn.call::<m::DaemonInfoMethod>(Empty {}).await?;
    if ctx.json {
        for p in &info.providers {
            print(true, p, |_| {});
        }
        return Ok(0);
    }
    for p in &info.providers {
        let key = if p.has_key { "key set" } else { "no key" };
        let mut models = vec![p.default_model.clone()];
        models.extend(p.models.iter().filter(|m| **m != p.default_model).cloned());
        println!(
            "{:<12} {:<12} {:<8} {}  {}",
            p.name,
            p.kind,
            key,
            models.join(", "),
            p.base_url
        );
    }
    Ok(0)
}
