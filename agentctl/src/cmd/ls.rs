//! `agentctl ls`: list sessions, optionally as a tree of subagents.

use super::{Context, print, table};
use crate::error::{Failure, Result};
use agentd_proto::methods as m;
use agentd_proto::{ListParams, SessionId, SessionState, SessionSummary};

/// The state column of a stored session whose record cannot be read (not a lifecycle state:
/// such a session has none the daemon knows).
const DAMAGED: &str = "damaged";

#[derive(clap::Args)]
pub(crate) struct Ls {
    /// Only sessions in this state (idle, processing, awaiting_input, closed, or damaged:
    /// stored sessions whose record cannot be read).
    #[arg(long)]
    state: Option<String>,
    /// Show subagents indented under the session that spawned them.
    #[arg(long)]
    tree: bool,
}

impl Ls {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let only_damaged = self.state.as_deref() == Some(DAMAGED);
        let state = match self.state.as_deref() {
            None | Some(DAMAGED) => None,
            Some(s) => Some(
                serde_json::from_value::<SessionState>(serde_json::Value::String(s.into()))
                    .map_err(|_| {
                        Failure::usage(format!(
                            "unknown --state {s:?}: use idle, processing, awaiting_input, closed or damaged"
                        ))
                    })?,
            ),
        };
        let mut list = ctx
            .conn
            .call::<m::SessionList>(ListParams { state, cwd: None })
            .await?;
        if only_damaged {
            list.sessions.clear();
        }
        if ctx.json {
            for s in &list.sessions {
                print(true, s, |_| {});
            }
            for d in &list.damaged {
                print(true, d, |_| {});
            }
            return Ok(0);
        }
        let mut rows = Vec::new();
        let mut row = |s: &SessionSummary, depth: usize| {
            rows.push(vec![
                format!("{}{}", "  ".repeat(depth), s.session_id),
                s.state.to_string(),
                s.model.clone(),
                s.cwd.clone(),
                s.title.clone().unwrap_or_default(),
            ]);
        };
        if self.tree {
            print_tree(&list.sessions, None, 0, &mut row);
        } else {
            list.sessions.iter().for_each(|s| row(s, 0));
        }
        for d in &list.damaged {
            rows.push(vec![
                d.session_id.to_string(),
                DAMAGED.to_owned(),
                String::new(),
                String::new(),
                format!("{}: {} (agentctl rm removes it)", d.path, d.reason),
            ]);
        }
        for line in table(&rows) {
            println!("{line}");
        }
        Ok(0)
    }
}

/// Prints the sessions whose parent is `parent` (top-level ones for `None`, and those whose
/// parent is not listed), each followed by its children, indented.
fn print_tree(
    sessions: &[SessionSummary],
    parent: Option<&SessionId>,
    depth: usize,
    line: &mut dyn FnMut(&SessionSummary, usize),
) {
    let listed = |id: &SessionId| sessions.iter().any(|s| &s.session_id == id);
    for s in sessions {
        let place = s.parent_id.as_ref().filter(|p| listed(p));
        if place == parent {
            line(s, depth);
            print_tree(sessions, Some(&s.session_id), depth + 1, line);
        }
    }
}
