//! End-to-end tests: the real `agentd` on a temp socket, real `agentctl`, real child
//! processes, and a mock Anthropic server on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod cli;
mod control;
mod daemon;
mod loop_basics;
mod protocol;
mod provider;
mod streams;

use agentd_tests::mock::MockAnthropic;
use agentd_tests::{RawClient, TestDaemon};
use serde_json::{Value, json};

/// A daemon wired to a fresh mock, a client, a session and its working directory.
pub struct Setup {
    pub mock: MockAnthropic,
    pub daemon: TestDaemon,
    pub client: RawClient,
    pub session: String,
    pub workdir: tempfile::TempDir,
}

pub async fn setup() -> Setup {
    setup_with(json!({})).await
}

/// Like [`setup`], with extra `session/create` params.
pub async fn setup_with(create: Value) -> Setup {
    let mock = MockAnthropic::start().await.expect("mock starts");
    let daemon = TestDaemon::start(&mock.url).await.expect("daemon starts");
    let mut client = daemon.client().await.expect("client connects");
    let workdir = tempfile::tempdir().expect("tempdir");
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

impl Setup {
    /// Subscribes from the start of the log, submits `text`, and returns every event up to
    /// the `processing_end`.
    pub async fn run(&mut self, text: &str) -> Vec<Value> {
        let since = self
            .client
            .call("session/get", json!({"session_id": self.session}))
            .await
            .unwrap()["last_seq"]
            .as_u64()
            .unwrap();
        self.client
            .subscribe(&self.session, Some(since))
            .await
            .unwrap();
        self.client
            .call(
                "session/submit",
                json!({"session_id": self.session, "text": text}),
            )
            .await
            .unwrap();
        self.client
            .events_until("processing_end", |_| true)
            .await
            .unwrap()
    }
}

/// The events of `kind`.
pub fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// The user-role content blocks of the last message in a recorded request.
pub fn last_user_blocks(request: &Value) -> Vec<Value> {
    let messages = request["messages"].as_array().expect("messages");
    let last = messages.last().expect("a message");
    assert_eq!(last["role"], "user", "the last message is the user's");
    last["content"].as_array().expect("content").clone()
}
