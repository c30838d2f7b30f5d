//! The file tools of a container on a remote engine, which shares no file system with the
//! daemon: each path is checked beneath the workspace through the engine's archive stat
//! (`archive.rs`), then the work is done by short scripts of agentd's own run in the
//! container as its user, like a command (`capture`): a file read with `cat`, written from
//! the exec's stdin, removed with `rm`, a tree walked and fetched for `list_dir`, `glob` and
//! `grep` (`tree.rs`). What runs as the container's user can reach nothing its shell could
//! not; the engine's own archive endpoints, which read and write as root and follow a
//! symbolic link swapped in on the way, are used for nothing but stat.

use super::{ContainerExecutionEnvironment, Live, archive, remote, tree, worker};
use crate::exec::child;
use crate::exec::{
    DirEntry, Error, ExecutionEnvironment, GrepOptions, MAX_READ_BYTES, local, search,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

/// `$1` a regular file (not a link): its content.
const READ: &str = r#"[ -f "$1" ] && [ ! -L "$1" ] || exit 3
exec cat -- "$1""#;
/// `$1` a file (not a link), `$2` its new length, `$3` the directories to make first ('':
/// none); the content comes on stdin, `$2` bytes of it (no end of stream is needed). It
/// goes to a file of its own first, so the file is as it was unless all of it came; then
/// into the file in place (its mode and owner kept).
const WRITE: &str = r#"[ -z "$3" ] || mkdir -p -- "$3" || exit 5
[ ! -L "$1" ] || exit 6
[ ! -e "$1" ] || [ -f "$1" ] || exit 7
t="$1.agentd-$$"
trap 'rm -f -- "$t"' EXIT
trap 'exit 143' TERM
set -C
head -c "$2" >"$t" || exit 5
[ "$(wc -c <"$t")" -eq "$2" ] || { echo "only part of the content came" >&2; exit 5; }
cat -- "$t" >|"$1" || exit 5"#;
/// `$1` a file or link: removed.
const REMOVE: &str = r#"rm -f -- "$1""#;

impl ContainerExecutionEnvironment {
    /// The file tools of a remote engine's container, when the container is one.
    pub(super) async fn remote_files(&self) -> Result<Option<archive::Files<'_>>, Error> {
        if self.address.is_local() {
            return Ok(None);
        }
        let live = self.live().await?;
        Ok(Some(archive::Files {
            engine: &live.engine,
            container: &live.id,
            root: &self.root,
        }))
    }

    /// `path` beneath the workspace, by its components alone (a remote engine's workspace
    /// is not on this machine): its path relative to the workspace.
    pub(super) fn lexical(&self, path: &Path) -> Result<(PathBuf, PathBuf), Error> {
        let shown = self.resolve(path);
        let mut rel = PathBuf::new();
        let outside = || {
            Error::NotAllowed(format!(
                "{}: in a container session the file tools reach the workspace ({}) only; use \
                 the shell for the container's other files",
                shown.display(),
                self.root.display()
            ))
        };
        let below = shown.strip_prefix(&self.root).map_err(|_| outside())?;
        for part in below.components() {
            match part {
                std::path::Component::Normal(p) => rel.push(p),
                std::path::Component::CurDir => {}
                std::path::Component::ParentDir if rel.pop() => {}
                _ => return Err(outside()),
            }
        }
        Ok((shown.clone(), rel))
    }

    /// A remote engine's directory `path`, checked as a file's path is: its path there.
    async fn remote_dir(&self, files: &archive::Files<'_>, path: &Path) -> Result<PathBuf, Error> {
        let (shown, rel) = self.lexical(path)?;
        match files.resolve(&shown, &rel).await? {
            (dir, archive::Kind::Directory) => Ok(dir),
            (_, archive::Kind::Missing) => Err(Error::NotFound(shown)),
            _ => Err(Error::NotAllowed(format!(
                "{} is not a directory",
                shown.display()
            ))),
        }
    }

    /// Runs a walk (`tree::list_command` or `tree::tree_command`) of `base` in a remote
    /// engine's container.
    async fn walk(&self, command: &str, base: &Path) -> Result<tree::Walk, Error> {
        let live = self.live().await?;
        let out = self
            .capture(
                live,
                "listing the container's files",
                command,
                tree::MAX_WALK,
                None,
            )
            .await
            .map_err(|e| Error::NotAllowed(format!("{e}; narrow the path (or use the shell)")))?;
        match out.code {
            Some(3) => return Err(Error::NotFound(base.to_owned())),
            Some(125..) | None => return Err(failed("listing the container's files", &out)),
            _ => {}
        }
        tree::parse_walk(&out.stdout, base).map_err(|e| match out.stderr.is_empty() {
            true => e,
            false => Error::Unavailable(format!("{e}: {}", out.stderr)),
        })
    }

    /// The files of `batch` (beneath `dir`) from a remote engine's container.
    async fn fetch(
        &self,
        command: &str,
        dir: &Path,
        batch: &[&tree::Record],
    ) -> Result<Vec<(PathBuf, Vec<u8>)>, Error> {
        let live = self.live().await?;
        let out = self
            .capture(
                live,
                "fetching files",
                command,
                tree::fetch_cap(batch),
                None,
            )
            .await?;
        // tar goes on past a file that went since the walk (and exits 1 or 2).
        match out.code {
            // The directory went.
            Some(3) => return Err(Error::NotFound(dir.to_owned())),
            Some(4 | 125..) | None => {
                return Err(failed("fetching files from the container", &out));
            }
            _ => {}
        }
        let (dir, wanted) = (
            dir.to_owned(),
            batch.iter().map(|r| r.path.clone()).collect::<Vec<_>>(),
        );
        local::blocking(move |_| Ok(tree::unpack(&out.stdout, &dir, &wanted))).await
    }

    /// The ignore rules a walk's search follows.
    async fn ignores(&self, walk: &tree::Walk) -> Result<tree::Ignores, Error> {
        let root = Path::new("/");
        let mut files = Vec::new();
        for (command, batch) in tree::fetch_commands(&tree::ignore_files(walk), root) {
            files.extend(self.fetch(&command, root, &batch).await?);
        }
        let repositories = walk.repositories.clone();
        local::blocking(move |_| Ok(tree::Ignores::new(repositories, &files))).await
    }

    /// Removes file `path` (a symbolic link itself) in a remote engine's container.
    pub(super) async fn remove_remote(
        &self,
        files: &archive::Files<'_>,
        path: &Path,
    ) -> Result<(), Error> {
        let (shown, rel) = self.lexical(path)?;
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return Err(Error::NotAllowed(format!(
                "{} is the workspace; only files are removed",
                shown.display()
            )));
        };
        let (dir, kind) = files.resolve(&shown, parent).await?;
        if kind != archive::Kind::Directory {
            return Err(Error::NotFound(shown));
        }
        let target = dir.join(name);
        match files.kind(&target).await? {
            archive::Kind::Missing => return Err(Error::NotFound(shown)),
            archive::Kind::Directory => {
                return Err(Error::NotAllowed(format!(
                    "{} is a directory; only files are removed",
                    shown.display()
                )));
            }
            _ => {}
        }
        let live = self.live().await?;
        let command = tree::command(REMOVE, &[target.as_os_str()]);
        let out = self
            .capture(live, "removing a file", &command, 4096, None)
            .await?;
        match out.code {
            Some(0) => Ok(()),
            _ => Err(Error::NotAllowed(format!(
                "cannot remove {}: {}",
                shown.display(),
                out.stderr
            ))),
        }
    }

    /// Execs command `n`'s `script` in a remote engine's container, its worker following it.
    pub(super) async fn start_remote(
        &self,
        live: &Live,
        n: u64,
        script: &str,
        stdin: Option<Vec<u8>>,
    ) -> Result<
        (
            worker::ContainerProcess,
            tokio::io::DuplexStream,
            tokio::io::DuplexStream,
            worker::Stopper,
        ),
        Error,
    > {
        let spawn = |why: String| {
            Error::Spawn(std::io::Error::other(format!(
                "cannot start the command in the session's container: {why}"
            )))
        };
        let (fifo, pending) = live.worker.follow(n).await.map_err(spawn)?;
        let (stdout, stderr) = remote::start(&live.engine, &live.id, &fifo, n, script, stdin)
            .await
            .map_err(spawn)?;
        let (_group, process, control) = pending.started().await.map_err(spawn)?;
        Ok((process, stdout, stderr, control))
    }

    /// Runs `command`, one of the file tools' own (`what`), in a remote engine's container,
    /// as its user (what it reads, the shell could) and returns what it printed: at most
    /// `cap` bytes of stdout, or an error once it passes them or [`tree::TIMEOUT`], and then
    /// what it started is stopped.
    async fn capture(
        &self,
        live: &Live,
        what: &str,
        command: &str,
        cap: usize,
        stdin: Option<Vec<u8>>,
    ) -> Result<Captured, Error> {
        use tokio::io::AsyncReadExt;
        let n = self.commands.fetch_add(1, Ordering::Relaxed);
        let marker = format!("{}{n}", self.marker);
        let (mut process, mut stdout, mut stderr, mut control) = self
            .start_remote(live, n, &self.script(&self.cwd, command, &marker), stdin)
            .await?;
        let read = async {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let (mut out_done, mut err_done) = (false, false);
            let (mut out_buf, mut err_buf) = (vec![0; 64 * 1024], vec![0; 8 * 1024]);
            // Both streams at once: a full stderr would stall stdout behind it.
            while !(out_done && err_done) {
                tokio::select! {
                    read = stdout.read(&mut out_buf), if !out_done => match read {
                        Ok(0) | Err(_) => out_done = true,
                        Ok(n) if out.len() + n > cap => return Err(()),
                        Ok(n) => out.extend_from_slice(&out_buf[..n]),
                    },
                    read = stderr.read(&mut err_buf), if !err_done => match read {
                        Ok(0) | Err(_) => err_done = true,
                        Ok(n) => {
                            let room = (64 * 1024usize).saturating_sub(err.len()).min(n);
                            err.extend_from_slice(&err_buf[..room]);
                        }
                    },
                }
            }
            let status = child::Process::wait(&mut process).await.ok();
            Ok((out, err, status))
        };
        // Past the cap or the time, the group is stopped as `control` goes.
        let (stdout, stderr, status) = match tokio::time::timeout(tree::TIMEOUT, read).await {
            Ok(Ok(read)) => read,
            Ok(Err(())) => {
                return Err(Error::NotAllowed(format!(
                    "{what} printed more than {} MiB",
                    cap / (1024 * 1024)
                )));
            }
            Err(_) => {
                return Err(Error::NotAllowed(format!(
                    "{what} was not done within {} s",
                    tree::TIMEOUT.as_secs()
                )));
            }
        };
        control.settle(!process.lost);
        Ok(Captured {
            stdout,
            stderr: String::from_utf8_lossy(&stderr).trim().to_owned(),
            code: status.and_then(|s| s.code()),
        })
    }

    /// `read_file` on a remote engine.
    pub(super) async fn read_remote(
        &self,
        files: &archive::Files<'_>,
        path: &Path,
    ) -> Result<Vec<u8>, Error> {
        let (shown, rel) = self.lexical(path)?;
        let (path, kind) = files.resolve(&shown, &rel).await?;
        archive::readable(&shown, kind)?;
        let live = self.live().await?;
        let command = tree::command(READ, &[path.as_os_str()]);
        let cap = usize::try_from(MAX_READ_BYTES).unwrap_or(usize::MAX);
        let out = self
            .capture(live, "reading the file", &command, cap, None)
            .await?;
        match out.code {
            Some(0) => Ok(out.stdout),
            Some(3) => Err(archive::not_regular(&shown)),
            _ => Err(failed("reading the file", &out)),
        }
    }

    /// `write_file` on a remote engine: the directories on the way made, an existing
    /// file written in place (its mode and owner kept).
    pub(super) async fn write_remote(
        &self,
        files: &archive::Files<'_>,
        path: &Path,
        content: &[u8],
    ) -> Result<(), Error> {
        let (shown, rel) = self.lexical(path)?;
        let (dir, rest, kind) = files.resolve_for_write(&shown, &rel).await?;
        archive::writable(&shown, kind)?;
        let make = match rest.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => dir.join(parent),
            _ => PathBuf::new(),
        };
        let target = dir.join(&rest);
        let length = content.len().to_string();
        let command = tree::command(
            WRITE,
            &[target.as_os_str(), length.as_ref(), make.as_os_str()],
        );
        let live = self.live().await?;
        let out = self
            .capture(
                live,
                "writing the file",
                &command,
                4096,
                Some(content.to_vec()),
            )
            .await
            .map_err(|e| Error::NotAllowed(format!("{e}; {} is as it was", shown.display())))?;
        match out.code {
            Some(0) => Ok(()),
            Some(6) => Err(archive::link(&shown, &target)),
            Some(7) => Err(archive::not_regular(&shown)),
            _ => Err(Error::NotAllowed(format!(
                "cannot write {}: {}",
                shown.display(),
                out.stderr
            ))),
        }
    }

    /// `list_dir` on a remote engine.
    pub(super) async fn list_remote(
        &self,
        files: &archive::Files<'_>,
        path: &Path,
        depth: usize,
    ) -> Result<Vec<DirEntry>, Error> {
        let base = self.remote_dir(files, path).await?;
        let walk = self
            .walk(&tree::list_command(&base, depth.max(1)), &base)
            .await?;
        Ok(tree::listing(walk, &base))
    }

    /// `glob` on a remote engine.
    pub(super) async fn glob_remote(
        &self,
        files: &archive::Files<'_>,
        pattern: &str,
        base: &Path,
    ) -> Result<Vec<String>, Error> {
        let matcher = search::glob_matcher(pattern)?;
        let shown = self.resolve(base);
        let base = self.remote_dir(files, base).await?;
        let walk = self.walk(&tree::tree_command(&base), &base).await?;
        let ignores = self.ignores(&walk).await?;
        let visited = tree::visited(&walk, &base, &ignores, None);
        Ok(tree::glob(&visited, &base, &shown, &self.cwd, &matcher))
    }

    /// The grep tool in a remote engine's container: the files a local search would visit,
    /// fetched in batches and searched here, until `max_results` or the grep's budget.
    pub(super) async fn grep_remote(
        &self,
        files: &archive::Files<'_>,
        options: GrepOptions,
    ) -> Result<String, Error> {
        let (shown, rel) = self.lexical(&options.path)?;
        let (base, kind) = files.resolve(&shown, &rel).await?;
        let glob = search::overrides(&base, options.glob.as_deref())?;
        let mut grep = tree::Grep::new(&options, base.clone(), shown.clone(), self.cwd.clone())?;
        let single;
        let walk;
        let (dir, visited) = match kind {
            archive::Kind::Regular { size, .. } => {
                single = tree::Record {
                    path: base.clone(),
                    kind: tree::Type::File,
                    size,
                    mtime: 0,
                };
                (base.parent().unwrap_or(&base).to_owned(), vec![&single])
            }
            archive::Kind::Directory => {
                walk = self.walk(&tree::tree_command(&base), &base).await?;
                let ignores = self.ignores(&walk).await?;
                (
                    base.clone(),
                    tree::visited(&walk, &base, &ignores, Some(&glob)),
                )
            }
            archive::Kind::Missing => return Err(Error::NotFound(shown)),
            _ => {
                return Err(Error::NotAllowed(format!(
                    "{} is neither a file nor a directory",
                    shown.display()
                )));
            }
        };
        for (command, batch) in tree::fetch_commands(&visited, &dir) {
            if grep.done() || !grep.budget(batch.iter().map(|r| r.size).sum()) {
                break;
            }
            let fetched = self.fetch(&command, &dir, &batch).await?;
            grep = local::blocking(move |_| {
                grep.search(&fetched);
                Ok(grep)
            })
            .await?;
        }
        Ok(grep.report())
    }
}

