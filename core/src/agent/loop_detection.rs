//! Loop detection (spec 2.10): the last N tool calls repeating a pattern of 1, 2 or 3 calls.

use agentd_proto::{HistoryEntry, Turn};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Whether the last `window` tool calls in `turns` repeat a pattern of length 1, 2 or 3.
pub(super) fn detect_loop(entries: &[Arc<HistoryEntry>], window: usize) -> bool {
    let mut signatures: Vec<u64> = entries
        .iter()
        .rev()
        .filter_map(|e| match &e.turn {
            Turn::Assistant { tool_calls, .. } => Some(tool_calls.iter().rev()),
            _ => None,
        })
        .flatten()
        .take(window)
        .map(|call| {
            let mut h = DefaultHasher::new();
            call.name.hash(&mut h);
            call.arguments.to_string().hash(&mut h);
            h.finish()
        })
        .collect();
    if window == 0 || signatures.len() < window {
        return false;
    }
    signatures.reverse();
    [1, 2, 3]
        .into_iter()
        .filter(|p| window.is_multiple_of(*p))
        .any(|p| {
            let pattern = &signatures[..p];
            signatures.chunks(p).all(|c| c == pattern)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_proto::{EntryId, ToolCall, ToolCallId, Usage};
    use serde_json::json;

    fn calls(cmds: &[&str]) -> Vec<Arc<HistoryEntry>> {
        cmds.iter()
            .map(|c| {
                let turn = Turn::Assistant {
                    text: String::new(),
                    reasoning: vec![],
                    tool_calls: vec![ToolCall {
                        id: ToolCallId(c.to_string()),
                        name: "shell".into(),
                        arguments: json!({"command": c}),
                        signature: None,
                    }],
                    usage: Usage::default(),
                    response_id: None,
                    model: "m".into(),
                    api: None,
                };
                Arc::new(HistoryEntry {
                    id: EntryId(c.to_string()),
                    parent_id: None,
                    ts: String::new(),
                    turn,
                })
            })
            .collect()
    }

    #[test]
    fn detects_repeats_of_one_two_and_three() {
        assert!(detect_loop(&calls(&["a"; 10]), 10));
        assert!(detect_loop(
            &calls(&["a", "b", "a", "b", "a", "b", "a", "b", "a", "b"]),
            10
        ));
        assert!(detect_loop(
            &calls(&["x", "a", "b", "c", "a", "b", "c", "a", "b", "c"]),
            9
        ));
    }

    #[test]
    fn ignores_short_or_varied_histories() {
        assert!(!detect_loop(&calls(&["a"; 9]), 10));
        assert!(!detect_loop(
            &calls(&["a", "b", "c", "d", "a", "b", "c", "d", "a", "b"]),
            10
        ));
        // A window of 10 cannot hold whole patterns of 3.
        assert!(!detect_loop(
            &calls(&["a", "b", "c", "a", "b", "c", "a", "b", "c", "a"]),
            10
        ));
    }
}
