//! Tests of the policy: rules over simple commands and resolved paths, deny over allow,
//! what deny rules cannot see, `allow_always`.

use super::*;
use crate::exec::{EnvPolicy, LocalExecutionEnvironment};

fn config(mode: ApprovalMode, allow: &[&str], deny: &[&str]) -> ApprovalConfig {
    ApprovalConfig {
        mode,
        allow: allow.iter().map(|r| ApprovalRule((*r).into())).collect(),
        deny: deny.iter().map(|r| ApprovalRule((*r).into())).collect(),
        ..ApprovalConfig::default()
    }
}

fn command(c: &str) -> ApprovalSubject {
    ApprovalSubject::new(TargetKind::Command, vec![c.into()], c.into())
}

fn paths(p: &[&str]) -> ApprovalSubject {
    ApprovalSubject::new(
        TargetKind::Paths,
        p.iter().map(|p| (*p).into()).collect(),
        String::new(),
    )
}

/// A session directory that does not exist: nothing in it resolves to anything else.
const CWD: &str = "/projects/demo";

/// Prepares and decides one call of `tool` in `cwd`, sandboxed.
async fn check(c: &ApprovalConfig, tool: &str, subject: ApprovalSubject, cwd: &Path) -> Verdict {
    let env = LocalExecutionEnvironment::new(cwd.to_owned(), EnvPolicy::InheritNone);
    let prepared = prepare(c, tool, subject, &env).await;
    decide(c, tool, Some(&prepared), true)
}

#[tokio::test]
async fn allow_rules_cover_every_simple_command_or_ask() {
    let c = config(
        ApprovalMode::Ask,
        &["shell(git status*)", "shell(cargo test*)", "shell(echo *)"],
        &[],
    );
    let cwd = Path::new(CWD);
    let d = |cmd: &str| check(&c, "shell", command(cmd), cwd);
    assert_eq!(
        d("git status --short").await,
        Verdict::AllowedBy("shell(git status*)".into())
    );
    assert_eq!(
        d("cargo test -p a/b 2>&1").await,
        Verdict::AllowedBy("shell(cargo test*)".into())
    );
    assert_eq!(
        d("git status && cargo test").await,
        Verdict::AllowedBy("shell(git status*), shell(cargo test*)".into())
    );
    assert_eq!(
        d("echo hi > notes.txt 2>/dev/null").await,
        Verdict::AllowedBy("shell(echo *)".into())
    );
    for asked in [
        "git push",
        "rm -rf / ; git status",
        "git status; rm -rf ~",
        "git status\nrm -rf ~",
        "git status && rm -rf ~",
        "git status || rm -rf ~",
        "git status | sh",
        "git status $(rm -rf ~)",
        "git status `rm -rf ~`",
        "git status > ../outside.txt",
        "git status > /etc/passwd",
        "echo hi > ~/x",
        "GIT_EXTERNAL_DIFF=./evil git status",
        "git status *",
        "",
        "# only a comment",
    ] {
        assert_eq!(d(asked).await, Verdict::Ask, "{asked:?}");
    }
}

#[tokio::test]
async fn a_bare_rule_covers_every_call_of_its_tool() {
    let cwd = Path::new(CWD);
    let allow = config(ApprovalMode::Ask, &["shell"], &[]);
    assert_eq!(
        check(&allow, "shell", command("echo $(date)"), cwd).await,
        Verdict::AllowedBy("shell".into())
    );
    let deny = config(ApprovalMode::Auto, &[], &["shell"]);
    assert_eq!(
        check(&deny, "shell", command("ls"), cwd).await,
        Verdict::DeniedBy("shell".into())
    );
}

