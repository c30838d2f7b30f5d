//! Benchmarks of the real daemon against an instant mock provider (run by hand, not in CI):
//!
//! ```text
//! cargo run --release -p agentd-tests --bin agentd-bench [rounds|core|ssh|acp|sandbox|mcp|hooks|skills|checkpoints]
//! ```
//!
//! With `core`, only the figures issue 23 holds the event path and the session core to (a
//! couple of minutes): per-round overhead with the CPU time behind it, event latency, RSS
//! fresh and with 100 sessions, and the bytes allocated per event, each beside its goal. With
//! `ssh`, only the figure for sessions over ssh; with `acp`, only the event latency over
//! the socket and through `agentctl acp`, and the bridge's RSS; with `checkpoints`, only
//! issue 26's figures (`bench/checkpoints.rs`).
//!
//! The daemons are built with the `count-allocations` feature: a counting global allocator
//! (three relaxed atomic adds per allocation) whose totals `SIGUSR1` prints to the daemon's
//! log, where the allocation figure reads them.
//!
//! Prints: per-tool-round overhead of a 10-round `echo` task (median of runs), the cost of the
//! bare `bash -c echo` it includes, daemon RSS idle and with 100 idle sessions, the latency
//! from the provider sending a text delta to a subscriber receiving the event (p50/p99), the
//! same through `agentctl acp` to an ACP client's `agent_message_chunk` with the bridge's RSS,
//! `session/create` latency in a git repository, and the `grep` and `glob` tools over a
//! generated tree of 50,000 files beside `rg` (when installed) on the same tree, and, with
//! 10,000 stored sessions, the time from starting the daemon to its socket answering,
//! `session/list`, and the first `session/get` of a stored session (which loads it), and
//! (with `sshd` installed) the time per `read_file` and per `shell` round of a session over ssh beside a
//! local one.
//!
//! With the daemon under `strace` (when installed; the daemons take turns, one task each, so
//! a shared machine's load weighs on all alike): the same per-round overhead with strace
//! alone and with every `fdatasync`/`fsync` slowed by 5 ms (a busy or network disk), the
//! syncs and renames each 11-turn task costs, and `session/create` latency. Then RSS after a session whose tools print 60 MB with
//! nobody subscribed, and after that session is unloaded (also with glibc's mmap threshold
//! fixed, which tells memory the allocator keeps from memory the daemon holds); RSS with 1,000
//! idle sessions; and
//! `session/list` latency while another session writes many MB. Last, a table of the figures
//! issue 11 asks for beside those measured before the session core was rewritten.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "bench/checkpoints.rs"]
mod checkpoints;
#[path = "bench/container.rs"]
mod container;
#[path = "bench/remote_search.rs"]
mod remote_search;

