//! Checkpoints: the workspace's files recorded before and after every tool round that may
//! change them, in a shadow store of agentd's own under the session's directory (git's object
//! format through gitoxide, as gemini-cli's shadow repository; never the user's `.git`: no
//! refs, index or objects there, as codex's ghost commits once did). Undo puts back what the
//! agent changed in some inputs and refuses, naming them, files the user changed since (unless
//! forced, and then the user's versions stay in the store for a redo); redo brings back what
//! the last undo took away; diff shows what an input changed.
//!
//! A round's "after" is the checkpoint the next round (or the input's end) takes, which the
//! loop starts as soon as the tools finish, next to the LLM call, so it costs no wall time.
//! All file work runs on the blocking pool; the store's state sits in a `Mutex` only those
//! jobs lock, one at a time.

mod budget;
mod diff;
mod objects;
mod restore;
mod snapshot;
mod watch;

pub(crate) use budget::Budget;
pub(crate) use snapshot::Snap;

use agentd_proto::{FilesRestored, InputId};
use gix_hash::ObjectId;
use gix_object::tree::EntryKind;
use objects::{Entry, Files, Objects};
use serde::{Deserialize, Serialize};
use snapshot::Cache;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::{BufRead, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

const ROUNDS: &str = "rounds.jsonl";
const ROUNDS_TMP: &str = ".rounds.jsonl.tmp";
/// What a redo brings back (see [`Redo`]).
const REDO: &str = "redo.jsonl";
const REDO_TMP: &str = ".redo.jsonl.tmp";
/// The inputs whose rounds the disk cap removed, one a line.
const PRUNED: &str = "pruned.txt";
/// Most rounds a store keeps; the oldest go first past it (the disk cap removes them sooner).
const MAX_ROUNDS: usize = 10_000;

/// A session's checkpoints. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Checkpoints {
    inner: Arc<Inner>,
}

struct Inner {
    /// The workspace (a real path).
    root: PathBuf,
    /// The store (`<session>/checkpoints`).
    dir: PathBuf,
    exclude: Vec<PathBuf>,
    max_file_bytes: u64,
    budget: Arc<Budget>,
    /// Opened by the first job that needs it.
    state: Mutex<Option<Store>>,
}

/// A tool round that may have changed files: the workspace before and after it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Round {
    input_id: String,
    before: String,
    after: String,
    /// Files not recorded before or after it (over `max_file_bytes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    skipped: Vec<String>,
    /// When it ended (Unix seconds): the disk cap removes the oldest first.
    at: u64,
}

/// What the last undo changed: per path, the file after the undo and before it.
struct Redo {
    paths: Vec<(Vec<u8>, Option<Entry>, Option<Entry>)>,
}

/// One path of a [`Redo`] as `redo.jsonl` holds it (a file: its kind and object).
#[derive(Serialize, Deserialize)]
struct RedoLine {
    path: Vec<u8>,
    after: Option<(String, String)>,
    before: Option<(String, String)>,
}

fn entry_text(entry: Option<Entry>) -> Option<(String, String)> {
    entry.map(|e| {
        let kind = match e.kind {
            EntryKind::BlobExecutable => "exec",
            EntryKind::Link => "link",
            _ => "blob",
        };
        (kind.to_owned(), e.id.to_string())
    })
}

fn entry_of(text: Option<(String, String)>) -> Result<Option<Entry>, String> {
    let Some((kind, id)) = text else {
        return Ok(None);
    };
    let kind = match kind.as_str() {
        "exec" => EntryKind::BlobExecutable,
        "link" => EntryKind::Link,
        _ => EntryKind::Blob,
    };
    Ok(Some(Entry {
        kind,
        id: oid(&id)?,
    }))
}

