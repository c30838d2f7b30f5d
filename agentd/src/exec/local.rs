//! [`LocalExecutionEnvironment`]: files on this machine, commands in new process groups.

use super::utf8::Utf8Decoder;
use super::{
    DirEntry, EnvPolicy, Error, ExecRequest, ExecResult, ExecutionEnvironment, GrepOptions,
    OutputSink, search,
};
use agentd_proto::OutputStream;
use async_trait::async_trait;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

/// Grace period between SIGTERM and SIGKILL (spec 4.2).
const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long to keep reading after the command exits while background children still hold its
/// pipes open. They keep running; the session terminates them on abort or close.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);
/// Output kept per stream; more is counted but dropped, so a runaway command cannot exhaust
/// the daemon's memory.
const MAX_RETAINED: usize = 16 * 1024 * 1024;

/// Runs tools on the local machine (spec 4.2).
pub struct LocalExecutionEnvironment {
    cwd: PathBuf,
    policy: EnvPolicy,
    /// Process groups started by this environment that may still be alive.
    groups: Mutex<HashSet<i32>>,
}

impl LocalExecutionEnvironment {
    /// An environment rooted at `cwd` whose commands inherit variables per `policy`.
    pub fn new(cwd: PathBuf, policy: EnvPolicy) -> Self {
        Self {
            cwd,
            policy,
            groups: Mutex::new(HashSet::new()),
        }
    }

    fn track(&self, pgid: i32, alive: bool) {
        let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        if alive {
            groups.insert(pgid);
        } else {
            groups.remove(&pgid);
        }
    }
}

fn group_alive(pgid: i32) -> bool {
    killpg(Pid::from_raw(pgid), None).is_ok()
}

fn signal_group(pgid: i32, signal: Signal) {
    // ESRCH (already gone) is the expected race here.
    let _ = killpg(Pid::from_raw(pgid), signal);
}

