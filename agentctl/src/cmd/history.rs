//! `agentctl history`: the conversation on the current branch.

use super::{Context, print, resolve};
use crate::error::Result;
use agentd_proto::HistoryParams;
use agentd_proto::methods as m;

#[derive(clap::Args)]
pub(crate) struct History {
    session: String,
    #[arg(long, default_value_t = 0)]
    offset: usize,
    #[arg(long)]
    limit: Option<usize>,
}

impl History {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let h = ctx
            .conn
            .call::<m::SessionHistory>(HistoryParams {
                session_id,
                offset: self.offset,
                limit: self.limit,
            })
            .await?;
        if ctx.json {
            for e in &h.entries {
                print(true, e, |_| {});
            }
        } else {
            for e in &h.entries {
                println!(
                    "{}  {}",
                    e.id,
                    serde_json::to_string(&e.turn).unwrap_or_default()
                );
            }
        }
        Ok(0)
    }
}
