//! Test support for agentd: the real daemon on a temp socket ([`TestDaemon`]), a raw
//! newline-delimited JSON-RPC client ([`RawClient`]) and a typed one on it ([`Client`]), the real `agentctl`, and a mock
//! Anthropic server that speaks the recorded SSE wire format and records every request
//! ([`mock::MockProvider`]). Nothing here reaches the network.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod client;
pub mod engine;
pub mod family;
pub mod mock;
pub mod sse;
pub mod sshd;
pub mod strace;
pub mod tls_engine;
pub mod wait;

pub use client::Client;
pub use wait::eventually;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

/// Upper bound on any single wait in a test; a guard against hangs, not a timing assertion.
pub const WAIT: Duration = Duration::from_secs(30);

/// The directory holding `agentd` and `agentctl` of the same profile as the running test or
/// bench binary. They are built once per run, so a test never runs a stale daemon.
pub fn bin_dir() -> PathBuf {
    build(&[]);
    profile_dir()
}

/// Builds the binaries with these cargo features (the benchmark's `agentd/count-allocations`)
/// before anything else in this process builds or starts them.
pub fn build_with_features(features: &[&str]) {
    let built = build(features);
    assert_eq!(
        built, features,
        "the binaries were already built with other features"
    );
}

/// target/<profile>, where the running test (in `deps/`) or bench binary is.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let mut dir = exe.parent().expect("exe dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

/// Builds `agentd` and `agentctl` in the running binary's profile, once per process; returns
/// the features of that build.
fn build(features: &[&str]) -> &'static [String] {
    static BUILT: OnceLock<Vec<String>> = OnceLock::new();
    BUILT.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .args(["build", "--quiet", "-p", "agentd", "-p", "agentctl"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir().ends_with("release") {
            build.arg("--release");
        }
        if !features.is_empty() {
            build.args(["--features", &features.join(",")]);
        }
        let status = build.status().expect("cargo runs");
        assert!(status.success(), "building agentd and agentctl failed");
        features.iter().map(|f| f.to_string()).collect()
    })
}

/// The real `agentd` on a temp socket with temp XDG directories. Killed on drop.
pub struct TestDaemon {
    child: Option<Child>,
    /// The temp root (runtime, config and state dirs live below it).
    pub root: tempfile::TempDir,
    /// The socket.
    pub socket: PathBuf,
    /// Where the daemon's stderr goes.
    pub log: PathBuf,
    env: Vec<(String, String)>,
    /// The open-file limit (soft, hard) the daemon starts with, if not inherited.
    nofile: Option<(u64, u64)>,
    /// A program (with its arguments) that runs `agentd` as its last argument; empty: none.
    wrapper: Vec<OsString>,
    /// The daemon's own pid when a wrapper runs it (then `child` is the wrapper).
    daemon_pid: Option<u32>,
    /// The (uid, gid) the daemon and the programs of [`Self::program`] run as, when not the
    /// test's own.
    user: Option<(u32, u32)>,
}

/// The ordinary user an [`unprivileged`](TestDaemonBuilder::unprivileged) daemon runs as when
/// the tests run as root: Debian's `nobody` and `nogroup`.
pub const UNPRIVILEGED: (u32, u32) = (65534, 65534);

/// How to start a [`TestDaemon`]: extra environment, a config file, and a program to run the
/// daemon under (`TestDaemon::builder().wrap("strace", ["-f", "-o", "FILE"]).start()`).
#[derive(Default)]
pub struct TestDaemonBuilder {
    env: Vec<(String, String)>,
    config: Option<String>,
    wrapper: Vec<OsString>,
    nofile: Option<(u64, u64)>,
    unprivileged: bool,
}

impl TestDaemonBuilder {
    /// Sets an environment variable for the daemon (and the wrapper).
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Writes `text` as the daemon's `config.toml`.
    pub fn config(mut self, text: &str) -> Self {
        self.config = Some(text.to_owned());
        self
    }

    /// Runs the daemon as `program args... <agentd>`, e.g. under `strace` to count or slow its
    /// syscalls. [`TestDaemon::pid`] is still the daemon's (from `daemon/info`), and
    /// [`TestDaemon::stop_with`] signals the daemon, not the wrapper: a tracer may ignore
    /// signals, and exits once the daemon has.
    pub fn wrap<I, S>(mut self, program: impl Into<OsString>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.wrapper = std::iter::once(program.into())
            .chain(args.into_iter().map(Into::into))
            .collect();
        self
    }