impl Redo {
    /// The redo kept at `dir` by an earlier daemon, if any (a damaged one is dropped).
    fn load(dir: &Path) -> Option<Self> {
        let file = std::fs::File::open(dir.join(REDO)).ok()?;
        let paths = std::io::BufReader::new(file)
            .lines()
            .map(|line| {
                let line: RedoLine = serde_json::from_str(&line.ok()?).ok()?;
                Some((
                    line.path,
                    entry_of(line.after).ok()?,
                    entry_of(line.before).ok()?,
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self { paths })
    }

    /// Keeps it at `dir`, so that a redo works after the daemon restarts.
    fn save(&self, dir: &Path) -> Result<(), String> {
        let mut text = Vec::new();
        for (path, after, before) in &self.paths {
            let line = RedoLine {
                path: path.clone(),
                after: entry_text(*after),
                before: entry_text(*before),
            };
            text.extend(serde_json::to_vec(&line).map_err(|e| e.to_string())?);
            text.push(b'\n');
        }
        let tmp = dir.join(REDO_TMP);
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, dir.join(REDO)))
            .map_err(|e| format!("cannot keep the redo in {}: {e}", dir.display()))
    }
}

/// One store on disk and what its session's jobs keep of it.
struct Store {
    objects: Objects,
    dir: PathBuf,
    rounds: Vec<Round>,
    cache: Cache,
    redo: Option<Redo>,
    bytes: u64,
    /// Inputs whose rounds (some or all) were removed under the cap.
    pruned: HashSet<String>,
}

fn oid(hex: &str) -> Result<ObjectId, String> {
    ObjectId::from_hex(hex.as_bytes()).map_err(|e| format!("a damaged checkpoint record: {e}"))
}

fn lossy(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

impl Store {
    fn open(dir: &Path) -> Result<Self, String> {
        let objects = Objects::open(&dir.join("objects"))?;
        let rounds = match std::fs::File::open(dir.join(ROUNDS)) {
            Ok(file) => std::io::BufReader::new(file)
                .lines()
                .map_while(Result::ok)
                // A line cut short by a crash is dropped, as the journal's torn tail is.
                .filter_map(|line| serde_json::from_str(&line).ok())
                .collect(),
            Err(_) => Vec::new(),
        };
        let bytes = objects.size();
        let pruned = std::fs::read_to_string(dir.join(PRUNED))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        Ok(Self {
            pruned,
            objects,
            dir: dir.to_owned(),
            rounds,
            cache: Cache::default(),
            redo: Redo::load(dir),
            bytes,
        })
    }

    /// The oldest round recorded in the store at `dir`, read without opening it.
    fn first_round(dir: &Path) -> Option<Round> {
        let file = std::fs::File::open(dir.join(ROUNDS)).ok()?;
        let line = std::io::BufReader::new(file).lines().next()?.ok()?;
        serde_json::from_str(&line).ok()
    }

    fn append(&mut self, round: Round) -> Result<(), String> {
        let mut line = serde_json::to_vec(&round).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let path = self.dir.join(ROUNDS);
        // Not synced: a round lost with the machine costs an undo, not the session.
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .and_then(|mut f| f.write_all(&line))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        self.rounds.push(round);
        if self.rounds.len() > MAX_ROUNDS {
            self.prune_first();
        }
        Ok(())
    }

    fn rewrite(&self) {
        let tmp = self.dir.join(ROUNDS_TMP);
        let mut text = Vec::new();
        for round in &self.rounds {
            text.extend(serde_json::to_vec(round).unwrap_or_default());
            text.push(b'\n');
        }
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, self.dir.join(ROUNDS));
        }
    }

