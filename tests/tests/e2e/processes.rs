//! Processes a session starts, whatever they do: an abort ends them all within the grace
//! period (TERM-ignoring members, members that escaped into a session of their own, orphans
//! that became zombies), and a daemon killed with `kill -9` ends its leftovers when it starts
//! again, without ever signalling a process that merely reuses a recorded pid.

use crate::{of_kind, setup};
use agentd_tests::{live_group_members, sse};
use serde_json::json;
use std::time::{Duration, Instant};

/// Processes whose last argument starts with `marker` (see [`marker`]), zombies excluded.
pub(crate) fn live_with_marker(marker: &str) -> Vec<i32> {
    crate::live_processes(|args| args.last().is_some_and(|a| a.starts_with(marker)))
}

/// Waits until `ready` holds: [`eventually`](agentd_tests::eventually) for a synchronous check.
pub(crate) async fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    agentd_tests::eventually(what, async || ready()).await;
}

/// A unique marker for this test's processes: `sleep` accepts a sum of durations, so
/// `sleep 600 0.<marker>` sleeps 600 s and carries the marker in its command line. Markers
/// have one width, so none is a prefix of another; tests append a digit to make a second one.
pub(crate) fn marker() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("0.{:07}{n:03}", std::process::id())
}

/// Regression (issue 12): an escaped process holding the output pipes made abort take 15 s
/// and leave the session processing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_with_escaped_and_term_ignoring_members_is_prompt() {
    let mut s = setup().await;
    let escaped = marker();
    let stubborn = format!("{escaped}1");
    let command = format!(
        "echo PGID=$$; (setsid sleep 600 {escaped} &); (trap '' TERM; sleep 600 {stubborn}) & sleep 600"
    );
    s.mock.push_stream(sse::shell("t_escape", &command));
    s.start("escape").await;
    let events = s
        .client
        .events_until("tool_call_output_delta", |e| {
            e["data"]["delta"].as_str().unwrap().contains("PGID=")
        })
        .await
        .unwrap();
    let delta = events.last().unwrap()["data"]["delta"].as_str().unwrap();
    let pgid: i32 = delta.trim().trim_start_matches("PGID=").parse().unwrap();
    wait_for("the escaped and the stubborn process", || {
        live_with_marker(&escaped).len() == 2
    })
    .await;

    let started = Instant::now();
    let aborted = tokio::time::timeout(Duration::from_secs(10), s.call("session/abort", json!({})))
        .await
        .expect("the abort answers within the grace period plus a little, not 15 s");
    eprintln!("abort took {:?}", started.elapsed());
    assert_eq!(aborted["aborted"], true);
    assert_eq!(aborted["state"], "idle");
    assert_eq!(live_group_members(pgid), Vec::<i32>::new());
    assert_eq!(
        live_with_marker(&escaped),
        Vec::<i32>::new(),
        "neither the escaped nor the TERM-ignoring process survives"
    );
    let events = s.until("processing_end").await;
    let end = of_kind(&events, "tool_call_end")[0];
    let error = end["data"]["error"].as_str().unwrap();
    assert!(error.contains("[Command aborted by the user.]"), "{end}");
    assert!(
        error.contains("left the command's process group") && error.contains(&escaped),
        "the escaped process is named: {end}"
    );
    let snapshot = s.call("session/get", json!({})).await;
    assert_eq!(snapshot["state"], "idle");
}

/// `/proc/PID/stat` field 22: when the process started.
fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit_once(')').unwrap().1;
    rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

