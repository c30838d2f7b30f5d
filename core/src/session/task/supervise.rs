//! Supervision: a panic anywhere in the task becomes an `error` event, the session goes back
//! to idle, and the task serves on; however it ends, everything is written first.

use super::Task;
use crate::session::Command;
use crate::store::SessionRecord;
use agentd_proto::{EventBody, ProcessingEndReason, RequestId, ResolvedBy, SessionState};
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned())
}

/// Why the task's loop ended.
pub(super) enum Exit {
    /// Shutdown, or nobody holds the session any more.
    Done,
    /// Unloaded: the registry waits for the final record, sent once everything is written.
    Evicted(oneshot::Sender<Option<SessionRecord>>, Box<SessionRecord>),
}

/// Runs the task; a panic becomes an `error` event and the task serves on. However it ends,
/// everything is written and the record marked closed cleanly first.
pub(super) async fn supervise(task: Arc<Task>, mut commands: mpsc::Receiver<Command>) {
    let exit = loop {
        match AssertUnwindSafe(task.run(&mut commands))
            .catch_unwind()
            .await
        {
            Ok(exit) => break exit,
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                tracing::error!(session = %task.info.id, "the session task crashed: {message}");
                task.recover_from_panic(&message);
            }
        }
    };
    task.finish().await;
    if let Exit::Evicted(reply, record) = exit {
        let _ = reply.send(Some(*record));
    }
}

impl Task {
    /// After a panic outside the loop's own guard: the session reports it and goes on idle.
    fn recover_from_panic(&self, message: &str) {
        let mut core = self.core();
        core.cancel_turn();
        core.turn = None;
        core.next = None;
        let waiting: Vec<RequestId> = core
            .pending
            .iter()
            .map(|p| p.request.request_id.clone())
            .collect();
        for id in waiting {
            core.settle(&id, ResolvedBy::Abort);
        }
        core.emit(EventBody::Error {
            message: format!("internal error: the session task crashed ({message}); it is idle again and takes new input"),
            fatal: false,
        });
        if core.state.is_working() {
            core.last_end = Some(ProcessingEndReason::Error);
            let input_id = core.current_input.take();
            core.set_state_after(
                SessionState::Idle,
                Some(EventBody::ProcessingEnd {
                    reason: ProcessingEndReason::Error,
                    input_id,
                }),
            );
        }
        // Callers waiting on this task get an error, never a hang.
        core.aborts.clear();
        core.closes.clear();
    }
}
