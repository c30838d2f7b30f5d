//! `agentctl commands`: the skills and prompt commands a session's input may start with
//! (`/name`), for people and for completion scripts (`--names`).

use super::{Context, print, resolve, table};
use crate::error::Result;
use agentd_proto::SessionParams;
use agentd_proto::methods as m;

#[derive(clap::Args)]
pub(crate) struct Commands {
    session: String,
    /// Print only `/name`, one a line (for shell completion).
    #[arg(long)]
    names: bool,
}

impl Commands {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let listed = ctx
            .conn
            .call::<m::SessionCommands>(SessionParams { session_id })
            .await?;
        if self.names && !ctx.json {
            for c in &listed.commands {
                println!("/{}", c.name);
            }
            return Ok(0);
        }
        print(ctx.json, &listed, |listed| {
            let rows: Vec<Vec<String>> = listed
                .commands
                .iter()
                .map(|c| {
                    let name = match &c.argument_hint {
                        Some(hint) => format!("/{} {hint}", c.name),
                        None => format!("/{}", c.name),
                    };
                    vec![
                        name,
                        c.kind.to_string(),
                        c.scope.to_string(),
                        c.description.clone(),
                    ]
                })
                .collect();
            for line in table(&rows) {
                println!("{line}");
            }
            for w in &listed.warnings {
                eprintln!("warning: {w}");
            }
        });
        Ok(0)
    }
}
