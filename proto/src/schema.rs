//! JSON Schema of the whole protocol, generated from the method table. The daemon prints it
//! (`agentd schema`) and the repository keeps a copy that a test compares against.

use crate::methods::{self, Method, MethodVisitor, Subscription};
use crate::{ErrorData, ErrorKind, UnsubscribeParams};
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

struct Collector {
    generator: SchemaGenerator,
    methods: Map<String, Value>,
    subscriptions: Map<String, Value>,
}

impl MethodVisitor for Collector {
    fn method<M: Method>(&mut self) {
        let params = self.generator.subscribe_schema::<M::Params>();
        let result = self.generator.subscribe_schema::<M::Response>();
        self.methods.insert(
            M::NAME.to_owned(),
            json!({ "description": M::DOC.trim(), "params": params, "result": result }),
        );
    }

    fn subscription<S: Subscription>(&mut self) {
        let params = self.generator.subscribe_schema::<S::Params>();
        let item = self.generator.subscribe_schema::<S::Item>();
        let unsubscribe_params = self.generator.subscribe_schema::<UnsubscribeParams>();
        self.subscriptions.insert(
            S::NAME.to_owned(),
            json!({
                "description": S::DOC.trim(),
                "params": params,
                "notification": S::NOTIFICATION,
                "unsubscribe": S::UNSUBSCRIBE,
                "unsubscribe_params": unsubscribe_params,
                "item": item,
            }),
        );
    }
}

trait SubschemaExt {
    fn subscribe_schema<T: schemars::JsonSchema>(&mut self) -> Value;
}

impl SubschemaExt for SchemaGenerator {
    fn subscribe_schema<T: schemars::JsonSchema>(&mut self) -> Value {
        self.subschema_for::<T>().to_value()
    }
}

/// The protocol as one JSON document: methods with params and result schemas, subscriptions
/// with their notification items, error codes, and the shared definitions they refer to.
pub fn protocol_schema() -> Value {
    let settings = SchemaSettings::draft2020_12();
    let mut collector = Collector {
        generator: settings.into_generator(),
        methods: Map::new(),
        subscriptions: Map::new(),
    };
    methods::for_each_method(&mut collector);
    methods::for_each_subscription(&mut collector);
    let error_data = collector.generator.subscribe_schema::<ErrorData>();
    let errors: Vec<Value> = ErrorKind::ALL
        .iter()
        .map(|k| json!({ "code": k.code(), "kind": k.as_str(), "retryable": k.is_retryable() }))
        .collect();
    let defs = collector.generator.take_definitions(true);
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "agentd protocol",
        "version": crate::PROTOCOL_VERSION,
        "transport": "JSON-RPC 2.0 over a Unix socket; newline-delimited JSON or Content-Length framing",
        "methods": collector.methods,
        "subscriptions": collector.subscriptions,
        "errors": { "data": error_data, "codes": errors },
        "$defs": defs,
    })
}

