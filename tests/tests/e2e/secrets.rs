//! Secrets stay out of the commands tools run: the names the config reads keys from, the
//! common credential names, and the configured ones; a configured allowance gets through. A
//! config file others can write is reported with its fix.

use crate::of_kind;
use agentd_tests::mock::MockProvider;
use agentd_tests::{TestDaemon, sse};
use serde_json::json;

/// Regression (issue 12): a named endpoint's `api_key_env` and `AWS_SECRET_ACCESS_KEY`
/// reached every tool's environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_sees_no_secret_but_what_is_allowed() {
    let mock = MockProvider::start().await.unwrap();
    let config = format!(
        "[providers.mine]\nkind = \"openai_chat\"\nbase_url = \"{}/v1\"\n\
         default_model = \"m\"\napi_key_env = \"MY_LLM_KEY\"\n\n\
         [tools]\nenv_deny = [\"corp_*\"]\nenv_allow = [\"TOKENIZERS_PARALLELISM\"]\n",
        mock.url
    );
    // Each secret's value is unique, so neither its name nor its value may appear.
    let secrets = [
        ("MY_LLM_KEY", "v-my-llm-key"),
        ("AWS_SECRET_ACCESS_KEY", "v-aws-secret"),
        ("AWS_ACCESS_KEY_ID", "v-aws-id"),
        ("GITHUB_TOKEN", "v-github"),
        ("NPM_TOKEN", "v-npm"),
        ("DB_PASSWORD", "v-db"),
        ("GOOGLE_APPLICATION_CREDENTIALS", "v-gcp"),
        ("CORP_DATABASE_URL", "v-corp"),
    ];
    let visible = [
        ("TOKENIZERS_PARALLELISM", "v-allowed"),
        ("PLAIN_SETTING", "v-plain"),
    ];
    let mut env = vec![
        ("ANTHROPIC_BASE_URL", mock.url.as_str()),
        ("ANTHROPIC_API_KEY", "v-anthropic"),
    ];
    env.extend(secrets);
    env.extend(visible);
    let daemon = TestDaemon::start_with_config(&env, Some(&config))
        .await
        .unwrap();
    let mut client = daemon.client().await.unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let session = daemon
        .create_session(&mut client, workdir.path(), json!({}))
        .await
        .unwrap();
    mock.push_stream(sse::shell("t_env", "env"));
    mock.push_stream(sse::text("done"));
    let events = client.run(&session, "show the environment").await.unwrap();
    let end = of_kind(&events, "tool_call_end")[0];
    let output = end["data"]["output"].as_str().expect("env succeeds");
    for (name, value) in secrets
        .iter()
        .chain(&[("ANTHROPIC_API_KEY", "v-anthropic")])
    {
        assert!(
            !output.contains(name) && !output.contains(value),
            "{name} reached the tool: {output}"
        );
    }
    for (name, value) in visible {
        assert!(
            output.contains(&format!("{name}={value}")),
            "{name} is missing: {output}"
        );
    }
}

/// Regression (issue 12): a world-writable config file was accepted without a word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_writable_config_is_named_with_its_fix() {
    use std::os::unix::fs::PermissionsExt;
    let mut daemon = TestDaemon::start_with_config(&[], Some("log_level = \"info\"\n"))
        .await
        .unwrap();
    daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    let path = daemon.root.path().join("config/agentd/config.toml");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    daemon.restart().await.unwrap();
    let fix = format!("chmod 600 {}", path.display());
    let log = daemon.log_text();
    assert!(
        log.contains("writable by every user") && log.contains(&fix),
        "{log}"
    );
    let check = daemon
        .command("agentd")
        .arg("--check-config")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "a warning, not an error: {said}");
    assert!(said.contains("warning:") && said.contains(&fix), "{said}");
}
