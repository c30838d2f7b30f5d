//! [`LocalExecutionEnvironment`]: files on this machine, commands in new process groups.

use super::process::{
    self, MARKER_VAR, ProcessId, SpawnedChild, group_alive, marked, signal_group,
};
use super::sandbox::{Namespaces, SandboxPolicy};
use super::utf8::Utf8Decoder;
use super::{
    DirEntry, EnvFilter, EnvPolicy, Error, ExecRequest, ExecResult, ExecutionEnvironment,
    GrepOptions, OutputSink, ProcessLedger, ProtectedPaths, files, search,
};
use agentd_proto::{OutputStream, ProcessInfo};
use async_trait::async_trait;
use nix::sys::signal::Signal;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

/// Grace period between SIGTERM and SIGKILL (spec 4.2).
pub(super) const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long to keep reading after the command exits (or is killed) while other processes
/// still hold its pipes open: background children that keep running, or processes that left
/// the group and survived the kill. Past it the pipes are dropped unread, so no process can
/// hold a command (or an abort) open.
pub(super) const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);
/// How often a stop looks whether everything is gone, to return before the grace period ends.
const STOP_POLL: Duration = Duration::from_millis(50);
/// Output kept per stream; more is counted but dropped, so a runaway command cannot exhaust
/// the daemon's memory.
const MAX_RETAINED: usize = 16 * 1024 * 1024;
/// How much of an escaped process's command line is reported.
const MAX_COMMAND_CHARS: usize = 200;

/// How a [`LocalExecutionEnvironment`] runs commands, beyond its directory.
#[derive(Clone, Default)]
pub(crate) struct LocalOptions {
    /// Which variables commands inherit.
    pub(crate) env: EnvFilter,
    /// Where the process groups it starts are recorded (a daemon ends the leftovers of a
    /// crashed run at start-up); `None`: nowhere.
    pub(crate) ledger: Option<Arc<dyn ProcessLedger>>,
    /// agentd's own files, which its file operations refuse to open.
    pub(crate) protected: Arc<ProtectedPaths>,
    /// Directories and files sandboxed commands must not see (agentd's own state, config,
    /// keys and socket, the user's runtime directory): empty mounts cover them.
    pub(crate) hidden: Arc<[PathBuf]>,
}

/// Runs tools on the local machine (spec 4.2).
pub struct LocalExecutionEnvironment {
    cwd: PathBuf,
    options: LocalOptions,
    /// `<run>.<environment>.`: the [`MARKER_VAR`] prefix of every command this environment
    /// starts, so its processes are found wherever they moved.
    marker: String,
    /// Commands started so far (the last part of each command's marker).
    commands: AtomicU64,
    /// Process groups started by this environment that may still be alive.
    groups: Mutex<HashSet<ProcessId>>,
    /// Sandboxed commands' temp dir, made on first use; removed when the environment is
    /// dropped (the session is unloaded or closed).
    temp: OnceLock<Result<tempfile::TempDir, String>>,
    /// The namespaces of the latest sandbox policy its commands ran under.
    namespaces: Mutex<Option<Arc<NamespaceCell>>>,
}

/// Namespaces for one policy, built by the first command that needs them; `Err`: they
/// cannot be built here, and commands get Landlock alone.
type NamespaceCell = tokio::sync::OnceCell<Result<Arc<Namespaces>, String>>;

impl LocalExecutionEnvironment {
    /// An environment rooted at `cwd` whose commands inherit variables per `policy` (secrets
    /// filtered by the default patterns), recording its processes nowhere.
    pub fn new(cwd: PathBuf, policy: EnvPolicy) -> Self {
        Self::with_options(
            cwd,
            LocalOptions {
                env: EnvFilter::new(policy),
                ..LocalOptions::default()
            },
        )
    }

    /// An environment rooted at `cwd` that runs commands per `options`.
    pub(crate) fn with_options(cwd: PathBuf, options: LocalOptions) -> Self {
        static ENVIRONMENTS: AtomicU64 = AtomicU64::new(0);
        let n = ENVIRONMENTS.fetch_add(1, Ordering::Relaxed);
        Self {
            cwd,
            options,
            marker: format!("{}.{n}.", process::run_id()),
            commands: AtomicU64::new(0),
            groups: Mutex::new(HashSet::new()),
            temp: OnceLock::new(),
            namespaces: Mutex::new(None),
        }
    }

