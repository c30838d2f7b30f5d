use super::*;

fn walk_of(lines: &[&str], separator: u8, header: &str) -> Vec<u8> {
    let mut out = format!("{header}\n").into_bytes();
    for line in lines {
        out.extend_from_slice(line.as_bytes());
        out.push(separator);
    }
    out
}

fn file(path: &str, size: u64, mtime: u64) -> Record {
    Record {
        path: path.into(),
        kind: Type::File,
        size,
        mtime,
    }
}

fn dir(path: &str) -> Record {
    Record {
        path: path.into(),
        kind: Type::Dir,
        size: 0,
        mtime: 0,
    }
}

#[test]
fn both_stats_walks_are_read_and_each_path_must_be_beneath_the_base() {
    let lines = [
        "41ed 4096 1700000000 /w/src",
        "81a4 12 1700000001 /w/src/a b.rs",
        "a1ff 11 1700000002 /w/link",
        "81a4 5 -86400 /w/before-1970",
        "81a4 5 18446744073709551615 /w/far-future",
        "81a4 5 1700000003 /w/../etc/passwd",
        "81a4 5 1700000003 /w/src/../../etc/passwd",
        "81a4 5 1700000003 /etc/passwd",
        "81a4 5 1700000003 /.gitignore",
        "81a4 5 1700000003 /etc/.gitignore",
        "41ed 5 1700000003 /w/sub/.git",
        "81a4 5 1700000003 /.jj",
        "41ed 5 1700000003 /etc/.git",
        "81a4 5 1700000003 /w",
        "garbage",
        "zz 1 1 /w/x",
    ];
    for (separator, header) in [(b'\0', "0g"), (b'\n', "n")] {
        let walk = parse_walk(&walk_of(&lines, separator, header), Path::new("/w")).unwrap();
        let paths: Vec<_> = walk.entries.iter().map(|r| r.path.clone()).collect();
        assert_eq!(
            paths,
            [
                PathBuf::from("/w/src"),
                "/w/src/a b.rs".into(),
                "/w/link".into(),
                "/w/before-1970".into(),
                "/w/far-future".into(),
                "/w/sub/.git".into(),
            ]
        );
        assert_eq!(walk.entries[3].mtime, 0);
        let visited: Vec<&Record> = walk.entries[3..].iter().collect();
        let all = search::glob_matcher("*").unwrap();
        let found = glob(
            &visited,
            Path::new("/w"),
            Path::new("/w"),
            Path::new("/w"),
            &all,
        );
        assert_eq!(found.len(), 2);
        assert_eq!(walk.entries[0].kind, Type::Dir);
        assert_eq!(walk.entries[1].kind, Type::File);
        assert_eq!(walk.entries[1].size, 12);
        assert_eq!(walk.entries[2].kind, Type::Link);
        // An ignore file above the base counts; one elsewhere does not.
        let above: Vec<_> = walk.above.iter().map(|r| r.path.clone()).collect();
        assert_eq!(above, [PathBuf::from("/.gitignore")]);
        // The tops of repositories: below the base, and above it; not elsewhere.
        let mut tops: Vec<_> = walk.repositories.iter().cloned().collect();
        tops.sort();
        assert_eq!(tops, [PathBuf::from("/"), PathBuf::from("/w/sub")]);
    }
}

#[test]
fn a_walk_without_its_header_is_an_error_not_an_empty_listing() {
    assert!(parse_walk(b"", Path::new("/w")).is_err());
    assert!(parse_walk(b"sh: find: not found\n", Path::new("/w")).is_err());
}

#[test]
fn a_listing_names_entries_relative_to_its_base_with_file_sizes() {
    let walk = Walk {
        entries: vec![
            file("/w/b.txt", 3, 0),
            dir("/w/a"),
            Record {
                path: "/w/l".into(),
                kind: Type::Link,
                size: 7,
                mtime: 0,
            },
        ],
        above: vec![],
        repositories: HashSet::new(),
    };
    let listed: Vec<_> = listing(walk, Path::new("/w"))
        .into_iter()
        .map(|e| (e.name, e.is_dir, e.size))
        .collect();
    assert_eq!(
        listed,
        [
            ("a".to_owned(), true, None),
            ("b.txt".to_owned(), false, Some(3)),
            ("l".to_owned(), false, None)
        ]
    );
}