#[tokio::test]
async fn deny_wins_whatever_the_spelling_and_applies_in_auto_mode() {
    let c = config(ApprovalMode::Auto, &["shell"], &["shell(rm *)"]);
    let cwd = Path::new(CWD);
    for denied in [
        "rm -rf x",
        "/bin/rm -rf x",
        "command rm -rf x",
        r"\rm -rf x",
        "env X=1 rm -rf x",
        "x=1 rm -rf x",
        "true && rm -rf x",
        "sh -c 'rm -rf x'",
        "echo $(rm -rf x)",
    ] {
        assert_eq!(
            check(&c, "shell", command(denied), cwd).await,
            Verdict::DeniedBy("shell(rm *)".into()),
            "{denied:?}"
        );
    }
    assert_eq!(
        check(&c, "shell", command("ls | wc -l"), cwd).await,
        Verdict::Run
    );
    assert_eq!(decide(&c, "read_file", None, true), Verdict::Run);
}

#[tokio::test]
async fn what_deny_rules_cannot_see_is_asked_about_or_refused() {
    let cwd = Path::new(CWD);
    for hidden in [
        "echo 'rm -rf x' | sh",
        "eval \"$CMD\"",
        "$CMD x",
        "env -S 'rm x'",
    ] {
        let auto = config(ApprovalMode::Auto, &["shell"], &["shell(rm *)"]);
        let Verdict::Refused(why) = check(&auto, "shell", command(hidden), cwd).await else {
            panic!("{hidden:?} was not refused");
        };
        assert!(why.contains("deny rules for `shell`"), "{why}");
        let ask = config(ApprovalMode::Ask, &["shell"], &["shell(rm *)"]);
        assert_eq!(
            check(&ask, "shell", command(hidden), cwd).await,
            Verdict::Ask
        );
        // Without deny rules there is nothing to miss.
        let none = config(ApprovalMode::Auto, &[], &[]);
        assert_eq!(
            check(&none, "shell", command(hidden), cwd).await,
            Verdict::Run
        );
    }
}

#[tokio::test]
async fn paths_are_relative_to_the_session_and_every_one_must_be_allowed() {
    let c = config(
        ApprovalMode::Ask,
        &[
            "write_file(src/**)",
            "apply_patch(src/*)",
            "apply_patch(/var/log/*.log)",
        ],
        &[],
    );
    let cwd = Path::new(CWD);
    let d = |tool: &'static str, p: &'static [&'static str]| check(&c, tool, paths(p), cwd);
    assert!(matches!(
        d("write_file", &["src/a/b.rs"]).await,
        Verdict::AllowedBy(_)
    ));
    assert!(matches!(
        d("write_file", &["/projects/demo/src/x.rs"]).await,
        Verdict::AllowedBy(_)
    ));
    assert_eq!(
        d("write_file", &["src/../../etc/passwd"]).await,
        Verdict::Ask
    );
    assert_eq!(d("write_file", &["README.md"]).await, Verdict::Ask);
    assert_eq!(d("write_file", &["/etc/src/x"]).await, Verdict::Ask);
    assert_eq!(
        d("apply_patch", &["src/a.rs", "src/b.rs"]).await,
        Verdict::AllowedBy("apply_patch(src/*)".into())
    );
    assert_eq!(
        d("apply_patch", &["src/a.rs", "/var/log/x.log"]).await,
        Verdict::AllowedBy("apply_patch(src/*), apply_patch(/var/log/*.log)".into())
    );
    assert_eq!(
        d("apply_patch", &["src/a.rs", "src/deep/b.rs"]).await,
        Verdict::Ask
    );
    assert_eq!(d("apply_patch", &[]).await, Verdict::Ask);
}

#[tokio::test]
async fn paths_are_matched_where_symlinks_lead() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::os::unix::fs::symlink("../.git/hooks", ws.join("src/hooks")).unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.join("src/out")).unwrap();
    // The session's directory itself through a symlink: rules see the real one.
    std::os::unix::fs::symlink(&ws, dir.path().join("link")).unwrap();
    let cwd = dir.path().join("link");
    let real_outside = outside.path().canonicalize().unwrap();

    let allow = config(ApprovalMode::Ask, &["write_file(src/**)"], &[]);
    let d = async |c: &ApprovalConfig, p: &str| check(c, "write_file", paths(&[p]), &cwd).await;
    assert!(matches!(
        d(&allow, "src/lib.rs").await,
        Verdict::AllowedBy(_)
    ));
    assert_eq!(d(&allow, "src/hooks/pre-commit").await, Verdict::Ask);
    assert_eq!(d(&allow, "src/out/x").await, Verdict::Ask);

    let hooks = config(ApprovalMode::Auto, &[], &["write_file(.git/**)"]);
    assert_eq!(
        d(&hooks, "src/hooks/pre-commit").await,
        Verdict::DeniedBy("write_file(.git/**)".into())
    );
    let rule = format!("write_file({}/**)", real_outside.display());
    let far = config(ApprovalMode::Auto, &[], &[&rule]);
    assert_eq!(d(&far, "src/out/x").await, Verdict::DeniedBy(rule.clone()));
    // A deny rule still matches the path as the model named it.
    let named = config(ApprovalMode::Auto, &[], &["write_file(src/out/*)"]);
    assert!(matches!(d(&named, "src/out/x").await, Verdict::DeniedBy(_)));

    // `allow_always` adds the resolved path, which then matches the same call.
    let env = LocalExecutionEnvironment::new(cwd.clone(), EnvPolicy::InheritNone);
    let prepared = prepare(&allow, "write_file", paths(&["src/hooks/pre-commit"]), &env).await;
    let rules = always_rules("write_file", &prepared);
    assert_eq!(
        rules,
        [ApprovalRule("write_file(.git/hooks/pre-commit)".into())]
    );
    let prepared = prepare(&allow, "write_file", paths(&["src/out/x"]), &env).await;
    assert_eq!(
        always_rules("write_file", &prepared),
        [ApprovalRule(format!(
            "write_file({})",
            real_outside.join("x").display()
        ))]
    );
    let always = ApprovalConfig {
        allow: always_rules("write_file", &prepared),
        ..allow.clone()
    };
    assert!(matches!(
        d(&always, "src/out/x").await,
        Verdict::AllowedBy(_)
    ));

    // A redirection through the symlink leaves the session's directory too.
    let echo = config(ApprovalMode::Ask, &["shell(echo *)"], &[]);
    let shell = |line: &str| check(&echo, "shell", command(line), &cwd);
    assert!(matches!(
        shell("echo x > src/new.txt").await,
        Verdict::AllowedBy(_)
    ));
    assert_eq!(shell("echo x > src/out/new.txt").await, Verdict::Ask);
}