    /// The namespaces for `policy`, built on first use and kept while the policy stays the
    /// same; `None` where they cannot be built (logged once per daemon). Once they could be
    /// built in this daemon, a failure to build them refuses the command: whatever made it
    /// fail (a command exhausting the user's namespaces, a path planted where bubblewrap
    /// mounts) must not quietly leave the next commands with Landlock alone, which hides
    /// nothing. Reports share one set for the whole daemon (their policy is the same
    /// everywhere), so a session's start does not build one.
    async fn namespaces(&self, policy: &SandboxPolicy) -> Result<Option<Arc<Namespaces>>, Error> {
        static WORKED: AtomicBool = AtomicBool::new(false);
        static REPORTS: Mutex<Option<Arc<NamespaceCell>>> = Mutex::new(None);
        let slot = if *policy == SandboxPolicy::report() {
            &REPORTS
        } else {
            &self.namespaces
        };
        let hidden = &self.options.hidden;
        let fits = |n: &Namespaces| n.policy() == policy && n.hidden() == &hidden[..];
        let cell = {
            let mut current = slot.lock().unwrap_or_else(|e| e.into_inner());
            // Built for another policy or list, or before a directory they hide existed
            // (agentd's config directory made by `agentctl login`, a tmux server started
            // since), or failed where they worked before: built again.
            let stale = current.as_ref().is_some_and(|cell| {
                cell.get().is_some_and(|built| match built {
                    Ok(n) => !fits(n) || n.missed_a_hidden_path(),
                    Err(_) => WORKED.load(Ordering::Relaxed),
                })
            });
            match current.as_mut() {
                Some(cell) if !stale => cell.clone(),
                _ => current.insert(Arc::new(NamespaceCell::new())).clone(),
            }
        };
        let built = cell
            .get_or_init(|| async { Namespaces::build(policy, hidden).await.map(Arc::new) })
            .await;
        let built = match built {
            Ok(n) if fits(n) => Ok(n.clone()),
            // Built concurrently for another policy: this command gets its own.
            Ok(_) => Namespaces::build(policy, hidden).await.map(Arc::new),
            Err(why) => Err(why.clone()),
        };
        match built {
            Ok(n) => {
                WORKED.store(true, Ordering::Relaxed);
                Ok(Some(n))
            }
            Err(why) if WORKED.load(Ordering::Relaxed) => Err(Error::NotAllowed(format!(
                "cannot build the command's sandbox: {why}; the command was not run (it would \
                 have run with Landlock alone, which does not hide agentd's files)"
            ))),
            Err(why) => {
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| {
                    tracing::warn!(
                        "sandboxed commands run under Landlock alone: {why}; agentd's \
                         directories and the network namespace are not hidden from them"
                    )
                });
                Ok(None)
            }
        }
    }

    fn track(&self, group: ProcessId, alive: bool) {
        let changed = {
            let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
            if alive {
                groups.insert(group)
            } else {
                groups.remove(&group)
            }
        };
        if let (true, Some(ledger)) = (changed, &self.options.ledger) {
            if alive {
                ledger.started(group);
            } else {
                ledger.ended(group);
            }
        }
    }
}

/// A process that left its command's process group, as the warning names it.
struct Escaped {
    id: ProcessId,
    command: String,
}

/// The processes of some work: whole process groups, and every process carrying a marker
/// (wherever it moved). Stopping them is SIGTERM to all, up to [`KILL_GRACE`] for them to
/// go, then SIGKILL to all, looked up again, so nothing forked during the grace survives.
struct Targets<'a> {
    groups: Vec<i32>,
    /// The marker prefix; `None`: the groups only.
    marker: Option<&'a str>,
}