/// The error of one of the file tools' own commands that failed.
fn failed(what: &str, out: &Captured) -> Error {
    let how = match out.code {
        Some(code) => format!("exit code {code}"),
        None => "no exit status".to_owned(),
    };
    Error::Unavailable(format!("{what} failed ({how}): {}", out.stderr))
}

/// What one of the file tools' own commands printed, and how it exited.
struct Captured {
    stdout: Vec<u8>,
    stderr: String,
    code: Option<i32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::process::{Command, Stdio};

    /// Runs WRITE with this machine's sh for `target`, told `length`, fed `content`.
    fn write(target: &Path, length: usize, content: &[u8]) -> (Option<i32>, String) {
        let command = tree::command(
            WRITE,
            &[target.as_os_str(), length.to_string().as_ref(), "".as_ref()],
        );
        let mut child = Command::new("sh")
            .args(["-c", &command])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The script may be done (refusing) before it reads: a broken pipe is its answer.
        let _ = child.stdin.take().unwrap().write_all(content);
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    #[test]
    fn a_write_cut_short_leaves_the_file_as_it_was_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "old\n").unwrap();
        let (code, stderr) = write(&file, 100, b"only part");
        assert_eq!(code, Some(5), "{stderr}");
        assert!(stderr.contains("only part of the content came"), "{stderr}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "old\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        assert_eq!(write(&file, 4, b"new\n").0, Some(0));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_write_to_a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert_eq!(write(&fifo, 1, b"x").0, Some(7));
    }
}
