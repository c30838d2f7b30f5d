//! Processes by pid, as `/proc` shows them: who belongs to a command, who is still alive, and
//! the reaping of orphans that the daemon inherits as a child subreaper.
//!
//! A command's processes are found two ways. Its process group holds everything it forked
//! that did not move out. Every process it started also carries [`MARKER_VAR`] in its
//! environment (inherited by all descendants unless they clear it), which finds the ones that
//! left the group (`setsid`, `setpgid`) and the ones a crashed daemon left behind.
//!
//! A process is named by its pid *and* its start time (`/proc/PID/stat` field 22, in clock
//! ticks since boot), so a pid reused by another process is never taken for it. Zombies are
//! dead: they run nothing and hold no pipe.

use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The environment variable naming the command a process belongs to:
/// `<run>.<environment>.<command>`. Descendants inherit it.
pub(crate) const MARKER_VAR: &str = "AGENTD_EXEC_ID";

/// A process (or a process group, by its leader) that cannot be confused with a later one
/// reusing its pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessId {
    /// The pid (for a group: its pgid, the leader's pid).
    pub pid: i32,
    /// When it started: `/proc/PID/stat` field 22 (clock ticks since boot).
    pub start_time: u64,
}

/// What `/proc/PID/stat` says about a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    /// `R`, `S`, `D`, `Z`, ...
    pub(crate) state: u8,
    pub(crate) ppid: i32,
    pub(crate) pgrp: i32,
    pub(crate) start_time: u64,
}

impl Stat {
    pub(crate) fn zombie(&self) -> bool {
        // X (dead) is the instant after Z; neither runs anything.
        matches!(self.state, b'Z' | b'X')
    }
}

/// Parses `/proc/PID/stat`. The command name is in parentheses and may itself hold spaces and
/// parentheses, so the fields are counted from the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: *fields.first()?.as_bytes().first()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        // Field 22; fields[0] is field 3.
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// The stat of `pid`, `None` when it does not exist.
pub(crate) fn stat(pid: i32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// `pid` as a [`ProcessId`], if it exists.
pub fn identify(pid: i32) -> Option<ProcessId> {
    stat(pid).map(|s| ProcessId {
        pid,
        start_time: s.start_time,
    })
}

/// The most parent links [`descends_from`] follows: far deeper than any real process tree,
/// and still a bounded walk.
const MAX_ANCESTRY: usize = 4096;

/// How many times [`descends_from`] starts over when the chain changed under it.
const ANCESTRY_ATTEMPTS: usize = 3;

/// Why [`descends_from`] cannot answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AncestryError {
    /// This process is out of file descriptors (`EMFILE`, `ENFILE`): a later try may work.
    OutOfFiles,
    /// The process is gone or unreadable, or its chain too deep or never still.
    Unknown(String),
}

/// Whether process `pid` descends from process `ancestor` (its child, grandchild, ...),
/// following the parent links in `/proc` towards pid 1. `pid` itself does not count as its own
/// descendant. Bounded: at most 4096 links, three times; usually a link or two, since the walk
/// stops at the first process older than `ancestor` (everything that descends from it started
/// after it), such as the shell a client was typed in.
///
/// A parent that started after its child is a later process on a reused pid (the real parent
/// ended while the walk read the chain, and the child was reparented): the walk starts over,
/// from the child's new parent. `ancestor` must be a live process that cannot exit during the
/// call (the daemon itself), so its pid is never another's.
pub fn descends_from(pid: i32, ancestor: ProcessId) -> Result<bool, AncestryError> {
    for _ in 0..ANCESTRY_ATTEMPTS {
        if let Some(known) = walk_up(pid, ancestor)? {
            return Ok(known);
        }
    }
    Err(AncestryError::Unknown(format!(
        "the ancestry of process {pid} kept changing while it was read"
    )))
}

/// One walk of [`descends_from`]: `None` when the chain changed under it.
fn walk_up(pid: i32, ancestor: ProcessId) -> Result<Option<bool>, AncestryError> {
    let mut child = match read_stat(pid)? {
        Some(s) => s,
        None => return Err(AncestryError::Unknown(format!("process {pid} is gone"))),
    };
    for _ in 0..MAX_ANCESTRY {
        // Older than the ancestor: neither it nor anything above it descends from it.
        if child.start_time < ancestor.start_time {
            return Ok(Some(false));
        }
        if child.ppid == ancestor.pid {
            return Ok(Some(true));
        }
        // 0: the parent of pid 1, or a parent outside this pid namespace.
        if child.ppid <= 0 {
            return Ok(Some(false));
        }
        let Some(parent) = read_stat(child.ppid)? else {
            return Ok(None);
        };
        if parent.start_time > child.start_time {
            return Ok(None);
        }
        child = parent;
    }
    Err(AncestryError::Unknown(format!(
        "process {pid} has more than {MAX_ANCESTRY} ancestors"
    )))
}

