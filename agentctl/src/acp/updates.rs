//! agentd events as ACP `session/update`s. Live, text and reasoning stream as deltas; while a
//! `session/load` replays the log, each response is sent whole (from its end event) instead of
//! as thousands of deltas, and a response still streaming when the replay ends is sent as far
//! as it got, then continues live.

use super::tools;
use agent_client_protocol::v1::schema as acp;
use agentd_proto::{EventBody, HookEvent, HookOutcome, ToolCallId};
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;

/// The most tool output sent in one update: the editor shows a panel, not a log; the whole
/// output stays in the session's events.
const MAX_TOOL_OUTPUT: usize = 64 << 10;

/// Per-session translation state.
pub(super) struct Translator {
    cwd: PathBuf,
    /// The context window, for `usage_update`'s `size`.
    pub(super) context_window: u64,
    /// Replaying the log (`session/load`) rather than streaming live.
    replaying: bool,
    /// Text and reasoning of the response being replayed, not yet sent.
    text: String,
    thought: String,
    /// Running calls: their tool and arguments, for the diff shown when they end.
    calls: HashMap<ToolCallId, (String, Value)>,
}

fn chunk(text: String) -> acp::ContentChunk {
    acp::ContentChunk::new(acp::ContentBlock::Text(acp::TextContent::new(text)))
}

impl Translator {
    pub(super) fn new(cwd: PathBuf, context_window: u64, replaying: bool) -> Self {
        Self {
            cwd,
            context_window,
            replaying,
            text: String::new(),
            thought: String::new(),
            calls: HashMap::new(),
        }
    }

    /// Ends the replay: what was buffered of a response still streaming goes out now.
    pub(super) fn go_live(&mut self) -> Vec<acp::SessionUpdate> {
        self.replaying = false;
        self.flush()
    }

    fn flush(&mut self) -> Vec<acp::SessionUpdate> {
        let mut out = Vec::new();
        if !self.thought.is_empty() {
            out.push(acp::SessionUpdate::AgentThoughtChunk(chunk(
                std::mem::take(&mut self.thought),
            )));
        }
        if !self.text.is_empty() {
            out.push(acp::SessionUpdate::AgentMessageChunk(chunk(
                std::mem::take(&mut self.text),
            )));
        }
        out
    }

