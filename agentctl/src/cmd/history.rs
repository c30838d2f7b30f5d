//! `agentctl history`: the conversation on the current branch, one entry per line for people
//! (with its id, for `fork --at`), or one JSON object per entry.

use super::{Context, print, resolve};
use crate::error::Result;
use agentd_proto::methods as m;
use agentd_proto::{HistoryParams, Turn};

#[derive(clap::Args)]
pub(crate) struct History {
    session: String,
    /// Skip this many entries.
    #[arg(long, default_value_t = 0)]
    offset: usize,
    /// Show at most this many entries [default: 100]
    #[arg(long)]
    limit: Option<usize>,
}

/// The first line of `text`, at most 100 characters.
fn brief(text: &str) -> String {
    let first = text.trim().lines().next().unwrap_or_default();
    let more = text.trim().lines().nth(1).is_some();
    if first.chars().count() > 100 {
        format!("{}…", first.chars().take(99).collect::<String>())
    } else if more {
        format!("{first} …")
    } else {
        first.to_owned()
    }
}

/// One line describing a turn.
fn describe(turn: &Turn) -> String {
    match turn {
        Turn::User { text, images, .. } => {
            format!(
                "user       {}{}",
                brief(text),
                crate::render::image_note(images.len())
            )
        }
        Turn::Assistant {
            text, tool_calls, ..
        } => {
            let calls: Vec<&str> = tool_calls.iter().map(|c| c.name.as_str()).collect();
            match (text.trim().is_empty(), calls.is_empty()) {
                (_, true) => format!("assistant  {}", brief(text)),
                (true, false) => format!("assistant  [calls {}]", calls.join(", ")),
                (false, false) => {
                    format!("assistant  {} [calls {}]", brief(text), calls.join(", "))
                }
            }
        }
        Turn::ToolResults { results } => {
            let failed = results.iter().filter(|r| r.is_error).count();
            let first = results
                .first()
                .map(|r| brief(&r.content))
                .unwrap_or_default();
            if failed > 0 {
                format!(
                    "tools      {} result(s), {failed} failed: {first}",
                    results.len()
                )
            } else {
                format!("tools      {} result(s): {first}", results.len())
            }
        }
        Turn::Steering { text, images, .. } => {
            format!(
                "steering   {}{}",
                brief(text),
                crate::render::image_note(images.len())
            )
        }
        Turn::System { text } => format!("note       {}", brief(text)),
        Turn::Compaction {
            summary,
            tokens_before,
            ..
        } => format!(
            "compaction (~{tokens_before} tokens before) {}",
            brief(summary)
        ),
    }
}

impl History {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let h = ctx
            .conn
            .call::<m::SessionHistory>(HistoryParams {
                session_id,
                offset: self.offset,
                limit: self.limit,
                input_id: None,
            })
            .await?;
        for e in &h.entries {
            print(ctx.json, e, |e| println!("{}  {}", e.id, describe(&e.turn)));
        }
        let shown = self.offset + h.entries.len();
        // A page may end early (large images) as well as at --limit.
        if !ctx.json && shown < h.total {
            eprintln!(
                "({} of {} entries; more with --offset {shown})",
                h.entries.len(),
                h.total
            );
        }
        Ok(0)
    }
}
