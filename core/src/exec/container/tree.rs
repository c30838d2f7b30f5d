//! `list_dir`, `glob` and `grep` in a remote engine's container, whose workspace is not on
//! this machine. The engine's archive endpoint would send a whole tree, `.git` and build
//! output included, for a listing of its top; so the walk is a `find` in the container
//! (busybox's is enough), run as the container's user through the worker like a command,
//! printing each entry's type, size, modification time and path, and a grep fetches the
//! files it searches as a `tar` archive in batches. Everything else happens here with the
//! local search's crates: `.gitignore` and `.ignore` rules, the glob, the regex, the report,
//! so that a remote search answers as a local one would.
//!
//! What the container prints is the model's to shape (it owns the workspace): every path
//! must lie beneath the directory walked, an archive entry counts only when it is a regular
//! file that was asked for, and the output, the files fetched and the time are capped.

use super::super::search::{self, GrepMode, GrepOptions, Source};
use super::super::{DirEntry, Error, MAX_READ_BYTES, sh_quote};
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

/// Most time one walk or fetch may take.
pub(super) const TIMEOUT: Duration = Duration::from_secs(60);
/// Most bytes a walk may print (about 200,000 entries).
pub(super) const MAX_WALK: usize = 16 * 1024 * 1024;
/// Most bytes of files one grep fetches; past them it reports what it found and says so.
const MAX_GREP_BYTES: u64 = 256 * 1024 * 1024;
/// Most bytes of files one fetch asks for (a single bigger file goes alone).
const BATCH_BYTES: u64 = 32 * 1024 * 1024;
/// Most bytes of quoted names in one fetch's script, which the kernel takes as one
/// argument of at most 128 KiB.
const BATCH_NAMES: usize = 96 * 1024;
/// Biggest ignore file read.
const MAX_IGNORE_FILE: u64 = 1024 * 1024;
/// Most ignore files one search reads, and most bytes of them.
const MAX_IGNORE_FILES: usize = 10_000;
const MAX_IGNORE_BYTES: u64 = 16 * 1024 * 1024;

/// `$1` the base; `$2` `list` or `tree`; `$3` a listing's depth. The first line is the
/// record separator (`0`: NUL, from GNU stat; `n`: newline, from busybox's, which has no
/// `--printf`); then a record per entry, `mode size mtime path` (stat's raw mode in hex).
///
/// A tree starts with what the directories above the base hold that the search follows:
/// their ignore files and the nearest `.git` or `.jj` (a repository's top, where ripgrep
/// stops reading `.gitignore` files). It never enters a hidden directory, and prints but
/// does not enter a `.git` or `.jj`. Nor does it enter a directory that a rule of the
/// base's or those directories' ignore files excludes by its name alone (`target/`,
/// `node_modules`): such a rule holds at every depth below, and no rule can take back what
/// is below an excluded directory. A rule that takes anything back (`!…`) there or in an
/// ignore file on the way below the base, a file past 64 KiB or one with a byte the shell
/// cannot read as ripgrep does leaves them entered, and a `.gitignore`'s name stops at a
/// repository below the base; the search applies every rule either way.
const WALK: &str = r#"b=$1 m=$2 n=$3
[ -d "$b" ] || exit 3
export LC_ALL=C
cr=$(printf '\r')
if stat --printf '' / >/dev/null 2>&1; then o=--printf f='%f %s %Y %n\0' h=0
else o=-c f='%f %s %Y %n' h=n
fi
echo "$h"
if [ "$m" = list ]; then
  exec find "$b" -mindepth 1 -maxdepth "$n" -exec stat "$o" "$f" -- {} +
