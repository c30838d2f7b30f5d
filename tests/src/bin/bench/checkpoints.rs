//! `agentd-bench checkpoints`: what issue 26's checkpoints cost. In a workspace of 10,000
//! files, ten-round shell tasks (every round may change files, so each is checkpointed), on
//! a daemon with checkpoints and one without, taking turns: the checkpoint's own time per
//! round after the session's first (from the daemon's debug log), with nothing changed and
//! with ten files changed each round; the wall time per round on either daemon; and an
//! undo's time (the call, and the daemon's own part).

use super::tool_results;
use agentd_tests::mock::{MockProvider, Reply};
use agentd_tests::{RawClient, TestDaemon, sse};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

const FILES_DIRS: usize = 100;
const FILES_PER_DIR: usize = 100;
const ROUNDS: usize = 10;
const RUNS: usize = 7;

pub(crate) struct Figures {
    /// The checkpoint's own time, rounds after the session's first, nothing changed.
    unchanged: Vec<Duration>,
    /// The same with ten files changed in each round.
    changed: Vec<Duration>,
    /// The session's first checkpoint (every file read and stored).
    first: Vec<Duration>,
    /// Wall time per round of the unchanged task, checkpoints on and off.
    round_on: Vec<Duration>,
    round_off: Vec<Duration>,
    /// `session/rollback {files: true}` of a ten-round task that changed ten files a round,
    /// as the client waits for it, and the daemon's own part (walk and restore).
    undo_call: Vec<Duration>,
    undo_own: Vec<Duration>,
}

/// The daemon's logged durations of `what` ("checkpoint taken", "undo done") after byte
/// `from` of its log.
fn logged(daemon: &TestDaemon, from: usize, what: &str) -> Vec<Duration> {
    daemon.log_text()[from..]
        .lines()
        .filter(|l| l.contains(what))
        .filter_map(|l| {
            let at = l.find("micros=")? + "micros=".len();
            let digits: String = l[at..].chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok().map(Duration::from_micros)
        })
        .collect()
}

async fn daemon(mock: &MockProvider, config: &str) -> TestDaemon {
    TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("AGENTD_LOG", "info,agentd_core::checkpoint=debug")
        .config(config)
        .start()
        .await
        .unwrap()
}

/// Runs one ten-round task in a new session of `daemon`; returns the session, its wall time
/// per round and the checkpoint times it logged.
async fn task(
    daemon: &TestDaemon,
    client: &mut RawClient,
    dir: &Path,
) -> (String, Duration, Vec<Duration>) {
    let session = daemon.create_session(client, dir, json!({})).await.unwrap();
    client.subscribe(&session, None).await.unwrap();
    let from = daemon.log_text().len();
    let started = Instant::now();
    client
        .call(
            "session/submit",
            json!({"session_id": session, "text": "go"}),
        )
        .await
        .unwrap();
    client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    let per_round = started.elapsed() / ROUNDS as u32;
    (session, per_round, logged(daemon, from, "checkpoint taken"))
}

pub(crate) async fn bench() -> Figures {
    let work = tempfile::tempdir().unwrap();
    for d in 0..FILES_DIRS {
        let dir = work.path().join(format!("d{d}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            std::fs::write(
                dir.join(format!("f{f}.rs")),
                format!("fn f{d}_{f}() {{}}\n"),
            )
            .unwrap();
        }
    }
    let mock = MockProvider::start().await.unwrap();
    let on = daemon(&mock, "").await;
    let off = daemon(&mock, "[checkpoints]\nenabled = false\n").await;
    let mut on_client = on.client().await.unwrap();
    let mut off_client = off.client().await.unwrap();
    let mut f = Figures {
        unchanged: Vec::new(),
        changed: Vec::new(),
        first: Vec::new(),
        round_on: Vec::new(),
        round_off: Vec::new(),
        undo_call: Vec::new(),
        undo_own: Vec::new(),
    };
    for _ in 0..RUNS {
        // Nothing changes: `true` in every round.
        mock.respond_with(|body| {
            let done = tool_results(body);
            Reply::Stream(if done < ROUNDS {
                sse::shell(&format!("t{done}"), "true")
            } else {
                sse::text("done")
            })
        });
        let (_, wall, times) = task(&on, &mut on_client, work.path()).await;
        f.round_on.push(wall);
        f.first.extend(times.first());
        f.unchanged.extend(times.iter().skip(1));
        let (_, wall, _) = task(&off, &mut off_client, work.path()).await;
        f.round_off.push(wall);

        // Ten files change in every round.
        mock.respond_with(|body| {
            let done = tool_results(body);
            Reply::Stream(if done < ROUNDS {
                sse::shell(
                    &format!("t{done}"),
                    &format!(
                        "for d in 0 1 2 3 4 5 6 7 8 9; do echo 'round {done}' >> d$d/f0.rs; done"
                    ),
                )
            } else {
                sse::text("done")
            })
        });
        let (session, _, times) = task(&on, &mut on_client, work.path()).await;
        f.changed.extend(times.iter().skip(1));
        let from = on.log_text().len();
        let started = Instant::now();
        on_client
            .call(
                "session/rollback",
                json!({"session_id": session, "files": true}),
            )
            .await
            .unwrap();
        f.undo_call.push(started.elapsed());
        f.undo_own.extend(logged(&on, from, "undo done"));
    }
    for v in [
        &mut f.unchanged,
        &mut f.changed,
        &mut f.first,
        &mut f.round_on,
        &mut f.round_off,
        &mut f.undo_call,
        &mut f.undo_own,
    ] {
        v.sort();
    }
    f
}

fn median(v: &[Duration]) -> String {
    match v.get(v.len() / 2) {
        Some(d) => format!("{:.2} ms", d.as_secs_f64() * 1e3),
        None => "-".into(),
    }
}

fn range(v: &[Duration]) -> String {
    match (v.first(), v.last()) {
        (Some(a), Some(b)) => format!(
            "(min {:.2}, max {:.2}, n {})",
            a.as_secs_f64() * 1e3,
            b.as_secs_f64() * 1e3,
            v.len()
        ),
        _ => String::new(),
    }
}

pub(crate) fn print(f: &Figures) {
    println!(
        "\nissue 26 (checkpoints), {} files, {ROUNDS}-round shell tasks, {RUNS} runs:",
        FILES_DIRS * FILES_PER_DIR
    );
    let rows = [
        (
            "checkpoint per round, unchanged, after the first (goal <= 10 ms)",
            &f.unchanged,
        ),
        ("checkpoint per round, ten files changed", &f.changed),
        (
            "the session's first checkpoint (every file stored)",
            &f.first,
        ),
        ("wall time per round, checkpoints on", &f.round_on),
        ("wall time per round, checkpoints off", &f.round_off),
        (
            "undo of ten rounds (100 file changes): the call",
            &f.undo_call,
        ),
        ("  of which the daemon's walk and restore", &f.undo_own),
    ];
    for (what, v) in rows {
        println!("  {what}: median {} {}", median(v), range(v));
    }
}
