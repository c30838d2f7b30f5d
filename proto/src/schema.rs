//! JSON Schema of the whole protocol, generated from the method table. The daemon prints it
//! (`agentd schema`) and the repository keeps a copy that a test compares against.

use crate::methods::{self, Method, MethodVisitor, Subscription};
use crate::{ErrorData, ErrorKind};
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
            json!({ "description": M::DOC, "params": params, "result": result }),
        );
    }

    fn subscription<S: Subscription>(&mut self) {
        let params = self.generator.subscribe_schema::<S::Params>();
        let item = self.generator.subscribe_schema::<S::Item>();
        self.subscriptions.insert(
            S::NAME.to_owned(),
            json!({
                "description": S::DOC,
                "params": params,
                "notification": S::NOTIFICATION,
                "unsubscribe": S::UNSUBSCRIBE,
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

    #[test]
    fn every_method_and_subscription_is_described() {
        let schema = super::protocol_schema();
        let methods: Vec<&String> = schema["methods"].as_object().unwrap().keys().collect();
        assert_eq!(methods.len(), 14);
        for m in schema["methods"].as_object().unwrap().values() {
            assert!(
                m["params"].is_object() && m["result"].is_object() && m["description"].is_string()
            );
        }
        assert_eq!(
            schema["subscriptions"]["session/subscribe"]["notification"],
            "session/event"
        );
        assert_eq!(schema["errors"]["codes"].as_array().unwrap().len(), 8);
    }
}
