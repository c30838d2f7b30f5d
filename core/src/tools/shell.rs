//! `shell`: runs a command with `bash -c` in its own process group (spec 3.3, 5.4).

use super::schema::parameters;
use super::{
    ApprovalSubject, OutputLimits, TargetKind, Tool, ToolContext, ToolDefinition, ToolError,
    parse_args,
};
use crate::exec::ExecRequest;
use agentd_proto::BuiltinTool;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// The `shell` tool.
pub(crate) struct Shell;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The command line to run.
    command: String,
    /// Kill the command after this many milliseconds.
    #[schemars(range(min = 1))]
    timeout_ms: Option<u64>,
    /// A short human-readable description of what the command does.
    #[expect(
        dead_code,
        reason = "for people: clients read it in the call's arguments"
    )]
    description: Option<String>,
    /// Run outside the session's sandbox. Only after the sandbox refused a command that must
    /// write or connect where it may not; the user is asked first, and without a user to ask
    /// it is refused.
    #[serde(default)]
    outside_sandbox: bool,
}

#[async_trait]
impl Tool for Shell {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: BuiltinTool::Shell.as_str().into(),
            description: "Execute a shell command with bash in the session's working directory. \
                Returns stdout, stderr, the exit code and the duration. Commands that run longer \
                than the timeout are killed with their whole process group."
                .into(),
            parameters: parameters::<Args>(),
        }
    }

    fn approval(&self, args: &serde_json::Value) -> Option<ApprovalSubject> {
        let Args {
            command,
            outside_sandbox: outside,
            ..
        } = serde_json::from_value(args.clone()).ok()?;
        let summary = if outside {
            format!("outside the sandbox (it may write anywhere and use the network):\n$ {command}")
        } else {
            format!("$ {command}")
        };
        let mut subject = ApprovalSubject::new(TargetKind::Command, vec![command], summary);
        subject.outside_sandbox = outside;
        Some(subject)
    }

    fn output_limits(&self) -> OutputLimits {
        OutputLimits::head_tail(30_000).lines(256)
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let timeout_ms = args
            .timeout_ms
            .unwrap_or(ctx.default_command_timeout.as_millis() as u64)
            .min(ctx.config.max_command_timeout_ms);
        let request = ExecRequest {
            command: &args.command,
            timeout: Duration::from_millis(timeout_ms),
            working_dir: None,
            sandbox: ctx.sandbox,
        };
        let mut result = ctx
            .env
            .exec_command(request, ctx.output, ctx.cancel)
            .await?;
        if !result.escaped.is_empty() {
            (ctx.report_escaped)(
                std::mem::take(&mut result.escaped),
                result.timed_out || result.cancelled,
            );
        }

        let mut text = result.stdout;
        if !result.stderr.is_empty() {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&result.stderr);
        }
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        let duration_ms = result.duration.as_millis();
        if result.timed_out {
            text.push_str(&format!(
                "[ERROR: Command timed out after {timeout_ms}ms. Partial output is shown above. \
                 You can retry with a longer timeout by setting the timeout_ms parameter.]"
            ));
            return Err(ToolError(text));
        }
        if result.cancelled {
            text.push_str(&format!("[Command aborted {}.]", ctx.stop_reason()));
            return Err(ToolError(text));
        }
        // A sandbox's refusal is an EACCES or EROFS like any other; the model needs to know
        // there is a sandbox to tell them apart.
        if let (Some(policy), false) = (ctx.sandbox, result.exit_code == Some(0))
            && (text.contains("Permission denied") || text.contains("Read-only file system"))
        {
            let escalate = if ctx.config.approval.mode == agentd_proto::ApprovalMode::Ask {
                "; if the command must, call shell again with outside_sandbox: true to ask the user"
            } else {
                ""
            };
            text.push_str(&format!(
                "[{}; a write outside it fails with \"Read-only file system\" or \"Permission \
                 denied\", a connection with \"Permission denied\"{escalate}]\n",
                policy.describe()
            ));
        }
        match result.exit_code {
            Some(0) => {
                text.push_str(&format!("[exit code: 0, duration: {duration_ms}ms]"));
                Ok(text)
            }
            Some(code) => {
                text.push_str(&format!("[exit code: {code}, duration: {duration_ms}ms]"));
                Err(ToolError(text))
            }
            None => {
                text.push_str(&format!("[killed by a signal, duration: {duration_ms}ms]"));
                Err(ToolError(text))
            }
        }
    }
}