/// The stat of `pid`: `None` when it does not exist, an error when it cannot be read.
fn read_stat(pid: i32) -> Result<Option<Stat>, AncestryError> {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(text) => parse_stat(&text).map(Some).ok_or_else(|| {
            AncestryError::Unknown(format!("/proc/{pid}/stat is not in the expected format"))
        }),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)) => Ok(None),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
            Err(AncestryError::OutOfFiles)
        }
        Err(e) => Err(AncestryError::Unknown(format!(
            "cannot read /proc/{pid}/stat: {e}"
        ))),
    }
}

/// Every pid in `/proc`.
fn pids() -> impl Iterator<Item = i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
}

impl ProcessId {
    /// Whether this very process is alive (not a zombie, not a later process on its pid).
    pub(crate) fn alive(&self) -> bool {
        stat(self.pid).is_some_and(|s| s.start_time == self.start_time && !s.zombie())
    }

    /// Signals this process if it is still the one recorded.
    pub(crate) fn signal(&self, signal: Signal) {
        if self.alive() {
            // ESRCH: it ended since the check, which is what we want.
            let _ = kill(Pid::from_raw(self.pid), signal);
        }
    }
}

/// Whether process group `pgid` still has a member that is not a zombie. Zombies among them
/// that the daemon inherited are reaped on the way.
pub(crate) fn group_alive(pgid: i32) -> bool {
    // Fast path: no member at all (ESRCH), or not ours (EPERM: the pgid was reused by
    // another user's group).
    if killpg(Pid::from_raw(pgid), None).is_err() {
        return false;
    }
    let mut zombies = false;
    for pid in pids() {
        match stat(pid) {
            Some(s) if s.pgrp == pgid && !s.zombie() => return true,
            Some(s) if s.pgrp == pgid => zombies = true,
            _ => {}
        }
    }
    if zombies {
        reap_orphans();
    }
    false
}

/// Signals process group `pgid`.
pub(crate) fn signal_group(pgid: i32, signal: Signal) {
    // ESRCH (already gone) is the expected race here.
    let _ = killpg(Pid::from_raw(pgid), signal);
}

/// Processes (not zombies) whose [`MARKER_VAR`] starts with `prefix`, with their command lines.
/// Only the user's own processes can be read, which are the only ones that could be ours.
pub(crate) fn marked(prefix: &str) -> Vec<(ProcessId, Stat, String)> {
    let needle = format!("{MARKER_VAR}={prefix}");
    let mut found = Vec::new();
    for pid in pids() {
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !environ
            .split(|b| *b == 0)
            .any(|v| v.starts_with(needle.as_bytes()))
        {
            continue;
        }
        let Some(stat) = stat(pid).filter(|s| !s.zombie()) else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline)
            .split('\0')
            .filter(|a| !a.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let id = ProcessId {
            pid,
            start_time: stat.start_time,
        };
        found.push((id, stat, cmdline));
    }
    found
}

/// This daemon run's marker prefix: its pid and start time, unique on this machine until a
/// reboot (which ends every process anyway).
pub(crate) fn run_id() -> &'static str {
    static RUN: OnceLock<String> = OnceLock::new();
    RUN.get_or_init(|| {
        let pid = std::process::id() as i32;
        let start = stat(pid).map_or(0, |s| s.start_time);
        format!("{pid}-{start}")
    })
}

/// Children tokio spawned and has not reaped yet. The reaper leaves these alone: their exit
/// status belongs to whoever awaits them. Spawning happens under this lock, so a child cannot
/// exit and be mistaken for an orphan before it is listed.
static SPAWNED: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

/// The lock on [`SPAWNED`]; hold it across a spawn and insert the pid before releasing it.
pub(crate) fn spawned() -> MutexGuard<'static, Option<HashSet<i32>>> {
    SPAWNED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Spawns `command`, listed in [`SPAWNED`] before the lock is released so the orphan reaper
/// never takes its status.
pub(crate) fn spawn(
    command: &mut tokio::process::Command,
) -> std::io::Result<(tokio::process::Child, SpawnedChild)> {
    let mut spawned = spawned();
    let child = command.spawn()?;
    let pid = child
        .id()
        .map(|p| p as i32)
        .ok_or_else(|| std::io::Error::other("child exited before its pid was read"))?;
    spawned.get_or_insert_default().insert(pid);
    Ok((child, SpawnedChild(pid)))
}

