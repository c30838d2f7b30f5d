//! Benchmarks of the real daemon against an instant mock provider (run by hand, not in CI):
//!
//! ```text
//! cargo run --release -p agentd-tests --bin agentd-bench
//! ```
//!
//! Prints: per-tool-round overhead of a 10-round `echo` task (median of runs), the cost of the
//! bare `bash -c echo` it includes, daemon RSS idle and with 100 idle sessions, the latency
//! from the provider sending a text delta to a subscriber receiving the event (p50/p99), and
//! the `grep` and `glob` tools over a generated tree of 50,000 files beside `rg` (when
//! installed) on the same tree, and, with 10,000 stored sessions, the time from starting the
//! daemon to its socket answering, `session/list`, and the first `session/get` of a stored
//! session (which loads it).

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

    let search = search_bench(&mock, &daemon, &mut client).await;
    let store = store_bench(daemon).await;

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
    println!("{search}");
    println!("{store}");
}

const STORED_SESSIONS: usize = 10_000;

/// Fills the state directory with copies of a real session, then times a fresh daemon.
async fn store_bench(mut daemon: TestDaemon) -> String {
    daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    let dir = daemon.sessions_dir();
    let template = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("history.jsonl").exists())
        .expect("a stored session with history");
    let record: Value =
        serde_json::from_slice(&std::fs::read(template.join("session.json")).unwrap()).unwrap();
    let history = std::fs::read(template.join("history.jsonl")).unwrap();
    let events = std::fs::read(template.join("events.jsonl")).unwrap();
    let existing = std::fs::read_dir(&dir).unwrap().count();
    for i in existing..STORED_SESSIONS {
        let id = format!("00000000-0000-4000-8000-{i:012}");
        let session = dir.join(&id);
        std::fs::create_dir(&session).unwrap();
        let mut record = record.clone();
        record["id"] = json!(id);
        record["state"] = json!(if i % 2 == 0 { "idle" } else { "closed" });
        std::fs::write(session.join("session.json"), record.to_string()).unwrap();
        std::fs::write(session.join("history.jsonl"), &history).unwrap();
        std::fs::write(session.join("events.jsonl"), &events).unwrap();
    }

    let mut ready = Vec::new();
    let mut list = Vec::new();
    let mut first_get = Vec::new();
    for run in 0..5 {
        let started = Instant::now();
        let mut child = daemon
            .command("agentd")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Ready: a request is answered (the socket accepts connections a little earlier).
        let mut client = loop {
            if let Ok(mut c) = agentd_tests::RawClient::connect(&daemon.socket).await
                && c.call("daemon/info", json!({})).await.is_ok()
            {
                break c;
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        };
        ready.push(started.elapsed());
        let started = Instant::now();
        let listed = client.call("session/list", json!({})).await.unwrap();
        list.push(started.elapsed());
        assert_eq!(
            listed["sessions"].as_array().unwrap().len(),
            STORED_SESSIONS
        );
        let id = format!("00000000-0000-4000-8000-{:012}", 1000 + run);
        let started = Instant::now();
        client
            .call("session/get", json!({"session_id": id}))
            .await
            .unwrap();
        first_get.push(started.elapsed());
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        child.wait().unwrap();
    }
    let ms = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1e3
    };
    format!(
        "{STORED_SESSIONS} stored sessions (median of 5 starts): start to socket ready {:.0} ms; session/list {:.0} ms; first session/get of a stored session (loads it) {:.1} ms",
        ms(ready),
        ms(list),
        ms(first_get)
    )
}

const TREE_DIRS: usize = 500;
const TREE_FILES: usize = 100;
const SEARCH_RUNS: usize = 5;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// `grep` and `glob` through the daemon (the tool's own duration, from `tool_call_end`) and
/// `rg` on the same generated tree.
async fn search_bench(
    mock: &MockAnthropic,
    daemon: &TestDaemon,
    client: &mut agentd_tests::RawClient,
) -> String {
    let tree = tempfile::tempdir().unwrap();
    for d in 0..TREE_DIRS {
        let dir = tree.path().join(format!("pkg{d:03}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..TREE_FILES {
            let mut text = String::new();
            for l in 0..20 {
                if (d * TREE_FILES + f).is_multiple_of(7) && l == 10 {
                    text.push_str(&format!("let needle_{d}_{f} = compute({l});\n"));
                } else {
                    text.push_str(&format!("fn item_{l}(x: u32) -> u32 {{ x * {l} + {f} }}\n"));
                }
            }
            let ext = if f % 2 == 0 { "rs" } else { "txt" };
            std::fs::write(dir.join(format!("f{f:03}.{ext}")), text).unwrap();
        }
    }
    let files = TREE_DIRS * TREE_FILES;
    let mut rows = vec![format!(
        "search over {files} files ({SEARCH_RUNS} runs each, median):"
    )];
    for (label, tool, args, rg_args) in [
        (
            "grep 'needle_'",
            "grep",
            json!({"pattern": "needle_", "max_results": 1_000_000}),
            vec!["-n", "needle_"],
        ),
        (
            "glob '**/*.rs'",
            "glob",
            json!({"pattern": "**/*.rs"}),
            vec!["--files", "-g", "*.rs"],
        ),
        // The same work as our glob, which lists newest first (a stat per file).
        (
            "glob '**/*.rs' vs rg --sortr modified",
            "glob",
            json!({"pattern": "**/*.rs"}),
            vec!["--files", "-g", "*.rs", "--sortr", "modified"],
        ),
    ] {
        let session = daemon
            .create_session(client, tree.path(), json!({}))
            .await
            .unwrap();
        let reply_args = args.clone();
        mock.respond_with(move |body| {
            if tool_results(body) < SEARCH_RUNS {
                Reply::Stream(sse::tools("", &[("s", tool, reply_args.clone())]))
            } else {
                Reply::Stream(sse::text("done"))
            }
        });
        client.subscribe(&session, None).await.unwrap();
        client
            .call(
                "session/submit",
                json!({"session_id": session, "text": "search"}),
            )
            .await
            .unwrap();
        let events = client
            .events_until("processing_end", |_| true)
            .await
            .unwrap();
        let ours: Vec<f64> = events
            .iter()
            .filter(|e| e["kind"] == "tool_call_end")
            .map(|e| e["data"]["duration_ms"].as_f64().unwrap())
            .collect();
        let lines = events
            .iter()
            .rev()
            .find(|e| e["kind"] == "tool_call_end")
            .and_then(|e| e["data"]["output"].as_str())
            .map_or(0, |o| o.lines().count());
        let rg: Vec<f64> = (0..SEARCH_RUNS)
            .filter_map(|_| {
                let started = Instant::now();
                let out = std::process::Command::new("rg")
                    .args(&rg_args)
                    .current_dir(tree.path())
                    .output()
                    .ok()?;
                out.status
                    .success()
                    .then(|| started.elapsed().as_secs_f64() * 1e3)
            })
            .collect();
        let ours = median(ours);
        rows.push(if rg.is_empty() {
            format!("  {label}: agentd {ours:.0} ms ({lines} results); rg not installed")
        } else {
            let rg = median(rg);
            format!(
                "  {label}: agentd {ours:.0} ms, rg {rg:.0} ms ({:.2}x; {lines} results)",
                ours / rg
            )
        });
    }
    rows.join("\n")
}