use agentd_tests::mock::{Chunk, Gate, MockProvider, Reply};
use agentd_tests::strace::SessionSyncs;
use agentd_tests::{RawClient, TestDaemon, sse};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const ROUNDS: usize = 10;
const RUNS: usize = 21;
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
    // Every daemon here counts its allocations (see `alloc_bench`).
    agentd_tests::build_with_features(&["agentd/count-allocations"]);
    let only = std::env::args().nth(1);
    if only.as_deref() == Some("core") {
        print_core(&core_bench().await);
        return;
    }
    if only.as_deref() == Some("rounds") {
        print_rounds().await;
        return;
    }
    if only.as_deref() == Some("ssh") {
        print_ssh(ssh_bench().await.as_ref());
        return;
    }
    if only.as_deref() == Some("mcp") {
        print_mcp(mcp_bench().await.as_ref());
        return;
    }
    if only.as_deref() == Some("container") {
        container::print(container::bench().await.as_ref());
        return;
    }
    if only.as_deref() == Some("remote-search") {
        remote_search::print(remote_search::bench().await.as_ref());
        return;
    }
    if only.as_deref() == Some("checkpoints") {
        checkpoints::print(&checkpoints::bench().await);
        return;
    }
    if only.as_deref() == Some("sandbox") {
        print_sandbox(&sandbox_bench().await);
        return;
    }
    if only.as_deref() == Some("hooks") {
        print_hooks(&hooks_bench().await);
        return;
    }
    if only.as_deref() == Some("skills") {
        print_skills(&skills_bench().await);
        return;
    }
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::start(&mock.url).await.unwrap();
    if only.as_deref() == Some("acp") {
        let mut client = daemon.client().await.unwrap();
        let workdir = tempfile::tempdir().unwrap();
        let latencies = socket_latency(&mock, &daemon, &mut client, workdir.path()).await;
        let acp = acp_bench(&mock, &daemon, workdir.path()).await;
        print_acp(&latencies, &acp);
        return;
    }
    let pid = daemon.pid();
    let (idle_rss, with_100) = sessions_rss(&daemon).await;

    // The per-round task, by turns on this daemon and (when strace is installed) on one under
    // strace and one whose syncs strace slows.
    let traces = tempfile::tempdir().unwrap();
    let trace_files = [
        traces.path().join("plain.txt"),
        traces.path().join("slow.txt"),
    ];
    let strace = agentd_tests::strace::find();
    let mut traced = Vec::new();
    if let Some(program) = &strace {
        for (file, delay) in trace_files.iter().zip([None, Some(SLOW_SYNC)]) {
            traced.push(strace_daemon(&mock, program, file, delay).await);
        }
    }
    mock.respond_with(echo_rounds);
    let mut quiet = Rounds::new(daemon).await;
    for _ in 0..RUNS {
        quiet.run().await;
        for rounds in &mut traced {
            rounds.run().await;
        }
    }
    let per_round = quiet.sorted();
    let cpu = quiet.cpu;
    let Rounds {
        daemon,
        mut client,
        workdir,
        ..
    } = quiet;
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

    let latencies = socket_latency(&mock, &daemon, &mut client, workdir.path()).await;
    let allocations = alloc_bench(&mock, &daemon).await;
    let acp = acp_bench(&mock, &daemon, workdir.path()).await;
    let sandbox = sandbox_bench().await;

    let after_runs = rss_kib(pid);

    let creates = create_latency(&daemon, &mut client).await;
    let search = search_bench(&mock, &daemon, &mut client).await;
    drop(client);
    let store = store_bench(daemon).await;
    let mut disk = Vec::new();
    for (rounds, file) in traced.into_iter().zip(&trace_files) {
        disk.push(finish_strace(&mock, rounds, file).await);
    }
    let disk = match <[StraceRun; 2]>::try_from(disk) {
        Ok([plain, slow]) => Some((plain, slow)),
        Err(_) => None,
    };
    let output = output_bench(&mock, &[]).await;
    // The same with glibc's mmap threshold fixed: it otherwise rises to the size of the largest
    // block freed (3 MB outputs), and freed blocks below it stay in the heap, counted in RSS.
    let output_mmap = output_bench(&mock, &[("MALLOC_MMAP_THRESHOLD_", "131072")]).await;
    let many = idle_sessions_bench(&mock).await;
    let ssh = ssh_bench().await;

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mb = |kib: u64| kib as f64 / 1024.0;
    let quiet_round = ms(per_round[RUNS / 2]);
    println!("agentd benchmark (release daemon, instant mock provider, 2-core machine)");
    println!(
        "per tool round, {ROUNDS}-round echo task: median {quiet_round:.2} ms (min {:.2}, max {:.2}, {RUNS} runs)",
        ms(per_round[0]),
        ms(per_round[RUNS - 1])
    );
    println!(
        "  of which bash -c 'echo x' alone: median {:.2} ms",
        ms(bash[bash.len() / 2])
    );
    println!(
        "event latency, provider delta -> subscriber ({LATENCY_SAMPLES} samples): p50 {:.0} us, p99 {:.0} us, max {:.0} us",
        percentile(&latencies, 0.5).as_secs_f64() * 1e6,
        percentile(&latencies, 0.99).as_secs_f64() * 1e6,
        latencies[LATENCY_SAMPLES - 1].as_secs_f64() * 1e6
    );
    print_acp(&latencies, &acp);
    println!(
        "daemon RSS: idle {:.1} MB; with 100 idle sessions {:.1} MB (+{:.1} kB per session); after the runs above {:.1} MB",
        mb(idle_rss),
        mb(with_100),
        (with_100.saturating_sub(idle_rss)) as f64 / 100.0,
        mb(after_runs)
    );
    match &creates {
        Some(c) => println!(
            "session/create in a git repository ({CREATES} creates): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            ms(percentile(c, 0.5)),
            ms(percentile(c, 0.99)),
            ms(c[c.len() - 1])
        ),
        None => println!("session/create: git is not installed; not measured"),
    }
    println!("{search}");
    print_ssh(ssh.as_ref());
    print_sandbox(&sandbox);
    println!("{}", store.line);
    match &disk {
        Some((plain, slow)) => {
            for (label, run) in [
                ("strace, no delay", plain),
                ("strace, every sync +5 ms", slow),
            ] {
                println!(
                    "per tool round under {label}: median {:.2} ms (min {:.2}, max {:.2}, {RUNS} runs)",
                    ms(run.per_round[RUNS / 2]),
                    ms(run.per_round[0]),
                    ms(run.per_round[RUNS - 1])
                );
                let m = run.median_syncs();
                println!(
                    "  syscalls per {}-turn task (create, task, graceful stop; median of {RUNS}): {} fdatasync + {} fsync + {} rename; journal syncs {} (range {}..={}), session.json replaced {} times",
                    ROUNDS + 1,
                    m.fdatasync,
                    m.fsync,
                    m.renames,
                    m.journal_syncs,
                    run.syncs.iter().map(|s| s.journal_syncs).min().unwrap_or(0),
                    run.syncs.iter().map(|s| s.journal_syncs).max().unwrap_or(0),
                    m.record_writes
                );
                println!(
                    "  session/create (no git repository): p50 {:.2} ms, p99 {:.2} ms",
                    ms(percentile(&run.creates, 0.5)),
                    ms(percentile(&run.creates, 0.99))
                );
                println!("  session/list {}", run.list.describe());
            }
        }
        None => {
            println!("strace is not installed: slowed-disk and sync-count figures not measured")
        }
    }
    println!(
        "daemon RSS, one session whose tools print {WRITER_ROUNDS} x {} MB, nobody subscribed: before it {:.1} MB, after it {:.1} MB, after it is unloaded {:.1} MB (unloaded {:.1} s after it went idle)",
        WRITER_BYTES / 1_000_000,
        mb(output.before),
        mb(output.after),
        mb(output.unloaded),
        output.unload_wait.as_secs_f64()
    );
    println!(
        "  same with MALLOC_MMAP_THRESHOLD_=131072 (glibc returns large blocks at once): before it {:.1} MB, after it {:.1} MB, after it is unloaded {:.1} MB",
        mb(output_mmap.before),
        mb(output_mmap.after),
        mb(output_mmap.unloaded)
    );
    println!(
        "daemon RSS with {IDLE_SESSIONS} idle sessions (one short turn each): {:.1} MB (idle daemon {:.1} MB, +{:.1} kB per session)",
        mb(many.rss),
        mb(many.idle_rss),
        many.rss.saturating_sub(many.idle_rss) as f64 / IDLE_SESSIONS as f64
    );
    println!(
        "session/list with {IDLE_SESSIONS} sessions {}",
        many.list.describe()
    );

    // Issue 11's figures beside those of the session core before its rewrite.
    let mut rows: Vec<[String; 4]> = vec![[
        "per tool round, quiet disk".into(),
        format!("{quiet_round:.2} ms"),
        "3.93 ms (last note); 6 ms (issue)".into(),
        "<= 3 ms".into(),
    ]];
    match &disk {
        Some((plain, slow)) => {
            let (plain_round, slow_round) =
                (ms(plain.per_round[RUNS / 2]), ms(slow.per_round[RUNS / 2]));
            let (p, s) = (plain.median_syncs(), slow.median_syncs());
            rows.extend([
                [
                    "per tool round, every sync +5 ms".into(),
                    format!(
                        "{slow_round:.2} ms ({:.2}x quiet; strace alone {plain_round:.2} ms)",
                        slow_round / quiet_round
                    ),
                    "53 ms (issue)".into(),
                    "<= 1.5x quiet".into(),
                ],
                [
                    format!("syscalls per {}-turn task", ROUNDS + 1),
                    format!(
                        "{} fdatasync + {} fsync + {} rename ({} journal syncs)",
                        p.fdatasync, p.fsync, p.renames, p.journal_syncs
                    ),
                    "69 fdatasync + 25 fsync".into(),
                    format!("journal <= {} (1/turn, 1/round)", 2 * ROUNDS + 1),
                ],
                [
                    "  same, every sync +5 ms".into(),
                    format!(
                        "{} fdatasync + {} fsync + {} rename ({} journal syncs)",
                        s.fdatasync, s.fsync, s.renames, s.journal_syncs
                    ),
                    "-".into(),
                    "fewer (group commit)".into(),
                ],
                [
                    "session/create p50 / p99, +5 ms syncs".into(),
                    format!(
                        "{:.2} / {:.2} ms (strace alone {:.2} / {:.2} ms)",
                        ms(percentile(&slow.creates, 0.5)),
                        ms(percentile(&slow.creates, 0.99)),
                        ms(percentile(&plain.creates, 0.5)),
                        ms(percentile(&plain.creates, 0.99))
                    ),
                    "not measured".into(),
                    "answer at once".into(),
                ],
                [
                    "session/list while writing, +5 ms syncs".into(),
                    slow.list.writing_figure(),
                    "not measured".into(),
                    "-".into(),
                ],
            ]);
        }
        None => rows.push([
            "slowed disk, syncs per task".into(),
            "strace not installed".into(),
            "53 ms; 69 fdatasync + 25 fsync".into(),
            "-".into(),
        ]),
    }
    rows.extend([
        [
            "event latency p50 / p99".into(),
            format!(
                "{:.0} / {:.0} us",
                percentile(&latencies, 0.5).as_secs_f64() * 1e6,
                percentile(&latencies, 0.99).as_secs_f64() * 1e6
            ),
            "98 / 128 us".into(),
            "-".into(),
        ],
        [
            "session/create p50 / p99 (git repo)".into(),
            creates.as_ref().map_or("git not installed".into(), |c| {
                format!(
                    "{:.2} / {:.2} ms",
                    ms(percentile(c, 0.5)),
                    ms(percentile(c, 0.99))
                )
            }),
            "not measured (issue: 4 git runs, ~10 ms CPU)".into(),
            "answer at once".into(),
        ],
        [
            "RSS idle / 100 sessions".into(),
            format!("{:.1} / {:.1} MB", mb(idle_rss), mb(with_100)),
            "8.1 / 17.6 MB".into(),
            "-".into(),
        ],
        [
            format!(
                "RSS after {} MB of tool output",
                WRITER_ROUNDS * WRITER_BYTES / 1_000_000
            ),
            format!("{:.1} MB", mb(output.after)),
            "141 MB (issue)".into(),
            "<= 48 MB".into(),
        ],
        [
            "  same, after it is unloaded".into(),
            format!("{:.1} MB", mb(output.unloaded)),
            "never unloaded".into(),
            "-".into(),
        ],
        [
            "  same, MALLOC_MMAP_THRESHOLD_=131072".into(),
            format!(
                "{:.1} MB; unloaded {:.1} MB",
                mb(output_mmap.after),
                mb(output_mmap.unloaded)
            ),
            "-".into(),
            "(allocator retention)".into(),
        ],
        [
            format!("RSS with {IDLE_SESSIONS} idle sessions"),
            format!("{:.1} MB", mb(many.rss)),
            "not measured".into(),
            "-".into(),
        ],
        [
            format!("session/list ({IDLE_SESSIONS} sessions) while writing"),
            many.list.writing_figure(),
            "not measured".into(),
            "-".into(),
        ],
        [
            format!("start with {STORED_SESSIONS} stored sessions"),
            format!("{:.0} ms", store.ready_ms),
            "110 ms".into(),
            "-".into(),
        ],
        [
            format!("session/list, {STORED_SESSIONS} stored"),
            format!("{:.0} ms", store.list_ms),
            "78 ms".into(),
            "-".into(),
        ],
    ]);
    print_table("before (old core)", &rows);
    print_core(&CoreFigures {
        per_round,
        cpu,
        latencies,
        idle_rss,
        with_100,
        allocations,
    });
}

/// Prints `rows` as a Markdown table of the figure, its value now, `before`, and the goal.
fn print_table(before: &str, rows: &[[String; 4]]) {
    let header = [
        "figure".to_owned(),
        "now".to_owned(),
        before.to_owned(),
        "goal".to_owned(),
    ];
    let widths: Vec<usize> = (0..4)
        .map(|i| {
            rows.iter()
                .chain([&header])
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    println!();
    for (n, row) in [&header].into_iter().chain(rows).enumerate() {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, &w)| format!("{cell:<w$}"))
            .collect();
        println!("| {} |", cells.join(" | "));
        if n == 0 {
            let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
            println!("|-{}-|", rule.join("-|-"));
        }
    }
}