/// SIGTERM, up to two seconds for the group to go, then SIGKILL.
async fn terminate_group(pgid: i32) {
    if !group_alive(pgid) {
        return;
    }
    signal_group(pgid, Signal::SIGTERM);
    let deadline = Instant::now() + KILL_GRACE;
    while Instant::now() < deadline {
        if !group_alive(pgid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    signal_group(pgid, Signal::SIGKILL);
}

/// Collected output of one stream, capped at [`MAX_RETAINED`].
#[derive(Default)]
struct Captured {
    text: String,
    dropped: usize,
    decoder: Utf8Decoder,
}

impl Captured {
    fn push(&mut self, text: &str) {
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

    fn finish(mut self) -> String {
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

    async fn read_file(&self, path: &Path) -> Result<Vec<u8>, Error> {
        let path = self.resolve(path);
        tokio::fs::read(&path)
            .await
            .map_err(|e| Error::io(&path, e))
    }

    async fn write_file(&self, path: &Path, content: &[u8]) -> Result<(), Error> {
        let path = self.resolve(path);
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| Error::io(parent, e))?;
        }
        tokio::fs::write(&path, content)
            .await
            .map_err(|e| Error::io(&path, e))
    }

    async fn remove_file(&self, path: &Path) -> Result<(), Error> {
        let path = self.resolve(path);
        tokio::fs::remove_file(&path)
            .await
            .map_err(|e| Error::io(&path, e))
    }

    async fn file_exists(&self, path: &Path) -> bool {
        tokio::fs::try_exists(self.resolve(path))
            .await
            .unwrap_or(false)
    }

    async fn list_directory(&self, path: &Path, depth: usize) -> Result<Vec<DirEntry>, Error> {
        let root = self.resolve(path);
        blocking(move || list_blocking(&root, depth.max(1))).await
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
        let mut child = Command::new("/bin/bash")
            .arg("-c")
            .arg(request.command)
            .current_dir(&cwd)
            .env_clear()
            .envs(self.policy.filter(std::env::vars_os()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(Error::Spawn)?;
        let pgid = child.id().map(|p| p as i32).ok_or_else(|| {
            Error::Spawn(std::io::Error::other(
                "child exited before its pid was read",
            ))
        })?;
        self.track(pgid, true);

        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let (mut out, mut err) = (Captured::default(), Captured::default());
        let (mut out_buf, mut err_buf) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
        let mut status = None;
        let (mut timed_out, mut cancelled) = (false, false);
        let timeout = tokio::time::sleep(request.timeout);
        tokio::pin!(timeout);
        // Armed once a kill is under way: SIGKILL when it fires.
        let mut kill_at: Option<tokio::time::Instant> = None;
        // Armed once the command exits: stop waiting for background children's output.
        let mut drain_until: Option<tokio::time::Instant> = None;

        loop {
            if status.is_some() && stdout.is_none() && stderr.is_none() {
                break;
            }
            let killing = kill_at.is_some();
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
                    if !killing {
                        drain_until = Some(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
                    }
                }
                _ = &mut timeout, if !killing && status.is_none() => {
                    timed_out = true;
                    signal_group(pgid, Signal::SIGTERM);
                    kill_at = Some(tokio::time::Instant::now() + KILL_GRACE);
                }
                _ = cancel.cancelled(), if !killing => {
                    cancelled = true;
                    signal_group(pgid, Signal::SIGTERM);
                    kill_at = Some(tokio::time::Instant::now() + KILL_GRACE);
                    drain_until = None;
                }
                _ = sleep_until(kill_at), if kill_at.is_some() => {
                    signal_group(pgid, Signal::SIGKILL);
                    // Pipes close as the group dies; nothing more to wait for after a kill.
                    kill_at = None;
                    drain_until = Some(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
                }
                _ = sleep_until(drain_until), if drain_until.is_some() && status.is_some() && !killing => break,
            }
        }
        if timed_out || cancelled {
            // The main process is gone; make sure nothing it forked survives.
            terminate_group(pgid).await;
        }
        let status = match status {
            Some(s) => Some(s.map_err(Error::Spawn)?),
            None => child.try_wait().ok().flatten(),
        };
        self.track(pgid, group_alive(pgid));
        Ok(ExecResult {
            stdout: out.finish(),
            stderr: err.finish(),
            exit_code: status.and_then(|s| s.code()),
            timed_out,
            cancelled,
            duration: started.elapsed(),
        })
    }

    async fn grep(&self, mut options: GrepOptions) -> Result<String, Error> {
        options.path = self.resolve(&options.path);
        let root = self.cwd.clone();
        blocking(move || search::grep(&root, &options)).await
    }

    async fn glob(&self, pattern: &str, base: &Path) -> Result<Vec<String>, Error> {
        let (root, base, pattern) = (self.cwd.clone(), self.resolve(base), pattern.to_owned());
        blocking(move || search::glob(&root, &base, &pattern)).await
    }

    async fn terminate_all(&self) {
        let groups: Vec<i32> = {
            let mut g = self.groups.lock().unwrap_or_else(|e| e.into_inner());
            g.drain().collect()
        };
        futures::future::join_all(groups.into_iter().map(terminate_group)).await;
    }
}

/// Runs filesystem work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Io {
            path: PathBuf::new(),
            source: std::io::Error::other(e),
        })?
}

async fn read_some<R: tokio::io::AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buf: &mut [u8],
) -> Option<usize> {
    let pipe = pipe.as_mut()?;
    match pipe.read(buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn list_blocking(root: &Path, depth: usize) -> Result<Vec<DirEntry>, Error> {
    let mut entries = Vec::new();
    let mut stack = vec![(root.to_owned(), 1usize)];
    while let Some((dir, level)) = stack.pop() {
        let read = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
        for entry in read.flatten() {
            let path = entry.path();
            let meta = entry.metadata().ok();
            let is_dir = meta.as_ref().is_some_and(|m| m.is_dir());
            let name = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            entries.push(DirEntry {
                name,
                is_dir,
                size: meta.filter(|m| m.is_file()).map(|m| m.len()),
            });
            if is_dir && level < depth {
                stack.push((path, level + 1));
            }
        }
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}
