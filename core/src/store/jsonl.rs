//! Append-only JSON Lines files: appends that never leave a torn line behind, and reads that
//! skip the lines they cannot parse.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Bytes kept in memory while the disk refuses writes. Past this, new lines are dropped and
/// counted: a session whose disk fails stops its work, so little arrives after the first
/// failure, and memory must stay bounded whatever happens.
const PENDING_CAP: usize = 64 * 1024 * 1024;
/// A pending buffer that grew past this is freed once written, not kept for the next batch.
const SHRINK_ABOVE: usize = 1024 * 1024;

/// Opens `path` for appending, creating it private to the user, and never through a symlink
/// (a link planted in the state directory must not redirect a session's writes).
pub(super) fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
}

/// Appends lines to one file. Lines that could not be written stay pending and go first on
/// the next write, so a full disk delays lines but never drops or reorders them (up to
/// [`PENDING_CAP`]).
#[derive(Debug)]
pub(super) struct Appender {
    path: PathBuf,
    pending: Vec<u8>,
    /// `(position in pending, key)` of the lines whose file offset the caller wants back.
    marks: Vec<(usize, u64)>,
    /// Lines dropped because the pending buffer was full.
    dropped: u64,
}

impl Appender {
    /// Appends to `path` (created on the first write).
    pub(super) fn new(path: PathBuf) -> Self {
        Self {
            path,
            pending: Vec::new(),
            marks: Vec::new(),
            dropped: 0,
        }
    }

    /// Buffers `line` (without its newline); with `key`, [`Appender::flush`] reports the offset
    /// it was written at.
    pub(super) fn push(&mut self, line: &[u8], key: Option<u64>) {
        if self.pending.len() + line.len() > PENDING_CAP {
            self.dropped += 1;
            return;
        }
        if let Some(key) = key {
            self.marks.push((self.pending.len(), key));
        }
        self.pending.extend_from_slice(line);
        self.pending.push(b'\n');
    }

    /// Writes what is pending; with `sync`, the data reaches the disk before this returns.
    /// Returns the `(key, file offset)` of every marked line written. A failed write is cut
    /// back to the file's previous length, so the file only ever holds whole lines.
    ///
    /// The file is opened per write: an idle session holds no descriptor, and the file that
    /// is written is the one at the path now.
    pub(super) fn flush(&mut self, sync: bool) -> io::Result<Vec<(u64, u64)>> {
        if self.pending.is_empty() && !sync {
            return Ok(Vec::new());
        }
        let mut file = open_append(&self.path)?;
        let mut written = Vec::new();
        if !self.pending.is_empty() {
            let start = file.metadata()?.len();
            if let Err(e) = file.write_all(&self.pending) {
                let _ = file.set_len(start);
                return Err(e);
            }
            // A big batch must not pin its buffer for the session's life.
            if self.pending.capacity() > SHRINK_ABOVE {
                self.pending = Vec::new();
            } else {
                self.pending.clear();
            }
            written = self
                .marks
                .drain(..)
                .map(|(pos, key)| (key, start + pos as u64))
                .collect();
        }
        if sync {
            file.sync_data()?;
        }
        Ok(written)
    }

    /// Lines dropped since the last call because the disk kept failing.
    pub(super) fn take_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.dropped)
    }
}

/// Cuts a torn last line (one without its newline, left by a crash mid-write) so that the next
/// append starts a fresh line. Returns whether anything was cut.
pub(super) fn repair_tail(path: &Path) -> io::Result<bool> {
    let mut file = match OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(false);
    }
    let mut keep = len;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let start = keep.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(keep - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            keep = start + i as u64 + 1;
            break;
        }
        keep = start;
        if start == 0 {
            break;
        }
    }
    if keep == len {
        return Ok(false);
    }
    file.set_len(keep)?;
    Ok(true)
}

/// Calls `each(line number, offset, line)` for every non-blank line of `path` from byte
/// `from` on, oldest first, until it returns `false`. Line numbers count from `from`. A
/// missing file has no lines.
pub(super) fn scan(
    path: &Path,
    from: u64,
    mut each: impl FnMut(usize, u64, &[u8]) -> bool,
) -> io::Result<()> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    file.seek(SeekFrom::Start(from))?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::new();
    let mut number = 0;
    let mut offset = from;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        number += 1;
        let at = offset;
        offset += n as u64;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if !each(number, at, text) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(path: &Path) -> Vec<String> {
        let mut out = Vec::new();
        scan(path, 0, |_, _, l| {
            out.push(String::from_utf8_lossy(l).into_owned());
            true
        })
        .unwrap();
        out
    }

    #[test]
    fn a_torn_tail_is_repaired_and_offsets_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        std::fs::write(&path, "{\"n\":1}\n{\"n\":2").unwrap();
        assert!(repair_tail(&path).unwrap());
        assert!(!repair_tail(&path).unwrap());
        let mut appender = Appender::new(path.clone());
        appender.push(b"{\"n\":3}", Some(3));
        appender.push(b"{\"n\":4}", None);
        appender.push(b"{\"n\":5}", Some(5));
        assert_eq!(appender.flush(true).unwrap(), [(3, 8), (5, 24)]);
        assert_eq!(
            lines(&path),
            ["{\"n\":1}", "{\"n\":3}", "{\"n\":4}", "{\"n\":5}"]
        );
        let mut from_offset = Vec::new();
        scan(&path, 24, |_, at, l| {
            from_offset.push((at, l.to_vec()));
            true
        })
        .unwrap();
        assert_eq!(from_offset, [(24, b"{\"n\":5}".to_vec())]);
    }

    #[test]
    fn a_failed_write_stays_pending_and_leaves_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        let mut appender = Appender::new(path.clone());
        appender.push(b"{\"n\":1}", None);
        appender.flush(false).unwrap();
        std::fs::rename(&path, dir.path().join("saved")).unwrap();
        // Not through a symlink: the write fails, as on a full disk.
        std::os::unix::fs::symlink("/dev/full", &path).unwrap();
        appender.push(b"{\"n\":2}", Some(2));
        assert!(appender.flush(false).is_err());
        assert!(!appender.pending.is_empty());
        std::fs::remove_file(&path).unwrap();
        std::fs::rename(dir.path().join("saved"), &path).unwrap();
        appender.push(b"{\"n\":3}", None);
        assert_eq!(appender.flush(false).unwrap(), [(2, 8)]);
        assert_eq!(lines(&path), ["{\"n\":1}", "{\"n\":2}", "{\"n\":3}"]);
    }

    #[test]
    fn pending_lines_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut appender = Appender::new(dir.path().join("x.jsonl"));
        let line = vec![b'x'; 1024 * 1024];
        for _ in 0..70 {
            appender.push(&line, None);
        }
        assert_eq!(appender.take_dropped(), 7);
        assert!(appender.pending.len() <= PENDING_CAP);
    }

    #[test]
    fn files_are_private_and_symlinks_are_not_followed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        let mut appender = Appender::new(path.clone());
        appender.push(b"{}", None);
        appender.flush(false).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let target = dir.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut appender = Appender::new(link);
        appender.push(b"{}", None);
        assert!(appender.flush(false).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }
}