#[tokio::test]
async fn allow_always_matches_exactly_that_call() {
    let cwd = Path::new(CWD);
    let env = LocalExecutionEnvironment::new(cwd.to_owned(), EnvPolicy::InheritNone);
    let ask = config(ApprovalMode::Ask, &[], &[]);
    let odd = command("echo '[a]*' '(b)' '{c}?' && ls >> log.txt");
    let prepared = prepare(&ask, "shell", odd.clone(), &env).await;
    let rules = always_rules("shell", &prepared);
    assert_eq!(
        rules,
        [
            ApprovalRule(r"shell(echo \[a\]\* \(b\) \{c\}\?)".into()),
            ApprovalRule("shell(ls >> log.txt)".into()),
        ]
    );
    let c = ApprovalConfig {
        allow: rules,
        ..ask.clone()
    };
    validate(&c).unwrap();
    assert!(matches!(
        check(&c, "shell", odd, cwd).await,
        Verdict::AllowedBy(_)
    ));
    assert_eq!(
        check(&c, "shell", command("echo a1 '(b)' '{c}x'"), cwd).await,
        Verdict::Ask
    );
    // A line nothing can vouch for gets no rule: `always` allows it once.
    let prepared = prepare(&ask, "shell", command("echo $(date)"), &env).await;
    assert!(always_rules("shell", &prepared).is_empty());
    let note = prepared.note(&ask, "shell").unwrap();
    assert!(
        note.contains("no allow rule can cover this command: it has a command substitution"),
        "{note}"
    );
    let denying = config(ApprovalMode::Ask, &[], &["shell(rm *)"]);
    let prepared = prepare(&denying, "shell", command("bash ./build.sh"), &env).await;
    let note = prepared.note(&denying, "shell").unwrap();
    assert!(
        note.contains("the deny rules cannot check this call: it runs `bash` on a script"),
        "{note}"
    );
    let prepared = prepare(&ask, "shell", command("ls > out.txt"), &env).await;
    assert_eq!(prepared.note(&ask, "shell"), None);
    let prepared = prepare(&ask, "apply_patch", paths(&[]), &env).await;
    assert!(always_rules("apply_patch", &prepared).is_empty());
    let prepared = prepare(
        &ask,
        "write_file",
        paths(&["/projects/demo/src/lib.rs"]),
        &env,
    )
    .await;
    assert_eq!(
        always_rules("write_file", &prepared),
        [ApprovalRule("write_file(src/lib.rs)".into())]
    );
}

