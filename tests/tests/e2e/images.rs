//! Images in user input: each family's request carries them the way its API takes them; every
//! bad image gets its own error; a provider without images refuses them; they are kept in the
//! history over a restart; `agentctl submit --image` reads files before the daemon is asked.

use crate::families::holds;
use crate::{of_kind, setup_family};
use agentd_tests::TestDaemon;
use agentd_tests::family::Family;
use agentd_tests::mock::MockProvider;
use agentd_tests::sse;
use base64::Engine;
use serde_json::{Value, json};

/// A tiny file with a PNG's magic number (the bytes need only survive the trip).
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRpixels";

fn encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn png() -> Value {
    json!({"media_type": "image/png", "data": encode(PNG)})
}

/// The messages of a request body, in `family`'s shape.
fn messages(family: Family, body: &Value) -> Vec<Value> {
    let key = match family {
        Family::Anthropic | Family::Chat => "messages",
        Family::OpenAi => "input",
        Family::Gemini => "contents",
    };
    body[key].as_array().cloned().unwrap_or_default()
}

each_family!(a_users_image_reaches_the_model_in_its_format);

async fn a_users_image_reaches_the_model_in_its_format(family: Family) {
    let mut s = setup_family(family, json!({})).await;
    s.mock.push_stream(family.text("A red square."));
    s.client.subscribe(&s.session, Some(0)).await.unwrap();
    let submitted = s
        .call(
            "session/submit",
            json!({"text": "what is this?", "images": [png()]}),
        )
        .await;
    let events = s.until("processing_end").await;
    let input = of_kind(&events, "user_input")[0]["data"].clone();
    assert_eq!(
        input["images"],
        json!([{"media_type": "image/png", "bytes": PNG.len()}]),
        "events name the images, without their data: {input}"
    );

    let data = encode(PNG);
    let url = format!("data:image/png;base64,{data}");
    let (image, text) = match family {
        Family::Anthropic => (
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}),
            json!({"type": "text", "text": "what is this?"}),
        ),
        Family::OpenAi => (
            json!({"type": "input_image", "image_url": url}),
            json!({"type": "input_text", "text": "what is this?"}),
        ),
        Family::Chat => (
            json!({"type": "image_url", "image_url": {"url": url}}),
            json!({"type": "text", "text": "what is this?"}),
        ),
        Family::Gemini => (
            json!({"inlineData": {"mimeType": "image/png", "data": data}}),
            json!({"text": "what is this?"}),
        ),
    };
    let body = &s.mock.requests()[0].body;
    let user = messages(family, body)
        .into_iter()
        .find(|m| holds(m, &image))
        .unwrap_or_else(|| panic!("{family:?}: no message holds the image: {body}"));
    assert_eq!(user["role"], "user", "{family:?}: {user}");
    assert!(holds(&user, &text), "{family:?}: text beside it: {user}");

    // The history keeps the image itself; `input_id` finds the entry.
    let entry = s
        .call(
            "session/history",
            json!({"input_id": submitted["input_id"]}),
        )
        .await;
    assert_eq!(entry["entries"][0]["images"], json!([png()]), "{entry}");
}

