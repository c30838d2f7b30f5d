//! Running the tool calls of one response (spec 2.5 `execute_tool_calls`): look up, validate,
//! approve, execute, truncate, emit. Every failure, and every refusal, becomes an error result
//! for the model.

use super::approval::{self, Verdict};
use super::{Agent, Host};
use crate::exec::{SandboxPolicy, Sandboxed};
use crate::store::Backlog;
use crate::tools::{
    Answer, McpOrigin, OutputLimits, RegisteredTool, Settled, ToolContext, ToolRegistry,
    truncate_tool_output,
};
use agentd_proto::{
    Decision, EscapedProcesses, EventBody, HookEvent, ImageData, OutputStream, ProcessInfo,
    RequestBody, ResolvedBy, SessionConfig, ToolCall, ToolCallId, ToolResult,
};
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How many escaped processes a warning event lists.
const MAX_ESCAPED_LISTED: usize = 64;

/// Bytes of output one call may hold back while the session's writer is behind.
const WITHHELD_MAX: usize = 1024 * 1024;

/// Output a call streams while its session's writer is behind. The environment hands output
/// to a sink that cannot wait, so rather than outgrow the writer's bounded backlog, deltas are
/// held back, merged, and emitted once there is room again or the call ends. Past
/// [`WITHHELD_MAX`] bytes the rest is dropped and a warning says how much (the call's result
/// holds its output as always).
#[derive(Default)]
struct Withheld {
    deltas: Vec<(OutputStream, String)>,
    bytes: usize,
    dropped: usize,
}

impl Withheld {
    fn hold(&mut self, stream: OutputStream, delta: &str) {
        if self.bytes + delta.len() > WITHHELD_MAX {
            self.dropped += delta.len();
            return;
        }
        self.bytes += delta.len();
        match self.deltas.last_mut() {
            Some((s, text)) if *s == stream => text.push_str(delta),
            _ => self.deltas.push((stream, delta.to_owned())),
        }
    }

    /// Emits what was held back, and says what was dropped.
    fn release(&mut self, host: &dyn Host, call_id: &ToolCallId) {
        for (stream, delta) in self.deltas.drain(..) {
            host.emit(EventBody::ToolCallOutputDelta {
                call_id: call_id.clone(),
                stream,
                delta,
            });
        }
        self.bytes = 0;
        if self.dropped > 0 {
            host.emit(EventBody::warning(format!(
                "{} bytes of the output of tool call {} were not streamed while the session's \
                 disk was behind; the call's result holds its output as usual",
                self.dropped, call_id.0
            )));
            self.dropped = 0;
        }
    }
}

/// What every call of one round shares.
pub(super) struct Round<'a> {
    /// The session's settings for this round.
    pub(crate) config: &'a SessionConfig,
    /// The tools offered in this round.
    pub(crate) tools: &'a ToolRegistry,
    /// Fires on abort.
    pub(crate) cancel: &'a CancellationToken,
    /// Whether the model of this round takes images in tool results.
    pub(crate) accepts_images: bool,
}

