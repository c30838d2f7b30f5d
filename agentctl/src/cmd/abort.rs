//! `agentctl abort`: stop a session's work (and with `--close`, close it).

use super::{Context, print, resolve};
use crate::error::Result;
use agentd_proto::methods as m;
use agentd_proto::{AbortParams, SessionState};

#[derive(clap::Args)]
pub(crate) struct Abort {
    session: String,
    /// Close the session too.
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
            let closed = r.state == SessionState::Closed;
            println!(
                "{}",
                match (r.aborted, closed) {
                    (true, true) => "aborted and closed",
                    (false, true) => "closed (nothing was running)",
                    (true, false) => "aborted",
                    (false, false) => "nothing was running",
                }
            );
            let queued = r.queue.steering.len() + r.queue.follow_up.len();
            if queued > 0 && !closed {
                println!("{queued} queued item(s) kept; see `agentctl queue`");
            }
        });
        Ok(0)
    }
}
