//! `agentctl mcp-server`: agentd as a Model Context Protocol server on stdin/stdout, with the
//! official Rust SDK (`rmcp`), so Claude Code, Cursor, codex or any MCP client can hand work
//! to agentd sessions. Only MCP goes to stdout.
//!
//! Three tools: `session_start` creates a session, submits the prompt and answers with the
//! model's final text and the session id; `session_reply` does the same for an existing
//! session (or answers the question its model asked); `session_list` lists the sessions. The
//! sessions are ordinary agentd sessions: they stay in the daemon, and `agentctl` or an editor
//! opens them. Each call follows its session's events over the daemon's socket (`work`),
//! reports progress when the client asked for it, and aborts the session's work when the
//! client cancels the call (or goes away while it runs).
//!
//! Approvals: a session started here gets the configured approval policy and sandbox, as any
//! session; the tools take neither (codex's `codex` tool does), so a calling model cannot pick
//! its own permissions. An approval it raises is for a person, not for the client's model, and
//! an MCP client has no common way to show that person a command or a diff (codex's `codex
//! mcp-server` uses elicitation forms, which many clients do not implement). So the call
//! answers at once with status `awaiting_approval`, the request and how to answer it
//! (`agentctl respond`, or an editor); the session waits in the daemon until a person answers
//! or its `approval.timeout_ms` denies the call.
//!
//! `answer` renders results and failures (every failure is a tool error, never a crash),
//! `link` holds the connection to the daemon, `types` the tools' arguments and results.

mod answer;
mod link;
mod types;
mod work;

use crate::client::Connection;
use crate::cmd::stream::EventStream;
use crate::error::{self, Failure, Kind};
use agentd_proto::methods as m;
use agentd_proto::{
    CreateParams, ErrorKind, InputId, ListParams, MAX_REQUEST_BYTES, RequestBody, RespondParams,
    SessionId, SessionParams, SessionSnapshot, SubmitParams, WhenBusy,
};
use link::Link;
use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;
use types::{ListArgs, ReplyArgs, RunResult, SessionItem, SessionList, StartArgs};
use work::{Follow, Progress, Target};

/// Tool calls running at once; more are refused until one ends (each follows a session).
const MAX_CALLS: usize = 32;

/// `session_list`'s default and largest `limit`.
const LIST_DEFAULT: u32 = 50;
const LIST_MAX: u32 = 200;

/// How long calls cancelled by the client's leaving get to abort their work before exit.
const DRAIN: Duration = Duration::from_secs(10);

/// Serves MCP on stdin/stdout until the client closes stdin.
pub(crate) async fn run(socket: Option<&Path>) -> error::Result<u8> {
    let server = Server::new(socket.map(Path::to_owned));
    let tracker = server.tracker.clone();
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    // A line longer than the daemon takes could not be sent on anyway: dropped unbuffered.
    let transport =
        AsyncRwTransport::new_server(stdin, stdout).with_max_line_length(MAX_REQUEST_BYTES);
    let service = server
        .serve(transport)
        .await
        .map_err(|e| Failure::failed(format!("MCP connection: {e}")))?;
    let _ = service.waiting().await;
    // The client left: calls still running were cancelled, and abort their sessions' work.
    tracker.close();
    let _ = tokio::time::timeout(DRAIN, tracker.wait()).await;
    Ok(0)
}

#[derive(Clone)]
struct Server {
    /// The daemon, reached at the first call.
    link: Arc<Link>,
    /// The tool calls in flight, waited for at exit.
    tracker: TaskTracker,
    /// A permit per call in flight, [`MAX_CALLS`] in all.
    calls: Arc<Semaphore>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Server {
    fn new(socket: Option<PathBuf>) -> Self {
        Self {
            link: Arc::new(Link::new(socket)),
            tracker: TaskTracker::new(),
            calls: Arc::new(Semaphore::new(MAX_CALLS)),
            tool_router: Self::tool_router(),
        }
    }

    /// Start an agentd session on a task and wait for its answer.
    #[tool(
        description = "Start an agentd coding-agent session: it works on the prompt in `cwd` \
            (reading, editing, searching and running commands there) and this call answers \
            with its final text and the session id. Continue it with session_reply. The \
            session stays in agentd: `agentctl` or an editor can open it.",
        output_schema = schema_for_output::<RunResult>(),
        annotations(read_only_hint = false, destructive_hint = true, open_world_hint = true)
    )]
    async fn session_start(
        &self,
        Parameters(args): Parameters<StartArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        self.call(self.start(args, &ctx), answer::run).await
    }

    /// Continue an agentd session.
    #[tool(
        description = "Send the next prompt to an agentd session (by the session_id \
            session_start or session_list gave) and wait for its answer; when the session's \
            model asked a question, the prompt is the answer.",
        output_schema = schema_for_output::<RunResult>(),
        annotations(read_only_hint = false, destructive_hint = true, open_world_hint = true)
    )]
    async fn session_reply(
        &self,
        Parameters(args): Parameters<ReplyArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        self.call(self.reply(args, &ctx), answer::run).await
    }

    /// List agentd's sessions.
    #[tool(
        description = "List agentd's sessions, newest first: id, title, working directory, \
            state and last update.",
        output_schema = schema_for_output::<SessionList>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn session_list(&self, Parameters(args): Parameters<ListArgs>) -> CallToolResult {
        self.call(self.list(args), answer::list).await
    }
}

