#![allow(clippy::unwrap_used)]

use super::objects::Objects;
use super::snapshot::{self, Cache, Walk};
use super::{changed, restore};
use std::path::Path;

fn take(root: &Path, objects: &Objects, cache: &mut Cache) -> super::Snap {
    let walk = Walk {
        root,
        exclude: &[],
        max_file_bytes: 1000,
    };
    snapshot::take(&walk, objects, cache, false).unwrap().0
}

#[test]
fn a_walk_records_changes_only_and_skips_git_ignored_and_large_files() {
    let work = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let w = work.path();
    std::fs::create_dir_all(w.join(".git/objects")).unwrap();
    std::fs::write(w.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(w.join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(w.join("a.txt"), "a\n").unwrap();
    std::fs::write(w.join("x.log"), "ignored\n").unwrap();
    std::fs::write(w.join("big"), vec![b'x'; 2000]).unwrap();
    let objects = Objects::open(store.path()).unwrap();
    let mut cache = Cache::default();
    let first = take(w, &objects, &mut cache);
    let files = objects.flatten(&first.tree).unwrap();
    let names: Vec<&[u8]> = files.keys().map(Vec::as_slice).collect();
    assert_eq!(names, [b".gitignore".as_slice(), b"a.txt"]);
    assert!(first.skipped.contains_key(b"big".as_slice()));
    assert_eq!(take(w, &objects, &mut cache), first);

    std::fs::write(w.join("a.txt"), "changed\n").unwrap();
    let second = take(w, &objects, &mut cache);
    let after = objects.flatten(&second.tree).unwrap();
    assert_eq!(changed(&files, &after), [b"a.txt".to_vec()]);
}

#[test]
fn a_restore_never_follows_a_symlink_out_of_the_workspace() {
    let work = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let w = work.path();
    std::fs::create_dir(w.join("sub")).unwrap();
    std::fs::write(w.join("sub/a.txt"), "mine\n").unwrap();
    let objects = Objects::open(store.path()).unwrap();
    let snap = take(w, &objects, &mut Cache::default());
    let entry = objects.flatten(&snap.tree).unwrap()[b"sub/a.txt".as_slice()];
    // The model swaps the directory for a symlink to somewhere else.
    std::fs::remove_dir_all(w.join("sub")).unwrap();
    std::os::unix::fs::symlink(outside.path(), w.join("sub")).unwrap();
    assert!(restore::put(w, &objects, b"sub/a.txt", Some(&entry)).is_err());
    assert!(restore::put(w, &objects, b"sub/a.txt", None).is_err());
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

/// A restored file replaces the one there in one rename: nothing is left under a temporary
/// name, a name as long as the file system allows restores too, and a restore that fails
/// leaves the file there as it was.
#[test]
fn a_restore_replaces_a_file_in_one_step_and_leaves_nothing_beside_it() {
    let work = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let w = work.path();
    let long = "n".repeat(255);
    std::fs::write(w.join("a.txt"), "recorded\n").unwrap();
    std::fs::write(w.join(&long), "recorded long\n").unwrap();
    std::os::unix::fs::symlink("a.txt", w.join("link")).unwrap();
    let objects = Objects::open(store.path()).unwrap();
    let snap = take(w, &objects, &mut Cache::default());
    let files = objects.flatten(&snap.tree).unwrap();
    std::fs::write(w.join("a.txt"), "the agent's\n").unwrap();
    std::fs::write(w.join(&long), "the agent's long\n").unwrap();
    std::fs::remove_file(w.join("link")).unwrap();
    std::fs::write(w.join("link"), "a file where the link was\n").unwrap();
    for name in ["a.txt", long.as_str(), "link"] {
        restore::put(w, &objects, name.as_bytes(), Some(&files[name.as_bytes()])).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(w.join("a.txt")).unwrap(),
        "recorded\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.join(&long)).unwrap(),
        "recorded long\n"
    );
    assert_eq!(
        std::fs::read_link(w.join("link")).unwrap(),
        Path::new("a.txt")
    );
    let mut names: Vec<String> = std::fs::read_dir(w)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a.txt", "link", long.as_str()]);

    // A restore that cannot get its content (a damaged store) leaves the file as it is.
    std::fs::write(w.join("a.txt"), "the user's\n").unwrap();
    let missing = super::objects::Entry {
        kind: gix_object::tree::EntryKind::Blob,
        id: gix_hash::ObjectId::null(gix_hash::Kind::Sha1),
    };
    assert!(restore::put(w, &objects, b"a.txt", Some(&missing)).is_err());
    assert_eq!(
        std::fs::read_to_string(w.join("a.txt")).unwrap(),
        "the user's\n"
    );
}

/// After each change, the checkpoint the watch drives (scanning only what changed) records
/// the same tree as a fresh walk of the whole workspace.
#[test]
fn a_watched_scan_records_what_a_whole_walk_does() {
    let work = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let w = work.path();
    std::fs::create_dir_all(w.join("a/b")).unwrap();
    std::fs::write(w.join("a/b/f"), "1").unwrap();
    std::fs::write(w.join("top"), "1").unwrap();
    let objects = Objects::open(store.path()).unwrap();
    let mut cache = Cache::default();
    take(w, &objects, &mut cache);
    type Step = Box<dyn Fn(&Path)>;
    let steps: Vec<(&str, Step)> = vec![
        (
            "edit",
            Box::new(|w| std::fs::write(w.join("a/b/f"), "22").unwrap()),
        ),
        (
            "create deep",
            Box::new(|w| {
                std::fs::create_dir_all(w.join("n/m")).unwrap();
                std::fs::write(w.join("n/m/g"), "g").unwrap();
            }),
        ),
        (
            "remove dir",
            Box::new(|w| std::fs::remove_dir_all(w.join("a/b")).unwrap()),
        ),
        (
            "recreate dir",
            Box::new(|w| {
                std::fs::create_dir_all(w.join("a/b/c")).unwrap();
                std::fs::write(w.join("a/b/c/h"), "h").unwrap();
            }),
        ),
        (
            "rename dir",
            Box::new(|w| std::fs::rename(w.join("n"), w.join("o")).unwrap()),
        ),
        (
            "ignore",
            Box::new(|w| std::fs::write(w.join(".gitignore"), "o/\n").unwrap()),
        ),
        (
            "symlink",
            Box::new(|w| std::os::unix::fs::symlink("/etc", w.join("o2")).unwrap()),
        ),
        ("nothing", Box::new(|_| {})),
    ];
    for (what, step) in steps {
        step(w);
        let watched = take(w, &objects, &mut cache);
        let fresh_store = tempfile::tempdir().unwrap();
        let fresh = Objects::open(fresh_store.path()).unwrap();
        let whole = take(w, &fresh, &mut Cache::default());
        assert_eq!(watched.tree, whole.tree, "after {what}");
    }
}
