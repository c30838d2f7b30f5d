//! Commands started by [`Command::spawn`], run to their end by the shared loop.

use super::*;
use crate::exec::child::{self, Control, Finished};
use futures::future::BoxFuture;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Stops a command by killing its process.
struct Kill(i32);

impl Control for Kill {
    type Stopped = ();
    fn stop(&mut self) -> BoxFuture<'static, ()> {
        // SAFETY: a signal to the test's own child.
        unsafe { libc::kill(self.0, libc::SIGKILL) };
        Box::pin(async {})
    }
}

fn command(program: &str, args: &[&str]) -> Command {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    Command::new(Path::new(program), &args, Path::new("/")).unwrap()
}

async fn run((pid, mut child): Spawned) -> Finished<()> {
    let (mut kill, cancel) = (Kill(pid), CancellationToken::new());
    let finished = child::run(
        &mut child,
        &mut kill,
        Duration::from_secs(60),
        &cancel,
        &|_, _| {},
    );
    tokio::time::timeout(Duration::from_secs(60), finished)
        .await
        .expect("the command ends")
        .unwrap()
}

#[tokio::test]
async fn a_command_gets_its_arguments_variables_directory_and_pipes() {
    let dir = tempfile::tempdir().unwrap();
    let mut spawn = Command::new(
        Path::new("/bin/sh"),
        &[
            "-c".as_ref(),
            "echo \"$0 $1 $GREETING\"; pwd; env | sort; echo oops >&2; exit 3".as_ref(),
            "zero".as_ref(),
            "one".as_ref(),
        ],
        dir.path(),
    )
    .unwrap();
    spawn
        .env("GREETING", "first")
        .env("GREETING", "hello")
        .env("OTHER", "x=y");
    let finished = run(spawn.spawn().unwrap()).await;
    let real = std::fs::canonicalize(dir.path()).unwrap();
    let lines: Vec<&str> = finished.stdout.lines().collect();
    assert_eq!(lines[0], "zero one hello");
    assert_eq!(lines[1], real.to_str().unwrap());
    // Only what was set, and the last setting of a key; sh adds PWD (and may add SHLVL).
    let vars: Vec<&str> = lines[2..]
        .iter()
        .copied()
        .filter(|v| !v.starts_with("PWD=") && !v.starts_with("SHLVL=") && !v.starts_with("_="))
        .collect();
    assert_eq!(vars, ["GREETING=hello", "OTHER=x=y"]);
    assert_eq!(finished.stderr, "oops\n");
    assert_eq!(finished.status.and_then(|s| s.code()), Some(3));
}

#[tokio::test]
async fn a_signal_that_ended_the_command_is_its_status() {
    let finished = run(command("/bin/sh", &["-c", "kill -TERM $$"])
        .spawn()
        .unwrap())
    .await;
    let status = finished.status.unwrap();
    assert_eq!(
        (status.code(), status.signal()),
        (None, Some(libc::SIGTERM))
    );
}

#[tokio::test]
async fn the_command_starts_with_no_signal_blocked_or_ignored_and_only_stdio_open() {
    // The daemon ignores SIGPIPE (Rust does) and may block signals in the spawning thread.
    // SAFETY: changes of this test thread's own mask and of a disposition Rust already set.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR2);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let _open = std::fs::File::open("/dev/null").unwrap();
    let finished = run(
        command("/bin/grep", &["-E", "^Sig(Blk|Ign)", "/proc/self/status"])
            .spawn()
            .unwrap(),
    )
    .await;
    let mask = |name: &str| {
        let line = finished
            .stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap();
        u64::from_str_radix(line.rsplit('\t').next().unwrap(), 16).unwrap()
    };
    assert_eq!(mask("SigBlk:"), 0);
    // The standard signals; glibc keeps 32 and 33 to itself (whatever started the test may
    // have ignored them, and no program can change that).
    assert_eq!(mask("SigIgn:") & 0x7fff_ffff, 0);
    // Descriptors this process has without close-on-exec (inherited from whatever started
    // the test) pass on: closing them is a hook's job. Nothing the spawn opened does.
    let inherited: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|fd| {
            let fd: i32 = fd.parse().unwrap();
            // SAFETY: a query of a descriptor's flags.
            fd > 2 && unsafe { libc::fcntl(fd, libc::F_GETFD) } == 0
        })
        .collect();
    let finished = run(command("/bin/ls", &["/proc/self/fd"]).spawn().unwrap()).await;
    let mut own: Vec<&str> = finished
        .stdout
        .lines()
        .filter(|fd| !inherited.iter().any(|i| i == fd))
        .collect();
    own.sort();
    // The last is the directory ls reads.
    assert_eq!(own.len(), 4, "{own:?}");
    assert_eq!(own[..3], ["0", "1", "2"]);
}

#[tokio::test]
async fn a_failing_hook_or_a_missing_program_fails_the_spawn_with_its_errno() {
    let mut spawn = command("/bin/true", &[]);
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let after = ran.clone();
    // SAFETY: an errno, and an atomic store: no allocation, lock or panic.
    unsafe {
        spawn.hook(Box::new(|| Err(Errno::EACCES)));
        spawn.hook(Box::new(move || {
            after.store(true, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        }));
    }
    let err = spawn.spawn().err().expect("the hook fails it");
    assert_eq!(err.raw_os_error(), Some(libc::EACCES));
    assert!(
        !ran.load(std::sync::atomic::Ordering::Relaxed),
        "no hook runs after one failed"
    );
    let err = command("/nonexistent/program", &[]).spawn().err().unwrap();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    // Neither left a child behind: a clone that never exec'd has the name of the thread
    // that cloned it, this one. (Not `waitpid(-1)`: that would reap, and count, the
    // children of the tests running alongside, failing them or this one.)
    let name = |pid: &str| std::fs::read_to_string(format!("/proc/{pid}/comm")).ok();
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    let left: Vec<String> = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| c.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .filter(|pid| name(pid) == name("thread-self"))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "children left behind");
}

#[tokio::test]
async fn an_argument_with_a_nul_byte_is_refused_before_anything_starts() {
    let err = Command::new(Path::new("/bin/echo"), &["a\0b".as_ref()], Path::new("/"))
        .err()
        .unwrap();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
}

#[tokio::test]
async fn a_command_dropped_before_it_exits_is_reaped_when_it_does() {
    let (pid, child) = command("/bin/sleep", &["0.2"]).spawn().unwrap();
    drop(child);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        assert!(std::time::Instant::now() < deadline, "{pid} never reaped");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Dropped where no runtime can watch it (a host's own thread): still reaped. A child without
/// an exit signal is reaped by no one else (`waitpid` without `__WALL` skips it).
#[tokio::test]
async fn a_command_dropped_outside_the_runtime_is_reaped_when_it_exits() {
    let (pid, child) = command("/bin/sleep", &["0.2"]).spawn().unwrap();
    std::thread::spawn(move || drop(child)).join().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        assert!(std::time::Instant::now() < deadline, "{pid} never reaped");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn commands_spawned_at_once_from_many_threads_each_get_their_own_output() {
    let runs = (0..64).map(|i| {
        tokio::spawn(async move {
            let n = i.to_string();
            let finished = run(command("/bin/echo", &[&n]).spawn().unwrap()).await;
            assert_eq!(finished.stdout, format!("{n}\n"));
            assert_eq!(finished.status.and_then(|s| s.code()), Some(0));
        })
    });
    for run in runs.collect::<Vec<_>>() {
        run.await.unwrap();
    }
}
