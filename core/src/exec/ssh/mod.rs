//! [`SshExecutionEnvironment`]: the session's tools on another machine, over one multiplexed
//! OpenSSH connection (`connection.rs`). Every operation is a small bash script run on the
//! remote: file operations, grep and glob by the connection's long-lived worker (one round
//! trip), commands each on a channel of their own; files travel on stdin and stdout.
//!
//! A command runs under `setsid` on the remote, so it leads a process group of its own whose
//! id is the first line the script prints. A timeout or an abort sends that group SIGTERM,
//! then SIGKILL two seconds later, through a second mux client. A watcher on the remote reads
//! the channel's stdin: when the channel closes (the daemon killed the client, or the
//! connection dropped) it ends the group the same way, so nothing keeps running unseen. What
//! a command leaves in its group is ended when it exits: the channel, and so the command's
//! result, cannot end while they hold its output.

mod commands;
mod connection;
mod dial;
mod search;

pub(crate) use connection::{Connection, SshConnections, SshTarget};
pub(crate) use dial::{Dialed, MuxClient};

use super::child::{self, Child, Control, KILL_GRACE};
use super::process::{self, MARKER_VAR};
use super::{
    DirEntry, EnvFilter, Error, ExecRequest, ExecResult, ExecutionEnvironment, GrepOptions,
    OutputSink,
};
use async_trait::async_trait;
use commands::{Started, Unstarted};
use connection::KILL;
use futures::future::BoxFuture;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Largest file `read_file` brings over: the local environment's cap (a remote file is held
/// whole in memory on the way).
const MAX_READ: usize = super::MAX_READ_BYTES as usize;
/// Largest listing, search report or file list brought over.
const MAX_LISTING: usize = 16 * 1024 * 1024;
/// Longest remote command line: Linux takes at most 128 KiB in one argument, and the remote
/// shell gets the whole line as one.
const MAX_COMMAND_LINE: usize = 120 * 1024;

/// Exit codes of the file scripts, beyond the commands' own.
const NOT_FOUND: i32 = 3;
const IS_DIRECTORY: i32 = 4;
const NO_ACCESS: i32 = 5;
const NOT_DIRECTORY: i32 = 6;
const NOT_REGULAR: i32 = 8;

/// Only a regular file is read or written: a FIFO would block (until the request's timeout),
/// a device could be endless.
const READ: &str = r#"[ -e "$1" ] || exit 3; [ -d "$1" ] && exit 4; [ -f "$1" ] || exit 8
[ -r "$1" ] || exit 5; exec cat -- "$1""#;
const WRITE: &str = r#"d=$(dirname -- "$1"); mkdir -p -- "$d" || exit 7; [ -d "$1" ] && exit 4
[ -e "$1" ] && ! [ -f "$1" ] && exit 8; exec cat > "$1""#;
const REMOVE: &str =
    r#"[ -e "$1" ] || [ -L "$1" ] || exit 3; [ -d "$1" ] && exit 4; exec rm -f -- "$1""#;
const EXISTS: &str = r#"[ -e "$1" ]"#;
/// Where a path leads (GNU `realpath -m`: symlinks resolved, missing parts kept), ended by
/// a NUL; for approval rules. A remote without it cannot resolve, and the rules treat the
/// path so.
const REAL_PATH: &str = r#"exec realpath -m -z -- "$1""#;
/// A report (`$2`, bash) in the directory `$1`, ended after `$3` seconds by coreutils'
/// `timeout` (which signals its whole process group) where the remote has it, so that a
/// hanging report does not hold the worker.
const REPORT: &str = r#"cd -- "$1" || exit 125
command -v timeout >/dev/null && exec timeout -k 1 "$3" bash -c "$2"
eval "$2""#;
/// `timeout`'s exit code when it ended the report.
const REPORT_TIMED_OUT: i32 = 124;
const IS_DIR: &str = r#"[ -d "$1" ] || exit 6"#;
/// `find -L` follows links as the local listing does (it stats through them).
const LIST: &str = r#"[ -e "$1" ] || exit 3; [ -d "$1" ] || exit 6; [ -r "$1" ] || exit 5
exec find -L "$1" -mindepth 1 -maxdepth "$2" -printf '%y %s %P\0' 2>/dev/null"#;

/// Runs a command: `$1` the directory, `$2` the command, `$3` the grace period in tenths of
/// a second, the rest `NAME=VALUE` for `env -i`. Prints the command's process group id first.
const EXEC: &str = r#"cd -- "$1" || exit 125
c=$2; t=$3; shift 3
exec 3<&0
stop() { kill -TERM -- "-$1" 2>/dev/null || return 0; i=0
  while [ "$i" -lt "$t" ] && kill -0 -- "-$1" 2>/dev/null; do sleep 0.1; i=$((i+1)); done
  kill -KILL -- "-$1" 2>/dev/null; return 0; }
