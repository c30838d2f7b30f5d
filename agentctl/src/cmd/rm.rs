//! `agentctl rm`: delete sessions with everything stored about them.

use super::{Context, print, resolve};
use crate::error::Result;
use agentd_proto::SessionParams;
use agentd_proto::methods as m;

#[derive(clap::Args)]
pub(crate) struct Rm {
    #[arg(required = true)]
    sessions: Vec<String>,
}

impl Rm {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        for session in self.sessions {
            let session_id = resolve(&ctx.conn, &session).await?;
            let r = ctx
                .conn
                .call::<m::SessionDelete>(SessionParams { session_id })
                .await?;
            print(ctx.json, &r, |r| {
                println!("deleted {}", r.session_id);
                if let Some(why) = &r.worktree_kept {
                    println!("{why}");
                }
            });
        }
        Ok(0)
    }
}
