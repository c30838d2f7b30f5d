//! The agentic loop (spec 2.5): call the model, run the tools it asks for, feed the results
//! back, and repeat until it answers with text only, a limit is hit, or the work is aborted.
//! Steering is drained before the first call and after every tool round; loop detection
//! (spec 2.10) and the context-usage warning (spec 5.5) run between rounds.
//!
//! The loop knows nothing of sockets or the registry: it talks to its session through
//! [`Host`].

pub(crate) mod approval;
mod checkpoints;
mod compaction;
mod hooks;
mod input;
mod loop_detection;
mod tool_calls;

pub(crate) use compaction::CompactError;
pub(crate) use input::{Input, check_images, infos};

use crate::exec::ExecutionEnvironment;
use crate::llm::{self, Delta, ErrorKind, ProviderSet, RetryPolicy};
use crate::profile::Profile;
use crate::store::Backlog;
use crate::tools::{Requests, ToolRegistry};
use agentd_proto::{EventBody, HistoryEntry, LimitKind, ProviderKind, SessionConfig, Turn, Usage};
use futures::StreamExt;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What the loop needs from the session that runs it.
pub(crate) trait Host: Send + Sync {
    /// Why the current work was stopped, once its token fired, as words that follow
    /// "aborted": "by the user", or the daemon shutting down, or the disk failing.
    fn stop_reason(&self) -> &'static str;
    /// What names the session to providers that route a conversation's requests to the same
    /// prompt cache (OpenAI's `prompt_cache_key`): its id.
    fn cache_key(&self) -> &str;
    /// Records an event. Never waits: what waits for the disk is [`Host::backlog`].
    fn emit(&self, body: EventBody);
    /// Appends a turn to the history (and persists it). Never waits, as `emit`.
    fn append(&self, turn: Turn);
    /// The lines of the session waiting for the disk, `None` when it is not stored: the loop
    /// waits for room in it at its await points (see [`Agent::room`]).
    fn backlog(&self) -> Option<Backlog>;
    /// The current branch of the history, oldest first.
    fn history(&self) -> Vec<Arc<HistoryEntry>>;
    /// What the model sees: the branch with its newest compaction applied.
    fn context(&self) -> Vec<Arc<HistoryEntry>>;
    /// The config for the next LLM call (`session/set_config` may have changed it).
    fn config(&self) -> SessionConfig;
    /// Removes and returns every queued steering message.
    fn drain_steering(&self) -> Vec<Input>;
    /// Prices one call's usage (when the model has a price) and adds it to the session's
    /// total; returns the total.
    fn add_usage(&self, usage: &mut Usage) -> Usage;
    /// The system prompt for `model`.
    fn system_prompt(&self, model: &str) -> String;
    /// Child sessions for the subagent tools; `None` where the host has none.
    fn subagents(&self) -> Option<&dyn crate::tools::Subagents>;
    /// The tools the model is offered now: the profile's, plus `ask_user` and client tools
    /// when the config asks for them.
    fn tools(&self) -> Arc<ToolRegistry>;
    /// The session's clients, for approvals, questions and client tools; `None` where
    /// nobody can answer (then `ask` mode refuses what it would ask about).
    fn requests(&self) -> Option<&dyn Requests>;
    /// The session's MCP servers; `None` where it has none.
    fn mcp(&self) -> Option<crate::mcp::Mcp> {
        None
    }
    /// The session's hooks; `None` where it has none.
    fn hooks(&self) -> Option<&crate::hooks::Hooks> {
        None
    }
    /// The session's Agent Skills and prompt commands; `None` where it has none.
    fn skills(&self) -> Option<&dyn crate::skills::Skills> {
        None
    }
}

/// A new id for a pending request (or a rule's decision), unique in the daemon.
pub(crate) fn new_request_id() -> agentd_proto::RequestId {
    agentd_proto::RequestId(format!("req_{}", uuid::Uuid::new_v4().simple()))
}