    /// Sets the daemon's open-file limit (`soft`, `hard`) before it runs, so fd-limit
    /// behaviour is reproducible on any machine.
    pub fn nofile(mut self, soft: u64, hard: u64) -> Self {
        self.nofile = Some((soft, hard));
        self
    }

    /// Runs the daemon, and every program started through [`TestDaemon::program`] (agentctl,
    /// editors), as an ordinary user ([`UNPRIVILEGED`]) when the tests run as root, as a
    /// user's daemon runs: what a command may read or signal then depends on the kernel's
    /// rules for other processes of the same user, not on root's exemptions. The temp root
    /// is given to that user; give it the directories a session works in with
    /// [`TestDaemon::give`]. The test itself stays root and may connect as root (agentd
    /// accepts root's connections, as ssh-agent does).
    pub fn unprivileged(mut self) -> Self {
        self.unprivileged = true;
        self
    }

    /// Starts the daemon and waits until its socket answers.
    pub async fn start(self) -> Result<TestDaemon> {
        // Short paths: sun_path holds 107 bytes.
        let root = tempfile::Builder::new().prefix("ad").tempdir_in("/tmp")?;
        if let Some(text) = &self.config {
            std::fs::create_dir_all(root.path().join("config/agentd"))?;
            std::fs::write(root.path().join("config/agentd/config.toml"), text)?;
        }
        let socket = root.path().join("run/agentd/agentd.sock");
        let mut daemon = TestDaemon {
            child: None,
            log: root.path().join("agentd.log"),
            socket,
            root,
            env: self.env,
            wrapper: self.wrapper,
            daemon_pid: None,
            nofile: self.nofile,
            user: (self.unprivileged && nix::unistd::geteuid().is_root()).then_some(UNPRIVILEGED),
        };
        daemon.give(daemon.root.path())?;
        daemon.spawn()?;
        daemon.wait_ready().await?;
        Ok(daemon)
    }
}

impl TestDaemon {
    /// Starts a daemon whose Anthropic provider points at `anthropic_url` with a test key.
    pub async fn start(anthropic_url: &str) -> Result<Self> {
        Self::start_with(&[
            ("ANTHROPIC_BASE_URL", anthropic_url),
            ("ANTHROPIC_API_KEY", "test-key"),
        ])
        .await
    }

    /// Starts a daemon with these extra environment variables.
    pub async fn start_with(env: &[(&str, &str)]) -> Result<Self> {
        Self::start_with_config(env, None).await
    }

    /// Starts a daemon with these environment variables and, if given, this config file.
    pub async fn start_with_config(env: &[(&str, &str)], config: Option<&str>) -> Result<Self> {
        let mut builder = env.iter().fold(Self::builder(), |b, (k, v)| b.env(k, v));
        if let Some(text) = config {
            builder = builder.config(text);
        }
        builder.start().await
    }

    /// Like [`Self::start_with_config`], with the daemon's open-file limit set to
    /// (`soft`, `hard`) before it runs.
    pub async fn start_with_nofile(
        env: &[(&str, &str)],
        config: Option<&str>,
        soft: u64,
        hard: u64,
    ) -> Result<Self> {
        let mut builder = env.iter().fold(Self::builder(), |b, (k, v)| b.env(k, v));
        if let Some(text) = config {
            builder = builder.config(text);
        }
        builder.nofile(soft, hard).start().await
    }

    /// A daemon to configure before it starts (e.g. to run it under a wrapper program).
    pub fn builder() -> TestDaemonBuilder {
        TestDaemonBuilder::default()
    }

    /// The (uid, gid) the daemon runs as when it is not the test's own
    /// ([`TestDaemonBuilder::unprivileged`] under root).
    pub fn user(&self) -> Option<(u32, u32)> {
        self.user
    }

    /// Makes `path` and everything beneath it (symlinks themselves, not their targets) the
    /// daemon's user's, so an [unprivileged](TestDaemonBuilder::unprivileged) daemon can work
    /// there; nothing to do when the daemon runs as the test's user.
    pub fn give(&self, path: &Path) -> Result<()> {
        let Some((uid, gid)) = self.user else {
            return Ok(());
        };
        let chown = |p: &Path| {
            std::os::unix::fs::lchown(p, Some(uid), Some(gid))
                .with_context(|| format!("chown {}", p.display()))
        };
        chown(path)?;
        if std::fs::symlink_metadata(path)?.is_dir() {
            for entry in std::fs::read_dir(path)? {
                self.give(&entry?.path())?;
            }
        }
        Ok(())
    }

