//! Running the tool calls of one response (spec 2.5 `execute_tool_calls`): look up, validate,
//! execute, truncate, emit. Every failure becomes an error result for the model.

use super::Agent;
use crate::tools::{ToolContext, truncate::truncate_tool_output};
use agentd_proto::{EventBody, SessionConfig, ToolCall, ToolResult};
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

impl Agent<'_> {
    /// Runs `calls` (concurrently when the profile allows) and returns results in call order.
    pub(super) async fn execute_tool_calls(
        &self,
        calls: &[ToolCall],
        config: &SessionConfig,
        cancel: &CancellationToken,
    ) -> Vec<ToolResult> {
        if self.profile.supports_parallel_tool_calls && calls.len() > 1 {
            futures::future::join_all(
                calls
                    .iter()
                    .map(|c| self.execute_single_tool(c, config, cancel)),
            )
            .await
        } else {
            let mut results = Vec::with_capacity(calls.len());
            for call in calls {
                results.push(self.execute_single_tool(call, config, cancel).await);
            }
            results
        }
    }

    async fn execute_single_tool(
        &self,
        call: &ToolCall,
        config: &SessionConfig,
        cancel: &CancellationToken,
    ) -> ToolResult {
        let host = self.host;
        let started = Instant::now();
        host.emit(EventBody::ToolCallStart {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            arguments: call.arguments.clone(),
        });
        let outcome = if cancel.is_cancelled() {
            Err("Tool call skipped: the user aborted the work.".to_owned())
        } else {
            self.run_tool(call, config, cancel).await
        };
        let duration_ms = started.elapsed().as_millis() as u64;
        match outcome {
            Ok(output) => {
                let content = truncate_tool_output(&output, &call.name, config);
                host.emit(EventBody::ToolCallEnd {
                    call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    output: Some(output),
                    error: None,
                    duration_ms,
                });
                ToolResult {
                    call_id: call.id.clone(),
                    content,
                    is_error: false,
                }
            }
            Err(message) => {
                let content = truncate_tool_output(&message, &call.name, config);
                host.emit(EventBody::ToolCallEnd {
                    call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    output: None,
                    error: Some(message),
                    duration_ms,
                });
                ToolResult {
                    call_id: call.id.clone(),
                    content,
                    is_error: true,
                }
            }
        }
    }

    async fn run_tool(
        &self,
        call: &ToolCall,
        config: &SessionConfig,
        cancel: &CancellationToken,
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
        let host = self.host;
        let output = |stream, delta: &str| {
            host.emit(EventBody::ToolCallOutputDelta {
                call_id: call.id.clone(),
                stream,
                delta: delta.to_owned(),
            })
        };
        let ctx = ToolContext {
            env: self.env,
            config,
            default_command_timeout: self
                .profile
                .shell_timeout
                .unwrap_or(Duration::from_millis(config.default_command_timeout_ms)),
            cancel,
            output: &output,
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