/// The daemon's RSS (KiB) idle, and after 100 sessions are created (nobody subscribed).
async fn sessions_rss(daemon: &TestDaemon) -> (u64, u64) {
    let mut client = daemon.client().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let idle = rss_kib(daemon.pid());
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..100 {
        daemon
            .create_session(&mut client, dir.path(), json!({}))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    (idle, rss_kib(daemon.pid()))
}

/// The figures issue 23 holds the event path and the session core to.
struct CoreFigures {
    /// Time per tool round of the echo task, sorted.
    per_round: Vec<Duration>,
    /// CPU time the daemon and its commands spent in those rounds.
    cpu: Cpu,
    /// Event latency (provider delta -> subscriber), sorted.
    latencies: Vec<Duration>,
    /// RSS (KiB) of a fresh daemon, and with 100 idle sessions.
    idle_rss: u64,
    with_100: u64,
    allocations: AllocFigures,
}

/// `agentd-bench core`: only the figures of [`CoreFigures`], on one daemon.
async fn core_bench() -> CoreFigures {
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::start(&mock.url).await.unwrap();
    let (idle_rss, with_100) = sessions_rss(&daemon).await;
    mock.respond_with(echo_rounds);
    let mut rounds = Rounds::new(daemon).await;
    for _ in 0..RUNS {
        rounds.run().await;
    }
    let per_round = rounds.sorted();
    let cpu = rounds.cpu;
    let latencies = socket_latency(
        &mock,
        &rounds.daemon,
        &mut rounds.client,
        rounds.workdir.path(),
    )
    .await;
    let allocations = alloc_bench(&mock, &rounds.daemon).await;
    CoreFigures {
        per_round,
        cpu,
        latencies,
        idle_rss,
        with_100,
        allocations,
    }
}

/// The per-round figure alone (a quick check while working on it).
async fn print_rounds() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::start(&mock.url).await.unwrap();
    mock.respond_with(echo_rounds);
    let mut rounds = Rounds::new(daemon).await;
    for _ in 0..RUNS {
        rounds.run().await;
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let per_round = rounds.sorted();
    let median = |v: &[Duration]| {
        let mut v = v.to_vec();
        v.sort();
        ms(v[v.len() / 2])
    };
    let (own, children) = rounds.cpu.per_round_ms(RUNS * ROUNDS);
    println!(
        "per tool round, {ROUNDS}-round echo task: median {:.2} ms (min {:.2}, max {:.2}, {RUNS} runs); CPU per round: daemon {own:.2} ms, commands {children:.2} ms",
        ms(per_round[RUNS / 2]),
        ms(per_round[0]),
        ms(per_round[RUNS - 1]),
    );
    println!(
        "  medians: session/create {:.2} ms; submit to the first command {:.2} ms; from one command to the next {:.2} ms; last command to the end {:.2} ms",
        median(&rounds.creates),
        median(&rounds.first_call),
        median(&rounds.steady),
        median(&rounds.last),
    );
}

fn print_core(f: &CoreFigures) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mb = |kib: u64| kib as f64 / 1024.0;
    let a = &f.allocations;
    println!(
        "allocations per event, {ALLOC_DELTAS}-delta stream: {:.0} bytes in {:.1} allocations with {ALLOC_SUBSCRIBERS} subscribers; {:.0} bytes in {:.1} with one, so +{:.0} bytes in {:.1} per subscriber; heap in use after: {:.1} MB of {:.1} MB RSS",
        a.many.bytes_per_event(),
        a.many.count_per_event(),
        a.one.bytes_per_event(),
        a.one.count_per_event(),
        a.per_subscriber_bytes(),
        a.per_subscriber_count(),
        a.live_bytes as f64 / 1048576.0,
        mb(a.rss_kib)
    );
    let (own, children) = f.cpu.per_round_ms(f.per_round.len() * ROUNDS);
    println!(
        "CPU per tool round (load-independent, unlike the wall time): daemon {own:.2} ms, the commands it ran {children:.2} ms"
    );
    let rows = [
        [
            format!("per tool round, {ROUNDS}-round echo task (median of {RUNS})"),
            format!("{:.2} ms", ms(f.per_round[f.per_round.len() / 2])),
            BEFORE_PER_ROUND.into(),
            "<= 2.5 ms".into(),
        ],
        [
            "  CPU per tool round: daemon + commands".into(),
            format!("{own:.2} + {children:.2} ms"),
            BEFORE_CPU.into(),
            "less".into(),
        ],
        [
            "event latency p50 / p99".into(),
            format!(
                "{:.0} / {:.0} us",
                us(percentile(&f.latencies, 0.5)),
                us(percentile(&f.latencies, 0.99))
            ),
            BEFORE_LATENCY.into(),
            "same or better".into(),
        ],
        [
            "RSS fresh".into(),
            format!("{:.1} MB", mb(f.idle_rss)),
            BEFORE_IDLE_RSS.into(),
            "<= 10 MB".into(),
        ],
        [
            "RSS with 100 idle sessions".into(),
            format!("{:.1} MB", mb(f.with_100)),
            BEFORE_RSS_100.into(),
            "<= 20 MB".into(),
        ],
        [
            format!("allocated per event, {ALLOC_SUBSCRIBERS} subscribers"),
            format!(
                "{:.0} bytes, {:.1} allocations",
                a.many.bytes_per_event(),
                a.many.count_per_event()
            ),
            BEFORE_ALLOCATIONS.into(),
            "same or better".into(),
        ],
    ];
    println!("\nissue 23 (the event path and the session core):");
    print_table("before (issue 23)", &rows);
}

/// Tool rounds of each task of [`ssh_bench`], and its runs in each environment.
const SSH_ROUNDS: usize = 20;
const SSH_RUNS: usize = 15;

/// Sorted times per tool round of one task in one environment, after the first; and of the
/// first round, which includes the session's start (its git snapshot and project docs).
#[derive(Default)]
struct SshFigures {
    per_round: Vec<Duration>,
    first: Vec<Duration>,
}

/// The tasks [`ssh_bench`] times: `read_file` rounds (the remote file worker) and `shell`
/// rounds (`echo`, a remote command each).
const SSH_TOOLS: [&str; 2] = ["read_file", "shell"];

/// Where each task runs: locally, over ssh, and over ssh to a remote without Perl, whose
/// commands each get a channel of their own as every remote command did before the command
/// worker.
const SSH_PLACES: [&str; 3] = ["local", "ssh", "ssh without perl"];

