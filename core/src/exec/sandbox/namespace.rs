//! The namespaces sandboxed commands run in: the first layer of the sandbox, with Landlock as
//! the second.
//!
//! For each policy an environment uses, bubblewrap builds a user namespace, a mount
//! namespace (the whole filesystem read-only, the policy's writable roots bound read-write,
//! empty tmpfs over agentd's own directories and the user's runtime directory) and, with the
//! network off, an empty network namespace (no route out, and no abstract Unix socket of the
//! host). A small holder process keeps them alive; every command then joins them with
//! `setns` between `fork` and `exec`, which costs microseconds, where building them costs a
//! few milliseconds (creating a user namespace alone costs about 3 ms here). The holder reads
//! a pipe the daemon never writes, so it ends when the namespaces are dropped or the daemon
//! dies, whatever kills it.

use super::SandboxPolicy;
use crate::exec::Error;
use crate::exec::process::{self, SpawnedChild};
use nix::errno::Errno;
use std::ffi::CString;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How long bubblewrap may take to build the namespaces.
const BUILD_TIMEOUT: Duration = Duration::from_secs(10);

/// Namespaces built for one policy, kept alive by their holder.
pub(crate) struct Namespaces {
    policy: SandboxPolicy,
    hidden: Vec<PathBuf>,
    user: OwnedFd,
    mount: OwnedFd,
    net: Option<OwnedFd>,
    /// Paths to hide that did not exist (or were symlinks) when these were built, so are
    /// not hidden.
    absent: Vec<PathBuf>,
    /// bubblewrap, whose child holds the namespaces; killed with them.
    holder: tokio::process::Child,
    _spawned: SpawnedChild,
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        // Closing its stdin would end it too; a kill does not wait for the scheduler. tokio
        // reaps it.
        let _ = self.holder.start_kill();
    }
}

impl Namespaces {
    /// Builds namespaces for `policy` hiding `hidden` (directories or files that exist), with
    /// bubblewrap from `PATH`. Fails when bubblewrap is missing or the kernel refuses it
    /// (unprivileged user namespaces turned off), saying which.
    pub(crate) async fn build(policy: &SandboxPolicy, hidden: &[PathBuf]) -> Result<Self, String> {
        let (args, absent) = bwrap_args(policy, hidden);
        let mut command = tokio::process::Command::new("bwrap");
        command
            .args(args)
            .arg("--")
            .args(["/bin/sh", "-c", "echo $$ && exec cat"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let (mut holder, spawned) = process::spawn(&mut command).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "bubblewrap (bwrap) is not installed".to_owned(),
            _ => format!("cannot run bubblewrap: {e}"),
        })?;
        // Declared after `holder`, so dropped before it: bubblewrap, not yet reaped, still
        // names the group.
        let mut abandoned = KillGroup(Some(spawned.0));
        let stdout = holder.stdout.take().ok_or("bubblewrap has no stdout")?;
        let stderr = holder.stderr.take().ok_or("bubblewrap has no stderr")?;
        let stdout = stdout.into_owned_fd().map_err(|e| e.to_string())?;
        let stderr = stderr.into_owned_fd().map_err(|e| e.to_string())?;
        // The holder prints its pid once bubblewrap has built everything and run it.
        let read = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(std::fs::File::from(stdout)).read_line(&mut line)?;
            let mut why = String::new();
            if line.is_empty() {
                std::io::Read::read_to_string(&mut std::fs::File::from(stderr), &mut why)?;
            }
            Ok::<_, std::io::Error>((line, why))
        });
        let (line, why) = match tokio::time::timeout(BUILD_TIMEOUT, read).await {
            Ok(Ok(Ok(read))) => read,
            Ok(Ok(Err(e))) => return Err(format!("cannot read from bubblewrap: {e}")),
            Ok(Err(e)) => return Err(format!("cannot read from bubblewrap: {e}")),
            Err(_) => return Err(format!("bubblewrap took more than {BUILD_TIMEOUT:?}")),
        };
        let pid: u32 = line.trim().parse().map_err(|_| {
            format!(
                "bubblewrap could not build the sandbox: {}",
                why.trim().chars().take(500).collect::<String>()
            )
        })?;
        let open = |kind: &str| {
            std::fs::File::open(format!("/proc/{pid}/ns/{kind}"))
                .map(OwnedFd::from)
                .map_err(|e| format!("cannot open the sandbox's {kind} namespace: {e}"))
        };
        let (user, mount) = (open("user")?, open("mnt")?);
        let net = if policy.network() {
            None
        } else {
            Some(open("net")?)
        };
        abandoned.0 = None;
        Ok(Self {
            policy: policy.clone(),
            hidden: hidden.to_vec(),
            user,
            mount,
            net,
            absent,
            holder,
            _spawned: spawned,
        })
    }

    /// Whether a path these should hide has appeared since they were built: commands
    /// would see it, so they must be built again.
    pub(crate) fn missed_a_hidden_path(&self) -> bool {
        self.absent
            .iter()
            .any(|p| std::fs::symlink_metadata(p).is_ok_and(|m| !m.file_type().is_symlink()))
    }

    /// The policy these namespaces were built for.
    pub(crate) fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// What they hide.
    pub(crate) fn hidden(&self) -> &[PathBuf] {
        &self.hidden
    }

    /// What a forked child runs before `exec` to join the namespaces in `cwd`: see [`Join`].
    pub(crate) fn join(&self, cwd: &Path) -> Result<Join, Error> {
        Ok(Join {
            user: self.user.as_raw_fd(),
            mount: self.mount.as_raw_fd(),
            net: self.net.as_ref().map(AsRawFd::as_raw_fd),
            cwd: CString::new(cwd.as_os_str().as_bytes())
                .map_err(|_| Error::NotAllowed(format!("{} holds a NUL byte", cwd.display())))?,
        })
    }
}

