//! An independent review of the sandbox's first layer (the namespaces each command joins),
//! tried as a prompt-injected model would, against an unprivileged daemon in a default
//! (`workspace_write`) session: what it cannot undo from inside, the ways around the hidden
//! directories it does not find, and what it could still reach before this review.

use crate::trust_sandbox::next_system_prompt;
use crate::{Setup, round, setup_unprivileged, setup_unprivileged_with, shell};
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

/// A workspace that holds agentd's own directories (a session started in the home
/// directory): their parents are writable, and renaming one carried the hidden directory's
/// name away from its mount (the daemon could no longer save any session, and the next
/// namespaces, built for the old names, hid nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_move_a_hidden_directory_away_from_its_mount() {
    if !namespaces_ready() {
        return;
    }
    let mut s = setup_unprivileged(json!({})).await;
    let home = s.daemon.root.path().to_owned();
    let mut client = s.daemon.client().await.unwrap();
    s.session = s
        .daemon
        .create_session(&mut client, &home, json!({}))
        .await
        .unwrap();
    let seen = run(
        &mut s,
        "mv state moved 2>&1; mkdir -p state/agentd 2>&1; ls -A moved/agentd 2>&1; echo END".into(),
    )
    .await;
    assert!(seen.contains("END"), "{seen}");
    assert!(
        home.join("state/agentd/sessions").is_dir() && !home.join("moved").exists(),
        "the state directory was moved: {seen}"
    );
    // New namespaces (another policy) still hide it, and the session still saves.
    s.call(
        "session/set_config",
        json!({"config": {"sandbox_network": true}}),
    )
    .await;
    let seen = run(
        &mut s,
        "ls -A state/agentd moved/agentd 2>&1; echo END".into(),
    )
    .await;
    assert!(!seen.contains("sessions"), "{seen}");
}

/// The namespaces are built at a session's first command; a directory agentd makes later
/// (its config directory, made by `agentctl login` to store a key) must be hidden all the
/// same from that session's next commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_stored_after_the_first_command_is_hidden_too() {
    if !namespaces_ready() {
        return;
    }
    let mut s = setup_unprivileged(json!({})).await;
    let creds = s.daemon.root.path().join("config/agentd/credentials.json");
    let look = format!("cat {} 2>&1; echo END", creds.display());
    let seen = run(&mut s, look.clone()).await;
    assert!(seen.contains("END"), "{seen}");
    let out = s
        .daemon
        .agentctl(&["login", "anthropic"], Some("fake-stored-later-42"))
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(creds.is_file());
    let seen = run(&mut s, look).await;
    assert!(!seen.contains("fake-stored-later-42"), "{seen}");
}

/// The same for a service's socket directory made after the namespaces: a tmux server the
/// person starts later (its socket would let a command type into their shells).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_directory_made_after_the_first_command_is_hidden_too() {
    if !namespaces_ready() {
        return;
    }
    let tmux = tempfile::tempdir().unwrap();
    let mut s = setup_unprivileged_with(
        |b| b.env("TMUX_TMPDIR", tmux.path().to_str().unwrap()),
        tempfile::tempdir().unwrap(),
        json!({}),
    )
    .await;
    s.daemon.give(tmux.path()).unwrap();
    let uid = s
        .daemon
        .user()
        .map_or_else(|| nix::unistd::geteuid().as_raw(), |u| u.0);
    let dir = tmux.path().join(format!("tmux-{uid}"));
    let look = format!("ls -A {} 2>&1; echo END", dir.display());
    assert!(run(&mut s, look.clone()).await.contains("END"));
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("default"), "").unwrap();
    s.daemon.give(&dir).unwrap();
    let seen = run(&mut s, look).await;
    assert!(seen.contains("END") && !seen.contains("default"), "{seen}");
}

/// A link planted where a hidden path is missing (here the tmux directory, inside the
/// workspace) made bubblewrap fail at the next build, and the daemon then ran commands
/// under Landlock alone, silently: agentd's files were visible again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_planted_at_a_hidden_path_does_not_unhide_the_rest() {
    if !namespaces_ready() {
        return;
    }
    let workdir = tempfile::tempdir().unwrap();
    let tmux = workdir.path().to_str().unwrap().to_owned();
    let mut s = setup_unprivileged_with(|b| b.env("TMUX_TMPDIR", &tmux), workdir, json!({})).await;
    let uid = s
        .daemon
        .user()
        .map_or_else(|| nix::unistd::geteuid().as_raw(), |u| u.0);
    let plant = format!("ln -s /nonexistent/x tmux-{uid} && echo planted");
    assert!(run(&mut s, plant).await.contains("planted"));
    // Namespaces built anew (another policy).
    s.call(
        "session/set_config",
        json!({"config": {"sandbox_network": true}}),
    )
    .await;
    let root = s.daemon.root.path().to_owned();
    let look = format!(
        "ls -A {} {} 2>&1; echo END",
        root.join("run").display(),
        root.join("state/agentd").display()
    );
    let seen = run(&mut s, look).await;
    assert!(seen.contains("END"), "{seen}");
    for visible in ["agentd", "sessions"] {
        assert!(
            !seen.contains(&format!("\n{visible}\n")),
            "{visible}: {seen}"
        );
    }
}

