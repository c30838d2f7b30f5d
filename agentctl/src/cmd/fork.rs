//! `agentctl fork`: a new session continuing from an entry of another.

use super::{Context, print, resolve};
use crate::error::{Failure, Kind, Result, RpcError};
use agentd_proto::methods as m;
use agentd_proto::{EntryId, ForkParams};

#[derive(clap::Args)]
pub(crate) struct Fork {
    session: String,
    /// The last history entry to copy [default: the newest]
    #[arg(long)]
    at: Option<String>,
    /// Title of the new session.
    #[arg(long)]
    title: Option<String>,
}

impl Fork {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let at = self.at.is_some();
        let snapshot = ctx
            .conn
            .call::<m::SessionFork>(ForkParams {
                session_id: session_id.clone(),
                entry_id: self.at.map(EntryId),
                title: self.title,
            })
            .await
            .map_err(|e| {
                let mut f = Failure::from(e);
                // The daemon speaks of its method; a person here has a command and a flag.
                if at && f.kind == Kind::Rpc(RpcError::InvalidParams) {
                    f.message = format!(
                        "--at: {} (`agentctl history {session_id}` lists the entries)",
                        f.message.replace(" (see session/history)", "")
                    );
                }
                f
            })?;
        print(ctx.json, &snapshot, |s| println!("{}", s.session_id));
        Ok(0)
    }
}
