//! Hooks: the user's own programs run at points of a session's loop (`[[hooks.EVENT]]`), in
//! Claude Code's conventions so that hooks written for it work unchanged (`claude.rs`).
//! `config.rs` checks the tables and decides which of a workspace's hooks may run: only a
//! trusted workspace's, and only as its file was when trusted. A session's [`Hooks`] holds
//! them; [`Hooks::fire`] runs the ones an event matches (each command once, concurrently,
//! through `exec::run_hook`: own process group, bounded output, stopped on timeout or abort),
//! emits `hook_started`/`hook_finished`, and says what they ask for. A hook that fails or
//! times out is reported and the work goes on.

mod claude;
mod config;

pub(crate) use claude::{Common, cut, tool_fields, tool_response};
pub use config::{Hook, Trusted};
pub(crate) use config::{HooksTable, Origin, TrustTable, check, check_trusted, project_hooks};

use crate::exec::{
    ExecutionEnvironment, HookCommand, LocalExecutionEnvironment, LocalOptions, SandboxPolicy,
    TRANSCRIPT_IN_SANDBOX,
};
use agentd_proto::{EventBody, HookEvent, HookOutcome, SandboxMode, SessionConfig, ToolCallId};
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// A session's hooks and what they run with.
pub(crate) struct Hooks {
    /// The config file's, then the trusted workspace's.
    hooks: Vec<Hook>,
    /// What to tell the user once (a workspace's hooks file that is not run, and why).
    warnings: Vec<String>,
    /// Runs them: in the session's directory when it is on this machine, else the home.
    runner: LocalExecutionEnvironment,
    /// The session's environment when it is this machine's, whose sandbox hooks share.
    session_env: Option<Arc<dyn ExecutionEnvironment>>,
    /// The sandbox of the hooks that have one, as the session's config now says.
    policy: Mutex<Result<Option<SandboxPolicy>, String>>,
    /// The session's directory (`cwd` on stdin, `CLAUDE_PROJECT_DIR`).
    project_dir: String,
    session_id: String,
    /// The session's journal.
    transcript: Option<PathBuf>,
    /// Whether the session is a subagent (its `stop` is `subagent_stop`).
    subagent: bool,
    /// Whether the session was stored by an earlier run (`session_start`'s `source`).
    resumed: bool,
    /// Set once `session_start` hooks ran in this daemon.
    started: AtomicBool,
    /// Runs so far, for `hook_run` ids.
    runs: AtomicU64,
}

/// What the hooks of one event ask for.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    /// The reasons of the hooks that blocked (none: nothing blocked).
    pub(crate) blocked: Vec<String>,
    /// Text for the model.
    pub(crate) context: Vec<String>,
}

impl Verdict {
    /// The blocking hooks' reasons as one text, if any blocked.
    pub(crate) fn block_reason(&self) -> Option<String> {
        (!self.blocked.is_empty()).then(|| self.blocked.join("\n"))
    }
}

/// What a session's hooks are made from.
pub(crate) struct HooksSpec {
    pub(crate) hooks: Vec<Hook>,
    pub(crate) warnings: Vec<String>,
    pub(crate) options: LocalOptions,
    pub(crate) cwd: PathBuf,
    /// The session's environment, when it runs on this machine.
    pub(crate) session_env: Option<Arc<dyn ExecutionEnvironment>>,
    /// The session's config as it starts.
    pub(crate) config: SessionConfig,
    pub(crate) project_dir: PathBuf,
    pub(crate) session_id: String,
    pub(crate) transcript: Option<PathBuf>,
    pub(crate) subagent: bool,
    pub(crate) resumed: bool,
}

impl Hooks {
    pub(crate) fn new(spec: HooksSpec) -> Self {
        let hooks = Self {
            hooks: spec.hooks,
            warnings: spec.warnings,
            runner: LocalExecutionEnvironment::with_options(spec.cwd, spec.options),
            session_env: spec.session_env,
            policy: Mutex::new(Ok(None)),
            project_dir: spec.project_dir.display().to_string(),
            session_id: spec.session_id,
            transcript: spec.transcript,
            subagent: spec.subagent,
            resumed: spec.resumed,
            started: AtomicBool::new(false),
            runs: AtomicU64::new(0),
        };
        hooks.reconfigure(&spec.config);
        hooks
    }

    /// Takes the session's new config: its sandbox is the hooks' too. Hooks of a session on
    /// this machine get the session's policy; those of a session whose tools run elsewhere
    /// run in the home, read-only (the model's files are not there to format).
    pub(crate) fn reconfigure(&self, config: &SessionConfig) {
        let policy = match &self.session_env {
            Some(env) => SandboxPolicy::new(config, env.as_ref()),
            None => {
                let mut config = config.clone();
                if config.sandbox != SandboxMode::Off {
                    config.sandbox = SandboxMode::ReadOnly;
                }
                SandboxPolicy::new(&config, &self.runner)
            }
        };
        *self.policy.lock().unwrap_or_else(|e| e.into_inner()) = policy.map_err(|e| e.to_string());
    }

    /// Whether the session is a subagent.
    pub(crate) fn subagent(&self) -> bool {
        self.subagent
    }

