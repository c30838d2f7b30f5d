//! Subagents (spec 7): a session's children are sessions of the same registry that record
//! their parent. This module gives the subagent tools their [`Subagents`] and keeps the
//! family together: a child's finished work is reported on its parent's stream, and aborting
//! or closing a parent aborts or closes its children first (spec appendix B).

use super::{Session, SessionState, lock};
use crate::tools::{SpawnRequest, SubagentResult, Subagents};
use agentd_proto::{EventBody, ProcessingEndReason, SessionId, Turn, WhenBusy};
use async_trait::async_trait;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

impl Session {
    fn registry(&self) -> Result<Arc<super::Registry>, String> {
        self.registry
            .as_ref()
            .and_then(std::sync::Weak::upgrade)
            .ok_or_else(|| "subagents are not available in this host".to_owned())
    }

    /// How deep this session is: 0 for one a client created, 1 for its children, ...
    pub(super) fn depth(&self) -> u32 {
        self.parent.as_ref().map_or(0, |p| p.depth)
    }

    /// The child `agent_id` of this session.
    fn child(&self, agent_id: &str) -> Result<Arc<Session>, String> {
        let child = self
            .registry()?
            .get(&SessionId(agent_id.to_owned()))
            .ok()
            .filter(|c| c.parent_id() == Some(&self.id));
        child.ok_or_else(|| format!("no subagent {agent_id:?} of this session"))
    }

    /// The children currently loaded.
    fn children(&self) -> Vec<Arc<Session>> {
        self.registry()
            .map(|r| r.children_of(&self.id))
            .unwrap_or_default()
    }

    pub(super) async fn abort_children(&self) {
        let children = self.children();
        let aborts = children.iter().map(|c| Box::pin(c.abort(false)));
        futures::future::join_all(aborts).await;
    }

    pub(super) async fn close_children(&self) {
        let children = self.children();
        let closes = children
            .iter()
            .map(|c| Box::pin(c.close("its parent closed")));
        futures::future::join_all(closes).await;
    }

    /// What the session's work produced so far (spec 7.3 `SubAgentResult`).
    pub fn result(&self) -> SubagentResult {
        let (end, error, state) = {
            let c = lock(&self.control);
            (c.last_end, c.last_error.clone(), c.state)
        };
        let branch = self.history();
        let turns_used = branch
            .iter()
            .filter(|e| matches!(e.turn, Turn::Assistant { .. }))
            .count() as u32;
        let last_text = branch.iter().rev().find_map(|e| match &e.turn {
            Turn::Assistant { text, .. } if !text.trim().is_empty() => Some(text.clone()),
            _ => None,
        });
        let success = end == Some(ProcessingEndReason::Completed);
        let output = match (success, error, last_text) {
            (true, _, Some(text)) => text,
            (false, Some(error), _) => format!("error: {error}"),
            (_, _, Some(text)) => text,
            _ if state == SessionState::Closed => "the subagent was closed".into(),
            _ => "(no output)".into(),
        };
        SubagentResult {
            output,
            success,
            turns_used,
        }
    }

    /// Emits `subagent_finished` on the parent's stream after a processing cycle ends.
    pub(super) fn report_to_parent(&self) {
        let Some(parent) = self
            .parent_id()
            .and_then(|id| self.registry().ok()?.get(id).ok())
        else {
            return;
        };
        let result = self.result();
        parent.events.emit(EventBody::SubagentFinished {
            agent_id: self.id.clone(),
            success: result.success,
            turns_used: result.turns_used,
        });
    }

    async fn wait_not_processing(&self) {
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| *s != SessionState::Processing).await;
    }
}

#[async_trait]
impl Subagents for Session {
    async fn spawn(&self, request: SpawnRequest) -> Result<String, String> {
        let registry = self.registry()?;
        let task = request.task.clone();
        let child = registry
            .spawn_child(self, request)
            .map_err(|e| e.to_string())?;
        self.events.emit(EventBody::SubagentSpawned {
            agent_id: child.id.clone(),
            task: task.clone(),
        });
        child
            .submit(task, None, WhenBusy::Queue)
            .map_err(|e| e.to_string())?;
        Ok(child.id.to_string())
    }

    async fn send_input(&self, agent_id: &str, message: String) -> Result<(), String> {
        let child = self.child(agent_id)?;
        child
            .submit(message, None, WhenBusy::Steer)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn wait(
        &self,
        agent_id: &str,
        cancel: &CancellationToken,
    ) -> Result<SubagentResult, String> {
        let child = self.child(agent_id)?;
        tokio::select! {
            _ = child.wait_not_processing() => Ok(child.result()),
            _ = cancel.cancelled() => Err(format!("stopped waiting for agent {agent_id}: the work was aborted")),
        }
    }

    async fn close(&self, agent_id: &str) -> Result<SubagentResult, String> {
        let child = self.child(agent_id)?;
        child.close("closed by its parent").await;
        Ok(child.result())
    }
}