/// A command can kill the namespaces' holder (it is the same user), but the daemon keeps
/// the namespaces open by descriptor: the next command joins them as before, hidden
/// directories and all, and does not fall back to Landlock alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_holder_changes_nothing_for_the_next_command() {
    if !namespaces_ready() {
        return;
    }
    let mut s = setup_unprivileged(json!({})).await;
    run(&mut s, "true".into()).await;
    let targets = holders(s.daemon.pid());
    assert!(!targets.is_empty());
    let kill: Vec<String> = targets.iter().map(|p| format!("kill -9 {p};")).collect();
    let seen = run(&mut s, format!("{} echo END", kill.concat())).await;
    assert!(seen.contains("END"), "{seen}");
    crate::eventually("the holders to die", async || {
        // Gone, or a zombie its parent has not reaped yet.
        targets.iter().all(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).map_or(true, |s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
        })
    })
    .await;
    let run_dir = s.daemon.root.path().join("run");
    let seen = run(
        &mut s,
        format!("ls -A {} 2>&1; echo END", run_dir.display()),
    )
    .await;
    assert!(seen.contains("END") && !seen.contains("agentd"), "{seen}");
}

/// A workspace inside a hidden directory (the runtime directory) is hidden from its own
/// commands: they are refused, never run elsewhere or unconfined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_inside_a_hidden_directory_runs_no_command() {
    if !namespaces_ready() {
        return;
    }
    let mut s = setup_unprivileged(json!({})).await;
    let inside = s.daemon.root.path().join("run/work");
    std::fs::create_dir(&inside).unwrap();
    s.daemon.give(&inside).unwrap();
    let mut client = s.daemon.client().await.unwrap();
    s.session = s
        .daemon
        .create_session(&mut client, &inside, json!({}))
        .await
        .unwrap();
    let results = round(&mut s, &[shell("c", "touch ran; echo RAN".into())]).await;
    let (error, seen) = &results["c"];
    assert!(*error && !seen.contains("RAN"), "{seen}");
    assert!(!inside.join("ran").exists());
}

/// A repository whose `HEAD` is a FIFO makes git block: the snapshot gives up after its
/// timeout, and the next session starts without one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_that_hangs_git_does_not_hang_the_next_session() {
    if !namespaces_ready() || agentd_tests::program("git").is_none() {
        return;
    }
    let mut s = setup_unprivileged(json!({})).await;
    let ws = std::fs::canonicalize(s.workdir.path()).unwrap();
    let plant = "git init -q . && rm .git/HEAD && mkfifo .git/HEAD && echo planted";
    assert!(run(&mut s, plant.into()).await.contains("planted"));
    let system = next_system_prompt(&mut s, &ws).await;
    assert!(system.contains("Is git repository: false"), "{system}");
}

/// The daemon as `agentctl` starts it from a terminal (or as a person starts it by hand) has
/// that terminal as its controlling terminal, and may hold descriptors its parent leaked.
/// A command must reach neither: through `/dev/tty` it could push keystrokes into the
/// person's shell (`TIOCSTI`), and a descriptor open for writing outside the workspace is a
/// write Landlock never sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_get_no_terminal_and_no_inherited_descriptor() {
    if !namespaces_ready() || agentd_tests::program("python3").is_none() {
        return;
    }
    let outside = std::env::temp_dir().join(format!(
        "agentd-review-leak-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    ));
    // A terminal as the daemon's controlling terminal, and a descriptor 7 (not
    // close-on-exec) open for appending to a file outside every workspace.
    let wrapper = "import os, sys, pty, fcntl, termios\n\
m, s = pty.openpty()\n\
os.set_inheritable(m, True)\n\
os.setsid()\n\
fcntl.ioctl(s, termios.TIOCSCTTY, 0)\n\
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)\n\
os.dup2(fd, 7)\n\
os.execv(sys.argv[2], sys.argv[2:])\n";
    let mut s = setup_unprivileged_with(
        |b| b.wrap("python3", ["-c", wrapper, outside.to_str().unwrap()]),
        tempfile::tempdir().unwrap(),
        json!({}),
    )
    .await;
    // The daemon did get the terminal: the test can tell.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", s.daemon.pid())).unwrap();
    let tty_nr: i64 = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(4)
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(tty_nr, 0, "the daemon has no controlling terminal: {stat}");

    let attack = "python3 -c '\n\
import os, fcntl, termios\n\
fd = os.open(\"/dev/tty\", os.O_RDONLY)\n\
print(\"TTY-OPEN\")\n\
for c in b\"echo INJECTED\\n\": fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))\n\
print(\"TIOCSTI-DONE\")' 2>&1 | tail -1\n\
echo WRITTEN-THROUGH-FD7 >&7 && echo FD7-OPEN\n\
ls /proc/self/fd; echo END";
    let seen = run(&mut s, attack.into()).await;
    assert!(seen.contains("END"), "{seen}");
    assert!(!seen.contains("TTY-OPEN"), "{seen}");
    assert!(!seen.contains("FD7-OPEN"), "{seen}");
    let leaked = std::fs::read_to_string(&outside).unwrap_or_default();
    let _ = std::fs::remove_file(&outside);
    assert_eq!(leaked, "", "{seen}");
}

/// A repository the model wrote can make git print without bound (a commit whose subject
/// is megabytes long): the snapshot goes into every request's system prompt, so it is cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_repository_cannot_swell_the_system_prompt() {
    if !namespaces_ready() || agentd_tests::program("git").is_none() {
        return;
    }
    let mut s = setup_unprivileged(json!({})).await;
    let ws = std::fs::canonicalize(s.workdir.path()).unwrap();
    let plant = "git init -q -b \"$(printf 'b%.0s' $(seq 200))\" . && \
         head -c 3000000 /dev/zero | tr '\\0' x > $TMPDIR/m && \
         git -c user.email=a@b -c user.name=a commit -q --allow-empty -F $TMPDIR/m && \
         for i in $(seq 3000); do : > \"untracked-$i\"; done; echo planted";
    assert!(run(&mut s, plant.into()).await.contains("planted"));
    let system = next_system_prompt(&mut s, &ws).await;
    assert!(system.contains("xxxxxxxx"), "no snapshot taken");
    assert!(system.len() < 64 * 1024, "{} bytes", system.len());
}
