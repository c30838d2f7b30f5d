//! Reading a skill's or command's file with a bounded cost: a regular file only (a FIFO or a
//! device is refused without blocking on it), at most a cap (a 1 GB `SKILL.md` is refused
//! from its size, a growing one cut), and never one of agentd's own files (a project's
//! `SKILL.md` may be a symlink to the credentials file: its text would go to the model),
//! except the commands directory inside agentd's config directory, which holds the user's
//! prompt templates.

use super::cache::FileKey;
use crate::exec::ProtectedPaths;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::io::Read;
use std::os::fd::AsFd;
use std::path::Path;

/// Files agentd reads for skills and commands: anything but its own files, except what lies
/// in `commands` (the real path of the config directory's `commands`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Readable {
    pub(super) protected: ProtectedPaths,
    pub(super) commands: Option<std::path::PathBuf>,
}

/// The text of `path`, a regular file of at most `cap` bytes (invalid UTF-8 replaced).
pub(super) fn read_capped(path: &Path, cap: u64, readable: &Readable) -> Result<String, String> {
    read_keyed(path, cap, readable).map(|(text, _)| text)
}

/// [`read_capped`], with the identity and times of the file read.
pub(super) fn read_keyed(
    path: &Path,
    cap: u64,
    readable: &Readable,
) -> Result<(String, FileKey), String> {
    // Read-only, and without blocking on a FIFO or taking a terminal.
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
    let file = std::fs::File::from(
        nix::fcntl::open(path, flags, Mode::empty())
            .map_err(|e| format!("{}: {}", path.display(), std::io::Error::from(e)))?,
    );
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let in_commands = readable.commands.as_ref().is_some_and(|dir| {
        crate::exec::fd_path(file.as_fd()).is_ok_and(|real| real.starts_with(dir))
    });
    if !in_commands {
        readable
            .protected
            .check(file.as_fd(), path)
            .map_err(|e| e.to_string())?;
    }
    let too_big = || format!("{} is larger than {} KiB", path.display(), cap / 1024);
    if meta.len() > cap {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > cap {
        return Err(too_big());
    }
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    Ok((text, FileKey::of(&meta)))
}
