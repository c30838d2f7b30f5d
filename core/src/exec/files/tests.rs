//! The file operations against real directories: writes and removals opened beneath their
//! root (symlinks, `..`, a symlink swapped in while writing), reads of regular files only, the
//! size cap, and agentd's own files.

use super::*;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::sync::Arc;

/// A root (the writable root) beside `outside`, both real paths.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let (root, outside) = (real.join("root"), real.join("outside"));
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(&outside).unwrap();
        Self {
            _dir: dir,
            root,
            outside,
        }
    }

    fn write(&self, rel: &str, content: &str) -> Result<(), String> {
        let shown = self.root.join(rel);
        write_beneath(
            &shown,
            &self.root,
            Path::new(rel),
            content.as_bytes(),
            &ProtectedPaths::default(),
        )
        .map_err(|e| e.to_string())
    }

    fn outside_is_empty(&self) {
        let left: Vec<_> = std::fs::read_dir(&self.outside)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "written outside: {left:?}");
    }
}

#[test]
fn writes_beneath_the_root_make_parents_and_replace_content() {
    let f = Fixture::new();
    f.write("a/b/c.txt", "long content\n").unwrap();
    f.write("a/b/c.txt", "short\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(f.root.join("a/b/c.txt")).unwrap(),
        "short\n"
    );
    // A symlink beside its target, within the directory, is written through.
    symlink("c.txt", f.root.join("a/b/alias")).unwrap();
    f.write("a/b/alias", "via alias\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(f.root.join("a/b/c.txt")).unwrap(),
        "via alias\n"
    );
    let e = f.write("a", "x").unwrap_err();
    assert!(e.contains("is a directory"), "{e}");
}

#[test]
fn a_path_leading_out_of_the_root_is_refused_and_nothing_is_written() {
    let f = Fixture::new();
    symlink(&f.outside, f.root.join("abs")).unwrap();
    symlink("../outside", f.root.join("rel")).unwrap();
    symlink(f.outside.join("new.txt"), f.root.join("file-link")).unwrap();
    for path in ["abs/x.txt", "rel/x.txt", "abs/new/x.txt", "file-link"] {
        let e = f.write(path, "x").unwrap_err();
        assert!(e.contains("leads out of the writable root"), "{path}: {e}");
    }
    let e = f.write("../outside/x.txt", "x").unwrap_err();
    assert!(e.contains("`..`"), "{e}");
    f.outside_is_empty();
    let e = remove_beneath(
        &f.root.join("abs/x"),
        &f.root,
        Path::new("abs/x"),
        &ProtectedPaths::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("leads out of"), "{e}");
}

#[test]
fn a_removal_unlinks_the_link_itself_beneath_the_root() {
    let f = Fixture::new();
    std::fs::write(f.outside.join("keep"), "x").unwrap();
    symlink(f.outside.join("keep"), f.root.join("link")).unwrap();
    std::fs::create_dir(f.root.join("dir")).unwrap();
    let remove = |rel: &str| {
        remove_beneath(
            &f.root.join(rel),
            &f.root,
            Path::new(rel),
            &ProtectedPaths::default(),
        )
        .map_err(|e| e.to_string())
    };
    remove("link").unwrap();
    assert!(f.outside.join("keep").exists());
    assert!(!f.root.join("link").is_symlink());
    assert!(remove("dir").unwrap_err().contains("is a directory"));
    assert!(remove("missing").unwrap_err().starts_with("file not found"));
}

