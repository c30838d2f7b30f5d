//! The [`View`]: what the session task publishes through a `watch` channel after every change,
//! so that snapshots, lists and state waits never ask the task (or wait for it).

use super::Info;
use crate::store::{FORMAT_VERSION, SessionRecord};
use agentd_proto::{
    EntryId, PendingRequest, ProcessingEndReason, QueueContents, SessionConfig, SessionSnapshot,
    SessionState, Usage,
};
use std::sync::Arc;
use std::time::Instant;

/// A session as its task last published it.
#[derive(Debug, Clone)]
pub struct View {
    /// The state.
    pub state: SessionState,
    /// The config the next LLM call uses.
    pub config: Arc<SessionConfig>,
    /// Tokens used so far.
    pub usage: Usage,
    /// Queued steering and follow-ups.
    pub queue: Arc<QueueContents>,
    /// The seq of the newest event.
    pub last_seq: u64,
    /// When the newest event was emitted.
    pub updated: String,
    /// The newest entry of the current branch.
    pub leaf: Option<EntryId>,
    /// Entries on the current branch.
    pub branch_len: usize,
    /// Entries in the whole tree.
    pub history_len: usize,
    /// How the last processing cycle ended.
    pub last_end: Option<ProcessingEndReason>,
    /// Whether the session's writes are failing (input is refused until a retry succeeds).
    pub storage_failing: bool,
    /// When a client or the session's own work last did something with it.
    pub active: Instant,
    /// Requests waiting for a client's answer, oldest first.
    pub pending: Arc<Vec<PendingRequest>>,
    /// The Agent Skills whose text the model sees now.
    pub active_skills: Arc<[String]>,
    /// What a redo would bring back.
    pub(crate) redo: Option<crate::store::RedoPoint>,
}

impl View {
    /// The record `session.json` holds for this view.
    pub(crate) fn record(&self, info: &Info) -> SessionRecord {
        SessionRecord {
            format_version: FORMAT_VERSION,
            id: info.id.clone(),
            title: info.title.clone(),
            cwd: info.cwd.clone(),
            profile: info.profile.id.to_string(),
            instructions: info.instructions.clone(),
            read_only: info.read_only,
            environment: info.environment.clone(),
            worktree: info.worktree.clone(),
            created: info.created.clone(),
            updated: self.updated.clone(),
            state: self.state,
            config: (*self.config).clone(),
            usage: self.usage,
            leaf: self.leaf.clone(),
            history_len: self.history_len,
            queue: (*self.queue).clone(),
            forked_from: info.forked_from.clone(),
            parent: info.parent.clone(),
            open: true,
            redo: self.redo.clone(),
        }
    }

    /// The full snapshot for `session/get`.
    pub(crate) fn snapshot(&self, info: &Info) -> SessionSnapshot {
        SessionSnapshot {
            session_id: info.id.clone(),
            title: info.title.clone(),
            cwd: info.cwd.display().to_string(),
            profile: info.profile.id,
            state: self.state,
            config: (*self.config).clone(),
            queue: (*self.queue).clone(),
            usage: self.usage,
            turns: self.branch_len,
            last_seq: self.last_seq,
            created: info.created.clone(),
            updated: self.updated.clone(),
            leaf: self.leaf.clone(),
            forked_from: info.forked_from.clone(),
            parent_id: info.parent.as_ref().map(|p| p.session_id.clone()),
            environment: info.environment.clone(),
            worktree: info.worktree.clone(),
            pending: (*self.pending).clone(),
            skills: info.catalog.skill_infos(&self.active_skills),
        }
    }
}
