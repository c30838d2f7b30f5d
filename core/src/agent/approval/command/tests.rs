//! Tests of the command line analysis: what is vouched for, how lines split into simple
//! commands, every deny spelling, what stays hidden, and the bounds.

use super::*;

/// The simple commands of a line the parser vouches for.
fn vouched(line: &str) -> Vec<String> {
    let analysed = analyse(line);
    assert_eq!(analysed.unvouched, None, "{line:?}");
    assert_eq!(analysed.hidden, None, "{line:?}");
    analysed.commands
}

/// Why the parser cannot vouch for `line`; it must say `says`.
fn check_unvouched(line: &str, says: &str) {
    let analysed = analyse(line);
    let why = analysed.unvouched.unwrap_or_default();
    assert!(why.contains(says), "{line:?}: {why:?} should say {says:?}");
}

#[test]
fn a_line_splits_into_its_simple_commands() {
    assert_eq!(vouched("git status; rm -rf x"), ["git status", "rm -rf x"]);
    assert_eq!(vouched("git status\nrm -rf x"), ["git status", "rm -rf x"]);
    assert_eq!(vouched("a && b || c"), ["a", "b", "c"]);
    assert_eq!(vouched("a | b |& c"), ["a", "b", "c"]);
    assert_eq!(vouched("a &&\n  b # note"), ["a", "b"]);
    assert_eq!(vouched("git status \\\n  --short"), ["git status --short"]);
    assert_eq!(vouched(""), Vec::<String>::new());
}

