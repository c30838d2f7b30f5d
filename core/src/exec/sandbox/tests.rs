//! The sandbox's path rules against real directories: which writes and removals a policy
//! allows, through `..`, absolute paths and symlinks, and where each allowed one lands.

use super::*;
use crate::exec::{EnvPolicy, LocalExecutionEnvironment};
use std::os::unix::fs::symlink;

/// A workspace `ws` (the session's cwd) beside an `outside` directory, both real paths,
/// with a policy of `mode` whose extra root is `extra`.
struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    extra: PathBuf,
    env: LocalExecutionEnvironment,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (ws, outside, extra) = (root.join("ws"), root.join("outside"), root.join("extra"));
        for d in [&ws, &outside, &extra] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(outside.join("secret"), "x").unwrap();
        symlink(&outside, ws.join("to-outside")).unwrap();
        symlink(outside.join("secret"), ws.join("secret-link")).unwrap();
        symlink(outside.join("missing"), ws.join("dangling")).unwrap();
        symlink(ws.join("sub"), ws.join("to-sub")).unwrap();
        std::fs::create_dir(ws.join("sub")).unwrap();
        let env = LocalExecutionEnvironment::new(ws.clone(), EnvPolicy::InheritNone);
        Self {
            _dir: dir,
            ws,
            outside,
            extra,
            env,
        }
    }

    fn policy(&self, mode: SandboxMode) -> SandboxPolicy {
        let mut config = crate::config::default_session_config("anthropic", "m");
        config.sandbox = mode;
        config.sandbox_writable_roots = vec![self.extra.clone(), self.ws.join("no-such-root")];
        SandboxPolicy::new(&config, &self.env).unwrap().unwrap()
    }

    /// Where a write to `path` (relative paths against the workspace) lands, or the error.
    fn write(&self, policy: &SandboxPolicy, path: &str) -> Result<PathBuf, String> {
        policy
            .check_write(&self.env.resolve(Path::new(path)))
            .map(|b| b.real)
            .map_err(|e| e.to_string())
    }
}

#[test]
fn off_has_no_policy_and_workspace_write_has_its_roots() {
    let f = Fixture::new();
    let mut config = crate::config::default_session_config("anthropic", "m");
    config.sandbox = SandboxMode::Off;
    assert_eq!(SandboxPolicy::new(&config, &f.env).unwrap(), None);

    let temp = std::fs::canonicalize(f.env.temp_dir().unwrap()).unwrap();
    let ws = f.policy(SandboxMode::WorkspaceWrite);
    assert_eq!(
        ws.writable_roots(),
        [temp.clone(), f.ws.clone(), f.extra.clone()]
    );
    assert_eq!(ws.temp_dir(), Some(temp.as_path()));
    assert!(!ws.network());
    assert_eq!(f.policy(SandboxMode::ReadOnly).writable_roots(), [temp]);
}

#[test]
fn workspace_write_allows_writes_beneath_its_roots_only() {
    let f = Fixture::new();
    let p = f.policy(SandboxMode::WorkspaceWrite);
    let ok = |path: &str, lands: PathBuf| assert_eq!(f.write(&p, path), Ok(lands), "{path}");
    ok("a.txt", f.ws.join("a.txt"));
    ok("new/dir/./b.txt", f.ws.join("new/dir/b.txt"));
    ok("sub/../c.txt", f.ws.join("c.txt"));
    ok("to-sub/d.txt", f.ws.join("sub/d.txt"));
    ok(
        &f.extra.join("e.txt").display().to_string(),
        f.extra.join("e.txt"),
    );
    ok(
        &f.env.temp_dir().unwrap().join("t").display().to_string(),
        std::fs::canonicalize(f.env.temp_dir().unwrap())
            .unwrap()
            .join("t"),
    );

    let refused = |path: &str, says: &str| {
        let e = f.write(&p, path).unwrap_err();
        assert!(e.contains(says), "{path}: {e}");
    };
    let outside = "is outside the writable roots (sandbox workspace_write: writes only under";
    refused("../outside/x", outside);
    refused("../x", outside);
    refused(&f.outside.join("x").display().to_string(), outside);
    refused("/etc/agentd-sandbox-test", outside);
    refused("to-outside/x", "(it resolves to");
    refused("secret-link", "(it resolves to");
    refused(
        "dangling",
        "is a symbolic link to a path that does not exist",
    );
    refused("nope/../../outside/x", "`..` after");
    refused("nope/../x", "`..` after");
}

