//! `agentctl show`: one session's snapshot.

use super::{Context, print, resolve};
use crate::error::Result;
use agentd_proto::SessionParams;
use agentd_proto::methods as m;

#[derive(clap::Args)]
pub(crate) struct Show {
    session: String,
}

impl Show {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let s = ctx
            .conn
            .call::<m::SessionGet>(SessionParams { session_id })
            .await?;
        print(ctx.json, &s, |s| {
            println!("{}", serde_json::to_string_pretty(s).unwrap_or_default())
        });
        Ok(0)
    }
}
