//! Test support: runs one tool against a real directory.

use super::{Tool, ToolContext, ToolError};
use crate::exec::ExecutionEnvironment;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Runs `tool` with `args` in `env`.
pub(crate) fn run(
    tool: &dyn Tool,
    args: serde_json::Value,
    env: &dyn ExecutionEnvironment,
) -> Result<String, ToolError> {
    let config = crate::config::default_session_config("anthropic", "m");
    let cancel = CancellationToken::new();
    let sink = |_, _: &str| {};
    let ctx = ToolContext {
        env,
        sandbox: None,
        config: &config,
        default_command_timeout: Duration::from_secs(5),
        cancel: &cancel,
        output: &sink,
        accepts_images: false,
        attach_image: &|_| {},
        report_escaped: &|_, _| {},
        subagents: None,
        skills: None,
        call_id: &agentd_proto::ToolCallId::from("call-test"),
        requests: None,
        stop_reason: &|| "by the user",
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(tool.execute(args, &ctx))
}
