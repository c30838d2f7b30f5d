//! The file tools as a prompt-injected model would use them (issue 22): special files it
//! makes (a FIFO that would block a read or a write forever), agentd's own files (the
//! credentials `agentctl login` stores, the session journals, the socket's directory) reached
//! directly, through `..`, a symlink, a symlinked search root or a hard link, a subagent's
//! `working_dir` that is a symlink out of the workspace, and a symlink swapped under the
//! writing tools while they write.

use crate::dirs::{Dirs, untouched};
use crate::{Setup, eventually, of_kind, setup_unprivileged};
use agentd_tests::family::Family;
use agentd_tests::mock::Reply;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const ANTHROPIC: Family = Family::Anthropic;

/// What a refusal of agentd's own files says.
const PROTECTED: &str = "agentd's own files are not readable by tools";

impl Dirs {
    fn outside_untouched(&self) {
        assert_eq!(
            Self::tree(&self.outside),
            untouched(),
            "something reached the directory outside the workspace"
        );
    }
}

/// A fresh daemon running as an ordinary user, with a session of `profile` in `dirs.ws` under
/// `config`; everything in `dirs` is given to that user first.
async fn session(dirs: &Dirs, profile: &str, config: Value) -> Setup {
    let mut s = setup_unprivileged(json!({})).await;
    s.daemon.give(dirs.root.path()).unwrap();
    let snapshot = s
        .client
        .call(
            "session/create",
            json!({"cwd": dirs.ws.display().to_string(), "profile": profile, "config": config}),
        )
        .await
        .unwrap();
    s.session = snapshot["session_id"].as_str().unwrap().to_owned();
    s
}

/// One round of `calls` (see [`crate::round`]), whose ids may be made at run time.
async fn round(s: &mut Setup, calls: &[(String, &str, Value)]) -> BTreeMap<String, (bool, String)> {
    let calls: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(id, name, args)| (id.as_str(), *name, args.clone()))
        .collect();
    crate::round(s, &calls).await
}

fn call(id: &str, name: &'static str, args: Value) -> (String, &'static str, Value) {
    (id.to_owned(), name, args)
}

/// Asserts that every call of `ids` failed and that what the model got says `says`.
fn refused(results: &BTreeMap<String, (bool, String)>, ids: &[&str], says: &str) {
    for id in ids {
        let (is_error, content) = &results[*id];
        assert!(*is_error && content.contains(says), "{id}: {content}");
    }
}

/// A FIFO the model made cannot hold a file tool: reading it (read_file, read_many_files, an
/// edit) or writing it, each of which blocked forever before (the round never ended), is
/// refused at once and names the kind; the searches and listings pass over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_is_refused_by_every_file_tool_at_once() {
    let dirs = Dirs::new();
    let mut s = session(&dirs, "gemini", json!({})).await;
    let made = round(
        &mut s,
        &[call("mkfifo", "shell", json!({"command": "mkfifo p"}))],
    )
    .await;
    assert!(!made["mkfifo"].0, "{}", made["mkfifo"].1);
    let results = round(
        &mut s,
        &[
            call("read", "read_file", json!({"file_path": "p"})),
            call("many", "read_many_files", json!({"paths": ["p"]})),
            call(
                "edit",
                "edit_file",
                json!({"file_path": "p", "old_string": "a", "new_string": "b"}),
            ),
            call("grep", "grep", json!({"pattern": "x"})),
            call("grep-fifo", "grep", json!({"pattern": "x", "path": "p"})),
            call("list", "list_dir", json!({})),
        ],
    )
    .await;
    refused(&results, &["read", "edit"], "is a FIFO");
    let (is_error, many) = &results["many"];
    assert!(
        !is_error && many.contains("p (") && many.contains("is a FIFO"),
        "{many}"
    );
    assert_eq!(results["grep"], (false, "No matches found.".to_owned()));
    assert_eq!(
        results["grep-fifo"],
        (false, "No matches found.".to_owned())
    );
    assert_eq!(results["list"], (false, "p".to_owned()));
    // A write alone (a reader in the same round would have paired with it).
    let results = round(
        &mut s,
        &[call(
            "write",
            "write_file",
            json!({"file_path": "p", "content": "x"}),
        )],
    )
    .await;
    refused(&results, &["write"], "is a FIFO");
}