/// The protocol as a Markdown reference, rendered from [`protocol_schema`] so it cannot drift
/// from the code (`agentd schema --markdown`; the repository keeps it as `docs/protocol.md`).
pub fn protocol_markdown() -> String {
    let schema = protocol_schema();
    let defs = &schema["$defs"];
    let mut out = String::from(
        "# agentd protocol reference\n\n\
         Generated from the `proto` crate by `agentd schema --markdown`; do not edit by hand.\n\n\
         JSON-RPC 2.0 over a Unix socket (`$XDG_RUNTIME_DIR/agentd/agentd.sock`), one JSON message per line or \
         LSP-style `Content-Length` framing, chosen by the first byte. Params are always an object; \
         `null` for an optional field means the field is absent. Request ids are strings, integers \
         (of any size, echoed exactly) or null.\n\n",
    );
    out.push_str(&conversation());
    out.push_str("\n## Methods\n");
    for (name, method) in schema["methods"].as_object().into_iter().flatten() {
        out.push_str(&format!(
            "\n### `{name}`\n\n{}\n\n",
            text(&method["description"])
        ));
        out.push_str(&format!(
            "Params: {}\n\nResult: {}\n",
            type_name(&method["params"]),
            type_name(&method["result"])
        ));
    }
    out.push_str("\n## Subscriptions\n");
    for (name, sub) in schema["subscriptions"].as_object().into_iter().flatten() {
        out.push_str(&format!(
            "\n### `{name}`\n\n{}\n\nParams: {}\n\nNotifications: `{}` carrying {}; end early with `{}` \
             (params {}, or `[subscription]`), which is answered `true` and ends the stream with its final item.\n",
            text(&sub["description"]),
            type_name(&sub["params"]),
            text(&sub["notification"]),
            type_name(&sub["item"]),
            text(&sub["unsubscribe"]),
            type_name(&sub["unsubscribe_params"]),
        ));
    }
    out.push_str(
        "\n## Errors\n\nProtocol errors: -32700 the message is not JSON (or not UTF-8, or its \
         `Content-Length` header is bad: the connection closes after the answer); -32600 valid JSON \
         that is not a request (not an object, a bad `id`, no `method`, an empty or too large \
         batch); -32601 unknown method; -32602 invalid params (the message names the field); \
         -32006 too many subscriptions on one connection; -32007 request too big; -32008 \
         response too big. The message says what was wrong.\n\n\
         Application errors carry `data` of type [`ErrorData`](#errordata).\n\n\
         | code | `data.kind` | retryable |\n|---|---|---|\n",
    );
    for e in schema["errors"]["codes"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "| {} | `{}` | {} |\n",
            e["code"],
            text(&e["kind"]),
            e["retryable"]
        ));
    }
    out.push_str("\n## Types\n");
    for (name, def) in defs.as_object().into_iter().flatten() {
        out.push_str(&format!("\n### {name}\n\n"));
        if let Some(d) = def["description"].as_str() {
            out.push_str(&format!("{}\n\n", d.replace('\n', " ")));
        }
        describe(def, &mut out);
    }
    out
}

/// The "Conversation" section: the guide, every recorded exchange, and the short client.
/// The exchanges are checked against the daemon by `tests/tests/e2e/conversation.rs`.
fn conversation() -> String {
    let mut out = String::from(include_str!("../conversation/guide.md"));
    let steps: Value =
        serde_json::from_str(include_str!("../conversation/transcript.json")).unwrap_or_default();
    for step in steps.as_array().into_iter().flatten() {
        out.push_str(&format!(
            "\n### {}\n\n{}\n\n```\n",
            text(&step["title"]),
            text(&step["text"])
        ));
        for m in step["messages"].as_array().into_iter().flatten() {
            let (arrow, message) = match m.get("send") {
                Some(sent) => ("→", sent),
                None => ("←", &m["receive"]),
            };
            out.push_str(&format!("{arrow} {message}\n"));
        }
        out.push_str("```\n");
    }
    out.push_str(&format!(
        "\n### A client in 40 lines\n\nCreates a session in the current directory, subscribes \
         from the start, submits a prompt, prints the answer as it streams and exits when the \
         work ends (`examples/minimal_client.py`; a test runs it). It reads through a read-only \
         file and writes to the socket itself: Python's `makefile(\"rw\")` drops buffered input \
         at every write.\n\n```python\n{}```\n",
        include_str!("../conversation/client.py")
    ));
    out
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

/// A short name for a schema: a link for references, `T | null` for nullable, `[T]` for arrays.
fn type_name(schema: &Value) -> String {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap_or(r);
        return format!("[`{name}`](#{})", name.to_lowercase());
    }
    if let Some(values) = schema["enum"].as_array() {
        return values
            .iter()
            .map(|v| format!("`{v}`"))
            .collect::<Vec<_>>()
            .join(" \\| ");
    }
    if let Some(c) = schema.get("const") {
        return format!("`{c}`");
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema[key].as_array() {
            return options
                .iter()
                .map(type_name)
                .collect::<Vec<_>>()
                .join(" \\| ");
        }
    }
    match &schema["type"] {
        Value::String(t) if t == "array" => format!("[{}]", type_name(&schema["items"])),
        Value::String(t)
            if t == "object"
                && schema
                    .get("additionalProperties")
                    .is_some_and(Value::is_object) =>
        {
            format!("map of {}", type_name(&schema["additionalProperties"]))
        }
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts
            .iter()
            .map(|t| t.as_str().unwrap_or("?"))
            .collect::<Vec<_>>()
            .join(" \\| "),
        _ => "any".into(),
    }
}

