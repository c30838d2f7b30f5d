//! Where the loop runs the session's hooks (`crate::hooks`): `session_start` and
//! `user_prompt_submit` before an input joins the history, and `stop` (a subagent's
//! `subagent_stop`) when the model answers without tool calls. The tool events are in
//! `tool_calls.rs`, `pre_compact` in `compaction.rs`.

use super::{Agent, Outcome};
use agentd_proto::{EventBody, HookEvent, Turn};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

/// How many times one input's `stop` hooks may send the model back to work: a hook that
/// blocks every stop (ignoring `stop_hook_active`) cannot keep a session busy for ever.
pub(super) const MAX_STOP_HOOK_TURNS: u32 = 3;

impl Agent<'_> {
    /// Runs the `session_start` hooks (the first time) and the `user_prompt_submit` hooks for
    /// an input's `text`: the context they add for the model, or how the input ends when a
    /// hook refused it (the client is told why) or the work was aborted.
    pub(super) async fn prompt_hooks(
        &self,
        text: &str,
        cancel: &CancellationToken,
    ) -> Result<Vec<String>, Outcome> {
        let Some(hooks) = self.host.hooks() else {
            return Ok(Vec::new());
        };
        let emit = |body| self.host.emit(body);
        let started = hooks.start(&emit, cancel).await;
        let fields = Map::from_iter([("prompt".to_owned(), Value::from(text))]);
        let verdict = hooks
            .fire(HookEvent::UserPromptSubmit, None, fields, &emit, cancel)
            .await;
        if cancel.is_cancelled() {
            return Err(Outcome::Aborted);
        }
        if let Some(reason) = verdict.block_reason() {
            self.host.emit(EventBody::Error {
                message: format!("a user_prompt_submit hook refused this input: {reason}"),
                fatal: false,
            });
            return Err(Outcome::Failed);
        }
        Ok(started
            .context
            .into_iter()
            .map(|c| format!("[Context from the user's session_start hook]\n{c}"))
            .chain(
                verdict
                    .context
                    .into_iter()
                    .map(|c| format!("[Context from the user's user_prompt_submit hook]\n{c}")),
            )
            .collect())
    }

    /// Runs the `stop` hooks (a subagent's `subagent_stop`) as the model ends its answer;
    /// returns whether one sent it back to work, its reason added to the history. After
    /// [`MAX_STOP_HOOK_TURNS`] of those in one input, the input ends anyway, with a warning.
    pub(super) async fn stop_hooks(&self, turns: &mut u32, cancel: &CancellationToken) -> bool {
        let Some(hooks) = self.host.hooks() else {
            return false;
        };
        let event = if hooks.subagent() {
            HookEvent::SubagentStop
        } else {
            HookEvent::Stop
        };
        let emit = |body| self.host.emit(body);
        let fields = Map::from_iter([("stop_hook_active".to_owned(), Value::from(*turns > 0))]);
        let verdict = hooks.fire(event, None, fields, &emit, cancel).await;
        let Some(reason) = verdict.block_reason() else {
            return false;
        };
        if cancel.is_cancelled() {
            return false;
        }
        if *turns >= MAX_STOP_HOOK_TURNS {
            self.host.emit(EventBody::warning(format!(
                "a {event} hook asked to keep working {} times in a row; the input ends here \
                 (a hook should let the model stop when `stop_hook_active` is true)",
                *turns + 1
            )));
            return false;
        }
        *turns += 1;
        self.host.append(Turn::Steering {
            text: format!("[The user's {event} hook asks you to keep working]\n{reason}"),
            input_id: None,
            images: Vec::new(),
        });
        true
    }
}