/// The same FIFO while the daemon is asked to abort and then to stop: before, the read held
/// the session (abort gave up after 15 s, `session/close` never answered) and the daemon
/// ignored SIGTERM. Both now answer within the test's guard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_and_sigterm_are_bounded_while_a_file_tool_meets_a_fifo() {
    let dirs = Dirs::new();
    let mut s = session(&dirs, "gemini", json!({})).await;
    round(
        &mut s,
        &[call("mkfifo", "shell", json!({"command": "mkfifo p"}))],
    )
    .await;
    let calls = [
        ("many", "read_many_files", json!({"paths": ["p"]})),
        ("read", "read_file", json!({"file_path": "p"})),
    ];
    s.mock.push_stream(ANTHROPIC.tools("", &calls));
    s.mock.push_stream(ANTHROPIC.text("done"));
    s.start("read the fifo").await;
    // Both calls start before either ends.
    s.client
        .events_until("tool_call_start", |e| e["data"]["call_id"] == "read")
        .await
        .unwrap();
    let aborted = s.request("session/abort", json!({})).await;
    let stopped = s.daemon.stop_with(nix::sys::signal::Signal::SIGTERM).await;
    assert_eq!(aborted["result"]["state"], "idle", "{aborted}");
    assert!(stopped.as_ref().is_ok_and(|s| s.success()), "{stopped:?}");
}

/// A key stored with `agentctl login` cannot be read by any file tool, in any sandbox mode,
/// whichever way the path is spelled (absolute, through `..`, through a symlink to the file
/// or to its directory, a hard link, a symlinked search root), and neither can the session
/// journals or the socket's directory; the key is in no event, no journal line and nothing
/// sent to the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_key_and_agentd_state_are_not_readable_by_file_tools() {
    const KEY: &str = "fake-trust-files-4f1d0c9e7b2a";
    let dirs = Dirs::new();
    let mut s = session(&dirs, "gemini", json!({})).await;
    let out = s
        .daemon
        .agentctl(&["login", "anthropic"], Some(KEY))
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = std::fs::canonicalize(s.daemon.root.path()).unwrap();
    let config_dir = root.join("config/agentd");
    let creds = config_dir.join("credentials.json");
    assert!(std::fs::read_to_string(&creds).unwrap().contains(KEY));
    std::os::unix::fs::symlink(&creds, dirs.ws.join("creds")).unwrap();
    std::os::unix::fs::symlink(&config_dir, dirs.ws.join("cfg")).unwrap();
    // From the workspace up to `/`, then down to the file.
    let ups = dirs.ws.components().count() - 1;
    let dotdot = Path::new(&"../".repeat(ups)).join(creds.strip_prefix("/").unwrap());
    assert!(dirs.ws.join(&dotdot).exists(), "{}", dotdot.display());
    let journal = s.daemon.sessions_dir().join(&s.session).join("log.jsonl");
    let c = creds.display().to_string();
    let reads = |mode: &str| {
        vec![
            call(&format!("{mode}-abs"), "read_file", json!({"file_path": c})),
            call(
                &format!("{mode}-dotdot"),
                "read_file",
                json!({"file_path": dotdot}),
            ),
            call(
                &format!("{mode}-link"),
                "read_file",
                json!({"file_path": "creds"}),
            ),
            call(
                &format!("{mode}-dirlink"),
                "read_file",
                json!({"file_path": "cfg/credentials.json"}),
            ),
            call(
                &format!("{mode}-many"),
                "read_many_files",
                json!({"paths": [c, "creds"]}),
            ),
            call(
                &format!("{mode}-edit"),
                "edit_file",
                json!({"file_path": "creds", "old_string": "fake-", "new_string": "x"}),
            ),
            call(
                &format!("{mode}-grep"),
                "grep",
                json!({"pattern": "fake-trust", "path": "cfg"}),
            ),
            call(
                &format!("{mode}-grep-file"),
                "grep",
                json!({"pattern": "fake-trust", "path": c}),
            ),
            call(
                &format!("{mode}-glob"),
                "glob",
                json!({"pattern": "*", "path": config_dir}),
            ),
            call(&format!("{mode}-list"), "list_dir", json!({"path": "cfg"})),
            call(
                &format!("{mode}-journal"),
                "read_file",
                json!({"file_path": journal}),
            ),
            call(
                &format!("{mode}-run"),
                "list_dir",
                json!({"path": root.join("run/agentd")}),
            ),
        ]
    };
    let ids = |mode: &str| -> Vec<String> {
        [
            "abs",
            "dotdot",
            "link",
            "dirlink",
            "edit",
            "grep",
            "grep-file",
            "glob",
            "list",
            "journal",
            "run",
        ]
        .iter()
        .map(|k| format!("{mode}-{k}"))
        .collect()
    };
    let mut seen = Vec::new();
    for mode in ["workspace_write", "read_only", "off"] {
        s.call("session/set_config", json!({"config": {"sandbox": mode}}))
            .await;
        let results = round(&mut s, &reads(mode)).await;
        let ids = ids(mode);
        refused(
            &results,
            &ids.iter().map(String::as_str).collect::<Vec<_>>(),
            PROTECTED,
        );
        let (_, many) = &results[&format!("{mode}-many")];
        assert!(many.contains(PROTECTED), "{many}");
        seen.extend(results.into_values().map(|(_, content)| content));
    }
    // With the sandbox off, a command can make a hard link to the file; the link is refused
    // too, and so is writing over the file or beside it.
    let hard = round(
        &mut s,
        &[call(
            "ln",
            "shell",
            json!({"command": format!("ln {c} hard")}),
        )],
    )
    .await;
    assert!(!hard["ln"].0, "{}", hard["ln"].1);
    let results = round(
        &mut s,
        &[
            call("hard", "read_file", json!({"file_path": "hard"})),
            call(
                "overwrite",
                "write_file",
                json!({"file_path": c, "content": "{}"}),
            ),
            call(
                "beside",
                "write_file",
                json!({"file_path": config_dir.join("config.toml"), "content": ""}),
            ),
        ],
    )
    .await;
    refused(&results, &["hard", "overwrite", "beside"], PROTECTED);
    seen.extend(results.into_values().map(|(_, content)| content));
    assert!(std::fs::read_to_string(&creds).unwrap().contains(KEY));
    assert!(!config_dir.join("config.toml").exists());

    for content in &seen {
        assert!(
            !content.contains(KEY),
            "the key reached the model: {content}"
        );
    }
    for request in s.mock.requests() {
        assert!(!request.body.to_string().contains(KEY), "sent to the model");
    }
    // Every event is in the journal once the session is closed.
    s.call("session/close", json!({})).await;
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(text.contains(PROTECTED), "the journal holds the refusals");
    assert!(!text.contains(KEY), "the key is in the journal");
}

