//! One multiplexed OpenSSH connection to a host: a `ssh -M -N` master owned by a task of its
//! own, the control socket in a 0700 directory of the daemon's runtime directory, and the
//! mux clients every remote operation runs as. The master is started on first use and again
//! whenever it has died, so a dropped connection is reconnected by the next operation, or that
//! operation fails with ssh's own words.

use super::super::Error;
use super::super::process::{self, MARKER_VAR, SpawnedChild};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};

/// How long a master may take to connect and authenticate before the attempt is given up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// How often a starting master is looked at (its control socket, its exit).
const CONNECT_POLL: Duration = Duration::from_millis(5);
/// Largest stderr kept from a master that failed (ssh's reason).
const MAX_MASTER_STDERR: usize = 8 * 1024;

/// Where and as whom to connect: everything that makes two connections different. Host keys
/// are always checked (`StrictHostKeyChecking=yes`) and no prompt is ever shown
/// (`BatchMode=yes`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SshTarget {
    /// What the client called the host (a `[hosts.NAME]` name or the host itself), for
    /// messages.
    pub label: String,
    /// The host name, address or ssh configuration alias given to `ssh`.
    pub destination: String,
    /// `-l`.
    pub user: Option<String>,
    /// `-p`.
    pub port: Option<u16>,
    /// `-i`.
    pub identity_file: Option<PathBuf>,
    /// `-F`: the ssh configuration file instead of `~/.ssh/config`.
    pub ssh_config: Option<PathBuf>,
    /// `UserKnownHostsFile` instead of `~/.ssh/known_hosts`.
    pub known_hosts: Option<PathBuf>,
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
env -0"#;

/// The [`MARKER_VAR`] of the daemon's own ssh processes (masters and mux clients): a daemon
/// that was killed cannot end them, and the next one ends every process its run marked.
fn ssh_marker() -> String {
    format!("{}.ssh", process::run_id())
}

/// The file operations' server: one long-lived bash on the remote that runs each request's
/// script in a subshell, so an operation costs a round trip and a fork instead of a new
/// channel and a login shell (whose startup files may do slow work). `SSH_CLIENT` is unset
/// so no bash it starts takes itself for an ssh login and reads `~/.bashrc`.
///
/// A request is `ARGS CAP INPUT RAW\n`, then each argument as `LENGTH\nBYTES` (the script
/// first), then INPUT bytes of stdin; the answer is `CODE OUT ERR\n` then OUT bytes of stdout
/// (`-1`: more than CAP, not sent) and ERR bytes of stderr (at most 64 KiB, trailing newlines
/// dropped). Everything but the script runs in bash's builtins, since each fork and exec
/// costs about a millisecond: small inputs and outputs pass through `read -N` (RAW 0: no NUL
/// byte, which a bash string cannot hold), stdout's size is its descriptor's offset in
/// `/proc`, and stderr is read with `$(<file)`, which does not fork.
const WORKER: &str = r#"export LC_ALL=C; unset SSH_CLIENT SSH2_CLIENT
t=$(mktemp -d) || exit 1; trap 'rm -rf "$t"' EXIT
while read -r n cap len raw; do
  a=(); i=0
  while [ "$i" -lt "$n" ]; do read -r l || exit 0; v=; [ "$l" -gt 0 ] && { IFS= read -r -N "$l" v || exit 0; }; a+=("$v"); i=$((i+1)); done
  if [ "$raw" = 1 ]; then head -c "$len" >"$t/in"
  else v=; [ "$len" -gt 0 ] && { IFS= read -r -N "$len" v || exit 0; }; printf %s "$v" >"$t/in"; fi
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

/// A request to the master's task: make sure the master runs, then answer.
type Ensure = oneshot::Sender<Result<(), String>>;

/// A multiplexed connection. Cheap to share; the master lives as long as the last holder.
pub(crate) struct Connection {
    target: SshTarget,
    control: PathBuf,
    ensure: mpsc::Sender<Ensure>,
    worker: mpsc::Sender<Request>,
    facts: OnceLock<Facts>,
}

impl Connection {
    fn new(target: SshTarget, control: PathBuf) -> Arc<Self> {
        let (ensure, requests) = mpsc::channel(64);
        tokio::spawn(master_task(target.clone(), control.clone(), requests));
        let (worker, requests) = mpsc::channel(64);
        tokio::spawn(worker_task(target.clone(), control.clone(), requests));
        Arc::new(Self {
            target,
            control,
            ensure,
            worker,
            facts: OnceLock::new(),
        })
    }

    /// The target, for messages.
    pub(super) fn target(&self) -> &SshTarget {
        &self.target
    }

    /// The remote machine's facts once a connection has been made.
    pub(super) fn facts(&self) -> Option<&Facts> {
        self.facts.get()
    }