/// A daemon whose default provider (Anthropic) takes images, with a text-only
/// OpenAI-compatible endpoint beside it.
async fn daemon(mock: &MockProvider) -> TestDaemon {
    let config = format!(
        "[providers.textonly]\nkind = \"openai_chat\"\nbase_url = \"{}/v1\"\n\
         default_model = \"small\"\n",
        mock.url
    );
    TestDaemon::start_with_config(
        &[
            ("ANTHROPIC_BASE_URL", &mock.url),
            ("ANTHROPIC_API_KEY", "test-key"),
        ],
        Some(&config),
    )
    .await
    .expect("daemon starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_image_gets_its_own_error() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let mut client = daemon.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let session = daemon
        .create_session(&mut client, dir.path(), json!({}))
        .await
        .unwrap();
    let big = |bytes: usize| {
        let mut data = PNG.to_vec();
        data.resize(bytes, 0);
        json!({"media_type": "image/png", "data": encode(&data)})
    };
    let jpeg_named_png =
        json!({"media_type": "image/png", "data": encode(b"\xff\xd8\xff\xe0JFIF")});
    let cases = [
        (
            json!(vec![png(); 11]),
            "11 images were sent; an input takes at most 10",
        ),
        (
            json!([png(), {"media_type": "image/bmp", "data": encode(b"BM..")}]),
            "images[1]: media type \"image/bmp\" is not taken",
        ),
        (
            json!([{"media_type": "image/png", "data": "not base64!"}]),
            "images[0]: data is not valid base64",
        ),
        (
            json!([jpeg_named_png]),
            "images[0]: media type is image/png but the bytes are image/jpeg",
        ),
        (
            json!([{"media_type": "image/gif", "data": encode(b"just some text")}]),
            "images[0]: media type is image/gif but the bytes are not a png, jpeg, gif or webp",
        ),
        (
            json!([{"media_type": "image/png", "data": ""}]),
            "images[0]: data is empty",
        ),
        (
            json!([big((5 << 20) + 1)]),
            "images[0]: 5242881 bytes is too large; an image may have at most 5242880 bytes",
        ),
        (
            // 7.2 MiB in all: over the bound, and still under the request size cap in base64.
            json!([big(3_774_874), big(3_774_874)]),
            "images[1]: the images so far come to 7549748 bytes; an input's images may come \
             to at most 7340032 bytes",
        ),
    ];
    for (images, want) in cases {
        for method in ["session/submit", "session/steer", "session/follow_up"] {
            let r = client
                .request(
                    method,
                    json!({"session_id": session, "text": "look", "images": images}),
                )
                .await
                .unwrap();
            assert_eq!(r["error"]["code"], -32602, "{method}: {r}");
            let message = r["error"]["message"].as_str().unwrap_or_default();
            assert!(message.starts_with(want), "{method}: {message}");
        }
    }
    assert!(mock.requests().is_empty(), "nothing reached the model");
    let r = client
        .request(
            "session/submit",
            json!({"session_id": session, "text": "look", "images": null}),
        )
        .await
        .unwrap();
    assert!(r["result"]["input_id"].is_string(), "null means none: {r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_without_images_refuses_them_and_is_never_sent_them() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let mut client = daemon.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let textonly = daemon
        .create_session(&mut client, dir.path(), json!({"provider": "textonly"}))
        .await
        .unwrap();
    let r = client
        .request(
            "session/submit",
            json!({"session_id": textonly, "text": "look", "images": [png()]}),
        )
        .await
        .unwrap();
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("provider \"textonly\" does not take images")
            && message.contains("images = true"),
        "{message}"
    );

    // A conversation that holds an image, switched to that provider afterwards.
    let session = daemon
        .create_session(&mut client, dir.path(), json!({}))
        .await
        .unwrap();
    mock.push_stream(sse::text("A square."));
    client.subscribe(&session, Some(0)).await.unwrap();
    client
        .call(
            "session/submit",
            json!({"session_id": session, "text": "look", "images": [png()]}),
        )
        .await
        .unwrap();
    client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    client
        .call(
            "session/set_config",
            json!({"session_id": session, "config": {"provider": "textonly", "model": "small"}}),
        )
        .await
        .unwrap();
    client
        .call(
            "session/submit",
            json!({"session_id": session, "text": "and now?"}),
        )
        .await
        .unwrap();
    let events = client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    let error = of_kind(&events, "error")[0]["data"]["message"].clone();
    assert!(
        error
            .as_str()
            .is_some_and(|m| m.contains("the conversation holds images and provider \"textonly\"")),
        "{error}"
    );
    assert_eq!(
        mock.requests().len(),
        1,
        "the text-only model was never called"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_is_kept_over_a_restart_and_sent_again() {
    let mock = MockProvider::start().await.unwrap();
    let mut daemon = daemon(&mock).await;
    let mut client = daemon.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let session = daemon
        .create_session(&mut client, dir.path(), json!({}))
        .await
        .unwrap();
    mock.push_stream(sse::text("A square."));
    client.subscribe(&session, Some(0)).await.unwrap();
    client
        .call(
            "session/submit",
            json!({"session_id": session, "text": "look", "images": [png()]}),
        )
        .await
        .unwrap();
    client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    drop(client);
    daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    daemon.restart().await.unwrap();

    let mut client = daemon.client().await.unwrap();
    let history = client
        .call("session/history", json!({"session_id": session}))
        .await
        .unwrap();
    assert_eq!(history["entries"][0]["type"], "user");
    assert_eq!(history["entries"][0]["images"], json!([png()]), "{history}");
    mock.push_stream(sse::text("Still a square."));
    client.subscribe(&session, None).await.unwrap();
    client
        .call(
            "session/submit",
            json!({"session_id": session, "text": "again?"}),
        )
        .await
        .unwrap();
    client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": encode(PNG)}});
    assert!(holds(&mock.requests()[1].body, &image), "sent again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentctl_submit_sends_image_files_and_checks_them_first() {
    let mock = MockProvider::start().await.unwrap();
    let daemon = daemon(&mock).await;
    let dir = tempfile::tempdir().unwrap();
    let shot = dir.path().join("shot.png");
    std::fs::write(&shot, PNG).unwrap();
    let shot = shot.display().to_string();
    mock.push_stream(sse::text("A square."));
    let cwd = dir.path().display().to_string();
    let out = daemon
        .agentctl(
            &[
                "submit", "--new", "--follow", "--cwd", &cwd, "--image", &shot, "what", "is", "it",
            ],
            None,
        )
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("what is it [1 image]"), "{stderr}");
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": encode(PNG)}});
    assert!(holds(&mock.requests()[0].body, &image));
    let id = stderr
        .lines()
        .find_map(|l| l.strip_prefix("session "))
        .expect("the new session's id");
    let out = daemon.agentctl(&["history", id], None).await.unwrap();
    let history = String::from_utf8_lossy(&out.stdout);
    assert!(history.contains("what is it [1 image]"), "{history}");

    let text = dir.path().join("notes.png");
    std::fs::write(&text, "not a picture").unwrap();
    let huge = dir.path().join("huge.png");
    let mut bytes = PNG.to_vec();
    bytes.resize((5 << 20) + 1, 0);
    std::fs::write(&huge, bytes).unwrap();
    let missing = dir.path().join("missing.png");
    let eleven: Vec<String> = std::iter::repeat_n(["--image".to_owned(), shot.clone()], 11)
        .flatten()
        .collect();
    let cases = [
        (
            vec!["--image".to_owned(), missing.display().to_string()],
            "cannot read it",
        ),
        (
            vec!["--image".to_owned(), text.display().to_string()],
            "not an image agentd takes (image/png, image/jpeg, image/gif, image/webp)",
        ),
        (
            vec!["--image".to_owned(), huge.display().to_string()],
            "the file is larger than 5 MiB",
        ),
        (eleven, "11 --image files given; at most 10"),
    ];
    for (args, want) in cases {
        // No daemon at this socket, and none may be started: the files are checked first.
        let mut cmd = daemon.command("agentctl");
        cmd.env("AGENTD_SOCKET", dir.path().join("nobody.sock"))
            .env("AGENTD_NO_AUTOSTART", "1")
            .args(["submit", "--new", "--cwd", &cwd])
            .args(&args)
            .arg("look");
        let out = tokio::process::Command::from(cmd).output().await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_carries_images_and_a_restart_says_queued_ones_were_lost() {
    let mock = MockProvider::start().await.unwrap();
    let mut daemon = daemon(&mock).await;
    let mut client = daemon.client().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let session = daemon
        .create_session(&mut client, dir.path(), json!({}))
        .await
        .unwrap();
    // Steering sent while idle waits for the next input, with its image.
    client
        .call(
            "session/steer",
            json!({"session_id": session, "text": "see this", "images": [png()]}),
        )
        .await
        .unwrap();
    let queue = client
        .call("session/queue", json!({"session_id": session}))
        .await
        .unwrap();
    assert_eq!(
        queue["steering"][0]["images"],
        json!([{"media_type": "image/png", "bytes": PNG.len()}]),
        "queues list type and size: {queue}"
    );
    mock.push_stream(sse::text("Seen."));
    client.subscribe(&session, None).await.unwrap();
    client
        .call(
            "session/submit",
            json!({"session_id": session, "text": "go"}),
        )
        .await
        .unwrap();
    let events = client
        .events_until("processing_end", |_| true)
        .await
        .unwrap();
    let injected = of_kind(&events, "steering_injected")[0]["data"].clone();
    assert_eq!(injected["images"][0]["bytes"], PNG.len(), "{injected}");
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": encode(PNG)}});
    assert!(
        holds(&mock.requests()[0].body, &image),
        "steering's image sent"
    );

    // Queued images live in memory: a restart keeps the text and says the images are gone.
    client
        .call(
            "session/steer",
            json!({"session_id": session, "text": "and this", "images": [png()]}),
        )
        .await
        .unwrap();
    drop(client);
    daemon
        .stop_with(nix::sys::signal::Signal::SIGTERM)
        .await
        .unwrap();
    daemon.restart().await.unwrap();
    let mut client = daemon.client().await.unwrap();
    let queue = client
        .call("session/queue", json!({"session_id": session}))
        .await
        .unwrap();
    assert_eq!(queue["steering"][0]["text"], "and this");
    assert!(queue["steering"][0].get("images").is_none(), "{queue}");
    client.subscribe(&session, Some(0)).await.unwrap();
    let events = client
        .events_until("warning", |e| {
            e["data"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("queued inputs"))
        })
        .await
        .unwrap();
    let warning = events.last().unwrap()["data"]["message"].clone();
    assert!(
        warning
            .as_str()
            .is_some_and(|m| m.contains("were not kept over the restart")),
        "{warning}"
    );
}
