//! grep and glob on the remote machine: ripgrep when the remote has it (the same engine and
//! ignore rules as the local search), else GNU grep and find. Either way the report is built
//! here, in the local search's format: `path:line:text` sorted, paths relative to the working
//! directory, the same "No matches found." and the same note when `max_results` cut it.
//!
//! The fallback differs from ripgrep where the tools do: `grep -E` regular expressions,
//! `--include` matching file names only, and no `.gitignore` (hidden files and directories
//! are skipped by glob).

use super::connection::Connection;
use super::{MAX_LISTING, NOT_FOUND};
use crate::exec::sh_quote;
use crate::exec::{Error, GrepMode, GrepOptions};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// `$1` root, `$2` mode, `$3` ignore case, `$4` glob, `$5` pattern, `$6` path ('' = root),
/// `$7` most results, `$8` whether to use rg. A line is `path\0line:text` (content),
/// `path:count` (count) or `path` (files). rg's stdin is `/dev/null`: given no path and a
/// file or pipe on stdin (the worker's), rg searches stdin instead of the directory.
const GREP: &str = r#"cd -- "$1" || exit 3
[ -z "$6" ] || [ -e "$6" ] || exit 3
p=(); [ -n "$6" ] && p=(-- "$6")
if [ "$8" = 1 ]; then
  a=(--color never --no-messages)
  case $2 in files) a+=(--files-with-matches);; count) a+=(--count --with-filename);; *) a+=(--null --no-heading --with-filename --line-number);; esac
  [ "$3" = 1 ] && a+=(--ignore-case)
  [ -n "$4" ] && a+=(--glob "$4")
  rg "${a[@]}" --regexp "$5" "${p[@]}" </dev/null | head -n "$7"
  s=${PIPESTATUS[0]}
else
  a=(-r -I -E --no-messages -H)
  case $2 in files) a+=(-l);; count) a+=(-c);; *) a+=(--null -n);; esac
  [ "$3" = 1 ] && a+=(-i)
  [ -n "$4" ] && a+=("--include=$4")
  if [ "$2" = count ]; then
    grep "${a[@]}" -e "$5" "${p[@]}" | grep -av ':0$' | head -n "$7"
  else
    grep "${a[@]}" -e "$5" "${p[@]}" | head -n "$7"
  fi
  s=${PIPESTATUS[0]}
fi
case $s in 0|1|141) exit 0;; *) exit 2;; esac"#;

/// `$1` base, `$2` whether to use rg. Each file is `mtime\tpath\0`, paths relative to base.
const FILES: &str = r#"cd -- "$1" 2>/dev/null || exit 3
if [ "$2" = 1 ]; then
  rg --files --null --color never --no-messages | xargs -0 -r stat --printf '%.9Y\t%n\0' --
else
  find . -mindepth 1 -name '.*' -prune -o -type f -printf '%T@\t%P\0'
fi"#;

/// Searches `options.path` on the remote; the report as the local search makes it.
pub(super) async fn grep(
    link: &Connection,
    timeout: Duration,
    root: &Path,
    options: &GrepOptions,
) -> Result<String, Error> {
    let rg = link.facts().is_some_and(|f| f.ripgrep);
    let limit = options.max_results.max(1);
    let path = if options.path == root {
        String::new()
    } else {
        options
            .path
            .strip_prefix(root)
            .unwrap_or(&options.path)
            .display()
            .to_string()
    };
    let mode = match options.mode {
        GrepMode::Content => "content",
        GrepMode::FilesWithMatches => "files",
        GrepMode::Count => "count",
    };
    let root_shown = root.display().to_string();
    let limit_shown = limit.to_string();
    let args = [
        root_shown.as_str(),
        mode,
        if options.case_insensitive { "1" } else { "0" },
        options.glob.as_deref().unwrap_or(""),
        &options.pattern,
        &path,
        &limit_shown,
        if rg { "1" } else { "0" },
    ];
    let out = link
        .run("grep", timeout, GREP, &args, None, MAX_LISTING)
        .await?;
    match out.code {
        Some(0) => {}
        Some(NOT_FOUND) => return Err(Error::NotFound(options.path.clone())),
        _ => {
            return Err(Error::NotAllowed(format!(
                "invalid search for {}: {}",
                sh_quote(&options.pattern),
                out.stderr.trim()
            )));
        }
    }
    let found: Vec<(String, u64, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| match options.mode {
            GrepMode::Content => {
                let (path, rest) = line.split_once('\0')?;
                let (n, text) = rest.split_once(':')?;
                Some((path.to_owned(), n.parse().ok()?, text.to_owned()))
            }
            GrepMode::Count => {
                let (path, n) = line.rsplit_once(':')?;
                Some((path.to_owned(), n.parse().ok()?, String::new()))
            }
            GrepMode::FilesWithMatches => {
                (!line.is_empty()).then(|| (line.to_owned(), 0, String::new()))
            }
        })
        .collect();
    Ok(crate::exec::search::report(found, limit, options.mode))
}

/// Files under `base` whose path relative to it matches `pattern`, newest first, shown
/// relative to `root`.
pub(super) async fn glob(
    link: &Connection,
    timeout: Duration,
    root: &Path,
    base: &Path,
    pattern: &str,
) -> Result<Vec<String>, Error> {
    let matcher = crate::exec::search::glob_matcher(pattern)?;
    let rg = link.facts().is_some_and(|f| f.ripgrep);
    let shown = base.display().to_string();
    let out = link
        .run(
            "glob",
            timeout,
            FILES,
            &[&shown, if rg { "1" } else { "0" }],
            None,
            MAX_LISTING,
        )
        .await?;
    if out.code == Some(NOT_FOUND) {
        return Err(Error::NotFound(base.to_owned()));
    }
    let found: Vec<(SystemTime, String)> = out
        .stdout
        .split(|&b| b == 0)
        .filter_map(|record| {
            let record = String::from_utf8_lossy(record);
            let (mtime, relative) = record.split_once('\t')?;
            let relative = relative.strip_prefix("./").unwrap_or(relative);
            if !matcher.is_match(relative) {
                return None;
            }
            let secs: f64 = mtime.parse().ok()?;
            let mtime = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs_f64(secs.max(0.0));
            let full = base.join(relative);
            let display = full
                .strip_prefix(root)
                .unwrap_or(&full)
                .display()
                .to_string();
            Some((mtime, display))
        })
        .collect();
    Ok(crate::exec::search::newest_first(found))
}
