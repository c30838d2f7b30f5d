//! What the agent loop and the subagent tools see of their session: [`Host`] and
//! [`Subagents`], implemented by the session task over the state it owns. Subagents (spec 7)
//! are sessions of the same registry that record their parent, reached through the session's
//! [`Family`] only; aborting or closing a parent aborts or closes its children
//! first (spec appendix B).

use super::task::Task;
use super::{Family, Session, Template};
use crate::agent::Host;
use crate::profile::EnvironmentContext;
use crate::store::Backlog;
use crate::tools::{
    Requests, Settled, SpawnRequest, Spawned, SubagentResult, Subagents, ToolRegistry,
};
use agentd_proto::{
    ApprovalRule, EventBody, HistoryEntry, HookEvent, RequestBody, ResolvedBy, SessionConfig,
    SessionEndReason, SessionId, ToolCallId, Turn, Usage, WhenBusy,
};
use async_trait::async_trait;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

impl Host for Task {
    fn stop_reason(&self) -> &'static str {
        Task::stop_reason(self)
    }

    fn cache_key(&self) -> &str {
        &self.info.id.0
    }

    fn emit(&self, body: EventBody) {
        self.core().emit(body);
    }

    fn append(&self, turn: Turn) {
        self.core().append(turn);
    }

    fn backlog(&self) -> Option<Backlog> {
        self.core().log.writer().map(|w| w.backlog().clone())
    }

    fn history(&self) -> Vec<Arc<HistoryEntry>> {
        self.core().history.branch()
    }

    fn context(&self) -> Vec<Arc<HistoryEntry>> {
        self.core().history.context()
    }

    fn config(&self) -> SessionConfig {
        (*self.core().config).clone()
    }

    fn drain_steering(&self) -> Vec<crate::agent::Input> {
        self.core().drain_steering()
    }

    fn add_usage(&self, usage: &mut Usage) -> Usage {
        let mut core = self.core();
        // Tokens a server did not report have no price: the total's cost stays unknown.
        if usage.unreported_calls == 0
            && let Some(price) = self.prices.get(&core.config.model)
        {
            usage.cost_usd = Some(price.cost(usage));
        }
        core.usage.add(usage);
        core.publish();
        core.usage
    }

    fn system_prompt(&self, model: &str) -> String {
        let minimal;
        let context = match self.context() {
            Some(c) => c,
            None => {
                minimal = EnvironmentContext::minimal(self.info.env.as_ref());
                &minimal
            }
        };
        let tools = self.tools();
        self.info.profile.system_prompt(
            &tools,
            self.info.env.as_ref(),
            context,
            model,
            &self.info.catalog.prompt_section(),
            self.info.instructions.as_deref(),
        )
    }

    fn subagents(&self) -> Option<&dyn Subagents> {
        self.family.as_ref().map(|_| self as &dyn Subagents)
    }

    fn tools(&self) -> Arc<ToolRegistry> {
        self.core().tools.clone()
    }

    fn requests(&self) -> Option<&dyn Requests> {
        Some(self)
    }

    fn mcp(&self) -> Option<crate::mcp::Mcp> {
        self.mcp.clone()
    }

    fn hooks(&self) -> Option<&crate::hooks::Hooks> {
        self.hooks.as_deref()
    }

    fn skills(&self) -> Option<&dyn crate::skills::Skills> {
        let catalog = &self.info.catalog;
        (!catalog.skills.is_empty() || !catalog.commands.is_empty())
            .then_some(self as &dyn crate::skills::Skills)
    }
}

impl crate::skills::Skills for Task {
    fn catalog(&self) -> Arc<crate::skills::Catalog> {
        self.info.catalog.clone()
    }

    fn active(&self) -> Vec<String> {
        crate::skills::active(&self.core().history.context())
    }
}

#[async_trait]
impl Requests for Task {
    async fn raise(
        &self,
        call_id: &ToolCallId,
        body: RequestBody,
        always: Vec<ApprovalRule>,
        cancel: &CancellationToken,
    ) -> Settled {
        let (answer, answered) = oneshot::channel();
        let notice = notification(&body);
        let (request_id, timeout) = self.core().raise(call_id, body, always, answer);
        // The request is out; the `notification` hooks run while it waits, and the call
        // goes on once both ended (a hook is bounded by its timeout).
        let notify = async {
            if let (Some(hooks), Some((kind, message))) = (&self.hooks, notice) {
                let fields = serde_json::Map::from_iter([
                    ("message".to_owned(), serde_json::Value::from(message)),
                    (
                        "notification_type".to_owned(),
                        serde_json::Value::from(kind),
                    ),
                ]);
                let emit = |body| self.core().emit(body);
                hooks
                    .fire(HookEvent::Notification, None, fields, &emit, cancel)
                    .await;
            }
        };
        let ((), settled) =
            tokio::join!(notify, self.settle(request_id, timeout, answered, cancel));
        settled
    }
}