fi
top=
d=$b
while :; do
  for i in .git .jj; do
    [ -e "$d/$i" ] || [ -L "$d/$i" ] || continue
    top=${d:-/}
    [ "$d" = "$b" ] || stat "$o" "$f" -- "$d/$i"
    break 2
  done
  [ -n "$d" ] || break
  d=${d%/*}
done
ig= gi= k=1 c=0
d=$b
while :; do
  for i in .ignore .gitignore; do
    r="$d/$i"
    [ -f "$r" ] && [ ! -L "$r" ] || continue
    [ "$d" = "$b" ] || stat "$o" "$f" -- "$r"
    [ "$i" = .gitignore ] && [ -z "$top" ] && continue
    # What the shell cannot read as ripgrep does (a NUL, a byte past ASCII, more than it
    # reads) leaves every directory entered.
    [ "$(wc -c <"$r")" -le 65536 ] && [ "$(tr -d '\000' <"$r" | wc -c)" -eq "$(wc -c <"$r")" ] || k=
    set -f
    x=$IFS
    IFS='
'
    for l in $(head -c 65536 -- "$r"); do
      l=${l%"$cr"}
      case $l in
        *[!\ -~]*) k= ;;
        '!'*) k= ;;
        ''|'#'*|.*|*[\\*?[{]*|' '*|*' '|/*) continue ;;
        */) l=${l%/}; case $l in */*) continue ;; esac ;;
        */*) continue ;;
      esac
      [ "$c" -lt 200 ] || continue
      c=$((c+1))
      if [ "$i" = .ignore ]; then ig="$ig