/// Fields as a table, the variants of a tagged union as a list, or the type itself.
fn describe(def: &Value, out: &mut String) {
    if let Some(props) = def["properties"].as_object() {
        let required: Vec<&str> = def["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        out.push_str("| field | type | required | description |\n|---|---|---|---|\n");
        for (field, schema) in props {
            let about = schema["description"]
                .as_str()
                .unwrap_or_default()
                .replace('\n', " ");
            let needed = if required.contains(&field.as_str()) {
                "yes"
            } else {
                ""
            };
            out.push_str(&format!(
                "| `{field}` | {} | {needed} | {about} |\n",
                type_name(schema)
            ));
        }
    }
    if let Some(variants) = def["oneOf"].as_array().or(def["anyOf"].as_array()) {
        if def["properties"].is_object() {
            out.push_str("\nand one of:\n\n");
        }
        for v in variants {
            let about = v["description"]
                .as_str()
                .unwrap_or_default()
                .replace('\n', " ");
            let tag = v["properties"]
                .as_object()
                .and_then(|p| p.values().find_map(|x| x.get("const")).cloned());
            // Adjacently tagged (`{kind, data: {...}}`, events) or flat (`{kind, ...}`, daemon
            // events): the fields beside the tag.
            let (label, fields) = match v["properties"].get("data") {
                Some(data) => ("Data", data["properties"].as_object()),
                None => ("Fields", v["properties"].as_object()),
            };
            let data: Vec<String> = fields
                .into_iter()
                .flatten()
                .filter(|(_, schema)| schema.get("const").is_none())
                .map(|(field, schema)| format!("`{field}` {}", type_name(schema)))
                .collect();
            let data = if data.is_empty() {
                String::new()
            } else {
                format!(" {label}: {}.", data.join(", "))
            };
            match tag {
                Some(tag) => out.push_str(&format!("- {tag}: {about}{data}\n")),
                None => out.push_str(&format!("- {}: {about}\n", type_name(v))),
            }
        }
        return;
    }
    if !def["properties"].is_object() {
        out.push_str(&format!("{}\n", type_name(def)));
    }
}

#[cfg(test)]
mod tests {
    /// The committed schema (docs and client generators use it) matches the code. To update it:
    /// `cargo run -p agentd -- schema > proto/schema/agentd-protocol.json`.
    #[test]
    fn committed_schema_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/agentd-protocol.json");
        let committed: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("schema file exists"))
                .expect("schema file is JSON");
        assert!(
            committed == super::protocol_schema(),
            "proto/schema/agentd-protocol.json is stale: run `cargo run -p agentd -- schema > proto/schema/agentd-protocol.json`"
        );
    }

    /// `docs/protocol.md` matches the code. To update it:
    /// `cargo run -p agentd -- schema --markdown > docs/protocol.md`.
    #[test]
    fn committed_reference_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol.md");
        let committed = std::fs::read_to_string(path).expect("docs/protocol.md exists");
        assert!(
            committed == super::protocol_markdown(),
            "docs/protocol.md is stale: run `cargo run -p agentd -- schema --markdown > docs/protocol.md`"
        );
    }

    /// Variants list their fields, whether nested under `data` (events) or flat beside the tag
    /// (daemon events, history turns): issue 28 found `DaemonEvent`'s missing.
    #[test]
    fn the_variants_of_a_union_list_their_fields() {
        let reference = super::protocol_markdown();
        for line in [
            "- \"state_changed\": A session changed state. Fields: `session_id` [`SessionId`](#sessionid), `state` [`SessionState`](#sessionstate).",
            "- \"system\": A note from the daemon recorded in the conversation (for example an interrupted turn). Fields: `text` string.",
        ] {
            assert!(reference.contains(line), "missing: {line}");
        }
        assert!(reference.contains("Data: `state` [`SessionState`](#sessionstate)."));
        assert!(
            !reference.contains("Fields: `data`"),
            "events' data are not fields"
        );
    }

    #[test]
    fn every_method_and_subscription_is_described() {
        let schema = super::protocol_schema();
        let methods: Vec<&String> = schema["methods"].as_object().unwrap().keys().collect();
        assert_eq!(methods.len(), 23);
        for m in schema["methods"].as_object().unwrap().values() {
            assert!(
                m["params"].is_object() && m["result"].is_object() && m["description"].is_string()
            );
        }
        assert_eq!(
            schema["subscriptions"]["session/subscribe"]["notification"],
            "session/event"
        );
        assert_eq!(schema["errors"]["codes"].as_array().unwrap().len(), 15);
    }
}
