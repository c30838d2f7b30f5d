//! Unloading: whether the session may be evicted (idle, unwatched, nobody waiting), and the
//! final flush that marks its record cleanly closed.

use super::Task;
use crate::store::SessionRecord;
use agentd_proto::SessionState;

impl Task {
    /// The final record if the session can be unloaded now: idle or closed, no work, no
    /// subscriber, nobody waiting.
    pub(super) fn evictable(&self) -> Option<SessionRecord> {
        let core = self.core();
        let quiet = matches!(core.state, SessionState::Idle | SessionState::Closed)
            && core.next.is_none()
            && core.aborts.is_empty()
            && core.closes.is_empty()
            && core.log.subscribers() == 0;
        quiet.then(|| {
            let mut record = core.make_view().record(&self.info);
            record.open = false;
            record
        })
    }

    /// Writes everything and marks the record cleanly closed: the journal then holds every
    /// event, so reopening it skips no seqs.
    pub(super) async fn finish(&self) {
        // What the environment holds (a container) goes with the task.
        self.info.env.release().await;
        let sync = {
            let core = self.core();
            core.log.writer().map(|writer| {
                let mut record = core.make_view().record(&self.info);
                record.open = false;
                writer.record(record.to_json());
                writer.sync()
            })
        };
        if let Some(sync) = sync
            && let Err(e) = sync.await
        {
            tracing::error!(session = %self.info.id, "cannot save the session before unloading it: {e}");
        }
    }
}
