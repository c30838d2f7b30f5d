//! The session's state machine and what it publishes: the view, the record for
//! `session.json`, events and history entries (handed to the writer without waiting), state
//! changes, settings and rollbacks, and replies that wait for the disk.

use super::{Core, new_id};
use crate::agent::Input;
use crate::session::Error;
use crate::session::view::View;
use crate::store::Writer;
use crate::tools::{SubagentResult, session_tools};
use agentd_proto::{
    DaemonEvent, EntryId, EventBody, ProcessingEndReason, QueueContents, RollbackResponse,
    SessionState, Turn,
};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::oneshot;

impl Core {
    pub(super) fn make_view(&self) -> View {
        let branch = self.history.branch_len();
        View {
            state: self.state,
            config: self.config.clone(),
            usage: self.usage,
            queue: Arc::new(self.queue()),
            last_seq: self.log.last_seq(),
            updated: self.log.updated().to_owned(),
            leaf: self.history.leaf().cloned(),
            branch_len: branch,
            history_len: self.history.len(),
            last_end: self.last_end,
            storage_failing: self.storage_error.is_some(),
            active: Instant::now(),
            pending: Arc::new(self.pending.iter().map(|p| p.request.clone()).collect()),
            active_skills: self.active_skills(),
            redo: self.redo.clone(),
        }
    }

    /// The skills active on the current branch, read again only when its leaf moved.
    fn active_skills(&self) -> Arc<[String]> {
        if self.info.catalog.skills.is_empty() {
            return Arc::default();
        }
        let leaf = self.history.leaf().cloned();
        let mut cache = self.active_skills.borrow_mut();
        if cache.0 != leaf {
            *cache = (leaf, crate::skills::active(&self.history.context()).into());
        }
        cache.1.clone()
    }

    /// Publishes the view after a change.
    pub(in crate::session) fn publish(&self) {
        self.view.send_replace(self.make_view());
    }

    /// Hands `session.json`'s new content to the writer.
    pub(super) fn save(&self) {
        if let Some(writer) = self.log.writer() {
            writer.record(self.make_view().record(&self.info).to_json());
        }
    }

    pub(super) fn queue(&self) -> QueueContents {
        QueueContents {
            steering: self.steering.iter().map(Input::queued).collect(),
            follow_up: self.follow_up.iter().map(Input::queued).collect(),
        }
    }

    /// Records an event.
    pub(in crate::session) fn emit(&mut self, body: EventBody) {
        if let EventBody::Error { message, .. } = &body {
            self.last_error = Some(message.clone());
        }
        let event = self.log.record(body);
        self.view.send_modify(|v| {
            v.last_seq = event.seq;
            v.updated.clone_from(&event.ts);
        });
        self.log.broadcast(&event);
    }

    /// Appends a turn to the history and hands it to the writer (a commit point).
    pub(in crate::session) fn append(&mut self, turn: Turn) {
        let entry = self
            .history
            .push(EntryId(new_id("")), crate::session::now(), turn);
        if let Some(writer) = self.log.writer() {
            // A step ends with a model response or a tool round (or a compaction, or a note
            // closing interrupted work): one sync then covers its events and entries. The
            // user's input and steering ride with the next step's.
            let commit = !matches!(entry.turn, Turn::User { .. } | Turn::Steering { .. });
            writer.entry(&entry, commit);
        }
        let (leaf, branch_len, history_len) = (
            Some(entry.id.clone()),
            self.history.branch_len(),
            self.history.len(),
        );
        self.view.send_modify(|v| {
            v.leaf = leaf;
            v.branch_len = branch_len;
            v.history_len = history_len;
        });
    }

    pub(super) fn set_state(&mut self, state: SessionState) {
        self.set_state_after(state, None);
    }

    /// Changes state; `first`, an event the change goes with (`processing_end`), is logged
    /// before `state_changed`. The view shows the new state before either event reaches
    /// anyone, so a client that sees them and asks finds the state they announce.
    pub(super) fn set_state_after(&mut self, state: SessionState, first: Option<EventBody>) {
        if self.state == state {
            if let Some(body) = first {
                self.emit(body);
            }
            return;
        }
        self.state = state;
        self.publish();
        if let Some(body) = first {
            self.emit(body);
        }
        self.emit(EventBody::StateChanged { state });
        self.save();
        if let Some(tx) = &self.daemon_events {
            let _ = tx.send(DaemonEvent::StateChanged {
                session_id: self.info.id.clone(),
                state,
            });
        }
    }

    pub(super) fn queue_changed(&mut self) {
        let queue = self.queue();
        self.emit(EventBody::QueueChanged { queue });
        self.publish();
        self.save();
    }

    pub(super) fn check_open(&self) -> Result<(), Error> {
        if self.state == SessionState::Closed || self.closing.is_some() {
            return Err(Error::Closed(self.info.id.clone()));
        }
        Ok(())
    }

    pub(super) fn check_storage(&self) -> Result<(), Error> {
        match self.log.writer().and_then(Writer::failure) {
            Some(e) => Err(Error::Storage(e)),
            None => Ok(()),
        }
    }

