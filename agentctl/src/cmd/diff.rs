//! `agentctl diff`: what the agent changed in the files for one input.

use super::Context;
use super::undo::session_or_here;
use crate::error::Result;
use agentd_proto::methods as m;
use agentd_proto::{DiffParams, InputId};

#[derive(clap::Args)]
pub(crate) struct Diff {
    /// The session (default: the newest one in the current directory).
    session: Option<String>,
    /// The input (`user_input`'s `input_id`, as `agentctl history` shows it); default: the
    /// newest.
    #[arg(long)]
    input: Option<String>,
}

impl Diff {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = session_or_here(ctx, self.session.as_deref()).await?;
        let r = ctx
            .conn
            .call::<m::SessionDiff>(DiffParams {
                session_id,
                input_id: self.input.map(InputId::from),
            })
            .await?;
        if ctx.json {
            println!("{}", serde_json::to_string(&r).unwrap_or_default());
        } else {
            print!("{}", r.diff);
        }
        Ok(0)
    }
}
