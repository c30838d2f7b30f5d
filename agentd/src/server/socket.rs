//! The listening socket: its directory (0700; the fallback runtime directory checked to be the
//! user's own), the socket (0600), the single-instance lock, replacement of a stale socket
//! (and of nothing else), and adoption of a socket inherited from systemd.

use nix::fcntl::{Flock, FlockArg};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use tokio::net::UnixListener;

/// A bound listener and what keeps it exclusive.
pub(crate) struct Listener {
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
pub(crate) enum Error {
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
    /// Something other than a socket is where the socket goes.
    #[error(
        "{path} exists and is {kind}, not a socket: agentd replaces only a stale socket (one \
         nobody listens on), never another kind of file; move it away or choose another --socket"
    )]
    NotASocket {
        /// The path.
        path: PathBuf,
        /// What is there.
        kind: &'static str,
    },
    /// A program other than an agentd listens on the socket.
    #[error(
        "something already listens on {0} without holding agentd's lock: stop it, or choose \
         another --socket"
    )]
    InUse(PathBuf),
    /// The runtime directory is not the user's own private directory.
    #[error("refusing to use the runtime directory: {0}")]
    UnsafeDirectory(String),
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
    pub(crate) fn bind(path: &Path) -> Result<Self, Error> {
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
        // Refused before the lock file is made beside it; checked again under the lock.
        if let Ok(meta) = fs::symlink_metadata(path)
            && !meta.file_type().is_socket()
        {
            return Err(not_a_socket(path, &meta));
        }
        let lock_path = path.with_extension("sock.lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&lock_path)
            .map_err(io_err("cannot open lock file", &lock_path))?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|_| {
            Error::AlreadyRunning {
                socket: path.to_owned(),
                lock: lock_path.clone(),
            }
        })?;
        remove_stale(path)?;
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
    pub(crate) fn adopt_systemd(fd: RawFd) -> Result<Self, Error> {
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
    pub(crate) fn remove_file(&self) {
        if self.owns_file {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Removes a socket left at `path` by a dead daemon (we hold the lock, and nothing listens on
/// it: a connection is refused), and nothing else: another kind of file is the user's, and a
/// socket something listens on is another program's.
fn remove_stale(path: &Path) -> Result<(), Error> {
    use nix::errno::Errno;
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr, connect, socket};
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err("cannot inspect", path)(e)),
    };
    if !meta.file_type().is_socket() {
        return Err(not_a_socket(path, &meta));
    }
    let probe_error = |e: Errno| Error::Io {
        what: "cannot check whether anything listens on",
        path: path.to_owned(),
        source: e.into(),
    };
    // Non-blocking, so a listener with a full backlog answers EAGAIN instead of blocking.
    let probe = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(probe_error)?;
    let addr = UnixAddr::new(path).map_err(probe_error)?;
    match connect(probe.as_raw_fd(), &addr) {
        Err(Errno::ECONNREFUSED) => {
            fs::remove_file(path).map_err(io_err("cannot remove stale socket", path))?;
            tracing::info!(socket = %path.display(), "removed stale socket");
            Ok(())
        }
        Ok(()) | Err(Errno::EAGAIN) => Err(Error::InUse(path.to_owned())),
        Err(e) => Err(probe_error(e)),
    }
}

fn not_a_socket(path: &Path, meta: &fs::Metadata) -> Error {
    let t = meta.file_type();
    let kind = if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a regular file"
    } else if t.is_fifo() {
        "a FIFO"
    } else {
        "a device"
    };
    Error::NotASocket {
        path: path.to_owned(),
        kind,
    }
}

/// Makes sure the fallback runtime directory (`<tmp>/agentd-<uid>`, used without
/// `XDG_RUNTIME_DIR`) is this user's own: created 0700 when missing, and otherwise a real
/// directory (not a symbolic link), owned by this user, mode 0700. Anyone can create a
/// directory in the temp directory first, and whoever owns it could put their own socket there.
pub(crate) fn ensure_runtime_dir(dir: &Path) -> Result<(), Error> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => tracing::info!(dir = %dir.display(), "created the runtime directory"),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err("cannot create directory", dir)(e)),
    }
    // Checked whether or not it was just made: another user may have made it first.
    let meta = fs::symlink_metadata(dir).map_err(io_err("cannot inspect", dir))?;
    match agentd_proto::socket::runtime_dir_problem(dir, &meta, nix::unistd::geteuid().as_raw()) {
        Some(problem) => Err(Error::UnsafeDirectory(problem)),
        None => Ok(()),
    }
}

/// Reads and clears `LISTEN_PID`/`LISTEN_FDS`: `Some(3)` when systemd passed this process a
/// socket. Must run before any thread starts, because it changes the environment.
pub(crate) fn take_systemd_fd() -> Option<RawFd> {
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