setsid /bin/bash -c 'printf "%s\n" "$$"; exec env -i "$@"' agentd "$@" /bin/bash -c "$c" </dev/null 3<&- &
g=$!
( while read -r _ <&3; do :; done; stop "$g" ) >/dev/null 2>&1 &
w=$!
wait "$g"; s=$?
kill "$w" 2>/dev/null
stop "$g"
exit "$s""#;

/// Runs tools on a remote machine over SSH (spec 4.1, appendix C).
pub(crate) struct SshExecutionEnvironment {
    link: Arc<Connection>,
    cwd: PathBuf,
    env: EnvFilter,
    /// How long one file operation, grep or glob may take on the remote.
    timeout: Duration,
    /// `<run>.<environment>.`: the [`MARKER_VAR`] prefix of every command it starts.
    marker: String,
    commands: AtomicU64,
    /// Whether `cwd` was found to be a directory on the remote.
    cwd_checked: AtomicBool,
    /// Remote process groups of commands still running, ended by [`terminate_all`].
    ///
    /// [`terminate_all`]: ExecutionEnvironment::terminate_all
    running: Mutex<HashSet<i32>>,
}

impl SshExecutionEnvironment {
    /// An environment in `cwd` (a remote path) on `target`, over the connection `connections`
    /// holds for it; commands inherit the remote's variables per `env`; a file operation, grep
    /// or glob that takes longer than `timeout` fails and is ended on the remote. Nothing is
    /// connected until the first operation (or [`connect`](Self::connect)).
    pub(crate) fn new(
        connections: &SshConnections,
        target: &SshTarget,
        cwd: PathBuf,
        env: EnvFilter,
        timeout: Duration,
    ) -> Result<Self, Error> {
        static ENVIRONMENTS: AtomicU64 = AtomicU64::new(0);
        let n = ENVIRONMENTS.fetch_add(1, Ordering::Relaxed);
        Ok(Self {
            link: connections.get(target)?,
            cwd,
            env,
            timeout,
            marker: format!("{}.ssh{n}.", process::run_id()),
            commands: AtomicU64::new(0),
            cwd_checked: AtomicBool::new(false),
            running: Mutex::new(HashSet::new()),
        })
    }

