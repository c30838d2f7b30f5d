//! The library boundary (spec 1.2): a host program builds a session from a profile (with its
//! own tools registered on top, spec 3.7), an execution environment and a provider, submits
//! input and reads the events, with no server involved.

use super::*;
use crate::exec::{EnvPolicy, LocalExecutionEnvironment};
use crate::llm::{ByteStream, Delta, Provider, Response};
use crate::tools::{Tool, ToolContext, ToolDefinition, ToolError};
use agentd_proto::{ProcessingEndReason, ProviderKind, ToolCall, ToolCallId};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::json;

/// A provider that answers from a script, for hosts that test their own tools.
pub(super) struct Scripted(pub(super) std::sync::Mutex<Vec<Response>>);

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

pub(super) fn call(id: &str, name: &str, arguments: serde_json::Value) -> Response {
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

/// A session in `dir` with `profile` and `providers` (the config names "scripted").
pub(super) fn spec(
    dir: &std::path::Path,
    profile: crate::profile::Profile,
    providers: ProviderSet,
) -> SessionSpec {
    SessionSpec {
        id: SessionId::from("lib-1"),
        cwd: dir.to_owned(),
        title: None,
        profile,
        env: Arc::new(LocalExecutionEnvironment::new(
            dir.to_owned(),
            EnvPolicy::InheritCore,
        )),
        environment: agentd_proto::Environment::Local,
        worktree: None,
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
        mcp: None,
        hooks: None,
        catalog: Arc::default(),
        checkpoints: Err("not stored".into()),
        family: None,
        cancel: tokio_util::sync::CancellationToken::new(),
    }
}

/// A session in `dir` with `profile` whose provider answers `script`.
fn scripted_session(
    dir: &std::path::Path,
    profile: crate::profile::Profile,
    script: Vec<Response>,
) -> Arc<Session> {
    let providers = ProviderSet::default();
    providers.insert(
        "scripted",
        Arc::new(Scripted(std::sync::Mutex::new(script))),
    );
    Session::spawn(
        spec(dir, profile, providers),
        None,
        &tokio_util::task::TaskTracker::new(),
    )
}

#[tokio::test]
async fn a_host_runs_a_session_with_its_own_tools() {
    let dir = tempfile::tempdir().unwrap();
    let mut profile = crate::profile::Profile::named(agentd_proto::ProfileId::Anthropic);
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
    let session = scripted_session(dir.path(), profile, script);
    let mut events = session.subscribe(Some(0)).await.unwrap().live;
    session
        .submit("test it".into(), Vec::new(), None, WhenBusy::Queue)
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

/// Calls of one response run concurrently, and all of them start before any ends, even when
/// the first finishes without ever waiting (as a fast command can on a loaded machine).
#[tokio::test]
async fn concurrent_calls_all_start_before_any_ends() {
    let dir = tempfile::tempdir().unwrap();
    let mut profile = crate::profile::Profile::named(agentd_proto::ProfileId::Anthropic);
    assert!(profile.supports_parallel_tool_calls);
    profile.tools.register(Arc::new(RunTests)).unwrap();
    let mut both = call("t1", "run_tests", json!({"filter": "a"}));
    both.tool_calls
        .extend(call("t2", "run_tests", json!({"filter": "b"})).tool_calls);
    let script = vec![
        both,
        Response {
            text: "done".into(),
            ..Response::default()
        },
    ];
    let session = scripted_session(dir.path(), profile, script);
    let order: Vec<String> = run(&session, "test both")
        .await
        .iter()
        .filter_map(|e| match e {
            EventBody::ToolCallStart { call_id, .. } => Some(format!("start {}", call_id.0)),
            EventBody::ToolCallEnd { call_id, .. } => Some(format!("end {}", call_id.0)),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["start t1", "start t2", "end t1", "end t2"]);
}

/// Answers "ok", except that it panics where a bug would: in its first answer, and on every
/// request without tools (a compaction's summary request).
struct Panicky(std::sync::atomic::AtomicUsize);

#[async_trait]
impl Provider for Panicky {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Anthropic
    }
    async fn open(
        &self,
        request: &crate::llm::Request<'_>,
    ) -> Result<ByteStream, crate::llm::Error> {
        assert!(!request.tools.is_empty(), "a bug in the summary request");
        Ok(futures::stream::empty().boxed())
    }
    async fn decode(
        &self,
        _: ByteStream,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Response, crate::llm::Error> {
        if self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0 {
            panic!("a bug in the decoder");
        }
        on_delta(Delta::TextStart);
        on_delta(Delta::Text("ok".into()));
        Ok(Response {
            text: "ok".into(),
            stop_reason: Some(crate::llm::StopReason::EndTurn),
            ..Response::default()
        })
    }
}

/// Submits `text` and returns the events up to its `processing_end`.
async fn run(session: &Session, text: &str) -> Vec<EventBody> {
    let mut live = session.subscribe(None).await.unwrap().live;
    session
        .submit(text.into(), Vec::new(), None, WhenBusy::Queue)
        .await
        .unwrap();
    let mut events = Vec::new();
    loop {
        let body = live.recv().await.unwrap().body.clone();
        let end = matches!(body, EventBody::ProcessingEnd { .. });
        events.push(body);
        if end {
            return events;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_the_loop_or_a_compaction_is_an_error_and_the_session_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let providers = ProviderSet::default();
    providers.insert(
        "scripted",
        Arc::new(Panicky(std::sync::atomic::AtomicUsize::new(0))),
    );
    let mut spec = spec(
        dir.path(),
        crate::profile::Profile::named(agentd_proto::ProfileId::Anthropic),
        providers,
    );
    spec.config.context_window_tokens = 1000;
    spec.config.auto_compact_percent = 0;
    let session = Session::spawn(spec, None, &tokio_util::task::TaskTracker::new());

    let events = run(&session, "first").await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, EventBody::Error { message, .. }
            if message.contains("internal error") && message.contains("a bug in the decoder"))),
        "{events:?}"
    );
    assert!(matches!(
        events.last(),
        Some(EventBody::ProcessingEnd {
            reason: ProcessingEndReason::Error,
            input_id: Some(_)
        })
    ));
    assert_eq!(session.state(), SessionState::Idle);

    for n in 0..3 {
        let events = run(&session, &format!("input {n} {}", "x".repeat(2000))).await;
        assert!(matches!(
            events.last(),
            Some(EventBody::ProcessingEnd {
                reason: ProcessingEndReason::Completed,
                input_id: Some(_)
            })
        ));
    }
    let compacted = session.compact().await;
    assert!(
        matches!(&compacted, Err(Error::Internal(m)) if m.contains("a bug in the summary request")),
        "{compacted:?}"
    );
    assert_eq!(session.state(), SessionState::Idle);
    let events = run(&session, "after").await;
    assert!(matches!(
        events.last(),
        Some(EventBody::ProcessingEnd {
            reason: ProcessingEndReason::Completed,
            input_id: Some(_)
        })
    ));
}
