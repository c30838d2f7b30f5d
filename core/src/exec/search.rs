//! grep and glob over a directory tree with ripgrep's own crates (`ignore` for the parallel,
//! .gitignore-aware walk, `grep-regex` and `grep-searcher` for matching): never a shell-out.
//!
//! The walk starts at the real path of the root, which must not be one of agentd's own
//! directories, never follows a symlink below it, and never enters agentd's own directories;
//! grep reads a file only once it is opened as a regular file that is not agentd's (the
//! check runs on the opened file, so a swap after the walk saw it changes nothing), and
//! never holds more of one line than a file tool may read.

use super::{Error, MAX_READ_BYTES, ProtectedPaths, files};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, sinks::UTF8};
use ignore::{WalkBuilder, WalkState, overrides::OverrideBuilder};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::SystemTime;

/// What a grep reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GrepMode {
    /// Matching lines with path and line number.
    #[default]
    Content,
    /// Paths of matching files.
    FilesWithMatches,
    /// Matching line counts per file.
    Count,
}

/// A grep request.
#[derive(Debug, Clone)]
pub struct GrepOptions {
    /// Regular expression (Rust `regex` syntax, as ripgrep).
    pub pattern: String,
    /// File or directory to search (absolute).
    pub path: PathBuf,
    /// Only files whose path matches this glob (e.g. `*.rs`, `src/**/*.ts`).
    pub glob: Option<String>,
    /// Ignore case.
    pub case_insensitive: bool,
    /// Most results (lines, files or counts) to return.
    pub max_results: usize,
    /// What to report.
    pub mode: GrepMode,
}

/// The `glob` of a grep as ripgrep matches it, relative to `root`.
pub(super) fn overrides(
    root: &Path,
    glob: Option<&str>,
) -> Result<ignore::overrides::Override, Error> {
    let mut builder = OverrideBuilder::new(root);
    if let Some(g) = glob {
        builder
            .add(g)
            .map_err(|e| Error::NotAllowed(format!("invalid glob {g:?}: {e}")))?;
    }
    builder
        .build()
        .map_err(|e| Error::NotAllowed(format!("invalid glob: {e}")))
}

/// `path` as shown: relative to `root` when below it.
pub(super) fn display(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// A walk from `root` that never enters agentd's own directories.
fn walk(root: &Path, protected: &ProtectedPaths) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    let protected = protected.clone();
    builder.filter_entry(move |entry| protected.containing(entry.path()).is_none());
    builder
}

/// The matcher of `options`' pattern.
pub(super) fn matcher(options: &GrepOptions) -> Result<RegexMatcher, Error> {
    RegexMatcherBuilder::new()
        .case_insensitive(options.case_insensitive)
        .build(&options.pattern)
        .map_err(|e| Error::NotAllowed(format!("invalid regex {:?}: {e}", options.pattern)))
}

/// A searcher as every grep uses it: a file with a NUL byte is binary and left, and no line
/// is held past what a file tool may read.
pub(super) fn searcher() -> Searcher {
    SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        .heap_limit(Some(MAX_READ_BYTES as usize))
        .build()
}