/// A thread swaps `root/d` between a directory and a symlink out of the root while writes
/// and removals go beneath it: each lands in the directory or fails, never outside.
#[test]
fn a_symlink_swapped_in_while_writing_never_carries_a_write_out() {
    let f = Fixture::new();
    std::fs::create_dir(f.root.join("d")).unwrap();
    symlink(&f.outside, f.root.join("alt")).unwrap();
    std::fs::write(f.outside.join("victim"), "x").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let swapper = {
        let (stop, swaps, a, b) = (
            stop.clone(),
            swaps.clone(),
            f.root.join("d"),
            f.root.join("alt"),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                nix::fcntl::renameat2(
                    AT_FDCWD,
                    &a,
                    AT_FDCWD,
                    &b,
                    nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                )
                .unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // On a loaded machine the swapper may start late: the race begins once it runs.
    while swaps.load(Ordering::Relaxed) == 0 {
        std::thread::yield_now();
    }
    let (mut wrote, mut refused) = (0, 0);
    // 2,000 writes, and more until one lands in the directory (on a loaded machine the
    // swapper can win every race of a run), within a bound.
    let mut i = 0;
    while (i < 2000 || wrote == 0) && i < 200_000 {
        i += 1;
        match f.write(&format!("d/f{i}"), "x") {
            Ok(()) => wrote += 1,
            Err(e) => {
                assert!(e.contains("leads out of the writable root"), "{e}");
                refused += 1;
            }
        }
        let _ = remove_beneath(
            &f.root.join("d/victim"),
            &f.root,
            Path::new("d/victim"),
            &ProtectedPaths::default(),
        );
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    let swaps = swaps.load(Ordering::Relaxed);
    eprintln!("{swaps} swaps, {wrote} writes, {refused} refused");
    assert!(swaps > 0 && wrote > 0);
    let outside: Vec<_> = std::fs::read_dir(&f.outside)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(outside, ["victim"]);
}

#[test]
fn only_regular_files_are_read_and_a_fifo_never_blocks() {
    let f = Fixture::new();
    let none = ProtectedPaths::default();
    let fifo = f.root.join("p");
    nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
    let read = |p: &Path| read_regular(p, &none).map_err(|e| e.to_string());
    assert_eq!(
        read(&fifo).unwrap_err(),
        format!(
            "{} is a FIFO (named pipe); file tools read and write regular files only",
            fifo.display()
        )
    );
    assert!(read(&f.root).unwrap_err().contains("is a directory"));
    assert!(
        read(Path::new("/dev/null"))
            .unwrap_err()
            .contains("is a character device")
    );
    // Writing one without a reader does not block either.
    let e = write_beneath(&fifo, &f.root, Path::new("p"), b"x", &none).unwrap_err();
    assert!(e.to_string().contains("is a FIFO"), "{e}");
    let e = write_unconfined(&fifo, b"x", &none).unwrap_err();
    assert!(e.to_string().contains("is a FIFO"), "{e}");
}

#[test]
fn reads_stop_at_the_cap() {
    let f = Fixture::new();
    let big = f.root.join("big");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(MAX_READ_BYTES + 1).unwrap();
    let e = read_regular(&big, &ProtectedPaths::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("is 67108865 bytes; file tools read files of at most 64 MiB"),
        "{e}"
    );
    file.set_len(3).unwrap();
    assert_eq!(
        read_regular(&big, &ProtectedPaths::default()).unwrap(),
        [0, 0, 0]
    );
}

#[test]
fn unconfined_writes_follow_a_symlink_but_not_one_to_nothing() {
    let f = Fixture::new();
    let none = ProtectedPaths::default();
    std::fs::write(f.outside.join("target"), "old").unwrap();
    symlink(f.outside.join("target"), f.root.join("link")).unwrap();
    symlink(f.outside.join("nothing"), f.root.join("dangling")).unwrap();
    write_unconfined(&f.root.join("link"), b"new", &none).unwrap();
    assert_eq!(
        std::fs::read_to_string(f.outside.join("target")).unwrap(),
        "new"
    );
    write_unconfined(&f.root.join("made/dirs/file"), b"x", &none).unwrap();
    assert!(f.root.join("made/dirs/file").is_file());
    let e = write_unconfined(&f.root.join("dangling"), b"x", &none).unwrap_err();
    assert!(
        e.to_string()
            .contains("symbolic link to a path that does not exist")
    );
    assert!(!f.outside.join("nothing").exists());
    remove_unconfined(&f.root.join("link"), &none).unwrap();
    assert!(f.outside.join("target").exists());
}

#[test]
fn agentd_files_are_neither_read_nor_written_nor_listed() {
    let f = Fixture::new();
    let config = f.root.join("config");
    std::fs::create_dir(&config).unwrap();
    let creds = config.join("credentials.json");
    std::fs::write(&creds, "secret").unwrap();
    std::fs::write(f.root.join("ok"), "ok").unwrap();
    symlink(&creds, f.outside.join("creds")).unwrap();
    symlink(&config, f.root.join("cfg")).unwrap();
    let protected = ProtectedPaths::new([config.clone()], Some(creds.clone()));
    let refused = |r: Result<(), Error>| {
        let e = r.unwrap_err().to_string();
        assert!(
            e.starts_with("agentd's own files are not readable by tools"),
            "{e}"
        );
    };
    refused(read_regular(&f.outside.join("creds"), &protected).map(drop));
    refused(write_unconfined(&f.outside.join("creds"), b"x", &protected));
    refused(write_unconfined(&config.join("new"), b"x", &protected));
    refused(write_beneath(
        &creds,
        &f.root,
        Path::new("config/credentials.json"),
        b"x",
        &protected,
    ));
    refused(remove_unconfined(&creds, &protected));
    assert_eq!(std::fs::read_to_string(&creds).unwrap(), "secret");
    assert!(!config.join("new").exists());
    let stop = AtomicBool::new(false);
    refused(list(&f.root.join("cfg"), 1, &protected, &stop).map(drop));
    let names: Vec<String> = list(&f.root, 3, &protected, &stop)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    // The directory and the link are listed by name, never entered.
    assert_eq!(names, ["cfg", "config", "ok"]);
}

#[test]
fn a_listing_stays_in_its_tree_and_stops_when_abandoned() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.root.join("a/b")).unwrap();
    std::fs::write(f.root.join("a/b/c.txt"), "12345").unwrap();
    std::fs::write(f.outside.join("o"), "").unwrap();
    symlink(&f.outside, f.root.join("a/out")).unwrap();
    let none = ProtectedPaths::default();
    let stop = AtomicBool::new(false);
    let listed: Vec<(String, bool, Option<u64>)> = list(&f.root, 10, &none, &stop)
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.is_dir, e.size))
        .collect();
    assert_eq!(
        listed,
        [
            ("a".into(), true, None),
            ("a/b".into(), true, None),
            ("a/b/c.txt".into(), false, Some(5)),
            ("a/out".into(), false, None),
        ]
    );
    let depth1: Vec<String> = list(&f.root, 1, &none, &stop)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(depth1, ["a"]);
    stop.store(true, Ordering::Relaxed);
    assert!(matches!(
        list(&f.root, 10, &none, &stop),
        Err(Error::Cancelled)
    ));
}
