//! `agentctl queue`: the queued steering and follow-ups, or remove them.

use super::{Context, print, resolve};
use crate::error::Result;
use agentd_proto::SessionParams;
use agentd_proto::methods as m;

#[derive(clap::Args)]
pub(crate) struct Queue {
    session: String,
    #[arg(long)]
    clear: bool,
}

impl Queue {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let q = if self.clear {
            ctx.conn
                .call::<m::SessionQueueClear>(SessionParams { session_id })
                .await?
        } else {
            ctx.conn
                .call::<m::SessionQueue>(SessionParams { session_id })
                .await?
        };
        print(ctx.json, &q, |q| {
            for i in &q.steering {
                println!("steer     {}  {}", i.input_id, i.text);
            }
            for i in &q.follow_up {
                println!("follow-up {}  {}", i.input_id, i.text);
            }
        });
        Ok(0)
    }
}
