//! JSON-RPC conformance on the raw socket: every error path answers correctly and the
//! connection and daemon keep serving.

use crate::setup;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_paths_answer_and_the_connection_stays_usable() {
    let mut s = setup().await;
    let c = &mut s.client;

    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\n")
        .await
        .unwrap();
    let parse = c.read_message().await.unwrap();
    assert_eq!(
        parse,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700,
            "message": "Parse error: EOF while parsing a value at line 1 column 33"}})
    );

    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":5}\n")
        .await
        .unwrap();
    let invalid = c.read_message().await.unwrap();
    assert_eq!(
        (invalid["id"].clone(), invalid["error"]["code"].clone()),
        (json!(5), json!(-32600))
    );

    c.send_raw(b"{\"jsonrpc\":\"1.0\",\"id\":6,\"method\":\"daemon/info\"}\n")
        .await
        .unwrap();
    assert_eq!(c.read_message().await.unwrap()["error"]["code"], -32600);

    let unknown = c.request("session/explode", json!({})).await.unwrap();
    assert_eq!(
        unknown["error"],
        json!({"code": -32601, "message": "Method not found"})
    );

    let missing = c
        .request("session/submit", json!({"session_id": s.session}))
        .await
        .unwrap();
    assert_eq!(missing["error"]["code"], -32602);
    assert_eq!(
        missing["error"]["message"],
        "invalid params: missing field `text`"
    );

    let wrong = c
        .request(
            "session/submit",
            json!({"session_id": s.session, "text": 3}),
        )
        .await
        .unwrap();
    assert!(
        wrong["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid type: integer `3`, expected a string"),
        "{wrong}"
    );

    let extra = c
        .request("session/get", json!({"session_id": s.session, "sesion": 1}))
        .await
        .unwrap();
    assert!(
        extra["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `sesion`"),
        "{extra}"
    );

    let relative = c
        .request("session/create", json!({"cwd": "relative/dir"}))
        .await
        .unwrap();
    assert_eq!(relative["error"]["data"]["kind"], "invalid_config");
    assert_eq!(
        relative["error"]["message"],
        "cwd must be an absolute path, got \"relative/dir\""
    );
    let bad_provider = c
        .request("session/create", json!({"cwd": "/", "provider": "nope"}))
        .await
        .unwrap();
    assert!(
        bad_provider["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("unknown provider \"nope\"; configured: anthropic, gemini, openai"),
        "{bad_provider}"
    );

    // 11 MiB on one line: skipped without buffering, answered, and the connection survives.
    let mut huge = Vec::with_capacity(11 << 20);
    huge.extend_from_slice(
        b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"daemon/info\",\"params\":{\"pad\":\"",
    );
    huge.resize(11 << 20, b'x');
    huge.extend_from_slice(b"\"}}\n");
    c.send_raw(&huge).await.unwrap();
    let too_big = c.read_message().await.unwrap();
    assert_eq!(too_big["error"]["code"], -32007);
    assert_eq!(too_big["id"], Value::Null);

    // A notification gets no answer; the next call still works.
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"daemon/info\"}\n")
        .await
        .unwrap();
    let info = c.call("daemon/info", json!({})).await.unwrap();
    assert_eq!(info["protocol"], 2);
    // Absent params are fine for methods whose fields are all optional.
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\"no-params\",\"method\":\"session/list\"}\n")
        .await
        .unwrap();
    let list = c.read_message().await.unwrap();
    assert_eq!(list["id"], "no-params");
    assert_eq!(list["result"]["sessions"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches() {
    let mut s = setup().await;
    let c = &mut s.client;
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "daemon/info"},
        {"jsonrpc": "2.0", "id": 2, "method": "session/get", "params": {"session_id": s.session}},
        {"jsonrpc": "2.0", "id": 3, "method": "nope"},
        {"jsonrpc": "2.0", "method": "daemon/info"},
        {"foo": 1},
        5
    ]);
    c.send_raw(format!("{batch}\n").as_bytes()).await.unwrap();
    let answer = c.read_message().await.unwrap();
    let answer = answer.as_array().unwrap();
    assert_eq!(
        answer.len(),
        5,
        "the notification is not answered: {answer:?}"
    );
    assert_eq!(answer[0]["id"], 1);
    assert!(answer[0]["result"]["version"].is_string());
    assert_eq!(answer[1]["result"]["session_id"], s.session.as_str());
    assert_eq!(answer[2]["error"]["code"], -32601);
    assert_eq!(answer[3]["error"]["code"], -32600);
    assert_eq!(answer[4]["error"]["code"], -32600);

    c.send_raw(b"[]\n").await.unwrap();
    assert_eq!(c.read_message().await.unwrap()["error"]["code"], -32600);
    c.send_raw(b"[{\"jsonrpc\":\"2.0\",\"method\":\"daemon/info\"}]\n")
        .await
        .unwrap();
    let after = c.call("daemon/info", json!({})).await.unwrap();
    assert!(
        after["pid"].as_u64().unwrap() > 0,
        "a batch of notifications gets no answer"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_length_framing_for_lsp_style_clients() {
    let s = setup().await;
    let mut stream = UnixStream::connect(&s.daemon.socket).await.unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "session/get", "params": {"session_id": s.session}}).to_string();
    stream
        .write_all(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes())
        .await
        .unwrap();
    let mut reader = BufReader::new(stream);
    let mut header = String::new();
    reader.read_line(&mut header).await.unwrap();
    let len: usize = header
        .trim()
        .strip_prefix("Content-Length: ")
        .unwrap()
        .parse()
        .unwrap();
    let mut blank = String::new();
    reader.read_line(&mut blank).await.unwrap();
    assert_eq!(blank, "\r\n");
    let mut buf = vec![0; len];
    reader.read_exact(&mut buf).await.unwrap();
    let response: Value = serde_json::from_slice(&buf).unwrap();
    assert_eq!(response["result"]["session_id"], s.session.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_closed_clients_still_get_answers_and_string_subscription_ids() {
    let s = setup().await;
    let mut stream = UnixStream::connect(&s.daemon.socket).await.unwrap();
    let lines = format!(
        "{}\n{}\n",
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/subscribe", "params": {"session_id": s.session, "since_seq": 0}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/close", "params": {"session_id": s.session}}),
    );
    stream.write_all(lines.as_bytes()).await.unwrap();
    stream.shutdown().await.unwrap(); // like socat after stdin EOF
    let mut text = String::new();
    tokio::time::timeout(agentd_tests::WAIT, stream.read_to_string(&mut text))
        .await
        .unwrap()
        .unwrap();
    let messages: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sub_id = messages.iter().find(|m| m["id"] == 1).unwrap()["result"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(sub_id.len(), 16, "random string subscription ids");
    assert!(
        messages
            .iter()
            .any(|m| m["id"] == 2 && m["result"]["state"] == "closed")
    );
    // The close response and the stream's end may come in either order; the stream's last
    // notification is its explicit end.
    let notifications: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "session/event")
        .collect();
    let last = notifications.last().unwrap();
    assert_eq!(last["params"]["subscription"], sub_id.as_str());
    assert_eq!(
        last["params"]["result"]["type"], "end",
        "the stream ends explicitly before the connection closes"
    );
    assert_eq!(last["params"]["result"]["reason"], "session_closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsubscribe_only_works_on_the_own_connection() {
    let mut s = setup().await;
    let sub = s.client.subscribe(&s.session, None).await.unwrap();
    let mut other = s.daemon.client().await.unwrap();
    assert_eq!(
        other
            .call("session/unsubscribe", json!([sub]))
            .await
            .unwrap(),
        false
    );
    assert_eq!(
        s.client
            .call("session/unsubscribe", json!([sub]))
            .await
            .unwrap(),
        true
    );
    assert_eq!(
        s.client
            .call("session/unsubscribe", json!([sub]))
            .await
            .unwrap(),
        false
    );
}
