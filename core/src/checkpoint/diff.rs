//! What changed between two checkpoints, as a unified diff in git's style.

use super::objects::{Entry, Files, Objects};
use gix_object::Kind;
use gix_object::tree::EntryKind;
use std::time::Duration;

/// The whole diff stops growing past this; the rest is named, not shown.
const MAX_DIFF_BYTES: usize = 4 << 20;
/// A line diff of two large files gives up on the minimal diff after this.
const DIFF_DEADLINE: Duration = Duration::from_secs(2);

fn mode(entry: &Entry) -> &'static str {
    match entry.kind {
        EntryKind::BlobExecutable => "100755",
        EntryKind::Link => "120000",
        _ => "100644",
    }
}

/// The diff from `from` to `to` over `paths` (sorted).
pub(super) fn unified<'a>(
    objects: &Objects,
    from: &Files,
    to: &Files,
    paths: impl IntoIterator<Item = &'a Vec<u8>>,
) -> Result<String, String> {
    let mut out = String::new();
    let mut left = Vec::new();
    for path in paths {
        let (a, b) = (from.get(path), to.get(path));
        if a == b {
            continue;
        }
        let name = String::from_utf8_lossy(path);
        if out.len() > MAX_DIFF_BYTES {
            left.push(name.into_owned());
            continue;
        }
        out.push_str(&format!("diff --git a/{name} b/{name}\n"));
        match (a, b) {
            (None, Some(b)) => out.push_str(&format!("new file mode {}\n", mode(b))),
            (Some(a), None) => out.push_str(&format!("deleted file mode {}\n", mode(a))),
            (Some(a), Some(b)) if mode(a) != mode(b) => {
                out.push_str(&format!("old mode {}\nnew mode {}\n", mode(a), mode(b)));
            }
            _ => {}
        }
        if a.map(|e| e.id) == b.map(|e| e.id) {
            continue;
        }
        let read = |e: Option<&Entry>| match e {
            Some(e) => objects.read(&e.id, Kind::Blob),
            None => Ok(Vec::new()),
        };
        let (old, new) = (read(a)?, read(b)?);
        let old_name = a.map_or("/dev/null".to_owned(), |_| format!("a/{name}"));
        let new_name = b.map_or("/dev/null".to_owned(), |_| format!("b/{name}"));
        match (text(&old), text(&new)) {
            (Some(old), Some(new)) => {
                let diff = similar::TextDiff::configure()
                    .timeout(DIFF_DEADLINE)
                    .diff_lines(old, new);
                out.push_str(
                    &diff
                        .unified_diff()
                        .context_radius(3)
                        .header(&old_name, &new_name)
                        .to_string(),
                );
            }
            _ => out.push_str(&format!("Binary files {old_name} and {new_name} differ\n")),
        }
    }
    if !left.is_empty() {
        out.push_str(&format!(
            "[the diff is cut at {} MiB; also changed: {}]\n",
            MAX_DIFF_BYTES >> 20,
            left.join(", ")
        ));
    }
    Ok(out)
}

/// `data` as text, or `None` when it is binary (a NUL in its first 8,000 bytes, as git
/// decides, or not UTF-8).
fn text(data: &[u8]) -> Option<&str> {
    if data[..data.len().min(8000)].contains(&0) {
        return None;
    }
    std::str::from_utf8(data).ok()
}
