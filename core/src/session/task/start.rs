//! Building a session's task from its spec: the initial state, its first events (or its
//! restoration), the environment context captured in the background, and the supervised task.

use super::idempotency::Submitted;
use super::supervise::{panic_message, supervise};
use super::{Core, Task};
use crate::profile::EnvironmentContext;
use crate::session::events::EventLog;
use crate::session::view::View;
use crate::session::{Command, Info, SessionSpec};
use crate::store::Writer;
use crate::tools::session_tools;
use agentd_proto::{DaemonEvent, EventBody, SessionState, Usage};
use futures::FutureExt;
use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{OnceCell, broadcast, mpsc, watch};

/// Builds the session, emits its first events, and starts its supervised task.
pub(in crate::session) fn start(
    spec: SessionSpec,
    daemon_events: Option<broadcast::Sender<DaemonEvent>>,
    (me, commands): (mpsc::WeakSender<Command>, mpsc::Receiver<Command>),
    tasks: &tokio_util::task::TaskTracker,
) -> (Arc<Info>, watch::Receiver<View>) {
    let restored = spec.restored;
    let info = Arc::new(Info {
        id: spec.id.clone(),
        cwd: spec.cwd,
        title: spec.title,
        profile: spec.profile,
        instructions: spec.instructions,
        read_only: spec.read_only,
        created: restored
            .as_ref()
            .map_or_else(crate::session::now, |r| r.record.created.clone()),
        forked_from: spec.forked_from,
        parent: spec.parent,
        env: spec.env,
        environment: spec.environment,
        worktree: spec.worktree,
        catalog: spec.catalog,
        checkpoints: spec.checkpoints,
    });
    let (last_seq, updated) = restored.as_ref().map_or((0, crate::session::now()), |r| {
        (r.last_seq, r.record.updated.clone())
    });
    let writer = spec.files.map(|files| {
        let reader = restored
            .as_ref()
            .map_or_else(|| files.reader(), |r| r.reader.clone());
        Writer::start(files, reader, last_seq)
    });
    let log = EventLog::new(spec.id, writer, last_seq, updated);
    let mut config = spec.config;
    // A read-only session's commands write nowhere either (records from before sandboxes
    // existed included).
    if spec.read_only {
        config.sandbox = agentd_proto::SandboxMode::ReadOnly;
    }
    // A config validated at creation; only a record edited by hand can fail here.
    let (tools, tools_warning) = match session_tools(&info.base_tools(), &config) {
        Ok(tools) => (tools, None),
        Err(e) => (
            info.base_tools().into_owned(),
            Some(format!("the session's client tools are not offered: {e}")),
        ),
    };
    // The servers' states go to the session's stream like a subagent's report; a session
    // too busy to take them (its queue full) misses a state, never waits for one.
    let mcp = spec
        .mcp
        .filter(|_| !restored_closed(&restored))
        .map(|launcher| {
            let emit: crate::mcp::Emit = Arc::new(move |body| {
                if let Some(session) = me.upgrade() {
                    let _ = session.try_send(Command::Emit(body));
                }
            });
            let read_only = config.sandbox == agentd_proto::SandboxMode::ReadOnly;
            crate::mcp::Mcp::start(launcher, &config.mcp_servers, read_only, emit, tasks)
        });
    let config = Arc::new(config);
    let mut core = Core {
        info: info.clone(),
        daemon_events,
        state: SessionState::Idle,
        closing: None,
        steering: VecDeque::new(),
        follow_up: VecDeque::new(),
        turn: None,
        next: None,
        submitted: Submitted::default(),
        last_end: None,
        last_error: None,
        current_input: None,
        view: watch::channel(placeholder_view(config.clone())).0,
        config,
        usage: Usage::default(),
        history: spec.history,
        log,
        storage_error: None,
        aborts: Vec::new(),
        closes: Vec::new(),
        tools: Arc::new(tools),
        pending: Vec::new(),
        settled: VecDeque::new(),
        active_skills: Default::default(),
        redo: restored.as_ref().and_then(|r| r.record.redo.clone()),
    };
    if let Some(message) = tools_warning {
        core.emit(EventBody::warning(message));
    }
    let fresh = restored.is_none();
    match restored {
        None => {
            core.emit(EventBody::SessionStart {
                cwd: info.cwd.display().to_string(),
                profile: info.profile.id,
                config: Box::new((*core.config).clone()),
                title: info.title.clone(),
            });
            for warning in &info.catalog.warnings {
                core.emit(EventBody::warning(format!(
                    "skills and commands: {warning}"
                )));
            }
            // A fork's copied history.
            if let Some(writer) = core.log.writer() {
                for entry in core.history.branch() {
                    writer.entry(&entry, true);
                }
            }
        }
        Some(r) => core.restore(r),
    }
    core.publish();
    core.save();
    let view = core.view.subscribe();
    let context = Arc::new(OnceCell::new());
    let task = Arc::new(Task {
        info: info.clone(),
        providers: spec.providers,
        retry: spec.retry,
        prices: spec.prices,
        family: spec.family,
        cancel: spec.cancel,
        context: context.clone(),
        mcp,
        hooks: spec.hooks,
        core: Mutex::new(core),
    });
    if task.core().state != SessionState::Closed {
        let env = info.env.clone();
        let docs = info.profile.doc_names;
        tasks.spawn(async move {
            context.get_or_init(|| capture(env, docs)).await;
        });
    }
    // A new session is about to get its first input: its sandbox is built while the
    // client sends it, as its context is captured.
    if fresh {
        task.prepare_sandbox();
    }
    tasks.spawn(supervise(task, commands));
    (info, view)
}

/// Whether a restored session was closed (it starts nothing).
fn restored_closed(restored: &Option<crate::session::Restored>) -> bool {
    restored
        .as_ref()
        .is_some_and(|r| r.record.state == SessionState::Closed)
}

/// Captures the environment context; a panic in it (a bug) leaves the minimal context, so
/// the session still works.
pub(super) async fn capture(
    env: Arc<dyn crate::exec::ExecutionEnvironment>,
    docs: &'static [&'static str],
) -> EnvironmentContext {
    match AssertUnwindSafe(EnvironmentContext::capture(env.as_ref(), docs))
        .catch_unwind()
        .await
    {
        Ok(context) => context,
        Err(panic) => {
            tracing::error!(
                "capturing the environment context crashed: {}",
                panic_message(panic.as_ref())
            );
            EnvironmentContext::minimal(env.as_ref())
        }
    }
}

/// A view for the moment before the first real one is published.
fn placeholder_view(config: Arc<agentd_proto::SessionConfig>) -> View {
    View {
        state: SessionState::Idle,
        config,
        usage: Usage::default(),
        queue: Arc::default(),
        last_seq: 0,
        updated: String::new(),
        leaf: None,
        branch_len: 0,
        history_len: 0,
        last_end: None,
        storage_failing: false,
        active: Instant::now(),
        pending: Arc::default(),
        active_skills: Arc::default(),
        redo: None,
    }
}
