//! A session's history tree (spec/mini-agent-pi-style.md): entries are only ever added, each
//! pointing at its parent; the leaf marks the current branch. Rollback moves the leaf, a new
//! entry after a rollback starts a branch, and compaction adds an entry that stands in for
//! what came before it in the model's context.

use agentd_proto::{EntryId, HistoryEntry, InputId, Turn};
use std::collections::HashMap;
use std::sync::Arc;

/// Every entry of one session, and where the current branch ends.
#[derive(Default)]
pub(crate) struct History {
    entries: Vec<Arc<HistoryEntry>>,
    index: HashMap<EntryId, usize>,
    /// Per entry, how many entries its branch has up to it (itself included).
    depths: Vec<usize>,
    leaf: Option<EntryId>,
}

impl History {
    /// The tree from stored entries (in the order written) and the recorded leaf. Entries
    /// after the first `recorded_len` were written after the leaf was recorded; those that
    /// continue the branch move the leaf on.
    pub(crate) fn restore(
        entries: Vec<HistoryEntry>,
        leaf: Option<EntryId>,
        recorded_len: usize,
    ) -> Self {
        let mut history = Self::default();
        for entry in entries {
            if !history.index.contains_key(&entry.id) {
                history.insert(Arc::new(entry));
            }
        }
        // A recorded leaf that was never written (the disk failed) falls back to the newest
        // entry that was.
        history.leaf = match leaf {
            Some(l) if !history.index.contains_key(&l) => {
                history.entries.last().map(|e| e.id.clone())
            }
            leaf => leaf,
        };
        for entry in history.entries.iter().skip(recorded_len) {
            if entry.parent_id == history.leaf {
                history.leaf = Some(entry.id.clone());
            }
        }
        history
    }

    /// Adds `turn` after the leaf and makes it the leaf.
    pub(crate) fn push(&mut self, id: EntryId, ts: String, turn: Turn) -> Arc<HistoryEntry> {
        let entry = Arc::new(HistoryEntry {
            id: id.clone(),
            parent_id: self.leaf.clone(),
            ts,
            turn,
        });
        self.insert(entry.clone());
        self.leaf = Some(id);
        entry
    }

    fn insert(&mut self, entry: Arc<HistoryEntry>) {
        self.depths.push(self.depth(entry.parent_id.as_ref()) + 1);
        self.index.insert(entry.id.clone(), self.entries.len());
        self.entries.push(entry);
    }

    /// The newest entry of the current branch.
    pub(crate) fn leaf(&self) -> Option<&EntryId> {
        self.leaf.as_ref()
    }

    /// How many entries the tree holds, on every branch.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// How many entries the current branch has (without walking it).
    pub(crate) fn branch_len(&self) -> usize {
        self.depth(self.leaf.as_ref())
    }

    /// How many entries the branch ending at `id` has.
    fn depth(&self, id: Option<&EntryId>) -> usize {
        id.and_then(|id| self.index.get(id))
            .map_or(0, |&i| self.depths[i])
    }

    /// The user or steering entry of input `id`, on any branch.
    pub(crate) fn input(&self, id: &InputId) -> Option<Arc<HistoryEntry>> {
        self.entries
            .iter()
            .find(|e| match &e.turn {
                Turn::User { input_id, .. } => input_id == id,
                Turn::Steering { input_id, .. } => input_id.as_ref() == Some(id),
                _ => false,
            })
            .cloned()
    }

    /// The current branch, oldest first.
    pub(crate) fn branch(&self) -> Vec<Arc<HistoryEntry>> {
        self.branch_to(self.leaf.as_ref())
    }

    /// The branch ending at `leaf`, oldest first.
    fn branch_to(&self, leaf: Option<&EntryId>) -> Vec<Arc<HistoryEntry>> {
        let mut branch = Vec::new();
        let mut next = leaf.and_then(|id| self.index.get(id));
        while let Some(&i) = next {
            let entry = &self.entries[i];
            branch.push(entry.clone());
            next = entry.parent_id.as_ref().and_then(|p| self.index.get(p));
        }
        branch.reverse();
        branch
    }