    /// One of the built binaries (`agentd`, `agentctl`) with the daemon's environment.
    pub fn command(&self, binary: &str) -> Command {
        self.program(bin_dir().join(binary))
    }

    /// Any program (from `PATH`, or a path) with the environment the daemon runs with, so it
    /// finds the daemon's socket.
    pub fn program(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        let root = self.root.path();
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", root)
            .env("XDG_RUNTIME_DIR", root.join("run"))
            .env("XDG_CONFIG_HOME", root.join("config"))
            .env("XDG_STATE_HOME", root.join("state"))
            .env("AGENTD_SOCKET", &self.socket)
            .env("AGENTD_LOG", "debug");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Some((uid, gid)) = self.user {
            use std::os::unix::process::CommandExt;
            // std drops the supplementary groups too when root sets a uid.
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    fn spawn(&mut self) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let mut cmd = match self.wrapper.split_first() {
            Some((program, args)) => {
                let mut cmd = self.program(program);
                cmd.args(args).arg(bin_dir().join("agentd"));
                cmd
            }
            None => self.command("agentd"),
        };
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if let Some((soft, hard)) = self.nofile {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    nix::sys::resource::setrlimit(
                        nix::sys::resource::Resource::RLIMIT_NOFILE,
                        soft,
                        hard,
                    )
                    .map_err(std::io::Error::from)
                });
            }
        }
        let child = cmd.spawn()?;
        self.child = Some(child);
        self.daemon_pid = None;
        Ok(())
    }

    async fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + WAIT;
        loop {
            if UnixStream::connect(&self.socket).await.is_ok() {
                if !self.wrapper.is_empty() {
                    let info = self.client().await?.call("daemon/info", json!({})).await?;
                    let pid = info["pid"]
                        .as_u64()
                        .ok_or_else(|| anyhow!("no pid in daemon/info: {info}"))?;
                    self.daemon_pid = Some(u32::try_from(pid)?);
                }
                return Ok(());
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                bail!("agentd exited with {status}: {}", self.log_text());
            }
            if Instant::now() > deadline {
                bail!("agentd did not start: {}", self.log_text());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The daemon's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The daemon's pid (not its wrapper's).
    pub fn pid(&self) -> u32 {
        self.daemon_pid
            .or_else(|| self.child.as_ref().map(Child::id))
            .unwrap_or(0)
    }

    /// The daemon's resident memory, in KiB (`VmRSS`).
    pub fn rss_kib(&self) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| anyhow!("no VmRSS in /proc/{}/status", self.pid()))
    }

    /// The daemon's resident memory once it is at most `bound` KiB (the daemon gives memory
    /// back shortly after clients leave), or its last reading when it stays above for
    /// [`WAIT`]; the caller asserts.
    pub async fn rss_settling_below(&self, bound: u64) -> Result<u64> {
        let deadline = Instant::now() + WAIT;
        loop {
            let rss = self.rss_kib()?;
            if rss <= bound || Instant::now() > deadline {
                return Ok(rss);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The daemon's open-file limit (soft) as it runs.
    pub fn nofile_soft(&self) -> Result<u64> {
        let limits = std::fs::read_to_string(format!("/proc/{}/limits", self.pid()))?;
        limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| anyhow!("no open-file limit in /proc/{}/limits", self.pid()))
    }

    /// Sends a signal and waits for the daemon to exit.
    pub async fn stop_with(
        &mut self,
        signal: nix::sys::signal::Signal,
    ) -> Result<std::process::ExitStatus> {
        let pid = self.pid();
        let mut child = self.child.take().ok_or_else(|| anyhow!("not running"))?;
        // With a wrapper, the daemon gets the signal and the wrapper exits after it.
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal)?;
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                bail!("agentd did not exit: {}", self.log_text());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts the daemon again on the same socket and directories (after [`Self::stop_with`],
    /// or a kill). Refuses while the old one runs: the new one would not start (the state
    /// directory's lock), and the old one would go on answering as if it were new.
    pub async fn restart(&mut self) -> Result<()> {
        if let Some(child) = self.child.as_mut()
            && child.try_wait()?.is_none()
        {
            bail!(
                "restart: agentd (pid {}) is still running; stop it first",
                self.pid()
            );
        }
        self.spawn()?;
        self.wait_ready().await
    }

    /// Where the daemon stores its sessions.
    pub fn sessions_dir(&self) -> PathBuf {
        self.root.path().join("state/agentd/sessions")
    }

    /// Connects a raw client.
    pub async fn client(&self) -> Result<RawClient> {
        RawClient::connect(&self.socket).await
    }

    /// Runs `agentctl` with `args` (and `stdin` if given) to completion.
    pub async fn agentctl(&self, args: &[&str], stdin: Option<&str>) -> Result<Output> {
        let mut cmd = self.command("agentctl");
        cmd.args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = tokio::process::Command::from(cmd).spawn()?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes()).await?;
        }
        Ok(tokio::time::timeout(WAIT, child.wait_with_output())
            .await
            .context("agentctl hung")??)
    }

    /// Creates a session in `cwd` and returns its id.
    pub async fn create_session(
        &self,
        client: &mut RawClient,
        cwd: &Path,
        extra: Value,
    ) -> Result<String> {
        let mut params = json!({"cwd": cwd.display().to_string()});
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        let snapshot = client.call("session/create", params).await?;
        Ok(snapshot["session_id"]
            .as_str()
            .ok_or_else(|| anyhow!("no session id in {snapshot}"))?
            .to_owned())
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A killed tracer may leave its tracee running: kill the daemon itself too.
            if let Some(pid) = self.daemon_pid {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A JSON-RPC client that writes lines and reads lines, keeping notifications aside.
pub struct RawClient {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    next_id: u64,
    notifications: std::collections::VecDeque<Value>,
    /// The subscription [`RawClient::item`] reads; items of older ones are skipped.
    current: Option<String>,
}

impl RawClient {
    /// Connects to `socket`.
    pub async fn connect(socket: &Path) -> Result<Self> {
        let (r, w) = UnixStream::connect(socket).await?.into_split();
        Ok(Self {
            reader: BufReader::new(r),
            writer: w,
            next_id: 1,
            notifications: Default::default(),
            current: None,
        })
    }

    /// Connects to `socket`, retrying while its listen backlog is full (many clients at once).
    pub async fn connect_retrying(socket: &Path) -> Self {
        let deadline = Instant::now() + WAIT;
        loop {
            match Self::connect(socket).await {
                Ok(c) => return c,
                Err(e) if Instant::now() > deadline => panic!("cannot connect: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    }

    /// Writes raw bytes.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.writer.write_all(bytes).await?;
        Ok(())
    }

    /// Reads the next line as JSON (any message).
    pub async fn read_message(&mut self) -> Result<Value> {
        let line = self.read_line().await?;
        serde_json::from_str(&line).with_context(|| format!("bad line {line:?}"))
    }

    /// Reads the next line as text, without its newline.
    pub async fn read_line(&mut self) -> Result<String> {
        let mut line = String::new();
        let n = tokio::time::timeout(WAIT, self.reader.read_line(&mut line))
            .await
            .context("no message from agentd")??;
        if n == 0 {
            bail!("connection closed");
        }
        Ok(line.trim_end().to_owned())
    }

    /// Reads until the response with `id`; notifications seen meanwhile are kept.
    pub async fn response(&mut self, id: &Value) -> Result<Value> {
        loop {
            let msg = self.read_message().await?;
            if msg.get("id") == Some(id) && msg.get("method").is_none() {
                return Ok(msg);
            }
            if msg.get("method").is_some() {
                self.notifications.push_back(msg);
            } else {
                bail!("unexpected message {msg}");
            }
        }
    }

    /// Sends a request and returns the whole response object.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = json!(self.next_id);
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(format!("{line}\n").as_bytes()).await?;
        self.response(&id).await
    }

    /// Sends a request and returns its result, or fails with the error object.
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        let response = self.request(method, params).await?;
        match response.get("result") {
            Some(r) => Ok(r.clone()),
            None => bail!("{method} failed: {}", response["error"]),
        }
    }

    /// The notifications that arrived before the last response read, not yet taken.
    pub fn notifications_buffered(&self) -> &std::collections::VecDeque<Value> {
        &self.notifications
    }

    /// The next notification.
    pub async fn notification(&mut self) -> Result<Value> {
        if let Some(n) = self.notifications.pop_front() {
            return Ok(n);
        }
        let msg = self.read_message().await?;
        if msg.get("method").is_none() {
            bail!("expected a notification, got {msg}");
        }
        Ok(msg)
    }

    /// Subscribes to a session's events; returns the subscription id.
    pub async fn subscribe(&mut self, session: &str, since_seq: Option<u64>) -> Result<String> {
        let mut params = json!({"session_id": session});
        if let Some(s) = since_seq {
            params["since_seq"] = json!(s);
        }
        let id = self.call("session/subscribe", params).await?;
        let id = id
            .as_str()
            .ok_or_else(|| anyhow!("subscription id is not a string: {id}"))?
            .to_owned();
        self.current = Some(id.clone());
        Ok(id)
    }

    /// The next stream item (`{"type":"event",...}` or `{"type":"end",...}`) of the newest
    /// subscription.
    pub async fn item(&mut self) -> Result<Value> {
        loop {
            let n = self.notification().await?;
            if n["method"] != "session/event" {
                bail!("unexpected notification {n}");
            }
            if self
                .current
                .as_deref()
                .is_some_and(|c| n["params"]["subscription"] != c)
            {
                continue;
            }
            return Ok(n["params"]["result"].clone());
        }
    }

    /// Subscribes to `session` from its newest event, submits `text`, and returns every event
    /// up to the `processing_end`.
    pub async fn run(&mut self, session: &str, text: &str) -> Result<Vec<Value>> {
        let snapshot = self
            .call("session/get", json!({"session_id": session}))
            .await?;
        self.subscribe(session, snapshot["last_seq"].as_u64())
            .await?;
        self.call(
            "session/submit",
            json!({"session_id": session, "text": text}),
        )
        .await?;
        self.events_until("processing_end", |_| true).await
    }

    /// Reads events until one of `kind` satisfies `pred`; returns every event read, that one last.
    pub async fn events_until(
        &mut self,
        kind: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Result<Vec<Value>> {
        let mut seen = Vec::new();
        loop {
            let item = self.item().await?;
            if item["type"] == "end" {
                bail!(
                    "stream ended before {kind}: {item}; saw {}",
                    kinds(&seen).join(",")
                );
            }
            let matched = item["kind"] == kind && pred(&item);
            seen.push(item);
            if matched {
                return Ok(seen);
            }
        }
    }
}

/// Raises this process's soft open-file limit to at least `needed` (up to the hard limit).
/// Fails when the hard limit is lower: the caller cannot run its scenario.
pub fn ensure_nofile(needed: u64) -> Result<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft >= needed {
        return Ok(());
    }
    if hard < needed {
        bail!("this test needs {needed} open files; the hard limit is {hard}");
    }
    setrlimit(Resource::RLIMIT_NOFILE, needed, hard)?;
    Ok(())
}

/// Whether the tests run in CI, where a missing prerequisite is a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The `kind` of each event.
pub fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// Checks a test's prerequisite that a machine may lack (a program, root, the recorded
/// fixtures). When it is missing the test prints why and skips (returns `false`), except under
/// `CI=true`, where it fails: a green CI run then means every test ran (`.ci/run` installs
/// the programs).
pub fn prerequisite(what: &str, present: bool) -> bool {
    if present {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(
        !ci,
        "{what} is missing, and under CI=true every test must run (.ci/run installs what it can)"
    );
    eprintln!("{what} is missing; skipping");
    false
}

/// Whether this kernel offers Landlock at `abi` or newer (the sandbox needs 3, and 4 for its
/// network rules), a [`prerequisite`] of the calling test.
pub fn landlock(abi: i64) -> bool {
    let found = landlock_abi();
    prerequisite(
        &format!("Landlock ABI {abi} (this kernel reports {found})"),
        found >= abi,
    )
}

/// The Landlock ABI this kernel offers (below 1: none).
pub fn landlock_abi() -> i64 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute, size 0 and the VERSION flag the call only reports the
    // ABI version (or fails); it creates nothing.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    }
}

/// `program` found on `PATH`, a [`prerequisite`] of the calling test.
pub fn program(program: &str) -> Option<PathBuf> {
    let found = std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file());
    prerequisite(&format!("{program} (on PATH)"), found.is_some())
        .then_some(found)
        .flatten()
}

/// Processes whose process group is `pgid` and that are not zombies.
pub fn live_group_members(pgid: i32) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the parenthesised command: state ppid pgrp ...
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[0] != "Z" && fields[2].parse::<i32>().ok() == Some(pgid) {
            pids.push(pid);
        }
    }
    pids
}
