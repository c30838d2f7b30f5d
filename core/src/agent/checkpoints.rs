//! When the loop takes checkpoints: before a tool round that may change files (a tool that
//! would ask for approval: file writes, `apply_patch`, the shell, MCP tools that do not say
//! they only read), and after it. The "after" is started as soon as the round's tools end,
//! next to the following LLM call, so it costs no wall time, and brought up to date just
//! before the next round when the watch makes that cheap; a round that only reads takes
//! none, unless the round before it has to be closed.

use crate::checkpoint::{Checkpoints, Pending, Snap, joined};
use crate::tools::ToolRegistry;
use agentd_proto::{EventBody, InputId, ToolCall};

pub(super) struct Recorder<'a> {
    checkpoints: Option<&'a Checkpoints>,
    input: InputId,
    /// The checkpoint before the round that ran last, when it may have changed files.
    open: Option<Snap>,
    /// The checkpoint started at the LLM call, which closes `open`.
    pending: Option<Pending>,
    /// A checkpoint failed in this input (said once).
    warned: bool,
}

impl<'a> Recorder<'a> {
    pub(super) fn new(checkpoints: Option<&'a Checkpoints>, input: InputId) -> Self {
        Self {
            checkpoints,
            input,
            open: None,
            pending: None,
            warned: false,
        }
    }

    /// An LLM call starts: the round before it, if it may have changed files, ends here.
    pub(super) fn call_started(&mut self) {
        if let (Some(checkpoints), Some(before)) = (self.checkpoints, self.open.take()) {
            self.pending = Some(checkpoints.take(Some((self.input.clone(), before))));
        }
    }

    /// A round of `calls` is about to run: records the workspace first when it may change
    /// files. Returns a warning to emit when the checkpoint failed.
    pub(super) async fn before_round(
        &mut self,
        calls: &[ToolCall],
        tools: &ToolRegistry,
    ) -> Option<EventBody> {
        let checkpoints = self.checkpoints?;
        let changes = calls.iter().any(|call| {
            tools
                .get(&call.name)
                .is_some_and(|t| t.tool.approval(&call.arguments).is_some())
        });
        let taken = match self.pending.take() {
            // Taken at the LLM call: what changed since (the user's edits) is brought in.
            Some(pending) => match joined(pending.await) {
                Ok(snap) if changes => joined(checkpoints.refresh(snap).await),
                taken => taken,
            },
            None if changes => joined(checkpoints.take(None).await),
            None => return None,
        };
        match taken {
            Ok(snap) => {
                self.open = changes.then_some(snap);
                None
            }
            Err(e) => self.failed(&e),
        }
    }

    /// The input ends: closes the last round.
    pub(super) async fn finish(&mut self) -> Option<EventBody> {
        self.call_started();
        let pending = self.pending.take()?;
        joined(pending.await).err().and_then(|e| self.failed(&e))
    }

    fn failed(&mut self, e: &str) -> Option<EventBody> {
        if std::mem::replace(&mut self.warned, true) {
            return None;
        }
        Some(EventBody::warning(format!(
            "checkpoint failed, so this input's file changes cannot be undone: {e}"
        )))
    }
}