#[tool_handler(
    router = self.tool_router,
    name = "agentd",
    instructions = "agentd runs coding-agent sessions in a per-user daemon. session_start \
        hands a task to a new session and answers with its final text and session_id; \
        session_reply continues a session; session_list shows them. Sessions keep living in \
        agentd: the user can open them with `agentctl` or an editor. A session that waits \
        for a person's approval says so in its answer (status awaiting_approval): tell the \
        user, who answers it with `agentctl respond`."
)]
impl ServerHandler for Server {}

impl Server {
    /// Runs one call's `work`, tracked for exit and bounded in number; its failure is a tool
    /// error.
    async fn call<T>(
        &self,
        work: impl Future<Output = error::Result<T>>,
        render: fn(&T) -> CallToolResult,
    ) -> CallToolResult {
        let Ok(_permit) = self.calls.try_acquire() else {
            return answer::failure(&Failure::failed(format!(
                "agentd's MCP server runs at most {MAX_CALLS} calls at once; wait for one to end"
            )));
        };
        match self.tracker.track_future(work).await {
            Ok(value) => render(&value),
            Err(failure) => answer::failure(&failure),
        }
    }

    async fn start(
        &self,
        args: StartArgs,
        ctx: &RequestContext<RoleServer>,
    ) -> error::Result<RunResult> {
        let prompt = nonempty(args.prompt)?;
        let cwd = working_dir(args.cwd.as_deref())?;
        let conn = self.link.get().await?;
        let snapshot = conn
            .call::<m::SessionCreate>(CreateParams {
                cwd: cwd.display().to_string(),
                provider: args.provider,
                model: args.model,
                title: Some(title(&prompt)),
                ..CreateParams::default()
            })
            .await?;
        let session_id = snapshot.session_id.clone();
        let follow = follow(&conn, &snapshot, ctx).await?;
        let input = submit(&conn, &session_id, prompt).await?;
        follow.run(Target::Input(input)).await
    }

    async fn reply(
        &self,
        args: ReplyArgs,
        ctx: &RequestContext<RoleServer>,
    ) -> error::Result<RunResult> {
        let prompt = nonempty(args.prompt)?;
        let conn = self.link.get().await?;
        let session_id = SessionId::from(args.session_id.as_str());
        let snapshot = conn
            .call::<m::SessionGet>(SessionParams {
                session_id: session_id.clone(),
            })
            .await?;
        let question = snapshot.pending.iter().find_map(|p| match p.body {
            RequestBody::Question { .. } => Some(p.request_id.clone()),
            _ => None,
        });
        if question.is_none() && snapshot.state.is_working() {
            return Err(busy(&snapshot));
        }
        let follow = follow(&conn, &snapshot, ctx).await?;
        if let Some(request_id) = question {
            conn.call::<m::SessionRespond>(RespondParams {
                session_id,
                request_id,
                decision: None,
                message: None,
                answer: Some(prompt),
                output: None,
                is_error: None,
            })
            .await?;
            return follow.run(Target::Current).await;
        }
        let input = submit(&conn, &session_id, prompt)
            .await
            .map_err(|f| match f.kind {
                Kind::Daemon(ErrorKind::SessionBusy) => busy(&snapshot),
                _ => f,
            })?;
        follow.run(Target::Input(input)).await
    }

