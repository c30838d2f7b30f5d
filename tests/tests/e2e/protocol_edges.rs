//! Protocol edges real clients hit (vscode-jsonrpc, Emacs jsonrpc.el, Neovim, pygls): request
//! ids of every shape, error codes that say what was wrong, unsubscribing with an object, the
//! daemon stream after a deletion, `null` for optional fields, and the stream's final item.

use crate::setup;
use agentd_tests::RawClient;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// Sends `line` and returns the raw answer line (ids are checked as text: JSON numbers beyond
/// 64 bits do not survive a `Value`).
async fn raw_answer(c: &mut RawClient, line: &str) -> String {
    c.send_raw(format!("{line}\n").as_bytes()).await.unwrap();
    c.read_line().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_valid_id_is_answered_under_itself_and_invalid_ones_get_invalid_request() {
    let mut s = setup().await;
    let c = &mut s.client;
    let info = |id: &str| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"daemon/info"}}"#);

    for id in [
        "-5",
        "0",
        "18446744073709551615",
        "18446744073709551616",
        "-123456789012345678901234567890",
        "\"text\"",
        "null",
    ] {
        let answer = raw_answer(c, &info(id)).await;
        assert!(
            answer.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"#)),
            "id {id}: {answer}"
        );
    }
    for (id, what) in [
        ("1.5", "the number 1.5"),
        ("1e3", "the number 1e3"),
        ("true", "a boolean"),
        ("{\"a\":1}", "an object"),
        ("[1]", "an array"),
    ] {
        let answer: Value = serde_json::from_str(&raw_answer(c, &info(id)).await).unwrap();
        assert_eq!(
            answer,
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message":
                format!("Invalid request: `id` must be a string, an integer or null, got {what}")}}),
            "id {id}"
        );
    }
    // A failing call under a negative id is answered under it too.
    let answer = raw_answer(
        c,
        r#"{"jsonrpc":"2.0","id":-7,"method":"session/get","params":{"session_id":"nope"}}"#,
    )
    .await;
    assert!(
        answer.starts_with(r#"{"jsonrpc":"2.0","id":-7,"error":{"code":-32010"#),
        "{answer}"
    );
    // Subscriptions too: the reply carries the id as sent, then the stream flows.
    let answer = raw_answer(
        c,
        &format!(
            r#"{{"jsonrpc":"2.0","id":-8,"method":"session/subscribe","params":{{"session_id":"{}","since_seq":0}}}}"#,
            s.session
        ),
    )
    .await;
    assert!(
        answer.starts_with(r#"{"jsonrpc":"2.0","id":-8,"result":""#),
        "{answer}"
    );
    let sub: Value = serde_json::from_str(&answer).unwrap();
    let first = c.notification().await.unwrap();
    assert_eq!(first["params"]["subscription"], sub["result"]);
    assert_eq!(first["params"]["result"]["seq"], 1);
    let answer = raw_answer(
        c,
        &format!(
            r#"{{"jsonrpc":"2.0","id":-9,"method":"session/unsubscribe","params":{{"subscription":{}}}}}"#,
            sub["result"]
        ),
    )
    .await;
    // The end item and the answer may come in either order.
    let answers = [answer, c.read_line().await.unwrap()];
    assert!(
        answers
            .iter()
            .any(|a| a == r#"{"jsonrpc":"2.0","id":-9,"result":true}"#),
        "{answers:?}"
    );
    assert!(
        answers
            .iter()
            .any(|a| a.contains(r#""reason":"unsubscribed""#)),
        "{answers:?}"
    );
    // In a batch, each answer keeps its id as sent.
    let answer = raw_answer(c, &format!("[{},{}]", info("-1"), info("1.5"))).await;
    assert!(
        answer.starts_with(r#"[{"jsonrpc":"2.0","id":-1,"result":"#),
        "{answer}"
    );
    assert!(
        answer.contains(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600"#),
        "{answer}"
    );
    // Still serving.
    assert!(c.call("daemon/info", json!({})).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_get_the_code_for_what_is_wrong() {
    let mut s = setup().await;
    let c = &mut s.client;
    let mut check = async |bytes: &[u8], code: i64, message: &str| {
        c.send_raw(bytes).await.unwrap();
        let answer = c.read_message().await.unwrap();
        let sent = String::from_utf8_lossy(&bytes[..bytes.len().min(60)]).into_owned();
        assert_eq!(answer["error"]["code"], code, "{sent:?}: {answer}");
        let text = answer["error"]["message"].as_str().unwrap();
        assert!(text.contains(message), "{sent:?}: {text}");
    };
    // Valid JSON that is not a request object: invalid request.
    check(b"42\n", -32600, "expected a request object, got a number").await;
    check(b"\"hi\"\n", -32600, "got a string").await;
    check(b"true\n", -32600, "got a boolean").await;
    check(b"null\n", -32600, "got null").await;
    check(b"{}\n", -32600, "`jsonrpc` must be \"2.0\"").await;
    check(
        b"{\"jsonrpc\":\"2.0\",\"id\":1}\n",
        -32600,
        "`method` is missing",
    )
    .await;
    check(
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}\n",
        -32600,
        "`method` must be a string",
    )
    .await;
    check(
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon/info\",\"params\":3}\n",
        -32600,
        "`params` must be an object or an array",
    )
    .await;
    // Not JSON, or not UTF-8: parse error.
    check(b"\xff\xfe\n", -32700, "invalid UTF-8 at byte 0").await;
    check(
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon/\xffinfo\"}\n",
        -32700,
        "invalid UTF-8 at byte 41",
    )
    .await;
    check(b"{\"a\":\0}\n", -32700, "Parse error").await;
    check(b"hello\n", -32700, "expected value").await;
    let deep = format!("{}\n", "[".repeat(100_000));
    check(deep.as_bytes(), -32700, "Parse error").await;
    // Deep but valid JSON is checked without recursion: not a request.
    let deep = format!("{}1{}\n", "{\"a\":".repeat(100_000), "}".repeat(100_000));
    check(deep.as_bytes(), -32600, "`jsonrpc` must be \"2.0\"").await;
    let deep = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/list\",\"params\":{{\"cwd\":{}1{}}}}}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    check(
        deep.as_bytes(),
        -32602,
        "invalid params: `cwd`: invalid type: sequence",
    )
    .await;
    // Batches: empty and too large are invalid requests with their own message, never an
    // application code (-32010 is `session_not_found`).
    check(b"[]\n", -32600, "empty batch").await;
    let item = json!({"jsonrpc": "2.0", "id": 1, "method": "daemon/info"});
    let batch = Value::Array(vec![item; 101]);
    check(
        format!("{batch}\n").as_bytes(),
        -32600,
        "a batch holds at most 100 requests, this one has 101",
    )
    .await;
    // `params: null` is no params.
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\"n\",\"method\":\"session/list\",\"params\":null}\n")
        .await
        .unwrap();
    let answer = c.read_message().await.unwrap();
    assert!(answer["result"]["sessions"].is_array(), "{answer}");
    assert!(c.call("daemon/info", json!({})).await.is_ok());
}

/// Reads one `Content-Length` framed message.
async fn read_framed(reader: &mut BufReader<UnixStream>) -> Value {
    let mut header = String::new();
    reader.read_line(&mut header).await.unwrap();
    let len: usize = header
        .trim()
        .strip_prefix("Content-Length: ")
        .unwrap_or_else(|| panic!("header {header:?}"))
        .parse()
        .unwrap();
    let mut blank = String::new();
    reader.read_line(&mut blank).await.unwrap();
    let mut body = vec![0; len];
    reader.read_exact(&mut body).await.unwrap();
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_content_length_is_answered_before_the_connection_closes() {
    let s = setup().await;
    for (header, message) in [
        (
            "Content-Length: -5",
            "Content-Length must be a non-negative integer, got \"-5\"",
        ),
        (
            "Content-Length: ten",
            "Content-Length must be a non-negative integer, got \"ten\"",
        ),
        (
            "Content-Lenth 10",
            "expected a `Content-Length: <bytes>` header",
        ),
    ] {
        let mut stream = UnixStream::connect(&s.daemon.socket).await.unwrap();
        stream
            .write_all(format!("{header}\r\n\r\n{{}}").as_bytes())
            .await
            .unwrap();
        let mut reader = BufReader::new(stream);
        let answer = read_framed(&mut reader).await;
        assert_eq!(answer["error"]["code"], -32700, "{header}: {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains(message),
            "{header}: {answer}"
        );
        let mut rest = Vec::new();
        let n = tokio::time::timeout(agentd_tests::WAIT, reader.read_to_end(&mut rest))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(n, 0, "the connection closes after the answer");
    }
}

/// The `params.result` of the next notification of `method`.
async fn next_item(c: &mut RawClient, method: &str) -> Value {
    loop {
        let n = c.notification().await.unwrap();
        if n["method"] == method {
            return n["params"]["result"].clone();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsubscribe_takes_an_object_and_ends_the_stream_with_its_final_item() {
    let mut s = setup().await;
    let sub = s.client.subscribe(&s.session, Some(0)).await.unwrap();
    let first = s.client.item().await.unwrap();
    assert_eq!(first["type"], "event");
    let mut other = s.daemon.client().await.unwrap();
    assert_eq!(
        other
            .call("session/unsubscribe", json!({"subscription": sub}))
            .await
            .unwrap(),
        false,
        "another connection cannot end it"
    );
    assert_eq!(
        s.client
            .call("session/unsubscribe", json!({"subscription": sub}))
            .await
            .unwrap(),
        true
    );
    // Replayed events may still be queued before the end.
    let end = loop {
        let item = s.client.item().await.unwrap();
        if item["type"] == "end" {
            break item;
        }
    };
    assert_eq!(end["reason"], "unsubscribed");
    assert_eq!(end["session_id"], s.session.as_str());
    assert_eq!(
        s.client
            .call("session/unsubscribe", json!({"subscription": sub}))
            .await
            .unwrap(),
        false,
        "already ended"
    );
    let wrong = s
        .client
        .request("session/unsubscribe", json!({"subscription": sub, "x": 1}))
        .await
        .unwrap();
    assert_eq!(wrong["error"]["code"], -32602);
    assert!(
        wrong["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid params: unknown field `x`"),
        "{wrong}"
    );
    let missing = s
        .client
        .request("daemon/unsubscribe", json!({}))
        .await
        .unwrap();
    assert_eq!(
        missing["error"]["message"],
        "invalid params: missing field `subscription`"
    );

    // The daemon stream, positional form: the end is its `unsubscribed` item.
    let sub = s.client.call("daemon/subscribe", json!({})).await.unwrap();
    assert_eq!(
        s.client
            .call("daemon/unsubscribe", json!([sub]))
            .await
            .unwrap(),
        true
    );
    assert_eq!(
        next_item(&mut s.client, "daemon/event").await,
        json!({"kind": "unsubscribed"})
    );
    assert!(s.client.call("daemon/info", json!({})).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_stream_goes_on_after_a_session_is_deleted() {
    let mut s = setup().await;
    let mut watcher = s.daemon.client().await.unwrap();
    watcher.call("daemon/subscribe", json!({})).await.unwrap();
    s.call("session/delete", json!({})).await;
    let second = s
        .daemon
        .create_session(&mut s.client, s.workdir.path(), json!({}))
        .await
        .unwrap();
    let mut kinds = Vec::new();
    loop {
        let item = next_item(&mut watcher, "daemon/event").await;
        if item["kind"] == "state_changed" {
            continue;
        }
        kinds.push((item["kind"].clone(), item["session_id"].clone()));
        if item["kind"] == "session_created" {
            break;
        }
    }
    assert_eq!(
        kinds,
        vec![
            (json!("session_deleted"), json!(s.session)),
            (json!("session_created"), json!(second)),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_means_absent_for_every_optional_field_of_every_method() {
    let mut s = setup().await;
    let schema = agentd_proto::schema::protocol_schema();
    let defs = &schema["$defs"];
    let resolve = |v: &Value| -> Value {
        match v["$ref"].as_str().and_then(|r| r.rsplit('/').next()) {
            Some(name) => defs[name].clone(),
            None => v.clone(),
        }
    };
    let workdir = s.workdir.path().display().to_string();
    let mut entries: Vec<(String, Value)> = Vec::new();
    for section in ["methods", "subscriptions"] {
        for (name, m) in schema[section].as_object().unwrap() {
            entries.push((name.clone(), resolve(&m["params"])));
        }
    }
    // Deleting and stopping go last (shutdown is left out: it would end the test's daemon).
    entries.sort_by_key(|(name, _)| name == "session/delete");
    let mut checked = 0;
    for (name, params) in entries {
        if name == "daemon/shutdown" {
            continue;
        }
        let required: Vec<&str> = params["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut object = serde_json::Map::new();
        for (field, field_schema) in params["properties"].as_object().into_iter().flatten() {
            let value = match field.as_str() {
                "session_id" => json!(s.session),
                "cwd" => json!(workdir),
                "text" => json!("hello"),
                "request_id" => json!("req_none"),
                // The patch's own fields are all optional: every one of them null too.
                "config" if required.contains(&"config") => {
                    let patch = resolve(field_schema);
                    let fields = patch["properties"].as_object().unwrap();
                    Value::Object(fields.keys().map(|k| (k.clone(), Value::Null)).collect())
                }
                other if required.contains(&other) => panic!("{name}: no value for {other}"),
                _ => Value::Null,
            };
            object.insert(field.clone(), value);
        }
        let response = s
            .client
            .request(&name, Value::Object(object.clone()))
            .await
            .unwrap();
        assert_ne!(
            response["error"]["code"],
            -32602,
            "{name} {}: {response}",
            Value::Object(object)
        );
        checked += 1;
    }
    assert!(checked >= 19, "every method but shutdown: {checked}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_params_name_the_field() {
    let mut s = setup().await;
    let wrong = s.request("session/history", json!({"offset": "ten"})).await;
    assert_eq!(wrong["error"]["code"], -32602);
    assert_eq!(
        wrong["error"]["message"],
        "invalid params: `offset`: invalid type: string \"ten\", expected usize"
    );
    let nested = s
        .request("session/set_config", json!({"config": {"max_turns": -1}}))
        .await;
    assert_eq!(
        nested["error"]["message"],
        "invalid params: `config.max_turns`: invalid value: integer `-1`, expected u32"
    );
    let missing = s.request("session/submit", json!({})).await;
    assert_eq!(
        missing["error"]["message"],
        "invalid params: missing field `text`"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_final_item_of_a_session_stream_names_the_session() {
    let mut s = setup().await;
    s.client.subscribe(&s.session, None).await.unwrap();
    let mut other = s.daemon.client().await.unwrap();
    other
        .call("session/close", json!({"session_id": s.session}))
        .await
        .unwrap();
    let end = loop {
        let item = s.client.item().await.unwrap();
        if item["type"] == "end" {
            break item;
        }
    };
    assert_eq!(end["session_id"], s.session.as_str());
    assert_eq!(end["reason"], "session_closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsubscribe_right_after_the_subscribe_reply_always_finds_its_subscription() {
    let mut s = setup().await;
    // jsonrpsee sends the reply before it registers the subscription; an unsubscribe sent
    // the moment the reply arrives must still end it.
    for _ in 0..200 {
        let sub = s.client.call("daemon/subscribe", json!({})).await.unwrap();
        let ended = s
            .client
            .call("daemon/unsubscribe", json!({"subscription": sub}))
            .await
            .unwrap();
        assert_eq!(ended, true);
        assert_eq!(
            next_item(&mut s.client, "daemon/event").await,
            json!({"kind": "unsubscribed"})
        );
    }
}
