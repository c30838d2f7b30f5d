//! Bringing back a stored session: its usage and queue, its state, the seqs an unclean stop may
//! have lost, the load's warnings, and the work a stopped daemon left half done.

use super::Core;
use crate::agent::Input;
use crate::session::Restored;
use crate::store::BACKLOG_LINES;
use agentd_proto::{
    EventBody, InputId, ProcessingEndReason, QueuedInput, SessionState, ToolResult, Turn,
};

/// Seqs skipped when a session is reopened after its daemon died: more than the events that
/// can wait for the disk, so a seq a client saw is never given to another event.
const MISSING_SEQS: u64 = 10_000;
const _: () = assert!(MISSING_SEQS > BACKLOG_LINES as u64);

/// A queued input read back from a record: the record keeps its images' type and size only.
fn restored_input(q: QueuedInput) -> Input {
    Input {
        input_id: q.input_id,
        text: q.text,
        images: Vec::new(),
    }
}

impl Core {
    /// Brings back what a stored session keeps besides its history (usage, queue, state),
    /// skips the seqs an unclean stop may have lost, reports the load's warnings, and
    /// recovers work a stopped daemon left half done.
    pub(super) fn restore(&mut self, r: Restored) {
        self.usage = r.record.usage;
        let (steering, follow_up) = (r.record.queue.steering, r.record.queue.follow_up);
        let lost: Vec<InputId> = steering
            .iter()
            .chain(&follow_up)
            .filter(|q| !q.images.is_empty())
            .map(|q| q.input_id.clone())
            .collect();
        self.steering = steering.into_iter().map(restored_input).collect();
        self.follow_up = follow_up.into_iter().map(restored_input).collect();
        if !lost.is_empty() {
            let ids: Vec<&str> = lost.iter().map(|i| i.0.as_str()).collect();
            self.emit(EventBody::warning(format!(
                "the images of queued inputs {} were not kept over the restart (queued \
                 images live in memory only); their text is still queued",
                ids.join(", ")
            )));
        }
        self.state = match r.record.state {
            SessionState::Closed => SessionState::Closed,
            _ if r.interrupted => SessionState::Processing,
            _ => SessionState::Idle,
        };
        if r.unclean {
            self.log.skip(MISSING_SEQS);
        }
        for message in r.warnings {
            self.emit(EventBody::warning(message));
        }
        if self.state == SessionState::Processing {
            self.recover_interrupted();
        }
    }

    /// After a daemon stopped mid-work: answers the tool calls left open, notes the
    /// interruption for the model, and ends the processing cycle the log had begun.
    fn recover_interrupted(&mut self) {
        let open_calls = self.history.branch().last().and_then(|e| match &e.turn {
            Turn::Assistant { tool_calls, .. } if !tool_calls.is_empty() => Some(
                tool_calls
                    .iter()
                    .map(|call| ToolResult {
                        call_id: call.id.clone(),
                        content: "The daemon stopped before this tool call finished; its effects are unknown.".into(),
                        is_error: true,
                        images: Vec::new(),
                    })
                    .collect(),
            ),
            _ => None,
        });
        if let Some(results) = open_calls {
            self.append(Turn::ToolResults { results });
        }
        self.append(Turn::System {
            text: "[The daemon restarted while this input was being processed; the work was interrupted.]".into(),
        });
        self.emit(EventBody::warning(
            "the daemon restarted while this session was processing; its work was interrupted",
        ));
        self.set_state_after(
            SessionState::Idle,
            Some(EventBody::ProcessingEnd {
                reason: ProcessingEndReason::Aborted,
                input_id: None,
            }),
        );
    }
}