impl Targets<'_> {
    /// Marked processes outside the groups (members are signalled through their group).
    fn escaped(&self) -> Vec<Escaped> {
        let Some(marker) = self.marker else {
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
    async fn stop(&self) -> Vec<Escaped> {
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
        escaped
    }
}

/// Ends what a crashed daemon run left behind: the recorded `groups` whose leader is still
/// the recorded process (or that still hold a process marked by that run), and every process
/// marked with `run`'s prefix wherever it moved. SIGTERM, the grace period, SIGKILL. Returns
/// how many groups and escaped processes it stopped.
pub async fn end_leftovers(groups: &[ProcessId], run: &str) -> usize {
    // An empty run would match every marked process, other daemons' included.
    let marker = (!run.is_empty()).then(|| format!("{run}."));
    let members = marker.as_deref().map(marked).unwrap_or_default();
    let targets = Targets {
        groups: groups
            .iter()
            .filter(|g| g.alive() || members.iter().any(|(_, s, _)| s.pgrp == g.pid))
            .map(|g| g.pid)
            .collect(),
        marker: marker.as_deref(),
    };
    let escaped = targets.stop().await;
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

/// Collected output of one stream, capped at [`MAX_RETAINED`].
#[derive(Default)]
pub(super) struct Captured {
    text: String,
    dropped: usize,
    pub(super) decoder: Utf8Decoder,
}

impl Captured {
    pub(super) fn push(&mut self, text: &str) {
        let room = MAX_RETAINED.saturating_sub(self.text.len());
        if text.len() <= room {
            self.text.push_str(text);
        } else {
            let mut cut = room;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            self.text.push_str(&text[..cut]);
            self.dropped += text.len() - cut;
        }
    }

    pub(super) fn finish(mut self) -> String {
        let tail = self.decoder.finish();
        self.push(&tail);
        if self.dropped > 0 {
            self.text.push_str(&format!(
                "\n[{} bytes of output beyond 16 MiB were discarded]",
                self.dropped
            ));
        }
        self.text
    }
}

#[async_trait]
impl ExecutionEnvironment for LocalExecutionEnvironment {
    fn working_directory(&self) -> &Path {
        &self.cwd
    }

    fn platform(&self) -> &str {
        std::env::consts::OS
    }

    fn os_version(&self) -> String {
        match nix::sys::utsname::uname() {
            Ok(u) => format!(
                "{} {}",
                u.sysname().to_string_lossy(),
                u.release().to_string_lossy()
            ),
            Err(_) => std::env::consts::OS.to_owned(),
        }
    }

    fn temp_dir(&self) -> Result<PathBuf, Error> {
        let made = self.temp.get_or_init(|| {
            tempfile::Builder::new()
                .prefix("agentd-session-")
                .tempdir()
                .map_err(|e| e.to_string())
        });
        match made {
            Ok(dir) => Ok(dir.path().to_owned()),
            Err(e) => Err(Error::NotAllowed(format!(
                "cannot make the temp dir for sandboxed commands in {}: {e}",
                std::env::temp_dir().display()
            ))),
        }
    }

    async fn read_file(&self, path: &Path) -> Result<Vec<u8>, Error> {
        let (path, protected) = (self.resolve(path), self.options.protected.clone());
        blocking(move |_| files::read_regular(&path, &protected)).await
    }

    async fn write_file(&self, path: &Path, content: &[u8]) -> Result<(), Error> {
        let (path, protected) = (self.resolve(path), self.options.protected.clone());
        let content = content.to_vec();
        blocking(move |_| files::write_unconfined(&path, &content, &protected)).await
    }

    async fn remove_file(&self, path: &Path) -> Result<(), Error> {
        let (path, protected) = (self.resolve(path), self.options.protected.clone());
        blocking(move |_| files::remove_unconfined(&path, &protected)).await
    }

    async fn write_file_confined(
        &self,
        path: &Path,
        content: &[u8],
        policy: &SandboxPolicy,
    ) -> Result<(), Error> {
        let (path, protected) = (self.resolve(path), self.options.protected.clone());
        let (content, policy) = (content.to_vec(), policy.clone());
        blocking(move |_| {
            let target = policy.check_write(&path)?;
            files::write_beneath(&path, &target.root, target.relative(), &content, &protected)
        })
        .await
    }

    async fn remove_file_confined(&self, path: &Path, policy: &SandboxPolicy) -> Result<(), Error> {
        let (path, protected) = (self.resolve(path), self.options.protected.clone());
        let policy = policy.clone();
        blocking(move |_| {
            let target = policy.check_remove(&path)?;
            files::remove_beneath(&path, &target.root, target.relative(), &protected)
        })
        .await
    }

    async fn file_exists(&self, path: &Path) -> bool {
        tokio::fs::try_exists(self.resolve(path))
            .await
            .unwrap_or(false)
    }

    async fn list_directory(&self, path: &Path, depth: usize) -> Result<Vec<DirEntry>, Error> {
        let (root, protected) = (self.resolve(path), self.options.protected.clone());
        blocking(move |stop| files::list(&root, depth.max(1), &protected, stop)).await
    }

    async fn real_path(&self, path: &Path) -> Result<PathBuf, Error> {
        let path = self.resolve(path);
        blocking(move |_| super::sandbox::real_path(&path, true)).await
    }

    async fn exec_command(
        &self,
        request: ExecRequest<'_>,
        output: OutputSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<ExecResult, Error> {
        let started = Instant::now();
        let cwd = request
            .working_dir
            .map(|d| self.resolve(d))
            .unwrap_or_else(|| self.cwd.clone());
        let marker = format!(
            "{}{}",
            self.marker,
            self.commands.fetch_add(1, Ordering::Relaxed)
        );
        let mut command = Command::new("/bin/bash");
        command
            .arg("-c")
            .arg(request.command)
            .current_dir(&cwd)
            .env_clear()
            .envs(self.options.env.filter(std::env::vars_os()))
            .env(MARKER_VAR, &marker)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: `detach` makes only system calls, as code between fork and exec must.
        unsafe {
            command.pre_exec(detach);
        }
        if let Some(policy) = request.sandbox {
            let namespaces = self.namespaces(policy).await?;
            sandbox(&mut command, policy, namespaces, &cwd)?;
        }
        let (mut child, spawned_child) = {
            // Listed before the lock is released, so the orphan reaper never takes its status.
            let mut spawned = process::spawned();
            let child = command.spawn().map_err(|e| match request.sandbox {
                Some(_) => Error::Spawn(std::io::Error::new(
                    e.kind(),
                    format!("in its sandbox: {e}"),
                )),
                None => Error::Spawn(e),
            })?;
            let pid = child.id().map(|p| p as i32).ok_or_else(|| {
                Error::Spawn(std::io::Error::other(
                    "child exited before its pid was read",
                ))
            })?;
            spawned.get_or_insert_default().insert(pid);
            (child, SpawnedChild(pid))
        };
        let pgid = spawned_child.0;
        // A leader that already exited has nothing to record: its group is being reaped.
        let group = process::identify(pgid);
        if let Some(group) = group {
            self.track(group, true);
        }
        let targets = Targets {
            groups: vec![pgid],
            marker: Some(&marker),
        };

        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let (mut out, mut err) = (Captured::default(), Captured::default());
        let (mut out_buf, mut err_buf) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
        let mut status = None;
        let (mut timed_out, mut cancelled) = (false, false);
        let timeout = tokio::time::sleep(request.timeout);
        tokio::pin!(timeout);
        // Set once a kill starts: SIGTERM, the grace period, SIGKILL. It runs once, however
        // often the token fires, so a dead group is never signalled again.
        let mut stopping: Option<futures::future::BoxFuture<'_, Vec<Escaped>>> = None;
        let mut escaped: Option<Vec<Escaped>> = None;
        // Armed once the command has exited or been killed: stop waiting for output from
        // whatever still holds the pipes.
        let mut drain_until: Option<tokio::time::Instant> = None;

        loop {
            // A stop under way is awaited (at most the grace period): it names the processes
            // that left the group, even when everything died at once and closed the pipes.
            if status.is_some() && stdout.is_none() && stderr.is_none() && stopping.is_none() {
                break;
            }
            let stop_started = stopping.is_some() || escaped.is_some();
            tokio::select! {
                n = read_some(&mut stdout, &mut out_buf), if stdout.is_some() => match n {
                    Some(n) => {
                        let text = out.decoder.push(&out_buf[..n]);
                        if !text.is_empty() { output(OutputStream::Stdout, &text); out.push(&text); }
                    }
                    None => stdout = None,
                },
                n = read_some(&mut stderr, &mut err_buf), if stderr.is_some() => match n {
                    Some(n) => {
                        let text = err.decoder.push(&err_buf[..n]);
                        if !text.is_empty() { output(OutputStream::Stderr, &text); err.push(&text); }
                    }
                    None => stderr = None,
                },
                s = child.wait(), if status.is_none() => {
                    status = Some(s);
                    if !stop_started {
                        drain_until = Some(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
                    }
                }
                _ = &mut timeout, if !stop_started && status.is_none() => {
                    timed_out = true;
                    stopping = Some(Box::pin(targets.stop()));
                }
                _ = cancel.cancelled(), if !stop_started => {
                    cancelled = true;
                    stopping = Some(Box::pin(targets.stop()));
                    drain_until = None;
                }
                found = poll_stop(&mut stopping), if stopping.is_some() => {
                    stopping = None;
                    escaped = Some(found);
                    // Pipes close as the processes die; whatever still holds them open after
                    // this (a process in uninterruptible sleep) is not waited for.
                    drain_until = Some(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
                }
                _ = sleep_until(drain_until), if drain_until.is_some() && stopping.is_none() => break,
            }
        }
        let status = match status {
            Some(s) => Some(s.map_err(Error::Spawn)?),
            None => child.try_wait().ok().flatten(),
        };
        drop(child);
        let ended = escaped.is_some();
        // After a normal exit, processes that still hold the pipes may have left the group:
        // name them, as a kill would have.
        let escaped: Vec<ProcessInfo> = match escaped {
            Some(e) => e,
            None if stdout.is_some() || stderr.is_some() => targets.escaped(),
            None => Vec::new(),
        }
        .into_iter()
        .map(|e| ProcessInfo {
            pid: e.id.pid.unsigned_abs(),
            command: e.command.chars().take(MAX_COMMAND_CHARS).collect(),
        })
        .collect();
        if let Some(group) = group {
            self.track(group, group_alive(pgid));
        }
        let mut stderr = err.finish();
        if !escaped.is_empty() {
            tracing::warn!(
                command = %marker,
                count = escaped.len(),
                "processes left the command's process group"
            );
            if !stderr.is_empty() && !stderr.ends_with('\n') {
                stderr.push('\n');
            }
            stderr.push_str(&format!(
                "[warning: {}]\n",
                describe_escaped(&escaped, ended)
            ));
        }
        Ok(ExecResult {
            stdout: out.finish(),
            stderr,
            exit_code: status.and_then(|s| s.code()),
            timed_out,
            cancelled,
            duration: started.elapsed(),
            escaped,
        })
    }

    /// Runs the report in a read-only sandbox without network: it reads a workspace whose
    /// configuration the model may have written (a `.git/config` naming programs), so what
    /// it runs must not reach beyond what a sandboxed command could. Where no sandbox can
    /// be built there is no report.
    async fn report(&self, script: &str, timeout: Duration) -> Option<String> {
        let policy = SandboxPolicy::report();
        let request = ExecRequest {
            command: script,
            timeout,
            working_dir: None,
            sandbox: Some(&policy),
        };
        match self
            .exec_command(request, &|_, _| {}, &CancellationToken::new())
            .await
        {
            Ok(result) => (!result.timed_out).then_some(result.stdout),
            Err(e) => {
                tracing::warn!("no workspace report: {e}");
                None
            }
        }
    }

    async fn grep(&self, mut options: GrepOptions) -> Result<String, Error> {
        options.path = self.resolve(&options.path);
        let (root, protected) = (self.cwd.clone(), self.options.protected.clone());
        blocking(move |stop| search::grep(&root, &options, &protected, stop)).await
    }

    async fn glob(&self, pattern: &str, base: &Path) -> Result<Vec<String>, Error> {
        let (root, base, pattern) = (self.cwd.clone(), self.resolve(base), pattern.to_owned());
        let protected = self.options.protected.clone();
        blocking(move |stop| search::glob(&root, &base, &pattern, &protected, stop)).await
    }

    async fn terminate_all(&self) {
        // The namespaces' holder goes too (the next command builds them again): a closed
        // session leaves nothing running.
        drop(
            self.namespaces
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        let groups: Vec<ProcessId> = {
            let mut g = self.groups.lock().unwrap_or_else(|e| e.into_inner());
            g.drain().collect()
        };
        if self.commands.load(Ordering::Relaxed) == 0 {
            return;
        }
        // Every command of this environment, wherever its processes moved. A group is
        // signalled only while its leader is the recorded one or a marked member remains, so
        // a pgid reused since is left alone.
        let members = marked(&self.marker);
        let targets = Targets {
            groups: groups
                .iter()
                .filter(|g| g.alive() || members.iter().any(|(_, s, _)| s.pgrp == g.pid))
                .map(|g| g.pid)
                .collect(),
            marker: Some(&self.marker),
        };
        targets.stop().await;
        if let Some(ledger) = &self.options.ledger {
            for group in groups {
                ledger.ended(group);
            }
        }
    }
}

/// Makes a forked command the leader of a new session and process group, without a
/// controlling terminal: the daemon may have one (`agentctl` starts it from a terminal), and
/// through `/dev/tty` a command could push keystrokes into the person's shell (`TIOCSTI`).
/// Then marks every descriptor beyond stdio close-on-exec: the daemon may have inherited
/// some open (from whatever started it), and a write through one passes every check.
/// Makes only system calls, as code between `fork` and `exec` must.
fn detach() -> std::io::Result<()> {
    // SAFETY: plain system calls with valid arguments.
    unsafe {
        if libc::setsid() == -1 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) == 0
        {
            return Ok(());
        }
        // Before Linux 5.11: one descriptor at a time, up to the limit.
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == -1 {
            return Err(std::io::Error::last_os_error());
        }
        let last = libc::c_int::try_from(limit.rlim_cur.min(1 << 20)).unwrap_or(1 << 20);
        for fd in 3..last {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
    Ok(())
}

/// Makes `command` run under `policy`: its temp dir as `TMPDIR`, the `namespaces` (when they
/// could be built) joined in `cwd`, then the Landlock ruleset, built here and applied in the
/// child before `exec`.
#[cfg(target_os = "linux")]
fn sandbox(
    command: &mut Command,
    policy: &SandboxPolicy,
    namespaces: Option<Arc<Namespaces>>,
    cwd: &Path,
) -> Result<(), Error> {
    let mut ruleset = Some(super::sandbox::ruleset(policy)?);
    let join = namespaces.as_ref().map(|n| n.join(cwd)).transpose()?;
    if let Some(temp) = policy.temp_dir() {
        for var in ["TMPDIR", "TMP", "TEMP", "TEMPDIR"] {
            command.env(var, temp);
        }
    }
    // SAFETY: the closure runs in the forked child and makes only system calls (setns,
    // chdir, prctl, capset and landlock_restrict_self); everything it uses was allocated
    // before the fork, and `namespaces` keeps the descriptors `join` names open.
    unsafe {
        command.pre_exec(move || {
            let _keep = &namespaces;
            if let Some(join) = &join {
                join.enter()?;
            }
            match ruleset.take() {
                Some(ruleset) => super::sandbox::restrict_child(ruleset),
                None => Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
            }
        });
    }
    Ok(())
}

/// Without Landlock nothing can enforce a policy, so a sandboxed command is refused.
#[cfg(not(target_os = "linux"))]
fn sandbox(
    _command: &mut Command,
    _policy: &SandboxPolicy,
    _namespaces: Option<Arc<Namespaces>>,
    _cwd: &Path,
) -> Result<(), Error> {
    Err(Error::NotAllowed(
        "cannot sandbox the command: sandboxes need Landlock, which only Linux has; the command \
         was not run (set sandbox = \"off\" to run commands unrestricted)"
            .into(),
    ))
}

/// Runs filesystem work off the async threads. `f` is given a flag that is set when the
/// caller stops waiting (an aborted call drops its future): long walks check it and stop.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce(&AtomicBool) -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    /// Sets the flag when the waiting future is dropped, finished or not.
    struct Abandon(Arc<AtomicBool>);
    impl Drop for Abandon {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let _abandon = Abandon(stop.clone());
    tokio::task::spawn_blocking(move || f(&stop))
        .await
        .map_err(|e| Error::Io {
            path: PathBuf::new(),
            source: std::io::Error::other(e),
        })?
}

pub(super) async fn read_some<R: tokio::io::AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buf: &mut [u8],
) -> Option<usize> {
    let pipe = pipe.as_mut()?;
    match pipe.read(buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

/// Waits for a stop under way (never ready when there is none).
async fn poll_stop(
    stopping: &mut Option<futures::future::BoxFuture<'_, Vec<Escaped>>>,
) -> Vec<Escaped> {
    match stopping {
        Some(stop) => stop.await,
        None => std::future::pending().await,
    }
}

pub(super) async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `command` in `env` to its end (or `cancel`), with a watchdog against hangs.
    async fn run(
        env: &LocalExecutionEnvironment,
        command: &str,
        cancel: &CancellationToken,
    ) -> ExecResult {
        let request = ExecRequest {
            command,
            timeout: Duration::from_secs(300),
            working_dir: None,
            sandbox: None,
        };
        tokio::time::timeout(
            Duration::from_secs(60),
            env.exec_command(request, &|_, _| {}, cancel),
        )
        .await
        .expect("the command returns")
        .unwrap()
    }

    /// Live processes whose last argument is `marker`.
    fn with_marker(marker: &str) -> Vec<i32> {
        process::marked("")
            .into_iter()
            .filter(|(_, _, cmd)| cmd.ends_with(marker))
            .map(|(id, _, _)| id.pid)
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_escaped_process_holding_the_pipes_is_named_and_ended_with_the_session() {
        let dir = tempfile::tempdir().unwrap();
        let env = LocalExecutionEnvironment::new(dir.path().to_owned(), EnvPolicy::InheritCore);
        let marker = format!("0.{:07}1", std::process::id());
        let command = format!("(setsid sleep 600 {marker} &); echo done");
        let result = run(&env, &command, &CancellationToken::new()).await;
        assert_eq!(
            (result.stdout.as_str(), result.exit_code),
            ("done\n", Some(0))
        );
        assert!(
            result
                .stderr
                .contains("left the command's process group: pid")
                && result.stderr.contains("keep running"),
            "{}",
            result.stderr
        );
        assert_eq!(with_marker(&marker).len(), 1, "it keeps running");
        env.terminate_all().await;
        assert_eq!(with_marker(&marker), Vec::<i32>::new());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancel_ends_term_ignoring_processes_that_left_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let env = LocalExecutionEnvironment::new(dir.path().to_owned(), EnvPolicy::InheritCore);
        let marker = format!("0.{:07}2", std::process::id());
        let command = format!(
            "(setsid bash -c \"trap '' TERM; sleep 600 {marker}\" &); trap '' TERM; sleep 600"
        );
        let cancel = CancellationToken::new();
        let stopper = cancel.clone();
        let (result, ()) = tokio::join!(run(&env, &command, &cancel), async move {
            while with_marker(&marker).is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            stopper.cancel();
        });
        assert!(result.cancelled);
        assert!(
            result.stderr.contains("they were ended with it"),
            "{}",
            result.stderr
        );
        assert_eq!(
            with_marker(&format!("0.{:07}2", std::process::id())),
            Vec::<i32>::new()
        );
    }

    /// Everything dies at the first SIGTERM and the pipes close at once: the stop's list of
    /// escaped processes still reaches the result (it was dropped when the loop ended on the
    /// closed pipes first).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancel_names_escaped_processes_that_die_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let env = LocalExecutionEnvironment::new(dir.path().to_owned(), EnvPolicy::InheritCore);
        let marker = format!("0.{:07}3", std::process::id());
        let command = format!("(setsid sleep 600 {marker} &); sleep 600 {marker}1");
        let escaped = || {
            process::marked("")
                .into_iter()
                .find(|(_, _, cmd)| *cmd == format!("sleep 600 {marker}"))
                .map(|(id, _, _)| id.pid)
        };
        let cancel = CancellationToken::new();
        let stopper = cancel.clone();
        let (result, pid) = tokio::join!(run(&env, &command, &cancel), async {
            loop {
                if let Some(pid) = escaped() {
                    stopper.cancel();
                    return pid;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        assert!(result.cancelled);
        assert_eq!(
            result.escaped,
            [ProcessInfo {
                pid: pid.unsigned_abs(),
                command: format!("sleep 600 {marker}"),
            }]
        );
        assert!(
            result.stderr.contains(&format!("pid {pid}")),
            "{}",
            result.stderr
        );
        assert_eq!(escaped(), None);
    }
}
