//! Starting a local command without copying the daemon. `fork` copies the page tables of the
//! whole daemon, and `exec` throws the copy away: with the daemon's memory it costs a
//! millisecond per command, and each page the daemon then writes faults once more. On Linux a
//! command is started the way `posix_spawn` starts one: `clone(CLONE_VM | CLONE_VFORK)`, the
//! child running on a stack of its own in the daemon's memory while the calling thread waits,
//! until it has exec'd. Its exit is awaited through a pidfd, which names this process and no
//! other, whoever else reaps. Elsewhere `fork` it is, through tokio.
//!
//! Between the clone and the exec the child runs the [`Hook`]s (a new session, the sandbox).
//! They share the daemon's memory, so they make system calls only: no allocation, no lock, no
//! write to anything the daemon owns; they report failure as an [`Errno`], which the spawn
//! returns.

use super::child::Child;
use super::process::{self, SpawnedChild};
use nix::errno::Errno;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A step of the child's between the clone (or fork) and the exec.
pub(super) type Hook = Box<dyn Fn() -> Result<(), Errno> + Send + Sync>;

/// A command to start: a program with its arguments, its whole environment, its directory,
/// stdin from `/dev/null` (or the descriptor [`Command::stdin`] gives), stdout and stderr to
/// pipes.
pub(super) struct Command {
    program: CString,
    args: Vec<CString>,
    env: Vec<CString>,
    cwd: CString,
    hooks: Vec<Hook>,
    stdin: Option<std::os::fd::OwnedFd>,
}

fn c_string(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{:?} holds a NUL byte", s.to_string_lossy()),
        )
    })
}

impl Command {
    /// `program` (an absolute path) with `args` in `cwd`, with no variables yet.
    pub(super) fn new(program: &Path, args: &[&OsStr], cwd: &Path) -> io::Result<Self> {
        Ok(Self {
            program: c_string(program.as_os_str())?,
            args: args
                .iter()
                .map(|a| c_string(a))
                .collect::<io::Result<_>>()?,
            env: Vec::new(),
            cwd: c_string(cwd.as_os_str())?,
            hooks: Vec::new(),
            stdin: None,
        })
    }

    /// Gives the command `fd` as its stdin (a pipe's read end, for a server spoken to).
    pub(super) fn stdin(&mut self, fd: std::os::fd::OwnedFd) -> &mut Self {
        self.stdin = Some(fd);
        self
    }

    /// Sets the variable `key` (the last setting of a key wins).
    pub(super) fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        let key = key.as_ref().as_bytes();
        let mut pair = key.to_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_ref().as_bytes());
        self.env
            .retain(|e| !e.as_bytes().starts_with(&pair[..=key.len()]));
        // A NUL inside a variable cannot reach the program: such a variable is left out, as
        // it could not have come from an environment either.
        if let Ok(pair) = CString::new(pair) {
            self.env.push(pair);
        }
        self
    }

    /// Sets each of `vars`.
    pub(super) fn envs(
        &mut self,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> &mut Self {
        for (key, value) in vars {
            self.env(key, value);
        }
        self
    }

    /// Runs `hook` in the child before the exec, after the hooks added before it.
    ///
    /// # Safety
    /// `hook` runs in the daemon's memory, on the spawning thread's thread-locals, while the
    /// rest of the daemon runs on (see the module docs): it must make system calls only, and
    /// must not allocate, lock or panic. A panic there is not contained: the panic machinery
    /// runs in the child and leaves the spawning thread marked as panicking (every mutex it
    /// later releases poisoned), and the child dies of SIGABRT, which the spawn reports as a
    /// started command. The contract of `std::os::unix::process::CommandExt::pre_exec`, with
    /// more at stake.
    pub(super) unsafe fn hook(&mut self, hook: Hook) -> &mut Self {
        self.hooks.push(hook);
        self
    }
}

/// The read end of a command's stdout or stderr.
pub(super) type Output = tokio::net::unix::pipe::Receiver;

/// The started command's pid (the leader of its group when a hook made it one) and its
/// process with the read ends of its stdout and stderr.
pub(super) type Spawned = (i32, Child<Process, Output, Output>);

#[cfg(target_os = "linux")]
pub(super) use linux::Process;

#[cfg(target_os = "linux")]
mod linux {
    use super::*;
    use std::ffi::c_char;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;
    use std::sync::atomic::{AtomicI32, Ordering};
    use tokio::io::unix::AsyncFd;

    /// The child's stack: the thread that clones waits (`CLONE_VFORK`) until the child has
    /// exec'd or exited, so it is only in use meanwhile. Below it, a page no one may touch.
    struct Stack {
        base: *mut libc::c_void,
        len: usize,
    }