#[tokio::test]
async fn leaving_the_sandbox_is_for_a_person_to_allow() {
    let cwd = Path::new(CWD);
    let env = LocalExecutionEnvironment::new(cwd.to_owned(), EnvPolicy::InheritNone);
    let mut outside = command("make install");
    outside.outside_sandbox = true;
    let ask = config(ApprovalMode::Ask, &["shell"], &[]);
    assert_eq!(
        check(&ask, "shell", outside.clone(), cwd).await,
        Verdict::Ask
    );
    let auto = config(ApprovalMode::Auto, &["shell"], &[]);
    assert!(matches!(
        check(&auto, "shell", outside.clone(), cwd).await,
        Verdict::Refused(_)
    ));
    // Without a sandbox there is nothing to leave.
    let prepared = prepare(&auto, "shell", outside.clone(), &env).await;
    assert_eq!(decide(&auto, "shell", Some(&prepared), false), Verdict::Run);
    let deny = config(ApprovalMode::Ask, &[], &["shell(make *)"]);
    assert!(matches!(
        check(&deny, "shell", outside, cwd).await,
        Verdict::DeniedBy(_)
    ));
}

#[test]
fn bad_rules_are_named() {
    for (rule, says) in [
        ("shell(git", "must end with `)`"),
        ("shell()", "empty"),
        ("(x)", "tool name"),
        ("shell([)", "pattern"),
    ] {
        let c = config(ApprovalMode::Ask, &[rule], &[]);
        let err = validate(&c).unwrap_err();
        assert!(err.contains(says), "{rule}: {err}");
    }
}

#[test]
fn mcp_calls_follow_rules_and_hints() {
    let config = |mode: ApprovalMode, allow: &[&str], deny: &[&str]| ApprovalConfig {
        mode,
        allow: allow.iter().map(|r| ApprovalRule((*r).into())).collect(),
        deny: deny.iter().map(|r| ApprovalRule((*r).into())).collect(),
        ..ApprovalConfig::default()
    };
    let ask = config(
        ApprovalMode::Ask,
        &["mcp(github/*)"],
        &["mcp(github/delete_*)"],
    );
    // Deny over allow, in every mode, whatever the server says of the tool.
    assert_eq!(
        decide_mcp(&ask, "github/delete_repo", true, false),
        Verdict::DeniedBy("mcp(github/delete_*)".into())
    );
    let auto = config(ApprovalMode::Auto, &[], &["mcp"]);
    assert_eq!(
        decide_mcp(&auto, "docs/search", true, false),
        Verdict::DeniedBy("mcp".into())
    );
    assert_eq!(
        decide_mcp(&ask, "github/list_issues", false, false),
        Verdict::AllowedBy("mcp(github/*)".into())
    );
    // Read-only runs without asking; destructive is asked about even under an allow rule.
    assert_eq!(decide_mcp(&ask, "jira/get", true, false), Verdict::Run);
    assert_eq!(decide_mcp(&ask, "github/wipe", false, true), Verdict::Ask);
    assert_eq!(decide_mcp(&ask, "jira/create", false, false), Verdict::Ask);
    assert_eq!(
        decide_mcp(
            &config(ApprovalMode::Auto, &[], &[]),
            "jira/create",
            false,
            true
        ),
        Verdict::Run
    );
    // What `always` adds matches that tool only.
    assert_eq!(mcp_rule(&mcp_target("a", "b*")).0, "mcp(a/b\\*)");
}