#[test]
fn ripgrep_precedence_decides_what_a_search_visits() {
    let walk = Walk {
        entries: vec![
            dir("/w/target"),
            file("/w/target/x.rs", 1, 0),
            file("/w/a.log", 1, 0),
            file("/w/keep.log", 1, 0),
            file("/w/.hidden.rs", 1, 0),
            file("/w/main.rs", 1, 0),
            dir("/w/sub"),
            file("/w/sub/gen.rs", 1, 0),
            file("/w/sub/ok.rs", 1, 0),
            file("/w/sub/.gitignore", 1, 0),
            Record {
                path: "/w/link.rs".into(),
                kind: Type::Link,
                size: 1,
                mtime: 0,
            },
        ],
        above: vec![],
        repositories: HashSet::from([PathBuf::from("/w")]),
    };
    let rules = [
        (PathBuf::from("/w/.gitignore"), b"target/\n*.log\n".to_vec()),
        (PathBuf::from("/w/.ignore"), b"!keep.log\n".to_vec()),
        (PathBuf::from("/w/sub/.gitignore"), b"gen.rs\n".to_vec()),
    ];
    let visited_paths = |ignores: &Ignores, glob: Option<&ignore::overrides::Override>| {
        visited(&walk, Path::new("/w"), ignores, glob)
            .into_iter()
            .map(|r| r.path.display().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        visited_paths(&Ignores::new(walk.repositories.clone(), &rules), None),
        ["/w/keep.log", "/w/main.rs", "/w/sub/ok.rs"]
    );
    // Outside a git repository, .gitignore rules do not count; .ignore rules do.
    assert_eq!(
        visited_paths(&Ignores::new(HashSet::new(), &rules), None),
        [
            "/w/a.log",
            "/w/keep.log",
            "/w/main.rs",
            "/w/sub/gen.rs",
            "/w/sub/ok.rs",
            "/w/target/x.rs"
        ]
    );
    // The grep's glob comes first: it names hidden and ignored files too.
    let glob = search::overrides(Path::new("/w"), Some("*.rs")).unwrap();
    assert_eq!(
        visited_paths(
            &Ignores::new(walk.repositories.clone(), &rules),
            Some(&glob)
        ),
        [
            "/w/.hidden.rs",
            "/w/main.rs",
            "/w/sub/gen.rs",
            "/w/sub/ok.rs"
        ]
    );
}

#[test]
fn a_glob_answers_newest_first_as_the_model_named_its_base() {
    let files = [
        file("/w/src/old.rs", 1, 100),
        file("/w/src/new.rs", 1, 300),
        file("/w/src/deep/mid.rs", 1, 200),
        file("/w/src/notes.txt", 1, 400),
    ];
    let visited: Vec<&Record> = files.iter().collect();
    let matcher = search::glob_matcher("**/*.rs").unwrap();
    assert_eq!(
        glob(
            &visited,
            Path::new("/w/src"),
            Path::new("/w/x/../src"),
            Path::new("/w"),
            &matcher
        ),
        ["x/../src/new.rs", "x/../src/deep/mid.rs", "x/../src/old.rs"]
    );
}

#[test]
fn fetches_are_batched_by_bytes_and_by_the_length_of_their_names() {
    let big = [
        file("/w/a", BATCH_BYTES - 10, 0),
        file("/w/b", 20, 0),
        file("/w/c", 1, 0),
        file("/w/huge", BATCH_BYTES * 2, 0),
        file("/w/too-big", MAX_READ_BYTES + 1, 0),
    ];
    let refs: Vec<&Record> = big.iter().collect();
    let batches = fetch_commands(&refs, Path::new("/w"));
    let names: Vec<Vec<&str>> = batches
        .iter()
        .map(|(_, b)| b.iter().map(|r| r.path.to_str().unwrap()).collect())
        .collect();
    assert_eq!(names, [vec!["/w/a"], vec!["/w/b", "/w/c"], vec!["/w/huge"]]);
    assert!(
        batches[1].0.starts_with("set -- '/w' './b' './c'\n"),
        "{}",
        batches[1].0
    );

    // Names with quotes cost four times over once quoted twice.
    let quoted: Vec<Record> = (0..2000)
        .map(|i| file(&format!("/w/{}{i}", "'".repeat(20)), 1, 0))
        .collect();
    let refs: Vec<&Record> = quoted.iter().collect();
    let batches = fetch_commands(&refs, Path::new("/w"));
    assert!(batches.len() > 1);
    for (command, _) in &batches {
        assert!(sh_quote(command).len() < 128 * 1024, "{}", command.len());
    }
    assert_eq!(batches.iter().map(|(_, b)| b.len()).sum::<usize>(), 2000);
}

#[test]
fn only_the_regular_files_asked_for_are_taken_from_an_archive() {
    let mut builder = tar::Builder::new(Vec::new());
    let mut add = |name: &str, kind: tar::EntryType, data: &[u8], link: Option<&str>| {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        let bytes = name.as_bytes();
        header.as_old_mut().name[..bytes.len()].copy_from_slice(bytes);
        if let Some(link) = link {
            header.set_link_name(link).unwrap();
        }
        header.set_cksum();
        builder.append(&header, data).unwrap();
    };
    add("./a.rs", tar::EntryType::Regular, b"fn a", None);
    add("b.rs", tar::EntryType::Regular, b"fn b", None);
    add("./c.rs", tar::EntryType::Symlink, b"", Some("/etc/passwd"));
    add("./../x.rs", tar::EntryType::Regular, b"fn x", None);
    add("./not-asked.rs", tar::EntryType::Regular, b"fn n", None);
    add("./d", tar::EntryType::Directory, b"", None);
    // A second hard link of a.rs, as tar sends it.
    add("./e.rs", tar::EntryType::Link, b"", Some("./a.rs"));
    add("./f.rs", tar::EntryType::Link, b"", Some("./nowhere.rs"));
    let tar = builder.into_inner().unwrap();
    let wanted: Vec<PathBuf> = [
        "/w/a.rs", "/w/b.rs", "/w/c.rs", "/x.rs", "/w/d", "/w/e.rs", "/w/f.rs",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    let files = unpack(&tar, Path::new("/w"), &wanted);
    assert_eq!(
        files,
        [
            (PathBuf::from("/w/a.rs"), b"fn a".to_vec()),
            (PathBuf::from("/w/b.rs"), b"fn b".to_vec()),
            (PathBuf::from("/w/e.rs"), b"fn a".to_vec())
        ]
    );
    assert!(unpack(b"not a tar archive at all", Path::new("/w"), &wanted).is_empty());
}

#[test]
fn a_grep_stops_at_its_budget_and_says_so() {
    let options = GrepOptions {
        pattern: "x".into(),
        path: "/w".into(),
        glob: None,
        case_insensitive: false,
        max_results: 100,
        mode: GrepMode::Content,
    };
    let mut grep = Grep::new(&options, "/w".into(), "/w".into(), "/w".into()).unwrap();
    // The first batch always goes, whatever its size.
    assert!(grep.budget(MAX_GREP_BYTES + 1));
    grep.search(&[(PathBuf::from("/w/a"), b"x\n".to_vec())]);
    assert!(!grep.budget(1));
    assert!(grep.done());
    let report = grep.report();
    assert!(
        report.starts_with("a:1:x\n[search stopped after"),
        "{report}"
    );
}

#[test]
fn a_command_passes_hostile_names_as_arguments() {
    let command = command("echo \"$1\"", &[OsStr::new("'; touch /tmp/pwned; '$(id)")]);
    let out = std::process::Command::new("sh")
        .args(["-c", &command])
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"'; touch /tmp/pwned; '$(id)\n");
}

/// A workspace with what a walk must get right: ignore rules, hidden entries, a link, a name
/// with a newline (which ends a record of busybox's stat).
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for (name, content) in [
        (".git/HEAD", "ref: refs/heads/main\n"),
        (".gitignore", "target/\n"),
        ("src/main.rs", "fn main() {}\n"),
        ("src/deep/mod.rs", "fn deep() {}\n"),
        ("target/x.rs", "fn ignored() {}\n"),
        (".hidden.rs", "fn hidden() {}\n"),
        ("sp ace.rs", "fn spaced() {}\n"),
        ("new\nline.rs", "fn newline() {}\n"),
    ] {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    std::os::unix::fs::symlink("/etc/passwd", root.join("link.rs")).unwrap();
    dir
}

/// Runs `command` with `sh` from `path` (the host's, or busybox's applets).
fn run(command: &str, path: Option<&Path>) -> Vec<u8> {
    let mut sh = std::process::Command::new("sh");
    sh.args(["-c", command]);
    if let Some(path) = path {
        sh.env("PATH", path);
    }
    let out = sh.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Walks `root` with the scripts, fetches its ignore files with the fetch script, and
/// answers a `**/*.rs` glob and a depth-2 listing.
fn walk_answers(root: &Path, path: Option<&Path>) -> (Vec<String>, Vec<String>) {
    let walk = parse_walk(&run(&tree_command(root), path), root).unwrap();
    assert!(walk.repositories.contains(root), "{:?}", walk.repositories);
    // What the rules above and at the base exclude by name is never entered (when they
    // can be read as ripgrep reads them).
    let plain = std::fs::read(root.join(".gitignore")).is_ok_and(|r| r.is_ascii());
    assert!(
        !plain
            || walk
                .entries
                .iter()
                .all(|r| !r.path.starts_with(root.join("target"))),
        "{:?}",
        walk.entries
    );
    let mut rules = Vec::new();
    for (command, batch) in fetch_commands(&ignore_files(&walk), Path::new("/")) {
        let wanted: Vec<PathBuf> = batch.iter().map(|r| r.path.clone()).collect();
        rules.extend(unpack(&run(&command, path), Path::new("/"), &wanted));
    }
    let visited = visited(
        &walk,
        root,
        &Ignores::new(walk.repositories.clone(), &rules),
        None,
    );
    let matcher = search::glob_matcher("**/*.rs").unwrap();
    let mut globbed = glob(&visited, root, root, root, &matcher);
    globbed.sort();
    let listed = listing(
        parse_walk(&run(&list_command(root, 2), path), root).unwrap(),
        root,
    )
    .into_iter()
    .map(|e| format!("{} {} {:?}", e.name, e.is_dir, e.size))
    .collect();
    (globbed, listed)
}

/// What the local search and listing answer for `root`.
fn local_answers(root: &Path) -> (Vec<String>, Vec<String>) {
    let protected = super::super::super::ProtectedPaths::default();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut globbed = search::glob(root, root, "**/*.rs", &protected, &stop).unwrap();
    globbed.sort();
    let listed = super::super::super::files::list(root, 2, &protected, &stop)
        .unwrap()
        .into_iter()
        .map(|e| format!("{} {} {:?}", e.name, e.is_dir, e.size))
        .collect();
    (globbed, listed)
}

#[test]
fn the_walk_over_gnu_find_and_stat_answers_as_the_local_search() {
    let dir = workspace();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(walk_answers(&root, None), local_answers(&root));
}

/// A directory of busybox's applets for the scripts, where busybox is (`.ci/run` installs
/// it; missing under `CI=true`, a failure).
fn busybox_bin() -> Option<tempfile::TempDir> {
    let Ok(busybox) = which_busybox() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "busybox is missing (.ci/run installs busybox-static)"
        );
        return None;
    };
    let bin = tempfile::tempdir().unwrap();
    for applet in [
        "sh", "find", "stat", "tar", "head", "wc", "tr", "grep", "printf",
    ] {
        std::os::unix::fs::symlink(&busybox, bin.path().join(applet)).unwrap();
    }
    Some(bin)
}