    /// Connects (or reconnects) and checks that the working directory exists on the remote.
    pub(crate) async fn connect(&self) -> Result<(), Error> {
        self.link.connect().await?;
        if self.cwd_checked.load(Ordering::Relaxed) {
            return Ok(());
        }
        let cwd = self.cwd.display().to_string();
        let out = self
            .link
            .run(
                "checking the working directory",
                self.timeout,
                IS_DIR,
                &[&cwd],
                None,
                0,
            )
            .await?;
        if out.code != Some(0) {
            return Err(Error::Unavailable(format!(
                "ssh host {}: {cwd} is not a directory on the remote machine",
                self.link.target().label
            )));
        }
        self.cwd_checked.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Runs a file script (the operation `op`) on `path` after connecting; maps the scripts'
    /// exit codes. A path that no file can have (a NUL byte) is refused before anything is
    /// sent.
    async fn file(
        &self,
        op: &str,
        script: &str,
        path: &Path,
        extra: &[&str],
        input: Option<&[u8]>,
        cap: usize,
    ) -> Result<Vec<u8>, Error> {
        let shown = checked_path(path)?;
        self.connect().await?;
        let mut args = vec![shown];
        args.extend_from_slice(extra);
        let what = format!("{op} of {shown}");
        let out = self
            .link
            .run(&what, self.timeout, script, &args, input, cap)
            .await?;
        let other = |message: &str| Error::Io {
            path: path.to_owned(),
            source: std::io::Error::other(message.to_owned()),
        };
        match out.code {
            Some(0) => Ok(out.stdout),
            Some(NOT_FOUND) => Err(Error::NotFound(path.to_owned())),
            Some(NO_ACCESS) => Err(Error::PermissionDenied(path.to_owned())),
            Some(IS_DIRECTORY) => Err(other("is a directory")),
            Some(NOT_DIRECTORY) => Err(other("not a directory")),
            Some(NOT_REGULAR) => Err(other(
                "not a regular file (a FIFO, socket or device); only regular files are read and written",
            )),
            _ if out.stderr.contains("Permission denied") => {
                Err(Error::PermissionDenied(path.to_owned()))
            }
            _ => Err(other(out.stderr.trim())),
        }
    }

    /// The variables a command gets: the remote's own, filtered, and the marker. Not
    /// `SSH_CLIENT` or `SSH2_CLIENT`: Debian's bash sources `~/.bashrc` when started with
    /// either and no `SHLVL` (as sshd's shell leaves it), so every command would run the
    /// remote's startup files again (pyenv's take hundreds of milliseconds). They were run once,
    /// when these variables were captured; `SSH_CONNECTION` still says where the link comes from.
    fn command_env(&self, marker: &str) -> Vec<String> {
        let remote = self
            .link
            .facts()
            .map(|f| f.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .into_iter()
            .flatten();
        let mut vars: Vec<String> = self
            .env
            .filter(remote)
            .into_iter()
            .filter(|(k, _)| ![MARKER_VAR, "SSH_CLIENT", "SSH2_CLIENT"].contains(k))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        vars.push(format!("{MARKER_VAR}={marker}"));
        vars
    }

    /// Runs a started command on the command worker to its end.
    async fn run_on_worker(
        &self,
        command: Started,
        request: &ExecRequest<'_>,
        output: OutputSink<'_>,
        cancel: &CancellationToken,
        started: Instant,
    ) -> Result<ExecResult, Error> {
        let Started {
            group,
            process,
            stdout,
            stderr,
            mut control,
        } = command;
        self.track(group, true);
        let mut child = Child::new(process, Some(stdout), Some(stderr));
        let finished = child::run(&mut child, &mut control, request.timeout, cancel, output).await;
        self.track(group, false);
        let mut finished = finished?;
        let (process, _, _) = child.into_parts();
        // Ended on the remote by the worker when its channel closed.
        let dropped = process.lost && finished.stopped.is_none();
        control.settle(finished.status.is_some() && !process.lost);
        let mut stderr = std::mem::take(&mut finished.stderr);
        if dropped {
            self.note_dropped(&mut stderr);
        }
        Ok(finished.result(stderr, dropped, started))
    }

    /// Runs a command on a channel of its own (a remote without Perl, or no worker), under
    /// the [`EXEC`] script: `args` are its arguments.
    async fn run_on_channel(
        &self,
        args: &[&str],
        cwd: &str,
        request: &ExecRequest<'_>,
        output: OutputSink<'_>,
        cancel: &CancellationToken,
        started: Instant,
    ) -> Result<ExecResult, Error> {
        let (mut child, _spawned) =
            process::spawn(&mut self.link.command(EXEC, args)).map_err(Error::Spawn)?;
        // Held open for the whole command: the remote watcher ends the command when it closes.
        let _stdin = child.stdin.take();
        let mut child = Child::piped(child);
        let mut remote = Remote {
            env: self,
            head: Vec::new(),
            group: None,
        };
        let mut finished =
            child::run(&mut child, &mut remote, request.timeout, cancel, output).await?;
        let code = finished.status.and_then(|s| s.code());
        drop(child);
        let stopped = finished.stopped.is_some();
        let mut stderr = std::mem::take(&mut finished.stderr);
        let Some(group) = remote.group else {
            if stopped {
                // Stopped before the command started: there is nothing remote to report.
                return Ok(ExecResult {
                    stdout: String::new(),
                    stderr,
                    exit_code: None,
                    timed_out: finished.timed_out,
                    cancelled: finished.cancelled,
                    duration: started.elapsed(),
                    escaped: Vec::new(),
                });
            }
            return Err(match code {
                Some(125) => Error::Spawn(std::io::Error::other(format!(
                    "cannot enter {cwd} on ssh host {}: {}",
                    self.link.target().label,
                    stderr.trim()
                ))),
                _ => self.link.unreachable(&stderr),
            });
        };
        self.track(group, false);
        // 255 is ssh's own failure: the connection went away under the command, and the
        // remote watcher ended it.
        let dropped = code == Some(255) && !stopped;
        if dropped {
            self.note_dropped(&mut stderr);
        }
        Ok(finished.result(stderr, dropped, started))
    }

    /// Says at the end of a command's stderr that the connection dropped under it.
    fn note_dropped(&self, stderr: &mut String) {
        if !stderr.is_empty() && !stderr.ends_with('\n') {
            stderr.push('\n');
        }
        stderr.push_str(&format!(
            "[the ssh connection to {} dropped during the command; the remote command was ended]\n",
            self.link.target().label
        ));
    }

    fn track(&self, group: i32, alive: bool) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if alive {
            running.insert(group);
        } else {
            running.remove(&group);
        }
    }
}

#[async_trait]
impl ExecutionEnvironment for SshExecutionEnvironment {
    fn working_directory(&self) -> &Path {
        &self.cwd
    }