    /// Drops the oldest round and every object only it needed; returns the bytes freed.
    fn prune_first(&mut self) -> u64 {
        if self.rounds.is_empty() {
            return 0;
        }
        let gone = self.rounds.remove(0);
        if self.pruned.insert(gone.input_id.clone()) {
            let _ = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(self.dir.join(PRUNED))
                .and_then(|mut f| writeln!(f, "{}", gone.input_id));
        }
        self.rewrite();
        let mut keep = HashSet::new();
        let trees = self
            .rounds
            .iter()
            .flat_map(|r| [oid(&r.before), oid(&r.after)])
            .flatten()
            .chain(self.cache.last.as_ref().map(|s| s.tree));
        for tree in trees {
            if self.objects.reach(&tree, &mut keep).is_err() {
                // A tree that cannot be read is kept whole rather than half swept.
                return 0;
            }
        }
        if let Some(redo) = &self.redo {
            keep.extend(
                redo.paths
                    .iter()
                    .flat_map(|(_, a, b)| [a, b])
                    .flatten()
                    .map(|e| e.id),
            );
        }
        let freed = self.objects.sweep(&keep);
        self.bytes = self.bytes.saturating_sub(freed);
        freed
    }

    /// Records the workspace; `whole`: walks all of it rather than what the watch saw change.
    fn snapshot(&mut self, inner: &Inner, whole: bool) -> Result<Snap, String> {
        let walk = snapshot::Walk {
            root: &inner.root,
            exclude: &inner.exclude,
            max_file_bytes: inner.max_file_bytes,
        };
        let (snap, grew) = snapshot::take(&walk, &self.objects, &mut self.cache, whole)?;
        self.bytes += grew;
        Ok(snap)
    }

    /// Per path the agent changed in `rounds` (oldest first): the file before its first
    /// change, and after its last; and the paths that were not recorded.
    fn span(&self, rounds: &[&Round]) -> Result<Span, String> {
        let mut trees: HashMap<String, Files> = HashMap::new();
        let mut span = Span::default();
        for round in rounds {
            for hex in [&round.before, &round.after] {
                if !trees.contains_key(hex) {
                    trees.insert(hex.clone(), self.objects.flatten(&oid(hex)?)?);
                }
            }
            let (before, after) = (&trees[&round.before], &trees[&round.after]);
            for path in changed(before, after) {
                span.before
                    .entry(path.clone())
                    .or_insert_with(|| before.get(&path).copied());
                span.after.insert(path.clone(), after.get(&path).copied());
            }
            span.skipped
                .extend(round.skipped.iter().map(|p| p.as_bytes().to_vec()));
        }
        Ok(span)
    }

    /// Makes each path what `changes` says; returns the paths done and those that failed
    /// with why.
    fn apply(
        &self,
        root: &Path,
        changes: &[(Vec<u8>, Option<Entry>)],
    ) -> (Vec<String>, Vec<String>) {
        let mut done = Vec::new();
        let mut failed = Vec::new();
        for (path, target) in changes {
            match restore::put(root, &self.objects, path, target.as_ref()) {
                Ok(()) => {
                    if target.is_none() {
                        restore::remove_empty_dirs(root, path);
                    }
                    done.push(lossy(path));
                }
                Err(e) => failed.push(e),
            }
        }
        (done, failed)
    }
}

/// What some rounds changed, by path (`None`: no file).
#[derive(Default)]
struct Span {
    before: BTreeMap<Vec<u8>, Option<Entry>>,
    after: BTreeMap<Vec<u8>, Option<Entry>>,
    skipped: BTreeSet<Vec<u8>>,
}

/// The paths whose file differs between `a` and `b`.
fn changed(a: &Files, b: &Files) -> Vec<Vec<u8>> {
    let mut paths: Vec<Vec<u8>> = a
        .iter()
        .filter(|(p, e)| b.get(*p) != Some(e))
        .map(|(p, _)| p.clone())
        .collect();
    paths.extend(b.keys().filter(|p| !a.contains_key(*p)).cloned());
    paths
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A checkpoint being taken.
pub(crate) type Pending = tokio::task::JoinHandle<Result<Snap, String>>;

/// The outcome of a job's handle.
pub(crate) fn joined<T>(r: Result<Result<T, String>, tokio::task::JoinError>) -> Result<T, String> {
    r.map_err(|e| format!("the checkpoint crashed: {e}"))?
}

/// Why an undo or a redo did not run.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The user changed these files since the agent did.
    Changed(Vec<String>),
    /// Something else.
    Failed(String),
}

