//! Spec 9.12's parity rows that need no real model, for every family with its own profile:
//! create a file, read and search in parallel, edit in the profile's native format, time out a
//! command, recover from a failed call, and see the work on disk. Events are read typed
//! ([`agentd_tests::Client`]).

use crate::{end_reasons, setup_family, texts};
use agentd_proto::methods::SessionGet;
use agentd_proto::{Event, EventBody, ProcessingEndReason, SessionParams};
use agentd_tests::family::Family;
use serde_json::{Value, json};

each_family!(parity_matrix);

/// The `tool_call_end` of `call` among `events`: its output, or its error.
fn end_of<'a>(events: &'a [Event], call: &str) -> Result<&'a str, &'a str> {
    let ends = each!(events, EventBody::ToolCallEnd { call_id, output, error, .. }
        if call_id.as_str() == call => (output.as_deref(), error.as_deref()));
    match ends[..] {
        [(Some(output), None)] => Ok(output),
        [(None, Some(error))] => Err(error),
        _ => panic!("{call}: {ends:?}"),
    }
}

/// The profile each family gets by default, and its native way to create and edit a file.
fn native(family: Family) -> (&'static str, (&'static str, Value), (&'static str, Value)) {
    match family {
        Family::OpenAi | Family::Chat => (
            "openai",
            (
                "apply_patch",
                json!({"patch": "*** Begin Patch\n*** Add File: hello.py\n+print('Hello World')\n*** End Patch\n"}),
            ),
            (
                "apply_patch",
                json!({"patch": "*** Begin Patch\n*** Update File: hello.py\n@@\n print('Hello World')\n+print('Goodbye')\n*** End Patch\n"}),
            ),
        ),
        Family::Anthropic | Family::Gemini => (
            if family == Family::Anthropic {
                "anthropic"
            } else {
                "gemini"
            },
            (
                "write_file",
                json!({"file_path": "hello.py", "content": "print('Hello World')\n"}),
            ),
            (
                "edit_file",
                json!({"file_path": "hello.py", "old_string": "print('Hello World')\n", "new_string": "print('Hello World')\nprint('Goodbye')\n"}),
            ),
        ),
    }
}

