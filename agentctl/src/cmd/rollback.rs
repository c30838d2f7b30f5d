//! `agentctl rollback`: move the branch back by user inputs.

use super::{Context, print, resolve};
use crate::error::{Failure, Result};
use agentd_proto::RollbackParams;
use agentd_proto::methods as m;

#[derive(clap::Args)]
pub(crate) struct Rollback {
    session: String,
    /// How many user inputs to undo.
    #[arg(long, default_value_t = 1)]
    turns: usize,
}

impl Rollback {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let r = ctx
            .conn
            .call::<m::SessionRollback>(RollbackParams {
                session_id,
                turns: self.turns,
                files: false,
                force: false,
            })
            .await
            .map_err(|e| {
                let mut f = Failure::from(e);
                f.message = f.message.replace("(turns must", "(--turns must");
                f
            })?;
        print(ctx.json, &r, |r| {
            println!("{} entries off the branch; {} left", r.removed, r.entries)
        });
        Ok(0)
    }
}