fn print_ssh(figures: Option<&[[SshFigures; 3]; 2]>) {
    let Some(tasks) = figures else {
        println!("ssh: sshd is not installed; not measured");
        return;
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for (tool, places) in SSH_TOOLS.iter().zip(tasks) {
        let local = ms(places[0].per_round[SSH_RUNS / 2]);
        let remote: Vec<String> = SSH_PLACES[1..]
            .iter()
            .zip(&places[1..])
            .map(|(place, f)| {
                let m = ms(f.per_round[SSH_RUNS / 2]);
                format!("{place} median {m:.2} ms (+{:.2} ms)", m - local)
            })
            .collect();
        println!(
            "ssh: per {tool} round, {SSH_ROUNDS}-round task, sshd on 127.0.0.1: local median {local:.2} ms, {} ({SSH_RUNS} runs each, by turns)",
            remote.join(", ")
        );
        let first: Vec<String> = SSH_PLACES
            .iter()
            .zip(places)
            .map(|(place, f)| format!("{place} median {:.2} ms", ms(f.first[SSH_RUNS / 2])))
            .collect();
        println!(
            "  first round of a new session (its start: git snapshot, project docs): {}",
            first.join(", ")
        );
    }
}

/// Runs one task in `session`: the time to the end of its first tool call (the session's
/// start included), and the time of the rest.
async fn timed_task(client: &mut RawClient, session: &str, text: &str) -> (Duration, Duration) {
    client.subscribe(session, None).await.unwrap();
    let started = Instant::now();
    client
        .call(
            "session/submit",
            json!({"session_id": session, "text": text}),
        )
        .await
        .unwrap();
    client
        .events_until("tool_call_end", |_| true)
        .await
        .unwrap();
    let first = started.elapsed();
    let started = Instant::now();
    client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    (first, started.elapsed())
}

/// Shell rounds per sandbox setting, each sorted: `[off, workspace_write]`, per round and the
/// first round of a new session.
struct SandboxFigures {
    per_round: [Vec<Duration>; 2],
    first: [Vec<Duration>; 2],
}

/// The `echo` task by turns in a session with the sandbox off and in a default
/// (`workspace_write`) one, whose commands join the session's namespaces and Landlock.
async fn sandbox_bench() -> SandboxFigures {
    let mock = MockProvider::start().await.unwrap();
    mock.respond_with(echo_rounds);
    let daemon = TestDaemon::start(&mock.url).await.unwrap();
    let mut client = daemon.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut figures = SandboxFigures {
        per_round: [Vec::new(), Vec::new()],
        first: [Vec::new(), Vec::new()],
    };
    for run in 0..=SSH_RUNS {
        for (i, sandbox) in ["off", "workspace_write"].into_iter().enumerate() {
            let session = daemon
                .create_session(
                    &mut client,
                    dir.path(),
                    json!({"config": {"sandbox": sandbox}}),
                )
                .await
                .unwrap();
            let (first, rest) = timed_task(&mut client, &session, "go").await;
            // The first run is a warm-up.
            if run > 0 {
                figures.per_round[i].push(rest / (ROUNDS - 1) as u32);
                figures.first[i].push(first);
            }
        }
    }
    for times in figures.per_round.iter_mut().chain(&mut figures.first) {
        times.sort();
    }
    figures
}

fn print_sandbox(f: &SandboxFigures) {
    let ms = |d: &[Duration]| d[d.len() / 2].as_secs_f64() * 1e3;
    let (off, on) = (ms(&f.per_round[0]), ms(&f.per_round[1]));
    println!(
        "sandbox: per shell round, {ROUNDS}-round echo task: off median {off:.2} ms, workspace_write (namespaces + Landlock) median {on:.2} ms, +{:.2} ms per command ({SSH_RUNS} runs each, by turns)",
        on - off
    );
    let (off, on) = (ms(&f.first[0]), ms(&f.first[1]));
    println!(
        "  first round of a new session (git snapshot in its own sandbox, the session's namespaces built): off median {off:.2} ms, workspace_write median {on:.2} ms"
    );
}

/// Shell rounds without hooks and with a no-op `pre_tool_use` hook, each sorted, and the
/// hook's own run (`bash -c true` with a JSON stdin, started from here).
struct HookFigures {
    per_round: [Vec<Duration>; 2],
    hook_alone: Vec<Duration>,
}

/// The `echo` task by turns on a daemon without hooks and on one whose every tool call runs
/// a no-op hook (`true`), both with the sandbox off.
async fn hooks_bench() -> HookFigures {
    let mock = MockProvider::start().await.unwrap();
    mock.respond_with(echo_rounds);
    let daemon = |config: &'static str| {
        TestDaemon::builder()
            .env("ANTHROPIC_BASE_URL", &mock.url)
            .env("ANTHROPIC_API_KEY", "test-key")
            .config(config)
            .start()
    };
    let daemons = [
        daemon("").await.unwrap(),
        daemon("[[hooks.pre_tool_use]]\ncommand = \"true\"\n")
            .await
            .unwrap(),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut figures = HookFigures {
        per_round: [Vec::new(), Vec::new()],
        hook_alone: Vec::new(),
    };
    for run in 0..=SSH_RUNS {
        for (i, daemon) in daemons.iter().enumerate() {
            let mut client = daemon.client().await.unwrap();
            let session = daemon
                .create_session(
                    &mut client,
                    dir.path(),
                    json!({"config": {"sandbox": "off"}}),
                )
                .await
                .unwrap();
            let (_, rest) = timed_task(&mut client, &session, "go").await;
            if run > 0 {
                figures.per_round[i].push(rest / (ROUNDS - 1) as u32);
            }
        }
    }
    let stdin = br#"{"session_id":"s","transcript_path":"/t","cwd":"/","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"echo round-1"}}"#;
    for _ in 0..100 {
        use std::io::Write;
        let started = Instant::now();
        let mut child = std::process::Command::new("/bin/bash")
            .args(["-c", "true"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let _ = child.stdin.take().unwrap().write_all(stdin);
        child.wait_with_output().unwrap();
        figures.hook_alone.push(started.elapsed());
    }
    for times in figures
        .per_round
        .iter_mut()
        .chain([&mut figures.hook_alone])
    {
        times.sort();
    }
    figures
}

fn print_hooks(f: &HookFigures) {
    let ms = |d: &[Duration]| d[d.len() / 2].as_secs_f64() * 1e3;
    let (without, with, alone) = (ms(&f.per_round[0]), ms(&f.per_round[1]), ms(&f.hook_alone));
    println!(
        "hooks: per shell round, {ROUNDS}-round echo task: no hooks median {without:.2} ms, a no-op pre_tool_use hook median {with:.2} ms (+{:.2} ms); the hook alone (bash -c true, spawned here) median {alone:.2} ms; overhead over the hook's own run {:.2} ms (goal <= 2 ms; {SSH_RUNS} runs each, by turns)",
        with - without,
        with - without - alone
    );
}

/// Answers `SSH_ROUNDS` calls of the tool the task's text names (`read_file` of `f.txt`, or
/// `shell` running `echo`), then text.
fn ssh_rounds(body: &Value) -> Reply {
    let done = tool_results(body);
    if done >= SSH_ROUNDS {
        return Reply::Stream(sse::text("done"));
    }
    let id = format!("r{done}");
    Reply::Stream(if body["messages"][0].to_string().contains("shell") {
        sse::shell(&id, &format!("echo round-{done}"))
    } else {
        sse::tools("", &[(&id, "read_file", json!({"file_path": "f.txt"}))])
    })
}

/// Each task of [`SSH_TOOLS`], by turns in each of [`SSH_PLACES`] (sshd on 127.0.0.1; one
/// connection each, started by the warm-up run); `None` without sshd.
async fn ssh_bench() -> Option<[[SshFigures; 3]; 2]> {
    let server = agentd_tests::sshd::SshServer::start().unwrap()?;
    let no_perl = agentd_tests::sshd::path_without(&["perl"]).unwrap();
    let plain =
        agentd_tests::sshd::SshServer::start_with_path(Some(&no_perl.path().display().to_string()))
            .unwrap()?;
    let mock = MockProvider::start().await.unwrap();
    mock.respond_with(ssh_rounds);
    let hosts = format!("{}{}", server.host_entry("box"), plain.host_entry("plain"));
    let daemon = TestDaemon::start_with_config(
        &[
            ("ANTHROPIC_BASE_URL", &mock.url),
            ("ANTHROPIC_API_KEY", "bench-key"),
        ],
        Some(&hosts),
    )
    .await
    .unwrap();
    let mut client = daemon.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.txt"), "x\n".repeat(100)).unwrap();
    let mut tasks: [[SshFigures; 3]; 2] = Default::default();
    for (tool, places) in SSH_TOOLS.iter().zip(&mut tasks) {
        // The first run of each is a warm-up: it starts the connection and the remote workers.
        for run in 0..=SSH_RUNS {
            for (place, figures) in [None, Some("box"), Some("plain")]
                .into_iter()
                .zip(&mut *places)
            {
                let session = match place {
                    Some(host) => {
                        let created = client
                            .call(
                                "session/create",
                                json!({"environment": {"kind": "ssh", "host": host,
                                    "cwd": dir.path().display().to_string()}}),
                            )
                            .await
                            .unwrap();
                        created["session_id"].as_str().unwrap().to_owned()
                    }
                    None => daemon
                        .create_session(&mut client, dir.path(), json!({}))
                        .await
                        .unwrap(),
                };
                let (first, rest) = timed_task(&mut client, &session, tool).await;
                if run > 0 {
                    figures.per_round.push(rest / (SSH_ROUNDS - 1) as u32);
                    figures.first.push(first);
                }
            }
        }
        for figures in places.iter_mut() {
            figures.per_round.sort();
            figures.first.sort();
        }
    }
    Some(tasks)
}

/// Event latency: the provider sends one text delta at a time; each is timed until the
/// subscriber has it. Sorted.
async fn socket_latency(
    mock: &MockProvider,
    daemon: &TestDaemon,
    client: &mut RawClient,
    cwd: &Path,
) -> Vec<Duration> {
    let gates = gated_stream(mock);
    let session = daemon.create_session(client, cwd, json!({})).await.unwrap();
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
    latencies
}

/// Queues a reply that streams [`LATENCY_SAMPLES`] text deltas, each held until its gate opens.
fn gated_stream(mock: &MockProvider) -> Vec<Gate> {
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
    gates
}

/// The ACP line: the bridge's latency beside the socket's, and its RSS.
fn print_acp(socket: &[Duration], acp: &AcpFigures) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "ACP: provider delta -> `agentctl acp` client's agent_message_chunk ({LATENCY_SAMPLES} samples): p50 {:.0} us, p99 {:.0} us, max {:.0} us (socket: p50 {:.0} us, so +{:.0} us); bridge RSS {:.1} MB after the stream",
        us(percentile(&acp.latencies, 0.5)),
        us(percentile(&acp.latencies, 0.99)),
        us(acp.latencies[LATENCY_SAMPLES - 1]),
        us(percentile(socket, 0.5)),
        us(percentile(&acp.latencies, 0.5)) - us(percentile(socket, 0.5)),
        acp.rss_kib as f64 / 1024.0
    );
}

/// What the ACP bridge adds.
struct AcpFigures {
    /// Gate opened -> the ACP client read the `agent_message_chunk`, sorted.
    latencies: Vec<Duration>,
    /// `agentctl acp`'s RSS after the stream.
    rss_kib: u64,
}

/// The event-latency measurement through `agentctl acp`: an ACP client (JSON lines on the
/// bridge's stdio) opens a session and prompts; each gated delta is timed until its
/// `agent_message_chunk` arrives.
async fn acp_bench(mock: &MockProvider, daemon: &TestDaemon, cwd: &Path) -> AcpFigures {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let gates = gated_stream(mock);
    let mut child = tokio::process::Command::from(daemon.command("agentctl"))
        .arg("acp")
        .env("AGENTD_NO_AUTOSTART", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = async |v: Value| {
        stdin.write_all(format!("{v}\n").as_bytes()).await.unwrap();
    };
    // The answer to request `id` (an ACP agent takes nothing before `initialize` is answered).
    let mut answer = async |id: u64| loop {
        let line: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        if line["id"] == id {
            assert!(line["error"].is_null(), "{line}");
            return line;
        }
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})).await;
    answer(1).await;
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}})).await;
    let session = answer(2).await["result"]["sessionId"].clone();
    send(json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": session, "prompt": [{"type": "text", "text": "stream"}]}})).await;
    let mut latencies = Vec::with_capacity(LATENCY_SAMPLES);
    for gate in &gates {
        let sent = Instant::now();
        gate.open();
        loop {
            let line = lines.next_line().await.unwrap().unwrap();
            if line.contains("agent_message_chunk") {
                break;
            }
        }
        latencies.push(sent.elapsed());
    }
    loop {
        let line = lines.next_line().await.unwrap().unwrap();
        if line.contains("\"stopReason\"") {
            break;
        }
    }
    latencies.sort();
    AcpFigures {
        latencies,
        rss_kib: rss_kib(pid),
    }
}

