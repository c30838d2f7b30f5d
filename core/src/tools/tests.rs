//! The file and search tools against real directories: success and every error path.

use super::testing::run;
use super::*;
use crate::exec::{EnvPolicy, LocalExecutionEnvironment, ReadOnly};
use serde_json::json;
use std::path::Path;

fn tree(files: &[(&str, &str)]) -> (tempfile::TempDir, LocalExecutionEnvironment) {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let env = LocalExecutionEnvironment::new(dir.path().to_owned(), EnvPolicy::InheritCore);
    (dir, env)
}

fn err(r: Result<String, ToolError>) -> String {
    r.unwrap_err().0
}

#[test]
fn grep_modes_globs_case_and_gitignore() {
    let (_d, env) = tree(&[
        ("src/a.rs", "fn alpha() {}\nfn beta() {}\n"),
        ("src/b.py", "def alpha():\n    pass\n"),
        ("target/gen.rs", "fn alpha() {}\n"),
        (".gitignore", "target/\n"),
        ("bin.dat", "alpha\0binary"),
    ]);
    std::process::Command::new("git")
        .arg("init")
        .arg("-q")
        .current_dir(env.working_directory())
        .status()
        .unwrap();
    let grep = Grep { output_modes: true };
    assert_eq!(
        run(&grep, json!({"pattern": "alpha"}), &env).unwrap(),
        "src/a.rs:1:fn alpha() {}\nsrc/b.py:1:def alpha():"
    );
    assert_eq!(
        run(
            &grep,
            json!({"pattern": "ALPHA", "case_insensitive": true, "glob_filter": "*.py"}),
            &env
        )
        .unwrap(),
        "src/b.py:1:def alpha():"
    );
    assert_eq!(
        run(
            &grep,
            json!({"pattern": "fn", "output_mode": "count"}),
            &env
        )
        .unwrap(),
        "src/a.rs:2"
    );
    assert_eq!(
        run(
            &grep,
            json!({"pattern": "a", "output_mode": "files_with_matches"}),
            &env
        )
        .unwrap(),
        "src/a.rs\nsrc/b.py"
    );
    let capped = run(&grep, json!({"pattern": "fn", "max_results": 1}), &env).unwrap();
    assert!(
        capped.starts_with("src/a.rs:1:fn alpha() {}\n[results stopped at max_results = 1"),
        "{capped}"
    );
    assert_eq!(
        run(&grep, json!({"pattern": "zzz"}), &env).unwrap(),
        "No matches found."
    );
    assert_eq!(
        run(&grep, json!({"pattern": "beta", "path": "src/a.rs"}), &env).unwrap(),
        "src/a.rs:2:fn beta() {}"
    );
    // A symlinked root is searched where it leads, and shown as it was named.
    std::os::unix::fs::symlink("src", env.working_directory().join("code")).unwrap();
    assert_eq!(
        run(&grep, json!({"pattern": "beta", "path": "code"}), &env).unwrap(),
        "code/a.rs:2:fn beta() {}"
    );
    assert!(err(run(&grep, json!({"pattern": "("}), &env)).starts_with("invalid regex \"(\""));
    assert!(
        err(run(&grep, json!({"pattern": "a", "path": "nope"}), &env))
            .starts_with("file not found")
    );
}

#[test]
fn glob_lists_newest_first_and_respects_separators() {
    let (d, env) = tree(&[
        ("a.rs", ""),
        ("src/b.rs", ""),
        ("src/deep/c.rs", ""),
        ("d.txt", ""),
    ]);
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for f in ["a.rs", "src/deep/c.rs"] {
        std::fs::File::options()
            .write(true)
            .open(d.path().join(f))
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    assert_eq!(
        run(&Glob, json!({"pattern": "**/*.rs"}), &env).unwrap(),
        "src/b.rs\na.rs\nsrc/deep/c.rs"
    );
    assert_eq!(
        run(&Glob, json!({"pattern": "*.rs"}), &env).unwrap(),
        "a.rs"
    );
    assert_eq!(
        run(&Glob, json!({"pattern": "*.rs", "path": "src"}), &env).unwrap(),
        "src/b.rs"
    );
    assert_eq!(
        run(&Glob, json!({"pattern": "*.go"}), &env).unwrap(),
        "No files match \"*.go\"."
    );
    assert!(err(run(&Glob, json!({"pattern": "a["}), &env)).starts_with("invalid glob"));
}

#[test]
fn list_read_many_and_write() {
    let (d, env) = tree(&[
        ("a.txt", "one\n"),
        ("sub/b.txt", "two\n"),
        ("img.bin", "\0\0"),
    ]);
    assert_eq!(
        run(&ListDir, json!({}), &env).unwrap(),
        "a.txt (4 bytes)\nimg.bin (2 bytes)\nsub/"
    );
    assert_eq!(
        run(&ListDir, json!({"depth": 2}), &env).unwrap(),
        "a.txt (4 bytes)\nimg.bin (2 bytes)\nsub/\nsub/b.txt (4 bytes)"
    );
    assert!(err(run(&ListDir, json!({"path": "nope"}), &env)).starts_with("file not found"));
    let many = run(
        &ReadManyFiles,
        json!({"paths": ["a.txt", "**/*.txt", "img.bin", "missing.txt"]}),
        &env,
    )
    .unwrap();
    assert!(
        many.contains("--- a.txt ---\n  1 | one\n")
            && many.contains("--- sub/b.txt ---\n  1 | two\n"),
        "{many}"
    );
    assert!(
        many.contains("Skipped: img.bin (binary); missing.txt (file not found"),
        "{many}"
    );
    assert_eq!(
        run(
            &WriteFile,
            json!({"file_path": "new/deep/c.txt", "content": "hi"}),
            &env
        )
        .unwrap(),
        "Wrote 2 bytes to new/deep/c.txt"
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("new/deep/c.txt")).unwrap(),
        "hi"
    );
    assert!(
        err(run(&ReadFile, json!({"file_path": "img.bin"}), &env))
            .ends_with("is a binary file; read_file only reads text")
    );
}

#[test]
fn edit_file_on_disk_and_read_only_sessions() {
    let (d, env) = tree(&[("a.txt", "hello world\n")]);
    assert_eq!(
        run(
            &EditFile,
            json!({"file_path": "a.txt", "old_string": "world", "new_string": "there"}),
            &env
        )
        .unwrap(),
        "Replaced 1 occurrence in a.txt"
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("a.txt")).unwrap(),
        "hello there\n"
    );
    assert!(
        err(run(
            &EditFile,
            json!({"file_path": "missing.txt", "old_string": "a", "new_string": "b"}),
            &env
        ))
        .starts_with("file not found")
    );
    let read_only = ReadOnly(LocalExecutionEnvironment::new(
        d.path().to_owned(),
        EnvPolicy::InheritCore,
    ));
    assert_eq!(
        err(run(
            &WriteFile,
            json!({"file_path": "x", "content": ""}),
            &read_only
        )),
        "write operations are disabled in read-only mode"
    );
    assert!(
        err(run(
            &EditFile,
            json!({"file_path": "a.txt", "old_string": "there", "new_string": "x"}),
            &read_only
        ))
        .contains("read-only")
    );
    assert_eq!(
        run(&ReadFile, json!({"file_path": "a.txt"}), &read_only).unwrap(),
        "  1 | hello there\n"
    );
    assert!(!Path::new(&d.path().join("x")).exists());
}
