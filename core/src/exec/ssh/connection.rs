//! One multiplexed OpenSSH connection to a host: a `ssh -M -N` master owned by a task of its
//! own, the control socket in a 0700 directory of the daemon's runtime directory, and the
//! mux clients every remote operation runs as. The master is started on first use and again
//! whenever it has died, so a dropped connection is reconnected by the next operation, or that
//! operation fails with ssh's own words.

use super::super::child::KILL_GRACE;
use super::super::process::{self, MARKER_VAR, SpawnedChild};
use super::super::{Error, sh_quote};
use super::commands::Commands;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio::sync::{Semaphore, SemaphorePermit, mpsc, oneshot};

/// How long a master may take to connect and authenticate before the attempt is given up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// How often a starting master is looked at (its control socket, its exit).
const CONNECT_POLL: Duration = Duration::from_millis(5);
/// Largest stderr kept from a master that failed (ssh's reason).
const MAX_MASTER_STDERR: usize = 8 * 1024;

/// Where and as whom to connect: everything that makes two connections different. Host keys
/// are always checked (`StrictHostKeyChecking=yes`) and no prompt is ever shown
/// (`BatchMode=yes`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub(crate) struct SshTarget {
    /// What the client called the host (a `[hosts.NAME]` name or the host itself), for
    /// messages.
    pub(crate) label: String,
    /// The host name, address or ssh configuration alias given to `ssh`.
    pub(crate) destination: String,
    /// `-l`.
    pub(crate) user: Option<String>,
    /// `-p`.
    pub(crate) port: Option<u16>,
    /// `-i`.
    pub(crate) identity_file: Option<PathBuf>,
    /// `-F`: the ssh configuration file instead of `~/.ssh/config`.
    pub(crate) ssh_config: Option<PathBuf>,
    /// `UserKnownHostsFile` instead of `~/.ssh/known_hosts`.
    pub(crate) known_hosts: Option<PathBuf>,
}

impl SshTarget {
    /// The options every ssh invocation for this target takes, before the destination.
    fn options(&self, control: &Path) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(config) = &self.ssh_config {
            args.push("-F".to_owned());
            args.push(config.display().to_string());
        }
        for option in [
            "BatchMode=yes",
            "StrictHostKeyChecking=yes",
            "LogLevel=ERROR",
            "ConnectTimeout=15",
            // A dead link is noticed within 30 s even when nothing is sent.
            "ServerAliveInterval=10",
            "ServerAliveCountMax=3",
        ] {
            args.push("-o".to_owned());
            args.push(option.to_owned());
        }
        if let Some(known) = &self.known_hosts {
            args.push("-o".to_owned());
            args.push(format!("UserKnownHostsFile=\"{}\"", known.display()));
        }
        args.push("-o".to_owned());
        args.push(format!("ControlPath=\"{}\"", control.display()));
        if let Some(user) = &self.user {
            args.push("-l".to_owned());
            args.push(user.clone());
        }
        if let Some(port) = self.port {
            args.push("-p".to_owned());
            args.push(port.to_string());
        }
        if let Some(identity) = &self.identity_file {
            args.push("-i".to_owned());
            args.push(identity.display().to_string());
        }
        args
    }
}

/// What the remote machine is, learnt once after the first connection.
#[derive(Debug)]
pub(super) struct Facts {
    /// `uname -s`, lower case (`linux`).
    pub(super) platform: String,
    /// `uname -sr`.
    pub(super) os_version: String,
    /// Whether `rg` is on the remote `PATH`.
    pub(super) ripgrep: bool,
    /// Whether `perl` is, for the command worker.
    pub(super) perl: bool,
    /// The environment a remote command would inherit, unfiltered.
    pub(super) env: Vec<(String, String)>,
}

/// What the remote machine must have; checked once, with a message naming what is missing.
const PROBE: &str = r#"for p in bash setsid env cat head find grep mkdir mktemp rm dirname sleep uname; do
  command -v "$p" >/dev/null 2>&1 || { echo "the remote machine has no $p on PATH" >&2; exit 3; }
done
[ -r "/proc/$$/fdinfo/0" ] || { echo "the remote machine has no /proc (it must run Linux)" >&2; exit 3; }
uname -s; uname -sr
if { command -v rg && command -v xargs && command -v stat; } >/dev/null 2>&1; then echo rg; else echo no-rg; fi
if command -v perl >/dev/null 2>&1; then echo perl; else echo no-perl; fi
env -0"#;