/// Answers `ROUNDS` `echo` calls, then text: the per-round task.
fn echo_rounds(body: &Value) -> Reply {
    let done = tool_results(body);
    if done < ROUNDS {
        Reply::Stream(sse::shell(
            &format!("t{done}"),
            &format!("echo round-{done}"),
        ))
    } else {
        Reply::Stream(sse::text("done"))
    }
}

/// A daemon the per-round task runs on, with what each run measured. The daemons compared
/// (quiet disk, under strace, slowed syncs) take turns, one task each, so that the load of a
/// shared machine weighs on all of them alike.
struct Rounds {
    daemon: TestDaemon,
    client: RawClient,
    workdir: tempfile::TempDir,
    /// Time per tool round of each task, from `session/submit` to `processing_end`.
    per_round: Vec<Duration>,
    /// `session/create` of each task's session.
    creates: Vec<Duration>,
    /// From `session/submit` to the first command's start (the session's start included).
    first_call: Vec<Duration>,
    /// Between one command's start and the next, on average over the task.
    steady: Vec<Duration>,
    /// From the last command's start to `processing_end`.
    last: Vec<Duration>,
    /// Each task's session.
    sessions: Vec<String>,
    /// CPU time the daemon spent in the tasks, and the commands it ran (reaped children).
    cpu: Cpu,
}

/// CPU time of a process and of its reaped children, in clock ticks (`/proc/PID/stat`).
#[derive(Clone, Copy, Default)]
struct Cpu {
    own: u64,
    children: u64,
}

impl Cpu {
    fn of(pid: u32) -> Self {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The fields after the command name, which may hold spaces: utime is the 12th.
        let fields: Vec<u64> = stat
            .rsplit_once(')')
            .map_or("", |(_, rest)| rest)
            .split_whitespace()
            .skip(11)
            .take(4)
            .filter_map(|f| f.parse().ok())
            .collect();
        match fields[..] {
            [utime, stime, cutime, cstime] => Self {
                own: utime + stime,
                children: cutime + cstime,
            },
            _ => Self::default(),
        }
    }

    /// Milliseconds per round of `rounds`: the daemon's own, its commands'.
    fn per_round_ms(&self, rounds: usize) -> (f64, f64) {
        let tick_ms = 1e3
            / nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
                .ok()
                .flatten()
                .unwrap_or(100) as f64;
        let ms = |ticks: u64| ticks as f64 * tick_ms / rounds as f64;
        (ms(self.own), ms(self.children))
    }
}

impl Rounds {
    async fn new(daemon: TestDaemon) -> Self {
        Self {
            client: daemon.client().await.unwrap(),
            daemon,
            workdir: tempfile::tempdir().unwrap(),
            per_round: Vec::new(),
            creates: Vec::new(),
            first_call: Vec::new(),
            steady: Vec::new(),
            last: Vec::new(),
            sessions: Vec::new(),
            cpu: Cpu::default(),
        }
    }

    /// One task in a new, subscribed session (the mock must answer with [`echo_rounds`]).
    async fn run(&mut self) {
        let started = Instant::now();
        let session = self
            .daemon
            .create_session(&mut self.client, self.workdir.path(), json!({}))
            .await
            .unwrap();
        self.creates.push(started.elapsed());
        self.client.subscribe(&session, None).await.unwrap();
        let cpu = Cpu::of(self.daemon.pid());
        let started = Instant::now();
        self.client
            .call(
                "session/submit",
                json!({"session_id": session, "text": "go"}),
            )
            .await
            .unwrap();
        // When each command starts: the first shows what the session's start costs.
        let mut starts = Vec::new();
        loop {
            let item = self.client.item().await.unwrap();
            match item["kind"].as_str() {
                Some("tool_call_start") => starts.push(started.elapsed()),
                Some("processing_end") => break,
                _ => {}
            }
        }
        let total = started.elapsed();
        self.per_round.push(total / ROUNDS as u32);
        if let (Some(first), Some(last)) = (starts.first(), starts.last()) {
            self.first_call.push(*first);
            self.steady
                .push((*last - *first) / (starts.len().max(2) - 1) as u32);
            self.last.push(total - *last);
        }
        let after = Cpu::of(self.daemon.pid());
        self.cpu.own += after.own - cpu.own;
        self.cpu.children += after.children - cpu.children;
        self.sessions.push(session);
    }

    /// The sorted per-round times.
    fn sorted(&self) -> Vec<Duration> {
        let mut v = self.per_round.clone();
        v.sort();
        v
    }
}

const CREATES: usize = 200;

/// `session/create` latencies (sorted) in a small git repository with a change and an
/// untracked file, so the session's git snapshot has something to find; `None` without git.
async fn create_latency(daemon: &TestDaemon, client: &mut RawClient) -> Option<Vec<Duration>> {
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(repo.path())
            .output()
            .is_ok_and(|o| o.status.success())
    };
    for i in 0..50 {
        std::fs::write(
            repo.path().join(format!("f{i}.rs")),
            format!("fn f{i}() {{}}\n"),
        )
        .unwrap();
    }
    let ready = git(&["init", "-q"])
        && git(&["add", "."])
        && git(&[
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@agentd.invalid",
            "commit",
            "-qm",
            "init",
        ]);
    if !ready {
        return None;
    }
    std::fs::write(repo.path().join("f0.rs"), "fn changed() {}\n").unwrap();
    std::fs::write(repo.path().join("new.rs"), "fn new() {}\n").unwrap();
    let mut times = Vec::with_capacity(CREATES);
    for _ in 0..CREATES {
        let started = Instant::now();
        daemon
            .create_session(client, repo.path(), json!({}))
            .await
            .unwrap();
        times.push(started.elapsed());
    }
    times.sort();
    // Let the snapshots taken in the background finish before the next measurement.
    tokio::time::sleep(Duration::from_secs(3)).await;
    Some(times)
}

