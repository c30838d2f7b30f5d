//! Benchmarks of the real daemon against an instant mock provider (run by hand, not in CI):
//!
//! ```text
//! cargo run --release -p agentd-tests --bin agentd-bench
//! ```
//!
//! Prints: per-tool-round overhead of a 10-round `echo` task (median of runs), the cost of the
//! bare `bash -c echo` it includes, daemon RSS idle and with 100 idle sessions, and the latency
//! from the provider sending a text delta to a subscriber receiving the event (p50/p99).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_tests::mock::{Chunk, Gate, MockAnthropic, Reply};
use agentd_tests::{TestDaemon, sse};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const ROUNDS: usize = 10;
const RUNS: usize = 9;
const LATENCY_SAMPLES: usize = 2000;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn tool_results(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .flat_map(|msg| msg["content"].as_array().cloned().unwrap_or_default())
                .filter(|b| b["type"] == "tool_result")
                .count()
        })
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mock = MockAnthropic::start().await.unwrap();
    let daemon = TestDaemon::start(&mock.url).await.unwrap();
    let pid = daemon.pid();
    let mut client = daemon.client().await.unwrap();
    let workdir = tempfile::tempdir().unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let idle_rss = rss_kib(pid);
    for _ in 0..100 {
        daemon
            .create_session(&mut client, workdir.path(), json!({}))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let with_100 = rss_kib(pid);

    // Per-round overhead: each session answers `echo` ROUNDS times, then text.
    mock.respond_with(|body| {
        let done = tool_results(body);
        if done < ROUNDS {
            Reply::Stream(sse::shell(
                &format!("t{done}"),
                &format!("echo round-{done}"),
            ))
        } else {
            Reply::Stream(sse::text("done"))
        }
    });
    let mut per_round = Vec::new();
    for _ in 0..RUNS {
        let session = daemon
            .create_session(&mut client, workdir.path(), json!({}))
            .await
            .unwrap();
        client.subscribe(&session, None).await.unwrap();
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
        per_round.push(started.elapsed() / ROUNDS as u32);
    }
    per_round.sort();
    let mut bash = Vec::new();
    for _ in 0..50 {
        let started = Instant::now();
        std::process::Command::new("/bin/bash")
            .args(["-c", "echo x"])
            .output()
            .unwrap();
        bash.push(started.elapsed());
    }
    bash.sort();

    // Event latency: the provider sends one text delta at a time; measure until the
    // subscriber has it.
    let gates: Vec<Gate> = (0..LATENCY_SAMPLES).map(|_| Gate::new()).collect();
    let mut chunks = vec![sse::message_start()];
    chunks.push(Chunk::Data("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n".into()));
    for (i, gate) in gates.iter().enumerate() {
        chunks.push(Chunk::Wait(gate.clone()));
        chunks.push(Chunk::Data(format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"d{i} \"}}}}\n\n"
        )));
    }
    chunks.push(Chunk::Data(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n".into(),
    ));
    chunks.extend(sse::message_end("end_turn"));
    mock.push(Reply::Stream(chunks));
    let session = daemon
        .create_session(&mut client, workdir.path(), json!({}))
        .await
        .unwrap();
    client.subscribe(&session, None).await.unwrap();
    client
        .call(
            "session/submit",
            json!({"session_id": session, "text": "stream"}),
        )
        .await
        .unwrap();
    let mut latencies = Vec::with_capacity(LATENCY_SAMPLES);
    for gate in &gates {
        let sent = Instant::now();
        gate.open();
        client
            .events_until("assistant_text_delta", |_| true)
            .await
            .unwrap();
        latencies.push(sent.elapsed());
    }
    client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    latencies.sort();

    let after_runs = rss_kib(pid);

    println!("agentd benchmark (release daemon, instant mock provider, 2-core machine)");
    println!(
        "per tool round, {ROUNDS}-round echo task: median {:.2} ms (min {:.2}, max {:.2}, {RUNS} runs)",
        per_round[RUNS / 2].as_secs_f64() * 1e3,
        per_round[0].as_secs_f64() * 1e3,
        per_round[RUNS - 1].as_secs_f64() * 1e3
    );
    println!(
        "  of which bash -c 'echo x' alone: median {:.2} ms",
        bash[bash.len() / 2].as_secs_f64() * 1e3
    );
    println!(
        "event latency, provider delta -> subscriber ({LATENCY_SAMPLES} samples): p50 {:.0} us, p99 {:.0} us, max {:.0} us",
        percentile(&latencies, 0.5).as_secs_f64() * 1e6,
        percentile(&latencies, 0.99).as_secs_f64() * 1e6,
        latencies[LATENCY_SAMPLES - 1].as_secs_f64() * 1e6
    );
    println!(
        "daemon RSS: idle {:.1} MB; with 100 idle sessions {:.1} MB (+{:.1} kB per session); after the runs above {:.1} MB",
        idle_rss as f64 / 1024.0,
        with_100 as f64 / 1024.0,
        (with_100.saturating_sub(idle_rss)) as f64 / 100.0,
        after_runs as f64 / 1024.0
    );
}