    fn platform(&self) -> &str {
        self.link.facts().map_or("unknown", |f| f.platform.as_str())
    }

    fn os_version(&self) -> String {
        let target = self.link.target();
        match self.link.facts() {
            Some(f) => format!("{} (over ssh on {})", f.os_version, target.label),
            None => format!("unknown (over ssh on {}, not connected)", target.label),
        }
    }

    async fn read_file(&self, path: &Path) -> Result<Vec<u8>, Error> {
        let path = self.resolve(path);
        self.file("read_file", READ, &path, &[], None, MAX_READ)
            .await
    }

    async fn write_file(&self, path: &Path, content: &[u8]) -> Result<(), Error> {
        let path = self.resolve(path);
        self.file("write_file", WRITE, &path, &[], Some(content), 0)
            .await
            .map(drop)
    }

    async fn remove_file(&self, path: &Path) -> Result<(), Error> {
        let path = self.resolve(path);
        self.file("remove_file", REMOVE, &path, &[], None, 0)
            .await
            .map(drop)
    }

    async fn file_exists(&self, path: &Path) -> bool {
        let path = self.resolve(path);
        self.file("file_exists", EXISTS, &path, &[], None, 0)
            .await
            .is_ok()
    }

    async fn real_path(&self, path: &Path) -> Result<PathBuf, Error> {
        let path = self.resolve(path);
        let out = self
            .file("real_path", REAL_PATH, &path, &[], None, 64 * 1024)
            .await?;
        match String::from_utf8(out)
            .ok()
            .as_deref()
            .and_then(|o| o.strip_suffix('\0'))
        {
            Some(real) if real.starts_with('/') && !real.contains('\0') => Ok(PathBuf::from(real)),
            _ => Err(Error::NotAllowed(format!(
                "cannot resolve {} on the remote machine",
                path.display()
            ))),
        }
    }

    async fn list_directory(&self, path: &Path, depth: usize) -> Result<Vec<DirEntry>, Error> {
        let root = self.resolve(path);
        let depth = depth.max(1).to_string();
        let out = self
            .file("list_directory", LIST, &root, &[&depth], None, MAX_LISTING)
            .await?;
        let mut entries: Vec<DirEntry> = out
            .split(|&b| b == 0)
            .filter_map(|record| {
                let record = String::from_utf8_lossy(record);
                let mut parts = record.splitn(3, ' ');
                let kind = parts.next()?;
                let size = parts.next()?.parse::<u64>().ok();
                let name = parts.next().filter(|n| !n.is_empty())?.to_owned();
                let is_dir = kind == "d";
                Some(DirEntry {
                    name,
                    is_dir,
                    size: size.filter(|_| kind == "f"),
                })
            })
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    async fn exec_command(
        &self,
        request: ExecRequest<'_>,
        output: OutputSink<'_>,
        cancel: &CancellationToken,
    ) -> Result<ExecResult, Error> {
        let started = Instant::now();
        if request.command.contains('\0') {
            return Err(Error::NotAllowed(
                "the command holds a NUL byte, which no command line can carry".to_owned(),
            ));
        }
        self.connect().await?;
        let cwd = request
            .working_dir
            .map(|d| self.resolve(d))
            .unwrap_or_else(|| self.cwd.clone());
        let marker = format!(
            "{}{}",
            self.marker,
            self.commands.fetch_add(1, Ordering::Relaxed)
        );
        let cwd = checked_path(&cwd)?.to_owned();
        let grace = (KILL_GRACE.as_millis() / 100).to_string();
        let env = self.command_env(&marker);
        let mut args: Vec<&str> = vec![&cwd, request.command, &grace];
        args.extend(env.iter().map(String::as_str));
        let length: usize = args.iter().map(|a| a.len() + 3).sum::<usize>() + EXEC.len();
        if length > MAX_COMMAND_LINE {
            return Err(Error::NotAllowed(format!(
                "the command and its environment are {length} bytes; a remote command line takes at most {MAX_COMMAND_LINE}"
            )));
        }
        if self.link.facts().is_some_and(|f| f.perl) {
            let worker = self.link.commands();
            match worker
                .start(&cwd, request.command, &env, self.timeout)
                .await
            {
                Ok(command) => {
                    return self
                        .run_on_worker(command, &request, output, cancel, started)
                        .await;
                }
                Err(Unstarted::Refused(why)) => {
                    return Err(Error::Spawn(std::io::Error::other(format!(
                        "cannot start the command on ssh host {}: {why}",
                        self.link.target().label
                    ))));
                }
                Err(Unstarted::NoWorker(why)) => {
                    tracing::debug!(host = %self.link.target().label, "the command runs on a channel of its own: {why}");
                }
            }
        }
        self.run_on_channel(&args, &cwd, &request, output, cancel, started)
            .await
    }

    /// On the worker: one round trip, where a command's channel would start a login shell
    /// whose startup files can take longer than the report itself. The remote ends a report
    /// that runs past `timeout`; this side gives it a little longer, for a remote without
    /// `timeout` (the worker is then ended, and the report with it).
    async fn report(&self, script: &str, timeout: Duration) -> Option<String> {
        self.connect().await.ok()?;
        let cwd = self.cwd.display().to_string();
        let seconds = timeout.as_secs().max(1).to_string();
        let args = [cwd.as_str(), script, seconds.as_str()];
        let out = self
            .link
            .run(
                "a session report (the git snapshot)",
                timeout + KILL_GRACE,
                REPORT,
                &args,
                None,
                MAX_LISTING,
            )
            .await
            .ok()?;
        (out.code != Some(REPORT_TIMED_OUT))
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    async fn terminate_all(&self) {
        let groups: Vec<i32> = {
            let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
            running.drain().collect()
        };
        for group in groups {
            end_group(&self.link, self.timeout, group).await;
        }
    }

    async fn grep(&self, mut options: GrepOptions) -> Result<String, Error> {
        self.connect().await?;
        options.path = self.resolve(&options.path);
        search::grep(&self.link, self.timeout, &self.cwd, &options).await
    }

    async fn glob(&self, pattern: &str, base: &Path) -> Result<Vec<String>, Error> {
        self.connect().await?;
        search::glob(
            &self.link,
            self.timeout,
            &self.cwd,
            &self.resolve(base),
            pattern,
        )
        .await
    }
}

/// A remote command as the shared loop drives it: its script prints the command's process
/// group id on the first line of stdout, before the command's own output.
struct Remote<'a> {
    env: &'a SshExecutionEnvironment,
    /// The first line, until it is complete.
    head: Vec<u8>,
    group: Option<i32>,
}

impl Control for Remote<'_> {
    type Stopped = ();