#[test]
fn the_walk_over_busybox_answers_as_the_local_search() {
    let Some(bin) = busybox_bin() else { return };
    let dir = workspace();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(walk_answers(&root, Some(bin.path())), local_answers(&root));
}

fn which_busybox() -> Result<PathBuf, ()> {
    ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or(())
}

#[test]
fn ignore_files_are_read_shallowest_first_within_their_caps() {
    let mut entries: Vec<Record> = (0..MAX_IGNORE_FILES + 5)
        .map(|n| file(&format!("/w/d{n}/.ignore"), 10, 0))
        .collect();
    entries.push(file("/w/.gitignore", 10, 0));
    entries.push(file("/w/big/.ignore", MAX_IGNORE_FILE + 1, 0));
    let walk = Walk {
        entries,
        above: vec![file("/.ignore", 10, 0)],
        repositories: HashSet::new(),
    };
    let files = ignore_files(&walk);
    assert_eq!(files.len(), MAX_IGNORE_FILES);
    assert_eq!(files[0].path, Path::new("/.ignore"));
    assert_eq!(files[1].path, Path::new("/w/.gitignore"));
    assert!(files.iter().all(|r| r.size <= MAX_IGNORE_FILE));

    // 16 MiB of them in all.
    let walk = Walk {
        entries: (0..40)
            .map(|n| file(&format!("/w/d{n}/.ignore"), MAX_IGNORE_FILE, 0))
            .collect(),
        above: vec![],
        repositories: HashSet::new(),
    };
    assert_eq!(
        ignore_files(&walk).len() as u64,
        MAX_IGNORE_BYTES / MAX_IGNORE_FILE
    );
}