/// What the session's tools and model are.
pub(crate) struct Agent<'a> {
    /// The session.
    pub(crate) host: &'a dyn Host,
    /// Where tools run.
    pub(crate) env: &'a dyn ExecutionEnvironment,
    /// Tools and defaults.
    pub(crate) profile: &'a Profile,
    /// The APIs the session may use; each call uses the one its config names.
    pub(crate) providers: &'a ProviderSet,
    /// Retries of failed calls.
    pub(crate) retry: &'a RetryPolicy,
    /// The session's checkpoints, taken around rounds that may change files.
    pub(crate) checkpoints: Option<&'a crate::checkpoint::Checkpoints>,
}

/// How processing one input ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The model answered with text only.
    Completed,
    /// A turn or round limit stopped it.
    TurnLimit,
    /// The model's answer was cut off at the output-token limit.
    MaxTokens,
    /// The model declined to answer.
    Refusal,
    /// The work was aborted.
    Aborted,
    /// An error stopped it; the session can take more input.
    Failed,
    /// An error the session cannot recover from (authentication): it must close.
    Fatal,
}

impl Agent<'_> {
    /// Waits until the session's events fit its writer's backlog again (the disk caught up),
    /// or the work is aborted: the event path's back-pressure. Emitting never waits, so the
    /// loop waits here, asynchronously, between steps and tool calls.
    async fn room(&self, cancel: &CancellationToken) {
        if let Some(backlog) = self.host.backlog() {
            tokio::select! {
                () = backlog.room() => {}
                () = cancel.cancelled() => {}
            }
        }
    }

    /// Paces a response's byte stream by the backlog: each chunk is read only once the
    /// events of the ones before fit, so a long response waits for the disk mid-stream.
    fn pace(&self) -> impl Fn(llm::ByteStream) -> llm::ByteStream + Sync + use<> {
        let backlog = self.host.backlog();
        move |stream| match backlog.clone() {
            Some(backlog) => stream
                .then(move |chunk| {
                    let backlog = backlog.clone();
                    async move {
                        backlog.room().await;
                        chunk
                    }
                })
                .boxed(),
            None => stream,
        }
    }

    /// Processes one input (spec 2.5 `process_input`, without the follow-up tail, which the
    /// session runs so that it can stop after an abort).
    pub(crate) async fn process_input(&self, input: Input, cancel: &CancellationToken) -> Outcome {
        let mut recorder = checkpoints::Recorder::new(self.checkpoints, input.input_id.clone());
        let outcome = self.run_input(input, cancel, &mut recorder).await;
        // However the input ended (an abort, an error), its last round is recorded.
        if let Some(warning) = recorder.finish().await {
            self.host.emit(warning);
        }
        outcome
    }

    async fn run_input(
        &self,
        input: Input,
        cancel: &CancellationToken,
        recorder: &mut checkpoints::Recorder<'_>,
    ) -> Outcome {
        let host = self.host;
        let context = match self.prompt_hooks(&input.text, cancel).await {
            Ok(context) => context,
            Err(outcome) => return outcome,
        };
        let images = infos(&input.images);
        // `/command args`, `/skill` and `$skill` (the history keeps both texts).
        let expansion = match host.skills() {
            Some(skills) => {
                crate::skills::expand(skills.catalog(), skills.active(), &input.text).await
            }
            None => crate::skills::Expansion::default(),
        };
        host.append(Turn::User {
            text: input.text.clone(),
            input_id: input.input_id.clone(),
            images: input.images,
            expanded: expansion.expanded,
        });
        host.emit(EventBody::UserInput {
            input_id: input.input_id,
            text: input.text,
            images,
        });
        for text in context {
            host.append(Turn::System { text });
        }
        for warning in expansion.warnings {
            host.emit(EventBody::warning(warning));
        }
        self.drain_steering();
        let mut stop_hook_turns = 0u32;
        let mut rounds = 0u32;
        let mut context_warned = false;
        // A failed or discarded automatic compaction is not tried again within this input: each
        // attempt is a whole LLM call, and the next round would most likely end the same way.
        // "Too short" costs nothing and may change as rounds add entries, so that one is.
        let mut auto_compact = true;
        loop {
            let config = host.config();
            if config.max_tool_rounds_per_input > 0 && rounds >= config.max_tool_rounds_per_input {
                host.emit(EventBody::TurnLimit {
                    limit: LimitKind::MaxToolRoundsPerInput,
                    count: rounds,
                });
                return Outcome::TurnLimit;
            }
            let assistant_turns = host
                .history()
                .iter()
                .filter(|e| matches!(e.turn, Turn::Assistant { .. }))
                .count() as u32;
            if config.max_turns > 0 && assistant_turns >= config.max_turns {
                host.emit(EventBody::TurnLimit {
                    limit: LimitKind::MaxTurns,
                    count: assistant_turns,
                });
                return Outcome::TurnLimit;
            }
            self.room(cancel).await;
            if cancel.is_cancelled() {
                return Outcome::Aborted;
            }
            let mut entries = host.context();
            let threshold = u64::from(config.auto_compact_percent);
            if auto_compact
                && threshold > 0
                && compaction::estimate_tokens(&entries) * 100
                    > config.context_window_tokens * threshold
            {
                match self.compact(true, cancel).await {
                    Ok(_) => entries = host.context(),
                    Err(CompactError::Aborted) => return Outcome::Aborted,
                    Err(CompactError::NothingToCompact(why)) => {
                        auto_compact = why != compaction::NOT_SMALLER;
                    }
                    Err(e) => {
                        auto_compact = false;
                        host.emit(EventBody::warning(format!(
                            "automatic compaction failed: {e}"
                        )));
                    }
                }
            }
            if !context_warned {
                context_warned = self.check_context_usage(&entries, &config);
            }

            let Some(provider) = self.providers.get(&config.provider) else {
                // A session keeps the providers it was made with; one usable only since then
                // (a key stored, a reload) is for new sessions.
                host.emit(EventBody::Error {
                    message: format!(
                        "provider {:?} had no key or was not configured when this session was \
                         made; switch back with `agentctl config SESSION provider=NAME`, or \
                         continue in a new session (`agentctl fork SESSION`), which uses the \
                         keys and config as they are now",
                        config.provider
                    ),
                    fatal: false,
                });
                return Outcome::Failed;
            };
            // The provider may have changed since the images were taken (`set_config`).
            if !provider.takes_input_images() && entries.iter().any(|e| has_images(&e.turn)) {
                host.emit(EventBody::Error {
                    message: format!(
                        "the conversation holds images and provider {:?} does not take them \
                         (set `images = true` under [providers.{}] if its models do); switch \
                         to a provider that does, or roll the images back",
                        config.provider, config.provider
                    ),
                    fatal: false,
                });
                return Outcome::Failed;
            }
            let api = Some(provider.kind());
            let system = host.system_prompt(&config.model);
            let history: Vec<&Turn> = entries.iter().map(|e| &e.turn).collect();
            // The servers' tools join the session's own; the first call waits for the servers
            // to start (each within its startup timeout).
            let tools = match host.mcp() {
                Some(mcp) => tokio::select! {
                    more = mcp.tools() => Arc::new(host.tools().with(&more)),
                    () = cancel.cancelled() => return Outcome::Aborted,
                },
                None => host.tools(),
            };
            let request = llm::Request {
                model: &config.model,
                system: &system,
                history: &history,
                tools: tools.definitions().collect(),
                reasoning_effort: config.reasoning_effort,
                max_output_tokens: config.max_output_tokens,
                cache_key: Some(host.cache_key()),
            };
            recorder.call_started();
            let mut partial = String::new();
            let mut text_started = false;
            let result = {
                let mut on_delta = |d: Delta| match d {
                    Delta::TextStart => {
                        text_started = true;
                        host.emit(EventBody::AssistantTextStart {});
                    }
                    Delta::Text(t) => {
                        partial.push_str(&t);
                        host.emit(EventBody::AssistantTextDelta { delta: t });
                    }
                    Delta::Reasoning(t) => {
                        host.emit(EventBody::AssistantReasoningDelta { delta: t })
                    }
                };
                let mut on_retry = |n: llm::RetryNotice<'_>| {
                    host.emit(EventBody::warning(format!(
                        "{}; retrying in {:.1}s (attempt {})",
                        n.error,
                        n.delay.as_secs_f64(),
                        n.attempt
                    )))
                };
                let pace = self.pace();
                tokio::select! {
                    r = llm::complete(provider.as_ref(), &request, self.retry, &pace, &mut on_retry, &mut on_delta) => Some(r),
                    _ = cancel.cancelled() => None,
                }
            };
            let response = match result {
                None => {
                    // Said as it happened: a daemon shutting down is not the user stopping it.
                    let note = format!(
                        "[The previous response was interrupted {}.]",
                        host.stop_reason()
                    );
                    self.record_partial(partial, &note, api);
                    return Outcome::Aborted;
                }
                Some(Err(e)) => return self.fail(e, partial, api),
                Some(Ok(r)) => r,
            };
            // Every `assistant_text_end` has its start: a response with no text (tool calls
            // only, or reasoning only) opens here, so clients can pair them.
            if !text_started {
                host.emit(EventBody::AssistantTextStart {});
            }

            let usage = self.record_usage(response.usage);
            let reasoning = (!response.reasoning.is_empty()).then(|| {
                response
                    .reasoning
                    .iter()
                    .map(|r| r.text.as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            });
            // A response cut off at the output-token limit is not an answer: its last tool call
            // may be half written, so none of its calls run, and the input ends visibly.
            let truncated = response.stop_reason == Some(llm::StopReason::MaxTokens);
            // Nor is a refusal: whatever it asked to run, it declined the request.
            let refused = response.stop_reason == Some(llm::StopReason::Refusal);
            let calls = if truncated || refused {
                Vec::new()
            } else {
                response.tool_calls
            };
            host.append(Turn::Assistant {
                text: response.text.clone(),
                reasoning: response.reasoning,
                tool_calls: calls.clone(),
                usage,
                response_id: response.response_id,
                model: response.model.unwrap_or_else(|| config.model.clone()),
                api,
            });
            host.emit(EventBody::AssistantTextEnd {
                text: response.text,
                reasoning,
                tool_calls: calls.len(),
            });
            if truncated {
                host.append(Turn::System {
                    text: format!(
                        "[The previous response was cut off at the output token limit ({} tokens).]",
                        config.max_output_tokens
                    ),
                });
                host.emit(EventBody::warning(format!(
                    "the response was cut off at the output token limit (max_output_tokens = {}); \
                         raise it with session/set_config or ask for a shorter answer",
                    config.max_output_tokens
                )));
                return Outcome::MaxTokens;
            }
            if refused {
                host.append(Turn::System {
                    text: "[The model declined to answer the previous request.]".to_owned(),
                });
                host.emit(EventBody::warning(format!(
                    "the model declined to answer ({}/{} reported a refusal or a safety block); \
                     roll the request back (session/rollback) and rephrase it, or switch the model",
                    config.provider, config.model
                )));
                return Outcome::Refusal;
            }
            if calls.is_empty() {
                // Steering that arrived while the model wrote its answer belongs to this
                // input: the loop goes on with it (as pi does), never leaving it for later.
                if self.drain_steering() {
                    continue;
                }
                if self.stop_hooks(&mut stop_hook_turns, cancel).await {
                    continue;
                }
                return Outcome::Completed;
            }

            rounds += 1;
            if let Some(warning) = recorder.before_round(&calls, &tools).await {
                host.emit(warning);
            }
            let round = tool_calls::Round {
                config: &config,
                tools: &tools,
                cancel,
                accepts_images: provider.accepts_images(),
            };
            let results = self.execute_tool_calls(&calls, &round).await;
            host.append(Turn::ToolResults { results });
            if cancel.is_cancelled() {
                return Outcome::Aborted;
            }
            self.drain_steering();
            if config.enable_loop_detection
                && loop_detection::detect_loop(&host.history(), config.loop_detection_window)
            {
                let message = format!(
                    "Loop detected: the last {} tool calls follow a repeating pattern. Try a different approach.",
                    config.loop_detection_window
                );
                host.append(Turn::Steering {
                    text: message.clone(),
                    input_id: None,
                    images: Vec::new(),
                });
                host.emit(EventBody::LoopDetection { message });
            }
        }
    }

    /// Adds one call's usage to the session's total and emits both; returns the call's usage.
    /// A call the server reported no usage for counts as unknown (`unreported_calls: 1`), never
    /// as zero tokens.
    fn record_usage(&self, reported: Option<Usage>) -> Usage {
        let mut call = reported.unwrap_or(Usage {
            unreported_calls: 1,
            ..Usage::default()
        });
        let total = self.host.add_usage(&mut call);
        if reported.is_none() {
            // Unknown tokens have no known price; the host priced them as zero.
            call.cost_usd = None;
        }
        self.host.emit(EventBody::Usage { call, total });
        call
    }

    /// Appends the queued steering messages to the history; returns whether there were any.
    fn drain_steering(&self) -> bool {
        let drained = self.host.drain_steering();
        let any = !drained.is_empty();
        for msg in drained {
            let images = infos(&msg.images);
            self.host.append(Turn::Steering {
                text: msg.text.clone(),
                input_id: Some(msg.input_id.clone()),
                images: msg.images,
            });
            self.host.emit(EventBody::SteeringInjected {
                input_id: msg.input_id,
                text: msg.text,
                images,
            });
        }
        any
    }

    /// Emits the spec 5.5 warning when the history passes 80% of the context window; returns
    /// whether it did.
    fn check_context_usage(&self, entries: &[Arc<HistoryEntry>], config: &SessionConfig) -> bool {
        let chars: usize = entries.iter().map(|e| turn_chars(&e.turn)).sum();
        let approx_tokens = chars as u64 / 4;
        let window = config.context_window_tokens.max(1);
        if approx_tokens * 10 > window * 8 {
            let percent = approx_tokens * 100 / window;
            self.host.emit(EventBody::warning(format!(
                "Context usage at ~{percent}% of context window"
            )));
            return true;
        }
        false
    }

    /// Keeps what the model had written before the stream stopped, then notes why, so the
    /// model knows on the next call.
    fn record_partial(&self, partial: String, note: &str, api: Option<ProviderKind>) {
        if !partial.is_empty() {
            self.host.append(Turn::Assistant {
                text: partial.clone(),
                reasoning: vec![],
                tool_calls: vec![],
                usage: Usage::default(),
                response_id: None,
                model: self.host.config().model,
                api,
            });
            self.host.emit(EventBody::AssistantTextEnd {
                text: partial,
                reasoning: None,
                tool_calls: 0,
            });
        }
        self.host.append(Turn::System { text: note.into() });
    }

    fn fail(&self, e: llm::Error, partial: String, api: Option<ProviderKind>) -> Outcome {
        if !partial.is_empty() {
            self.record_partial(
                partial,
                "[The previous response was cut off by an error.]",
                api,
            );
        }
        match e.kind {
            ErrorKind::Authentication => {
                // A new session reads the credentials file when it is created, so a key
                // stored now works there; `fork` keeps the conversation.
                let provider = self.host.config().provider;
                self.host.emit(EventBody::Error {
                    message: format!(
                        "{e}. The session is closed; store a valid key with `agentctl login \
                         {provider}` and continue in a new session (`agentctl fork SESSION` \
                         keeps this conversation)."
                    ),
                    fatal: true,
                });
                Outcome::Fatal
            }
            ErrorKind::ContextLength => {
                self.host
                    .emit(EventBody::warning(format!("context window exceeded: {e}")));
                Outcome::Failed
            }
            _ => {
                self.host.emit(EventBody::Error {
                    message: e.to_string(),
                    fatal: false,
                });
                Outcome::Failed
            }
        }
    }
}

/// Whether a user's turn carries images.
fn has_images(turn: &Turn) -> bool {
    matches!(turn, Turn::User { images, .. } | Turn::Steering { images, .. } if !images.is_empty())
}

fn turn_chars(turn: &Turn) -> usize {
    match turn {
        Turn::User { text, expanded, .. } => expanded.as_ref().unwrap_or(text).len(),
        Turn::Steering { text, .. }
        | Turn::System { text }
        | Turn::Compaction { summary: text, .. } => text.len(),
        Turn::Assistant {
            text,
            reasoning,
            tool_calls,
            ..
        } => {
            text.len()
                + reasoning.iter().map(|r| r.text.len()).sum::<usize>()
                + tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.to_string().len())
                    .sum::<usize>()
        }
        Turn::ToolResults { results } => results.iter().map(|r| r.content.len()).sum(),
    }
}