async fn parity_matrix(family: Family) {
    let s = setup_family(family, json!({})).await;
    let (mut c, id) = s.typed().await;
    std::fs::write(s.workdir.path().join("big.txt"), "x".repeat(100_000)).unwrap();
    let (profile, create, edit) = native(family);
    let snapshot = c
        .call::<SessionGet>(SessionParams {
            session_id: id.clone(),
        })
        .await
        .unwrap();
    assert_eq!(snapshot.profile.to_string(), profile);
    let mock = s.mock.clone();

    mock.push_stream(family.tools("Creating it.", &[("c1", create.0, create.1)]));
    mock.push_stream(family.tools(
        "",
        &[
            ("c2", "read_file", json!({"file_path": "hello.py"})),
            (
                "c3",
                "grep",
                json!({"pattern": "Hello", "glob_filter": "*.py"}),
            ),
            ("c4", "glob", json!({"pattern": "*.py"})),
            ("c5", "read_file", json!({"file_path": "big.txt"})),
        ],
    ));
    mock.push_stream(family.tools("", &[("c6", edit.0, edit.1)]));
    mock.push_stream(family.tools(
        "",
        &[(
            "c7",
            "shell",
            // The output comes first and fast (no interpreter to start), then the command
            // outlives a timeout with a wide margin, so a loaded machine cannot reorder them.
            json!({"command": "cat hello.py; sleep 60", "timeout_ms": 2000}),
        )],
    ));
    mock.push_stream(family.tools("", &[("c8", "no_such_tool", json!({}))]));
    mock.push_stream(family.tools(
        "",
        &[(
            "c9",
            "shell",
            json!({"command": "python3 hello.py", "timeout_ms": 120_000}),
        )],
    ));
    mock.push_stream(family.text("Created and edited hello.py."));

    let events = c
        .run(&id, "Create hello.py, then add a goodbye line")
        .await
        .unwrap();
    assert_eq!(
        end_reasons(&events),
        [ProcessingEndReason::Completed],
        "{family:?}"
    );

    // The work is on disk.
    assert_eq!(
        std::fs::read_to_string(s.workdir.path().join("hello.py")).unwrap(),
        "print('Hello World')\nprint('Goodbye')\n"
    );
    let end = |call: &str| end_of(&events, call);
    assert!(
        end("c1").is_ok(),
        "{family:?}: creation succeeded: {:?}",
        end("c1")
    );
    assert_eq!(end("c2"), Ok("  1 | print('Hello World')\n"));
    assert_eq!(end("c3"), Ok("hello.py:1:print('Hello World')"));
    assert_eq!(end("c4"), Ok("hello.py"));
    assert_eq!(
        end("c5").unwrap().len(),
        100_000 + "  1 | \n".len(),
        "the event has the full output"
    );
    let timeout = end("c7").unwrap_err();
    assert!(
        timeout.contains("print('Hello World')\nprint('Goodbye')\n")
            && timeout.contains("[ERROR: Command timed out after 2000ms."),
        "{timeout}"
    );
    assert!(
        end("c8")
            .unwrap_err()
            .starts_with("Unknown tool: no_such_tool.")
    );
    assert!(end("c9").unwrap().starts_with("Hello World\nGoodbye\n"));
    assert_eq!(
        texts(&events).last().unwrap(),
        &"Created and edited hello.py."
    );

    // The model got results in call order, the big file truncated.
    let requests = mock.requests();
    assert_eq!(requests.len(), 7);
    let results = family.results(&requests[2].body);
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3", "c4", "c5"], "{family:?}");
    assert!(
        results[4].1.contains(
            "[WARNING: Tool output was truncated. 50007 characters were removed from the middle."
        ),
        "{family:?}"
    );
    // The system prompt is the profile's and lists its tools.
    let prompt = match family {
        Family::Anthropic => requests[0].body["system"][0]["text"].clone(),
        Family::OpenAi => requests[0].body["instructions"].clone(),
        Family::Chat => requests[0].body["messages"][0]["content"].clone(),
        Family::Gemini => requests[0].body["systemInstruction"]["parts"][0]["text"].clone(),
    };
    let prompt = prompt.as_str().unwrap();
    assert!(
        prompt.contains(&format!("- {}:", edit.0)),
        "{family:?}: the prompt lists the editing tool"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bash_only_session_for_minimal_models() {
    let s = setup_family(Family::Chat, json!({"profile": "bash"})).await;
    let (mut c, id) = s.typed().await;
    s.mock.push_stream(Family::Chat.tools(
        "",
        &[(
            "b1",
            "shell",
            json!({"command": "printf 'hi\\n' > note.txt && cat note.txt"}),
        )],
    ));
    s.mock.push_stream(Family::Chat.text("done"));
    c.run(&id, "write a note").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(s.workdir.path().join("note.txt")).unwrap(),
        "hi\n"
    );
    let tools: Vec<String> = s.mock.requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        tools,
        ["shell", "spawn_agent", "send_input", "wait", "close_agent"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_session_refuses_writes() {
    let s = setup_family(Family::Anthropic, json!({"read_only": true})).await;
    let (mut c, id) = s.typed().await;
    s.mock.push_stream(Family::Anthropic.tools(
        "",
        &[(
            "w",
            "write_file",
            json!({"file_path": "x.txt", "content": "no"}),
        )],
    ));
    s.mock.push_stream(Family::Anthropic.text("ok"));
    let events = c.run(&id, "write").await.unwrap();
    // The session's read_only sandbox refuses it before the read-only environment would.
    let error = end_of(&events, "w").unwrap_err();
    assert!(
        error.starts_with("Tool error (write_file): refused by the sandbox: ")
            && error.contains("x.txt is outside the writable roots (sandbox read_only: "),
        "{error}"
    );
    assert!(!s.workdir.path().join("x.txt").exists());
}

/// An unknown profile is refused wherever it is read, with every profile named: by the daemon
/// (`session/create`, as invalid params) and by `agentctl new` before it asks the daemon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_profile_is_refused_naming_every_profile() {
    let mut s = setup_family(Family::Anthropic, json!({})).await;
    let cwd = s.workdir.path().display().to_string();
    let refused = s
        .client
        .request("session/create", json!({"cwd": cwd, "profile": "claude"}))
        .await
        .unwrap();
    assert_eq!(
        refused["error"],
        json!({"code": -32602, "message": "invalid params: `profile`: unknown variant `claude`, \
            expected one of `openai`, `anthropic`, `gemini`, `bash`"})
    );
    let out = s
        .daemon
        .agentctl(&["--json", "new", "--profile", "claude"], None)
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(e["kind"], "usage");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("[possible values: openai, anthropic, gemini, bash]"),
        "{e}"
    );
}
