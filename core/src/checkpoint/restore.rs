//! Putting recorded files back. Every file is written beneath the workspace the way the file
//! tools write under a sandbox (`exec::open_dirs`: each directory opened relative to its
//! parent, no symlink followed), so a symlink the model left in a directory's place can only
//! make the restore fail, never carry it outside the workspace. The recorded file is written
//! under a temporary name beside it and renamed over what is there (a file or a symlink, never
//! a directory), so an editor reading the file meanwhile, or a daemon killed halfway, finds the
//! old version or the new one, never none or half of one.

use super::objects::{Entry, Objects};
use gix_object::Kind;
use gix_object::tree::EntryKind;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag};
use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Makes `rel` (beneath `root`) what `target` says: that file, or none.
pub(super) fn put(
    root: &Path,
    objects: &Objects,
    rel: &[u8],
    target: Option<&Entry>,
) -> Result<(), String> {
    let rel = Path::new(OsStr::from_bytes(rel));
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Err(format!("{}: not a file path", rel.display()));
    };
    let name = Path::new(name);
    let dir = match crate::exec::open_dirs(rel, root, parent, target.is_some()) {
        Ok(dir) => dir,
        // Nothing to remove where the directory is gone.
        Err(_) if target.is_none() && !root.join(parent).exists() => return Ok(()),
        Err(e) => return Err(e.to_string()),
    };
    let shown = |e: Errno| format!("{}: {e}", rel.display());
    let exists = match nix::sys::stat::fstatat(dir.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR => {
            return Err(format!("{} is a directory now", rel.display()));
        }
        Ok(_) => true,
        Err(Errno::ENOENT) => false,
        Err(e) => return Err(shown(e)),
    };
    let Some(entry) = target else {
        return match exists {
            true => {
                nix::unistd::unlinkat(dir.as_fd(), name, nix::unistd::UnlinkatFlags::NoRemoveDir)
                    .map_err(shown)
            }
            false => Ok(()),
        };
    };
    let data = objects.read(&entry.id, Kind::Blob)?;
    let temp = temp_name();
    let made = match entry.kind {
        EntryKind::Link => {
            nix::unistd::symlinkat(OsStr::from_bytes(&data), dir.as_fd(), temp.as_path())
                .map_err(std::io::Error::from)
        }
        kind => write_new(&dir, &temp, &data, kind == EntryKind::BlobExecutable),
    };
    let placed = made.and_then(|()| {
        nix::fcntl::renameat(dir.as_fd(), temp.as_path(), dir.as_fd(), name)
            .map_err(std::io::Error::from)
    });
    placed.map_err(|e| {
        let _ = nix::unistd::unlinkat(
            dir.as_fd(),
            temp.as_path(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
        format!("{}: {e}", rel.display())
    })
}

/// A name for a file being restored, beside where it goes: short (whatever the length of the
/// real name) and not one a second restore could be writing at the same time.
fn temp_name() -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(".agentd-restore-{}-{n}", std::process::id()).into()
}

/// Creates `name` in `dir` (it must not exist) with `data`; the mode is git's (0666 or 0777
/// less the umask).
fn write_new(dir: &OwnedFd, name: &Path, data: &[u8], executable: bool) -> std::io::Result<()> {
    let mode = if executable { 0o777 } else { 0o666 };
    let fd = nix::fcntl::openat(
        dir.as_fd(),
        name,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(mode),
    )?;
    std::fs::File::from(fd).write_all(data)
}

/// Removes the directories above `rel` that are empty now, deepest first, up to the
/// workspace (an undo of the files the agent made in directories it made leaves none behind;
/// git does not record directories, so neither do checkpoints). A directory that is not
/// empty stops it: the kernel refuses to remove it.
pub(super) fn remove_empty_dirs(root: &Path, rel: &[u8]) {
    let mut dir = Path::new(OsStr::from_bytes(rel)).parent();
    while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
        let (Some(parent), Some(name)) = (d.parent(), d.file_name()) else {
            break;
        };
        let Ok(fd) = crate::exec::open_dirs(d, root, parent, false) else {
            break;
        };
        if nix::unistd::unlinkat(
            fd.as_fd(),
            Path::new(name),
            nix::unistd::UnlinkatFlags::RemoveDir,
        )
        .is_err()
        {
            break;
        }
        dir = Some(parent);
    }
}
