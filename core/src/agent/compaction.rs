//! Compaction: the session's own model summarizes the older part of the context and a
//! [`Turn::Compaction`] entry stands in for it; the newest entries stay as they are, and the
//! summarized ones stay in the history tree (spec 5.5 leaves the strategy to the host).
//!
//! The summary request is one user message holding the older turns as a plain transcript,
//! with no tools offered: a model cannot answer it with a tool call, roles cannot repeat
//! (llama.cpp chat templates reject that), and no provider sees tool calls without tool
//! definitions. A summary that would not make the context smaller is discarded with a
//! `warning`.

use super::{Agent, turn_chars};
use crate::llm;
use agentd_proto::{CompactResponse, EventBody, HistoryEntry, HookEvent, InputId, Turn};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Share of the context window the kept recent entries may fill, in percent.
const KEEP_PERCENT: u64 = 20;

const SYSTEM: &str = "You write summaries of coding-agent conversations so that the work can \
continue in a fresh context. You do not call tools.";

const INSTRUCTION: &str = "Summarize the conversation above so that you can continue the work \
from the summary alone. Include: the user's goals, requests and constraints; what has been done \
(files read and changed, commands run and their results); decisions made and why; errors met \
and how they were resolved; what is still open and the next steps. Quote exact file paths, \
identifiers, commands and error messages. Write only the summary.";

/// Why a summary was discarded; the loop stops trying automatic compaction for the input on
/// it, while "too short" may change as the input's rounds add entries.
pub(super) const NOT_SMALLER: &str = "the summary would not make the context smaller";

const PREAMBLE: &str = "[Earlier turns of this conversation were compacted. Summary:]";

/// Why a compaction did not happen.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CompactError {
    /// Too little history to summarize.
    #[error("nothing to compact: {0}")]
    NothingToCompact(&'static str),
    /// The session's provider is not configured.
    #[error(
        "provider {0:?} had no key or was not configured when this session was made; compact in \
         a new session (`agentctl fork SESSION`), which uses the keys and config as they are now"
    )]
    NotConfigured(String),
    /// The provider failed.
    #[error("the summary request failed: {0}")]
    Provider(String),
    /// The work was aborted.
    #[error("aborted")]
    Aborted,
}

/// Estimated tokens of `entries` (about four characters per token).
pub(super) fn estimate_tokens(entries: &[Arc<HistoryEntry>]) -> u64 {
    entries
        .iter()
        .map(|e| turn_chars(&e.turn) as u64)
        .sum::<u64>()
        / 4
}

/// A user's text, with a note of the images sent with it (a transcript carries no images).
fn with_images(text: &str, images: usize) -> String {
    match images {
        0 => text.to_owned(),
        1 => format!("{text}\n(an image was attached)"),
        n => format!("{text}\n({n} images were attached)"),
    }
}

/// The turns as a plain-text transcript, one labelled block per turn. Reasoning is left out:
/// it is opaque to other models and the answers carry its conclusions.
fn transcript(turns: &[&Turn]) -> String {
    let mut out = String::new();
    let mut block = |label: &str, text: &str| {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&format!("[{label}]\n{text}"));
    };
    for turn in turns {
        match turn {
            Turn::User {
                text,
                images,
                expanded,
                ..
            } => block(
                "user",
                &with_images(expanded.as_deref().unwrap_or(text), images.len()),
            ),
            Turn::Steering { text, images, .. } => block(
                "user (while the agent worked)",
                &with_images(text, images.len()),
            ),
            Turn::System { text } => block("note", text),
            Turn::Compaction { summary, .. } => block("summary of earlier turns", summary),
            Turn::Assistant {
                text, tool_calls, ..
            } => {
                let mut parts: Vec<String> = Vec::new();
                if !text.is_empty() {
                    parts.push(text.clone());
                }
                parts.extend(
                    tool_calls
                        .iter()
                        .map(|c| format!("(calls {} with {})", c.name, c.arguments)),
                );
                block("assistant", &parts.join("\n"));
            }
            Turn::ToolResults { results } => {
                for r in results {
                    let label = if r.is_error {
                        "tool error"
                    } else {
                        "tool result"
                    };
                    block(label, &r.content);
                }
            }
        }
    }
    out
}

