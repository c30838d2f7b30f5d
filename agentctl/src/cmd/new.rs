//! `agentctl new`: create a session; its options are shared with `submit --new`.

use super::{Context, print};
use crate::error::{Failure, Result};
use agentd_proto::CreateParams;
use agentd_proto::methods as m;
use std::path::PathBuf;

#[derive(clap::Args)]
pub(crate) struct NewArgs {
    /// Working directory [default: the current directory]
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Provider name (see `agentctl status`).
    #[arg(long)]
    provider: Option<String>,
    /// Model.
    #[arg(long)]
    model: Option<String>,
    /// Tool profile.
    #[arg(long)]
    profile: Option<String>,
    /// Title shown in lists.
    #[arg(long)]
    title: Option<String>,
    /// Extra instructions appended to the system prompt.
    #[arg(long)]
    instructions: Option<String>,
    /// Refuse file writes and deletes (commands still run).
    #[arg(long)]
    read_only: bool,
}

impl NewArgs {
    /// The `session/create` params these options ask for.
    pub(crate) fn params(self) -> Result<CreateParams> {
        let cwd = match self.cwd {
            Some(c) => std::path::absolute(c),
            None => std::env::current_dir(),
        }
        .map_err(|e| Failure(1, format!("cannot resolve the working directory: {e}")))?;
        Ok(CreateParams {
            cwd: cwd.display().to_string(),
            provider: self.provider,
            model: self.model,
            profile: self.profile,
            config: None,
            title: self.title,
            instructions: self.instructions,
            read_only: self.read_only,
        })
    }
}

pub(crate) async fn run(args: NewArgs, ctx: &Context) -> Result<u8> {
    let snapshot = ctx.conn.call::<m::SessionCreate>(args.params()?).await?;
    print(ctx.json, &snapshot, |s| println!("{}", s.session_id));
    Ok(0)
}
