//! `agentd-bench container`: what issue 27's container environment costs. A ten-round `echo`
//! task by turns in a local session (sandbox off, as a container session's own sandbox is)
//! and in a container session of the busybox test image: the time per shell round after the
//! first; and `session/create` of a container session (the engine's create and start, and the
//! worker's exec), beside a local one's. The same container session on the same engine
//! reached as a remote one (`https://127.0.0.1:PORT`, a TLS endpoint in front of its socket,
//! `agentd_tests::tls_engine`) measures the remote path: an exec per command, output on its
//! attach stream. Podman's API service (`target/podman/podman.sock`, started by `.ci/run`),
//! when it answers, is measured beside dockerd on the same terms, and so is the engine
//! reached as `ssh://box` through the test sshd on 127.0.0.1 (`docker system dial-stdio`
//! over the daemon's ssh master), where sshd is found.

use super::{timed_task, tool_results};
use agentd_tests::engine::{Engine, IMAGE};
use agentd_tests::mock::{MockProvider, Reply};
use agentd_tests::sshd::SshServer;
use agentd_tests::tls_engine::TlsEngine;
use agentd_tests::{TestDaemon, sse};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const ROUNDS: usize = 10;
const RUNS: usize = 15;

pub(crate) struct Figures {
    /// Per shell round after the first: local, container, container on the TLS engine, on
    /// Podman (empty without it), on the ssh engine (empty without sshd).
    per_round: [Vec<Duration>; 5],
    /// `session/create`: the same five.
    create: [Vec<Duration>; 5],
}

fn rounds(body: &Value) -> Reply {
    let done = tool_results(body);
    if done >= ROUNDS {
        return Reply::Stream(sse::text("done"));
    }
    Reply::Stream(sse::shell(
        &format!("r{done}"),
        &format!("echo round-{done}"),
    ))
}

/// `None` without an engine.
pub(crate) async fn bench() -> Option<Figures> {
    let engine = Engine::get()?;
    let podman = Engine::podman();
    let mock = MockProvider::start().await.unwrap();
    mock.respond_with(rounds);
    let tls = TlsEngine::start(&engine.host).await.unwrap();
    let remote = tls.host.replacen("tcp://", "https://", 1);
    let cli = engine.remote_cli().unwrap();
    let server = SshServer::start_with_first(cli.path()).unwrap();
    let mut builder = TestDaemon::builder();
    if let Some(server) = &server {
        builder = builder.config(&server.host_entry("box"));
    }
    let daemon = builder
        .env("ANTHROPIC_BASE_URL", &mock.url)
        .env("ANTHROPIC_API_KEY", "bench-key")
        .env("DOCKER_HOST", &engine.host)
        .env("DOCKER_CERT_PATH", &tls.certs.path().display().to_string())
        .start()
        .await
        .unwrap();
    let mut client = daemon.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().display().to_string();
    let mut figures = Figures {
        per_round: Default::default(),
        create: Default::default(),
    };
    // The first run is a warm-up.
    for run in 0..=RUNS {
        for (place, environment) in [
            json!({"kind": "local"}),
            json!({"kind": "container", "image": IMAGE}),
            json!({"kind": "container", "image": IMAGE, "engine": remote}),
            json!({"kind": "container", "image": IMAGE, "engine": podman.map(|p| &p.host)}),
            json!({"kind": "container", "image": IMAGE, "engine": "ssh://box"}),
        ]
        .into_iter()
        .enumerate()
        {
            if (place == 3 && podman.is_none()) || (place == 4 && server.is_none()) {
                continue;
            }
            let started = Instant::now();
            let created = client
                .call(
                    "session/create",
                    json!({"cwd": cwd, "environment": environment, "config": {"sandbox": "off"}}),
                )
                .await
                .unwrap();
            let create = started.elapsed();
            let session = created["session_id"].as_str().unwrap().to_owned();
            let (_, rest) = timed_task(&mut client, &session, "echo").await;
            client
                .call("session/close", json!({"session_id": session}))
                .await
                .unwrap();
            if run > 0 {
                figures.per_round[place].push(rest / (ROUNDS - 1) as u32);
                figures.create[place].push(create);
            }
        }
    }
    for list in figures
        .per_round
        .iter_mut()
        .chain(figures.create.iter_mut())
    {
        list.sort();
    }
    Some(figures)
}

pub(crate) fn print(figures: Option<&Figures>) {
    let Some(f) = figures else {
        println!("container: no container engine answers (DOCKER_HOST); not measured");
        return;
    };
    let ms = |d: &[Duration]| d[RUNS / 2].as_secs_f64() * 1e3;
    let (local, container) = (ms(&f.per_round[0]), ms(&f.per_round[1]));
    println!(
        "container: per shell round, {ROUNDS}-round echo task, busybox image on the local engine: local median {local:.2} ms, container median {container:.2} ms (+{:.2} ms) ({RUNS} runs each, by turns)",
        container - local
    );
    let tls = ms(&f.per_round[2]);
    println!(
        "  the same engine reached over TLS (https://127.0.0.1, the remote path: an exec per command): container median {tls:.2} ms (+{:.2} ms over local)",
        tls - local
    );
    println!(
        "  session/create: local median {:.1} ms, container median {:.1} ms, over TLS {:.1} ms (engine create + start; the worker's exec comes with the first command)",
        ms(&f.create[0]),
        ms(&f.create[1]),
        ms(&f.create[2])
    );
    if f.per_round[3].is_empty() {
        println!(
            "  Podman: no `podman system service` answers (target/podman/podman.sock); not measured"
        );
    } else {
        let podman = ms(&f.per_round[3]);
        println!(
            "  Podman's API service (local socket): container median {podman:.2} ms per round ({:+.2} ms over local), session/create median {:.1} ms",
            podman - local,
            ms(&f.create[3])
        );
    }
    if f.per_round[4].is_empty() {
        println!("  over ssh://: no sshd; not measured");
        return;
    }
    println!(
        "  the same engine as ssh://box (sshd on 127.0.0.1, `docker system dial-stdio` over the ssh master): per shell round median {:.2} ms (+{:.2} ms over local), session/create median {:.1} ms",
        ms(&f.per_round[4]),
        ms(&f.per_round[4]) - local,
        ms(&f.create[4])
    );
}
