//! How the local environment starts a command: `bash -c` in a new session and process
//! group, its variables filtered and marked, in its sandbox where it has one; then the shared
//! loop (`exec/child.rs`) runs it, and the processes that left its group are named.

use super::super::child;
use super::super::process::{self, MARKER_VAR, group_alive};
use super::super::sandbox::{Namespaces, SandboxPolicy};
use super::super::spawn::{Command, Spawned};
use super::super::{Error, ExecRequest, ExecResult, ExecutionEnvironment, OutputSink};
use super::stop::Targets;
use super::{LocalExecutionEnvironment, NamespaceCell, describe_escaped};
use agentd_proto::ProcessInfo;
use nix::errno::Errno;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

impl LocalExecutionEnvironment {
    /// [`ExecutionEnvironment::exec_command`].
    pub(super) async fn command(
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
        let mut command = Command::new(
            Path::new("/bin/bash"),
            &["-c".as_ref(), request.command.as_ref()],
            &cwd,
        )
        .map_err(Error::Spawn)?;
        command
            .envs(self.options.env.filter(std::env::vars_os()))
            .env(MARKER_VAR, &marker);
        // SAFETY: `detach` makes only system calls, and cannot panic.
        unsafe {
            command.hook(Box::new(detach));
        }
        if let Some(policy) = request.sandbox {
            let namespaces = self.namespaces(policy).await?;
            sandbox(&mut command, policy, namespaces, &cwd)?;
        }
        let (pgid, mut child) = spawn(command, request.sandbox.is_some())?;
        // A leader that already exited has nothing to record: its group is being reaped.
        let group = process::identify(pgid);
        if let Some(group) = group {
            self.track(group, true);
        }
        let mut targets = Targets::command(pgid, &marker);
        let finished =
            child::run(&mut child, &mut targets, request.timeout, cancel, output).await?;
        let ended = finished.stopped.is_some();
        // After a normal exit, processes that still hold the pipes may have left the group:
        // name them, as a stop would have.
        let escaped: Vec<ProcessInfo> = match finished.stopped {
            Some(e) => e,
            None if child.held() => targets.escaped(),
            None => Vec::new(),
        }
        .into_iter()
        .map(|e| e.info())
        .collect();
        if let Some(group) = group {
            self.track(group, group_alive(pgid));
        }
        let mut stderr = finished.stderr;
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
            stdout: finished.stdout,
            stderr,
            exit_code: finished.status.and_then(|s| s.code()),
            timed_out: finished.timed_out,
            cancelled: finished.cancelled,
            duration: started.elapsed(),
            escaped,
        })
    }

    /// The namespaces for `policy`, built on first use and kept while an environment
    /// uses the policy (environments with the same policy share one set: see
    /// [`SandboxPolicy::mounts`]); `None` where they cannot be built (logged once per
    /// daemon). Once they could be built in this daemon, a failure to build them refuses the
    /// command: whatever made it fail (a command exhausting the user's namespaces, a path
    /// planted where bubblewrap mounts) must not quietly leave the next commands with
    /// Landlock alone, which hides nothing. Reports keep one set for the whole daemon (their
    /// policy is the same everywhere), so a session's start does not build one.
    pub(super) async fn namespaces(
        &self,
        policy: &SandboxPolicy,
    ) -> Result<Option<Arc<Namespaces>>, Error> {
        static WORKED: AtomicBool = AtomicBool::new(false);
        static REPORTS: Mutex<Option<Arc<NamespaceCell>>> = Mutex::new(None);
        type Shared = Vec<(SandboxPolicy, Arc<[PathBuf]>, Weak<NamespaceCell>)>;
        static SHARED: Mutex<Shared> = Mutex::new(Vec::new());
        let report = *policy == SandboxPolicy::report();
        let mounts = policy.mounts();
        let hidden = &self.options.hidden;
        let fits = |n: &Namespaces| n.policy() == &mounts && n.hidden() == &hidden[..];
        // Built for another policy or list, or before a directory they hide existed
        // (agentd's config directory made by `agentctl login`, a tmux server started since),
        // or failed where they worked before: built again.
        let stale = |cell: &NamespaceCell| {
            cell.get().is_some_and(|built| match built {
                Ok(n) => !fits(n) || n.missed_a_hidden_path(),
                Err(_) => WORKED.load(Ordering::Relaxed),
            })
        };
        let cell = if report {
            let mut current = REPORTS.lock().unwrap_or_else(|e| e.into_inner());
            match current.as_mut() {
                Some(cell) if !stale(cell) => cell.clone(),
                _ => current.insert(Arc::new(NamespaceCell::new())).clone(),
            }
        } else {
            let cell = {
                let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
                shared.retain(|(_, _, cell)| cell.strong_count() > 0);
                let found = shared
                    .iter()
                    .find(|(p, h, _)| *p == mounts && h == hidden)
                    .and_then(|(_, _, cell)| cell.upgrade());
                match found {
                    Some(cell) if !stale(&cell) => cell,
                    _ => {
                        let cell = Arc::new(NamespaceCell::new());
                        shared.retain(|(p, h, _)| !(*p == mounts && h == hidden));
                        shared.push((mounts.clone(), hidden.clone(), Arc::downgrade(&cell)));
                        cell
                    }
                }
            };
            *self.namespaces.lock().unwrap_or_else(|e| e.into_inner()) = Some(cell.clone());
            cell
        };
        let built = cell
            .get_or_init(|| async { Namespaces::build(&mounts, hidden).await.map(Arc::new) })
            .await;
        let built = match built {
            Ok(n) if fits(n) => Ok(n.clone()),
            // Built concurrently for another policy: this command gets its own.
            Ok(_) => Namespaces::build(&mounts, hidden).await.map(Arc::new),
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
}

/// Makes a forked command the leader of a new session and process group, without a
/// controlling terminal: the daemon may have one (`agentctl` starts it from a terminal), and
/// through `/dev/tty` a command could push keystrokes into the person's shell (`TIOCSTI`).
/// Then marks every descriptor beyond stdio close-on-exec: the daemon may have inherited
/// some open (from whatever started it), and a write through one passes every check.
/// Makes only system calls, as code between the spawn and the `exec` must.
pub(super) fn detach() -> Result<(), Errno> {
    // SAFETY: plain system calls with valid arguments.
    unsafe {
        Errno::result(libc::setsid())?;
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
        Errno::result(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit))?;
        let last = libc::c_int::try_from(limit.rlim_cur.min(1 << 20)).unwrap_or(1 << 20);
        for fd in 3..last {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
    Ok(())
}

/// Starts `command`; a failure says whether it was in its sandbox.
pub(super) fn spawn(command: Command, sandboxed: bool) -> Result<Spawned, Error> {
    command.spawn().map_err(|e| {
        if sandboxed {
            Error::Spawn(std::io::Error::new(
                e.kind(),
                format!("in its sandbox: {e}"),
            ))
        } else {
            Error::Spawn(e)
        }
    })
}

/// Makes `command` run under `policy`: its temp dir as `TMPDIR`, the `namespaces` (when they
/// could be built) joined in `cwd`, then the Landlock ruleset, built here and applied in the
/// child before `exec`.
#[cfg(target_os = "linux")]
pub(super) fn sandbox(
    command: &mut Command,
    policy: &SandboxPolicy,
    namespaces: Option<Arc<Namespaces>>,
    cwd: &Path,
) -> Result<(), Error> {
    let restriction = super::super::sandbox::ruleset(policy)?;
    let join = namespaces.as_ref().map(|n| n.join(cwd)).transpose()?;
    if let Some(temp) = policy.temp_dir() {
        for var in ["TMPDIR", "TMP", "TEMP", "TEMPDIR"] {
            command.env(var, temp);
        }
    }
    // SAFETY: the hook makes only system calls (setns, chdir, prctl, capset and
    // landlock_restrict_self) on what it owns, and cannot panic; `namespaces` keeps open the
    // descriptors `join` names.
    unsafe {
        command.hook(Box::new(move || {
            let _keep = &namespaces;
            if let Some(join) = &join {
                join.enter()?;
            }
            restriction.apply()
        }));
    }
    Ok(())
}

/// Without Landlock nothing can enforce a policy, so a sandboxed command is refused.
#[cfg(not(target_os = "linux"))]
pub(super) fn sandbox(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::EnvPolicy;
    use std::time::Duration;

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

    /// The timeout's SIGTERM is ignored, so the stop's SIGKILL ends the command after the
    /// grace period; what it printed before is kept.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_timeout_kills_a_command_that_ignores_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        let env = LocalExecutionEnvironment::new(dir.path().to_owned(), EnvPolicy::InheritCore);
        let marker = format!("0.{:07}4", std::process::id());
        let command = format!("trap '' TERM; echo started; sleep 600 {marker}");
        let request = ExecRequest {
            command: &command,
            timeout: Duration::from_secs(3),
            working_dir: None,
            sandbox: None,
        };
        let result = tokio::time::timeout(
            Duration::from_secs(60),
            env.exec_command(request, &|_, _| {}, &CancellationToken::new()),
        )
        .await
        .expect("the command returns")
        .unwrap();
        assert_eq!(
            result.stdout, "started\n",
            "the trap was set before the timeout"
        );
        assert!(result.timed_out && !result.cancelled);
        assert_eq!(result.exit_code, None, "killed by a signal");
        assert_eq!(with_marker(&marker), Vec::<i32>::new());
    }

    /// A build abandoned at any point (a `prepare_sandbox` task when the runtime shuts down)
    /// leaves no bubblewrap behind: its child, blocked before its exec with the pipe the
    /// build reads, made that read, and the runtime's shutdown, wait forever.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_abandoned_sandbox_build_leaves_no_bubblewrap_behind() {
        let dir = tempfile::tempdir().unwrap();
        let env = LocalExecutionEnvironment::new(dir.path().to_owned(), EnvPolicy::InheritCore);
        let mut config = crate::config::default_session_config("anthropic", "m");
        config.sandbox = agentd_proto::SandboxMode::WorkspaceWrite;
        let policy = SandboxPolicy::new(&config, &env).unwrap().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let root = root.to_str().unwrap().to_owned();
        let left = || {
            std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter(|e| {
                    std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                        String::from_utf8_lossy(&c).starts_with("bwrap\0")
                            && c.split(|b| *b == 0).any(|a| a == root.as_bytes())
                    })
                })
                .count()
        };
        // Abandoned after a growing wait, so some land while bubblewrap sets up.
        for micros in (0..40).map(|i| i * 250) {
            let build = Namespaces::build(&policy, &[]);
            let _ = tokio::time::timeout(Duration::from_micros(micros), build).await;
            let deadline = Instant::now() + Duration::from_secs(30);
            while left() > 0 {
                assert!(
                    Instant::now() < deadline,
                    "bubblewrap left behind (abandoned after {micros} µs)"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_prepared_sandbox_is_built_before_the_first_command_which_joins_it() {
        let dir = tempfile::tempdir().unwrap();
        let env = LocalExecutionEnvironment::new(dir.path().to_owned(), EnvPolicy::InheritCore);
        let mut config = crate::config::default_session_config("anthropic", "m");
        config.sandbox = agentd_proto::SandboxMode::WorkspaceWrite;
        let policy = SandboxPolicy::new(&config, &env).unwrap().unwrap();
        env.prepare_sandbox(&policy).await;
        let built = || {
            let slot = env.namespaces.lock().unwrap();
            match slot.as_ref().and_then(|cell| cell.get()) {
                Some(Ok(n)) => n.clone(),
                other => panic!(
                    "not built (is bubblewrap installed?): {:?}",
                    other.map(|r| r.as_ref().err())
                ),
            }
        };
        let prepared = built();
        let request = ExecRequest {
            command: "echo in",
            timeout: Duration::from_secs(60),
            working_dir: None,
            sandbox: Some(&policy),
        };
        let result = env
            .exec_command(request, &|_, _| {}, &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(result.stdout, "in\n");
        assert!(
            Arc::ptr_eq(&prepared, &built()),
            "the command built its own"
        );
    }

    async fn joined(env: &LocalExecutionEnvironment, policy: &SandboxPolicy) -> Arc<Namespaces> {
        env.namespaces(policy)
            .await
            .unwrap()
            .expect("namespaces (is bubblewrap installed?)")
    }

    async fn run_sandboxed(
        env: &LocalExecutionEnvironment,
        policy: &SandboxPolicy,
        command: &str,
    ) -> ExecResult {
        let request = ExecRequest {
            command,
            timeout: Duration::from_secs(60),
            working_dir: None,
            sandbox: Some(policy),
        };
        env.exec_command(request, &|_, _| {}, &CancellationToken::new())
            .await
            .unwrap()
    }

    /// Namespaces are shared by the sessions of one workspace (built once between them),
    /// and bind the directory of every temp dir: Landlock must keep each command to its own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sessions_of_one_workspace_share_namespaces_not_temp_dirs() {
        let (dir, other_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let new = |d: &Path| LocalExecutionEnvironment::new(d.to_owned(), EnvPolicy::InheritCore);
        let (a, b, elsewhere) = (new(dir.path()), new(dir.path()), new(other_dir.path()));
        let mut config = crate::config::default_session_config("anthropic", "m");
        config.sandbox = agentd_proto::SandboxMode::WorkspaceWrite;
        let policy = |env| SandboxPolicy::new(&config, env).unwrap().unwrap();
        let (pa, pb, pe) = (policy(&a), policy(&b), policy(&elsewhere));
        assert_ne!(pa.temp_dir(), pb.temp_dir());
        let (na, nb) = (joined(&a, &pa).await, joined(&b, &pb).await);
        assert!(Arc::ptr_eq(&na, &nb), "one workspace, one set");
        assert!(
            !Arc::ptr_eq(&na, &joined(&elsewhere, &pe).await),
            "another workspace has its own"
        );
        let theirs = pa.temp_dir().unwrap().join("planted");
        let own = pb.temp_dir().unwrap().join("mine");
        let both = format!(
            "echo x > '{}'; echo y > '{}'",
            theirs.display(),
            own.display()
        );
        let result = run_sandboxed(&b, &pb, &both).await;
        assert!(!theirs.exists(), "wrote a sibling's temp dir: {result:?}");
        assert!(own.exists(), "could not write its own temp dir: {result:?}");
        let parent = pb.temp_dir().unwrap().parent().unwrap().join("planted");
        run_sandboxed(&b, &pb, &format!("echo x > '{}'", parent.display())).await;
        assert!(!parent.exists(), "wrote the directory of temp dirs");
    }
}