    const STACK: usize = 256 * 1024;
    const GUARD: usize = 4096;

    impl Stack {
        fn new() -> io::Result<Self> {
            let len = STACK + GUARD;
            // SAFETY: a fresh private anonymous mapping; `base` is checked before use.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                    -1,
                    0,
                )
            };
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let stack = Self { base, len };
            // SAFETY: the lowest page of the mapping made above. Stacks grow down.
            if unsafe { libc::mprotect(base, GUARD, libc::PROT_NONE) } == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(stack)
        }

        fn top(&self) -> *mut libc::c_void {
            // SAFETY: one past the end of the mapping, where a downward stack starts.
            unsafe { self.base.cast::<u8>().add(self.len).cast() }
        }
    }

    impl Drop for Stack {
        fn drop(&mut self) {
            // SAFETY: the mapping made in `new`, no longer in use (the child has exec'd).
            unsafe { libc::munmap(self.base, self.len) };
        }
    }

    /// What the child reads, all prepared before the clone; and where it leaves its errno.
    struct ChildSide<'a> {
        stdin: RawFd,
        stdout: RawFd,
        stderr: RawFd,
        program: *const c_char,
        argv: *const *const c_char,
        envp: *const *const c_char,
        cwd: *const c_char,
        hooks: &'a [Hook],
        /// Nonzero: the errno of the step that failed; the child then exits (status 127).
        failed: AtomicI32,
    }

    /// The child, from the clone to the exec. System calls only (see the module docs).
    extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the `ChildSide` the parent keeps alive while it waits for us.
        let side = unsafe { &*arg.cast::<ChildSide<'_>>() };
        let fail = |errno: Errno| -> libc::c_int {
            side.failed.store(errno as i32, Ordering::Relaxed);
            // SAFETY: ends the child without running anything of the daemon's.
            unsafe { libc::_exit(127) }
        };
        // SAFETY: system calls with valid arguments, on the child's own descriptor table,
        // signal dispositions and mask (no CLONE_FILES, no CLONE_SIGHAND).
        unsafe {
            // The daemon's signal handlers must not run here, in its memory: every signal the
            // daemon catches goes back to its default (the exec would do so anyway), and
            // SIGPIPE too, which Rust ignores but a shell pipeline needs.
            let mut old: libc::sigaction = std::mem::zeroed();
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            for signal in 1..=libc::SIGRTMAX() {
                if libc::sigaction(signal, std::ptr::null(), &mut old) == 0
                    && (old.sa_sigaction != libc::SIG_IGN || signal == libc::SIGPIPE)
                {
                    libc::sigaction(signal, &default, std::ptr::null_mut());
                }
            }
            for (fd, target) in [(side.stdin, 0), (side.stdout, 1), (side.stderr, 2)] {
                let done = if fd == target {
                    // dup2 onto itself would leave close-on-exec set.
                    libc::fcntl(fd, libc::F_SETFD, 0)
                } else {
                    libc::dup2(fd, target)
                };
                if done == -1 {
                    return fail(Errno::last());
                }
            }
            if libc::chdir(side.cwd) == -1 {
                return fail(Errno::last());
            }
        }
        for hook in side.hooks {
            if let Err(errno) = hook() {
                return fail(errno);
            }
        }
        // SAFETY: as above; `program`, `argv` and `envp` are NUL-terminated and outlive us.
        unsafe {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            libc::execve(side.program, side.argv, side.envp);
        }
        fail(Errno::last())
    }

    fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both are new descriptors no one else owns.
        Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
    }

    fn null_terminated(strings: &[&CString]) -> Vec<*const c_char> {
        strings
            .iter()
            .map(|s| s.as_ptr())
            .chain([std::ptr::null()])
            .collect()
    }

    impl Command {
        /// Starts the command (see the module docs); fails with the errno of the step that
        /// failed in the child, which then has exited and been reaped.
        pub(in crate::exec) fn spawn(mut self) -> io::Result<Spawned> {
            let stdin = match self.stdin.take() {
                Some(fd) => fd,
                None => std::fs::File::open("/dev/null")?.into(),
            };
            let (out_read, out_write) = pipe()?;
            let (err_read, err_write) = pipe()?;
            // Registered before the clone: once the command runs, only the pidfd can fail.
            let stdout = Output::from_owned_fd(out_read)?;
            let stderr = Output::from_owned_fd(err_read)?;
            let argv: Vec<&CString> = [&self.program].into_iter().chain(&self.args).collect();
            let argv = null_terminated(&argv);
            let envp = null_terminated(&self.env.iter().collect::<Vec<_>>());
            let side = ChildSide {
                stdin: stdin.as_raw_fd(),
                stdout: out_write.as_raw_fd(),
                stderr: err_write.as_raw_fd(),
                program: self.program.as_ptr(),
                argv: argv.as_ptr(),
                envp: envp.as_ptr(),
                cwd: self.cwd.as_ptr(),
                hooks: &self.hooks,
                failed: AtomicI32::new(0),
            };
            let stack = Stack::new()?;
            // Listed before the orphan reaper can look (see `process::spawned`).
            let mut listed = process::spawned();
            // SAFETY: every signal is blocked around the clone, so no handler of the daemon's
            // runs in the child before it has reset them; the child gets its own stack and
            // only reads `side`, which outlives it (the thread waits until it has exec'd).
            let (pid, clone_error) = unsafe {
                let mut all: libc::sigset_t = std::mem::zeroed();
                let mut before: libc::sigset_t = std::mem::zeroed();
                libc::sigfillset(&mut all);
                libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut before);
                let pid = libc::clone(
                    child_main,
                    stack.top(),
                    // No exit signal: the pidfd tells of the exit, and a SIGCHLD would only
                    // wake tokio's handler and the orphan reaper's scan of `/proc` for nothing.
                    libc::CLONE_VM | libc::CLONE_VFORK,
                    std::ptr::from_ref(&side).cast_mut().cast(),
                );
                let clone_error = io::Error::last_os_error();
                libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
                (pid, clone_error)
            };
            drop(stack);
            if pid == -1 {
                return Err(clone_error);
            }
            let failed = side.failed.load(Ordering::Relaxed);
            if failed != 0 {
                // It has exited: reap it here, unlisted, so nothing else takes its status.
                // SAFETY: waits for our own child.
                unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL) };
                return Err(io::Error::from_raw_os_error(failed));
            }
            listed.get_or_insert_default().insert(pid);
            drop(listed);
            let listed = SpawnedChild(pid);
            drop((out_write, err_write));
            // SAFETY: pidfd_open with a pid we have not reaped, so it is still ours.
            let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            let pidfd = match RawFd::try_from(pidfd) {
                // SAFETY: a new descriptor no one else owns.
                Ok(fd) if fd >= 0 => watch(unsafe { OwnedFd::from_raw_fd(fd) }),
                _ => Err(io::Error::last_os_error()),
            };
            let pidfd = match pidfd {
                Ok(pidfd) => pidfd,
                Err(why) => {
                    // SAFETY: our own child, started above; without a pidfd nothing awaits
                    // it, and no one would end it (its group is not recorded yet).
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                        libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL);
                    }
                    return Err(io::Error::new(
                        why.kind(),
                        format!("cannot watch the command (pidfd_open, Linux 5.3): {why}"),
                    ));
                }
            };
            let process = Process {
                pidfd,
                status: None,
                listed: Some(listed),
            };
            Ok((pid, Child::new(process, Some(stdout), Some(stderr))))
        }
    }

    /// `pidfd` registered with the runtime, readable once its process has exited.
    fn watch(pidfd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
        // SAFETY: the `AsyncFd` owns the descriptor, so it stays open and the same while
        // registered.
        unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) }
            .map_err(io::Error::from)
    }

    /// A started command's process, awaited through its pidfd.
    pub(in crate::exec) struct Process {
        pidfd: AsyncFd<OwnedFd>,
        status: Option<ExitStatus>,
        /// Keeps the orphan reaper off it until it is reaped.
        listed: Option<SpawnedChild>,
    }

    impl Process {
        /// Reaps it if it has exited. Fails when something else reaped it.
        fn reap(&mut self) -> io::Result<Option<ExitStatus>> {
            reap(&self.pidfd, &mut self.status)
        }
    }

    /// Reaps the process of `pidfd` if it has exited, keeping its status in `status`.
    fn reap(
        pidfd: &AsyncFd<OwnedFd>,
        status: &mut Option<ExitStatus>,
    ) -> io::Result<Option<ExitStatus>> {
        if status.is_some() {
            return Ok(*status);
        }
        // SAFETY: waitid on our pidfd into a zeroed siginfo; WNOHANG never blocks.
        let info = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let done = libc::waitid(
                libc::P_PIDFD,
                pidfd.as_raw_fd() as libc::id_t,
                &mut info,
                // __WALL: a child without an exit signal is a "clone" child to wait.
                libc::WEXITED | libc::WNOHANG | libc::__WALL,
            );
            if done == -1 {
                return Err(io::Error::last_os_error());
            }
            (info.si_pid() != 0).then_some(info)
        };
        *status = info.map(|info| {
            // SAFETY: filled in by waitid for an exited child.
            let status = unsafe { info.si_status() };
            // The status as waitpid would have given it.
            ExitStatus::from_raw(match info.si_code {
                libc::CLD_EXITED => (status & 0xff) << 8,
                libc::CLD_DUMPED => status | 0x80,
                _ => status,
            })
        });
        Ok(*status)
    }

    impl super::super::child::Process for Process {
        async fn wait(&mut self) -> io::Result<ExitStatus> {
            let Self { pidfd, status, .. } = self;
            loop {
                if let Some(status) = reap(pidfd, status)? {
                    return Ok(status);
                }
                let mut ready = pidfd.readable().await?;
                if let Some(status) = reap(pidfd, status)? {
                    return Ok(status);
                }
                ready.clear_ready();
            }
        }

        fn try_wait(&mut self) -> Option<ExitStatus> {
            self.reap().ok().flatten()
        }
    }

    impl Drop for Process {
        /// A process dropped before it exited is reaped when it does, in the background: by a
        /// task watching its pidfd, or where that cannot be (no runtime, no descriptor left)
        /// by a thread waiting for it. Nothing else would: it sends no SIGCHLD, and the
        /// orphan reaper's `waitpid` skips such children.
        fn drop(&mut self) {
            if !matches!(self.reap(), Ok(None)) {
                return;
            }
            let Some(listed) = self.listed.take() else {
                return;
            };
            let watched = tokio::runtime::Handle::try_current()
                .ok()
                .and_then(|runtime| {
                    let pidfd = watch(self.pidfd.get_ref().try_clone().ok()?).ok()?;
                    Some((runtime, pidfd))
                });
            match watched {
                Some((runtime, pidfd)) => {
                    runtime.spawn(async move {
                        let mut process = Process {
                            pidfd,
                            status: None,
                            listed: Some(listed),
                        };
                        let _ = super::super::child::Process::wait(&mut process).await;
                    });
                }
                None => {
                    let _ = std::thread::Builder::new()
                        .name("agentd-reap".into())
                        .spawn(move || {
                            // SAFETY: our own child, unreaped: `listed` keeps the orphan
                            // reaper off it until this returns.
                            unsafe { libc::waitpid(listed.0, std::ptr::null_mut(), libc::__WALL) };
                            drop(listed);
                        });
                }
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub(super) use other::Process;

#[cfg(not(target_os = "linux"))]
mod other {
    use super::*;
    use std::process::{ExitStatus, Stdio};

    /// A started command's process, reaped by tokio.
    pub(in crate::exec) struct Process {
        child: tokio::process::Child,
        _listed: SpawnedChild,
    }

    impl super::super::child::Process for Process {
        fn wait(&mut self) -> impl Future<Output = io::Result<ExitStatus>> + Send {
            self.child.wait()
        }

        fn try_wait(&mut self) -> Option<ExitStatus> {
            self.child.try_wait().ok().flatten()
        }
    }

    impl Command {
        /// Starts the command with `fork`, the hooks running in the child before the exec.
        pub(in crate::exec) fn spawn(self) -> io::Result<Spawned> {
            use std::os::unix::ffi::OsStringExt;
            let text = |c: &CString| OsString::from_vec(c.as_bytes().to_vec());
            let mut command = tokio::process::Command::new(text(&self.program));
            command
                .args(self.args.iter().map(text))
                .current_dir(text(&self.cwd))
                .env_clear()
                .envs(self.env.iter().filter_map(|pair| {
                    let (key, value) = pair
                        .as_bytes()
                        .split_at(pair.as_bytes().iter().position(|&b| b == b'=')?);
                    Some((
                        OsString::from_vec(key.to_vec()),
                        OsString::from_vec(value[1..].to_vec()),
                    ))
                }))
                .stdin(self.stdin.map_or_else(Stdio::null, Stdio::from))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            for hook in self.hooks {
                // SAFETY: hooks make system calls only (see the module docs).
                unsafe {
                    command.pre_exec(move || hook().map_err(io::Error::from));
                }
            }
            let (mut child, listed) = process::spawn(&mut command)?;
            let pipe = |fd: Option<std::os::fd::OwnedFd>| fd.map(Output::from_owned_fd).transpose();
            let stdout = pipe(child.stdout.take().map(|s| s.into_owned_fd()).transpose()?)?;
            let stderr = pipe(child.stderr.take().map(|s| s.into_owned_fd()).transpose()?)?;
            let pid = listed.0;
            Ok((
                pid,
                Child::new(
                    Process {
                        child,
                        _listed: listed,
                    },
                    stdout,
                    stderr,
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests;
