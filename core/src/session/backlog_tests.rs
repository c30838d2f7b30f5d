//! The event path under a disk that stalls: the agent loop waits for the writer
//! asynchronously, the session keeps answering, memory stays bounded, and nothing is lost once
//! the disk resumes, on either runtime flavor (a current-thread runtime is what a host
//! embedding sessions may well run).

use super::tests::{Scripted, call, spec};
use super::*;
use crate::llm::{ByteStream, Delta, Provider, Response, StopReason};
use crate::store::{BACKLOG_LINES, Store};
use crate::tools::{Tool, ToolContext, ToolDefinition, ToolError};
use agentd_proto::ProviderKind;
use async_trait::async_trait;
use futures::StreamExt;
use std::future::Future;

/// Deltas of the one long answer: three times what the backlog holds.
const CHUNKS: usize = 3 * BACKLOG_LINES;
/// Events and entries besides the deltas while the backlog fills (start, state, input...).
const SLACK: u64 = 16;

/// Answers with one long text, a delta per chunk of its byte stream, as a real provider
/// decodes a server's stream.
struct Chatty;

#[async_trait]
impl Provider for Chatty {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Anthropic
    }
    async fn open(&self, _: &crate::llm::Request<'_>) -> Result<ByteStream, crate::llm::Error> {
        let chunks = (0..CHUNKS).map(|n| Ok(bytes::Bytes::from(format!("{n} "))));
        Ok(futures::stream::iter(chunks).boxed())
    }
    async fn decode(
        &self,
        mut body: ByteStream,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Response, crate::llm::Error> {
        on_delta(Delta::TextStart);
        let mut text = String::new();
        while let Some(chunk) = body.next().await {
            let chunk = String::from_utf8_lossy(&chunk?).into_owned();
            text.push_str(&chunk);
            on_delta(Delta::Text(chunk));
        }
        Ok(Response {
            text,
            stop_reason: Some(StopReason::EndTurn),
            ..Response::default()
        })
    }
}

/// A host's tool that streams a lot of output at once, as a command can.
struct Loud;

/// Bytes `Loud` streams, in deltas of 100.
const LOUD_BYTES: usize = 3 * 1024 * 1024;

#[async_trait]
impl Tool for Loud {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "loud".into(),
            description: "Prints a lot".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }
    async fn execute(
        &self,
        _: serde_json::Value,
        ctx: &ToolContext<'_>,
    ) -> Result<String, ToolError> {
        let line = format!("{}\n", "x".repeat(99));
        for _ in 0..LOUD_BYTES / line.len() {
            (ctx.output)(agentd_proto::OutputStream::Stdout, &line);
        }
        Ok("printed".into())
    }
}

/// `future`'s output; a session that stops answering fails the test instead of hanging it.
async fn answered<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(60), future)
        .await
        .unwrap_or_else(|_| panic!("the session stopped answering: {what}"))
}