#[test]
fn quotes_and_escapes_are_removed_from_words() {
    assert_eq!(
        vouched(r#"echo 'a b' "c\"d" e\ f \rm 'x'"y"z 12 -1"#),
        [r#"echo a b c"d e f rm xyz 12 -1"#]
    );
    assert_eq!(vouched(r#"echo "a\b" 'c\d'"#), [r#"echo a\b c\d"#]);
    assert_eq!(vouched(r"find . -exec rm {} \;"), ["find . -exec rm {} ;"]);
    assert_eq!(vouched(r"echo \*"), ["echo *"]);
}

#[test]
fn redirections_belong_to_their_command_and_name_their_files() {
    let analysed = analyse("cargo test 2>&1 | tail -5 > out.txt; a && b >> log 2>/dev/null");
    assert_eq!(analysed.unvouched, None);
    assert_eq!(
        analysed.commands,
        [
            "cargo test 2>&1",
            "tail -5 > out.txt",
            "a",
            "b >> log 2> /dev/null"
        ]
    );
    assert_eq!(analysed.redirect_paths, ["out.txt", "log"]);
    let analysed = analyse("> first echo x 3<&0 4>&- &> both");
    assert_eq!(analysed.commands, ["echo x > first 3<&0 4>&- &> both"]);
    assert_eq!(analysed.redirect_paths, ["first", "both"]);
}

#[test]
fn constructs_the_parser_cannot_vouch_for_are_named() {
    for (line, says) in [
        ("git status $(rm -rf x)", "command substitution"),
        ("git status `rm -rf x`", "command substitution"),
        ("echo $HOME", "variable expansion"),
        ("echo ${HOME}", "variable expansion"),
        (r#"echo "$HOME""#, "variable expansion"),
        ("echo a$", "variable expansion"),
        ("diff <(ls) x", "process substitution"),
        ("echo $((1+2))", "arithmetic"),
        ("(rm x)", "subshell"),
        ("{ rm x; }", "brace group"),
        ("f() { rm x; }", "function"),
        ("if true; then rm x; fi", "control flow"),
        ("for f in a; do rm $f; done", "control flow"),
        ("while true; do rm x; done", "control flow"),
        ("case x in x) rm x;; esac", "control flow"),
        ("cat <<EOF\nrm x\nEOF", "here-document"),
        ("cat <<< x", "here-string"),
        ("X=1 ls", "assignment"),
        ("PATH=. ls", "assignment"),
        ("LD_PRELOAD=/x.so ls", "assignment"),
        ("export X=1", "declaration"),
        ("eval 'rm -rf x'", "`eval`"),
        ("exec rm x", "`exec`"),
        ("source x.sh", "`source`"),
        (". x.sh", "`.`"),
        ("command eval x", "`eval`"),
        ("alias ls='rm -rf x'", "`alias`"),
        ("hash -p /bin/rm ls", "`hash`"),
        ("let 'x=1'", "`let`"),
        ("read 'a[$(rm -rf x)]'", "array subscript"),
        ("printf -v 'a[`rm -rf x`]' x", "array subscript"),
        ("rm x &", "background"),
        ("! rm x", "negated"),
        ("[ -f x ] && rm x", "test expression"),
        ("echo $'\\x72m'", "$'...'"),
        ("ls *.rs", "glob"),
        ("ls a?", "glob"),
        ("ls [ab]", "glob"),
        ("echo x{a,b}", "brace pattern"),
        ("echo {1..3}", "brace pattern"),
        ("echo \"unterminated", "does not parse"),
        ("echo )", "does not parse"),
        ("echo a\0b", "NUL"),
        ("echo\u{a0}x", "part of a word"),
        // tree-sitter reads these as blanks; bash as parts of a word.
        ("git status\r--short", "skipped"),
        ("echo a\u{b}b", "skipped"),
        ("cd src && ls > list.txt", "after changing directory"),
        ("echo x > ~/x", "starts with ~"),
    ] {
        check_unvouched(line, says);
    }
}

#[test]
fn deny_forms_see_every_spelling_of_a_command() {
    for line in [
        "rm -rf x",
        "/bin/rm -rf x",
        "/usr/bin/rm -rf x",
        "./rm -rf x",
        r"\rm -rf x",
        "'rm' -rf x",
        r#""r"m -rf x"#,
        "command rm -rf x",
        "command -p -- rm -rf x",
        "builtin command rm -rf x",
        "exec -a name rm -rf x",
        "env X=1 rm -rf x",
        "env -i -u HOME --chdir=/ - Y=2 rm -rf x",
        "x=1 rm -rf x",
        "PATH=/bin rm -rf x",
        "true && rm -rf x",
        "false || rm -rf x",
        "ls | rm -rf x",
        "nice -n 5 rm -rf x",
        "nice -5 rm -rf x",
        "nohup rm -rf x",
        "time -p rm -rf x",
        "timeout -s KILL 10 rm -rf x",
        "timeout --signal=KILL 10s rm -rf x",
        "xargs rm -rf x",
        "xargs -0 -n 1 -I{} rm -rf x",
        "sudo -u root -E rm -rf x",
        "sudo --user=root A=1 rm -rf x",
        "doas -u root rm -rf x",
        "stdbuf -oL rm -rf x",
        "setsid -f rm -rf x",
        "busybox rm -rf x",
        "env nice nohup timeout 5 /bin/rm -rf x",
        "find . -name y -exec rm -rf x \\;",
        "find . -execdir /bin/rm -rf x +",
        "sh -c 'rm -rf x'",
        "bash -lc \"rm -rf x\"",
        "bash -e -o pipefail -c 'ls; rm -rf x'",
        "dash -c 'true && rm -rf x' arg0",
        "sh -c \"sh -c 'rm -rf x'\"",
        "/bin/sh -c 'env /bin/rm -rf x'",
        "echo $(rm -rf x)",
        "echo `rm -rf x`",
        "diff <(rm -rf x) y",
        "for f in a; do rm -rf x; done",
        "if true; then rm -rf x; fi",
        "f() { rm -rf x; }",
        "(cd / && rm -rf x)",
        "X=$(rm -rf x) ls",
        "rm -rf x > /dev/null 2>&1",
    ] {
        let forms = analyse(line).deny_forms;
        assert!(
            forms
                .iter()
                .any(|f| f == "rm -rf x" || f.starts_with("rm -rf x ")),
            "{line:?}: {forms:?}"
        );
    }
    // Words that only look like the program are not it.
    for line in ["echo rm -rf x", "git rm -rf x", "xargs -I rm echo -rf x"] {
        let forms = analyse(line).deny_forms;
        assert!(
            !forms.iter().any(|f| f.starts_with("rm ")),
            "{line:?}: {forms:?}"
        );
    }
}

#[test]
fn what_deny_rules_cannot_see_is_named() {
    for (line, says) in [
        ("echo 'rm -rf x' | sh", "`sh` on a script or its input"),
        ("bash ./script.sh", "`bash` on a script"),
        ("sh -c \"$CMD\"", "variable expansion"),
        ("$CMD -rf x", "variable expansion"),
        ("/bin/r? -rf x", "glob"),
        ("eval 'rm -rf x'", "`eval`"),
        ("env -S 'rm -rf x'", "`-S`, an option the rules do not know"),
        (
            "env --split-string='rm -rf x'",
            "an option the rules do not know",
        ),
        ("sudo -s", "reads its input"),
        ("fish -c 'rm -rf x'", "`fish`"),
        (
            "sh -c \"sh -c 'sh -c \\\"sh -c rm\\\"'\"",
            "nests shells more than 3 deep",
        ),
        (
            "env env env env env env env env env rm -rf x",
            "more than 8 wrappers",
        ),
    ] {
        let analysed = analyse(line);
        let why = analysed.hidden.unwrap_or_default();
        assert!(why.contains(says), "{line:?}: {why:?} should say {says:?}");
    }
    // Allow rules may still match a shell running a script, as written.
    let script = analyse("bash ./build.sh");
    assert_eq!(script.unvouched, None);
    assert_eq!(script.commands, ["bash ./build.sh"]);
    // A `sh -c` string the parser reads hides nothing.
    assert_eq!(analyse("sh -c 'git status | head'").hidden, None);
}

#[test]
fn cost_is_bounded() {
    let long = format!("echo {}", "a".repeat(MAX_LINE));
    let analysed = analyse(&long);
    assert!(analysed.unvouched.unwrap().contains("longer than 64 KiB"));
    assert_eq!(analysed.deny_forms.len(), 1);

    // Deep nesting: no recursion on the tree, so no stack overflow.
    let depth = (MAX_LINE - 16) / 4;
    let nested = format!("{}ls{}", "$( ".repeat(depth), ")".repeat(depth));
    assert!(nested.len() <= MAX_LINE);
    assert!(analyse(&nested).unvouched.is_some());
    let nested = format!(
        "{}ls{}",
        "(".repeat(MAX_LINE / 2 - 2),
        ")".repeat(MAX_LINE / 2 - 2)
    );
    assert!(analyse(&nested).unvouched.is_some());

    // Wrappers and `find -exec` are stripped a bounded number of times, so the deny forms
    // stay a small multiple of the line.
    for unit in ["env ", "find -exec ", "sh -c "] {
        let line = format!("{}rm x", unit.repeat((MAX_LINE - 8) / unit.len()));
        let analysed = analyse(&line);
        let bytes: usize = analysed.deny_forms.iter().map(String::len).sum();
        assert!(bytes <= 20 * MAX_LINE, "{unit}: {bytes} bytes of forms");
        assert!(analysed.hidden.is_some(), "{unit}");
    }
}
