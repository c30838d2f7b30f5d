//! Profiles: tool lists, prompt layer order, project document discovery and its budget, and
//! the git snapshot, against real directories and a real git repository.

use super::*;
use crate::exec::{EnvPolicy, LocalExecutionEnvironment};
use std::path::Path;

const SUBAGENT_TOOLS: [&str; 4] = ["spawn_agent", "send_input", "wait", "close_agent"];

/// The profile's tools, checking that the subagent tools end every list.
fn names(profile: ProfileId) -> Vec<String> {
    let mut names: Vec<String> = Profile::named(profile)
        .tools
        .names()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let own = names.len() - SUBAGENT_TOOLS.len();
    assert_eq!(names[own..], SUBAGENT_TOOLS, "{profile}");
    names.truncate(own);
    names
}

#[test]
fn each_profile_has_its_families_tools() {
    assert_eq!(
        names(ProfileId::Openai),
        [
            "read_file",
            "apply_patch",
            "write_file",
            "shell",
            "grep",
            "glob"
        ]
    );
    assert_eq!(
        names(ProfileId::Anthropic),
        [
            "read_file",
            "write_file",
            "edit_file",
            "shell",
            "grep",
            "glob"
        ]
    );
    assert_eq!(
        names(ProfileId::Gemini),
        [
            "read_file",
            "read_many_files",
            "write_file",
            "edit_file",
            "shell",
            "grep",
            "glob",
            "list_dir"
        ]
    );
    assert_eq!(names(ProfileId::Bash), ["shell"]);
    assert_eq!(
        Profile::named(ProfileId::Anthropic).shell_timeout,
        Some(Duration::from_secs(120))
    );
    assert_eq!(
        Profile::named(ProfileId::Openai).shell_timeout,
        None,
        "the session default: 10 s"
    );
    assert_eq!(Profile::stored("bash").unwrap().id, ProfileId::Bash);
    assert_eq!(
        Profile::stored("nope").err().unwrap().to_string(),
        "unknown profile \"nope\"; use openai, anthropic, gemini or bash"
    );
    let anthropic_grep = Profile::named(ProfileId::Anthropic);
    let grep = &anthropic_grep
        .tools
        .get("grep")
        .unwrap()
        .definition
        .parameters;
    assert!(grep["properties"]["output_mode"].is_object());
    assert_eq!(
        Profile::for_provider(ProviderKind::OpenaiChat).id,
        ProfileId::Openai
    );
}

fn capture(cwd: &Path, docs: &[&str]) -> EnvironmentContext {
    let env = LocalExecutionEnvironment::new(cwd.to_owned(), EnvPolicy::InheritCore);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(EnvironmentContext::capture(&env, docs))
}

fn git(dir: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "git {args:?}");
}

#[test]
fn project_docs_go_from_the_git_root_down_and_match_the_profile() {
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(repo.path().join("AGENTS.md"), "root agents").unwrap();
    std::fs::write(repo.path().join("CLAUDE.md"), "root claude").unwrap();
    std::fs::write(repo.path().join("GEMINI.md"), "root gemini").unwrap();
    git(repo.path(), &["add", "."]);
    git(repo.path(), &["commit", "-q", "-m", "first commit"]);
    let sub = repo.path().join("crates/core");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("AGENTS.md"), "deep agents").unwrap();
    std::fs::write(repo.path().join("untracked.txt"), "x").unwrap();

    let anthropic = Profile::named(ProfileId::Anthropic);
    let context = capture(&sub, anthropic.doc_names);
    let docs = &context.project_docs;
    let order: Vec<usize> = ["root agents", "root claude", "deep agents"]
        .iter()
        .map(|t| docs.find(t).unwrap())
        .collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "root first, deeper later: {docs}"
    );
    assert!(
        !docs.contains("root gemini"),
        "GEMINI.md is not for the anthropic profile"
    );
    let git = context.git.as_ref().unwrap();
    assert_eq!(
        (git.branch.as_str(), git.modified, git.untracked),
        ("main", 0, 2)
    );
    assert!(git.recent_commits[0].ends_with("first commit"));

    let gemini = capture(&sub, Profile::named(ProfileId::Gemini).doc_names).project_docs;
    assert!(gemini.contains("root gemini") && !gemini.contains("root claude"));
}

#[test]
fn outside_a_repository_only_the_working_directory_counts_and_the_budget_holds() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "x".repeat(40 * 1024)).unwrap();
    let context = capture(dir.path(), &["AGENTS.md"]);
    assert!(context.git.is_none());
    assert!(
        context
            .project_docs
            .ends_with("[Project instructions truncated at 32KB]")
    );
    assert!(context.project_docs.len() <= PROJECT_DOCS_BUDGET + 64);
}

#[test]
fn prompt_layers_come_in_order() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "PROJECT RULES").unwrap();
    let profile = Profile::named(ProfileId::Openai);
    let context = capture(dir.path(), profile.doc_names);
    let env = LocalExecutionEnvironment::new(dir.path().to_owned(), EnvPolicy::InheritCore);
    let prompt = profile.system_prompt(
        &profile.tools,
        &env,
        &context,
        "gpt-test",
        "\n<available_skills>\nSKILL LIST\n</available_skills>\n",
        Some("USER OVERRIDE"),
    );
    let at = |needle: &str| {
        prompt
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} missing from:\n{prompt}"))
    };
    let layers = [
        at("apply_patch"),
        at("<environment>"),
        at("Model: gpt-test"),
        at("<tools>"),
        at("PROJECT RULES"),
        at("USER OVERRIDE"),
    ];
    assert!(layers.windows(2).all(|w| w[0] < w[1]), "{layers:?}");
    assert!(prompt.contains(&format!("Working directory: {}", dir.path().display())));
    assert!(prompt.contains("Is git repository: false"));
    assert!(
        prompt.trim_end().ends_with("</user_instructions>"),
        "the user's instructions come last"
    );
}
