//! An independent review of the sandbox's first layer (the namespaces each command joins),
//! tried as a prompt-injected model would, against an unprivileged daemon in a default
//! (`workspace_write`) session: what it cannot undo from inside, the ways around the hidden
//! directories it does not find, and what it could still reach before this review.

use crate::{Setup, round, setup_unprivileged, shell};
use serde_json::json;

fn namespaces_ready() -> bool {
    agentd_tests::landlock(3) && agentd_tests::program("bwrap").is_some()
}

/// Runs `command` as the session's one call of a turn; returns what the model got back.
async fn run(s: &mut Setup, command: String) -> String {
    round(s, &[shell("c", command)]).await["c"].1.clone()
}

/// Live processes: (pid, ppid, command line).
fn processes() -> Vec<(u32, u32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|p| {
            let pid: u32 = p.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(p.path().join("stat")).ok()?;
            let ppid = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            let cmd = std::fs::read(p.path().join("cmdline")).ok()?;
            Some((pid, ppid, String::from_utf8_lossy(&cmd).replace('\0', " ")))
        })
        .collect()
}

/// The daemon's bubblewrap processes and their children (the namespaces' holders).
fn holders(daemon: u32) -> Vec<u32> {
    let all = processes();
    let bwraps: Vec<u32> = all
        .iter()
        .filter(|(_, parent, cmd)| *parent == daemon && cmd.starts_with("bwrap"))
        .map(|(pid, _, _)| *pid)
        .collect();
    let children = all
        .iter()
        .filter(|(_, parent, _)| bwraps.contains(parent))
        .map(|(pid, _, _)| *pid);
    bwraps.iter().copied().chain(children).collect()
}

/// Undoing the mounts from inside: the command has no capability in the sandbox's user
/// namespace, and in a user namespace of its own the inherited mounts are locked (the kernel
/// refuses to detach them or to bind their parent without them); `/proc` is read-only, so
/// it cannot even map its uid there. The daemon's and the holders' `/proc/<pid>/root`,
/// `cwd` and `ns/net` (the host's view and network) are closed to it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mounts_cannot_be_undone_or_gone_around_from_inside() {
    if !namespaces_ready() || agentd_tests::program("python3").is_none() {
        return;
    }
    let mut s = setup_unprivileged(json!({})).await;
    let root = s.daemon.root.path().to_owned();
    let run_dir = root.join("run");
    run(&mut s, "true".into()).await;
    let daemon = s.daemon.pid();
    let mut targets = holders(daemon);
    assert!(targets.len() >= 2, "no holder: {:?}", processes());
    targets.push(daemon);

    let mut attack = format!(
        "R={r}; umount -l $R 2>&1; mount --make-rprivate / 2>&1; \
         unshare -Urm true 2>&1; \
         python3 - <<'EOF'\n\
import ctypes, os, tempfile\n\
libc = ctypes.CDLL(None, use_errno=True)\n\
def say(what, r): print(what, r, os.strerror(ctypes.get_errno()) if r < 0 else 'DONE')\n\
say('unshare', libc.unshare(0x10000000 | 0x00020000))\n\
say('umount2', libc.umount2(b'{r}', 2))\n\
d = tempfile.mkdtemp()\n\
say('bind', libc.mount(b'{root}', d.encode(), None, 4096, None))\n\
say('remount', libc.mount(None, b'/', None, 32 | 4096, None))\n\
EOF\n\
         ls -A $R; ",
        r = run_dir.display(),
        root = root.display(),
    );
    for pid in &targets {
        attack.push_str(&format!(
            "ls -A /proc/{pid}/root$R 2>&1; echo x > /proc/{pid}/cwd/pwned 2>&1; \
             python3 -c 'import os; os.setns(os.open(\"/proc/{pid}/ns/net\", os.O_RDONLY), 0); \
             print(\"JOINED\")' 2>&1 | tail -1; "
        ));
    }
    attack.push_str("echo END");
    let seen = run(&mut s, attack).await;
    assert!(seen.contains("END"), "{seen}");
    // The nested namespace itself is allowed; nothing done in it may succeed.
    assert!(seen.contains("unshare 0 DONE"), "{seen}");
    for refused in ["umount2 -1", "bind -1", "remount -1"] {
        assert!(seen.contains(refused), "{refused}: {seen}");
    }
    for leaked in ["agentd", "JOINED"] {
        assert!(!seen.contains(leaked), "{leaked}: {seen}");
    }
    assert!(!root.join("pwned").exists());
}