/// The [`MARKER_VAR`] of the daemon's own ssh processes (masters and mux clients): a daemon
/// that was killed cannot end them, and the next one ends every process its run marked.
fn ssh_marker() -> String {
    format!("{}.ssh", process::run_id())
}

/// The file operations' server: a long-lived bash on the remote that runs each request's
/// script in a subshell, so an operation costs a round trip and a fork instead of a new
/// channel and a login shell (whose startup files may do slow work). `SSH_CLIENT` is unset
/// so no bash it starts takes itself for an ssh login and reads `~/.bashrc`.
///
/// It first prints its process group id (sshd makes each channel's process a session
/// leader), by which a request that runs too long is ended, worker and all. A request is
/// `ARGS CAP INPUT RAW\n`, then each argument as `LENGTH\nBYTES` (the script first), then
/// INPUT bytes of stdin, then `.\n`: a worker that does not find that end where the lengths
/// say exits before running anything. The answer is `CODE OUT ERR\n` then OUT bytes of
/// stdout (`-1`: more than CAP, not sent) and ERR bytes of stderr (at most 64 KiB, trailing
/// newlines and NUL bytes dropped). Arguments never hold a NUL byte (refused before they are
/// sent: no program can receive one), so `read -N` reads them exactly: with `LC_ALL=C` it
/// counts bytes, and NUL is the one byte it drops. Stdin and stdout carry any bytes: an input
/// with a NUL byte or larger than [`WORKER_READ_INPUT`] goes through `head -c` (RAW 1), an
/// output that `read -N` did not read whole through `cat`. Everything else runs in bash's
/// builtins, since each fork and exec costs about a millisecond: stdout's size is its
/// descriptor's offset in `/proc`, and stderr is read with `$(<file)`, which does not fork.
const WORKER: &str = r#"export LC_ALL=C; unset SSH_CLIENT SSH2_CLIENT
t=$(mktemp -d) || exit 1; trap 'rm -rf "$t"' EXIT
read -r g </proc/$$/stat; g=${g##*) }; g=${g#* * }; printf '%s\n' "${g%% *}"
while read -r n cap len raw; do
  a=(); i=0
  while [ "$i" -lt "$n" ]; do read -r l || exit 0; v=; [ "$l" -gt 0 ] && { IFS= read -r -N "$l" v || exit 0; }; a+=("$v"); i=$((i+1)); done
  if [ "$raw" = 1 ]; then head -c "$len" >"$t/in"
  else v=; [ "$len" -gt 0 ] && { IFS= read -r -N "$len" v || exit 0; }; printf %s "$v" >"$t/in"; fi
  read -r v && [ "$v" = . ] || exit 1
  exec 3>"$t/out"
  ( set -- "${a[@]:1}"; eval "${a[0]}" ) <"$t/in" >&3 2>"$t/err"; c=$?
  f=$(</proc/$$/fdinfo/3); exec 3>&-
  o=${f#pos:}; o=${o%%$'\n'*}; o=${o//[!0-9]/}
  e=$(<"$t/err"); e=${e:0:65536}
  if [ "$o" -gt "$cap" ]; then printf '%s -1 %s\n%s' "$c" "${#e}" "$e"; continue; fi
  printf '%s %s %s\n' "$c" "$o" "${#e}"
  v=; [ "$o" -gt 0 ] && [ "$o" -le 65536 ] && IFS= read -r -N "$o" v <"$t/out"
  if [ "${#v}" = "$o" ]; then printf %s%s "$v" "$e"; else cat "$t/out"; printf %s "$e"; fi
done"#;

/// Inputs larger than this go to the worker through `head -c`: `read -N` reads a pipe a
/// byte at a time.
const WORKER_READ_INPUT: usize = 1024 * 1024;

/// At most this many workers per connection: requests run side by side up to it, so one that
/// hangs holds its own worker only. Every worker is a session (channel) of the connection,
/// and sshd allows 10 by default (`MaxSessions`), which commands need too.
const MAX_WORKERS: usize = 4;
/// An idle worker beyond the first is closed after this long unused.
const IDLE_WORKER: Duration = Duration::from_secs(60);

/// Ends a process group: `$1` the group, `$2` the grace period in tenths of a second.
pub(super) const KILL: &str = r#"kill -TERM -- "-$1" 2>/dev/null || exit 0; i=0
while [ "$i" -lt "$2" ] && kill -0 -- "-$1" 2>/dev/null; do sleep 0.1; i=$((i+1)); done
kill -KILL -- "-$1" 2>/dev/null; exit 0"#;

/// A request to the master's task: make sure the master runs, then answer.
type Ensure = oneshot::Sender<Result<(), String>>;

/// A multiplexed connection. Cheap to share; the master lives as long as the last holder.
pub(crate) struct Connection {
    target: SshTarget,
    control: PathBuf,
    ensure: mpsc::Sender<Ensure>,
    workers: Arc<Workers>,
    commands: Commands,
    facts: OnceLock<Facts>,
}

impl Connection {
    fn new(target: SshTarget, control: PathBuf) -> Arc<Self> {
        let (ensure, requests) = mpsc::channel(64);
        tokio::spawn(master_task(target.clone(), control.clone(), requests));
        Arc::new(Self {
            workers: Arc::new(Workers {
                target: target.clone(),
                control: control.clone(),
                slots: Semaphore::new(MAX_WORKERS),
                idle: Mutex::new(Idle::default()),
            }),
            commands: Commands::new(target.clone(), control.clone()),
            target,
            control,
            ensure,
            facts: OnceLock::new(),
        })
    }

    /// The target, for messages.
    pub(super) fn target(&self) -> &SshTarget {
        &self.target
    }

    /// The command worker, which starts shell commands.
    pub(super) fn commands(&self) -> &Commands {
        &self.commands
    }

    /// The remote machine's facts once a connection has been made.
    pub(super) fn facts(&self) -> Option<&Facts> {
        self.facts.get()
    }

    /// Starts the master if it is not running (the first use, or after it died): the host
    /// authenticated against its known key, nothing run on it yet.
    pub(crate) async fn open(&self) -> Result<(), Error> {
        let (reply, answer) = oneshot::channel();
        let gone = || {
            Error::Unavailable(format!(
                "ssh {}: the connection was shut down",
                self.target.label
            ))
        };
        self.ensure.send(reply).await.map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?.map_err(|reason| {
            Error::Unavailable(format!(
                "cannot connect to ssh host {}: {reason}",
                self.target.label
            ))
        })
    }

    /// Starts the master if it is not running (the first use, or after it died) and learns
    /// the remote's facts the first time.
    pub(super) async fn connect(&self) -> Result<&Facts, Error> {
        self.open().await?;
        if let Some(facts) = self.facts.get() {
            return Ok(facts);
        }
        // Over a channel of its own: the environment it reads is the login's, not the worker's.
        let out = tokio::time::timeout(
            CONNECT_TIMEOUT,
            self.run_alone(PROBE, &[], None, 1024 * 1024),
        )
        .await
        .map_err(|_| {
            Error::Unavailable(format!(
                "ssh host {}: the remote shell did not answer the probe within {} s",
                self.target.label,
                CONNECT_TIMEOUT.as_secs()
            ))
        })??;
        if out.code != Some(0) {
            return Err(Error::Unavailable(format!(
                "ssh host {}: {}",
                self.target.label,
                out.stderr.trim()
            )));
        }
        let facts = parse_facts(&out.stdout).ok_or_else(|| {
            Error::Unavailable(format!(
                "ssh host {}: could not read what the remote machine is (uname, env)",
                self.target.label
            ))
        })?;
        let facts = self.facts.get_or_init(|| facts);
        if facts.perl {
            self.commands.warm(CONNECT_TIMEOUT);
        }
        Ok(facts)
    }

    /// An `ssh` mux client running `script` (bash) with `args` as `$1...` on the remote.
    /// stdin, stdout and stderr are pipes; the client is killed when dropped.
    pub(super) fn command(&self, script: &str, args: &[&str]) -> Command {
        mux_command(&self.target, &self.control, script, args)
    }

    /// Runs `script` with `args` to its end with `input` on stdin, on a worker (one round
    /// trip); keeps at most `cap` bytes of stdout (more is an error) and 64 KiB of stderr.
    /// When it takes longer than `timeout`, it fails with an error naming it (`what`) and is
    /// ended on the remote, its worker with it. When no worker can be started it runs over a
    /// channel of its own.
    pub(super) async fn run(
        &self,
        what: &str,
        timeout: Duration,
        script: &str,
        args: &[&str],
        input: Option<&[u8]>,
        cap: usize,
    ) -> Result<Output, Error> {
        if std::iter::once(&script)
            .chain(args)
            .any(|a| a.contains('\0'))
        {
            return Err(Error::NotAllowed(format!(
                "{what}: an argument holds a NUL byte, which no remote program can receive; nothing was sent to ssh host {}",
                self.target.label
            )));
        }
        let timed_out = |_| {
            Error::Unavailable(format!(
                "ssh host {}: {what} took more than {} s and was ended (the per-request limit, `file_timeout_secs` in the host's [hosts.NAME] entry)",
                self.target.label,
                timeout.as_secs_f64()
            ))
        };
        let Some(mut busy) = self.workers.take(timeout).await else {
            return tokio::time::timeout(timeout, self.run_alone(script, args, input, cap))
                .await
                .map_err(timed_out)?;
        };
        match tokio::time::timeout(timeout, busy.exchange(script, args, input, cap)).await {
            Ok(Ok(answer)) => {
                busy.put_back();
                answer.map_err(|TooLarge| too_large(cap))
            }
            Ok(Err(e)) => {
                tracing::debug!(host = %self.target.label, "the ssh worker failed: {e}");
                drop(busy);
                tokio::time::timeout(timeout, self.run_alone(script, args, input, cap))
                    .await
                    .map_err(timed_out)?
            }
            // Dropping `busy` ends what the worker runs.
            Err(elapsed) => Err(timed_out(elapsed)),
        }
    }
}

/// `ssh` running `script` with `args` over the connection's master.
pub(super) fn mux_command(
    target: &SshTarget,
    control: &Path,
    script: &str,
    args: &[&str],
) -> Command {
    let mut remote = format!("exec /bin/bash -c {} agentd", sh_quote(script));
    for arg in args {
        remote.push(' ');
        remote.push_str(&sh_quote(arg));
    }
    let mut command = Command::new("ssh");
    command
        .args(target.options(control))
        .args(["-T", "-o", "ControlMaster=no", "--"])
        .arg(&target.destination)
        .arg(remote)
        .env(MARKER_VAR, ssh_marker())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

impl Connection {
    /// Like [`Connection::run`], over a channel of its own.
    pub(super) async fn run_alone(
        &self,
        script: &str,
        args: &[&str],
        input: Option<&[u8]>,
        cap: usize,
    ) -> Result<Output, Error> {
        use tokio::io::AsyncWriteExt;
        let (mut child, _spawned) =
            process::spawn(&mut self.command(script, args)).map_err(Error::Spawn)?;
        let stdin = child.stdin.take();
        let feed = async move {
            if let (Some(mut stdin), Some(input)) = (stdin, input) {
                // A remote that stops reading (a failed mkdir) closes the pipe: not our error.
                let _ = stdin.write_all(input).await;
                let _ = stdin.shutdown().await;
            }
        };
        let mut stdout = child.stdout.take().ok_or_else(no_pipe)?;
        let mut stderr = child.stderr.take().ok_or_else(no_pipe)?;
        let mut out = Vec::new();
        let mut err = Vec::new();
        let read_out = async {
            let mut limited = (&mut stdout).take(cap as u64 + 1);
            limited.read_to_end(&mut out).await
        };
        let read_err = async {
            let mut limited = (&mut stderr).take(64 * 1024);
            limited.read_to_end(&mut err).await
        };
        let ((), r_out, r_err) = tokio::join!(feed, read_out, read_err);
        r_out.map_err(Error::Spawn)?;
        r_err.map_err(Error::Spawn)?;
        if out.len() > cap {
            return Err(too_large(cap));
        }
        let status = child.wait().await.map_err(Error::Spawn)?;
        let stderr = String::from_utf8_lossy(&err).into_owned();
        if status.code() == Some(255) {
            return Err(self.unreachable(&stderr));
        }
        Ok(Output {
            code: status.code(),
            stdout: out,
            stderr,
        })
    }

    /// The error for an ssh client that exited 255: ssh could not reach the host.
    pub(super) fn unreachable(&self, stderr: &str) -> Error {
        let reason = stderr.trim();
        Error::Unavailable(format!(
            "ssh host {}: {}",
            self.target.label,
            if reason.is_empty() {
                "the connection failed"
            } else {
                reason
            }
        ))
    }
}

fn too_large(cap: usize) -> Error {
    Error::NotAllowed(format!("the remote output is larger than {cap} bytes"))
}

/// An output larger than the request's cap.
struct TooLarge;

/// A running worker: its channel's pipes and its remote process group.
struct Worker {
    child: Child,
    _spawned: SpawnedChild,
    group: i32,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::BufReader<tokio::process::ChildStdout>,
}

impl Worker {
    /// A new worker, once it has said its process group (`None`: it did not within
    /// `timeout`; the connection is broken).
    async fn start(target: &SshTarget, control: &Path, timeout: Duration) -> Option<Self> {
        use tokio::io::AsyncBufReadExt;
        let mut command = mux_command(target, control, WORKER, &[]);
        command.stderr(Stdio::null());
        let (mut child, spawned) = process::spawn(&mut command).ok()?;
        let stdin = child.stdin.take()?;
        let mut stdout = tokio::io::BufReader::new(child.stdout.take()?);
        let mut line = String::new();
        tokio::time::timeout(timeout, (&mut stdout).take(32).read_line(&mut line))
            .await
            .ok()?
            .ok()?;
        Some(Self {
            group: line.trim().parse().ok().filter(|&g: &i32| g > 1)?,
            child,
            _spawned: spawned,
            stdin,
            stdout,
        })
    }

    /// Whether its channel is still open (the connection did not drop under it).
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    async fn exchange(
        &mut self,
        script: &str,
        args: &[&str],
        input: &[u8],
        cap: usize,
    ) -> std::io::Result<Result<Output, TooLarge>> {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let raw = input.len() > WORKER_READ_INPUT || input.contains(&0);
        let mut message = format!(
            "{} {cap} {} {}\n",
            args.len() + 1,
            input.len(),
            u8::from(raw)
        )
        .into_bytes();
        for part in std::iter::once(&script).chain(args) {
            message.extend_from_slice(format!("{}\n", part.len()).as_bytes());
            message.extend_from_slice(part.as_bytes());
        }
        message.extend_from_slice(input);
        message.extend_from_slice(b".\n");
        self.stdin.write_all(&message).await?;
        self.stdin.flush().await?;
        let mut header = String::new();
        (&mut self.stdout).take(64).read_line(&mut header).await?;
        let broken = || std::io::Error::other(format!("bad answer from the worker: {header:?}"));
        let mut fields = header.split_whitespace().map(str::parse::<i64>);
        let (Some(Ok(code)), Some(Ok(out)), Some(Ok(err))) =
            (fields.next(), fields.next(), fields.next())
        else {
            return Err(broken());
        };
        let mut stdout = Vec::new();
        if out >= 0 {
            (&mut self.stdout)
                .take(out as u64)
                .read_to_end(&mut stdout)
                .await?;
        }
        let mut stderr = Vec::new();
        (&mut self.stdout)
            .take(err.max(0) as u64)
            .read_to_end(&mut stderr)
            .await?;
        if out < 0 {
            return Ok(Err(TooLarge));
        }
        if stdout.len() as i64 != out || stderr.len() as i64 != err {
            return Err(broken());
        }
        Ok(Ok(Output {
            code: i32::try_from(code).ok(),
            stdout,
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }))
    }
}

/// A connection's workers. Each request takes an idle one, or starts one while fewer than
/// [`MAX_WORKERS`] are busy, so requests wait for each other only when that many run at once,
/// and then for at most one request's timeout: a request that runs past its timeout is
/// ended, worker and all.
struct Workers {
    target: SshTarget,
    control: PathBuf,
    /// One per worker that may be busy.
    slots: Semaphore,
    idle: Mutex<Idle>,
}

#[derive(Default)]
struct Idle {
    /// Workers waiting for a request with when they were put back, the most recent last.
    workers: Vec<(Worker, Instant)>,
    /// Whether a task is closing those unused for [`IDLE_WORKER`].
    trimming: bool,
}

impl Workers {
    /// A worker for one request: an idle one whose channel is still open, else a new one
    /// (`None`: it could not be started within `timeout`).
    async fn take(self: &Arc<Self>, timeout: Duration) -> Option<Busy<'_>> {
        let slot = self.slots.acquire().await.ok()?;
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            idle.workers.retain_mut(|(w, _)| w.alive());
            idle.workers.pop().map(|(w, _)| w)
        };
        let worker = match reused {
            Some(w) => w,
            None => Worker::start(&self.target, &self.control, timeout).await?,
        };
        Some(Busy {
            workers: self,
            worker: Some(worker),
            _slot: slot,
        })
    }

    fn put_back(self: &Arc<Self>, worker: Worker) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.workers.push((worker, Instant::now()));
        if idle.workers.len() > 1 && !idle.trimming {
            idle.trimming = true;
            tokio::spawn(trim(Arc::downgrade(self)));
        }
    }

    /// Ends a worker that may be running a request: its channel is closed, and a mux client
    /// of its own ends its remote process group (SIGTERM, SIGKILL after the grace period),
    /// so whatever the request started goes too.
    fn end(&self, worker: Worker) {
        let grace = (KILL_GRACE.as_millis() / 100).to_string();
        let group = worker.group.to_string();
        let mut kill = mux_command(&self.target, &self.control, KILL, &[&group, &grace]);
        drop(worker);
        let label = self.target.label.clone();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            match process::spawn(&mut kill) {
                Ok((mut child, _spawned)) => {
                    if tokio::time::timeout(CONNECT_TIMEOUT, child.wait())
                        .await
                        .is_err()
                    {
                        tracing::warn!(host = %label, group, "ending a stuck ssh worker's remote group took too long");
                    }
                }
                Err(e) => tracing::warn!(host = %label, group, "cannot end a stuck ssh worker's remote group: {e}"),
            }
        });
    }
}

