//! Who connected: the peer's credentials ([`Peer`]), and the check that refuses a process the
//! daemon started (a tool command, or anything such a command left running), whatever the
//! session's sandbox, so a command cannot reconfigure its session, answer its own approvals or
//! start sessions of its own.
//!
//! The daemon is a child subreaper, so everything a command starts stays its descendant, even
//! after a double fork or `setsid`. The peer is pinned by a pidfd (`SO_PEERPIDFD`, Linux 6.5;
//! before that `pidfd_open` of the `SO_PEERCRED` pid), its ancestry is read from `/proc`, and
//! then the pidfd must still name a live process: the pid read in `/proc` was then that
//! process's all along, never a later one on a reused pid. A peer that is gone or cannot be
//! read is refused.

use agentd_core::process::{AncestryError, ProcessId};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use tokio::net::UnixStream;

/// `SO_PEERPIDFD`, which libc does not export for glibc targets.
#[cfg(not(any(target_arch = "sparc", target_arch = "sparc64")))]
const SO_PEERPIDFD: libc::c_int = 77;
#[cfg(any(target_arch = "sparc", target_arch = "sparc64"))]
const SO_PEERPIDFD: libc::c_int = 0x56;

/// The caller's credentials, available to handlers through `Extensions`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer {
    /// User id.
    pub uid: u32,
    /// Process id, when the OS reports it.
    pub pid: Option<i32>,
}

/// The connecting process, held by a pidfd.
pub(super) struct PeerProcess {
    pidfd: OwnedFd,
    pid: i32,
}

/// Why a connection is refused.
#[derive(Debug)]
pub(super) enum Refusal {
    /// The peer descends from the daemon.
    Descendant,
    /// The daemon is out of file descriptors: the check may be tried again.
    OutOfFiles,
    /// The peer could not be identified or its ancestry read.
    Unknown(String),
}

impl From<AncestryError> for Refusal {
    fn from(e: AncestryError) -> Self {
        match e {
            AncestryError::OutOfFiles => Self::OutOfFiles,
            AncestryError::Unknown(why) => Self::Unknown(why),
        }
    }
}

impl PeerProcess {
    /// Takes a pidfd for `stream`'s peer, whose pid `SO_PEERCRED` gave as `pid`: two system
    /// calls, no `/proc`. `SO_PEERPIDFD` names the process that connected (the kernel keeps
    /// it from `connect`), however late it is asked; `pidfd_open` of the pid, the fallback
    /// before Linux 6.5, names whoever has the pid now, which is why it comes right after
    /// `accept`.
    pub(super) fn of(stream: &UnixStream, pid: Option<i32>) -> Result<Self, Refusal> {
        let pid = pid.filter(|p| *p > 0).ok_or_else(|| {
            Refusal::Unknown(
                "the kernel reports no pid for it (it is outside this pid namespace)".into(),
            )
        })?;
        let exhausted =
            |e: &std::io::Error| matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
        let pidfd = match peer_pidfd(stream) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                return Err(Refusal::Unknown(format!("process {pid} is gone")));
            }
            Err(e) if exhausted(&e) => return Err(Refusal::OutOfFiles),
            Err(_) => pidfd_open(pid).map_err(|e| {
                if exhausted(&e) {
                    Refusal::OutOfFiles
                } else {
                    Refusal::Unknown(format!("pidfd_open({pid}): {e}"))
                }
            })?,
        };
        Ok(Self { pidfd, pid })
    }

    /// Whether this process may talk to the daemon (`daemon`: the daemon itself). Reads
    /// `/proc`: call it on the blocking pool.
    pub(super) fn check(&self, daemon: ProcessId) -> Result<(), Refusal> {
        let descends = agentd_core::process::descends_from(self.pid, daemon)?;
        self.alive().map_err(Refusal::Unknown)?;
        if descends {
            Err(Refusal::Descendant)
        } else {
            Ok(())
        }
    }

    /// Whether the process the pidfd names is still running (`pidfd_send_signal` with signal
    /// 0 checks without signalling).
    fn alive(&self) -> Result<(), String> {
        // SAFETY: the fd is a pidfd this struct owns; a null siginfo and no flags are valid.
        let r = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                0,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        let e = std::io::Error::last_os_error();
        match (r, e.raw_os_error()) {
            (0, _) => Ok(()),
            // It exists but runs as another user (root) the daemon may not signal.
            (_, Some(libc::EPERM)) => Ok(()),
            (_, Some(libc::ESRCH)) => Err(format!("process {} exited", self.pid)),
            _ => Err(format!("cannot check process {}: {e}", self.pid)),
        }
    }
}

/// `getsockopt(SO_PEERPIDFD)`.
fn peer_pidfd(stream: &UnixStream) -> std::io::Result<OwnedFd> {
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` and `len` are valid for writes of the sizes given.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_PEERPIDFD,
            (&raw mut fd).cast(),
            &raw mut len,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just created this descriptor for us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `pidfd_open(pid, 0)`.
fn pidfd_open(pid: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: plain system call with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fd = libc::c_int::try_from(fd).map_err(std::io::Error::other)?;
    // SAFETY: the kernel just created this descriptor for us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn pair() -> (UnixStream, UnixStream) {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (
            UnixStream::from_std(a).unwrap(),
            UnixStream::from_std(b).unwrap(),
        )
    }

    #[tokio::test]
    async fn this_process_is_no_descendant_of_its_child() {
        let (a, _b) = pair().await;
        let me = std::process::id() as i32;
        let peer = PeerProcess::of(&a, a.peer_cred().unwrap().pid()).unwrap();
        assert_eq!(peer.pid, me);
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let identify = |pid: u32| agentd_core::process::identify(pid as i32).unwrap();
        assert!(peer.check(identify(child.id())).is_ok());
        let parent = identify(std::os::unix::process::parent_id());
        assert!(
            matches!(peer.check(parent), Err(Refusal::Descendant)),
            "this test process descends from its parent"
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_process_that_exited_is_refused() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let peer = PeerProcess {
            pidfd: pidfd_open(pid).unwrap(),
            pid,
        };
        assert!(peer.alive().is_ok());
        child.kill().unwrap();
        child.wait().unwrap();
        let me = agentd_core::process::identify(std::process::id() as i32).unwrap();
        assert!(matches!(peer.check(me), Err(Refusal::Unknown(_))));
        assert!(peer.alive().unwrap_err().contains("exited"));
    }
}