/// A subagent's `working_dir` is resolved, and must lie inside the parent's writable roots:
/// a symlink out of the workspace is refused (before, the child worked, and wrote, in the
/// directory outside), and a symlink to a directory inside gives the child the real path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_working_dir_that_leads_out_of_the_workspace_is_refused() {
    let dirs = Dirs::new();
    std::fs::create_dir(dirs.ws.join("sub")).unwrap();
    std::os::unix::fs::symlink(&dirs.outside, dirs.ws.join("out")).unwrap();
    std::os::unix::fs::symlink(dirs.ws.join("sub"), dirs.ws.join("to-sub")).unwrap();
    let mut s = session(&dirs, "anthropic", json!({})).await;
    s.mock.respond_with(|body| {
        let who = body["messages"][0]["content"].to_string();
        let results = body.to_string().matches("\"tool_result\"").count();
        if who.contains("child-task") {
            return match results {
                0 => Reply::Stream(agentd_tests::sse::tools(
                    "",
                    &[(
                        "c1",
                        "write_file",
                        json!({"file_path": "planted.txt", "content": "x"}),
                    )],
                )),
                _ => Reply::Stream(agentd_tests::sse::text("child done")),
            };
        }
        match results {
            0 => Reply::Stream(agentd_tests::sse::tools(
                "",
                &[
                    (
                        "out",
                        "spawn_agent",
                        json!({"task": "child-task out", "working_dir": "out"}),
                    ),
                    (
                        "sub",
                        "spawn_agent",
                        json!({"task": "child-task sub", "working_dir": "to-sub"}),
                    ),
                ],
            )),
            _ => Reply::Stream(agentd_tests::sse::text("parent done")),
        }
    });
    let events = s.run("delegate").await;
    let ends: BTreeMap<String, Value> = of_kind(&events, "tool_call_end")
        .iter()
        .map(|e| {
            (
                e["data"]["call_id"].as_str().unwrap().to_owned(),
                e["data"].clone(),
            )
        })
        .collect();
    let error = ends["out"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("working_dir \"out\"")
            && error.contains(&dirs.outside.display().to_string()),
        "{}",
        ends["out"]
    );
    assert!(ends["sub"]["error"].is_null(), "{}", ends["sub"]);
    let list = s.client.call("session/list", json!({})).await.unwrap();
    let mut cwds: Vec<String> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["cwd"].as_str().unwrap().to_owned())
        .filter(|cwd| cwd.starts_with(&dirs.ws.display().to_string()))
        .collect();
    cwds.sort();
    let ws = dirs.ws.display().to_string();
    let sub = dirs.ws.join("sub").display().to_string();
    assert_eq!(
        cwds,
        [ws, sub],
        "the parent and one child, in the real directory"
    );
    // The child that ran wrote where it was sent.
    eventually("the child to write", async || {
        dirs.ws.join("sub/planted.txt").exists()
    })
    .await;
    dirs.outside_untouched();
}

