//! The local file operations behind the file tools. All of them block: callers run them on
//! the blocking pool.
//!
//! Reads open only regular files: the open itself cannot block (`O_NONBLOCK`, so a FIFO with
//! no writer opens at once; `O_NOCTTY`), the opened file is `fstat`ed and refused unless it is
//! a regular file, checked against agentd's own files ([`ProtectedPaths`]), and read up to
//! [`MAX_READ_BYTES`].
//!
//! Writes and removals under a sandbox are opened *beneath their writable root* in one step:
//! the root is opened once (`RESOLVE_NO_SYMLINKS`: it is a real path), every directory below it
//! is opened (or made with `mkdirat`) relative to its parent's descriptor with `openat2`
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, and the file is created, truncated and written,
//! or `unlinkat`ed, through the last directory's descriptor. Nothing is looked up by name a
//! second time, so a symlink swapped in at any moment can only make the write fail, never
//! carry it out of the root. Without a sandbox the same steps run from the path's parent
//! directory (as before: any path, parents created), so agentd's own files stay refused.

use super::{DirEntry, Error, MAX_READ_BYTES, ProtectedPaths};
use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::{Mode, SFlag};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// What a file that is not a regular file is, for errors.
fn kind(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO (named pipe)"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

fn not_regular(shown: &Path, what: &str) -> Error {
    Error::NotAllowed(format!(
        "{} is {what}; file tools read and write regular files only",
        shown.display()
    ))
}

/// Opens `path` for reading when it is a regular file and not one of agentd's own; with
/// `follow` false a symlink as the last component is refused rather than followed.
pub(super) fn open_regular(
    path: &Path,
    follow: bool,
    protected: &ProtectedPaths,
) -> Result<(File, u64), Error> {
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(not_regular(path, kind(meta.file_type())));
    }
    protected.check(file.as_fd(), path)?;
    Ok((file, meta.len()))
}

/// Reads the whole of `path`, a regular file of at most [`MAX_READ_BYTES`].
pub(super) fn read_regular(path: &Path, protected: &ProtectedPaths) -> Result<Vec<u8>, Error> {
    let (file, len) = open_regular(path, true, protected)?;
    read_opened(file, len, path)
}

/// Reads `rel` beneath `root` (a real path), as [`read_regular`] reads, opened beneath the
/// root in one step as writes are: no symlink or `..` leads the read out of it.
pub(super) fn read_beneath(
    shown: &Path,
    root: &Path,
    rel: &Path,
    protected: &ProtectedPaths,
) -> Result<Vec<u8>, Error> {
    let (parent, name) = split(shown, rel)?;
    let dir = open_dirs(shown, root, parent, false)?;
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let fd = open_beneath(dir.as_fd(), name, flags, Mode::empty())
        .map_err(|e| beneath_error(shown, root, e))?;
    let file = File::from(fd);
    let meta = file.metadata().map_err(|e| Error::io(shown, e))?;
    if !meta.is_file() {
        return Err(not_regular(shown, kind(meta.file_type())));
    }
    protected.check(file.as_fd(), shown)?;
    read_opened(file, meta.len(), shown)
}

