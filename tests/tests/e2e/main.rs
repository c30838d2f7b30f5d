//! End-to-end tests: the real `agentd` on a temp socket, real `agentctl`, real child
//! processes, and a mock Anthropic server on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

/// What `pattern` binds in each typed event that matches it, in order:
/// `each!(events, EventBody::Warning { message, .. } => message.as_str())` (a guard may
/// follow the pattern).
macro_rules! each {
    ($events:expr, $pattern:pat $(if $guard:expr)? => $out:expr) => {
        $events
            .iter()
            .filter_map(|e| match &e.body {
                $pattern $(if $guard)? => Some($out),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
}

/// Runs `scenario(family)` as one test per provider family: `scenario::anthropic`, ...
macro_rules! each_family {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            use agentd_tests::family::Family;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn anthropic() { super::$scenario(Family::Anthropic).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn openai() { super::$scenario(Family::OpenAi).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn openai_chat() { super::$scenario(Family::Chat).await }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn gemini() { super::$scenario(Family::Gemini).await }
        }
    )*};
}

mod acp;
mod approvals;
mod checkpoints;
mod cli;
mod compaction;
mod connections;
mod container;
mod container_remote;
mod container_ssh;
mod control;
mod conversation;
mod daemon;
mod dirs;
mod docs;
mod durability;
mod editor_emacs;
mod editor_nvim;
mod editor_vscode;
mod editor_vscode_workbench;
mod examples;
mod families;
mod hooks;
mod hostile;
mod images;
mod keys;
mod loop_basics;
mod mcp;
mod mcp_server;
mod newcomer;
mod openai_compat;
mod persistence;
mod processes;
mod profiles;
mod protocol;
mod protocol_edges;
mod provider;
mod provider_limits;
mod sandbox;
mod secrets;
mod session_core;
mod skills;
mod ssh;
mod streams;
mod subagent_worktrees;
mod subagents;
mod tidy;
mod trust_files;
mod trust_review;
mod trust_rules;
mod trust_sandbox;
mod trust_socket;

use agentd_proto::{Event, EventBody, ProcessingEndReason, SessionId};
use agentd_tests::family::Family;
use agentd_tests::mock::MockProvider;
use agentd_tests::{RawClient, TestDaemon};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// A daemon wired to a fresh mock, a client, a session and its working directory.
pub struct Setup {
    pub mock: MockProvider,
    pub daemon: TestDaemon,
    pub client: RawClient,
    pub session: String,
    pub workdir: tempfile::TempDir,
}

pub async fn setup() -> Setup {
    setup_with(json!({})).await
}

/// A daemon that reaches every family through one mock, with a session on `family`'s provider
/// (plus extra `session/create` params).
pub async fn setup_family(family: Family, create: Value) -> Setup {
    let mock = MockProvider::start().await.expect("mock starts");
    let daemon = Family::daemon(&mock).await.expect("daemon starts");
    let mut client = daemon.client().await.expect("client connects");
    let workdir = tempfile::tempdir().expect("tempdir");
    let mut params = json!({"provider": family.provider()});
    if let (Some(p), Some(e)) = (params.as_object_mut(), create.as_object()) {
        p.extend(e.clone());
    }
    let session = daemon
        .create_session(&mut client, workdir.path(), params)
        .await
        .expect("session created");
    Setup {
        mock,
        daemon,
        client,
        session,
        workdir,
    }
}

/// Like [`setup`], with extra `session/create` params.
pub async fn setup_with(create: Value) -> Setup {
    let mock = MockProvider::start().await.expect("mock starts");
    let daemon = TestDaemon::start(&mock.url).await.expect("daemon starts");
    setup_on(mock, daemon, tempfile::tempdir().expect("tempdir"), create).await
}

/// A session of `daemon` (whose provider is `mock`) in `workdir`, given to the daemon's
/// user, with extra `session/create` params.
pub(crate) async fn setup_on(
    mock: MockProvider,
    daemon: TestDaemon,
    workdir: tempfile::TempDir,
    create: Value,
) -> Setup {
    let mut client = daemon.client().await.expect("client connects");
    daemon.give(workdir.path()).expect("work directory given");
    let session = daemon
        .create_session(&mut client, workdir.path(), create)
        .await
        .expect("session created");
    Setup {
        mock,
        daemon,
        client,
        session,
        workdir,
    }
}

/// As [`setup_with`], with the daemon running as an ordinary user
/// ([`TestDaemonBuilder::unprivileged`](agentd_tests::TestDaemonBuilder::unprivileged)) and the
/// work directory given to it: for attacks whose outcome depends on what the kernel lets a
/// user's processes do.
pub async fn setup_unprivileged(create: Value) -> Setup {
    setup_unprivileged_with(|b| b, tempfile::tempdir().expect("tempdir"), create).await
}

/// As [`setup_unprivileged`], with the daemon's builder set up by `configure` (more
/// environment, a wrapper program) and the session in `workdir`.
pub async fn setup_unprivileged_with(
    configure: impl FnOnce(agentd_tests::TestDaemonBuilder) -> agentd_tests::TestDaemonBuilder,
    workdir: tempfile::TempDir,
    create: Value,
) -> Setup {
    let mock = MockProvider::start().await.expect("mock starts");
    let builder = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key");
    let daemon = configure(builder)
        .unprivileged()
        .start()
        .await
        .expect("daemon starts");
    setup_on(mock, daemon, workdir, create).await
}

impl Setup {
    /// A typed client ([`agentd_tests::Client`]) of this daemon, and this session's id.
    pub async fn typed(&self) -> (agentd_tests::Client, SessionId) {
        let client = self.daemon.client().await.expect("client connects");
        (client.into(), SessionId(self.session.clone()))
    }

    /// Calls `method` on this session: `params` plus `session_id`; returns the result.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let response = self.request(method, params).await;
        match response.get("result") {
            Some(r) => r.clone(),
            None => panic!("{method} failed: {}", response["error"]),
        }
    }

    /// Like [`Setup::call`], returning the whole response (for error cases).
    pub async fn request(&mut self, method: &str, mut params: Value) -> Value {
        params["session_id"] = json!(self.session);
        self.client.request(method, params).await.unwrap()
    }

    /// Reads this client's events up to the next one of `kind`.
    pub async fn until(&mut self, kind: &str) -> Vec<Value> {
        self.client.events_until(kind, |_| true).await.unwrap()
    }

    /// Subscribes from the start of the log and submits `text`, without waiting.
    pub async fn start(&mut self, text: &str) {
        self.client.subscribe(&self.session, Some(0)).await.unwrap();
        self.call("session/submit", json!({"text": text})).await;
    }

    /// Subscribes from the start of the log, submits `text`, and returns every event up to
    /// the `processing_end`.
    pub async fn run(&mut self, text: &str) -> Vec<Value> {
        let since = self.call("session/get", json!({})).await["last_seq"]
            .as_u64()
            .unwrap();
        self.client
            .subscribe(&self.session, Some(since))
            .await
            .unwrap();
        self.call("session/submit", json!({"text": text})).await;
        self.client
            .events_until("processing_end", |_| true)
            .await
            .unwrap()
    }
}

/// Runs one round of `calls` (Anthropic's format) and a final answer; returns each call's result as the model
/// got it (`call id → (is_error, content)`), read from the request that followed the round.
pub async fn round(
    s: &mut Setup,
    calls: &[(&str, &str, Value)],
) -> BTreeMap<String, (bool, String)> {
    s.mock.push_stream(Family::Anthropic.tools("", calls));
    s.mock.push_stream(Family::Anthropic.text("done"));
    let before = s.mock.requests().len();
    let events = s.run("go").await;
    assert_eq!(
        of_kind(&events, "processing_end")[0]["data"]["reason"],
        "completed"
    );
    let errors: BTreeMap<String, bool> = of_kind(&events, "tool_call_end")
        .iter()
        .map(|e| {
            (
                e["data"]["call_id"].as_str().unwrap().to_owned(),
                e["data"]["error"].is_string(),
            )
        })
        .collect();
    let requests = s.mock.wait_requests(before + 2).await;
    Family::Anthropic
        .results(&requests[before + 1].body)
        .into_iter()
        .filter(|(id, _)| calls.iter().any(|c| c.0 == id))
        .map(|(id, content)| (id.clone(), (errors[&id], content)))
        .collect()
}

/// A `shell` call with `command`.
pub fn shell(id: &'static str, command: String) -> (&'static str, &'static str, Value) {
    (id, "shell", json!({"command": command}))
}

pub use agentd_tests::wait::{PATIENCE, eventually};

/// The events of `kind`.
pub fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// The `processing_end` reasons among typed `events`.
pub fn end_reasons(events: &[Event]) -> Vec<ProcessingEndReason> {
    each!(events, EventBody::ProcessingEnd { reason, .. } => *reason)
}

/// The `warning` messages among typed `events`.
pub fn warnings(events: &[Event]) -> Vec<&str> {
    each!(events, EventBody::Warning { message, .. } => message.as_str())
}

/// The `error` events' (message, fatal) among typed `events`.
pub fn errors(events: &[Event]) -> Vec<(&str, bool)> {
    each!(events, EventBody::Error { message, fatal } => (message.as_str(), *fatal))
}

/// The whole texts (`assistant_text_end`) among typed `events`.
pub fn texts(events: &[Event]) -> Vec<&str> {
    each!(events, EventBody::AssistantTextEnd { text, .. } => text.as_str())
}

/// The string `field` of the data of every event of `kind`.
pub fn data_of(events: &[Value], kind: &str, field: &str) -> Vec<String> {
    of_kind(events, kind)
        .iter()
        .map(|e| e["data"][field].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The user-role content blocks of the last message in a recorded request.
pub fn last_user_blocks(request: &Value) -> Vec<Value> {
    let messages = request["messages"].as_array().expect("messages");
    let last = messages.last().expect("a message");
    assert_eq!(last["role"], "user", "the last message is the user's");
    last["content"].as_array().expect("content").clone()
}

/// The output (or error) of each `tool_call_end`.
pub(crate) fn tool_outputs(events: &[Value]) -> Vec<String> {
    of_kind(events, "tool_call_end")
        .iter()
        .map(|e| {
            let d = &e["data"];
            d["output"]
                .as_str()
                .or(d["error"].as_str())
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// The processes (zombies excluded) whose arguments `keep` accepts.
pub(crate) fn live_processes(keep: impl Fn(&[String]) -> bool) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if !zombie && keep(&args) {
            pids.push(pid);
        }
    }
    pids
}

/// A command in `s`'s session prints, waits for a flag file, prints to stderr and exits 3:
/// its first line arrives while it still runs, and its whole output and status after.
pub(crate) async fn output_streams_then_the_exit_status_follows(s: &mut Setup) {
    let flag = s.workdir.path().join("go");
    s.mock.push_stream(agentd_tests::sse::shell(
        "t1",
        &format!(
            "echo first; while [ ! -f {} ]; do sleep 0.02; done; echo second >&2; exit 3",
            flag.display()
        ),
    ));
    s.mock.push_stream(agentd_tests::sse::text("done"));
    s.start("stream").await;
    // The command is still waiting for the flag: "first" came while it ran.
    s.client
        .events_until("tool_call_output_delta", |e| {
            e["data"]["delta"]
                .as_str()
                .unwrap_or_default()
                .contains("first")
        })
        .await
        .unwrap();
    assert!(!flag.exists());
    std::fs::write(&flag, "").unwrap();
    let events = s.until("processing_end").await;
    let deltas = data_of(&events, "tool_call_output_delta", "delta");
    assert!(deltas.iter().any(|d| d.contains("second")), "{deltas:?}");
    let outputs = tool_outputs(&events);
    assert!(
        outputs[0].contains("first\n")
            && outputs[0].contains("second\n")
            && outputs[0].contains("[exit code: 3"),
        "{outputs:?}"
    );
}