    /// What the model sees: the current branch, where the newest compaction entry stands in
    /// for everything before the entry it kept first.
    pub(crate) fn context(&self) -> Vec<Arc<HistoryEntry>> {
        let branch = self.branch();
        let Some(at) = branch
            .iter()
            .rposition(|e| matches!(e.turn, Turn::Compaction { .. }))
        else {
            return branch;
        };
        let Turn::Compaction { first_kept, .. } = &branch[at].turn else {
            unreachable!("found above");
        };
        let kept = branch[..at]
            .iter()
            .position(|e| &e.id == first_kept)
            .unwrap_or(at);
        let mut context = Vec::with_capacity(branch.len() - kept);
        context.push(branch[at].clone());
        context.extend_from_slice(&branch[kept..at]);
        context.extend_from_slice(&branch[at + 1..]);
        context
    }

    /// Where the branch would start to roll back `turns` user inputs: the index of the
    /// `turns`-th newest user input on `branch`.
    fn rollback_start(branch: &[Arc<HistoryEntry>], turns: usize) -> Option<usize> {
        Some(
            branch
                .iter()
                .enumerate()
                .rev()
                .filter(|(_, e)| matches!(e.turn, Turn::User { .. }))
                .nth(turns.checked_sub(1)?)?
                .0,
        )
    }

    /// Moves the leaf back before the `turns`-th newest user input on the branch. Returns how
    /// many entries left the branch, or `None` when the branch has fewer user inputs.
    pub(crate) fn rollback(&mut self, turns: usize) -> Option<usize> {
        let branch = self.branch();
        let start = Self::rollback_start(&branch, turns)?;
        self.leaf = branch[start].parent_id.clone();
        Some(branch.len() - start)
    }

    /// The inputs a rollback of `turns` would take off the branch (user and steering), or
    /// `None` when the branch has fewer user inputs.
    pub(crate) fn rollback_inputs(&self, turns: usize) -> Option<Vec<InputId>> {
        let branch = self.branch();
        let start = Self::rollback_start(&branch, turns)?;
        Some(
            branch[start..]
                .iter()
                .filter_map(|e| match &e.turn {
                    Turn::User { input_id, .. } => Some(input_id.clone()),
                    Turn::Steering { input_id, .. } => input_id.clone(),
                    _ => None,
                })
                .collect(),
        )
    }

    /// Moves the leaf to `leaf` (a redo: where a rollback took it from).
    pub(crate) fn set_leaf(&mut self, leaf: Option<EntryId>) {
        if leaf.as_ref().is_none_or(|l| self.index.contains_key(l)) {
            self.leaf = leaf;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_proto::InputId;

    fn user(text: &str) -> Turn {
        Turn::User {
            text: text.into(),
            input_id: InputId(text.into()),
            images: vec![],
            expanded: None,
        }
    }

    fn texts(entries: &[Arc<HistoryEntry>]) -> Vec<String> {
        entries
            .iter()
            .map(|e| match &e.turn {
                Turn::User { text, .. } | Turn::System { text } => text.clone(),
                Turn::Compaction { summary, .. } => summary.clone(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn rollback_branches_and_compaction_views() {
        let mut h = History::default();
        for (i, t) in ["u1", "s1", "u2", "s2"].iter().enumerate() {
            let turn = if t.starts_with('u') {
                user(t)
            } else {
                Turn::System {
                    text: t.to_string(),
                }
            };
            h.push(EntryId(format!("e{i}")), "t".into(), turn);
        }
        assert_eq!(h.rollback(3), None);
        assert_eq!(h.rollback(1), Some(2));
        assert_eq!(texts(&h.branch()), ["u1", "s1"]);
        h.push(EntryId("e4".into()), "t".into(), user("u3"));
        assert_eq!(texts(&h.branch()), ["u1", "s1", "u3"]);
        assert_eq!(h.branch_len(), 3);
        assert_eq!(h.len(), 5, "nothing is deleted");

        h.push(
            EntryId("c".into()),
            "t".into(),
            Turn::Compaction {
                summary: "sum".into(),
                first_kept: EntryId("e4".into()),
                tokens_before: 10,
            },
        );
        h.push(EntryId("e5".into()), "t".into(), user("u4"));
        assert_eq!(texts(&h.context()), ["sum", "u3", "u4"]);
        assert_eq!(texts(&h.branch()).len(), 5);

        // An entry written after the recorded leaf continues the branch on restore.
        let stored: Vec<HistoryEntry> = h.entries.iter().map(|e| (**e).clone()).collect();
        let restored = History::restore(stored.clone(), Some(EntryId("c".into())), 6);
        assert_eq!(restored.leaf(), Some(&EntryId("e5".into())));
        let rolled_back = History::restore(stored, Some(EntryId("e1".into())), 7);
        assert_eq!(texts(&rolled_back.branch()), ["u1", "s1"]);
    }
}
