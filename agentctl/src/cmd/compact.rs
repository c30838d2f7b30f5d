//! `agentctl compact`: summarize older turns with the session's model.

use super::{Context, print, resolve};
use crate::error::Result;
use agentd_proto::SessionParams;
use agentd_proto::methods as m;

#[derive(clap::Args)]
pub(crate) struct Compact {
    session: String,
}

impl Compact {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let r = ctx
            .conn
            .call::<m::SessionCompact>(SessionParams { session_id })
            .await?;
        print(ctx.json, &r, |r| {
            println!(
                "~{} tokens -> ~{} ({} entries summarized, {} kept)",
                r.tokens_before, r.tokens_after, r.entries_summarized, r.entries_kept
            )
        });
        Ok(0)
    }
}