/// Closes idle workers, but the most recently used one, once they have been unused for
/// [`IDLE_WORKER`] (their channels are the connection's, which commands need too); ends when
/// one is left.
async fn trim(workers: Weak<Workers>) {
    loop {
        tokio::time::sleep(IDLE_WORKER).await;
        let Some(workers) = workers.upgrade() else {
            return;
        };
        let mut idle = workers.idle.lock().unwrap_or_else(|e| e.into_inner());
        let newest = idle.workers.len().saturating_sub(1);
        let mut i = 0;
        idle.workers.retain(|(_, since)| {
            i += 1;
            i - 1 == newest || since.elapsed() < IDLE_WORKER
        });
        if idle.workers.len() <= 1 {
            idle.trimming = false;
            return;
        }
    }
}

/// A worker serving one request. It is put back when the request got its answer; dropped
/// before that (the request timed out or failed, or its caller went away mid-request), it is
/// ended on the remote, with what it was running.
struct Busy<'a> {
    workers: &'a Arc<Workers>,
    worker: Option<Worker>,
    _slot: SemaphorePermit<'a>,
}

impl Busy<'_> {
    async fn exchange(
        &mut self,
        script: &str,
        args: &[&str],
        input: Option<&[u8]>,
        cap: usize,
    ) -> std::io::Result<Result<Output, TooLarge>> {
        match self.worker.as_mut() {
            Some(w) => {
                w.exchange(script, args, input.unwrap_or_default(), cap)
                    .await
            }
            None => Err(std::io::Error::other("the worker was put back")),
        }
    }

    fn put_back(mut self) {
        if let Some(worker) = self.worker.take() {
            self.workers.put_back(worker);
        }
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if let Some(worker) = self.worker.take() {
            self.workers.end(worker);
        }
    }
}

