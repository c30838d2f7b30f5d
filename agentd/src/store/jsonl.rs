//! Append-only JSON Lines files: appends that never leave a torn line behind, and reads that
//! skip the lines they cannot parse.

use serde::de::DeserializeOwned;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Appends lines to one file. Lines that could not be written stay pending and go first on
/// the next append, so a full disk delays lines but never drops or reorders them.
#[derive(Debug)]
pub(super) struct Appender {
    path: PathBuf,
    pending: Vec<u8>,
}

impl Appender {
    /// Appends to `path` (created on the first write).
    pub(super) fn new(path: PathBuf) -> Self {
        Self {
            path,
            pending: Vec::new(),
        }
    }

    /// Adds `line` (without its newline) and writes everything pending; with `sync`, the data
    /// reaches the disk before this returns.
    pub(super) fn append(&mut self, line: &[u8], sync: bool) -> io::Result<()> {
        self.pending.extend_from_slice(line);
        self.pending.push(b'\n');
        self.flush(sync)
    }

    /// Writes what is pending. A failed write is cut back to the file's previous length, so
    /// the file only ever holds whole lines.
    ///
    /// The file is opened per write: an idle session holds no descriptor, and the file that
    /// is written is the one at the path now.
    pub(super) fn flush(&mut self, sync: bool) -> io::Result<()> {
        if self.pending.is_empty() && !sync {
            return Ok(());
        }
        let mut file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.path)?;
        if !self.pending.is_empty() {
            let len = file.metadata()?.len();
            if let Err(e) = file.write_all(&self.pending) {
                let _ = file.set_len(len);
                return Err(e);
            }
            self.pending.clear();
        }
        if sync {
            file.sync_data()?;
        }
        Ok(())
    }

    /// Whether lines are waiting for a successful write.
    pub(super) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }
}

/// Cuts a torn last line (one without its newline, left by a crash mid-write) so that the next
/// append starts a fresh line. Returns whether anything was cut.
pub(super) fn repair_tail(path: &Path) -> io::Result<bool> {
    let mut file = match OpenOptions::new().read(true).write(true).open(path) {
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

/// Reads every line of `path` as a `T`, oldest first. Lines that do not parse are skipped and
/// reported through `skipped` (1-based line number, error). A missing file is empty.
pub(super) fn read<T: DeserializeOwned>(
    path: &Path,
    mut keep: impl FnMut(&T) -> bool,
    mut skipped: impl FnMut(usize, String),
) -> io::Result<Vec<T>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(out);
        }
        number += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<T>(text) {
            Ok(item) if keep(&item) => out.push(item),
            Ok(_) => {}
            Err(e) => skipped(number, e.to_string()),
        }
    }
}

/// The last line of `path` that parses as a `T`, reading only the file's tail when it can.
pub(super) fn last<T: DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    let mut tail = 64 * 1024u64;
    loop {
        let start = len.saturating_sub(tail);
        file.seek(SeekFrom::Start(start))?;
        let mut buf = Vec::with_capacity((len - start) as usize);
        file.read_to_end(&mut buf)?;
        // The first line of a partial read may be cut; it only counts when the read began at 0.
        let mut lines: Vec<&[u8]> = buf.split(|&b| b == b'\n').collect();
        if start > 0 {
            lines.remove(0);
        }
        if let Some(item) = lines
            .iter()
            .rev()
            .find_map(|l| serde_json::from_slice::<T>(l).ok())
        {
            return Ok(Some(item));
        }
        if start == 0 {
            return Ok(None);
        }
        tail *= 8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Line {
        n: u32,
    }

    #[test]
    fn torn_and_corrupt_lines_are_skipped_and_the_tail_repaired() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        std::fs::write(&path, "{\"n\":1}\nnot json\n{\"n\":3}\n{\"n\":4").unwrap();
        let mut bad = Vec::new();
        let lines: Vec<Line> = read(&path, |_| true, |n, _| bad.push(n)).unwrap();
        assert_eq!(lines, [Line { n: 1 }, Line { n: 3 }]);
        assert_eq!(bad, [2, 4]);
        assert_eq!(last::<Line>(&path).unwrap(), Some(Line { n: 3 }));

        assert!(repair_tail(&path).unwrap());
        assert!(!repair_tail(&path).unwrap());
        let mut appender = Appender::new(path.clone());
        appender.append(b"{\"n\":5}", true).unwrap();
        let lines: Vec<Line> = read(&path, |_| true, |_, _| {}).unwrap();
        assert_eq!(lines.last(), Some(&Line { n: 5 }));
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn a_failed_write_stays_pending_and_leaves_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        let mut appender = Appender::new(path.clone());
        appender.append(b"{\"n\":1}", false).unwrap();
        std::fs::rename(&path, dir.path().join("saved")).unwrap();
        std::os::unix::fs::symlink("/dev/full", &path).unwrap();
        assert!(appender.append(b"{\"n\":2}", false).is_err());
        assert!(appender.has_pending());
        std::fs::remove_file(&path).unwrap();
        std::fs::rename(dir.path().join("saved"), &path).unwrap();
        appender.append(b"{\"n\":3}", false).unwrap();
        let lines: Vec<Line> = read(&path, |_| true, |_, _| {}).unwrap();
        assert_eq!(lines, [Line { n: 1 }, Line { n: 2 }, Line { n: 3 }]);
    }
}
