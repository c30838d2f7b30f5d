//! The apply_patch corpus: every operation, several hunks, hints, end-of-file, whitespace
//! drift, wrong context, and a failure in a later file that leaves earlier ones untouched.

use super::*;
use crate::exec::{EnvPolicy, LocalExecutionEnvironment};

fn patch(body: &str) -> String {
    format!("*** Begin Patch\n{body}*** End Patch\n")
}

/// Runs the tool against `files` in a temp dir; returns the result and the files afterwards.
fn run(
    files: &[(&str, &str)],
    patch_text: &str,
) -> (Result<String, ToolError>, Vec<(String, String)>) {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let env = LocalExecutionEnvironment::new(dir.path().to_owned(), EnvPolicy::InheritNone);
    let result =
        crate::tools::testing::run(&ApplyPatch, serde_json::json!({"patch": patch_text}), &env);
    let mut after: Vec<(String, String)> = walk(dir.path(), dir.path());
    after.sort();
    (result, after)
}

fn walk(root: &Path, dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(walk(root, &e.path()));
        } else {
            out.push((
                e.path().strip_prefix(root).unwrap().display().to_string(),
                std::fs::read_to_string(e.path()).unwrap(),
            ));
        }
    }
    out
}

fn files(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn add_delete_and_update_in_one_patch() {
    let (r, after) = run(
        &[
            ("old.py", "gone\n"),
            (
                "main.py",
                "def main():\n    print(\"Hello\")\n    return 0\n",
            ),
        ],
        &patch(
            "*** Add File: src/helpers.py\n+def greet(name):\n+    return name\n*** Delete File: old.py\n*** Update File: main.py\n@@ def main():\n     print(\"Hello\")\n-    return 0\n+    print(\"World\")\n+    return 1\n",
        ),
    );
    assert_eq!(
        r.unwrap(),
        "Success. Updated the following files:\nA src/helpers.py\nD old.py\nM main.py"
    );
    assert_eq!(
        after,
        files(&[
            (
                "main.py",
                "def main():\n    print(\"Hello\")\n    print(\"World\")\n    return 1\n"
            ),
            ("src/helpers.py", "def greet(name):\n    return name\n")
        ])
    );
}

#[test]
fn move_with_changes() {
    let (r, after) = run(
        &[("old_name.py", "import os\nimport sys\nimport old_dep\n")],
        &patch(
            "*** Update File: old_name.py\n*** Move to: new_name.py\n@@\n import os\n import sys\n-import old_dep\n+import new_dep\n",
        ),
    );
    assert!(
        r.unwrap()
            .ends_with("M new_name.py (moved from old_name.py)")
    );
    assert_eq!(
        after,
        files(&[("new_name.py", "import os\nimport sys\nimport new_dep\n")])
    );
}

#[test]
fn several_hunks_use_their_hints() {
    let original = "DEFAULT_TIMEOUT = 30\n\ndef load_config():\n    config = {}\n    config[\"debug\"] = False\n    return config\n\ndef other():\n    config[\"debug\"] = False\n";
    let (r, after) = run(
        &[("config.py", original)],
        &patch(
            "*** Update File: config.py\n@@ DEFAULT_TIMEOUT = 30\n-DEFAULT_TIMEOUT = 30\n+DEFAULT_TIMEOUT = 60\n@@ def other():\n-    config[\"debug\"] = False\n+    config[\"debug\"] = True\n",
        ),
    );
    r.unwrap();
    assert_eq!(
        after[0].1,
        "DEFAULT_TIMEOUT = 60\n\ndef load_config():\n    config = {}\n    config[\"debug\"] = False\n    return config\n\ndef other():\n    config[\"debug\"] = True\n",
        "the second hunk changed the occurrence after its hint"
    );
}

#[test]
fn end_of_file_hunks_match_at_the_end() {
    let (r, after) = run(
        &[("a.txt", "x\ny\nx\n")],
        &patch("*** Update File: a.txt\n@@\n-x\n+z\n*** End of File\n"),
    );
    r.unwrap();
    assert_eq!(after[0].1, "x\ny\nz\n");
}

#[test]
fn whitespace_and_punctuation_drift_is_tolerated() {
    let (r, after) = run(
        &[(
            "a.rs",
            "fn f() {\n\tlet s = \u{201C}x\u{201D};   \n\tg();\n}\n",
        )],
        &patch(
            "*** Update File: a.rs\n@@ fn f() {\n     let s = \"x\";\n-    g();\n+    h();\n }\n",
        ),
    );
    r.unwrap();
    assert_eq!(
        after[0].1,
        "fn f() {\n\tlet s = \u{201C}x\u{201D};   \n    h();\n}\n"
    );
}

#[test]
fn wrong_context_names_the_hunk_and_changes_nothing() {
    let original = [("a.txt", "one\ntwo\n"), ("b.txt", "three\n")];
    let (r, after) = run(
        &original,
        &patch(
            "*** Update File: a.txt\n@@\n-one\n+uno\n*** Update File: b.txt\n@@\n-four\n+cuatro\n",
        ),
    );
    let err = r.unwrap_err().0;
    assert!(
        err.starts_with(
            "hunk 1 of b.txt does not apply: these lines are not in the file:\n    four"
        ),
        "{err}"
    );
    assert_eq!(after, files(&original), "the first file is untouched too");
}

#[test]
fn a_failing_write_rolls_back_earlier_files() {
    // The second change needs a directory where a file is: the write fails after the first.
    let original = [("a.txt", "one\n"), ("blocker", "file\n")];
    let (r, after) = run(
        &original,
        &patch("*** Update File: a.txt\n@@\n-one\n+uno\n*** Add File: blocker/new.txt\n+x\n"),
    );
    assert!(r.unwrap_err().0.ends_with("no file was changed"));
    assert_eq!(after, files(&original));
}

#[test]
fn malformed_patches_say_where() {
    for (text, expected) in [
        (
            "*** Update File: a\n",
            "line 1: a patch must start with \"*** Begin Patch\"",
        ),
        (
            "*** Begin Patch\n*** Add File: a\n+x\n",
            "line 3: a patch must end with \"*** End Patch\"",
        ),
        (
            "*** Begin Patch\n*** Add File: a\nx\n*** End Patch\n",
            "line 3: in \"Add File: a\" every line must start with '+'",
        ),
        (
            "*** Begin Patch\n*** Frobnicate: a\n*** End Patch\n",
            "line 2: expected \"*** Add File:\"",
        ),
        (
            "*** Begin Patch\n*** End Patch\n",
            "the patch contains no operations",
        ),
    ] {
        let err = parse(text).unwrap_err();
        assert!(err.starts_with(expected), "{text:?}: {err}");
    }
    let (r, _) = run(&[("a", "x\n")], &patch("*** Add File: a\n+y\n"));
    assert!(r.unwrap_err().0.contains("the file already exists"));
    let (r, _) = run(&[], &patch("*** Delete File: nope\n"));
    assert!(r.unwrap_err().0.contains("does not exist"));
    let (r, _) = run(&[], &patch("*** Update File: nope\n@@\n-a\n+b\n"));
    assert!(r.unwrap_err().0.contains("file not found"));
}