    /// The updates for one event (often none).
    pub(super) fn updates(&mut self, body: &EventBody) -> Vec<acp::SessionUpdate> {
        match body {
            EventBody::UserInput { text, .. } | EventBody::SteeringInjected { text, .. } => {
                // Only a replay shows the user's words: live, the client sent them itself.
                if self.replaying {
                    vec![acp::SessionUpdate::UserMessageChunk(chunk(text.clone()))]
                } else {
                    Vec::new()
                }
            }
            EventBody::AssistantTextDelta { delta } => {
                if self.replaying {
                    self.text.push_str(delta);
                    Vec::new()
                } else {
                    vec![acp::SessionUpdate::AgentMessageChunk(chunk(delta.clone()))]
                }
            }
            EventBody::AssistantReasoningDelta { delta } => {
                if self.replaying {
                    self.thought.push_str(delta);
                    Vec::new()
                } else {
                    vec![acp::SessionUpdate::AgentThoughtChunk(chunk(delta.clone()))]
                }
            }
            EventBody::AssistantTextEnd {
                text, reasoning, ..
            } => {
                if !self.replaying {
                    return Vec::new();
                }
                self.text = text.clone();
                self.thought = reasoning.clone().unwrap_or_default();
                self.flush()
            }
            EventBody::ToolCallStart {
                call_id,
                tool_name,
                arguments,
                ..
            } => {
                let shown = tools::show(&self.cwd, tool_name, arguments);
                self.calls
                    .insert(call_id.clone(), (tool_name.clone(), arguments.clone()));
                let call = acp::ToolCall::new(call_id.0.clone(), shown.title)
                    .kind(shown.kind)
                    .status(acp::ToolCallStatus::InProgress)
                    .locations(shown.locations)
                    .raw_input(arguments.clone())
                    .content(
                        shown
                            .diffs
                            .into_iter()
                            .map(acp::ToolCallContent::Diff)
                            .collect(),
                    );
                vec![acp::SessionUpdate::ToolCall(call)]
            }
            EventBody::ToolCallEnd {
                call_id,
                output,
                error,
                ..
            } => {
                let started = self.calls.remove(call_id);
                let (status, text) = match (output, error) {
                    (_, Some(e)) => (acp::ToolCallStatus::Failed, e.as_str()),
                    (Some(o), None) => (acp::ToolCallStatus::Completed, o.as_str()),
                    (None, None) => (acp::ToolCallStatus::Completed, ""),
                };
                let mut content = Vec::new();
                if status == acp::ToolCallStatus::Completed
                    && let Some((tool, arguments)) = &started
                {
                    let shown = tools::show(&self.cwd, tool, arguments);
                    content.extend(shown.diffs.into_iter().map(acp::ToolCallContent::Diff));
                }
                if !text.is_empty() {
                    content.push(acp::ToolCallContent::Content(acp::Content::new(
                        acp::ContentBlock::Text(acp::TextContent::new(bounded(text))),
                    )));
                }
                let fields = acp::ToolCallUpdateFields::new()
                    .status(status)
                    .content(content)
                    .raw_output(serde_json::json!({ "output": output, "error": error }));
                vec![acp::SessionUpdate::ToolCallUpdate(
                    acp::ToolCallUpdate::new(call_id.0.clone(), fields),
                )]
            }
            EventBody::Usage { call, total } => {
                // What the last call sent is what the context holds now; the cost is the
                // session's so far (ACP's is cumulative).
                let used = call.input_tokens
                    + call.cache_read_tokens
                    + call.cache_write_tokens
                    + call.output_tokens;
                let mut update = acp::UsageUpdate::new(used, self.context_window);
                if let Some(cost) = total.cost_usd {
                    update = update.cost(acp::Cost::new(cost, "USD"));
                }
                vec![acp::SessionUpdate::UsageUpdate(update)]
            }
            EventBody::HookStarted {
                hook_run,
                event,
                hook,
                program,
                ..
            } => {
                let call = acp::ToolCall::new(hook_call_id(hook_run), hook_title(*event, program))
                    .kind(acp::ToolKind::Other)
                    .status(acp::ToolCallStatus::InProgress)
                    .raw_input(serde_json::json!({ "hook": hook, "program": program }));
                vec![acp::SessionUpdate::ToolCall(call)]
            }
            EventBody::HookFinished {
                hook_run,
                outcome,
                exit_code,
                duration_ms,
                reason,
                ..
            } => {
                // Only a hook that ran as it should is `completed`; one that blocked the work
                // is shown failed too, with its reason: the user needs to see why.
                let status = match outcome {
                    HookOutcome::Ok => acp::ToolCallStatus::Completed,
                    _ => acp::ToolCallStatus::Failed,
                };
                let mut text = format!("{outcome} in {duration_ms} ms");
                if let Some(code) = exit_code {
                    text.push_str(&format!(" (exit {code})"));
                }
                if let Some(reason) = reason {
                    text.push_str(&format!(": {reason}"));
                }
                let fields = acp::ToolCallUpdateFields::new()
                    .status(status)
                    .content(vec![acp::ToolCallContent::Content(acp::Content::new(
                        acp::ContentBlock::Text(acp::TextContent::new(text)),
                    ))]);
                vec![acp::SessionUpdate::ToolCallUpdate(
                    acp::ToolCallUpdate::new(hook_call_id(hook_run), fields),
                )]
            }
            EventBody::QuestionRequested {
                question, options, ..
            } => {
                let mut text = format!("\n\n{question}\n");
                if !options.is_empty() {
                    text.push_str(&format!("({})\n", options.join(" / ")));
                }
                text.push_str("[agentd: your next message answers this question]\n");
                vec![acp::SessionUpdate::AgentMessageChunk(chunk(text))]
            }
            EventBody::Warning { message, .. } | EventBody::LoopDetection { message } => {
                vec![acp::SessionUpdate::AgentThoughtChunk(chunk(format!(
                    "[agentd] {message}\n"
                )))]
            }
            EventBody::Error { message, .. } => {
                vec![acp::SessionUpdate::AgentMessageChunk(chunk(format!(
                    "\n[agentd error] {message}\n"
                )))]
            }
            _ => Vec::new(),
        }
    }
}