/// Regression (issue 12): after `kill -9` of the daemon its commands kept running, and the
/// next daemon did not end them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_kill_9_ends_the_commands_the_dead_daemon_left() {
    let mut s = setup().await;
    let escaped = marker();
    let member = format!("{escaped}1");
    let command = format!("(setsid sleep 600 {escaped} &); sleep 600 {member}");
    s.mock.push_stream(sse::shell("t_left", &command));
    s.start("leave").await;
    wait_for("the command's processes", || {
        live_with_marker(&escaped).len() == 2
    })
    .await;

    s.daemon
        .stop_with(nix::sys::signal::Signal::SIGKILL)
        .await
        .unwrap();
    assert_eq!(
        live_with_marker(&escaped).len(),
        2,
        "a killed daemon cannot end them itself"
    );
    s.daemon.restart().await.unwrap();
    // Answered only once the leftovers are ended: that happens before serving.
    let mut client = s.daemon.client().await.unwrap();
    client.call("daemon/info", json!({})).await.unwrap();
    assert_eq!(
        live_with_marker(&escaped),
        Vec::<i32>::new(),
        "the group and the process that left it are gone: {}",
        s.daemon.log_text()
    );
    assert!(
        s.daemon
            .log_text()
            .contains("ended processes a previous agentd left running")
    );

    // Nothing of the session is lost: the log says the running call's work was interrupted,
    // the call gets a result, and the session answers again.
    s.client = client;
    let snapshot = s.call("session/get", json!({})).await;
    assert_eq!(snapshot["state"], "idle", "{snapshot}");
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    let replayed = s
        .client
        .events_until("processing_end", |e| e["data"]["reason"] == "aborted")
        .await
        .unwrap();
    assert_eq!(
        of_kind(&replayed, "tool_call_start")[0]["data"]["call_id"],
        "t_left"
    );
    assert!(
        of_kind(&replayed, "warning")
            .iter()
            .any(|w| w["data"]["message"]
                .as_str()
                .unwrap()
                .contains("interrupted")),
        "{replayed:?}"
    );
    s.mock.push_stream(sse::text("recovered"));
    let events = s.run("go on").await;
    assert_eq!(
        of_kind(&events, "processing_end")[0]["data"]["reason"],
        "completed"
    );
    let sent = s.mock.requests().last().unwrap().body.to_string();
    assert!(
        sent.contains(r#""tool_use_id":"t_left""#),
        "the interrupted call has its result: {sent}"
    );
}

/// A recorded group whose pid now belongs to another process (its start time differs) is
/// never signalled; one whose leader is the recorded process is ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_pid_reused_by_another_process_is_left_alone() {
    use std::os::unix::process::CommandExt;
    let mut s = setup().await;
    s.daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    let spawn = |marker: &str| {
        std::process::Command::new("sleep")
            .args(["600", marker])
            .process_group(0)
            .spawn()
            .unwrap()
    };
    let (stranger_marker, leftover_marker) = (marker(), marker());
    let mut stranger = spawn(&stranger_marker);
    let mut leftover = spawn(&leftover_marker);
    let groups = json!({
        "run": "1-1",
        "groups": [
            {"pgid": stranger.id(), "start_time": start_time(stranger.id()) + 1},
            {"pgid": leftover.id(), "start_time": start_time(leftover.id())},
        ],
    });
    let state = s.daemon.sessions_dir().parent().unwrap().to_owned();
    std::fs::write(state.join("groups.json"), groups.to_string()).unwrap();

    s.daemon.restart().await.unwrap();
    let mut client = s.daemon.client().await.unwrap();
    client.call("daemon/info", json!({})).await.unwrap();
    let ended = tokio::time::timeout(agentd_tests::WAIT, async {
        tokio::task::spawn_blocking(move || leftover.wait()).await
    })
    .await
    .expect("the recorded group is ended")
    .unwrap()
    .unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&ended),
        Some(15)
    );
    assert_eq!(
        stranger.try_wait().unwrap(),
        None,
        "the process that reused a recorded pid runs on"
    );
    assert_eq!(live_with_marker(&stranger_marker).len(), 1);
    stranger.kill().unwrap();
    stranger.wait().unwrap();
}

/// The parent pid and state of `pid`, if it exists.
fn parent_and_state(pid: i32) -> Option<(i32, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((fields.next()?.parse().ok()?, state))
}

/// Regression (issue 12): an orphan of a command (its shell gone) became a zombie waiting for
/// init, and a zombie counted as a live group member, so the abort waited out the grace
/// period. The daemon is a child subreaper: orphans become its children, and it reaps them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_are_the_daemons_to_reap() {
    let mut s = setup().await;
    let orphan = marker();
    let command = format!("echo PGID=$$; (sleep 600 {orphan} &); sleep 600");
    s.mock.push_stream(sse::shell("t_orphan", &command));
    s.start("orphan").await;
    wait_for("the orphan", || live_with_marker(&orphan).len() == 1).await;
    let pid = live_with_marker(&orphan)[0];
    wait_for("the orphan to be reparented", || {
        parent_and_state(pid).is_some_and(|(ppid, _)| ppid == s.daemon.pid() as i32)
    })
    .await;

    let aborted = tokio::time::timeout(Duration::from_secs(10), s.call("session/abort", json!({})))
        .await
        .expect("the abort answers");
    assert_eq!(aborted["state"], "idle");
    // Not even a zombie is left: the daemon reaped it.
    wait_for("the orphan to be reaped", || {
        parent_and_state(pid).is_none()
    })
    .await;

    // The issue's own case: the shell's `sleep` may outlive the shell by an instant and become
    // an orphan; either way none of it is left, not even as a zombie.
    let sleeper = marker();
    let command = format!("sh -c 'sleep 30 {sleeper}; echo never'");
    s.mock.push_stream(sse::shell("t_sh", &command));
    s.call("session/submit", json!({"text": "sh"})).await;
    wait_for("the sleep", || live_with_marker(&sleeper).len() == 1).await;
    let pid = live_with_marker(&sleeper)[0];
    let aborted = tokio::time::timeout(Duration::from_secs(10), s.call("session/abort", json!({})))
        .await
        .expect("the abort answers");
    assert_eq!(aborted["state"], "idle");
    wait_for("the sleep to be reaped", || parent_and_state(pid).is_none()).await;
}