fn no_pipe() -> Error {
    Error::Spawn(std::io::Error::other("ssh started without its pipes"))
}

/// What a remote script produced.
pub(crate) struct Output {
    /// Its exit code (`None`: killed by a signal).
    pub(crate) code: Option<i32>,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: String,
}

fn parse_facts(stdout: &[u8]) -> Option<Facts> {
    let mut lines = stdout.splitn(5, |&b| b == b'\n');
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_owned();
    let platform = text(lines.next()?).to_lowercase();
    let os_version = text(lines.next()?);
    let ripgrep = text(lines.next()?) == "rg";
    let perl = text(lines.next()?) == "perl";
    let env = lines
        .next()
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter_map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            let (k, v) = entry.split_once('=')?;
            (!k.is_empty()).then(|| (k.to_owned(), v.to_owned()))
        })
        .collect();
    Some(Facts {
        platform,
        os_version,
        ripgrep,
        perl,
        env,
    })
}

/// A running master.
struct Master {
    child: Child,
    _spawned: SpawnedChild,
}

/// Owns the master: starts it on request when it is not running, and kills it (removing its
/// socket) when every [`Connection`] holder is gone.
async fn master_task(target: SshTarget, control: PathBuf, mut requests: mpsc::Receiver<Ensure>) {
    let mut master: Option<Master> = None;
    while let Some(reply) = requests.recv().await {
        let alive = match master.as_mut() {
            Some(m) => matches!(m.child.try_wait(), Ok(None)) && control.exists(),
            None => false,
        };
        if !alive {
            if master.take().is_some() {
                tracing::info!(host = %target.label, "the ssh connection dropped; reconnecting");
            }
            match start_master(&target, &control).await {
                Ok(m) => master = Some(m),
                Err(reason) => {
                    let _ = reply.send(Err(reason));
                    continue;
                }
            }
        }
        let _ = reply.send(Ok(()));
    }
    drop(master);
    let _ = std::fs::remove_file(&control);
}

