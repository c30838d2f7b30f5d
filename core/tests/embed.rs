//! A host program embedding a session (spec 1.2) through agentd-core's public API alone: its
//! own provider and its own tool, the local environment, and the session's events. If this
//! needs anything the crate does not export, the library boundary has moved.

#![allow(clippy::unwrap_used)]

use agentd_core::{
    ByteStream, Delta, EnvPolicy, LocalExecutionEnvironment, Profile, Provider, ProviderError,
    Request, Response, Session, StopReason, Tool, ToolContext, ToolDefinition, ToolError,
};
use agentd_proto::{EventBody, ProviderKind, ToolCall, ToolCallId, WhenBusy};
use async_trait::async_trait;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A model that plays `replies` in order and keeps the tool names each request offered.
struct Scripted {
    replies: Mutex<VecDeque<Response>>,
    offered: Mutex<Vec<Vec<String>>>,
}

#[async_trait]
impl Provider for Scripted {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Anthropic
    }

    async fn open(&self, request: &Request<'_>) -> Result<ByteStream, ProviderError> {
        let names = request.tools.iter().map(|t| t.name.clone()).collect();
        self.offered.lock().unwrap().push(names);
        Ok(Box::pin(futures::stream::empty()))
    }

    async fn decode(
        &self,
        _body: ByteStream,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Response, ProviderError> {
        let reply = self.replies.lock().unwrap().pop_front().unwrap_or_default();
        if !reply.text.is_empty() {
            on_delta(Delta::TextStart);
            on_delta(Delta::Text(reply.text.clone()));
        }
        Ok(reply)
    }
}

/// The host's own tool: counts the words of its argument.
struct WordCount;

#[async_trait]
impl Tool for WordCount {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "word_count".into(),
            description: "Counts the words of a text.".into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            }),
        }
    }

    async fn execute(
        &self,
        args: serde_json::Value,
        _ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let text = args["text"].as_str().unwrap_or_default();
        Ok(format!("{} words", text.split_whitespace().count()))
    }
}

fn reply(text: &str, calls: Vec<ToolCall>) -> Response {
    Response {
        text: text.into(),
        stop_reason: Some(if calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        }),
        tool_calls: calls,
        ..Response::default()
    }
}

#[tokio::test]
async fn a_host_runs_a_session_with_its_own_provider_and_tool() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Arc::new(Scripted {
        replies: Mutex::new(VecDeque::from([
            reply(
                "",
                vec![ToolCall {
                    id: ToolCallId::from("call-1"),
                    name: "word_count".into(),
                    arguments: serde_json::json!({"text": "one two three"}),
                    signature: None,
                }],
            ),
            reply("It has three words.", vec![]),
        ])),
        offered: Mutex::default(),
    });
    let mut profile = Profile::named("anthropic").unwrap();
    profile.register_tool(Arc::new(WordCount)).unwrap();
    let env = Arc::new(LocalExecutionEnvironment::new(
        dir.path().to_owned(),
        EnvPolicy::InheritCore,
    ));
    let session = Session::builder(
        dir.path().to_owned(),
        profile,
        env,
        "scripted",
        provider.clone(),
        "any-model",
    )
    .title("embedded")
    .spawn();

    let mut events = session.subscribe(None).await.unwrap();
    session
        .submit("How many words?".into(), vec![], None, WhenBusy::Queue)
        .await
        .unwrap();

    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), events.live.recv())
            .await
            .expect("the session finished its input")
            .unwrap();
        let done = matches!(event.body, EventBody::ProcessingEnd { .. });
        seen.push(event);
        if done {
            break;
        }
    }
    let output = seen.iter().find_map(|e| match &e.body {
        EventBody::ToolCallEnd { output, .. } => output.clone(),
        _ => None,
    });
    assert_eq!(output.as_deref(), Some("3 words"), "events: {seen:#?}");
    let text: String = seen
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::AssistantTextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "It has three words.");
    // Seqs are the session's, in order, with nothing skipped.
    assert!(seen.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    let offered = provider.offered.lock().unwrap().clone();
    assert_eq!(offered.len(), 2, "one request per round");
    assert!(offered[0].iter().any(|n| n == "word_count"));
    assert_eq!(session.title(), Some("embedded"));
    session.close("done").await;
}

#[tokio::test]
async fn settings_are_checked_as_a_clients_are() {
    let dir = tempfile::tempdir().unwrap();
    let builder = || {
        Session::builder(
            dir.path().to_owned(),
            Profile::named("anthropic").unwrap(),
            Arc::new(LocalExecutionEnvironment::new(
                dir.path().to_owned(),
                EnvPolicy::InheritCore,
            )),
            "scripted",
            Arc::new(Scripted {
                replies: Mutex::default(),
                offered: Mutex::default(),
            }),
            "any-model",
        )
    };
    let Err(e) = builder().configure(|c| c.provider = "elsewhere".into()) else {
        panic!("settings naming another provider were taken");
    };
    assert!(e.to_string().contains("elsewhere"), "{e}");
    let Err(e) = builder().configure(|c| c.max_output_tokens = 0) else {
        panic!("max_output_tokens 0 was taken");
    };
    assert!(e.to_string().contains("max_output_tokens"), "{e}");
    let session = builder().configure(|c| c.max_turns = 3).unwrap().spawn();
    assert_eq!(session.config().max_turns, 3);
    assert_eq!(session.config().model, "any-model");
    session.close("done").await;
}