    fn stdout<'b>(&mut self, bytes: &'b [u8]) -> &'b [u8] {
        if self.group.is_some() {
            return bytes;
        }
        let Some(end) = bytes.iter().position(|&b| b == b'\n') else {
            self.head.extend_from_slice(bytes);
            return &[];
        };
        self.head.extend_from_slice(&bytes[..end]);
        self.group = std::str::from_utf8(&self.head)
            .ok()
            .and_then(|s| s.trim().parse().ok());
        if let Some(group) = self.group {
            self.env.track(group, true);
        }
        &bytes[end + 1..]
    }

    /// Ends the command's remote group; a command whose group is not known yet is ended by
    /// closing its channel (the remote watcher does the rest).
    fn stop(&mut self) -> BoxFuture<'static, ()> {
        let (link, timeout) = (self.env.link.clone(), self.env.timeout);
        let group = self.group;
        Box::pin(async move {
            if let Some(group) = group {
                end_group(&link, timeout, group).await;
            }
        })
    }
}

/// SIGTERM to a remote group, SIGKILL after the grace period, in one round trip taking at
/// most `timeout`.
async fn end_group(link: &Connection, timeout: Duration, group: i32) {
    let grace = (KILL_GRACE.as_millis() / 100).to_string();
    let ended = link
        .run(
            "ending a command's process group",
            timeout,
            KILL,
            &[&group.to_string(), &grace],
            None,
            0,
        )
        .await;
    if let Err(e) = ended {
        tracing::warn!(group, "cannot end a remote process group: {e}");
    }
}

/// `path` as the remote gets it: UTF-8 without NUL bytes (no file can have one in its name;
/// a program would stop reading at it), else refused before anything is sent.
fn checked_path(path: &Path) -> Result<&str, Error> {
    match path.to_str() {
        Some(shown) if !shown.contains('\0') => Ok(shown),
        Some(_) => Err(Error::NotAllowed(format!(
            "{}: a path cannot hold a NUL byte",
            path.display().to_string().escape_debug()
        ))),
        None => Err(Error::NotAllowed(format!(
            "{}: a remote path must be UTF-8",
            path.display()
        ))),
    }
}