/// Where the kept part starts: the newest entries that fit in `keep_tokens` (at least one),
/// never starting at tool results, which must follow the call they answer. `None` when
/// nothing but an earlier summary would be summarized.
fn cut_point(context: &[Arc<HistoryEntry>], keep_tokens: u64) -> Option<usize> {
    let mut kept = 0;
    let mut cut = None;
    for i in (1..context.len()).rev() {
        kept += turn_chars(&context[i].turn) as u64 / 4;
        if kept > keep_tokens && cut.is_some() {
            break;
        }
        if !matches!(context[i].turn, Turn::ToolResults { .. }) {
            cut = Some(i);
        }
    }
    cut.filter(|&cut| {
        context[..cut]
            .iter()
            .any(|e| !matches!(e.turn, Turn::Compaction { .. }))
    })
}

impl Agent<'_> {
    /// Summarizes all but the newest entries of the context with the session's model.
    pub(crate) async fn compact(
        &self,
        automatic: bool,
        cancel: &CancellationToken,
    ) -> Result<CompactResponse, CompactError> {
        let host = self.host;
        let config = host.config();
        let context = host.context();
        let tokens_before = estimate_tokens(&context);
        let keep = config.context_window_tokens * KEEP_PERCENT / 100;
        let cut = cut_point(&context, keep)
            .ok_or(CompactError::NothingToCompact("the history is too short"))?;
        if let Some(hooks) = host.hooks() {
            let trigger = if automatic { "auto" } else { "manual" };
            let fields = serde_json::Map::from_iter([
                ("trigger".to_owned(), serde_json::Value::from(trigger)),
                (
                    "custom_instructions".to_owned(),
                    serde_json::Value::from(""),
                ),
            ]);
            let emit = |body| host.emit(body);
            hooks
                .fire(HookEvent::PreCompact, None, fields, &emit, cancel)
                .await;
        }
        let provider = self
            .providers
            .get(&config.provider)
            .ok_or_else(|| CompactError::NotConfigured(config.provider.clone()))?;
        let older: Vec<&Turn> = context[..cut].iter().map(|e| &e.turn).collect();
        let instruction = Turn::User {
            text: format!(
                "<conversation>\n{}\n</conversation>\n\n{INSTRUCTION}",
                transcript(&older)
            ),
            input_id: InputId("compaction".into()),
            images: Vec::new(),
            expanded: None,
        };
        let history = [&instruction];
        let request = llm::Request {
            model: &config.model,
            system: SYSTEM,
            history: &history,
            tools: vec![],
            reasoning_effort: None,
            max_output_tokens: config.max_output_tokens,
            // Its prefix is not the conversation's: another cache.
            cache_key: None,
        };
        let mut on_retry = |n: llm::RetryNotice<'_>| {
            host.emit(EventBody::warning(format!(
                "compaction: {}; retrying in {:.1}s (attempt {})",
                n.error,
                n.delay.as_secs_f64(),
                n.attempt
            )))
        };
        let mut on_delta = |_: llm::Delta| {};
        let pace = self.pace();
        let result = tokio::select! {
            r = llm::complete(provider.as_ref(), &request, self.retry, &pace, &mut on_retry, &mut on_delta) => r,
            _ = cancel.cancelled() => return Err(CompactError::Aborted),
        };
        let response = result.map_err(|e| CompactError::Provider(e.to_string()))?;
        self.record_usage(response.usage);
        // A refusal or a cut-off answer is no summary, however short.
        match response.stop_reason {
            Some(llm::StopReason::Refusal) => {
                return Err(CompactError::Provider(
                    "the model declined to summarize the conversation".into(),
                ));
            }
            Some(llm::StopReason::MaxTokens) => {
                return Err(CompactError::Provider(format!(
                    "the summary was cut off at the output token limit (max_output_tokens = {})",
                    config.max_output_tokens
                )));
            }
            _ => {}
        }
        let text = response.text.trim();
        if text.is_empty() {
            return Err(CompactError::Provider(
                "the model returned an empty summary".into(),
            ));
        }
        // The skills active before the cut stay active (their text, not a summary of it).
        let skills = crate::skills::carried_over(&context[..cut], &context[cut..]);
        let summary = Turn::Compaction {
            // The model's words cannot mark a skill active; the carried-over texts do.
            summary: format!("{PREAMBLE}\n\n{}{skills}", crate::skills::defang(text)),
            first_kept: context[cut].id.clone(),
            tokens_before,
        };
        let tokens_after = turn_chars(&summary) as u64 / 4 + estimate_tokens(&context[cut..]);
        if tokens_after >= tokens_before {
            host.emit(EventBody::warning(format!(
                "compaction discarded: the summary would leave ~{tokens_after} tokens of context, \
                     no fewer than the ~{tokens_before} before"
            )));
            return Err(CompactError::NothingToCompact(NOT_SMALLER));
        }
        host.append(summary);
        let result = CompactResponse {
            tokens_before,
            tokens_after: estimate_tokens(&host.context()),
            entries_summarized: cut,
            entries_kept: context.len() - cut,
        };
        host.emit(EventBody::Compaction {
            tokens_before: result.tokens_before,
            tokens_after: result.tokens_after,
            entries_summarized: result.entries_summarized,
            entries_kept: result.entries_kept,
            automatic,
        });
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_proto::{EntryId, ToolResult};

    fn entry(turn: Turn) -> Arc<HistoryEntry> {
        Arc::new(HistoryEntry {
            id: EntryId("e".into()),
            parent_id: None,
            ts: String::new(),
            turn,
        })
    }

    fn text(n: usize) -> Turn {
        Turn::System {
            text: "x".repeat(n * 4),
        }
    }

    fn results(n: usize) -> Turn {
        Turn::ToolResults {
            results: vec![ToolResult {
                call_id: agentd_proto::ToolCallId("c".into()),
                content: "x".repeat(n * 4),
                is_error: false,
                images: vec![],
            }],
        }
    }

    #[test]
    fn the_transcript_labels_every_turn_and_leaves_reasoning_out() {
        let turns = [
            Turn::User {
                text: "fix the build".into(),
                input_id: InputId("i".into()),
                images: vec![agentd_proto::ImageData {
                    media_type: "image/png".into(),
                    data: "AAAA".into(),
                }],
                expanded: None,
            },
            Turn::Assistant {
                text: "Looking.".into(),
                reasoning: vec![agentd_proto::ReasoningBlock {
                    id: None,
                    text: "secret thoughts".into(),
                    signature: None,
                    redacted: None,
                }],
                tool_calls: vec![agentd_proto::ToolCall {
                    id: agentd_proto::ToolCallId("c1".into()),
                    name: "shell".into(),
                    arguments: serde_json::json!({"command": "make"}),
                    signature: None,
                }],
                usage: agentd_proto::Usage::default(),
                response_id: None,
                model: "m".into(),
                api: None,
            },
            Turn::ToolResults {
                results: vec![ToolResult {
                    call_id: agentd_proto::ToolCallId("c1".into()),
                    content: "error: missing ;".into(),
                    is_error: true,
                    images: vec![],
                }],
            },
            Turn::Steering {
                text: "use cargo".into(),
                input_id: None,
                images: vec![],
            },
            Turn::System {
                text: "[interrupted]".into(),
            },
        ];
        let refs: Vec<&Turn> = turns.iter().collect();
        assert_eq!(
            transcript(&refs),
            "[user]\nfix the build\n(an image was attached)\n\n\
             [assistant]\nLooking.\n(calls shell with {\"command\":\"make\"})\n\n\
             [tool error]\nerror: missing ;\n\n\
             [user (while the agent worked)]\nuse cargo\n\n\
             [note]\n[interrupted]"
        );
    }

    #[test]
    fn the_cut_keeps_recent_entries_and_never_starts_at_tool_results() {
        let context: Vec<_> = [text(100), text(100), text(10), results(10), text(10)]
            .into_iter()
            .map(entry)
            .collect();
        assert_eq!(cut_point(&context, 35), Some(2));
        assert_eq!(cut_point(&context, 25), Some(4));
        assert_eq!(cut_point(&context, 5), Some(4));
        let tail: Vec<_> = [text(100), text(10), results(1000)]
            .into_iter()
            .map(entry)
            .collect();
        assert_eq!(
            cut_point(&tail, 5),
            Some(1),
            "a call stays with its results"
        );
        let summary = entry(Turn::Compaction {
            summary: "s".into(),
            first_kept: EntryId("e".into()),
            tokens_before: 0,
        });
        assert_eq!(cut_point(&[summary, entry(text(1000))], 5), None);
        assert_eq!(cut_point(&[entry(text(1))], 5), None);
    }
}