impl Agent<'_> {
    /// Runs `calls` (concurrently when the profile allows) and returns results in call order.
    /// Concurrent calls all start, in call order, before any ends: whether a fast command
    /// finishes within its first poll must not change what clients see.
    pub(super) async fn execute_tool_calls(
        &self,
        calls: &[ToolCall],
        round: &Round<'_>,
    ) -> Vec<ToolResult> {
        if self.profile.supports_parallel_tool_calls && calls.len() > 1 {
            let started = Instant::now();
            for call in calls {
                self.announce(call, round);
            }
            futures::future::join_all(
                calls
                    .iter()
                    .map(|c| self.execute_single_tool(c, round, started)),
            )
            .await
        } else {
            let mut results = Vec::with_capacity(calls.len());
            for call in calls {
                let started = Instant::now();
                self.announce(call, round);
                results.push(self.execute_single_tool(call, round, started).await);
            }
            results
        }
    }

    fn announce(&self, call: &ToolCall, round: &Round<'_>) {
        let (server, server_tool) = origin(call, round);
        self.host.emit(EventBody::ToolCallStart {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            arguments: call.arguments.clone(),
            server,
            server_tool,
        });
    }

    /// Runs one announced call and emits its end.
    async fn execute_single_tool(
        &self,
        call: &ToolCall,
        round: &Round<'_>,
        started: Instant,
    ) -> ToolResult {
        let host = self.host;
        let images = Mutex::new(Vec::new());
        let outcome = if round.cancel.is_cancelled() {
            Err(format!(
                "Tool call skipped: the work was aborted {}.",
                host.stop_reason()
            ))
        } else {
            self.run_tool(call, round, &images).await
        };
        let duration_ms = started.elapsed().as_millis() as u64;
        let is_error = outcome.is_err();
        let (output, error) = match outcome {
            Ok(output) => (Some(output), None),
            Err(message) => (None, Some(message)),
        };
        let text = output.as_deref().or(error.as_deref()).unwrap_or_default();
        let limits = round
            .tools
            .get(&call.name)
            .map_or_else(OutputLimits::default, |t| t.tool.output_limits());
        let content = truncate_tool_output(text, &call.name, limits, round.config);
        let (server, server_tool) = origin(call, round);
        host.emit(EventBody::ToolCallEnd {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            output,
            error,
            duration_ms,
            server,
            server_tool,
        });
        // The call's output deltas were emitted from a callback that cannot wait.
        self.room(round.cancel).await;
        ToolResult {
            call_id: call.id.clone(),
            content,
            is_error,
            images: images.into_inner().unwrap_or_else(|e| e.into_inner()),
        }
    }

    async fn run_tool(
        &self,
        call: &ToolCall,
        round: &Round<'_>,
        images: &Mutex<Vec<ImageData>>,
    ) -> Result<String, String> {
        let Some(registered) = round.tools.get(&call.name) else {
            return Err(format!(
                "Unknown tool: {}. Available tools: {}",
                call.name,
                round.tools.names().join(", ")
            ));
        };
        if let serde_json::Value::String(raw) = &call.arguments {
            return Err(format!(
                "Invalid arguments for tool {}: not valid JSON: {raw}",
                call.name
            ));
        }
        if let Err(problems) = registered.validate(&call.arguments) {
            return Err(format!(
                "Invalid arguments for tool {}: {problems}",
                call.name
            ));
        }
        if let Some(hooks) = self.host.hooks() {
            let emit = |body| self.host.emit(body);
            // One run per file the call names (see `tool_fields`); the first block stops it.
            let mut blocked = None;
            for fields in crate::hooks::tool_fields(
                &call.name,
                &call.arguments,
                &call.id.0,
                self.env.working_directory(),
            ) {
                let verdict = hooks
                    .fire(
                        HookEvent::PreToolUse,
                        Some((&call.name, &call.id)),
                        fields,
                        &emit,
                        round.cancel,
                    )
                    .await;
                blocked = verdict.block_reason();
                if blocked.is_some() {
                    break;
                }
            }
            if let Some(reason) = blocked {
                return Err(format!(
                    "Blocked by the user's pre_tool_use hook, so it was not run: {reason}"
                ));
            }
        }
        let unconfined = self.approve(call, registered, round).await?;
        // A call a person allowed to run outside the sandbox gets no policy.
        let policy = if unconfined {
            None
        } else {
            SandboxPolicy::new(round.config, self.env)
                .map_err(|e| format!("Tool error ({}): {e}", call.name))?
        };
        let env = Sandboxed::new(self.env, policy.as_ref(), round.cancel);
        let host = self.host;
        let backlog = host.backlog();
        let withheld = Mutex::new(Withheld::default());
        let output = |stream, delta: &str| {
            let mut withheld = withheld.lock().unwrap_or_else(|e| e.into_inner());
            if backlog.as_ref().is_some_and(Backlog::is_full) {
                return withheld.hold(stream, delta);
            }
            withheld.release(host, &call.id);
            host.emit(EventBody::ToolCallOutputDelta {
                call_id: call.id.clone(),
                stream,
                delta: delta.to_owned(),
            })
        };
        let attach =
            |image: ImageData| images.lock().unwrap_or_else(|e| e.into_inner()).push(image);
        let report_escaped = |processes: Vec<ProcessInfo>, ended: bool| {
            host.emit(escaped_warning(&call.id, processes, ended))
        };
        let ctx = ToolContext {
            env: &env,
            sandbox: policy.as_ref(),
            config: round.config,
            default_command_timeout: self.profile.shell_timeout.unwrap_or(Duration::from_millis(
                round.config.default_command_timeout_ms,
            )),
            cancel: round.cancel,
            output: &output,
            accepts_images: round.accepts_images,
            attach_image: &attach,
            report_escaped: &report_escaped,
            subagents: self.host.subagents(),
            skills: self.host.skills(),
            call_id: &call.id,
            requests: self.host.requests(),
            stop_reason: &|| host.stop_reason(),
        };
        // A panicking tool is a failed call, not a dead session.
        let result = match AssertUnwindSafe(registered.tool.execute(call.arguments.clone(), &ctx))
            .catch_unwind()
            .await
        {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(e)) => Err(format!("Tool error ({}): {e}", call.name)),
            Err(_) => Err(format!("Tool error ({}): the tool crashed", call.name)),
        };
        withheld
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .release(host, &call.id);
        match result {
            Ok(output) => Ok(self.post_tool_hooks(call, output, round).await),
            Err(e) => Err(e),
        }
    }

    /// Runs the `post_tool_use` hooks of a call that ran; what they say (why they block,
    /// the context they add) follows its output for the model.
    async fn post_tool_hooks(
        &self,
        call: &ToolCall,
        mut output: String,
        round: &Round<'_>,
    ) -> String {
        let Some(hooks) = self.host.hooks() else {
            return output;
        };
        let emit = |body| self.host.emit(body);
        let response = crate::hooks::tool_response(&output);
        for mut fields in crate::hooks::tool_fields(
            &call.name,
            &call.arguments,
            &call.id.0,
            self.env.working_directory(),
        ) {
            fields.insert("tool_response".to_owned(), response.clone());
            let verdict = hooks
                .fire(
                    HookEvent::PostToolUse,
                    Some((&call.name, &call.id)),
                    fields,
                    &emit,
                    round.cancel,
                )
                .await;
            for text in verdict.blocked.iter().chain(&verdict.context) {
                output.push_str("\n\n[The user's post_tool_use hook says]\n");
                output.push_str(text);
            }
        }
        output
    }

    /// Applies the session's approval settings to a validated call: `Ok` when it may run,
    /// with `true` when a person allowed it to run outside the sandbox.
    async fn approve(
        &self,
        call: &ToolCall,
        registered: &RegisteredTool,
        round: &Round<'_>,
    ) -> Result<bool, String> {
        let settings = &round.config.approval;
        if let Some(origin) = &registered.origin {
            return self.approve_mcp(call, registered, origin, round).await;
        }
        let prepared = match registered.tool.approval(&call.arguments) {
            Some(subject) => Some(approval::prepare(settings, &call.name, subject, self.env).await),
            None => None,
        };
        let sandboxed = round.config.sandbox != agentd_proto::SandboxMode::Off;
        let verdict = approval::decide(settings, &call.name, prepared.as_ref(), sandboxed);
        let prepared = match (verdict, prepared) {
            (Verdict::AllowedBy(rule), _) => return self.ruled(call, Decision::Allow, rule),
            (Verdict::DeniedBy(rule), _) => return self.ruled(call, Decision::Deny, rule),
            (Verdict::Refused(why), _) => return Err(why),
            (Verdict::Ask, Some(prepared)) => prepared,
            // Only a call with a subject is ever asked about.
            (Verdict::Run | Verdict::Ask, _) => return Ok(false),
        };
        let unconfined = prepared.subject.outside_sandbox && sandboxed;
        // Rules never let a call out of the sandbox, so `allow_always` adds none for one.
        let always = if unconfined {
            Vec::new()
        } else {
            approval::always_rules(&call.name, &prepared)
        };
        let mut summary = prepared.subject.summary.clone();
        if let Some(note) = prepared.note(settings, &call.name) {
            summary.push('\n');
            summary.push_str(&note);
        }
        self.ask(call, summary, always, round)
            .await
            .map(|()| unconfined)
    }
}

