//! Running the tool calls of one response (spec 2.5 `execute_tool_calls`): look up, validate,
//! execute, truncate, emit. Every failure becomes an error result for the model.

use super::Agent;
use crate::exec::{SandboxPolicy, Sandboxed};
use crate::tools::{ToolContext, truncate::truncate_tool_output};
use agentd_proto::{EventBody, ImageData, SessionConfig, ToolCall, ToolResult};
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What every call of one round shares.
pub(super) struct Round<'a> {
    /// The session's settings for this round.
    pub config: &'a SessionConfig,
    /// Fires on abort.
    pub cancel: &'a CancellationToken,
    /// Whether the model of this round takes images in tool results.
    pub accepts_images: bool,
}

impl Agent<'_> {
    /// Runs `calls` (concurrently when the profile allows) and returns results in call order.
    pub(super) async fn execute_tool_calls(
        &self,
        calls: &[ToolCall],
        round: &Round<'_>,
    ) -> Vec<ToolResult> {
        if self.profile.supports_parallel_tool_calls && calls.len() > 1 {
            futures::future::join_all(calls.iter().map(|c| self.execute_single_tool(c, round)))
                .await
        } else {
            let mut results = Vec::with_capacity(calls.len());
            for call in calls {
                results.push(self.execute_single_tool(call, round).await);
            }
            results
        }
    }

    async fn execute_single_tool(&self, call: &ToolCall, round: &Round<'_>) -> ToolResult {
        let host = self.host;
        let started = Instant::now();
        host.emit(EventBody::ToolCallStart {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        let images = Mutex::new(Vec::new());
        let outcome = if round.cancel.is_cancelled() {
            Err("Tool call skipped: the user aborted the work.".to_owned())
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
        let content = truncate_tool_output(text, &call.name, round.config);
        host.emit(EventBody::ToolCallEnd {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            output,
            error,
            duration_ms,
        });
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
        let Some(registered) = self.profile.tools.get(&call.name) else {
            return Err(format!(
                "Unknown tool: {}. Available tools: {}",
                call.name,
                self.profile.tools.names().join(", ")
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
        // The seam for running a call outside the sandbox (an approval that says so): a
        // policy of `None` here runs this call unrestricted.
        let policy = SandboxPolicy::new(round.config, self.env)
            .map_err(|e| format!("Tool error ({}): {e}", call.name))?;
        let env = Sandboxed::new(self.env, policy.as_ref());
        let host = self.host;
        let output = |stream, delta: &str| {
            host.emit(EventBody::ToolCallOutputDelta {
                call_id: call.id.clone(),
                stream,
                delta: delta.to_owned(),
            })
        };
        let attach =
            |image: ImageData| images.lock().unwrap_or_else(|e| e.into_inner()).push(image);
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
            subagents: self.host.subagents(),
        };
        // A panicking tool is a failed call, not a dead session.
        match AssertUnwindSafe(registered.tool.execute(call.arguments.clone(), &ctx))
            .catch_unwind()
            .await
        {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(e)) => Err(format!("Tool error ({}): {e}", call.name)),
            Err(_) => Err(format!("Tool error ({}): the tool crashed", call.name)),
        }
    }
}