async fn a_stalled_disk_holds_the_loop_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state")).unwrap();
    let id = SessionId::from("lib-1");
    let (disk, held) = watch::channel(false);
    let providers = ProviderSet::default();
    providers.insert("scripted", Arc::new(Chatty));
    let mut spec = spec(
        dir.path(),
        crate::profile::Profile::named("anthropic").unwrap(),
        providers,
    );
    spec.files = Some(store.create(&id).unwrap().held(held));
    let session = Session::spawn(spec, None, &tokio_util::task::TaskTracker::new());
    // Its reply waits for the disk.
    let submitted = tokio::spawn({
        let session = session.clone();
        async move {
            session
                .submit("talk".into(), Vec::new(), None, WhenBusy::Queue)
                .await
        }
    });

    // The loop fills the backlog...
    let mut view = session.view.clone();
    answered(
        "filling the backlog",
        view.wait_for(|v| v.last_seq >= BACKLOG_LINES as u64 - SLACK),
    )
    .await
    .unwrap();
    // ...and the session still answers while the disk is held,
    for _ in 0..50 {
        answered("history", session.history()).await.unwrap();
    }
    let subscription = answered("subscribe", session.subscribe(Some(0)))
        .await
        .unwrap();
    assert_eq!(session.state(), SessionState::Processing);
    // with the loop stopped at the bound: memory stays bounded.
    let held_at = session.view().last_seq;
    assert!(
        held_at <= BACKLOG_LINES as u64 + SLACK,
        "{held_at} events emitted with the disk held; the backlog holds {BACKLOG_LINES}"
    );
    assert_eq!(subscription.replay.len() as u64, held_at);

    // The disk resumes: the work completes and every event is in the journal, in order.
    disk.send_replace(true);
    answered("the submit", submitted).await.unwrap().unwrap();
    answered("the work", session.settled()).await;
    answered("saving", session.saved()).await;
    let last = session.view().last_seq;
    let stored = tokio::task::spawn_blocking({
        let reader = store.files(&id).reader();
        move || reader.read(0, last)
    })
    .await
    .unwrap()
    .unwrap();
    let seqs: Vec<u64> = stored.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=last).collect::<Vec<_>>());
    let deltas = stored
        .iter()
        .filter(|e| matches!(e.body, EventBody::AssistantTextDelta { .. }))
        .count();
    assert_eq!(deltas, CHUNKS);
    assert!(matches!(
        stored.iter().rev().find_map(|e| match &e.body {
            EventBody::ProcessingEnd { reason, .. } => Some(*reason),
            _ => None,
        }),
        Some(agentd_proto::ProcessingEndReason::Completed)
    ));
}

/// A tool's output outruns a held disk: the output is held back (up to a bound, the rest
/// dropped and counted) instead of outgrowing the backlog, and the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_disk_holds_back_tool_output() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state")).unwrap();
    let id = SessionId::from("lib-1");
    let (disk, held) = watch::channel(false);
    let providers = ProviderSet::default();
    let script = vec![
        call("t1", "loud", serde_json::json!({})),
        Response {
            text: "done".into(),
            ..Response::default()
        },
    ];
    providers.insert(
        "scripted",
        Arc::new(Scripted(std::sync::Mutex::new(script))),
    );
    let mut profile = crate::profile::Profile::named("anthropic").unwrap();
    profile.tools.register(Arc::new(Loud)).unwrap();
    let mut spec = spec(dir.path(), profile, providers);
    spec.files = Some(store.create(&id).unwrap().held(held));
    let session = Session::spawn(spec, None, &tokio_util::task::TaskTracker::new());
    let mut live = session.subscribe(None).await.unwrap().live;
    let submitted = tokio::spawn({
        let session = session.clone();
        async move {
            session
                .submit("print".into(), Vec::new(), None, WhenBusy::Queue)
                .await
        }
    });
    // The call ends with the disk held; the loop then waits.
    let mut streamed = 0;
    loop {
        let event = answered("the call", live.recv()).await.unwrap();
        match &event.body {
            EventBody::ToolCallOutputDelta { delta, .. } => streamed += delta.len(),
            EventBody::ToolCallEnd { .. } => break,
            _ => {}
        }
    }
    answered("history", session.history()).await.unwrap();
    let held_at = session.view().last_seq;
    assert!(
        held_at <= BACKLOG_LINES as u64 + SLACK,
        "{held_at} events emitted with the disk held; the backlog holds {BACKLOG_LINES}"
    );
    assert!(streamed < LOUD_BYTES, "{streamed} bytes streamed");
    disk.send_replace(true);
    answered("the submit", submitted).await.unwrap().unwrap();
    answered("the work", session.settled()).await;
    let history = session.history().await.unwrap();
    assert!(matches!(
        &history.last().unwrap().turn,
        agentd_proto::Turn::Assistant { text, .. } if text == "done"
    ));
}

#[tokio::test(flavor = "current_thread")]
async fn a_stalled_disk_on_a_current_thread_runtime() {
    a_stalled_disk_holds_the_loop_and_loses_nothing().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_disk_on_a_multi_thread_runtime() {
    a_stalled_disk_holds_the_loop_and_loses_nothing().await;
}