/// ripgrep reads `.gitignore` files from the nearest repository's top down and none above
/// it, a nested repository's own; the scripts and the rules here do the same.
#[test]
fn repository_tops_bound_the_gitignore_rules_as_ripgreps() {
    let dir = tempfile::tempdir().unwrap();
    let outer = std::fs::canonicalize(dir.path()).unwrap();
    for (name, content) in [
        (".gitignore", "*\n"),
        ("ws/.git/HEAD", "ref: refs/heads/main\n"),
        ("ws/.gitignore", "target/\ndist/\n"),
        ("ws/src/a.rs", ""),
        ("ws/target/b.rs", ""),
        ("ws/app/.git", "gitdir: elsewhere\n"),
        ("ws/app/.gitignore", "gen/\n"),
        ("ws/app/dist/c.rs", ""),
        ("ws/app/gen/e.rs", ""),
        ("ws/app/d.rs", ""),
        ("ws/plain/.gitignore", "*.rs\n"),
        ("ws/plain/f.rs", ""),
    ] {
        let path = outer.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let root = outer.join("ws");
    let (globbed, _) = walk_answers(&root, None);
    let (local, _) = local_answers(&root);
    assert_eq!(globbed, local);
    if let Some(bin) = busybox_bin() {
        assert_eq!(walk_answers(&root, Some(bin.path())).0, local);
    }
    // The outer `*` is above the top; the workspace's `dist/` stops at the nested
    // repository, whose own `gen/` holds in it.
    assert_eq!(globbed, ["app/d.rs", "app/dist/c.rs", "src/a.rs"]);
}

/// Pruning never hides what ripgrep shows: a take-back in an ignore file below the base,
/// `.git` named in an ignore file, and bytes the shell cannot read as ripgrep does.
#[test]
fn pruning_leaves_what_an_ignore_file_may_take_back_or_the_shell_cannot_read() {
    let cases: &[&[(&str, &[u8])]] = &[
        &[
            (".gitignore", b"target/\n"),
            ("sub/.gitignore", b"!target/\n"),
            ("sub/target/t.rs", b""),
            ("target/x.rs", b""),
        ],
        &[
            (".ignore", b".git\n"),
            (".gitignore", b"*.log\n"),
            ("app.log", b""),
            ("a.rs", b""),
        ],
        &[(".gitignore", b"targ\0et2\n"), ("target2/f.rs", b"")],
        &[(".gitignore", b"\xff\nout3/\n"), ("out3/f.rs", b"")],
        &[(".gitignore", b"{x}\n"), ("{x}/f.rs", b"")],
        &[
            (".gitignore", b"\xef\xbb\xbftarget/\r\n"),
            ("target/f.rs", b""),
            ("b.rs", b""),
        ],
    ];
    let bin = busybox_bin();
    for files in cases {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        for (name, content) in *files {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        let (local, _) = local_answers(&root);
        assert_eq!(walk_answers(&root, None).0, local, "{files:?}");
        if let Some(bin) = &bin {
            assert_eq!(walk_answers(&root, Some(bin.path())).0, local, "{files:?}");
        }
    }
}
