//! Stopping local processes: a command's (its group and the processes that left it), an
//! environment's at abort and close, a crashed run's at start-up. SIGTERM to all, up to
//! [`KILL_GRACE`] for them to go, then SIGKILL to all, looked up again.

use super::super::child::{Control, KILL_GRACE};
use super::super::process::{ProcessId, group_alive, marked, signal_group};
use agentd_proto::ProcessInfo;
use futures::future::BoxFuture;
use nix::sys::signal::Signal;
use std::time::Duration;

/// How often a stop looks whether everything is gone, to return before the grace period ends.
const STOP_POLL: Duration = Duration::from_millis(50);
/// How much of an escaped process's command line is reported.
const MAX_COMMAND_CHARS: usize = 200;

/// A process that left its command's process group, as the warning names it.
pub(super) struct Escaped {
    id: ProcessId,
    command: String,
}

impl Escaped {
    /// As the result and the warning name it.
    pub(super) fn info(self) -> ProcessInfo {
        ProcessInfo {
            pid: self.id.pid.unsigned_abs(),
            command: self.command.chars().take(MAX_COMMAND_CHARS).collect(),
        }
    }
}

/// The processes of some work: whole process groups, and every process carrying a marker
/// (wherever it moved). Stopping them is SIGTERM to all, up to [`KILL_GRACE`] for them to
/// go, then SIGKILL to all, looked up again, so nothing forked during the grace survives.
#[derive(Clone)]
pub(super) struct Targets {
    groups: Vec<i32>,
    /// The marker prefix; `None`: the groups only.
    marker: Option<String>,
}

impl Targets {
    /// A running command's: its group, and what carries its marker.
    pub(super) fn command(pgid: i32, marker: &str) -> Self {
        Self {
            groups: vec![pgid],
            marker: Some(marker.to_owned()),
        }
    }

    /// Recorded `groups` that are still what was recorded (the leader is the recorded
    /// process, or a process with `marker` is still in the group, so a pgid reused since is
    /// left alone), and every process with `marker`.
    pub(super) fn recorded(groups: &[ProcessId], marker: Option<String>) -> Self {
        let members = marker.as_deref().map(marked).unwrap_or_default();
        Self {
            groups: groups
                .iter()
                .filter(|g| g.alive() || members.iter().any(|(_, s, _)| s.pgrp == g.pid))
                .map(|g| g.pid)
                .collect(),
            marker,
        }
    }

    /// Marked processes outside the groups (members are signalled through their group).
    pub(super) fn escaped(&self) -> Vec<Escaped> {
        let Some(marker) = &self.marker else {
            return Vec::new();
        };
        marked(marker)
            .into_iter()
            .filter(|(_, stat, _)| !self.groups.contains(&stat.pgrp))
            .map(|(id, _, command)| Escaped { id, command })
            .collect()
    }

    fn signal(&self, escaped: &[Escaped], signal: Signal) {
        for &pgid in &self.groups {
            signal_group(pgid, signal);
        }
        for e in escaped {
            e.id.signal(signal);
        }
    }

    fn alive(&self, escaped: &[Escaped]) -> bool {
        self.groups.iter().any(|&g| group_alive(g)) || escaped.iter().any(|e| e.id.alive())
    }

    /// Stops everything; returns the processes that had left their groups.
    pub(super) async fn end(&self) -> Vec<Escaped> {
        let mut escaped = self.escaped();
        if !self.alive(&escaped) {
            return escaped;
        }
        self.signal(&escaped, Signal::SIGTERM);
        let deadline = tokio::time::Instant::now() + KILL_GRACE;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(STOP_POLL).await;
            if !self.alive(&escaped) {
                return escaped;
            }
        }
        for e in self.escaped() {
            if !escaped.iter().any(|k| k.id == e.id) {
                escaped.push(e);
            }
        }
        self.signal(&escaped, Signal::SIGKILL);
        // A SIGKILL takes effect when its process next runs, which on a loaded machine is
        // a while: wait (bounded: a process stuck in the kernel dies when it gets out) so
        // that whoever awaited the stop finds nothing alive.
        let deadline = tokio::time::Instant::now() + KILL_GRACE;
        while self.alive(&escaped) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(STOP_POLL).await;
        }
        escaped
    }
}

/// A local command's stop: its group and its marked processes.
impl Control for Targets {
    type Stopped = Vec<Escaped>;
    fn stop(&mut self) -> BoxFuture<'static, Vec<Escaped>> {
        let targets = self.clone();
        Box::pin(async move { targets.end().await })
    }
}

/// Ends what a crashed daemon run left behind: the recorded `groups` whose leader is still
/// the recorded process (or that still hold a process marked by that run), and every process
/// marked with `run`'s prefix wherever it moved. SIGTERM, the grace period, SIGKILL. Returns
/// how many groups and escaped processes it stopped.
pub async fn end_leftovers(groups: &[ProcessId], run: &str) -> usize {
    // An empty run would match every marked process, other daemons' included.
    let marker = (!run.is_empty()).then(|| format!("{run}."));
    let targets = Targets::recorded(groups, marker);
    let escaped = targets.end().await;
    targets.groups.len() + escaped.len()
}

/// What to tell the model and the user about processes that left a command's process group,
/// `ended` with it or not.
pub(crate) fn describe_escaped(escaped: &[ProcessInfo], ended: bool) -> String {
    let list: Vec<String> = escaped
        .iter()
        .take(8)
        .map(|e| format!("pid {} ({})", e.pid, e.command))
        .collect();
    let more = escaped.len().saturating_sub(list.len());
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let fate = if ended {
        "they were ended with it"
    } else {
        "they keep running until the session is aborted or closed, and what they print is not shown"
    };
    format!(
        "{} process(es) left the command's process group: {}{more}; {fate}",
        escaped.len(),
        list.join(", ")
    )
}
