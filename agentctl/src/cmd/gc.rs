//! `agentctl gc`: delete closed sessions not updated for a while.

use super::{Context, print};
use crate::error::{Failure, Result};
use agentd_proto::methods as m;
use agentd_proto::{ListParams, SessionParams, SessionState};

#[derive(clap::Args)]
pub(crate) struct Gc {
    /// Minimum age since the last update, such as 7d, 12h or 30m.
    #[arg(long, value_parser = humantime::parse_duration)]
    older_than: std::time::Duration,
    /// Only print what would be deleted.
    #[arg(long)]
    dry_run: bool,
}

impl Gc {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let list = ctx
            .conn
            .call::<m::SessionList>(ListParams {
                state: Some(SessionState::Closed),
                cwd: None,
            })
            .await?;
        let cutoff = std::time::SystemTime::now()
            .checked_sub(self.older_than)
            .unwrap_or(std::time::UNIX_EPOCH);
        let mut matched = 0;
        for s in list.sessions {
            let updated = humantime::parse_rfc3339(&s.updated).map_err(|e| {
                Failure::failed(format!(
                    "session {}: bad time {:?}: {e}",
                    s.session_id, s.updated
                ))
            })?;
            if updated > cutoff {
                continue;
            }
            matched += 1;
            if !self.dry_run {
                let r = ctx
                    .conn
                    .call::<m::SessionDelete>(SessionParams {
                        session_id: s.session_id.clone(),
                    })
                    .await?;
                if let Some(why) = r.worktree_kept.filter(|_| !ctx.json) {
                    eprintln!("{why}");
                }
            }
            let verb = if self.dry_run {
                "would delete"
            } else {
                "deleted"
            };
            print(ctx.json, &s, |s| {
                println!("{verb} {}  {}", s.session_id, s.updated)
            });
        }
        if matched == 0 && !ctx.json {
            println!(
                "nothing to delete: no closed session was last updated more than {} ago",
                humantime::format_duration(self.older_than)
            );
        }
        Ok(0)
    }
}