    /// Replies once the change is in the kernel (not waiting for a sync), so what the client
    /// is told survives the daemon being killed.
    pub(super) fn reply_when_written<T: Send + 'static>(
        &self,
        reply: oneshot::Sender<T>,
        value: T,
    ) {
        self.reply_after(reply, value, Writer::written);
    }

    /// Replies once `session.json` holds the change too: for what only the record keeps (the
    /// config, the leaf after a rollback).
    pub(super) fn reply_when_saved<T: Send + 'static>(&self, reply: oneshot::Sender<T>, value: T) {
        self.reply_after(reply, value, Writer::saved);
    }

    fn reply_after<T: Send + 'static, F: Future<Output = ()> + Send + 'static>(
        &self,
        reply: oneshot::Sender<T>,
        value: T,
        barrier: impl FnOnce(&Writer) -> F,
    ) {
        match self.log.writer() {
            Some(writer) => {
                let done = barrier(writer);
                tokio::spawn(async move {
                    done.await;
                    let _ = reply.send(value);
                });
            }
            None => {
                let _ = reply.send(value);
            }
        }
    }

    pub(super) fn cancel_turn(&self) {
        if let Some(turn) = &self.turn {
            turn.cancel();
        }
    }

    pub(super) fn set_config(
        &mut self,
        patch: &agentd_proto::ConfigPatch,
    ) -> Result<agentd_proto::SessionConfig, Error> {
        if self.info.read_only
            && patch
                .sandbox
                .is_some_and(|m| m != agentd_proto::SandboxMode::ReadOnly)
        {
            return Err(Error::InvalidConfig(
                "sandbox: a read-only session's sandbox is always read_only".into(),
            ));
        }
        let mut next = (*self.config).clone();
        next.apply(patch);
        crate::config::validate_session_config(&next)
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        self.tools =
            Arc::new(session_tools(&self.info.base_tools(), &next).map_err(Error::InvalidConfig)?);
        self.config = Arc::new(next.clone());
        self.publish();
        self.save();
        Ok(next)
    }

    /// Checks that the session can roll back or redo now: open and idle, with nothing queued
    /// to start.
    pub(super) fn check_idle(&self) -> Result<(), Error> {
        self.check_open()?;
        if self.state != SessionState::Idle || self.next.is_some() {
            return Err(Error::Busy(self.info.id.clone()));
        }
        Ok(())
    }

    /// The inputs a rollback of `turns` takes off the branch.
    pub(super) fn rollback_inputs(
        &self,
        turns: usize,
    ) -> Result<Vec<agentd_proto::InputId>, Error> {
        self.history
            .rollback_inputs(turns)
            .ok_or_else(|| self.too_many_turns(turns))
    }

    fn too_many_turns(&self, turns: usize) -> Error {
        let users = self
            .history
            .branch()
            .iter()
            .filter(|e| matches!(e.turn, Turn::User { .. }))
            .count();
        Error::InvalidParams(format!(
            "cannot roll back {turns} turns: the branch has {users} user inputs (turns must be 1 to {users})"
        ))
    }

    pub(super) fn rollback(&mut self, turns: usize) -> Result<RollbackResponse, Error> {
        self.check_idle()?;
        self.roll_back(turns, false)
    }

    /// Moves the branch back by `turns` inputs; `files` says whether their files went back
    /// too, for the redo.
    pub(super) fn roll_back(
        &mut self,
        turns: usize,
        files: bool,
    ) -> Result<RollbackResponse, Error> {
        let before = self.history.leaf().cloned();
        let Some(removed) = self.history.rollback(turns) else {
            return Err(self.too_many_turns(turns));
        };
        let leaf = self.history.leaf().cloned();
        self.redo = Some(super::RedoPoint {
            from: leaf.clone(),
            to: before,
            files,
        });
        self.emit(EventBody::Rollback {
            leaf: leaf.clone(),
            removed,
        });
        self.publish();
        self.save();
        Ok(RollbackResponse {
            leaf,
            entries: self.history.branch_len(),
            removed,
            files: None,
        })
    }

    /// What a redo would do now: the rollback it undoes, if the branch is still where that
    /// rollback left it.
    pub(super) fn redo_point(&self) -> Result<super::RedoPoint, Error> {
        match &self.redo {
            Some(point) if point.from.as_ref() == self.history.leaf() => Ok(point.clone()),
            Some(_) => Err(Error::InvalidParams(
                "the conversation went on since the rollback; there is nothing to redo".into(),
            )),
            None => Err(Error::InvalidParams(
                "there is nothing to redo: no rollback to take back".into(),
            )),
        }
    }

    /// Moves the branch forward to where `point`'s rollback took it from.
    pub(super) fn redo(&mut self, point: super::RedoPoint) -> agentd_proto::RedoResponse {
        self.history.set_leaf(point.to);
        self.redo = None;
        let leaf = self.history.leaf().cloned();
        self.emit(EventBody::Redo { leaf: leaf.clone() });
        self.publish();
        self.save();
        agentd_proto::RedoResponse {
            leaf,
            entries: self.history.branch_len(),
            files: None,
        }
    }

    /// What the session's work produced so far (spec 7.3 `SubAgentResult`).
    pub(in crate::session) fn result(&self) -> SubagentResult {
        let branch = self.history.branch();
        let turns_used = branch
            .iter()
            .filter(|e| matches!(e.turn, Turn::Assistant { .. }))
            .count() as u32;
        let last_text = branch.iter().rev().find_map(|e| match &e.turn {
            Turn::Assistant { text, .. } if !text.trim().is_empty() => Some(text.clone()),
            _ => None,
        });
        let success = self.last_end == Some(ProcessingEndReason::Completed);
        let output = match (success, self.last_error.clone(), last_text) {
            (true, _, Some(text)) => text,
            (false, Some(error), _) => format!("error: {error}"),
            (_, _, Some(text)) => text,
            _ if self.state == SessionState::Closed => "the subagent was closed".into(),
            _ => "(no output)".into(),
        };
        SubagentResult {
            output,
            success,
            turns_used,
        }
    }
}