/// Every `fdatasync` and `fsync` is slowed this much in the slowed-disk runs.
const SLOW_SYNC: Duration = Duration::from_millis(5);

/// What one daemon under `strace` measured.
struct StraceRun {
    /// Time per tool round, sorted.
    per_round: Vec<Duration>,
    /// `session/create` times, sorted.
    creates: Vec<Duration>,
    /// The syscalls of each task's session, from creation to the daemon's graceful stop.
    syncs: Vec<SessionSyncs>,
    /// `session/list` while another session writes.
    list: ListLatency,
}

impl StraceRun {
    /// The median of each count over the tasks.
    fn median_syncs(&self) -> SessionSyncs {
        let median = |f: fn(&SessionSyncs) -> usize| {
            let mut v: Vec<usize> = self.syncs.iter().map(f).collect();
            v.sort();
            v[v.len() / 2]
        };
        SessionSyncs {
            journal_syncs: median(|s| s.journal_syncs),
            record_writes: median(|s| s.record_writes),
            fdatasync: median(|s| s.fdatasync),
            fsync: median(|s| s.fsync),
            renames: median(|s| s.renames),
        }
    }
}

/// A daemon under `strace` writing its trace to `file`, each sync slowed by `delay`.
async fn strace_daemon(
    mock: &MockProvider,
    program: &Path,
    file: &Path,
    delay: Option<Duration>,
) -> Rounds {
    let daemon = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .wrap(program, agentd_tests::strace::args(file, delay))
        .start()
        .await
        .unwrap();
    Rounds::new(daemon).await
}

/// Measures `session/list` while a session writes on a daemon under `strace` whose tasks have
/// run, stops it gracefully, and counts each task's syscalls from its trace.
async fn finish_strace(mock: &MockProvider, mut rounds: Rounds, trace: &Path) -> StraceRun {
    let list = list_while_writing(
        mock,
        &rounds.daemon,
        &mut rounds.client,
        rounds.workdir.path(),
    )
    .await;
    let per_round = rounds.sorted();
    let Rounds {
        mut daemon,
        client,
        mut creates,
        sessions,
        ..
    } = rounds;
    drop(client);
    daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    let trace = std::fs::read_to_string(trace).unwrap();
    creates.sort();
    StraceRun {
        per_round,
        creates,
        syncs: sessions
            .iter()
            .map(|id| SessionSyncs::count(&trace, id))
            .collect(),
        list,
    }
}

/// Tool calls of the heavy-output task, and what each prints.
const WRITER_ROUNDS: usize = 20;
const WRITER_BYTES: usize = 3_000_000;
const LIST_SAMPLES: usize = 100;

/// Answers `WRITER_ROUNDS` shell calls printing `WRITER_BYTES` each, then text.
fn heavy_output(body: &Value) -> Reply {
    let done = tool_results(body);
    if done < WRITER_ROUNDS {
        Reply::Stream(sse::shell(
            &format!("w{done}"),
            &format!("head -c {WRITER_BYTES} /dev/zero | tr '\\0' x"),
        ))
    } else {
        Reply::Stream(sse::text("written"))
    }
}

/// Reads `daemon/event` notifications until `session` is idle.
async fn wait_idle(watcher: &mut RawClient, session: &str) {
    loop {
        let n = watcher.notification().await.unwrap();
        let event = &n["params"]["result"];
        if event["kind"] == "state_changed"
            && event["session_id"] == session
            && event["state"] == "idle"
        {
            return;
        }
    }
}

/// `session/list` latencies (sorted), with nothing running and while a session writes.
struct ListLatency {
    quiet: Vec<Duration>,
    writing: Vec<Duration>,
}

impl ListLatency {
    fn writing_figure(&self) -> String {
        format!(
            "p50 {:.2} / p99 {:.2} ms",
            percentile(&self.writing, 0.5).as_secs_f64() * 1e3,
            percentile(&self.writing, 0.99).as_secs_f64() * 1e3
        )
    }

    fn describe(&self) -> String {
        format!(
            "latency: quiet p50 {:.2} / p99 {:.2} ms ({} calls); while a session's tools print {WRITER_ROUNDS} x {} MB: {} ({} calls)",
            percentile(&self.quiet, 0.5).as_secs_f64() * 1e3,
            percentile(&self.quiet, 0.99).as_secs_f64() * 1e3,
            self.quiet.len(),
            WRITER_BYTES / 1_000_000,
            self.writing_figure(),
            self.writing.len()
        )
    }
}

/// Times `session/list` back to back: `LIST_SAMPLES` calls with nothing running, then as many
/// as fit while a new session's tools print `WRITER_ROUNDS` x `WRITER_BYTES`.
async fn list_while_writing(
    mock: &MockProvider,
    daemon: &TestDaemon,
    client: &mut RawClient,
    cwd: &Path,
) -> ListLatency {
    let mut quiet = Vec::with_capacity(LIST_SAMPLES);
    for _ in 0..LIST_SAMPLES {
        let started = Instant::now();
        client.call("session/list", json!({})).await.unwrap();
        quiet.push(started.elapsed());
    }
    mock.respond_with(heavy_output);
    let writer = daemon.create_session(client, cwd, json!({})).await.unwrap();
    let mut watcher = daemon.client().await.unwrap();
    watcher.call("daemon/subscribe", json!({})).await.unwrap();
    client
        .call(
            "session/submit",
            json!({"session_id": writer, "text": "write"}),
        )
        .await
        .unwrap();
    let done = tokio::spawn(async move { wait_idle(&mut watcher, &writer).await });
    let mut writing = Vec::new();
    // Bounded: the writer's work takes seconds, each call milliseconds.
    while !done.is_finished() && writing.len() < 20_000 {
        let started = Instant::now();
        client.call("session/list", json!({})).await.unwrap();
        writing.push(started.elapsed());
    }
    done.await.unwrap();
    quiet.sort();
    writing.sort();
    ListLatency { quiet, writing }
}

/// RSS of a daemon around one session with a lot of tool output and nobody subscribed.
struct OutputRss {
    before: u64,
    after: u64,
    unloaded: u64,
    /// From the session going idle to the daemon logging that it unloaded it.
    unload_wait: Duration,
}

/// Unload idle sessions after this long in the output run (the default is 10 minutes).
const EVICT_SECS: u64 = 2;