    /// Starts the master if it is not running (the first use, or after it died) and learns
    /// the remote's facts the first time.
    pub(super) async fn connect(&self) -> Result<&Facts, Error> {
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
        })?;
        if let Some(facts) = self.facts.get() {
            return Ok(facts);
        }
        // Over a channel of its own: the environment it reads is the login's, not the worker's.
        let out = self.run_alone(PROBE, &[], None, 1024 * 1024).await?;
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
        Ok(self.facts.get_or_init(|| facts))
    }

    /// An `ssh` mux client running `script` (bash) with `args` as `$1...` on the remote.
    /// stdin, stdout and stderr are pipes; the client is killed when dropped.
    pub(super) fn command(&self, script: &str, args: &[&str]) -> Command {
        mux_command(&self.target, &self.control, script, args)
    }

    /// Runs `script` to its end with `input` on stdin; keeps at most `cap` bytes of stdout
    /// (more is an error) and 64 KiB of stderr. It goes to the remote worker (one round
    /// trip); when the worker cannot be reached it runs over a channel of its own.
    pub(super) async fn run(
        &self,
        script: &str,
        args: &[&str],
        input: Option<&[u8]>,
        cap: usize,
    ) -> Result<Output, Error> {
        let (reply, answer) = oneshot::channel();
        let request = Request {
            parts: std::iter::once(script)
                .chain(args.iter().copied())
                .map(str::to_owned)
                .collect(),
            input: input.map(<[u8]>::to_vec).unwrap_or_default(),
            cap,
            reply,
        };
        if self.worker.send(request).await.is_ok()
            && let Ok(Some(result)) = answer.await
        {
            return result.map_err(|e| match e {
                WorkerError::TooLarge => too_large(cap),
                WorkerError::Timeout => Error::Unavailable(format!(
                    "ssh host {}: a file operation took more than {} s",
                    self.target.label,
                    WORKER_TIMEOUT.as_secs()
                )),
            });
        }
        self.run_alone(script, args, input, cap).await
    }
}

/// `ssh` running `script` with `args` over the connection's master.
fn mux_command(target: &SshTarget, control: &Path, script: &str, args: &[&str]) -> Command {
    let mut remote = format!("exec /bin/bash -c {} agentd", quote(script));
    for arg in args {
        remote.push(' ');
        remote.push_str(&quote(arg));
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
    async fn run_alone(
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

/// How long one file operation may take on the worker before the worker is given up.
const WORKER_TIMEOUT: Duration = Duration::from_secs(120);

/// A file operation for the worker.
struct Request {
    /// The script, then its arguments.
    parts: Vec<String>,
    input: Vec<u8>,
    cap: usize,
    /// `None`: the worker could not be reached; run it some other way.
    reply: oneshot::Sender<Option<Result<Output, WorkerError>>>,
}

enum WorkerError {
    TooLarge,
    Timeout,
}

/// The running worker: its channel's pipes.
struct Worker {
    _child: Child,
    _spawned: SpawnedChild,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::BufReader<tokio::process::ChildStdout>,
}

impl Worker {
    fn start(target: &SshTarget, control: &Path) -> Option<Self> {
        let mut command = mux_command(target, control, WORKER, &[]);
        command.stderr(Stdio::null());
        let (mut child, spawned) = process::spawn(&mut command).ok()?;
        Some(Self {
            stdin: child.stdin.take()?,
            stdout: tokio::io::BufReader::new(child.stdout.take()?),
            _child: child,
            _spawned: spawned,
        })
    }

    async fn exchange(
        &mut self,
        request: &Request,
    ) -> std::io::Result<Result<Output, WorkerError>> {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        let raw = request.input.len() > WORKER_READ_INPUT || request.input.contains(&0);
        let mut message = format!(
            "{} {} {} {}\n",
            request.parts.len(),
            request.cap,
            request.input.len(),
            u8::from(raw)
        )
        .into_bytes();
        for part in &request.parts {
            message.extend_from_slice(format!("{}\n", part.len()).as_bytes());
            message.extend_from_slice(part.as_bytes());
        }
        message.extend_from_slice(&request.input);
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
            return Ok(Err(WorkerError::TooLarge));
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

/// Owns the worker: starts it on the first request and again after it failed (the
/// connection dropped), and answers requests one at a time.
async fn worker_task(target: SshTarget, control: PathBuf, mut requests: mpsc::Receiver<Request>) {
    let mut worker: Option<Worker> = None;
    while let Some(request) = requests.recv().await {
        if worker.is_none() {
            worker = Worker::start(&target, &control);
        }
        let Some(w) = worker.as_mut() else {
            let _ = request.reply.send(None);
            continue;
        };
        let answer = match tokio::time::timeout(WORKER_TIMEOUT, w.exchange(&request)).await {
            Ok(Ok(result)) => Some(result),
            Ok(Err(e)) => {
                tracing::debug!(host = %target.label, "the ssh worker failed: {e}");
                worker = None;
                None
            }
            Err(_) => {
                worker = None;
                Some(Err(WorkerError::Timeout))
            }
        };
        let _ = request.reply.send(answer);
    }
}

fn no_pipe() -> Error {
    Error::Spawn(std::io::Error::other("ssh started without its pipes"))
}

/// What a remote script produced.
pub(super) struct Output {
    /// Its exit code (`None`: killed by a signal).
    pub(super) code: Option<i32>,
    pub(super) stdout: Vec<u8>,
    pub(super) stderr: String,
}

fn parse_facts(stdout: &[u8]) -> Option<Facts> {
    let mut lines = stdout.splitn(4, |&b| b == b'\n');
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_owned();
    let platform = text(lines.next()?).to_lowercase();
    let os_version = text(lines.next()?);
    let ripgrep = text(lines.next()?) == "rg";
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
        env,
    })
}

/// Quotes `s` for a POSIX shell.
pub(super) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
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
pub struct SshConnections {
    /// The 0700 directory the control sockets live in.
    dir: PathBuf,
    live: Mutex<HashMap<SshTarget, Weak<Connection>>>,
}

impl SshConnections {
    /// Connections whose control sockets live in `dir` (created 0700 on first use).
    pub fn new(dir: PathBuf) -> Self {
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
