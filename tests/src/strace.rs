//! Running the daemon under `strace` to count its disk syncs, or to slow them down like a busy
//! disk: the wrapper's arguments (for [`crate::TestDaemonBuilder::wrap`]) and the counts read
//! back from its output, per session.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The syscalls traced: data syncs and renames, as a regex so that a name the architecture
/// lacks (`rename` on aarch64) is not an error.
const TRACED: &str = "trace=/^(f(data)?sync|rename(at2?)?)$";

/// `strace` from `PATH`, if installed.
pub fn find() -> Option<PathBuf> {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|dir| Path::new(dir).join("strace"))
        .find(|p| p.is_file())
}

/// Arguments that trace every process of the daemon (`-f`) into `output`, each descriptor
/// named by its path (`-y`) so syncs can be attributed to files; with `delay`, every
/// `fdatasync` and `fsync` waits that long before it runs. Only traced calls stop the
/// process (`--seccomp-bpf`), so the rest runs at full speed.
pub fn args(output: &Path, delay: Option<Duration>) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["-f", "-qq", "-y", "--seccomp-bpf", "-e", TRACED]
        .map(OsString::from)
        .into();
    if let Some(delay) = delay {
        for call in ["fdatasync", "fsync"] {
            args.push("-e".into());
            args.push(format!("inject={call}:delay_enter={}", delay.as_micros()).into());
        }
    }
    args.push("-o".into());
    args.push(output.into());
    args
}

/// `(syscall, arguments and result)` of every call in `strace -f` output. The `<... resumed>`
/// half of an interrupted call is skipped (each call counts once, at its start), and so are
/// signal and exit lines.
pub fn calls(trace: &str) -> impl Iterator<Item = (&str, &str)> {
    trace.lines().filter_map(|line| {
        // `-f` starts each line with the pid.
        let call = line.split_once(' ').map_or(line, |(_, rest)| rest).trim();
        let (name, rest) = call.split_once('(')?;
        (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .then_some((name, rest))
    })
}

/// The traced calls on one session's directory and files.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SessionSyncs {
    /// `fdatasync` and `fsync` of the journal, `log.jsonl`.
    pub journal_syncs: usize,
    /// Renames onto `session.json` (each a replaced record).
    pub record_writes: usize,
    /// Every `fdatasync` on the session's files.
    pub fdatasync: usize,
    /// Every `fsync` on the session's directory and files.
    pub fsync: usize,
    /// Every rename in the session's directory.
    pub renames: usize,
}

impl SessionSyncs {
    /// Counts the calls of `trace` (the output of [`args`]) on session `id`'s files.
    pub fn count(trace: &str, id: &str) -> Self {
        let dir = format!("/{id}");
        let journal = format!("/{id}/log.jsonl>");
        let record = format!("/{id}/session.json\"");
        let mut counts = Self::default();
        for (name, args) in calls(trace).filter(|(_, args)| args.contains(&dir)) {
            match name {
                "fdatasync" | "fsync" => {
                    if name == "fdatasync" {
                        counts.fdatasync += 1;
                    } else {
                        counts.fsync += 1;
                    }
                    if args.contains(&journal) {
                        counts.journal_syncs += 1;
                    }
                }
                _ if name.starts_with("rename") => {
                    counts.renames += 1;
                    if args.contains(&record) {
                        counts.record_writes += 1;
                    }
                }
                _ => {}
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_on_a_session_are_counted_once_each() {
        let trace = "\
101 fdatasync(7</s/sessions/abc/log.jsonl>) = 0
102 fdatasync(7</s/sessions/abc/log.jsonl> <unfinished ...>
101 fdatasync(8</s/sessions/abc/.session.json.tmp>) = 0
101 rename(\"/s/sessions/abc/.session.json.tmp\", \"/s/sessions/abc/session.json\") = 0
102 <... fdatasync resumed>) = 0
101 fsync(9</s/sessions/abc>) = 0
101 fdatasync(7</s/sessions/xyz/log.jsonl>) = 0
103 +++ exited with 0 +++
";
        assert_eq!(
            SessionSyncs::count(trace, "abc"),
            SessionSyncs {
                journal_syncs: 2,
                record_writes: 1,
                fdatasync: 3,
                fsync: 1,
                renames: 1,
            }
        );
    }
}
