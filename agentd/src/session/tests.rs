//! The library boundary (spec 1.2): a host program builds a session from a profile (with its
//! own tools registered on top, spec 3.7), an execution environment and a provider, submits
//! input and reads the events, with no server involved.

use super::*;
use crate::exec::{EnvPolicy, LocalExecutionEnvironment};
use crate::llm::{ByteStream, Delta, Provider, Response};
use crate::tools::{Tool, ToolContext, ToolDefinition, ToolError};
use agentd_proto::{ProviderKind, ToolCall, ToolCallId};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::json;

/// A provider that answers from a script, for hosts that test their own tools.
struct Scripted(std::sync::Mutex<Vec<Response>>);

#[async_trait]
impl Provider for Scripted {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Anthropic
    }
    async fn open(&self, _: &crate::llm::Request<'_>) -> Result<ByteStream, crate::llm::Error> {
        Ok(futures::stream::empty().boxed())
    }
    async fn decode(
        &self,
        _: ByteStream,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Response, crate::llm::Error> {
        let next = self.0.lock().unwrap().remove(0);
        if !next.text.is_empty() {
            on_delta(Delta::TextStart);
            on_delta(Delta::Text(next.text.clone()));
        }
        Ok(next)
    }
}

/// A host's own tool.
struct RunTests;

#[async_trait]
impl Tool for RunTests {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "run_tests".into(),
            description: "Run the project's test suite".into(),
            parameters: json!({"type": "object", "properties": {"filter": {"type": "string"}}}),
        }
    }
    async fn execute(
        &self,
        args: serde_json::Value,
        _: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        Ok(format!(
            "3 passed (filter: {})",
            args["filter"].as_str().unwrap_or("none")
        ))
    }
}

/// Replaces the profile's shell: latest registration wins.
struct NoShell;

#[async_trait]
impl Tool for NoShell {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "shell".into(),
            description: "disabled".into(),
            parameters: json!({"type": "object"}),
        }
    }
    async fn execute(
        &self,
        _: serde_json::Value,
        _: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        Err(ToolError("the shell is disabled in this host".into()))
    }
}

fn call(id: &str, name: &str, arguments: serde_json::Value) -> Response {
    Response {
        tool_calls: vec![ToolCall {
            id: ToolCallId(id.into()),
            name: name.into(),
            arguments,
            signature: None,
        }],
        ..Response::default()
    }
}

#[tokio::test]
async fn a_host_runs_a_session_with_its_own_tools() {
    let dir = tempfile::tempdir().unwrap();
    let mut profile = crate::profile::Profile::named("anthropic").unwrap();
    profile
        .tools
        .register(std::sync::Arc::new(RunTests))
        .unwrap();
    profile
        .tools
        .register(std::sync::Arc::new(NoShell))
        .unwrap();
    let script = vec![
        call("t1", "run_tests", json!({"filter": "unit"})),
        call("t2", "shell", json!({"command": "rm -rf /"})),
        Response {
            text: "All green.".into(),
            ..Response::default()
        },
    ];
    let mut providers = ProviderSet::default();
    providers.insert(
        "scripted",
        Arc::new(Scripted(std::sync::Mutex::new(script))),
    );
    let spec = SessionSpec {
        id: SessionId::from("lib-1"),
        cwd: dir.path().to_owned(),
        title: None,
        profile,
        env: Arc::new(LocalExecutionEnvironment::new(
            dir.path().to_owned(),
            EnvPolicy::InheritCore,
        )),
        providers,
        config: crate::config::default_session_config("scripted", "any-model"),
        instructions: None,
        retry: RetryPolicy::default(),
        prices: Arc::default(),
        read_only: false,
        files: None,
        history: super::History::default(),
        forked_from: None,
        restored: None,
        parent: None,
        registry: None,
        cancel: tokio_util::sync::CancellationToken::new(),
    };
    let session = Session::spawn(spec, None, &tokio_util::task::TaskTracker::new());
    let mut events = session.subscribe(Some(0)).await.unwrap().live;
    session
        .submit("test it".into(), None, WhenBusy::Queue)
        .await
        .unwrap();
    let mut ends = Vec::new();
    loop {
        let event = events.recv().await.unwrap();
        match &event.body {
            EventBody::ToolCallEnd {
                tool_name,
                output,
                error,
                ..
            } => ends.push((tool_name.clone(), output.clone(), error.clone())),
            EventBody::ProcessingEnd { .. } => break,
            _ => {}
        }
    }
    assert_eq!(
        ends,
        vec![
            (
                "run_tests".to_owned(),
                Some("3 passed (filter: unit)".to_owned()),
                None
            ),
            (
                "shell".to_owned(),
                None,
                Some("Tool error (shell): the shell is disabled in this host".to_owned())
            ),
        ]
    );
    assert!(dir.path().exists());
    assert_eq!(
        session.history().await.unwrap().len(),
        6,
        "user, assistant, results, assistant, results, assistant"
    );
}
