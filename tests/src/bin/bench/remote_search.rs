//! `agentd-bench remote-search`: what `list_dir`, `glob` and `grep` cost in a container
//! session on a remote engine (the test engine behind a TLS endpoint, as in `container`)
//! beside a local session of the same workspace. The workspace is shaped like a built
//! project: 1,000 source files (8 MiB) in 40 directories, a git-ignored `target/` of 50 MiB
//! and a `.git` of 50 MiB, which a remote search must not send. Each figure is the time from
//! the task's submission to the tool call's end (one model round and the tool).

use super::tool_results;
use agentd_tests::engine::{Engine, IMAGE};
use agentd_tests::mock::{MockProvider, Reply};
use agentd_tests::tls_engine::TlsEngine;
use agentd_tests::{TestDaemon, sse};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RUNS: usize = 7;

/// The searches measured: the tool and its arguments.
fn searches() -> [(&'static str, Value); 3] {
    [
        ("list_dir", json!({"depth": 2})),
        ("glob", json!({"pattern": "**/*.rs"})),
        ("grep", json!({"pattern": "needle_[0-9]+"})),
    ]
}

pub(crate) struct Figures {
    /// Per search, sorted: local, then the container on the TLS engine.
    times: Vec<[Vec<Duration>; 2]>,
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
    let current: Arc<Mutex<(String, Value)>> = Arc::default();
    let asked = current.clone();
    mock.respond_with(move |body| {
        // Each task is one search: the answer to its result ends it.
        let last = &body["messages"].as_array().and_then(|m| m.last()).cloned();
        if last
            .as_ref()
            .is_some_and(|m| tool_results(&json!({"messages": [m]})) > 0)
        {
            return Reply::Stream(sse::text("done"));
        }
        let (tool, args) = asked.lock().unwrap().clone();
        Reply::Stream(sse::tools("", &[("q", &tool, args)]))
    });
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
    let mut sessions = Vec::new();
    for environment in [
        json!({"kind": "local"}),
        json!({"kind": "container", "image": IMAGE}),
    ] {
        let created = client
            .call(
                "session/create",
                json!({"cwd": cwd, "profile": "gemini", "environment": environment}),
            )
            .await
            .unwrap();
        sessions.push(created["session_id"].as_str().unwrap().to_owned());
    }
    let mut figures = Figures {
        times: searches().iter().map(|_| Default::default()).collect(),
    };
    // The first run is a warm-up.
    for run in 0..=RUNS {
        for (n, (tool, args)) in searches().into_iter().enumerate() {
            *current.lock().unwrap() = (tool.to_owned(), args);
            for (place, session) in sessions.iter().enumerate() {
                client.subscribe(session, None).await.unwrap();
                let started = Instant::now();
                client
                    .call(
                        "session/submit",
                        json!({"session_id": session, "text": "search"}),
                    )
                    .await
                    .unwrap();
                let end = client
                    .events_until("tool_call_end", |_| true)
                    .await
                    .unwrap();
                let took = started.elapsed();
                let data = &end.last().unwrap()["data"];
                assert!(data["error"].is_null(), "{tool} failed: {data}");
                client
                    .events_until("processing_end", |_| true)
                    .await
                    .unwrap();
                if run > 0 {
                    figures.times[n][place].push(took);
                }
            }
        }
    }
    for pair in &mut figures.times {
        pair.iter_mut().for_each(|t| t.sort());
    }
    Some(figures)
}

pub(crate) fn print(figures: Option<&Figures>) {
    let Some(f) = figures else {
        println!("remote-search: no container engine answers (DOCKER_HOST); not measured");
        return;
    };
    let ms = |d: &[Duration]| d[RUNS / 2].as_secs_f64() * 1e3;
    println!(
        "remote-search: a project of 1,000 source files (8 MiB) with a git-ignored target/ (50 MiB) and .git (50 MiB), submission to tool end, median of {RUNS}:"
    );
    for ((tool, args), [local, remote]) in searches().iter().zip(&f.times) {
        println!(
            "  {tool} {args}: local {:.1} ms, container on the TLS engine {:.1} ms (+{:.1} ms)",
            ms(local),
            ms(remote),
            ms(remote) - ms(local)
        );
    }
}
