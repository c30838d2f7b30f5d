//! Running work: an input and the follow-ups queued meanwhile (the agent loop, guarded against
//! panics), a compaction, an abort's cleanup, the close sequence; then replying to whoever
//! waited for it, and reporting a subagent's end to its parent.

use super::start::capture;
use super::supervise::panic_message;
use super::{Task, Work};
use crate::agent::{Agent, CompactError, Input, Outcome};
use crate::exec::SandboxPolicy;
use crate::session::Error;
use crate::tools::SubagentResult;
use agentd_proto::{
    AbortResponse, CompactResponse, EventBody, ProcessingEndReason, RedoResponse, RollbackResponse,
    SessionEndReason, SessionState,
};
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use tokio_util::sync::CancellationToken;

impl Task {
    pub(super) async fn work(&self, work: Work) {
        match work {
            Work::Process(input, token) => self.process(input, token).await,
            Work::Compact(token, reply) => {
                let result = AssertUnwindSafe(self.compact(&token))
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|panic| {
                        Err(Error::Internal(format!(
                            "the compaction crashed: {}",
                            panic_message(panic.as_ref())
                        )))
                    });
                {
                    let mut core = self.core();
                    core.turn = None;
                    core.set_state(SessionState::Idle);
                }
                // After the state: whoever gets the answer sees the session idle.
                let _ = reply.send(result);
            }
            Work::Undo {
                turns,
                force,
                reply,
            } => {
                let result = self.undo(turns, force).await;
                let mut core = self.core();
                core.set_state(SessionState::Idle);
                core.reply_when_saved(reply, result);
            }
            Work::Redo { force, reply } => {
                let result = self.redo(force).await;
                let mut core = self.core();
                core.set_state(SessionState::Idle);
                core.reply_when_saved(reply, result);
            }
            Work::Terminate => self.info.env.terminate_all().await,
            Work::Close => {
                self.info.env.terminate_all().await;
                self.info.env.release().await;
                if let Some(mcp) = &self.mcp {
                    mcp.stop().await;
                }
                let mut core = self.core();
                core.turn = None;
                let reason = core.closing.unwrap_or(SessionEndReason::ClosedByClient); // set before Close is queued
                core.set_state(SessionState::Closed);
                core.emit(EventBody::SessionEnd {
                    state: SessionState::Closed,
                    reason,
                });
                core.publish();
            }
        }
    }

    /// Replies to the calls that waited for the work to end, and queues the close sequence
    /// when one was asked for.
    pub(super) fn after_work(&self) {
        let mut core = self.core();
        if core.closing.is_some() && core.state != SessionState::Closed {
            if core.next.is_none() {
                core.next = Some(Work::Close);
            }
            return;
        }
        let queue = core.queue();
        let state = core.state;
        for (reply, aborted) in core.aborts.drain(..) {
            let _ = reply.send(Ok(AbortResponse {
                aborted,
                state,
                queue: queue.clone(),
            }));
        }
        if state == SessionState::Closed {
            for reply in core.closes.drain(..) {
                let _ = reply.send(());
            }
        }
    }

    async fn compact(&self, token: &CancellationToken) -> Result<CompactResponse, Error> {
        self.context_ready().await;
        self.agent()
            .compact(false, token)
            .await
            .map_err(|e| match e {
                CompactError::NothingToCompact(_) => Error::InvalidParams(e.to_string()),
                CompactError::NotConfigured(_) => Error::ProviderNotConfigured(e.to_string()),
                CompactError::Provider(_) => Error::Provider(e.to_string()),
                CompactError::Aborted => Error::InvalidParams("the compaction was aborted".into()),
            })
    }

    /// Puts back the files of the inputs a rollback of `turns` takes off, then rolls back.
    async fn undo(&self, turns: usize, force: bool) -> Result<RollbackResponse, Error> {
        let checkpoints = self
            .info
            .checkpoints
            .clone()
            .map_err(Error::InvalidParams)?;
        let inputs = self.core().rollback_inputs(turns)?;
        let files = checkpoints.undo(inputs, force).await.map_err(refused)?;
        let mut response = self.core().roll_back(turns, true)?;
        response.files = Some(files);
        Ok(response)
    }

    /// Brings back the branch, and the files when the rollback put files back.
    async fn redo(&self, force: bool) -> Result<RedoResponse, Error> {
        let point = self.core().redo_point()?;
        let files = match (&self.info.checkpoints, point.files) {
            (Ok(checkpoints), true) => Some(checkpoints.redo(force).await.map_err(refused)?),
            _ => None,
        };
        let mut response = self.core().redo(point);
        response.files = files;
        Ok(response)
    }

    fn agent(&self) -> Agent<'_> {
        Agent {
            host: self,
            env: self.info.env.as_ref(),
            profile: &self.info.profile,
            providers: &self.providers,
            retry: &self.retry,
            checkpoints: self.info.checkpoints.as_ref().ok(),
        }
    }

    /// Builds what the session's sandbox needs in the background, while the first LLM call
    /// is made, so the first command does not wait for it (a few milliseconds locally).
    pub(super) fn prepare_sandbox(&self) {
        let config = self.core().config.clone();
        if let Ok(Some(policy)) = SandboxPolicy::new(&config, self.info.env.as_ref()) {
            let env = self.info.env.clone();
            tokio::spawn(async move { env.prepare_sandbox(&policy).await });
        }
    }

    /// Waits for the environment context (captured in the background since the start).
    async fn context_ready(&self) {
        let env = self.info.env.clone();
        let docs = self.info.profile.doc_names;
        self.context.get_or_init(|| capture(env, docs)).await;
    }

    /// Runs `input` and the follow-ups after it, then ends the processing cycle.
    async fn process(&self, mut input: Input, mut token: CancellationToken) {
        self.prepare_sandbox();
        // The session's MCP servers start with its first input, while the context is
        // captured; the first LLM call waits for them.
        if let Some(mcp) = &self.mcp {
            mcp.wake();
        }
        self.context_ready().await;
        loop {
            self.core().current_input = Some(input.input_id.clone());
            // A bug in the loop must not take the daemon or other sessions down with it.
            let outcome = match AssertUnwindSafe(self.agent().process_input(input, &token))
                .catch_unwind()
                .await
            {
                Ok(outcome) => outcome,
                Err(panic) => {
                    self.core().emit(EventBody::Error {
                        message: format!(
                            "internal error: the agent loop crashed ({})",
                            panic_message(panic.as_ref())
                        ),
                        fatal: false,
                    });
                    Outcome::Failed
                }
            };
            if outcome == Outcome::Aborted {
                self.info.env.terminate_all().await;
            }
            let mut core = self.core();
            if matches!(outcome, Outcome::Completed | Outcome::TurnLimit)
                && core.closing.is_none()
                && let Some(next) = core.follow_up.pop_front()
            {
                token = self.cancel.child_token();
                core.turn = Some(token.clone());
                core.queue_changed();
                input = next;
                continue;
            }
            core.turn = None;
            let reason = match outcome {
                Outcome::Completed => ProcessingEndReason::Completed,
                Outcome::TurnLimit => ProcessingEndReason::TurnLimit,
                Outcome::MaxTokens => ProcessingEndReason::MaxTokens,
                Outcome::Refusal => ProcessingEndReason::Refusal,
                // The store failing stopped it, not a client.
                Outcome::Aborted if core.storage_error.is_some() => ProcessingEndReason::Error,
                Outcome::Aborted => ProcessingEndReason::Aborted,
                Outcome::Failed | Outcome::Fatal => ProcessingEndReason::Error,
            };
            core.last_end = Some(reason);
            if outcome == Outcome::Fatal && core.closing.is_none() {
                core.closing = Some(SessionEndReason::ProviderFailed);
            }
            let end = EventBody::ProcessingEnd {
                reason,
                input_id: core.current_input.take(),
            };
            if core.closing.is_none() {
                core.set_state_after(SessionState::Idle, Some(end));
            } else {
                // The close sequence that follows moves the state on.
                core.emit(end);
            }
            let report = self.info.parent.is_some().then(|| core.result());
            drop(core);
            if let Some(result) = report {
                self.report_to_parent(result);
            }
            return;
        }
    }

    /// Emits `subagent_finished` on the parent's stream.
    fn report_to_parent(&self, result: SubagentResult) {
        let Some(family) = &self.family else { return };
        family.tell_parent(EventBody::SubagentFinished {
            agent_id: self.info.id.clone(),
            success: result.success,
            turns_used: result.turns_used,
        });
    }
}

/// The error of a refused undo or redo: the client's to resolve when files changed.
fn refused(e: crate::checkpoint::Refused) -> Error {
    match e {
        crate::checkpoint::Refused::Changed(files) => Error::files_changed(files),
        crate::checkpoint::Refused::Failed(why) => Error::Internal(why),
    }
}
