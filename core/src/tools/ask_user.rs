//! `ask_user`: the model asks the user a question and waits for the answer (offered when
//! `approval.mode` is `ask` or `approval.ask_user` is set).

use super::requests::{Answer, Settled};
use super::{Tool, ToolContext, ToolDefinition, ToolError, parse_args};
use agentd_proto::RequestBody;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

/// The `ask_user` tool.
pub(crate) struct AskUser;

#[derive(Deserialize)]
struct Args {
    question: String,
    #[serde(default)]
    options: Vec<String>,
}

#[async_trait]
impl Tool for AskUser {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "ask_user".into(),
            description: "Ask the user a question and wait for the answer. Use it when a \
                decision is theirs to make or the task is ambiguous; do not use it for things \
                you can find out yourself. Offer options when there are a few clear choices."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "question": {"type": "string", "minLength": 1, "description": "The question, complete on its own."},
                    "options": {"type": "array", "items": {"type": "string"}, "maxItems": 10,
                        "description": "Suggested answers; the user may answer anything."}
                },
                "required": ["question"],
                "additionalProperties": false
            }),
        }
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let requests = ctx
            .requests
            .ok_or_else(|| ToolError("there is no user to ask in this session".into()))?;
        let body = RequestBody::Question {
            question: args.question,
            options: args.options,
        };
        match requests
            .raise(ctx.call_id, body, Vec::new(), ctx.cancel)
            .await
        {
            Settled::Answered(Answer::Question(answer)) => {
                Ok(format!("The user answered: {answer}"))
            }
            Settled::Answered(other) => Err(ToolError(format!("unexpected answer {other:?}"))),
            Settled::TimedOut(secs) => Err(ToolError(format!(
                "nobody answered within {secs} s. Go on with your best judgement and say what you assumed, or stop and explain what you need."
            ))),
            Settled::Aborted => Err(ToolError(
                "the question was withdrawn: the work was aborted".into(),
            )),
        }
    }
}