    async fn list(&self, args: ListArgs) -> error::Result<SessionList> {
        let limit = args.limit.unwrap_or(LIST_DEFAULT);
        if !(1..=LIST_MAX).contains(&limit) {
            return Err(Failure::usage(format!(
                "limit must be 1 to {LIST_MAX}, not {limit}"
            )));
        }
        let cwd = match args.cwd {
            Some(cwd) => Some(working_dir(Some(&cwd))?.display().to_string()),
            None => None,
        };
        let conn = self.link.get().await?;
        let list = conn
            .call::<m::SessionList>(ListParams { state: None, cwd })
            .await?;
        // Subagents are their parent's business, not sessions to continue by themselves.
        let sessions: Vec<_> = list
            .sessions
            .into_iter()
            .filter(|s| s.parent_id.is_none())
            .collect();
        Ok(SessionList {
            total: sessions.len(),
            sessions: sessions
                .into_iter()
                .take(limit as usize)
                .map(|s| SessionItem {
                    session_id: s.session_id.to_string(),
                    title: s.title,
                    cwd: s.cwd,
                    state: s.state,
                    updated: s.updated,
                })
                .collect(),
        })
    }
}

/// Subscribes to the session's events after `snapshot`, before anything is submitted.
async fn follow<'c>(
    conn: &'c Connection,
    snapshot: &SessionSnapshot,
    ctx: &RequestContext<RoleServer>,
) -> error::Result<Follow<'c>> {
    let session_id = snapshot.session_id.clone();
    // `json`: resubscribing after `lagged` is not announced on stderr.
    let stream = EventStream::open(conn, session_id.clone(), snapshot.last_seq, true).await?;
    Ok(Follow {
        conn,
        session_id,
        stream,
        progress: Progress::of(ctx),
        cancelled: ctx.ct.clone(),
    })
}

/// Submits `prompt`, refused while the session works: queued behind other work, the call
/// would wait on another client's input, and cancelling it could not take it back alone.
async fn submit(
    conn: &Connection,
    session_id: &SessionId,
    prompt: String,
) -> error::Result<InputId> {
    let submitted = conn
        .call::<m::SessionSubmit>(SubmitParams {
            session_id: session_id.clone(),
            text: prompt,
            images: Vec::new(),
            client_input_id: None,
            when_busy: Some(WhenBusy::Reject),
        })
        .await?;
    Ok(submitted.input_id)
}

/// Why `session_reply` cannot submit to a session that works now.
fn busy(snapshot: &SessionSnapshot) -> Failure {
    let id = &snapshot.session_id;
    let approvals: Vec<String> = snapshot
        .pending
        .iter()
        .filter_map(|p| match &p.body {
            RequestBody::Approval { tool, .. } => Some(format!(
                "`agentctl respond {id} {} allow|deny` ({tool})",
                p.request_id
            )),
            _ => None,
        })
        .collect();
    let message = if approvals.is_empty() {
        format!(
            "session {id} is busy ({}): it is working on another input; reply once it is \
             idle (session_list shows its state), or stop its work with `agentctl abort {id}`",
            snapshot.state.as_str()
        )
    } else {
        format!(
            "session {id} is waiting for a person to approve a tool call, which an MCP client \
             cannot do: answer with {} (or in an editor), then reply once it is idle",
            approvals.join(", ")
        )
    };
    let mut failure = Failure::failed(message);
    failure.kind = Kind::Daemon(ErrorKind::SessionBusy);
    failure
}

fn nonempty(prompt: String) -> error::Result<String> {
    if prompt.trim().is_empty() {
        return Err(Failure::usage("the prompt is empty"));
    }
    Ok(prompt)
}

/// The session's directory: `cwd` against this process's directory, which is the default
/// (made absolute without `.` components, as a path typed at the terminal would name it).
fn working_dir(cwd: Option<&str>) -> error::Result<PathBuf> {
    std::path::absolute(cwd.unwrap_or("."))
        .map_err(|e| Failure::failed(format!("cannot read the working directory: {e}")))
}

/// A title for lists: the prompt's first line, shortened.
fn title(prompt: &str) -> String {
    shortened(prompt.trim().lines().next().unwrap_or_default().trim(), 60)
}

/// `text` cut to `max` characters, with an ellipsis when cut.
fn shortened(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::title;

    #[test]
    fn a_title_is_the_prompts_first_line_shortened() {
        assert_eq!(title("  fix the build\nthen run tests"), "fix the build");
        let long = "é".repeat(70);
        assert_eq!(title(&long), format!("{}…", "é".repeat(60)));
    }
}