/// Starts `command` in a new session of `s`'s daemon and waits until `ready` holds.
async fn run_in_new_session(s: &mut crate::Setup, command: &str, ready: impl FnMut() -> bool) {
    let session = s
        .daemon
        .create_session(&mut s.client, s.workdir.path(), json!({}))
        .await
        .unwrap();
    s.session = session;
    s.mock.push_stream(sse::shell("t_run", command));
    s.start("run").await;
    wait_for("the command's processes", ready).await;
}

/// Regression (issue 12): with an escaped process holding the pipes, `abort {close}` took
/// 30 s and did not close, and a daemon shutdown took 15 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_and_shutdown_with_an_escaped_process_are_prompt() {
    let mut s = setup().await;
    let first = marker();
    let command = format!("(setsid sleep 600 {first} &); sleep 600 {first}1");
    run_in_new_session(&mut s, &command, || live_with_marker(&first).len() == 2).await;
    let t = Instant::now();
    let closed = tokio::time::timeout(
        Duration::from_secs(10),
        s.call("session/abort", json!({"close": true})),
    )
    .await
    .expect("abort {close} answers within the grace period plus a little");
    eprintln!("abort close took {:?}", t.elapsed());
    assert_eq!(closed["state"], "closed");
    assert_eq!(live_with_marker(&first), Vec::<i32>::new());

    let second = marker();
    let command = format!("(setsid sleep 600 {second} &); sleep 600 {second}1");
    run_in_new_session(&mut s, &command, || live_with_marker(&second).len() == 2).await;
    let t = Instant::now();
    tokio::time::timeout(
        Duration::from_secs(10),
        s.daemon.stop_with(nix::sys::signal::Signal::SIGTERM),
    )
    .await
    .expect("the daemon stops within the grace period plus a little")
    .unwrap();
    eprintln!("shutdown took {:?}", t.elapsed());
    assert_eq!(live_with_marker(&second), Vec::<i32>::new());
}

/// Regression (issue 12): processes that left an aborted tool's process group were named only
/// at the end of the tool's stderr. The session now names them in a `warning` event with
/// typed fields (call, pids, commands, whether they were ended), before the call's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_names_the_escaped_processes_in_a_warning_event() {
    let mut s = setup().await;
    let escaped = marker();
    let command = format!("(setsid sleep 600 {escaped} &); sleep 600 {escaped}1");
    s.mock.push_stream(sse::shell("t_escaped", &command));
    s.start("escape").await;
    // `setsid` leaves the group, then becomes `sleep`: wait for the `sleep`.
    let escaped_cmdline = format!("sleep\0600\0{escaped}\0");
    let setsid_pid = || {
        live_with_marker(&escaped).into_iter().find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c == escaped_cmdline.as_bytes())
        })
    };
    wait_for("the command's processes", || {
        live_with_marker(&escaped).len() == 2 && setsid_pid().is_some()
    })
    .await;
    let setsid_pid = setsid_pid().expect("the process that left the group");

    let aborted = s.call("session/abort", json!({})).await;
    assert_eq!(aborted["state"], "idle");
    assert_eq!(live_with_marker(&escaped), Vec::<i32>::new());
    let events = s.until("processing_end").await;
    let warnings: Vec<&serde_json::Value> = of_kind(&events, "warning")
        .into_iter()
        .filter(|w| w["data"].get("escaped").is_some())
        .collect();
    assert_eq!(warnings.len(), 1, "{events:?}");
    let data = &warnings[0]["data"];
    assert_eq!(
        data["escaped"],
        json!({
            "call_id": "t_escaped",
            "processes": [{"pid": setsid_pid, "command": format!("sleep 600 {escaped}")}],
            "count": 1,
            "ended": true,
        })
    );
    let message = data["message"].as_str().unwrap();
    assert!(
        message.contains("t_escaped") && message.contains(&format!("pid {setsid_pid}")),
        "{message}"
    );
    let position = |kind: &str| events.iter().position(|e| e["kind"] == kind).unwrap();
    let warning_at = events
        .iter()
        .position(|e| e["data"].get("escaped").is_some())
        .unwrap();
    assert!(warning_at < position("tool_call_end"), "{events:?}");
}