async fn start_master(target: &SshTarget, control: &Path) -> Result<Master, String> {
    // A socket left by a master that was killed would make the new one refuse to listen.
    let _ = std::fs::remove_file(control);
    let mut command = Command::new("ssh");
    command
        .args(target.options(control))
        .args([
            "-M",
            "-N",
            "-T",
            "-o",
            "ControlMaster=yes",
            "-o",
            "ControlPersist=no",
            "--",
        ])
        .arg(&target.destination)
        .env(MARKER_VAR, ssh_marker())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let (mut child, spawned) =
        process::spawn(&mut command).map_err(|e| format!("cannot run ssh: {e}"))?;
    let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = Vec::new();
            if let Some(stderr) = child.stderr.take() {
                let _ = stderr
                    .take(MAX_MASTER_STDERR as u64)
                    .read_to_end(&mut err)
                    .await;
            }
            let reason = String::from_utf8_lossy(&err).trim().to_owned();
            return Err(if reason.is_empty() {
                format!("ssh exited with {status}")
            } else {
                reason
            });
        }
        if control.exists() {
            return Ok(Master {
                child,
                _spawned: spawned,
            });
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "no connection after {} s",
                CONNECT_TIMEOUT.as_secs()
            ));
        }
        tokio::time::sleep(CONNECT_POLL).await;
    }
}