impl Checkpoints {
    /// The checkpoints of session `id` in the workspace `root`, stored under the budget's
    /// sessions directory; `exclude` lists directories never recorded.
    pub(crate) fn new(
        budget: Arc<Budget>,
        id: &str,
        root: PathBuf,
        exclude: Vec<PathBuf>,
        max_file_bytes: u64,
    ) -> Self {
        let real = |p: PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
        let root = real(root);
        let exclude = exclude.into_iter().map(real).collect();
        Self {
            inner: Arc::new(Inner {
                dir: budget.dir_of(id),
                root,
                exclude,
                max_file_bytes,
                budget,
                state: Mutex::new(None),
            }),
        }
    }

    /// Runs `job` on the blocking pool with the store (opened first if need be), then charges
    /// its size to the budget.
    async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Store, &Inner) -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        joined(self.spawn(job).await)
    }

    /// Starts `job` as [`Checkpoints::run`] does, now.
    fn spawn<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Store, &Inner) -> Result<T, String> + Send + 'static,
    ) -> tokio::task::JoinHandle<Result<T, String>> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let (result, bytes) = {
                let mut guard = inner.state.lock().unwrap_or_else(PoisonError::into_inner);
                if guard.is_none() {
                    *guard = Some(Store::open(&inner.dir)?);
                }
                let Some(store) = guard.as_mut() else {
                    unreachable!("opened above")
                };
                (job(store, &inner), store.bytes)
            };
            inner.budget.charge(&inner.dir, bytes, &inner);
            result
        })
    }

    /// Starts recording the workspace now; when `close` names a round that was running (its
    /// input and the checkpoint before it), records that round with this checkpoint as its
    /// after. Await the handle through [`joined`].
    pub(crate) fn take(&self, close: Option<(InputId, Snap)>) -> Pending {
        self.spawn(move |store, inner| {
            let started = Instant::now();
            let snap = store.snapshot(inner, false)?;
            // The benchmark reads these (`agentd-bench checkpoints`).
            tracing::debug!(
                micros = started.elapsed().as_micros() as u64,
                "checkpoint taken"
            );
            if let Some((input, before)) = close {
                // Files too large to record that the round changed (or made, or removed).
                let skipped: BTreeSet<String> = before
                    .skipped
                    .iter()
                    .filter(|(p, s)| snap.skipped.get(*p) != Some(s))
                    .chain(
                        snap.skipped
                            .iter()
                            .filter(|(p, _)| !before.skipped.contains_key(*p)),
                    )
                    .map(|(p, _)| lossy(p))
                    .collect();
                if before.tree != snap.tree || !skipped.is_empty() {
                    store.append(Round {
                        input_id: input.0,
                        before: before.tree.to_string(),
                        after: snap.tree.to_string(),
                        skipped: skipped.into_iter().collect(),
                        at: now_secs(),
                    })?;
                }
            }
            Ok(snap)
        })
    }

    /// `snap`, just taken, brought up to date for a round about to run when that costs
    /// little (the watch says what changed since): what the user changed meanwhile is not
    /// the round's doing.
    pub(crate) fn refresh(&self, snap: Snap) -> Pending {
        self.spawn(move |store, inner| {
            if store.cache.watched() {
                store.snapshot(inner, false)
            } else {
                Ok(snap)
            }
        })
    }

    /// Puts back the files the agent changed in `inputs` as they were before; see the module
    /// docs for what is refused.
    pub(crate) async fn undo(
        &self,
        inputs: Vec<InputId>,
        force: bool,
    ) -> Result<FilesRestored, Refused> {
        let outcome = self
            .run(move |store, inner| {
                let started = Instant::now();
                let inputs: HashSet<String> = inputs.into_iter().map(|i| i.0).collect();
                let rounds: Vec<&Round> = store
                    .rounds
                    .iter()
                    .filter(|r| inputs.contains(&r.input_id))
                    .collect();
                let span = store.span(&rounds)?;
                let now = store.snapshot(inner, true)?;
                let current = store.objects.flatten(&now.tree)?;
                let mut report = FilesRestored::default();
                if inputs.iter().any(|i| store.pruned.contains(i)) {
                    report.not_restored.push(
                        "(files the agent changed early on: their checkpoints were removed to \
                         keep under [checkpoints] max_total_bytes)"
                            .into(),
                    );
                }
                report.not_restored.extend(
                    span.skipped
                        .iter()
                        .map(|p| format!("{}: larger than max_file_bytes, not recorded", lossy(p))),
                );
                let mut changes = Vec::new();
                for (path, before) in &span.before {
                    if span.skipped.contains(path) || now.skipped.contains_key(path) {
                        continue;
                    }
                    let cur = current.get(path).copied();
                    if cur == *before {
                        continue;
                    }
                    if Some(&cur) != span.after.get(path) {
                        report.kept.push(lossy(path));
                    }
                    changes.push((path.clone(), *before, cur));
                }
                if !report.kept.is_empty() && !force {
                    return Ok(Err(Refused::Changed(report.kept)));
                }
                let targets: Vec<_> = changes.iter().map(|(p, b, _)| (p.clone(), *b)).collect();
                let (done, failed) = store.apply(&inner.root, &targets);
                tracing::debug!(
                    micros = started.elapsed().as_micros() as u64,
                    files = done.len(),
                    "undo done"
                );
                report.restored = done;
                report.not_restored.extend(failed);
                let redo = Redo { paths: changes };
                if let Err(e) = redo.save(&store.dir) {
                    report.not_restored.push(e);
                }
                store.redo = Some(redo);
                Ok(Ok(report))
            })
            .await;
        outcome.map_err(Refused::Failed)?
    }

    /// Brings back what the last undo took away, refusing (unless `force`) files changed
    /// since the undo.
    pub(crate) async fn redo(&self, force: bool) -> Result<FilesRestored, Refused> {
        let outcome = self
            .run(move |store, inner| {
                let Some(redo) = store.redo.take() else {
                    return Ok(Ok(FilesRestored::default()));
                };
                let now = store.snapshot(inner, true)?;
                let current = store.objects.flatten(&now.tree)?;
                let mut report = FilesRestored::default();
                let mut targets = Vec::new();
                for (path, after_undo, before_undo) in &redo.paths {
                    let cur = current.get(path).copied();
                    if cur == *before_undo {
                        continue;
                    }
                    if cur != *after_undo {
                        report.kept.push(lossy(path));
                    }
                    targets.push((path.clone(), *before_undo));
                }
                if !report.kept.is_empty() && !force {
                    store.redo = Some(redo);
                    return Ok(Err(Refused::Changed(report.kept)));
                }
                let (done, failed) = store.apply(&inner.root, &targets);
                let _ = std::fs::remove_file(store.dir.join(REDO));
                report.restored = done;
                report.not_restored = failed;
                Ok(Ok(report))
            })
            .await;
        outcome.map_err(Refused::Failed)?
    }

    /// What the agent changed in `input`, as a unified diff.
    pub(crate) async fn diff(&self, input: InputId) -> Result<String, String> {
        self.run(move |store, _| {
            let rounds: Vec<&Round> = store
                .rounds
                .iter()
                .filter(|r| r.input_id == input.0)
                .collect();
            let span = store.span(&rounds)?;
            let side = |m: &BTreeMap<Vec<u8>, Option<Entry>>| -> Files {
                m.iter()
                    .filter_map(|(p, e)| e.map(|e| (p.clone(), e)))
                    .collect()
            };
            diff::unified(
                &store.objects,
                &side(&span.before),
                &side(&span.after),
                span.before.keys(),
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests;
