//! Builders for Anthropic Messages SSE streams, shaped like the recorded streams in
//! `core/testdata/providers/anthropic` (message_start with usage, a ping, text split into
//! several deltas, tool input split mid-token with a leading empty fragment, message_delta with
//! cumulative usage, message_stop). A test checks this shape against the recordings.

use crate::mock::Chunk;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn event(data: Value) -> Chunk {
    let kind = data["type"].as_str().unwrap_or_default().to_owned();
    Chunk::Data(format!("event: {kind}\ndata: {data}\n\n"))
}

/// The opening events of a message.
pub fn message_start() -> Chunk {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    event(json!({"type": "message_start", "message": {
        "id": format!("msg_mock{id:04}"), "type": "message", "role": "assistant", "model": "claude-mock-1",
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 50, "output_tokens": 1}}}))
}

/// A text block at `index`, its text split into word-sized deltas.
pub fn text_block(index: u32, text: &str) -> Vec<Chunk> {
    let mut chunks = vec![
        event(
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ),
        Chunk::Data("event: ping\ndata: {\"type\": \"ping\"}\n\n".into()),
    ];
    let mut rest = text;
    while !rest.is_empty() {
        let cut = rest
            .char_indices()
            .find(|(i, c)| *i > 0 && *c == ' ')
            .map_or(rest.len(), |(i, _)| i);
        chunks.push(event(json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": &rest[..cut]}})));
        rest = &rest[cut..];
    }
    chunks.push(event(json!({"type": "content_block_stop", "index": index})));
    chunks
}

/// A tool_use block at `index` whose JSON input arrives in 7-byte fragments.
pub fn tool_block(index: u32, id: &str, name: &str, input: &Value) -> Vec<Chunk> {
    let mut chunks = vec![
        event(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})),
        event(
            json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ),
    ];
    let json = input.to_string();
    let mut start = 0;
    while start < json.len() {
        let mut end = (start + 7).min(json.len());
        while !json.is_char_boundary(end) {
            end += 1;
        }
        chunks.push(event(json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": &json[start..end]}})));
        start = end;
    }
    chunks.push(event(json!({"type": "content_block_stop", "index": index})));
    chunks
}

/// The closing events of a message.
pub fn message_end(stop_reason: &str) -> Vec<Chunk> {
    vec![
        event(
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 50, "output_tokens": 20}}),
        ),
        event(json!({"type": "message_stop"})),
    ]
}

/// A whole response: text only.
pub fn text(text: &str) -> Vec<Chunk> {
    let mut chunks = vec![message_start()];
    chunks.extend(text_block(0, text));
    chunks.extend(message_end("end_turn"));
    chunks
}

/// A whole response: optional text, then tool calls `(id, name, input)`.
pub fn tools(text: &str, calls: &[(&str, &str, Value)]) -> Vec<Chunk> {
    let mut chunks = vec![message_start()];
    let mut index = 0;
    if !text.is_empty() {
        chunks.extend(text_block(0, text));
        index = 1;
    }
    for (id, name, input) in calls {
        chunks.extend(tool_block(index, id, name, input));
        index += 1;
    }
    chunks.extend(message_end("tool_use"));
    chunks
}

/// A response with one `shell` call.
pub fn shell(id: &str, command: &str) -> Vec<Chunk> {
    tools("", &[(id, "shell", json!({"command": command}))])
}