/// The whole of an opened regular file of `len` bytes, at most [`MAX_READ_BYTES`].
fn read_opened(file: File, len: u64, path: &Path) -> Result<Vec<u8>, Error> {
    let too_big = |len: u64| {
        Error::NotAllowed(format!(
            "{} is {len} bytes; file tools read files of at most {} MiB (use the shell, e.g. \
             head, tail or grep, for part of a bigger one)",
            path.display(),
            MAX_READ_BYTES / (1024 * 1024)
        ))
    };
    if len > MAX_READ_BYTES {
        return Err(too_big(len));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    // A file that grows while it is read is still cut at the cap.
    file.take(MAX_READ_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    if bytes.len() as u64 > MAX_READ_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// A small regular file's bytes for agentd's own use (a workspace's hooks file): `None` when
/// it does not exist, an error past `max` bytes, for anything but a regular file (without
/// blocking on a FIFO), or for one of agentd's own files.
pub(crate) fn read_small(
    path: &Path,
    max: u64,
    protected: &ProtectedPaths,
) -> Result<Option<Vec<u8>>, Error> {
    let file = match open_regular(path, true, protected) {
        Ok((file, _)) => file,
        Err(Error::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    if bytes.len() as u64 > max {
        return Err(Error::NotAllowed(format!(
            "{} is larger than {max} bytes",
            path.display()
        )));
    }
    Ok(Some(bytes))
}

/// `openat2` beneath `dir`, retried while the kernel reports a rename race it could not rule
/// out (`EAGAIN`).
fn open_beneath(
    dir: BorrowedFd<'_>,
    name: &Path,
    flags: OFlag,
    mode: Mode,
) -> nix::Result<OwnedFd> {
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC)
        .mode(mode)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let mut tries = 0;
    loop {
        match openat2(dir, name, how) {
            Err(Errno::EAGAIN) if tries < 8 => tries += 1,
            other => return other,
        }
    }
}

/// Why an `openat2` beneath `root` failed, for the model.
fn beneath_error(shown: &Path, root: &Path, e: Errno) -> Error {
    match e {
        Errno::EXDEV | Errno::ELOOP => Error::NotAllowed(format!(
            "refused by the sandbox: {} leads out of the writable root {} (a symbolic link or \
             `..` on the way, perhaps one that changed while it was written); nothing was \
             written there",
            shown.display(),
            root.display()
        )),
        Errno::ENOSYS => Error::NotAllowed(
            "this kernel has no openat2 (Linux 5.6 or newer), which file tools need to write \
             safely under a sandbox; nothing was written (set sandbox = \"off\" to write \
             without it)"
                .into(),
        ),
        e => Error::io(shown, std::io::Error::from(e)),
    }
}

/// The directory `parent` (relative to `root`, no `..`) opened beneath `root`, made first
/// where it is missing when `make` holds. Checkpoints restore files through it too.
pub(crate) fn open_dirs(
    shown: &Path,
    root: &Path,
    parent: &Path,
    make: bool,
) -> Result<OwnedFd, Error> {
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    let mut dir = openat2(AT_FDCWD, root, how).map_err(|e| beneath_error(shown, root, e))?;
    for part in parent.components() {
        let Component::Normal(name) = part else {
            return Err(Error::NotAllowed(format!(
                "{}: `{}` in a path beneath {}",
                shown.display(),
                part.as_os_str().to_string_lossy(),
                root.display()
            )));
        };
        let name = Path::new(name);
        let open = |dir: &OwnedFd| {
            open_beneath(
                dir.as_fd(),
                name,
                OFlag::O_PATH | OFlag::O_DIRECTORY,
                Mode::empty(),
            )
        };
        dir = match open(&dir) {
            Err(Errno::ENOENT) if make => {
                match nix::sys::stat::mkdirat(dir.as_fd(), name, Mode::from_bits_truncate(0o777)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(beneath_error(shown, root, e)),
                }
                open(&dir)
            }
            other => other,
        }
        .map_err(|e| beneath_error(shown, root, e))?;
    }
    Ok(dir)
}

/// The parent directory and the file name of `rel`, a path beneath a root.
fn split<'a>(shown: &Path, rel: &'a Path) -> Result<(&'a Path, &'a Path), Error> {
    match (rel.parent(), rel.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, Path::new(name))),
        _ => Err(Error::NotAllowed(format!(
            "{} is a directory, not a file",
            shown.display()
        ))),
    }
}

/// The flags every write opens its file with: never blocking on a FIFO, never taking a
/// terminal.
fn write_flags() -> OFlag {
    OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC
}

/// Why opening a file for writing failed, when it is what the file is: a directory, or a
/// FIFO with no reader (`ENXIO`).
fn write_open_kind(shown: &Path, e: Errno) -> Option<Error> {
    match e {
        Errno::ENXIO => Some(not_regular(shown, "a FIFO (named pipe)")),
        Errno::EISDIR => Some(not_regular(shown, "a directory")),
        _ => None,
    }
}

/// Writes `content` through `fd`, just opened for writing: only into a regular file that is
/// not agentd's (a hard link to its credentials), checked before anything is truncated.
fn write_opened(
    fd: OwnedFd,
    shown: &Path,
    content: &[u8],
    protected: &ProtectedPaths,
) -> Result<(), Error> {
    let mut file = File::from(fd);
    let meta = file.metadata().map_err(|e| Error::io(shown, e))?;
    if !meta.is_file() {
        return Err(not_regular(shown, kind(meta.file_type())));
    }
    protected.check(file.as_fd(), shown)?;
    file.set_len(0).map_err(|e| Error::io(shown, e))?;
    file.write_all(content).map_err(|e| Error::io(shown, e))
}

/// Writes `content` to `rel` beneath the writable root `root` (a real path), creating the
/// missing directories beneath it; `shown` is the path the tool was given.
pub(super) fn write_beneath(
    shown: &Path,
    root: &Path,
    rel: &Path,
    content: &[u8],
    protected: &ProtectedPaths,
) -> Result<(), Error> {
    let (parent, name) = split(shown, rel)?;
    let dir = open_dirs(shown, root, parent, true)?;
    protected.check(dir.as_fd(), shown)?;
    let fd = open_beneath(
        dir.as_fd(),
        name,
        write_flags() | OFlag::O_CREAT,
        Mode::from_bits_truncate(0o666),
    )
    .map_err(|e| write_open_kind(shown, e).unwrap_or_else(|| beneath_error(shown, root, e)))?;
    write_opened(fd, shown, content, protected)
}

/// Removes `rel` beneath the writable root `root` (a symlink itself, never its target).
pub(super) fn remove_beneath(
    shown: &Path,
    root: &Path,
    rel: &Path,
    protected: &ProtectedPaths,
) -> Result<(), Error> {
    let (parent, name) = split(shown, rel)?;
    let dir = open_dirs(shown, root, parent, false)?;
    protected.check(dir.as_fd(), shown)?;
    unlink_in(&dir, name, shown)
}

fn unlink_in(dir: &OwnedFd, name: &Path, shown: &Path) -> Result<(), Error> {
    let stat = nix::sys::stat::fstatat(dir.as_fd(), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
        .map_err(|e| Error::io(shown, e.into()))?;
    if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR {
        return Err(Error::NotAllowed(format!(
            "{} is a directory; only files are removed",
            shown.display()
        )));
    }
    nix::unistd::unlinkat(dir.as_fd(), name, nix::unistd::UnlinkatFlags::NoRemoveDir)
        .map_err(|e| Error::io(shown, e.into()))
}

/// The parent directory of `path` (absolute), opened by name (symlinks followed), and its
/// last component.
fn open_parent(path: &Path, make: bool) -> Result<(OwnedFd, &Path), Error> {
    let (parent, name) = split(path, path)?;
    if make {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    let dir = nix::fcntl::open(
        parent,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Error::io(parent, e.into()))?;
    Ok((dir, name))
}

/// Writes `content` to `path` (absolute) with no sandbox: any path, parents created, a last
/// symlink followed; agentd's own files are refused. A symlink to nothing is refused too:
/// creating its target would put a file where no check looked.
pub(super) fn write_unconfined(
    path: &Path,
    content: &[u8],
    protected: &ProtectedPaths,
) -> Result<(), Error> {
    let (dir, name) = open_parent(path, true)?;
    protected.check(dir.as_fd(), path)?;
    let open = |flags: OFlag| {
        nix::fcntl::openat(dir.as_fd(), name, flags, Mode::from_bits_truncate(0o666))
    };
    let fd = match open(write_flags()) {
        Err(Errno::ENOENT) => match open(write_flags() | OFlag::O_CREAT | OFlag::O_EXCL) {
            Err(Errno::EEXIST) => {
                return Err(Error::NotAllowed(format!(
                    "{} is a symbolic link to a path that does not exist; write to the path \
                     it names instead",
                    path.display()
                )));
            }
            other => other,
        },
        other => other,
    }
    .map_err(|e| write_open_kind(path, e).unwrap_or_else(|| Error::io(path, e.into())))?;
    write_opened(fd, path, content, protected)
}

/// Removes `path` (absolute; a symlink itself) with no sandbox; not in agentd's own files.
pub(super) fn remove_unconfined(path: &Path, protected: &ProtectedPaths) -> Result<(), Error> {
    let (dir, name) = open_parent(path, false)?;
    protected.check(dir.as_fd(), path)?;
    unlink_in(&dir, name, path)
}

/// The real path of `path` (a directory when `directory` holds), read from it once opened,
/// so what is checked is what was opened; refused when it is one of agentd's own.
pub(crate) fn opened_real_path(
    path: &Path,
    directory: bool,
    protected: &ProtectedPaths,
) -> Result<PathBuf, Error> {
    let mut flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
    if directory {
        flags |= OFlag::O_DIRECTORY;
    }
    let opened =
        nix::fcntl::open(path, flags, Mode::empty()).map_err(|e| Error::io(path, e.into()))?;
    protected.check(opened.as_fd(), path)?;
    super::fd_path(opened.as_fd()).map_err(|e| Error::io(path, e))
}

/// Lists `root` down to `depth` levels (1: its entries), names relative to it, sorted. The
/// root is followed if it is a symlink; below it, each directory is opened beneath its
/// parent's descriptor without following a symlink, so the listing stays in the tree it
/// names. agentd's own directories are never opened (a listing may show their name).
/// Stops when `stop` is set.
pub(super) fn list(
    root: &Path,
    depth: usize,
    protected: &ProtectedPaths,
    stop: &AtomicBool,
) -> Result<Vec<DirEntry>, Error> {
    let dir = nix::fcntl::open(root, dir_flags(), Mode::empty())
        .map_err(|e| Error::io(root, e.into()))?;
    protected.check(dir.as_fd(), root)?;
    let mut entries = Vec::new();
    list_below(
        dir,
        &Listing {
            root,
            depth,
            protected,
            stop,
        },
        Path::new(""),
        1,
        &mut entries,
    )?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// How a directory is opened for listing: never blocking, never a symlink below the root.
fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC
}

struct Listing<'a> {
    root: &'a Path,
    depth: usize,
    protected: &'a ProtectedPaths,
    stop: &'a AtomicBool,
}

/// Adds the entries of `dir` (`rel` below the root, at `level`) and, depth first, of its
/// subdirectories: at most one descriptor per level is open.
fn list_below(
    dir: OwnedFd,
    listing: &Listing<'_>,
    rel: &Path,
    level: usize,
    entries: &mut Vec<DirEntry>,
) -> Result<(), Error> {
    if listing.stop.load(Ordering::Relaxed) {
        return Err(Error::Cancelled);
    }
    let shown = listing.root.join(rel);
    let mut dir = nix::dir::Dir::from_fd(dir).map_err(|e| Error::io(&shown, e.into()))?;
    let mut names = Vec::new();
    for entry in dir.iter() {
        let entry = entry.map_err(|e| Error::io(&shown, e.into()))?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(std::ffi::OsStr::from_bytes(name).to_owned());
        }
    }
    let mut subdirs = Vec::new();
    for name in names {
        let stat = nix::sys::stat::fstatat(
            dir.as_fd(),
            name.as_os_str(),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .ok();
        let format = stat.map(|s| SFlag::from_bits_truncate(s.st_mode) & SFlag::S_IFMT);
        let is_dir = format == Some(SFlag::S_IFDIR);
        let path = rel.join(&name);
        entries.push(DirEntry {
            name: path.to_string_lossy().into_owned(),
            is_dir,
            size: stat
                .filter(|_| format == Some(SFlag::S_IFREG))
                .map(|s| s.st_size as u64),
        });
        if is_dir && level < listing.depth {
            subdirs.push((name, path));
        }
    }
    for (name, path) in subdirs {
        let shown = listing.root.join(&path);
        let sub = nix::fcntl::openat(
            dir.as_fd(),
            name.as_os_str(),
            dir_flags() | OFlag::O_NOFOLLOW,
            Mode::empty(),
        )
        .map_err(|e| Error::io(&shown, e.into()))?;
        if listing.protected.check(sub.as_fd(), &shown).is_ok() {
            list_below(sub, listing, &path, level + 1, entries)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
