//! The boundaries ARCHITECTURE.md states, checked on the source (as rust-analyzer's `tidy.rs`
//! does), so the document cannot drift from the code: which module may use HTTP, the RPC
//! library, child processes and the disk, what `proto`, `agentd-core` and `agentctl` depend
//! on, and that every module says what it owns.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`, with its text up to its first `#[cfg(test)]` (test modules
/// sit at the end of a file and may use anything). Files that are tests or test data
/// altogether are left out.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy();
            if !name.ends_with(".rs") || name == "tests.rs" || name == "fixtures.rs" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text
                .split("#[cfg(test)]")
                .next()
                .unwrap_or_default()
                .to_owned();
            let relative = path.strip_prefix(root()).unwrap().display().to_string();
            out.push((relative, code));
        }
    }
    out.sort();
    out
}

/// Fails naming every file outside `allowed` (path prefixes) whose code matches one of
/// `needles`.
fn only_in(what: &str, needles: &[&str], allowed: &[&str]) {
    let offenders: Vec<String> = ["core/src", "agentd/src"]
        .iter()
        .flat_map(|dir| sources(&root().join(dir)))
        .filter(|(path, _)| !allowed.iter().any(|a| path.starts_with(a)))
        .filter(|(_, code)| needles.iter().any(|n| code.contains(n)))
        .map(|(path, _)| path)
        .collect();
    assert!(
        offenders.is_empty(),
        "{what} outside {allowed:?} (see ARCHITECTURE.md, Code map): {offenders:?}"
    );
}

#[test]
fn only_llm_does_http() {
    only_in(
        "HTTP",
        &["reqwest"],
        &["core/src/llm/", "core/src/mcp/http.rs"],
    );
}

#[test]
fn only_server_sees_the_rpc_library() {
    only_in("jsonrpsee", &["jsonrpsee"], &["agentd/src/server/"]);
}

#[test]
fn only_exec_spawns_processes() {
    only_in(
        "child processes",
        &["process::Command", "Command::new", "pre_exec"],
        &["core/src/exec/"],
    );
}

#[test]
fn only_store_writes_the_state_directory() {
    // Writes to disk: the store (session state), exec (the user's files, for tools), the
    // checkpoints' shadow store (in each session's directory: objects and rounds, which it
    // alone reads) and the socket's own directory. Syncs only in the store.
    only_in(
        "disk writes",
        &[
            "fs::write",
            "File::create",
            "OpenOptions",
            "fs::rename",
            "create_dir",
            "DirBuilder",
            "set_len",
        ],
        &[
            "core/src/store/",
            "core/src/exec/",
            "core/src/checkpoint/",
            "agentd/src/server/socket.rs",
        ],
    );
    only_in(
        "disk syncs",
        &["sync_data", "sync_all", "fsync"],
        &["core/src/store/"],
    );
}

#[test]
fn the_environment_is_read_without_panicking() {
    // `std::env::vars()` panics on a variable that is not UTF-8.
    only_in("std::env::vars()", &["env::vars()"], &[]);
}

#[test]
fn every_module_says_what_it_owns() {
    let missing: Vec<String> = [
        "core/src",
        "agentd/src",
        "proto/src",
        "agentctl/src",
        "tests/src",
    ]
    .iter()
    .flat_map(|dir| sources(&root().join(dir)))
    .filter(|(_, code)| !code.trim_start().starts_with("//!"))
    .map(|(path, _)| path)
    .collect();
    assert!(missing.is_empty(), "modules without a //! doc: {missing:?}");
}

/// The `[dependencies]` names of a crate's manifest.
fn dependencies(krate: &str) -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join(krate).join("Cargo.toml")).unwrap();
    let mut in_deps = false;
    let mut names = Vec::new();
    for line in manifest.lines() {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps && let Some((name, _)) = line.split_once(['=', '.']) {
            names.push(name.trim().to_owned());
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

#[test]
fn proto_does_no_io_and_agentctl_knows_only_proto() {
    assert_eq!(dependencies("proto"), ["schemars", "serde", "serde_json"]);
    let agentctl = dependencies("agentctl");
    assert!(agentctl.contains(&"agentd-proto".to_owned()));
    assert!(
        !agentctl
            .iter()
            .any(|d| d.starts_with("agentd") && d != "agentd-proto"),
        "agentctl must not depend on the daemon: {agentctl:?}"
    );
}

#[test]
fn the_library_documents_and_curates_its_public_api() {
    // With both lints denied, a public item without docs, or one that is `pub` but not
    // exported from lib.rs's list, fails the build.
    let lib = std::fs::read_to_string(root().join("core/src/lib.rs")).unwrap();
    assert!(
        lib.contains("#![deny(missing_docs, unreachable_pub)]"),
        "core/src/lib.rs must deny missing_docs and unreachable_pub"
    );
}

#[test]
fn the_library_leaves_serving_to_the_daemon() {
    // A host embedding sessions gets no RPC server, CLI parser, logger or systemd with them.
    let core = dependencies("core");
    for daemon_only in [
        "jsonrpsee",
        "clap",
        "tracing-subscriber",
        "sd-notify",
        "anyhow",
    ] {
        assert!(
            !core.iter().any(|d| d == daemon_only),
            "agentd-core depends on {daemon_only}, which only the daemon needs"
        );
        assert!(dependencies("agentd").iter().any(|d| d == daemon_only));
    }
}