$l"; else gi="$gi
$l"; fi
    done
    IFS=$x
    set +f
  done
  [ "${d:-/}" = "$top" ] && top=
  [ -n "$d" ] || break
  d=${d%/*}
done
[ -n "$k" ] || ig= gi=
# A directory so named is pruned unless an ignore file on the way below the base may take
# something back, or (for a .gitignore's name, `$3` g) a repository below the base begins.
q='d=${2%/*}
while [ -n "$d" ] && [ "$d" != "$1" ]; do
  [ "$3" = g ] && { [ -e "$d/.git" ] || [ -e "$d/.jj" ]; } && exit 1
  for i in .gitignore .ignore; do [ -f "$d/$i" ] && grep -q "^!" "$d/$i" && exit 1; done
  d=${d%/*}
done
exit 0'
set -f
x=$IFS
IFS='
'
set -- "$b" -mindepth 1 \( -type d \( -name '.*' ! -name .git ! -name .jj \) -prune \)
for w in i g; do
  [ $w = i ] && v=$ig || v=$gi
  [ -n "$v" ] || continue
  set -- "$@" -o \( -type d \( -name ''
  for l in $v; do set -- "$@" -o -name "$l"; done
  set -- "$@" \) -exec sh -c "$q" sh "$b" {} $w \; -prune \)
done
IFS=$x
set +f
# One `-exec … +` only: busybox's find runs the last one alone.
exec find "$@" -o \( ! \( -name .git -o -name .jj \) -o -prune \) -exec stat "$o" "$f" -- {} +"#;

/// `$1` the directory the other arguments, `./`-led paths, are relative to: an archive of
/// them on stdout.
const FETCH: &str = r#"cd -- "$1" || exit 3
shift
command -v tar >/dev/null 2>&1 || { echo "the container's image has no tar" >&2; exit 4; }
exec tar -cf - "$@""#;

/// What a walked entry is (symbolic links are never followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Type {
    Dir,
    File,
    Link,
    Other,
}

/// One walked entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Record {
    /// Absolute, beneath the base (or an ignore file of a directory above it).
    pub(super) path: PathBuf,
    pub(super) kind: Type,
    pub(super) size: u64,
    /// Seconds since the epoch.
    pub(super) mtime: u64,
}

/// A walk's answer.
pub(super) struct Walk {
    /// Below the base, in the order printed.
    pub(super) entries: Vec<Record>,
    /// Ignore files of the directories above the base.
    pub(super) above: Vec<Record>,
    /// The directories holding a `.git` or `.jj`: the tops of repositories, the nearest
    /// above the base and any below it.
    pub(super) repositories: HashSet<PathBuf>,
}

/// The command that lists `base` to `depth` levels.
pub(super) fn list_command(base: &Path, depth: usize) -> String {
    command(
        WALK,
        &[
            base.as_os_str(),
            "list".as_ref(),
            depth.to_string().as_ref(),
        ],
    )
}

/// The command that walks all of `base`, and reads the ignore files of the directories
/// above it.
pub(super) fn tree_command(base: &Path) -> String {
    command(WALK, &[base.as_os_str(), "tree".as_ref(), "".as_ref()])
}

/// `script` with `args` as its positional parameters.
pub(super) fn command(script: &str, args: &[&OsStr]) -> String {
    let quoted: Vec<String> = args
        .iter()
        .map(|a| sh_quote(&String::from_utf8_lossy(a.as_bytes())))
        .collect();
    format!("set -- {}\n{script}", quoted.join(" "))
}

/// A walk's output, each path checked: beneath `base`, or one of the ignore files of the
/// directories above it. A record that fails to parse is left out.
pub(super) fn parse_walk(out: &[u8], base: &Path) -> Result<Walk, Error> {
    let (header, body) = out
        .iter()
        .position(|&b| b == b'\n')
        .map(|i| (&out[..i], &out[i + 1..]))
        .ok_or_else(|| {
            Error::Unavailable(
                "the listing of the container's files printed nothing (is there a shell, find \
                 and stat in its image?)"
                    .into(),
            )
        })?;
    let separator = match header.first() {
        Some(b'0') => b'\0',
        Some(b'n') => b'\n',
        _ => {
            return Err(Error::Unavailable(format!(
                "the listing of the container's files began with {:?}",
                String::from_utf8_lossy(&header[..header.len().min(64)])
            )));
        }
    };
    let mut walk = Walk {
        entries: Vec::new(),
        above: Vec::new(),
        repositories: HashSet::new(),
    };
    let mut records: Vec<Record> = Vec::new();
    for line in body.split(|&b| b == separator) {
        match parse_record(line) {
            Some(record) if record.path.is_absolute() => records.push(record),
            // Busybox's stat ends a record with a newline, which a name may hold too: a line
            // that starts no record of an absolute path continues the last one's name.
            _ if separator == b'\n' && !line.is_empty() => {
                if let Some(last) = records.last_mut() {
                    let mut name = std::mem::take(&mut last.path).into_os_string().into_vec();
                    name.push(b'\n');
                    name.extend_from_slice(line);
                    last.path = PathBuf::from(std::ffi::OsString::from_vec(name));
                }
            }
            _ => {}
        }
    }
    for record in records {
        let marker = matches!(
            record.path.file_name().and_then(OsStr::to_str),
            Some(".git" | ".jj")
        );
        let inside = below(&record.path, base).is_some_and(|rel| !rel.as_os_str().is_empty());
        let above = || {
            record
                .path
                .parent()
                .is_some_and(|dir| base.starts_with(dir))
                && below(&record.path, Path::new("/")).is_some()
        };
        if marker && (inside || above()) {
            walk.repositories
                .insert(record.path.parent().unwrap_or(Path::new("/")).to_owned());
        }
        if inside {
            walk.entries.push(record);
        } else if record.kind == Type::File && is_ignore_file(&record.path) && above() {
            walk.above.push(record);
        }
    }
    Ok(walk)
}

/// `mode size mtime path`.
fn parse_record(record: &[u8]) -> Option<Record> {
    let mut fields = record.splitn(4, |&b| b == b' ');
    let mode = u32::from_str_radix(std::str::from_utf8(fields.next()?).ok()?, 16).ok()?;
    let size = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
    // Before 1970 counts as 1970.
    let mtime = std::str::from_utf8(fields.next()?)
        .ok()?
        .parse::<i128>()
        .ok()?
        .clamp(0, u64::MAX.into());
    let mtime = u64::try_from(mtime).ok()?;
    let path = PathBuf::from(OsStr::from_bytes(fields.next()?));
    let kind = match mode & 0o170_000 {
        0o040_000 => Type::Dir,
        0o100_000 => Type::File,
        0o120_000 => Type::Link,
        _ => Type::Other,
    };
    Some(Record {
        path,
        kind,
        size,
        mtime,
    })
}

/// `path` relative to `base` when it lies beneath it by plain names alone (no `..`, no
/// `.`, nothing that would lead elsewhere).
fn below<'a>(path: &'a Path, base: &Path) -> Option<&'a Path> {
    let rel = path.strip_prefix(base).ok()?;
    rel.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then_some(rel)
}

fn is_ignore_file(path: &Path) -> bool {
    matches!(
        path.file_name().and_then(OsStr::to_str),
        Some(".gitignore" | ".ignore")
    )
}

fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|name| name.as_bytes().starts_with(b"."))
}

/// A listing's entries, as the local listing names them: relative to `base`, sorted, with
/// the sizes of regular files.
pub(super) fn listing(walk: Walk, base: &Path) -> Vec<DirEntry> {
    let mut entries: Vec<DirEntry> = walk
        .entries
        .into_iter()
        .filter_map(|r| {
            let name = below(&r.path, base)?.to_string_lossy().into_owned();
            Some(DirEntry {
                name,
                is_dir: r.kind == Type::Dir,
                size: (r.kind == Type::File).then_some(r.size),
            })
        })
        .collect();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries
}

/// The ignore files a walk found (its own and those above its base) that the fetch must
/// bring: those small enough to be ignore files, shallowest first, up to
/// [`MAX_IGNORE_FILES`] of them and [`MAX_IGNORE_BYTES`] in all (deeper ones are left).
pub(super) fn ignore_files(walk: &Walk) -> Vec<&Record> {
    let mut files: Vec<&Record> = walk
        .above
        .iter()
        .chain(walk.entries.iter())
        .filter(|r| r.kind == Type::File && is_ignore_file(&r.path) && r.size <= MAX_IGNORE_FILE)
        .collect();
    files.sort_by_key(|r| r.path.components().count());
    files.truncate(MAX_IGNORE_FILES);
    let mut total = 0;
    files
        .into_iter()
        .take_while(|r| {
            total += r.size;
            total <= MAX_IGNORE_BYTES
        })
        .collect()
}

/// The `.ignore` and `.gitignore` rules of each directory, matched as ripgrep's walk
/// matches them: the nearest directory's rules first, any `.ignore` rule before any
/// `.gitignore` one, and `.gitignore` rules only within a repository, up to its top.
pub(super) struct Ignores {
    ignore: HashMap<PathBuf, Gitignore>,
    gitignore: HashMap<PathBuf, Gitignore>,
    repositories: HashSet<PathBuf>,
}

impl Ignores {
    /// The rules of `files` (an ignore file's path and content) in a tree whose
    /// repositories' tops are `repositories`.
    pub(super) fn new(repositories: HashSet<PathBuf>, files: &[(PathBuf, Vec<u8>)]) -> Self {
        let mut ignores = Self {
            ignore: HashMap::new(),
            gitignore: HashMap::new(),
            repositories,
        };
        for (path, content) in files {
            let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
                continue;
            };
            let rules = match name.to_str() {
                Some(".ignore") => &mut ignores.ignore,
                Some(".gitignore") => &mut ignores.gitignore,
                _ => continue,
            };
            let mut builder = GitignoreBuilder::new(dir);
            // As `GitignoreBuilder::add` reads a file: a BOM dropped, and nothing from the
            // first line that is not UTF-8 on.
            for (n, line) in std::io::BufRead::lines(content.as_slice()).enumerate() {
                let Ok(line) = line else { break };
                let line = if n == 0 {
                    line.trim_start_matches('\u{feff}')
                } else {
                    &line
                };
                // A rule ripgrep cannot read is one it skips too.
                let _ = builder.add_line(Some(path.clone()), line);
            }
            if let Ok(built) = builder.build() {
                rules.insert(dir.to_owned(), built);
            }
        }
        ignores
    }

    fn matched(&self, path: &Path, is_dir: bool) -> Match<()> {
        let dirs = || path.ancestors().skip(1);
        // `.gitignore` files count from the nearest repository's top down, none outside one.
        let top = dirs().position(|dir| self.repositories.contains(dir));
        let git = dirs().take(top.map_or(0, |top| top + 1));
        for (rules, dirs) in [
            (
                &self.ignore,
                Box::new(dirs()) as Box<dyn Iterator<Item = &Path>>,
            ),
            (&self.gitignore, Box::new(git)),
        ] {
            for dir in dirs {
                if let Some(rules) = rules.get(dir) {
                    match rules.matched(path, is_dir) {
                        Match::None => {}
                        Match::Ignore(_) => return Match::Ignore(()),
                        Match::Whitelist(_) => return Match::Whitelist(()),
                    }
                }
            }
        }
        Match::None
    }
}

/// The regular files of a tree walk that a local search of `base` would visit, in path
/// order: ripgrep's precedence (the grep's `glob` first, then ignore rules, then hidden
/// names), a directory's exclusion taking all below it.
pub(super) fn visited<'a>(
    walk: &'a Walk,
    base: &Path,
    ignores: &Ignores,
    glob: Option<&ignore::overrides::Override>,
) -> Vec<&'a Record> {
    let mut entries: Vec<&Record> = walk.entries.iter().collect();
    // A directory sorts before what is below it.
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let mut left: HashSet<&Path> = HashSet::new();
    let mut visited = Vec::new();
    for record in entries {
        let Some(parent) = record.path.parent() else {
            continue;
        };
        if parent != base && left.contains(parent) {
            if record.kind == Type::Dir {
                left.insert(&record.path);
            }
            continue;
        }
        let is_dir = record.kind == Type::Dir;
        let included = match glob.map_or(Match::None, |g| g.matched(&record.path, is_dir)) {
            Match::Whitelist(_) => true,
            Match::Ignore(_) => false,
            Match::None => match ignores.matched(&record.path, is_dir) {
                Match::Ignore(_) => false,
                Match::Whitelist(_) => true,
                Match::None => !is_hidden(&record.path),
            },
        };
        if !included {
            if is_dir {
                left.insert(&record.path);
            }
        } else if record.kind == Type::File {
            visited.push(record);
        }
    }
    visited
}

/// The glob tool's answer from the files visited: those whose path relative to `base`
/// matches, newest first, shown below `shown` (the base as the model named it) relative to
/// `root`.
pub(super) fn glob(
    visited: &[&Record],
    base: &Path,
    shown: &Path,
    root: &Path,
    matcher: &globset::GlobMatcher,
) -> Vec<String> {
    let found = visited
        .iter()
        .filter_map(|r| {
            let rel = below(&r.path, base)?;
            matcher.is_match(rel).then(|| {
                let mtime = SystemTime::UNIX_EPOCH
                    .checked_add(Duration::from_secs(r.mtime))
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                (mtime, search::display(root, &shown.join(rel)))
            })
        })
        .collect();
    search::newest_first(found)
}

/// The files to fetch, in batches of commands: each at most [`BATCH_BYTES`] of files (or one
/// bigger file) and [`BATCH_NAMES`] of script, relative to `dir`. Files bigger than a file
/// tool reads are left.
pub(super) fn fetch_commands<'a>(
    files: &[&'a Record],
    dir: &Path,
) -> Vec<(String, Vec<&'a Record>)> {
    let mut batches: Vec<(String, Vec<&Record>)> = Vec::new();
    // What every batch's script holds besides the names, quoted once more.
    let fixed = sh_quote(&sh_quote(&dir.display().to_string())).len() + 2 * FETCH.len() + 16;
    let (mut bytes, mut names) = (0u64, fixed);
    let mut batch: Vec<&Record> = Vec::new();
    let mut args: Vec<String> = Vec::new();
    let finish = |batch: &mut Vec<&'a Record>, args: &mut Vec<String>| {
        let mut all = vec![sh_quote(&dir.display().to_string())];
        all.append(args);
        (
            format!("set -- {}\n{FETCH}", all.join(" ")),
            std::mem::take(batch),
        )
    };
    for &file in files {
        let Some(rel) = below(&file.path, dir).filter(|_| file.size <= MAX_READ_BYTES) else {
            continue;
        };
        let arg = sh_quote(&format!(
            "./{}",
            String::from_utf8_lossy(rel.as_os_str().as_bytes())
        ));
        // Quoted once more in the command's script.
        let cost = sh_quote(&arg).len() + 1;
        if !batch.is_empty() && (bytes + file.size > BATCH_BYTES || names + cost > BATCH_NAMES) {
            batches.push(finish(&mut batch, &mut args));
            (bytes, names) = (0, fixed);
        }
        bytes += file.size;
        names += cost;
        batch.push(file);
        args.push(arg);
    }
    if !batch.is_empty() {
        batches.push(finish(&mut batch, &mut args));
    }
    batches
}

/// How much a fetch of `batch` may print: its files and room for the archive's headers.
pub(super) fn fetch_cap(batch: &[&Record]) -> usize {
    let files: u64 = batch.iter().map(|r| r.size).sum();
    usize::try_from(files + 2048 * batch.len() as u64 + 64 * 1024).unwrap_or(usize::MAX)
}

/// The files of `wanted` (absolute) an archive of paths relative to `dir` holds, each a
/// regular file no bigger than a file tool reads; anything else in it is left.
pub(super) fn unpack(tar: &[u8], dir: &Path, wanted: &[PathBuf]) -> Vec<(PathBuf, Vec<u8>)> {
    let wanted: HashSet<&Path> = wanted.iter().map(PathBuf::as_path).collect();
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    let name = |path: &Path| {
        dir.join(
            path.components()
                .filter(|c| *c != Component::CurDir)
                .collect::<PathBuf>(),
        )
    };
    let mut archive = tar::Archive::new(tar);
    let Ok(entries) = archive.entries() else {
        return files;
    };
    for entry in entries {
        let Ok(mut entry) = entry else {
            break;
        };
        let Ok(path) = entry.path().map(|p| name(&p)) else {
            continue;
        };
        if !wanted.contains(path.as_path()) || below(&path, dir).is_none() {
            continue;
        }
        // tar sends a file's second hard link as a link to the first.
        if entry.header().entry_type() == tar::EntryType::Link {
            let first = entry.link_name().ok().flatten().map(|p| name(&p));
            if let Some((_, content)) = first.and_then(|f| files.iter().find(|(p, _)| *p == f)) {
                let content = content.clone();
                files.push((path, content));
            }
            continue;
        }
        if entry.header().entry_type() != tar::EntryType::Regular || entry.size() > MAX_READ_BYTES {
            continue;
        }
        let mut content = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
        if entry
            .by_ref()
            .take(MAX_READ_BYTES)
            .read_to_end(&mut content)
            .is_ok()
        {
            files.push((path, content));
        }
    }
    files
}

/// One grep over fetched files, in the order they come, up to its `max_results`.
pub(super) struct Grep {
    /// The path searched, as walked and as the model named it, and what paths are shown
    /// relative to.
    base: PathBuf,
    shown: PathBuf,
    root: PathBuf,
    matcher: grep_regex::RegexMatcher,
    mode: GrepMode,
    limit: usize,
    taken: AtomicUsize,
    found: Vec<(String, u64, String)>,
    fetched: u64,
    /// Why it stopped before the last file, for its report.
    cut: Option<String>,
}

impl Grep {
    pub(super) fn new(
        options: &GrepOptions,
        base: PathBuf,
        shown: PathBuf,
        root: PathBuf,
    ) -> Result<Self, Error> {
        Ok(Self {
            base,
            shown,
            root,
            matcher: search::matcher(options)?,
            mode: options.mode,
            limit: options.max_results.max(1),
            taken: AtomicUsize::new(0),
            found: Vec::new(),
            fetched: 0,
            cut: None,
        })
    }

    /// Whether it has what it needs, or may fetch no more.
    pub(super) fn done(&self) -> bool {
        self.taken.load(Ordering::Relaxed) >= self.limit || self.cut.is_some()
    }

    /// Counts `bytes` more to fetch; `false` (and the report says so) past the grep's budget.
    pub(super) fn budget(&mut self, bytes: u64) -> bool {
        if self.fetched > 0 && self.fetched + bytes > MAX_GREP_BYTES {
            self.cut = Some(format!(
                "[search stopped after {} MiB of files; narrow the path or glob for the rest]",
                self.fetched / (1024 * 1024)
            ));
            return false;
        }
        self.fetched += bytes;
        true
    }

    /// Searches `files`, fetched.
    pub(super) fn search(&mut self, files: &[(PathBuf, Vec<u8>)]) {
        let mut searcher = search::searcher();
        for (path, content) in files {
            if self.taken.load(Ordering::Relaxed) >= self.limit {
                return;
            }
            let shown = match path.strip_prefix(&self.base) {
                Ok(rel) if !rel.as_os_str().is_empty() => self.shown.join(rel),
                _ => self.shown.clone(),
            };
            let found = search::search_one(
                &mut searcher,
                &self.matcher,
                Source::Bytes(content),
                self.mode,
                &search::display(&self.root, &shown),
                &self.taken,
                self.limit,
            );
            self.found.extend(found);
        }
    }

    pub(super) fn report(self) -> String {
        let report = search::report(self.found, self.limit, self.mode);
        match self.cut {
            Some(cut) => format!("{report}\n{cut}"),
            None => report,
        }
    }
}

#[cfg(test)]
mod tests;