/// Swaps `ws/d` between a directory and a symlink to `outside` as fast as it can (an atomic
/// exchange, so `d` always exists), until dropped.
struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Swapper {
    fn start(ws: &Path, outside: &Path) -> Self {
        std::os::unix::fs::symlink(outside, ws.join("alt")).unwrap();
        let (stop, swaps) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let (a, b) = (ws.join("d"), ws.join("alt"));
        let thread = {
            let (stop, swaps) = (stop.clone(), swaps.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    nix::fcntl::renameat2(
                        nix::fcntl::AT_FDCWD,
                        &a,
                        nix::fcntl::AT_FDCWD,
                        &b,
                        nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                    )
                    .unwrap();
                    swaps.fetch_add(1, Ordering::Relaxed);
                    // Swapping still thousands of times a second, without starving the
                    // daemon and the test of the machine's few cores.
                    std::thread::yield_now();
                }
            })
        };
        Self {
            stop,
            swaps,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.swaps.load(Ordering::Relaxed)
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Runs `calls` in rounds small enough that their events fit a subscriber's buffer however
/// slowly this loaded test reads them; returns how many calls succeeded.
async fn rounds(s: &mut Setup, calls: &[(String, &str, Value)]) -> usize {
    let mut succeeded = 0;
    for chunk in calls.chunks(100) {
        succeeded += round(s, chunk).await.values().filter(|(e, _)| !e).count();
    }
    succeeded
}

/// A background process swaps a workspace directory with a symlink out of the workspace while
/// the model writes beneath it, 200 times per tool (write_file, edit_file, and apply_patch's
/// add, update, move and delete). Before, a write was checked on the resolved path and then
/// made by name again, so a swap in between carried it outside (files appeared in, or were
/// deleted from, `outside`); now each is opened beneath its root in one step, so a swap can
/// only make it fail. Nothing outside the workspace changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_racing_symlink_swap_never_carries_a_write_outside() {
    const ATTEMPTS: usize = 200;
    let dirs = Dirs::new();
    // Files the edits and updates find inside `d`, and a `victim.txt` for the deletes, whose
    // namesake outside must stay.
    let seed = |dir: &Path| {
        for i in 0..ATTEMPTS {
            for name in [format!("e{i}.txt"), format!("u{i}.txt")] {
                std::fs::write(dir.join(name), "original\n").unwrap();
            }
        }
    };
    let d = dirs.ws.join("d");
    std::fs::create_dir(&d).unwrap();
    seed(&d);
    std::fs::write(d.join("victim.txt"), "inside\n").unwrap();
    let mut s = session(&dirs, "anthropic", json!({})).await;
    let swapper = Swapper::start(&dirs.ws, &dirs.outside);
    let mut calls = Vec::new();
    for i in 0..ATTEMPTS {
        calls.push(call(
            &format!("w{i}"),
            "write_file",
            json!({"file_path": format!("d/w{i}.txt"), "content": "x\n"}),
        ));
        calls.push(call(
            &format!("n{i}"),
            "write_file",
            json!({"file_path": format!("d/new{i}/w.txt"), "content": "x\n"}),
        ));
        calls.push(call(
            &format!("e{i}"),
            "edit_file",
            json!({"file_path": format!("d/e{i}.txt"), "old_string": "original", "new_string": "edited"}),
        ));
    }
    let wrote = rounds(&mut s, &calls).await;

    // apply_patch in a session of the OpenAI profile, on the same daemon.
    let patch = s
        .client
        .call(
            "session/create",
            json!({"cwd": dirs.ws.display().to_string(), "profile": "openai"}),
        )
        .await
        .unwrap();
    s.session = patch["session_id"].as_str().unwrap().to_owned();
    let mut calls = Vec::new();
    let patch = |id: String, body: String| {
        call(
            &id,
            "apply_patch",
            json!({"patch": format!("*** Begin Patch\n{body}*** End Patch\n")}),
        )
    };
    for i in 0..ATTEMPTS {
        calls.push(patch(
            format!("a{i}"),
            format!("*** Add File: d/p{i}.txt\n+x\n"),
        ));
        calls.push(patch(
            format!("u{i}"),
            format!(
                "*** Update File: d/u{i}.txt\n*** Move to: d/m{i}.txt\n@@\n-original\n+moved\n"
            ),
        ));
        calls.push(patch(
            format!("d{i}"),
            "*** Delete File: d/victim.txt\n".into(),
        ));
    }
    let patched = rounds(&mut s, &calls).await;
    let swaps = swapper.stop();
    eprintln!("{swaps} swaps; {wrote} writes and edits and {patched} patches went through");
    assert!(swaps > 0);
    dirs.outside_untouched();
}