/// What a `notification` hook is told about a request waiting for a person: Claude Code's
/// `notification_type` and `message`. A client tool's call waits for a program, not a person.
fn notification(body: &RequestBody) -> Option<(&'static str, String)> {
    match body {
        RequestBody::Approval { tool, .. } => Some((
            "permission_prompt",
            format!("agentd needs your permission to use {tool}"),
        )),
        RequestBody::Question { question, .. } => Some((
            "elicitation_dialog",
            format!(
                "agentd has a question: {}",
                crate::hooks::cut(question, 1024)
            ),
        )),
        _ => None,
    }
}

impl Task {
    /// Waits for request `request_id`'s answer, its `timeout` or `cancel`.
    async fn settle(
        &self,
        request_id: agentd_proto::RequestId,
        timeout: std::time::Duration,
        mut answered: oneshot::Receiver<crate::tools::Answer>,
        cancel: &CancellationToken,
    ) -> Settled {
        let (unanswered, by) = tokio::select! {
            answer = &mut answered => return answer.map_or(Settled::Aborted, Settled::Answered),
            () = tokio::time::sleep(timeout) => (Settled::TimedOut(timeout.as_secs()), ResolvedBy::Timeout),
            () = cancel.cancelled() => (Settled::Aborted, ResolvedBy::Abort),
        };
        // An answer that got in first wins.
        if self.core().settle(&request_id, by) {
            unanswered
        } else {
            answered.try_recv().map_or(unanswered, Settled::Answered)
        }
    }
}

impl Task {
    fn family(&self) -> Result<&Family, String> {
        self.family
            .as_ref()
            .ok_or_else(|| "subagents are not available in this host".to_owned())
    }

    /// The child `agent_id` of this session.
    async fn child(&self, agent_id: &str) -> Result<Arc<Session>, String> {
        let child = self.family()?.child(&SessionId(agent_id.to_owned())).await;
        child.ok_or_else(|| format!("no subagent {agent_id:?} of this session"))
    }
}

#[async_trait]
impl Subagents for Task {
    async fn spawn(&self, request: SpawnRequest) -> Result<Spawned, String> {
        let family = self.family()?;
        let task = request.task.clone();
        // A subagent's calls of client tools would reach no client: the client watches the
        // parent. It keeps the approval settings (its requests are on its own stream).
        let mut config = (*self.core().config).clone();
        config.client_tools.clear();
        let template = Template {
            cwd: self.info.cwd.clone(),
            profile: self.info.profile.clone(),
            config,
            instructions: self.info.instructions.clone(),
            read_only: self.info.read_only,
            environment: self.info.environment.clone(),
            worktree: None,
        };
        let child = family
            .spawn(template, request)
            .await
            .map_err(|e| e.to_string())?;
        let worktree = child.worktree().cloned();
        self.core().emit(EventBody::SubagentSpawned {
            agent_id: child.id().clone(),
            task: task.clone(),
            worktree: worktree.clone(),
        });
        child
            .submit(task, Vec::new(), None, WhenBusy::Queue)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Spawned {
            agent_id: child.id().to_string(),
            worktree,
        })
    }

    async fn send_input(&self, agent_id: &str, message: String) -> Result<(), String> {
        self.child(agent_id)
            .await?
            .submit(message, Vec::new(), None, WhenBusy::Steer)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    async fn wait(
        &self,
        agent_id: &str,
        cancel: &CancellationToken,
    ) -> Result<SubagentResult, String> {
        let child = self.child(agent_id).await?;
        tokio::select! {
            () = child.settled() => child.result().await.map_err(|e| e.to_string()),
            () = cancel.cancelled() => Err(format!("stopped waiting for agent {agent_id}: the work was aborted")),
        }
    }

    async fn close(&self, agent_id: &str) -> Result<SubagentResult, String> {
        let child = self.child(agent_id).await?;
        child.close(SessionEndReason::ClosedByParent).await;
        child.result().await.map_err(|e| e.to_string())
    }
}

impl Session {
    /// This session's loaded subagents, their children, and so on: one list per generation.
    pub(super) fn descendants(&self) -> Vec<Vec<Arc<Session>>> {
        self.family
            .as_ref()
            .map_or_else(Vec::new, Family::descendants)
    }
}
