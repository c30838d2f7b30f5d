//! `agentctl models`: configured providers, whether each can be used, and their models.

use super::{Context, print, table};
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
    let mut rows = vec![
        [
            "PROVIDER",
            "KIND",
            "STATUS",
            "BASE URL",
            "MODELS (default first)",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for p in &info.providers {
        let mut models = vec![p.default_model.clone()];
        models.extend(p.models.iter().filter(|m| **m != p.default_model).cloned());
        rows.push(vec![
            p.name.clone(),
            p.kind.to_string(),
            p.status(),
            p.base_url.clone(),
            models.join(", "),
        ]);
    }
    for line in table(&rows) {
        println!("{line}");
    }
    Ok(0)
}