/// Runs the output session on a daemon with `env` added (allocator settings).
async fn output_bench(mock: &MockProvider, env: &[(&str, &str)]) -> OutputRss {
    let daemon = env
        .iter()
        .fold(TestDaemon::builder(), |b, (k, v)| b.env(k, v))
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .config(&format!("[daemon]\nevict_idle_secs = {EVICT_SECS}\n"))
        .start()
        .await
        .unwrap();
    let pid = daemon.pid();
    let mut client = daemon.client().await.unwrap();
    let mut watcher = daemon.client().await.unwrap();
    watcher.call("daemon/subscribe", json!({})).await.unwrap();
    let workdir = tempfile::tempdir().unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = rss_kib(pid);
    mock.respond_with(heavy_output);
    let session = daemon
        .create_session(&mut client, workdir.path(), json!({}))
        .await
        .unwrap();
    client
        .call(
            "session/submit",
            json!({"session_id": session, "text": "write"}),
        )
        .await
        .unwrap();
    wait_idle(&mut watcher, &session).await;
    let idle = Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib(pid);
    let deadline = idle + Duration::from_secs(EVICT_SECS * 10);
    while !daemon
        .log_text()
        .lines()
        .any(|l| l.contains("unloaded an idle session") && l.contains(&session))
    {
        assert!(
            Instant::now() < deadline,
            "the session was not unloaded: {}",
            daemon.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let unload_wait = idle.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    OutputRss {
        before,
        after,
        unloaded: rss_kib(pid),
        unload_wait,
    }
}

const IDLE_SESSIONS: usize = 1000;

/// A daemon with many idle sessions: its RSS, and `session/list` over them.
struct ManySessions {
    idle_rss: u64,
    rss: u64,
    list: ListLatency,
}

/// Creates `IDLE_SESSIONS` sessions with one short turn each (nobody subscribed), measures
/// RSS, then `session/list` quiet and while another session writes.
async fn idle_sessions_bench(mock: &MockProvider) -> ManySessions {
    let daemon = TestDaemon::start(&mock.url).await.unwrap();
    let pid = daemon.pid();
    let mut client = daemon.client().await.unwrap();
    let mut watcher = daemon.client().await.unwrap();
    watcher.call("daemon/subscribe", json!({})).await.unwrap();
    let workdir = tempfile::tempdir().unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let idle_rss = rss_kib(pid);
    mock.respond_with(|_| Reply::Stream(sse::text("ok")));
    for _ in 0..IDLE_SESSIONS {
        let session = daemon
            .create_session(&mut client, workdir.path(), json!({}))
            .await
            .unwrap();
        client
            .call(
                "session/submit",
                json!({"session_id": session, "text": "hi"}),
            )
            .await
            .unwrap();
        wait_idle(&mut watcher, &session).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss = rss_kib(pid);
    let list = list_while_writing(mock, &daemon, &mut client, workdir.path()).await;
    ManySessions {
        idle_rss,
        rss,
        list,
    }
}

const STORED_SESSIONS: usize = 10_000;

/// What the stored-sessions run measured.
struct StoreFigures {
    line: String,
    ready_ms: f64,
    list_ms: f64,
}

/// Fills the state directory with copies of a real session (a finished tool-round task), then
/// times a fresh daemon.
async fn store_bench(mut daemon: TestDaemon) -> StoreFigures {
    daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    let dir = daemon.sessions_dir();
    // The smallest journal with history entries and a tool round: one of the echo tasks.
    let (template, log) = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let log = std::fs::read_to_string(p.join("log.jsonl")).ok()?;
            (log.contains("{\"entry\":") && log.contains("\"tool_call_end\"")).then_some((p, log))
        })
        .min_by_key(|(_, log)| log.len())
        .expect("a stored session with a tool round");
    let record: Value =
        serde_json::from_slice(&std::fs::read(template.join("session.json")).unwrap()).unwrap();
    let template_id = record["id"].as_str().unwrap().to_owned();
    let existing = std::fs::read_dir(&dir).unwrap().count();
    for i in existing..STORED_SESSIONS {
        let id = format!("00000000-0000-4000-8000-{i:012}");
        let session = dir.join(&id);
        std::fs::create_dir(&session).unwrap();
        let mut record = record.clone();
        record["id"] = json!(id);
        record["state"] = json!(if i % 2 == 0 { "idle" } else { "closed" });
        record["open"] = json!(false);
        std::fs::write(session.join("session.json"), record.to_string()).unwrap();
        // Every event line names its session.
        std::fs::write(session.join("log.jsonl"), log.replace(&template_id, &id)).unwrap();
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
    let (ready_ms, list_ms) = (ms(ready), ms(list));
    StoreFigures {
        line: format!(
            "{STORED_SESSIONS} stored sessions (median of 5 starts): start to socket ready {ready_ms:.0} ms; session/list {list_ms:.0} ms; first session/get of a stored session (loads it) {:.1} ms",
            ms(first_get)
        ),
        ready_ms,
        list_ms,
    }
}

const TREE_DIRS: usize = 500;
const TREE_FILES: usize = 100;
const SEARCH_RUNS: usize = 5;

/// Runs `tool` with `args` `runs` times over in one task of `session`; returns its events.
async fn repeated_tool(
    mock: &MockProvider,
    client: &mut RawClient,
    session: &str,
    tool: &'static str,
    args: Value,
    runs: usize,
) -> Vec<Value> {
    mock.respond_with(move |body| {
        if tool_results(body) < runs {
            Reply::Stream(sse::tools("", &[("s", tool, args.clone())]))
        } else {
            Reply::Stream(sse::text("done"))
        }
    });
    client.subscribe(session, None).await.unwrap();
    client
        .call(
            "session/submit",
            json!({"session_id": session, "text": "search"}),
        )
        .await
        .unwrap();
    client
        .events_until("processing_end", |_| true)
        .await
        .unwrap()
}

/// How long each tool call of `events` took, by the daemon's clock (ms).
fn tool_durations(events: &[Value]) -> Vec<f64> {
    events
        .iter()
        .filter(|e| e["kind"] == "tool_call_end")
        .map(|e| e["data"]["duration_ms"].as_f64().unwrap())
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// `grep` and `glob` through the daemon (the tool's own duration, from `tool_call_end`) and
/// `rg` on the same generated tree.
async fn search_bench(
    mock: &MockProvider,
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
        let events = repeated_tool(mock, client, &session, tool, args, SEARCH_RUNS).await;
        let ours = tool_durations(&events);
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

/// The issue 23 figures measured before its work on the reference machine when it was quiet
/// (median of three runs of `agentd-bench core` at the commit that added them, with
/// jsonschema 0.61 already in; RSS with 100 sessions from before that, with 0.30).
const BEFORE_PER_ROUND: &str = "3.91 ms (issue: 3.1 ms)";
const BEFORE_CPU: &str = "2.38 + 1.86 ms";
const BEFORE_LATENCY: &str = "73 / 123 us";
const BEFORE_IDLE_RSS: &str = "10.1 MB";
const BEFORE_RSS_100: &str = "20.9 MB";
const BEFORE_ALLOCATIONS: &str = "30581 bytes, 145.7 allocations";

/// Subscribers of the allocation run, and the text deltas its reply streams at once.
const ALLOC_SUBSCRIBERS: usize = 10;
const ALLOC_DELTAS: usize = 1000;

/// The daemon's allocation counters (`agentd/src/allocations.rs`).
#[derive(Clone, Copy, Default)]
struct Counters {
    count: u64,
    bytes: u64,
    live: i64,
}

impl Counters {
    /// Asks the daemon for its counters (SIGUSR1) and reads the line it writes to its log.
    async fn read(daemon: &TestDaemon) -> Self {
        const PREFIX: &str = "agentd allocations: ";
        let lines = |log: &str| log.lines().filter(|l| l.starts_with(PREFIX)).count();
        let before = lines(&daemon.log_text());
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(daemon.pid() as i32),
            nix::sys::signal::Signal::SIGUSR1,
        )
        .unwrap();
        let deadline = Instant::now() + agentd_tests::WAIT;
        loop {
            let log = daemon.log_text();
            if lines(&log) > before {
                let line = log.lines().rfind(|l| l.starts_with(PREFIX)).unwrap();
                let field = |name: &str| {
                    line.split_whitespace()
                        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                        .and_then(|v| v.parse::<i64>().ok())
                        .unwrap_or_else(|| panic!("no {name} in {line:?}"))
                };
                return Self {
                    count: field("count") as u64,
                    bytes: field("bytes") as u64,
                    live: field("live"),
                };
            }
            assert!(
                Instant::now() < deadline,
                "no allocation counters in the log: was agentd built with count-allocations?"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// What a stream allocated in the daemon, and the events each subscriber got.
struct StreamAllocations {
    allocated: Counters,
    events: usize,
}

impl StreamAllocations {
    fn bytes_per_event(&self) -> f64 {
        self.allocated.bytes as f64 / self.events as f64
    }

    fn count_per_event(&self) -> f64 {
        self.allocated.count as f64 / self.events as f64
    }
}

/// Allocations per event with one subscriber and with [`ALLOC_SUBSCRIBERS`], and the heap.
struct AllocFigures {
    one: StreamAllocations,
    many: StreamAllocations,
    /// Bytes allocated and not freed after the runs, and the RSS then (KiB).
    live_bytes: i64,
    rss_kib: u64,
}

impl AllocFigures {
    fn per_subscriber_bytes(&self) -> f64 {
        (self.many.bytes_per_event() - self.one.bytes_per_event()) / (ALLOC_SUBSCRIBERS - 1) as f64
    }

    fn per_subscriber_count(&self) -> f64 {
        (self.many.count_per_event() - self.one.count_per_event()) / (ALLOC_SUBSCRIBERS - 1) as f64
    }
}

/// The daemon's allocations while a session streams [`ALLOC_DELTAS`] text deltas to one
/// subscriber, then to [`ALLOC_SUBSCRIBERS`] (each its own connection, read concurrently): all
/// it allocates in the window (the request, decoding, events, journal, fan-out, sockets) over
/// the events one subscriber got.
async fn alloc_bench(mock: &MockProvider, daemon: &TestDaemon) -> AllocFigures {
    let dir = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    for subscribers in [1, ALLOC_SUBSCRIBERS] {
        let mut client = daemon.client().await.unwrap();
        let session = daemon
            .create_session(&mut client, dir.path(), json!({}))
            .await
            .unwrap();
        let mut readers = Vec::new();
        for _ in 0..subscribers {
            let mut reader = daemon.client().await.unwrap();
            reader.subscribe(&session, None).await.unwrap();
            readers.push(reader);
        }
        let text: Vec<Chunk> = (0..ALLOC_DELTAS)
            .map(|i| Chunk::Data(format!(
                "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"d{i} \"}}}}\n\n"
            )))
            .collect();
        let mut chunks = vec![sse::message_start()];
        chunks.push(Chunk::Data("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n".into()));
        chunks.extend(text);
        chunks.push(Chunk::Data(
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
                .into(),
        ));
        chunks.extend(sse::message_end("end_turn"));
        mock.push(Reply::Stream(chunks));
        let reading: Vec<_> = readers
            .into_iter()
            .map(|mut reader| {
                tokio::spawn(async move {
                    reader
                        .events_until("processing_end", |_| true)
                        .await
                        .unwrap()
                        .len()
                })
            })
            .collect();
        let before = Counters::read(daemon).await;
        client
            .call(
                "session/submit",
                json!({"session_id": session, "text": "stream"}),
            )
            .await
            .unwrap();
        let mut events = 0;
        for reader in reading {
            events = reader.await.unwrap();
        }
        let after = Counters::read(daemon).await;
        runs.push(StreamAllocations {
            allocated: Counters {
                count: after.count - before.count,
                bytes: after.bytes - before.bytes,
                live: after.live - before.live,
            },
            events,
        });
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let live_bytes = Counters::read(daemon).await.live;
    let [one, many] = <[StreamAllocations; 2]>::try_from(runs).ok().unwrap();
    AllocFigures {
        one,
        many,
        live_bytes,
        rss_kib: rss_kib(daemon.pid()),
    }
}

/// What MCP servers cost a session: `session/create` with none and with three configured
/// (they start at the session's first input, so it should not change), and an `echo` call of
/// server-everything timed by the daemon (the server's round trip, and the whole call).
struct McpFigures {
    create_without: Duration,
    create_with_three: Duration,
    create_with_three_slow: Duration,
    request_us: f64,
    total_us: f64,
    calls: usize,
}

async fn mcp_bench() -> Option<McpFigures> {
    let index = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../target/mcp-npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    if !index.is_file() {
        eprintln!("server-everything is not installed (.ci/run); no MCP figures");
        return None;
    }
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("AGENTD_LOG", "info,agentd_core::mcp=debug")
        .start()
        .await
        .unwrap();
    let mut client = daemon.client().await.unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let server = json!({"command": "node", "args": [index, "stdio"]});
    let three = json!({"config": {"mcp_servers": {"a": server, "b": server, "c": server}}});
    // Servers that take 30 s to start (they never answer): a create that waited for them
    // would show it.
    let slow = json!({"command": "sh", "args": ["-c", "sleep 30"]});
    let three_slow = json!({"config": {"mcp_servers": {"a": slow, "b": slow, "c": slow}}});
    let mut create = async |params: &Value| {
        let mut times = Vec::new();
        for _ in 0..20 {
            let started = Instant::now();
            let id = daemon
                .create_session(&mut client, workdir.path(), params.clone())
                .await
                .unwrap();
            times.push(started.elapsed());
            // No input: its servers never start.
            client
                .call("session/close", json!({"session_id": id}))
                .await
                .unwrap();
        }
        times.sort();
        percentile(&times, 0.5)
    };
    let create_without = create(&json!({})).await;
    let create_with_three = create(&three).await;
    let create_with_three_slow = create(&three_slow).await;

    let calls = 100;
    let session = daemon
        .create_session(
            &mut client,
            workdir.path(),
            json!({"config": {"mcp_servers": {"e": server}}}),
        )
        .await
        .unwrap();
    client.subscribe(&session, None).await.unwrap();
    for i in 0..calls {
        mock.push_stream(agentd_tests::sse::tools(
            "",
            &[(&format!("c{i}"), "mcp__e__echo", json!({"message": "hi"}))],
        ));
        mock.push_stream(agentd_tests::sse::text("ok"));
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
    }
    let log = daemon.log_text();
    let field = |line: &str, key: &str| -> Option<f64> {
        let rest = line.split(&format!("{key}=")).nth(1)?;
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("MCP call")).collect();
    let request: Vec<f64> = lines
        .iter()
        .filter_map(|l| field(l, "request_us"))
        .collect();
    let total: Vec<f64> = lines.iter().filter_map(|l| field(l, "total_us")).collect();
    Some(McpFigures {
        create_without,
        create_with_three,
        create_with_three_slow,
        request_us: median(request),
        total_us: median(total),
        calls: lines.len(),
    })
}

fn print_mcp(f: Option<&McpFigures>) {
    let Some(f) = f else {
        return;
    };
    println!("MCP (server-everything over stdio)");
    println!(
        "  session/create, median of 20: {:.2} ms without servers, {:.2} ms with three configured, \
         {:.2} ms with three that take 30 s to start (goal: no difference; the servers start \
         at the session's first input)",
        f.create_without.as_secs_f64() * 1000.0,
        f.create_with_three.as_secs_f64() * 1000.0,
        f.create_with_three_slow.as_secs_f64() * 1000.0
    );
    println!(
        "  echo, median of {} calls: the server's round trip {:.0} µs, the whole call {:.0} µs: {:.0} µs of agentd's own (goal: ≤ 1 ms)",
        f.calls,
        f.request_us,
        f.total_us,
        f.total_us - f.request_us
    );
}

/// `session/create` with and without 100 Agent Skills (50 in the workspace, 50 in the home):
/// the difference is what finding them at session start costs.
struct SkillsFigures {
    without: Duration,
    with_100: Duration,
    /// The first session after the files were written: every one is read.
    first: Duration,
    creates: usize,
}

async fn skills_bench() -> SkillsFigures {
    const CREATES: usize = 41;
    let mock = MockProvider::start().await.unwrap();
    let daemon = TestDaemon::start(&mock.url).await.unwrap();
    let mut client = daemon.client().await.unwrap();
    let empty = tempfile::tempdir().unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let skill = |root: &Path, n: usize| {
        let dir = root.join(format!(".agents/skills/skill-{n:03}"));
        std::fs::create_dir_all(dir.join("references")).unwrap();
        let description = format!(
            "Does task number {n} the way this team does it: conventions, commands and checks. \
             Use when the user asks for task {n} or mentions its tools."
        );
        let body = "Step by step instructions for the task.\n".repeat(25);
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: skill-{n:03}\ndescription: {description}\nlicense: MIT\nmetadata:\n  version: \"1.0\"\n---\n\n# Skill {n}\n\n{body}"),
        )
        .unwrap();
        std::fs::write(dir.join("references/guide.md"), "A guide.\n").unwrap();
    };
    for n in 0..50 {
        skill(workdir.path(), n);
        skill(daemon.root.path(), 50 + n);
    }
    // The home's skills count for every session: first the sessions without any (the
    // workspace's alone are then timed against an empty one), by turns.
    let home_skills = daemon.root.path().join(".agents");
    let parked = daemon.root.path().join("parked-agents");
    let mut create = async |cwd: &Path| {
        let started = Instant::now();
        let id = daemon
            .create_session(&mut client, cwd, json!({}))
            .await
            .unwrap();
        let took = started.elapsed();
        client
            .call("session/close", json!({"session_id": id}))
            .await
            .unwrap();
        took
    };
    let first = create(workdir.path()).await;
    // Skills are written long before the sessions that use them: a file changed in the last
    // two seconds is read again by every discovery (its times could hide a change to come).
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let (mut without, mut with_100) = (Vec::new(), Vec::new());
    for _ in 0..CREATES {
        std::fs::rename(&home_skills, &parked).unwrap();
        without.push(create(empty.path()).await);
        std::fs::rename(&parked, &home_skills).unwrap();
        with_100.push(create(workdir.path()).await);
    }
    without.sort();
    with_100.sort();
    let snapshot = client
        .call("session/create", json!({"cwd": workdir.path()}))
        .await
        .unwrap();
    let found = snapshot["skills"].as_array().map_or(0, Vec::len);
    assert_eq!(found, 100, "every skill is found");
    SkillsFigures {
        without: percentile(&without, 0.5),
        with_100: percentile(&with_100, 0.5),
        first,
        creates: CREATES,
    }
}

fn print_skills(f: &SkillsFigures) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "session/create, median of {}: {:.2} ms without skills, {:.2} ms with 100 skills: \
         {:.2} ms to find them (goal: ≤ 2 ms); {:.2} ms for the first session, which reads \
         every file",
        f.creates,
        ms(f.without),
        ms(f.with_100),
        ms(f.with_100.saturating_sub(f.without)),
        ms(f.first)
    );
}