impl Agent<'_> {
    /// [`Agent::approve`] for a tool of an MCP server: `mcp(SERVER/TOOL)` rules and the
    /// server's hints decide (see [`approval::decide_mcp`]); a person is asked otherwise.
    async fn approve_mcp(
        &self,
        call: &ToolCall,
        registered: &RegisteredTool,
        origin: &McpOrigin,
        round: &Round<'_>,
    ) -> Result<bool, String> {
        let settings = &round.config.approval;
        let target = approval::mcp_target(&origin.server, &origin.tool);
        match approval::decide_mcp(settings, &target, origin.read_only, origin.destructive) {
            Verdict::Run => return Ok(false),
            Verdict::AllowedBy(rule) => return self.ruled(call, Decision::Allow, rule),
            Verdict::DeniedBy(rule) => return self.ruled(call, Decision::Deny, rule),
            Verdict::Refused(why) => return Err(why),
            Verdict::Ask => {}
        }
        let summary = registered
            .tool
            .approval(&call.arguments)
            .map_or_else(|| target.clone(), |s| s.summary);
        let always = if origin.destructive {
            Vec::new()
        } else {
            vec![approval::mcp_rule(&target)]
        };
        self.ask(call, summary, always, round).await.map(|()| false)
    }

    /// The session's approval `rule` decided `call`: says so, and what the model reads.
    fn ruled(&self, call: &ToolCall, decision: Decision, rule: String) -> Result<bool, String> {
        let result = match decision {
            Decision::Deny => Err(format!(
                "Refused: the session's approval rule `{rule}` denies this call, so it was not run. Do not retry it; find another way or ask the user."
            )),
            Decision::Allow | Decision::AllowAlways => Ok(false),
        };
        self.host.emit(EventBody::ApprovalResolved {
            request_id: super::new_request_id(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            decision,
            by: ResolvedBy::Rule,
            message: Some(rule),
        });
        result
    }

    /// Asks the session's clients whether `call` may run (`always`: the rules an
    /// `allow_always` adds); `Err` is what the model reads when it may not.
    async fn ask(
        &self,
        call: &ToolCall,
        summary: String,
        always: Vec<agentd_proto::ApprovalRule>,
        round: &Round<'_>,
    ) -> Result<(), String> {
        let Some(requests) = self.host.requests() else {
            return Err("Refused: this call needs approval and nobody can give it here.".into());
        };
        let body = RequestBody::Approval {
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            summary,
        };
        match requests.raise(&call.id, body, always, round.cancel).await {
            Settled::Answered(Answer::Approval {
                decision: Decision::Allow | Decision::AllowAlways,
                ..
            }) => Ok(()),
            Settled::Answered(Answer::Approval { message, .. }) => Err(match message {
                Some(m) if !m.trim().is_empty() => format!(
                    "Refused by the user: this call was not run. Their message: {}",
                    m.trim()
                ),
                _ => "Refused by the user: this call was not run. Take another way, or ask the user what they want.".into(),
            }),
            Settled::Answered(other) => Err(format!("Refused: unexpected answer {other:?}")),
            Settled::TimedOut(secs) => Err(format!(
                "Refused: nobody approved this call within {secs} s, so it was not run."
            )),
            Settled::Aborted => Err(format!(
                "Tool call skipped: the work was aborted {}.",
                self.host.stop_reason()
            )),
        }
    }
}

/// For a call of an MCP server's tool: the server and the server's own name of the tool.
fn origin(call: &ToolCall, round: &Round<'_>) -> (Option<String>, Option<String>) {
    round
        .tools
        .get(&call.name)
        .and_then(|t| t.origin.clone())
        .map_or((None, None), |o| (Some(o.server), Some(o.tool)))
}

/// The `warning` naming the processes tool call `call_id` started that left its process group
/// (at most [`MAX_ESCAPED_LISTED`] of them; the event counts them all).
fn escaped_warning(
    call_id: &ToolCallId,
    mut processes: Vec<ProcessInfo>,
    ended: bool,
) -> EventBody {
    let message = format!(
        "tool call {call_id}: {}",
        crate::exec::describe_escaped(&processes, ended)
    );
    let count = processes.len();
    processes.truncate(MAX_ESCAPED_LISTED);
    EventBody::Warning {
        message,
        escaped: Some(EscapedProcesses {
            call_id: call_id.clone(),
            processes,
            count,
            ended,
        }),
    }
}
