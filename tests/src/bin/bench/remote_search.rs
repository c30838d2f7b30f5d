//! `agentd-bench remote-search`: what `list_dir`, `glob` and `grep` cost in a container
//! session on a remote engine (the test engine behind a TLS endpoint, as in `container`)
//! beside a local session of the same workspace. The workspace is shaped like a built
//! project: 1,000 source files (8 MiB) in 40 directories, a git-ignored `target/` of 50 MiB
//! and a `.git` of 50 MiB, which a remote search must not send. Each figure is the tool's
//! time by the daemon's clock (`duration_ms` of its `tool_call_end`).

use super::{median, repeated_tool, tool_durations};
use agentd_tests::TestDaemon;
use agentd_tests::engine::{Engine, IMAGE};
use agentd_tests::mock::MockProvider;
use agentd_tests::tls_engine::TlsEngine;
use serde_json::{Value, json};
use std::path::Path;

/// Runs of each search in each session (the first one's warm-up included).
const RUNS: usize = 8;

/// The searches measured: the tool and its arguments.
fn searches() -> [(&'static str, Value); 3] {
    [
        ("list_dir", json!({"depth": 2})),
        ("glob", json!({"pattern": "**/*.rs"})),
        ("grep", json!({"pattern": "needle_[0-9]+"})),
    ]
}

pub(crate) struct Figures {
    /// Per search, the median in ms: local, then the container on the TLS engine.
    times: Vec<[f64; 2]>,
}

fn workspace(root: &Path) {
    let write = |path: &Path, bytes: &[u8]| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    };
    write(&root.join(".gitignore"), b"target/\n");
    let line = "    let value = compute(input, options).unwrap_or_default();\n";
    for d in 0..40 {
        for f in 0..25 {
            let mut text = line.repeat(8 * 1024 / line.len());
            if f == 0 {
                text.push_str(&format!("    // needle_{d}\n"));
            }
            write(&root.join(format!("src/m{d}/f{f}.rs")), text.as_bytes());
        }
    }
    let blob = vec![b'x'; 256 * 1024];
    for n in 0..200 {
        write(&root.join(format!("target/debug/o{n}.rlib")), &blob);
        write(&root.join(format!(".git/objects/{n:02x}/pack")), &blob);
    }
}

/// `None` without an engine.
pub(crate) async fn bench() -> Option<Figures> {
    let engine = Engine::get()?;
    let mock = MockProvider::start().await.unwrap();
    let tls = TlsEngine::start(&engine.host).await.unwrap();
    let daemon = TestDaemon::builder()
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "bench-key")
        .env("DOCKER_HOST", &tls.host)
        .env("DOCKER_TLS_VERIFY", "1")
        .env("DOCKER_CERT_PATH", &tls.certs.path().display().to_string())
        .start()
        .await
        .unwrap();
    let mut client = daemon.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    workspace(dir.path());
    let cwd = dir.path().display().to_string();
    let mut figures = Figures { times: Vec::new() };
    for (tool, args) in searches() {
        let mut times = [0.0; 2];
        for (place, environment) in [
            json!({"kind": "local"}),
            json!({"kind": "container", "image": IMAGE}),
        ]
        .into_iter()
        .enumerate()
        {
            let created = client
                .call(
                    "session/create",
                    json!({"cwd": cwd, "profile": "gemini", "environment": environment}),
                )
                .await
                .unwrap();
            let session = created["session_id"].as_str().unwrap();
            let events = repeated_tool(&mock, &mut client, session, tool, args.clone(), RUNS).await;
            let mut durations = tool_durations(&events);
            assert_eq!(durations.len(), RUNS, "{tool} failed: {events:?}");
            durations.remove(0);
            times[place] = median(durations);
        }
        figures.times.push(times);
    }
    Some(figures)
}

pub(crate) fn print(figures: Option<&Figures>) {
    let Some(f) = figures else {
        println!("remote-search: no container engine answers (DOCKER_HOST); not measured");
        return;
    };
    println!(
        "remote-search: a project of 1,000 source files (8 MiB) with a git-ignored target/ (50 MiB) and .git (50 MiB), the tool's time, median of {} after a warm-up:",
        RUNS - 1
    );
    for ((tool, args), [local, remote]) in searches().iter().zip(&f.times) {
        println!(
            "  {tool} {args}: local {local:.1} ms, container on the TLS engine {remote:.1} ms (+{:.1} ms)",
            remote - local
        );
    }
}