/// What one grep searches: an opened file, or a file's bytes fetched from elsewhere.
pub(super) enum Source<'a> {
    File(&'a std::fs::File),
    Bytes(&'a [u8]),
}

/// The matches of one file shown as `shown`, as [`report`] takes them; `taken` counts the
/// results of the whole search, which stops adding lines at `limit`.
pub(super) fn search_one(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    source: Source<'_>,
    mode: GrepMode,
    shown: &str,
    taken: &AtomicUsize,
    limit: usize,
) -> Vec<(String, u64, String)> {
    let mut found: Vec<(String, u64, String)> = Vec::new();
    let mut count = 0u64;
    let sink = UTF8(|line_number, line| {
        count += 1;
        match mode {
            GrepMode::Content => {
                found.push((
                    shown.to_owned(),
                    line_number,
                    line.trim_end_matches(['\n', '\r']).to_owned(),
                ));
                Ok(taken.fetch_add(1, Ordering::Relaxed) + 1 < limit)
            }
            GrepMode::FilesWithMatches => Ok(false),
            GrepMode::Count => Ok(true),
        }
    });
    let _ = match source {
        Source::File(file) => searcher.search_file(matcher, file, sink),
        // As a reader, not a slice: a slice is checked for NUL only at its start and in
        // matching lines, a file in every buffer read.
        Source::Bytes(bytes) => searcher.search_reader(matcher, bytes, sink),
    };
    if count > 0 && mode != GrepMode::Content {
        taken.fetch_add(1, Ordering::Relaxed);
        found.push((shown.to_owned(), count, String::new()));
    }
    found
}

/// Searches `options.path`; returns the formatted report. `root` is what paths are shown
/// relative to. Stops early when `stop` is set.
pub(super) fn grep(
    root: &Path,
    options: &GrepOptions,
    protected: &ProtectedPaths,
    stop: &AtomicBool,
) -> Result<String, Error> {
    let matcher = matcher(options)?;
    // The walk starts from the root's real path, which must not be agentd's own.
    let real = files::opened_real_path(&options.path, false, protected)?;
    // Paths are shown as the model named them.
    let shown_base = |path: &Path| match path.strip_prefix(&real) {
        Ok(below) if !below.as_os_str().is_empty() => options.path.join(below),
        _ => options.path.clone(),
    };
    let walker = walk(&real, protected)
        .overrides(overrides(&real, options.glob.as_deref())?)
        .build_parallel();
    // (path, line number, line); count mode keeps one entry per file with the count.
    let found: Mutex<Vec<(String, u64, String)>> = Mutex::new(Vec::new());
    let taken = AtomicUsize::new(0);
    let limit = options.max_results.max(1);
    walker.run(|| {
        let matcher = matcher.clone();
        let mut searcher = searcher();
        let (found, taken, shown_base) = (&found, &taken, &shown_base);
        Box::new(move |entry| {
            if taken.load(Ordering::Relaxed) >= limit || stop.load(Ordering::Relaxed) {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            // The root itself may be a symlink the model named; nothing below it is followed.
            let Ok((file, _)) = files::open_regular(entry.path(), entry.depth() == 0, protected)
            else {
                return WalkState::Continue;
            };
            let shown = display(root, &shown_base(entry.path()));
            let local = search_one(
                &mut searcher,
                &matcher,
                Source::File(&file),
                options.mode,
                &shown,
                taken,
                limit,
            );
            if !local.is_empty() {
                found
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(local);
            }
            WalkState::Continue
        })
    });
    let found = found.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(report(found, limit, options.mode))
}

/// The report of a search that found `found` (path, line number or count, line), in any
/// order, stopping at `limit`; the remote search makes the same.
pub(super) fn report(
    mut found: Vec<(String, u64, String)>,
    limit: usize,
    mode: GrepMode,
) -> String {
    if found.is_empty() {
        return "No matches found.".into();
    }
    found.sort();
    let truncated = found.len() >= limit;
    found.truncate(limit);
    let mut out: Vec<String> = found
        .into_iter()
        .map(|(path, n, line)| match mode {
            GrepMode::Content => format!("{path}:{n}:{line}"),
            GrepMode::FilesWithMatches => path,
            GrepMode::Count => format!("{path}:{n}"),
        })
        .collect();
    if truncated {
        out.push(format!(
            "[results stopped at max_results = {limit}; narrow the pattern or path for more]"
        ));
    }
    out.join("\n")
}

/// Files under `base` whose relative path matches `pattern`, newest first. Stops early when
/// `stop` is set.
pub(super) fn glob(
    root: &Path,
    base: &Path,
    pattern: &str,
    protected: &ProtectedPaths,
    stop: &AtomicBool,
) -> Result<Vec<String>, Error> {
    if !base.is_dir() {
        return Err(Error::NotFound(base.to_owned()));
    }
    let glob = glob_matcher(pattern)?;
    let real = files::opened_real_path(base, true, protected)?;
    let found: Mutex<Vec<(SystemTime, String)>> = Mutex::new(Vec::new());
    walk(&real, protected).build_parallel().run(|| {
        let (found, glob, real) = (&found, &glob, &real);
        Box::new(move |entry| {
            if stop.load(Ordering::Relaxed) {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            let relative = entry.path().strip_prefix(real).unwrap_or(entry.path());
            if glob.is_match(relative) {
                let mtime = entry
                    .metadata()
                    .ok()
                    .and_then(|m| m.modified().ok())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                found
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((mtime, display(root, &base.join(relative))));
            }
            WalkState::Continue
        })
    });
    Ok(newest_first(
        found.into_inner().unwrap_or_else(|e| e.into_inner()),
    ))
}

/// The glob tool's `pattern`, matched against paths relative to its base.
pub(super) fn glob_matcher(pattern: &str) -> Result<globset::GlobMatcher, Error> {
    Ok(globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| Error::NotAllowed(format!("invalid glob {pattern:?}: {e}")))?
        .compile_matcher())
}

/// The glob tool's answer: the paths found, newest first (by name when as new).
pub(super) fn newest_first(mut found: Vec<(SystemTime, String)>) -> Vec<String> {
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found.into_iter().map(|(_, p)| p).collect()
}
