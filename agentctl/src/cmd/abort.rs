//! `agentctl abort`: stop a session's work (and with `--close`, close it).

use super::{Context, print, resolve};
use crate::error::Result;
use agentd_proto::AbortParams;
use agentd_proto::methods as m;

#[derive(clap::Args)]
pub(crate) struct Abort {
    session: String,
    #[arg(long)]
    close: bool,
}

impl Abort {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let r = ctx
            .conn
            .call::<m::SessionAbort>(AbortParams {
                session_id,
                close: self.close,
            })
            .await?;
        print(ctx.json, &r, |r| {
            println!(
                "{}",
                if r.aborted {
                    "aborted"
                } else {
                    "nothing was running"
                }
            );
            let queued = r.queue.steering.len() + r.queue.follow_up.len();
            if queued > 0 {
                println!("{queued} queued item(s) kept; see `agentctl queue`");
            }
        });
        Ok(0)
    }
}
