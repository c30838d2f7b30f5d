//! `agentctl close`: close a session.

use super::{Context, print, resolve};
use crate::error::Result;
use agentd_proto::SessionParams;
use agentd_proto::methods as m;

#[derive(clap::Args)]
pub(crate) struct Close {
    session: String,
}

impl Close {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let r = ctx
            .conn
            .call::<m::SessionClose>(SessionParams { session_id })
            .await?;
        print(ctx.json, &r, |_| println!("closed"));
        Ok(0)
    }
}