/// The daemon's SSH connections, one per distinct [`SshTarget`], shared by the sessions that
/// use it (a session, its subagents and forks): the master lives while any of them does.
pub(crate) struct SshConnections {
    /// The 0700 directory the control sockets live in.
    dir: PathBuf,
    live: Mutex<HashMap<SshTarget, Weak<Connection>>>,
}

impl SshConnections {
    /// Connections whose control sockets live in `dir` (created 0700 on first use).
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            live: Mutex::new(HashMap::new()),
        }
    }

    /// The connection to `target`, made (not yet connected) if there is none.
    pub(crate) fn get(&self, target: &SshTarget) -> Result<Arc<Connection>, Error> {
        // Only the directory's creation touches the disk, and it happens before the lock.
        create_private_dir(&self.dir)?;
        static CONNECTIONS: AtomicU64 = AtomicU64::new(0);
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|_, c| c.strong_count() > 0);
        if let Some(c) = live.get(target).and_then(Weak::upgrade) {
            return Ok(c);
        }
        let n = CONNECTIONS.fetch_add(1, Ordering::Relaxed);
        // Short: a Unix socket path is at most 107 bytes.
        let control = self.dir.join(format!("{}-{n}", std::process::id()));
        let connection = Connection::new(target.clone(), control);
        live.insert(target.clone(), Arc::downgrade(&connection));
        Ok(connection)
    }
}

fn create_private_dir(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(dir, e))?;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| Error::io(dir, e))?;
    if !meta.is_dir() || meta.permissions().mode() & 0o077 != 0 {
        return Err(Error::NotAllowed(format!(
            "{} must be a directory only its owner can use (mode 0700) to hold ssh control sockets",
            dir.display()
        )));
    }
    Ok(())
}