/// Removes a child from [`SPAWNED`] when the command that spawned it is done with it (waited
/// for it, or dropped it: tokio then reaps it in the background, and reaping it here instead
/// steals a status nobody reads).
pub(crate) struct SpawnedChild(pub i32);

impl Drop for SpawnedChild {
    fn drop(&mut self) {
        if let Some(set) = spawned().as_mut() {
            set.remove(&self.0);
        }
    }
}

/// Makes the daemon a child subreaper: processes its commands orphan (a shell that exits
/// before its background children, a `setsid` double fork) become its children instead of
/// init's, so it reaps them at once (a zombie waiting for init otherwise counts as a live
/// group member until init gets to it) and can still find them. Call before any thread runs
/// commands; Linux only.
pub fn become_subreaper() -> std::io::Result<()> {
    nix::sys::prctl::set_child_subreaper(true).map_err(std::io::Error::from)?;
    SUBREAPER.store(true, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// Set by [`become_subreaper`]. Without it the process's zombie children are its host's
/// (a program using agentd as a library, a test harness), never orphans to reap.
static SUBREAPER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Reaps the zombies among the daemon's children that tokio did not spawn (orphans it
/// inherited as a subreaper). Never `waitpid(-1)`: that would steal tokio's children.
pub(crate) fn reap_orphans() {
    if !SUBREAPER.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let spawned = spawned();
    let me = std::process::id() as i32;
    for pid in children(me) {
        let ours = spawned.as_ref().is_some_and(|s| s.contains(&pid));
        if !ours && stat(pid).is_some_and(|s| s.zombie() && s.ppid == me) {
            let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
        }
    }
}

/// The children of process `pid`, from each of its threads' `children` file (an orphan is
/// reparented to one of the subreaper's threads), or a scan of `/proc` where that file is
/// missing (a kernel without `CONFIG_PROC_CHILDREN`).
fn children(pid: i32) -> Vec<i32> {
    let tasks = match std::fs::read_dir(format!("/proc/{pid}/task")) {
        Ok(t) => t,
        Err(_) => return Vec::new(),
    };
    let mut found = Vec::new();
    for task in tasks.flatten() {
        match std::fs::read_to_string(task.path().join("children")) {
            Ok(list) => found.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            ),
            Err(_) => {
                return pids()
                    .filter(|p| stat(*p).is_some_and(|s| s.ppid == pid))
                    .collect();
            }
        }
    }
    found
}

/// Reaps inherited orphans whenever a child exits, for the daemon's lifetime.
pub async fn reap_orphans_forever() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut sigchld) = signal(SignalKind::child()) else {
        tracing::warn!("cannot watch SIGCHLD: orphaned processes are reaped only after commands");
        return;
    };
    while sigchld.recv().await.is_some() {
        reap_orphans();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let line = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 98765 1000 10";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                state: b'S',
                ppid: 1,
                pgrp: 42,
                start_time: 98765
            })
        );
        assert_eq!(parse_stat("42 (x) Z 1"), None);
    }

    #[test]
    fn this_process_is_identified_and_alive() {
        let me = identify(std::process::id() as i32).unwrap();
        assert!(me.alive());
        let reused = ProcessId {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!reused.alive(), "a different start time is another process");
    }

    #[test]
    fn a_child_descends_from_this_process_and_this_process_from_none_of_its_children() {
        let me = identify(std::process::id() as i32).unwrap();
        let parent = identify(std::os::unix::process::parent_id() as i32).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert_eq!(descends_from(pid, me), Ok(true));
        assert_eq!(descends_from(pid, parent), Ok(true), "a grandchild");
        assert_eq!(descends_from(me.pid, identify(pid).unwrap()), Ok(false));
        assert_eq!(
            descends_from(me.pid, me),
            Ok(false),
            "not its own descendant"
        );
        assert_eq!(descends_from(1, me), Ok(false));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            descends_from(pid, me).is_err(),
            "a reaped process is unknown"
        );
    }

    #[test]
    fn a_group_of_zombies_is_dead() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("true")
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id() as i32;
        // Unreaped, it stays a zombie member of its group.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !stat(pgid).unwrap().zombie() {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            killpg(Pid::from_raw(pgid), None).is_ok(),
            "the kernel counts it"
        );
        assert!(!group_alive(pgid), "a zombie runs nothing");
        child.wait().unwrap();
    }
}
