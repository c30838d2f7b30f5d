//! `agentctl show`: one session's snapshot, as aligned lines for people or JSON.

use super::config::print_config;
use super::{Context, print, resolve};
use crate::error::Result;
use agentd_proto::methods as m;
use agentd_proto::{SessionParams, SessionSnapshot, Usage};

#[derive(clap::Args)]
pub(crate) struct Show {
    session: String,
}

/// Token counts in one line.
pub(crate) fn usage_line(u: &Usage) -> String {
    let mut line = format!("{} in, {} out", u.input_tokens, u.output_tokens);
    if u.cache_read_tokens + u.cache_write_tokens > 0 {
        line += &format!(
            ", {} cache reads, {} cache writes",
            u.cache_read_tokens, u.cache_write_tokens
        );
    }
    if u.reasoning_tokens > 0 {
        line += &format!(", {} reasoning", u.reasoning_tokens);
    }
    if let Some(cost) = u.cost_usd {
        line += &format!(", ${cost:.4}");
    }
    line
}

fn human(s: &SessionSnapshot) {
    let row = |k: &str, v: &str| println!("{k:<10} {v}");
    row("session", s.session_id.as_str());
    if let Some(title) = &s.title {
        row("title", title);
    }
    row("state", s.state.as_str());
    row("cwd", &s.cwd);
    if let Some(tree) = &s.worktree {
        row(
            "worktree",
            &format!("branch {} of {}", tree.branch, tree.repository),
        );
    }
    row("profile", s.profile.as_str());
    row("turns", &s.turns.to_string());
    row("usage", &usage_line(&s.usage));
    row("created", &s.created);
    row("updated", &s.updated);
    row("last seq", &s.last_seq.to_string());
    if let Some(leaf) = &s.leaf {
        row("leaf", leaf.as_str());
    }
    if let Some(origin) = &s.forked_from {
        let at = origin.entry_id.as_ref().map_or("", |e| e.as_str());
        row("forked", &format!("from {} at {at}", origin.session_id));
    }
    if let Some(parent) = &s.parent_id {
        row("parent", parent.as_str());
    }
    for q in &s.queue.steering {
        row("steering", &format!("{}  {}", q.input_id, q.text));
    }
    for q in &s.queue.follow_up {
        row("follow-up", &format!("{}  {}", q.input_id, q.text));
    }
    println!("config (agentctl config KEY=VALUE changes it):");
    print_config(&s.config, None);
}

impl Show {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let s = ctx
            .conn
            .call::<m::SessionGet>(SessionParams { session_id })
            .await?;
        print(ctx.json, &s, human);
        Ok(0)
    }
}
