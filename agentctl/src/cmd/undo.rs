//! `agentctl undo` and `agentctl redo`: the conversation and the files the agent changed go
//! back (or forward again) together.

use super::{Context, print, resolve};
use crate::error::{Failure, Result};
use agentd_proto::methods as m;
use agentd_proto::{
    ErrorData, ErrorKind, FilesRestored, ListParams, RedoParams, RollbackParams, SessionId,
};
use jsonrpsee::core::ClientError;
use std::fmt::Write;

#[derive(clap::Args)]
pub(crate) struct Undo {
    /// The session (default: the newest one in the current directory).
    session: Option<String>,
    /// How many user inputs to undo, each with everything that followed it.
    #[arg(long, default_value_t = 1)]
    turns: usize,
    /// Restore files the user changed since the agent did too (their versions are kept for
    /// `agentctl redo`).
    #[arg(long)]
    force: bool,
}

#[derive(clap::Args)]
pub(crate) struct Redo {
    /// The session (default: the newest one in the current directory).
    session: Option<String>,
    /// Overwrite files changed since the undo too.
    #[arg(long)]
    force: bool,
}

/// The session named, or the newest one whose directory is the current one.
pub(crate) async fn session_or_here(ctx: &Context, session: Option<&str>) -> Result<SessionId> {
    if let Some(session) = session {
        return resolve(&ctx.conn, session).await;
    }
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::failed(format!("cannot read the current directory: {e}")))?;
    let list = ctx
        .conn
        .call::<m::SessionList>(ListParams {
            state: None,
            cwd: Some(cwd.display().to_string()),
        })
        .await?;
    list.sessions
        .into_iter()
        .next()
        .map(|s| s.session_id)
        .ok_or_else(|| Failure::usage(format!("no session in {}; name one", cwd.display())))
}

fn print_files(files: Option<&FilesRestored>) {
    let Some(files) = files else { return };
    for path in &files.restored {
        println!("restored {path}");
    }
    for path in &files.kept {
        println!("  (your version of {path} is kept: `agentctl redo --force` brings it back)");
    }
    for why in &files.not_restored {
        println!("not restored: {why}");
    }
}

/// The failure of a refused undo or redo: over files the user changed, the files from the
/// error's `data`, one a line (`what` is "undo" or "redo"); otherwise the daemon's message with
/// the CLI's flag names.
fn refusal(e: ClientError, what: &str) -> Failure {
    let changed = match &e {
        ClientError::Call(call) => call
            .data()
            .and_then(|d| serde_json::from_str::<ErrorData>(d.get()).ok())
            .filter(|d| d.kind == ErrorKind::FilesChanged),
        _ => None,
    };
    let mut f = Failure::from(e);
    match changed {
        Some(data) => {
            let mut message = format!(
                "{what} refused: these files changed since the agent changed them (kept as they \
                 are; nothing was restored):"
            );
            for file in data.files.unwrap_or_default() {
                let _ = write!(message, "\n  {file}");
            }
            if let Some(more) = data.more_files {
                let _ = write!(message, "\n  ... and {more} more");
            }
            let _ = write!(
                message,
                "\n`agentctl {what} --force` restores them anyway (their current versions are \
                 kept for a redo)"
            );
            f.message = message;
        }
        None => f.message = f.message.replace("(turns must", "(--turns must"),
    }
    f
}

impl Undo {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = session_or_here(ctx, self.session.as_deref()).await?;
        let r = ctx
            .conn
            .call::<m::SessionRollback>(RollbackParams {
                session_id,
                turns: self.turns,
                files: true,
                force: self.force,
            })
            .await
            .map_err(|e| refusal(e, "undo"))?;
        print(ctx.json, &r, |r| {
            print_files(r.files.as_ref());
            println!("{} entries off the branch; {} left", r.removed, r.entries);
        });
        Ok(0)
    }
}

impl Redo {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = session_or_here(ctx, self.session.as_deref()).await?;
        let r = ctx
            .conn
            .call::<m::SessionRedo>(RedoParams {
                session_id,
                force: self.force,
            })
            .await
            .map_err(|e| refusal(e, "redo"))?;
        print(ctx.json, &r, |r| {
            print_files(r.files.as_ref());
            println!("{} entries on the branch", r.entries);
        });
        Ok(0)
    }
}