    /// The first time only: the warnings, then the `session_start` hooks (`source`:
    /// `startup`, or `resume` for a session an earlier run stored).
    pub(crate) async fn start(
        &self,
        emit: &(dyn Fn(EventBody) + Sync),
        cancel: &CancellationToken,
    ) -> Verdict {
        if self.started.swap(true, Ordering::Relaxed) {
            return Verdict::default();
        }
        for w in &self.warnings {
            emit(EventBody::warning(w.clone()));
        }
        let source = if self.resumed { "resume" } else { "startup" };
        let fields = Map::from_iter([("source".to_owned(), Value::from(source))]);
        self.fire(HookEvent::SessionStart, None, fields, emit, cancel)
            .await
    }

    /// Runs the hooks of `event` (for a call of a tool `call`, those whose matcher takes it)
    /// with `fields` added to the common stdin fields; each command once, all at once.
    pub(crate) async fn fire(
        &self,
        event: HookEvent,
        call: Option<(&str, &ToolCallId)>,
        fields: Map<String, Value>,
        emit: &(dyn Fn(EventBody) + Sync),
        cancel: &CancellationToken,
    ) -> Verdict {
        let mut seen = HashSet::new();
        let chosen: Vec<&Hook> = self
            .hooks
            .iter()
            .filter(|h| h.event == event && h.matches(call.map(|(tool, _)| tool)))
            .filter(|h| seen.insert(h.command.as_str()))
            .collect();
        if chosen.is_empty() {
            return Verdict::default();
        }
        // A sandboxed hook cannot see agentd's state: it reads the journal from a descriptor.
        let stdin_with = |transcript_path: &str| {
            let common = Common {
                session_id: &self.session_id,
                transcript_path,
                cwd: &self.project_dir,
            };
            claude::stdin(&common, event, fields.clone())
        };
        let journal = self
            .transcript
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let plain = chosen
            .iter()
            .any(|h| !h.sandboxed)
            .then(|| stdin_with(&journal));
        let boxed = chosen.iter().any(|h| h.sandboxed).then(|| {
            stdin_with(if self.transcript.is_some() {
                TRANSCRIPT_IN_SANDBOX
            } else {
                ""
            })
        });
        let call_id = call.map(|(_, id)| id);
        let answers = futures::future::join_all(chosen.into_iter().map(|h| {
            let stdin = if h.sandboxed { &boxed } else { &plain };
            self.run_one(
                h,
                stdin.as_deref().unwrap_or_default(),
                call_id,
                emit,
                cancel,
            )
        }))
        .await;
        let mut verdict = Verdict::default();
        for a in answers {
            if a.outcome == Some(HookOutcome::Blocked)
                && let Some(r) = a.reason
            {
                verdict.blocked.push(r);
            }
            verdict.context.extend(a.context);
        }
        verdict
    }

    async fn run_one(
        &self,
        hook: &Hook,
        stdin: &[u8],
        call_id: Option<&ToolCallId>,
        emit: &(dyn Fn(EventBody) + Sync),
        cancel: &CancellationToken,
    ) -> claude::Answer {
        let run = format!("hook_{}", self.runs.fetch_add(1, Ordering::Relaxed) + 1);
        emit(EventBody::HookStarted {
            hook_run: run.clone(),
            event: hook.event,
            hook: hook.label.clone(),
            program: hook.program(),
            call_id: call_id.cloned(),
        });
        let started = Instant::now();
        let env = [
            ("CLAUDE_PROJECT_DIR", self.project_dir.as_str()),
            ("AGENTD_PROJECT_DIR", self.project_dir.as_str()),
            ("AGENTD_SESSION_ID", self.session_id.as_str()),
            ("AGENTD_HOOK_EVENT", hook.event.as_str()),
        ];
        let policy = if hook.sandboxed {
            self.policy
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        } else {
            Ok(None)
        };
        let ran = match &policy {
            Ok(sandbox) => {
                let command = HookCommand {
                    command: &hook.command,
                    env: &env,
                    stdin,
                    timeout: hook.timeout,
                    sandbox: sandbox.as_ref(),
                    transcript: self.transcript.as_deref(),
                };
                self.runner.run_hook(&command, cancel).await
            }
            Err(e) => Err(crate::exec::Error::NotAllowed(format!(
                "its sandbox could not be made ({e})"
            ))),
        };
        let (answer, exit_code) = match ran {
            Err(e) => (
                claude::Answer {
                    outcome: Some(HookOutcome::Failed),
                    reason: Some(format!("could not start: {e}")),
                    context: None,
                },
                None,
            ),
            Ok(r) if r.cancelled => (
                claude::Answer {
                    outcome: Some(HookOutcome::Aborted),
                    reason: Some("the work was aborted; the hook was stopped".to_owned()),
                    context: None,
                },
                None,
            ),
            Ok(r) if r.timed_out => (
                claude::Answer {
                    outcome: Some(HookOutcome::TimedOut),
                    reason: Some(format!(
                        "ran past its timeout_secs ({} s) and was stopped",
                        hook.timeout.as_secs()
                    )),
                    context: None,
                },
                None,
            ),
            Ok(r) => (
                claude::answer(hook.event, r.exit_code, &r.stdout, &r.stderr),
                r.exit_code,
            ),
        };
        let outcome = answer.outcome.unwrap_or(HookOutcome::Ok);
        if matches!(outcome, HookOutcome::Failed | HookOutcome::TimedOut) {
            tracing::warn!(hook = %hook.label, "hook {outcome}: {}", answer.reason.as_deref().unwrap_or_default());
        }
        emit(EventBody::HookFinished {
            hook_run: run,
            event: hook.event,
            hook: hook.label.clone(),
            outcome,
            exit_code,
            duration_ms: started.elapsed().as_millis() as u64,
            reason: answer.reason.clone(),
        });
        answer
    }
}