/// Kills bubblewrap's whole process group (its own, `process_group(0)`) unless disarmed. A
/// build that fails or is abandoned (its future dropped: a session's `prepare_sandbox` task
/// when the runtime shuts down, a cancelled command) kills bubblewrap on drop; its child,
/// waiting for it before its exec, would then wait forever, holding the stdout the build
/// reads on the blocking pool, a read that never ends and that a runtime's shutdown waits for.
struct KillGroup(Option<i32>);

impl Drop for KillGroup {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            process::signal_group(pgid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// The arguments that make bubblewrap build the namespaces of `policy`. Order matters: later
/// mounts cover earlier ones, so the hidden directories come last and win over a writable
/// root that holds them. Also returns the hidden paths that do not exist (nothing to mount
/// over).
fn bwrap_args(
    policy: &SandboxPolicy,
    hidden: &[PathBuf],
) -> (Vec<std::ffi::OsString>, Vec<PathBuf>) {
    let mut args: Vec<std::ffi::OsString> = vec!["--unshare-user".into()];
    let mut absent = Vec::new();
    if !policy.network() {
        args.push("--unshare-net".into());
    }
    let mut push = |flag: &str, paths: &[&Path]| {
        args.push(flag.into());
        args.extend(paths.iter().map(|p| p.as_os_str().to_owned()));
    };
    push("--ro-bind", &[Path::new("/"), Path::new("/")]);
    // The host's devices, so Landlock's rules on /dev/null and kin name the same inodes.
    push("--dev-bind", &[Path::new("/dev"), Path::new("/dev")]);
    for root in policy.writable_roots() {
        push("--bind", &[root, root]);
    }
    // A hidden path's parents inside a writable root are bound onto themselves: a mount
    // point cannot be renamed or removed, so no command can move a hidden directory (say
    // agentd's state, in a session whose workspace is the home directory) away from the
    // mount that hides it, out from under the daemon and out of the next namespaces' sight.
    let pinned: std::collections::BTreeSet<&Path> = hidden
        .iter()
        .flat_map(|path| path.ancestors().skip(1))
        .filter(|a| {
            policy
                .writable_roots()
                .iter()
                .any(|root| a.starts_with(root) && a != root)
        })
        .collect();
    for dir in pinned {
        push("--bind", &[dir, dir]);
    }
    for path in hidden {
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.is_dir() => {
                push("--tmpfs", &[path]);
                push("--remount-ro", &[path]);
            }
            // Hidden paths are real paths: a link there was made since, by someone who
            // could write there, and bubblewrap cannot mount over one (it follows it). Not
            // agentd's, so nothing to hide; mounting would make every build fail.
            Ok(meta) if meta.file_type().is_symlink() => absent.push(path.clone()),
            Ok(_) => push("--ro-bind", &[Path::new("/dev/null"), path]),
            Err(_) => absent.push(path.clone()),
        }
    }
    (args, absent)
}

/// The namespaces a forked child joins, as raw descriptors the [`Namespaces`] keep open.
pub(crate) struct Join {
    user: i32,
    mount: i32,
    net: Option<i32>,
    cwd: CString,
}

impl Join {
    /// Joins the namespaces, goes back to the working directory (joining a mount namespace
    /// moves to its root), and drops every capability the user namespace gave, so nothing
    /// the command runs can undo a mount. Makes only system calls, as code between `fork`
    /// and `exec` must.
    pub(crate) fn enter(&self) -> Result<(), Errno> {
        let check = |r: libc::c_int| Errno::result(r).map(drop);
        // SAFETY: plain system calls on descriptors the parent keeps open until the spawn
        // returns, and on a NUL-terminated path it owns.
        unsafe {
            check(libc::setns(self.user, libc::CLONE_NEWUSER))?;
            check(libc::setns(self.mount, libc::CLONE_NEWNS))?;
            if let Some(net) = self.net {
                check(libc::setns(net, libc::CLONE_NEWNET))?;
            }
            check(libc::chdir(self.cwd.as_ptr()))?;
            drop_capabilities()
        }
    }
}

/// Empties the bounding, ambient, effective, permitted and inheritable capability sets.
///
/// # Safety
/// System calls only; for a forked child before `exec`.
unsafe fn drop_capabilities() -> Result<(), Errno> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    // SAFETY: prctl and capset with valid arguments; EINVAL past the last capability is
    // expected and ignored.
    unsafe {
        for cap in 0..64 {
            match Errno::result(libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0)) {
                Ok(_) | Err(Errno::EINVAL) => {}
                Err(e) => return Err(e),
            }
        }
        Errno::result(libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ))?;
        let header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let data = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        Errno::result(libc::syscall(libc::SYS_capset, &header, data.as_ptr()))?;
    }
    Ok(())
}
