//! The session task: runs one input at a time through the agent loop, then the follow-ups
//! queued meanwhile, and performs the close sequence.

use super::{Command, Error, Session, lock};
use crate::agent::{Agent, CompactError, Outcome};
use crate::llm::{ProviderSet, RetryPolicy};
use crate::profile::EnvironmentContext;
use agentd_proto::{CompactResponse, EventBody, ProcessingEndReason, QueuedInput, SessionState};
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub(super) struct Actor {
    pub(super) session: Arc<Session>,
    pub(super) providers: ProviderSet,
    pub(super) retry: RetryPolicy,
}

impl Actor {
    pub(super) async fn run(self, mut commands: mpsc::Receiver<Command>) {
        let session = &self.session;
        let context =
            EnvironmentContext::capture(session.env.as_ref(), session.profile.doc_names).await;
        let _ = session.context.set(context);
        while let Some(command) = commands.recv().await {
            match command {
                Command::Process(input, token) => {
                    if let Some(reason) = self.process(input, token).await {
                        self.close(&reason).await;
                        break;
                    }
                }
                Command::Compact(token, reply) => {
                    let result = self.compact(&token).await;
                    let _ = reply.send(result);
                    let mut c = lock(&session.control);
                    c.turn = None;
                    session.set_state(&mut c, SessionState::Idle);
                }
                Command::Close(reason) => {
                    self.close(&reason).await;
                    break;
                }
            }
        }
    }

    fn agent(&self) -> Agent<'_> {
        let session = &self.session;
        Agent {
            host: session.as_ref(),
            env: session.env.as_ref(),
            profile: &session.profile,
            providers: &self.providers,
            retry: &self.retry,
        }
    }

    async fn compact(
        &self,
        token: &tokio_util::sync::CancellationToken,
    ) -> Result<CompactResponse, Error> {
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

    /// Runs `input` and the follow-ups after it. Returns a reason to close the session when an
    /// unrecoverable error stopped the work.
    async fn process(
        &self,
        mut input: QueuedInput,
        mut token: CancellationToken,
    ) -> Option<String> {
        let session = &self.session;
        loop {
            let agent = self.agent();
            // A bug in the loop must not take the daemon or other sessions down with it.
            let outcome = match AssertUnwindSafe(agent.process_input(input, &token))
                .catch_unwind()
                .await
            {
                Ok(outcome) => outcome,
                Err(_) => {
                    session.events.emit(EventBody::Error {
                        message: "internal error: the agent loop crashed".into(),
                        fatal: false,
                    });
                    Outcome::Failed
                }
            };
            if outcome == Outcome::Aborted {
                session.env.terminate_all().await;
            }
            let mut c = lock(&session.control);
            if matches!(outcome, Outcome::Completed | Outcome::TurnLimit)
                && !c.closing
                && let Some(next) = c.follow_up.pop_front()
            {
                token = CancellationToken::new();
                c.turn = Some(token.clone());
                session.queue_changed(&c);
                input = next;
                continue;
            }
            c.turn = None;
            let reason = match outcome {
                Outcome::Completed => ProcessingEndReason::Completed,
                Outcome::TurnLimit => ProcessingEndReason::TurnLimit,
                Outcome::MaxTokens => ProcessingEndReason::MaxTokens,
                // The store failing stopped it, not a client.
                Outcome::Aborted if session.storage_failing() => ProcessingEndReason::Error,
                Outcome::Aborted => ProcessingEndReason::Aborted,
                Outcome::Failed | Outcome::Fatal => ProcessingEndReason::Error,
            };
            c.last_end = Some(reason);
            session.events.emit(EventBody::ProcessingEnd { reason });
            drop(c);
            session.report_to_parent();
            let mut c = lock(&session.control);
            if outcome == Outcome::Fatal {
                return Some("unrecoverable provider error".into());
            }
            session.set_state(&mut c, SessionState::Idle);
            return None;
        }
    }

    async fn close(&self, reason: &str) {
        self.session.env.terminate_all().await;
        let mut c = lock(&self.session.control);
        self.session.finish_close(&mut c, reason);
    }
}