/// A hook run's tool call id, apart from the model's calls.
fn hook_call_id(hook_run: &str) -> String {
    format!("hook-{hook_run}")
}

fn hook_title(event: HookEvent, program: &str) -> String {
    format!("Hook {event}: {program}")
}

/// `text` cut to [`MAX_TOOL_OUTPUT`] bytes (its end kept: a build's errors come last).
fn bounded(text: &str) -> String {
    if text.len() <= MAX_TOOL_OUTPUT {
        return text.to_owned();
    }
    let mut start = text.len() - MAX_TOOL_OUTPUT;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!(
        "[{} bytes before this are in the session's events]\n{}",
        start,
        &text[start..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text_of(update: &acp::SessionUpdate) -> Option<(&'static str, String)> {
        let (kind, chunk) = match update {
            acp::SessionUpdate::AgentMessageChunk(c) => ("agent", c),
            acp::SessionUpdate::AgentThoughtChunk(c) => ("thought", c),
            acp::SessionUpdate::UserMessageChunk(c) => ("user", c),
            _ => return None,
        };
        match &chunk.content {
            acp::ContentBlock::Text(t) => Some((kind, t.text.clone())),
            _ => None,
        }
    }

    fn run(t: &mut Translator, events: &[EventBody]) -> Vec<(&'static str, String)> {
        events
            .iter()
            .flat_map(|e| t.updates(e))
            .filter_map(|u| text_of(&u))
            .collect()
    }

    fn delta(s: &str) -> EventBody {
        EventBody::AssistantTextDelta { delta: s.into() }
    }

    #[test]
    fn live_streams_deltas_and_skips_the_users_own_words() {
        let mut t = Translator::new("/w".into(), 100, false);
        let got = run(
            &mut t,
            &[
                EventBody::UserInput {
                    input_id: agentd_proto::InputId("i".into()),
                    text: "hi".into(),
                    images: vec![],
                },
                delta("a"),
                delta("b"),
                EventBody::AssistantTextEnd {
                    text: "ab".into(),
                    reasoning: None,
                    tool_calls: 0,
                },
            ],
        );
        assert_eq!(got, vec![("agent", "a".into()), ("agent", "b".into())]);
    }

    #[test]
    fn replay_sends_whole_responses_and_flushes_a_partial_one_when_live() {
        let mut t = Translator::new("/w".into(), 100, true);
        let mut got = run(
            &mut t,
            &[
                EventBody::UserInput {
                    input_id: agentd_proto::InputId("i".into()),
                    text: "hi".into(),
                    images: vec![],
                },
                delta("a"),
                EventBody::AssistantTextEnd {
                    text: "ab".into(),
                    reasoning: Some("r".into()),
                    tool_calls: 0,
                },
                delta("c"),
            ],
        );
        got.extend(t.go_live().iter().filter_map(text_of));
        got.extend(run(&mut t, &[delta("d")]));
        assert_eq!(
            got,
            vec![
                ("user", "hi".into()),
                ("thought", "r".into()),
                ("agent", "ab".into()),
                ("agent", "c".into()),
                ("agent", "d".into()),
            ]
        );
    }

    #[test]
    fn a_finished_edit_shows_its_diff_and_output() {
        let mut t = Translator::new("/w".into(), 100, false);
        let id = ToolCallId("c1".into());
        let args = json!({"file_path": "f", "old_string": "a", "new_string": "b"});
        t.updates(&EventBody::ToolCallStart {
            call_id: id.clone(),
            tool_name: "edit_file".into(),
            arguments: args,
            server: None,
            server_tool: None,
        });
        let end = t.updates(&EventBody::ToolCallEnd {
            call_id: id,
            tool_name: "edit_file".into(),
            output: Some("edited".into()),
            error: None,
            duration_ms: 1,
            server: None,
            server_tool: None,
        });
        let [acp::SessionUpdate::ToolCallUpdate(u)] = end.as_slice() else {
            panic!("{end:?}")
        };
        assert_eq!(u.fields.status, Some(acp::ToolCallStatus::Completed));
        let content = u.fields.content.clone().unwrap_or_default();
        assert_eq!(
            content[0],
            acp::ToolCallContent::Diff(acp::Diff::new("/w/f", "b").old_text("a".to_owned()))
        );
        assert_eq!(content.len(), 2);
    }

    #[test]
    fn a_hook_run_is_a_tool_call_of_its_own_that_ends_with_its_outcome() {
        let mut t = Translator::new("/w".into(), 100, false);
        let start = t.updates(&EventBody::HookStarted {
            hook_run: "h1".into(),
            event: HookEvent::PreToolUse,
            hook: "hooks.pre_tool_use[0]".into(),
            program: "check.sh".into(),
            call_id: Some(ToolCallId("c1".into())),
        });
        let [acp::SessionUpdate::ToolCall(call)] = start.as_slice() else {
            panic!("{start:?}")
        };
        assert_eq!(call.tool_call_id.0.as_ref(), "hook-h1");
        assert_eq!(call.title, "Hook pre_tool_use: check.sh");
        assert_eq!(call.kind, acp::ToolKind::Other);
        let end = t.updates(&EventBody::HookFinished {
            hook_run: "h1".into(),
            event: HookEvent::PreToolUse,
            hook: "hooks.pre_tool_use[0]".into(),
            outcome: HookOutcome::Blocked,
            exit_code: Some(2),
            duration_ms: 5,
            reason: Some("no rm".into()),
        });
        let [acp::SessionUpdate::ToolCallUpdate(u)] = end.as_slice() else {
            panic!("{end:?}")
        };
        assert_eq!(u.tool_call_id.0.as_ref(), "hook-h1");
        assert_eq!(u.fields.status, Some(acp::ToolCallStatus::Failed));
        assert!(format!("{:?}", u.fields.content).contains("blocked in 5 ms (exit 2): no rm"));
    }

    #[test]
    fn usage_reports_the_context_and_the_sessions_cost_so_far() {
        let mut t = Translator::new("/w".into(), 1000, false);
        let call = agentd_proto::Usage {
            input_tokens: 100,
            output_tokens: 20,
            cache_read_tokens: 300,
            cost_usd: Some(0.5),
            ..agentd_proto::Usage::default()
        };
        let total = agentd_proto::Usage {
            cost_usd: Some(2.0),
            ..call
        };
        let got = t.updates(&EventBody::Usage { call, total });
        let [acp::SessionUpdate::UsageUpdate(u)] = got.as_slice() else {
            panic!("{got:?}")
        };
        assert_eq!((u.used, u.size), (420, 1000));
        assert_eq!(u.cost, Some(acp::Cost::new(2.0, "USD")));
    }

    #[test]
    fn long_output_keeps_its_end() {
        let text = "x".repeat(2 * MAX_TOOL_OUTPUT) + "END";
        let b = bounded(&text);
        assert!(b.ends_with("END") && b.len() < text.len(), "{}", b.len());
    }
}
