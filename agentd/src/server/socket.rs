//! The listening socket: its directory (0700), the socket (0600), the single-instance lock,
//! stale-file replacement, and adoption of a socket inherited from systemd.

use nix::fcntl::{Flock, FlockArg};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use tokio::net::UnixListener;

/// A bound listener and what keeps it exclusive.
pub struct Listener {
    /// The listener.
    pub listener: UnixListener,
    /// The socket path, removed on shutdown when this daemon created it.
    pub path: PathBuf,
    /// Held for the daemon's lifetime; the kernel releases it even on SIGKILL.
    _lock: Option<Flock<File>>,
    owns_file: bool,
}

/// Why the socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Another daemon serves this socket.
    #[error(
        "another agentd already serves {socket} (it holds {lock}); stop it first, or choose another --socket"
    )]
    AlreadyRunning {
        /// The socket.
        socket: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// The path does not fit in `sun_path`.
    #[error("socket path {0} is too long for a Unix socket (at most 107 bytes)")]
    PathTooLong(PathBuf),
    /// An I/O step failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// The step.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The inherited file descriptor is not a listening Unix socket.
    #[error("inherited socket (LISTEN_FDS) is unusable: {0}")]
    Inherited(String),
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> Error + use<'a> {
    move |source| Error::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

impl Listener {
    /// Binds `path`: creates its directory 0700, takes `<path>.lock`, replaces a stale socket
    /// file, binds, and sets the socket to 0600.
    pub fn bind(path: &Path) -> Result<Self, Error> {
        if path.as_os_str().len() > 107 {
            return Err(Error::PathTooLong(path.to_owned()));
        }
        if let Some(dir) = path.parent()
            && !dir.exists()
        {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io_err("cannot create directory", dir))?;
        }
        let lock_path = path.with_extension("sock.lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_err("cannot open lock file", &lock_path))?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|_| {
            Error::AlreadyRunning {
                socket: path.to_owned(),
                lock: lock_path.clone(),
            }
        })?;
        // We hold the lock, so any socket file left here belongs to a dead daemon.
        if fs::symlink_metadata(path).is_ok() {
            fs::remove_file(path).map_err(io_err("cannot remove stale socket", path))?;
            tracing::info!(socket = %path.display(), "removed stale socket");
        }
        let listener = UnixListener::bind(path).map_err(io_err("cannot bind", path))?;
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))
            .map_err(io_err("cannot chmod", path))?;
        Ok(Self {
            listener,
            path: path.to_owned(),
            _lock: Some(lock),
            owns_file: true,
        })
    }

    /// Adopts fd 3 passed by systemd socket activation. systemd guarantees one instance, so no
    /// lock is taken, and the socket file is systemd's to remove.
    pub fn adopt_systemd(fd: RawFd) -> Result<Self, Error> {
        use nix::sys::socket::{
            AddressFamily, SockaddrLike, SockaddrStorage, getsockname, getsockopt, sockopt,
        };
        // SAFETY: systemd passed this descriptor to us and nothing else in the process uses it.
        let std_listener = unsafe { std::os::unix::net::UnixListener::from_raw_fd(fd) };
        let listening = getsockopt(&std_listener, sockopt::AcceptConn)
            .map_err(|e| Error::Inherited(e.to_string()))?;
        if !listening {
            return Err(Error::Inherited(format!("fd {fd} is not listening")));
        }
        let addr: SockaddrStorage = getsockname(fd).map_err(|e| Error::Inherited(e.to_string()))?;
        if addr.family() != Some(AddressFamily::Unix) {
            return Err(Error::Inherited(format!("fd {fd} is not a Unix socket")));
        }
        let path = addr
            .as_unix_addr()
            .and_then(|u| u.path())
            .map(Path::to_owned)
            .unwrap_or_default();
        nix::fcntl::fcntl(
            &std_listener,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .map_err(|e| Error::Inherited(e.to_string()))?;
        std_listener
            .set_nonblocking(true)
            .map_err(|e| Error::Inherited(e.to_string()))?;
        let listener =
            UnixListener::from_std(std_listener).map_err(|e| Error::Inherited(e.to_string()))?;
        Ok(Self {
            listener,
            path,
            _lock: None,
            owns_file: false,
        })
    }

    /// Removes the socket file if this daemon created it.
    pub fn remove_file(&self) {
        if self.owns_file {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Reads and clears `LISTEN_PID`/`LISTEN_FDS`: `Some(3)` when systemd passed this process a
/// socket. Must run before any thread starts, because it changes the environment.
pub fn take_systemd_fd() -> Option<RawFd> {
    let pid = std::env::var("LISTEN_PID").ok()?;
    let fds = std::env::var("LISTEN_FDS").ok()?;
    // SAFETY: called first thing in main, while the process has one thread.
    unsafe {
        std::env::remove_var("LISTEN_PID");
        std::env::remove_var("LISTEN_FDS");
        std::env::remove_var("LISTEN_FDNAMES");
    }
    (pid.parse::<u32>().ok()? == std::process::id() && fds.parse::<u32>().ok()? >= 1).then_some(3)
}
