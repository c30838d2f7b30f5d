//! Which skills are active: read from the conversation the model sees, so it follows
//! rollbacks, forks and restarts with no state of its own. A skill is active when its text
//! is there: the result of an `activate_skill` call, a user input that named it, or a
//! compaction's summary that carried it over.

use super::tool::{CLOSE, OPEN};
use agentd_proto::{BuiltinTool, HistoryEntry, Turn};
use std::collections::HashSet;
use std::sync::Arc;

/// Every `<skill_content name="...">...</skill_content>` block of `text`: (name, block).
fn blocks(text: &str) -> impl Iterator<Item = (&str, &str)> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let start = rest.find(OPEN)?;
        let from = &rest[start..];
        let name_end = from[OPEN.len()..].find('"')? + OPEN.len();
        let name = &from[OPEN.len()..name_end];
        let end = from.find(CLOSE).map_or(from.len(), |e| e + CLOSE.len());
        rest = &from[end..];
        Some((name, &from[..end]))
    })
}

/// The skill texts of `entries` (what the model sees), in order, each skill once: (name,
/// the block holding its text).
fn texts(entries: &[Arc<HistoryEntry>]) -> Vec<(String, String)> {
    let mut activations = HashSet::new();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut add = |name: &str, block: &str| {
        if seen.insert(name.to_owned()) {
            out.push((name.to_owned(), block.to_owned()));
        }
    };
    for entry in entries {
        match &entry.turn {
            Turn::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    if call.name == BuiltinTool::ActivateSkill.as_str() {
                        activations.insert(call.id.clone());
                    }
                }
            }
            Turn::ToolResults { results } => {
                for r in results {
                    if !r.is_error
                        && activations.contains(&r.call_id)
                        && r.content.starts_with(OPEN)
                        && let Some((name, block)) = blocks(&r.content).next()
                    {
                        add(name, block);
                    }
                }
            }
            Turn::User {
                expanded: Some(text),
                ..
            }
            | Turn::Compaction { summary: text, .. } => {
                for (name, block) in blocks(text) {
                    add(name, block);
                }
            }
            _ => {}
        }
    }
    out
}

/// The names of the skills active in `context`, in the order they were activated.
pub(crate) fn active(context: &[Arc<HistoryEntry>]) -> Vec<String> {
    texts(context).into_iter().map(|(name, _)| name).collect()
}

/// What a compaction's summary must carry over: the texts of the skills active in
/// `summarized` (the entries it replaces) and not in `kept`, so they stay active and are
/// never loaded again.
pub(crate) fn carried_over(summarized: &[Arc<HistoryEntry>], kept: &[Arc<HistoryEntry>]) -> String {
    let kept = active(kept);
    let mut out = String::new();
    for (_, block) in texts(summarized)
        .into_iter()
        .filter(|(n, _)| !kept.contains(n))
    {
        out.push_str("\n\n");
        out.push_str(&block);
    }
    out
}
