//! Compaction: the session's own model summarizes the older part of the context and a
//! [`Turn::Compaction`] entry stands in for it; the newest entries stay as they are, and the
//! summarized ones stay in the history tree (spec 5.5 leaves the strategy to the host).

use super::{Agent, turn_chars};
use crate::llm;
use agentd_proto::{CompactResponse, EventBody, HistoryEntry, InputId, Turn};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Share of the context window the kept recent entries may fill, in percent.
const KEEP_PERCENT: u64 = 20;

const SYSTEM: &str = "You write summaries of coding-agent conversations so that the work can \
continue in a fresh context. You do not call tools.";

const INSTRUCTION: &str = "Summarize the conversation so far so that you can continue the work \
from the summary alone. Include: the user's goals, requests and constraints; what has been done \
(files read and changed, commands run and their results); decisions made and why; errors met \
and how they were resolved; what is still open and the next steps. Quote exact file paths, \
identifiers, commands and error messages. Write only the summary.";

const PREAMBLE: &str = "[Earlier turns of this conversation were compacted. Summary:]";

/// Why a compaction did not happen.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    /// Too little history to summarize.
    #[error("nothing to compact: {0}")]
    NothingToCompact(&'static str),
    /// The session's provider is not configured.
    #[error("provider {0:?} is not configured in this daemon")]
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
    pub async fn compact(
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
        let provider = self
            .providers
            .get(&config.provider)
            .cloned()
            .ok_or_else(|| CompactError::NotConfigured(config.provider.clone()))?;
        let instruction = Turn::User {
            text: INSTRUCTION.into(),
            input_id: InputId("compaction".into()),
        };
        let mut history: Vec<&Turn> = context[..cut].iter().map(|e| &e.turn).collect();
        history.push(&instruction);
        let request = llm::Request {
            model: &config.model,
            system: SYSTEM,
            history: &history,
            // Providers reject tool calls in the history of a request that defines no tools.
            tools: self.profile.tools.definitions().collect(),
            reasoning_effort: None,
            max_output_tokens: config.max_output_tokens,
        };
        let mut on_retry = |n: llm::RetryNotice<'_>| {
            host.emit(EventBody::Warning {
                message: format!(
                    "compaction: {}; retrying in {:.1}s (attempt {})",
                    n.error,
                    n.delay.as_secs_f64(),
                    n.attempt
                ),
            })
        };
        let mut on_delta = |_: llm::Delta| {};
        let result = tokio::select! {
            r = llm::complete(provider.as_ref(), &request, self.retry, &mut on_retry, &mut on_delta) => r,
            _ = cancel.cancelled() => return Err(CompactError::Aborted),
        };
        let mut response = result.map_err(|e| CompactError::Provider(e.to_string()))?;
        let total = host.add_usage(&mut response.usage);
        host.emit(EventBody::Usage {
            call: response.usage,
            total,
        });
        let text = response.text.trim();
        if text.is_empty() {
            return Err(CompactError::Provider(
                "the model returned an empty summary".into(),
            ));
        }
        host.append(Turn::Compaction {
            summary: format!("{PREAMBLE}\n\n{text}"),
            first_kept: context[cut].id.clone(),
            tokens_before,
        });
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