#[test]
fn read_only_allows_only_the_temp_dir() {
    let f = Fixture::new();
    let p = f.policy(SandboxMode::ReadOnly);
    for path in ["a.txt", "sub/b", "../outside/x"] {
        let e = f.write(&p, path).unwrap_err();
        assert!(e.contains("sandbox read_only: writes only under"), "{e}");
    }
    assert!(
        f.write(&p, &f.extra.join("x").display().to_string())
            .is_err()
    );
    let temp = f.env.temp_dir().unwrap();
    assert!(f.write(&p, &temp.join("x").display().to_string()).is_ok());
}

#[test]
fn a_removal_acts_on_the_link_not_its_target() {
    let f = Fixture::new();
    let p = f.policy(SandboxMode::WorkspaceWrite);
    let remove = |path: &str| p.check_remove(&f.env.resolve(Path::new(path)));
    assert_eq!(
        remove("secret-link").unwrap(),
        Beneath {
            root: f.ws.clone(),
            real: f.ws.join("secret-link")
        }
    );
    assert_eq!(remove("to-sub/x").unwrap().relative(), Path::new("sub/x"));
    assert!(remove("to-outside/secret").is_err());
    assert!(remove("../outside/secret").is_err());
    assert!(remove("sub/..").is_err(), "names no file");
}

/// An environment whose file operations never finish (a read stuck in the kernel).
struct Stuck(PathBuf);

#[async_trait]
impl ExecutionEnvironment for Stuck {
    fn working_directory(&self) -> &Path {
        &self.0
    }
    fn platform(&self) -> &str {
        "linux"
    }
    fn os_version(&self) -> String {
        String::new()
    }
    async fn read_file(&self, _: &Path) -> Result<Vec<u8>, Error> {
        std::future::pending().await
    }
    async fn write_file(&self, _: &Path, _: &[u8]) -> Result<(), Error> {
        std::future::pending().await
    }
    async fn remove_file(&self, _: &Path) -> Result<(), Error> {
        std::future::pending().await
    }
    async fn file_exists(&self, _: &Path) -> bool {
        std::future::pending().await
    }
    async fn list_directory(&self, _: &Path, _: usize) -> Result<Vec<DirEntry>, Error> {
        std::future::pending().await
    }
    async fn exec_command(
        &self,
        _: ExecRequest<'_>,
        _: OutputSink<'_>,
        _: &CancellationToken,
    ) -> Result<ExecResult, Error> {
        std::future::pending().await
    }
    async fn terminate_all(&self) {}
    async fn grep(&self, _: GrepOptions) -> Result<String, Error> {
        std::future::pending().await
    }
    async fn glob(&self, _: &str, _: &Path) -> Result<Vec<String>, Error> {
        std::future::pending().await
    }
}

/// A file operation that never returns ends when the call is aborted: the abort reaches it
/// through the call's token, whatever the environment is stuck on.
#[tokio::test]
async fn every_file_operation_ends_when_the_call_is_cancelled() {
    let stuck = Stuck(PathBuf::from("/"));
    let cancel = CancellationToken::new();
    let env = Sandboxed::new(&stuck, None, &cancel);
    let path = Path::new("f");
    let ops = async {
        let options = GrepOptions {
            pattern: "x".into(),
            path: PathBuf::from("."),
            glob: None,
            case_insensitive: false,
            max_results: 1,
            mode: crate::exec::GrepMode::Content,
        };
        (
            env.read_file(path).await.map(drop),
            env.write_file(path, b"x").await,
            env.remove_file(path).await,
            env.file_exists(path).await,
            env.list_directory(path, 1).await.map(drop),
            env.grep(options).await.map(drop),
            env.glob("*", path).await.map(drop),
        )
    };
    // The first operation is under way when the token fires; the others start after it.
    let ((read, write, remove, exists, list, grep, glob), ()) = tokio::join!(ops, async {
        tokio::task::yield_now().await;
        cancel.cancel();
    });
    for result in [read, write, remove, list, grep, glob] {
        assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
    }
    assert!(!exists);
}
