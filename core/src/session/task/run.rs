//! The task's loop: one piece of work at a time, run next to commands and the writer's status,
//! so the session keeps answering while it works; unloading when asked and idle.

use super::Task;
use super::supervise::Exit;
use crate::session::Command;
use crate::store::{Writer, WriterStatus};
use agentd_proto::EventBody;
use tokio::sync::{mpsc, watch};

/// The next change of the writer's status; never ready without a writer.
async fn storage_changed(status: &mut Option<watch::Receiver<WriterStatus>>) -> WriterStatus {
    if let Some(rx) = status {
        if rx.changed().await.is_ok() {
            return rx.borrow_and_update().clone();
        }
        *status = None;
    }
    std::future::pending().await
}

impl Task {
    pub(super) async fn run(&self, commands: &mut mpsc::Receiver<Command>) -> Exit {
        let mut storage = self.core().log.writer().map(Writer::status);
        let mut reachable = true;
        loop {
            let work = self.core().next.take();
            if let Some(work) = work {
                let work = self.work(work);
                tokio::pin!(work);
                loop {
                    tokio::select! {
                        () = &mut work => break,
                        command = commands.recv(), if reachable => match command {
                            Some(command) => self.handle(command),
                            // Nobody can reach the session any more: stop the work.
                            None => {
                                reachable = false;
                                self.core().cancel_turn();
                            }
                        },
                        status = storage_changed(&mut storage) => self.storage_changed(status),
                    }
                }
                self.after_work();
                continue;
            }
            tokio::select! {
                command = commands.recv() => match command {
                    Some(Command::Evict(reply)) => match self.evictable() {
                        Some(record) => return Exit::Evicted(reply, Box::new(record)),
                        None => {
                            let _ = reply.send(None);
                        }
                    },
                    Some(command) => self.handle(command),
                    None => return Exit::Done,
                },
                status = storage_changed(&mut storage) => self.storage_changed(status),
                () = self.cancel.cancelled() => return Exit::Done,
            }
        }
    }

    fn storage_changed(&self, status: WriterStatus) {
        let mut core = self.core();
        match status {
            WriterStatus::Failing(e) => {
                tracing::error!(session = %self.info.id, "cannot save the session: {e}");
                if core.storage_error.is_none() {
                    core.cancel_turn();
                    core.storage_error = Some(e.clone());
                    core.emit(EventBody::Error {
                        message: format!(
                            "cannot save the session to disk ({e}); the work is stopped, and new input is refused until the disk can be written again. Nothing already saved is lost."
                        ),
                        fatal: false,
                    });
                    core.publish();
                }
            }
            WriterStatus::Ok => {
                if core.storage_error.take().is_some() {
                    core.publish();
                }
            }
        }
    }
}
