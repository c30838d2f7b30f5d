//! The argument schemas of the built-in tools, derived from the structs their arguments are
//! parsed into, so what the model is told and what the tool reads cannot differ.
//!
//! The schema is cut to what every provider family takes in a tool definition (Anthropic's
//! `input_schema`, OpenAI's `parameters` without strict mode, Gemini's `parametersJsonSchema`):
//! one object, every subschema inline, optional fields absent rather than `null`, and no
//! `$schema`, `title`, `format` or `default`. A field's doc comment is its description, its
//! lines joined by spaces.

use schemars::generate::SchemaSettings;
use schemars::transform::{RecursiveTransform, Transform};
use schemars::{JsonSchema, Schema};
use serde_json::Value;

/// The argument schema of a tool whose arguments parse into `T`.
pub(crate) fn parameters<T: JsonSchema>() -> Value {
    let mut settings = SchemaSettings::draft07();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let mut schema = settings.into_generator().into_root_schema_for::<T>();
    RecursiveTransform(for_providers).transform(&mut schema);
    // The struct's own doc comment is for Rust readers; the tool's description is elsewhere.
    schema.remove("description");
    schema.to_value()
}

fn for_providers(schema: &mut Schema) {
    for keyword in ["title", "format", "default"] {
        schema.remove(keyword);
    }
    // An `Option` field is one that may be left out, not one that may be `null`.
    if let Some(Value::Array(types)) = schema.get("type") {
        let types: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if let [one] = types.as_slice() {
            schema.insert("type".into(), one.clone());
        }
    }
    if let Some(Value::String(description)) = schema.get_mut("description") {
        *description = description.replace('\n', " ");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::tools::{
        ApplyPatch, AskUser, CloseAgent, EditFile, Glob, Grep, ListDir, ReadFile, ReadManyFiles,
        SendInput, Shell, SpawnAgent, Tool, ToolDefinition, Wait, WriteFile,
    };
    use std::sync::Arc;

    fn builtin() -> Vec<ToolDefinition> {
        let tools: Vec<Arc<dyn Tool>> = vec![
            Arc::new(ReadFile),
            Arc::new(ReadManyFiles),
            Arc::new(WriteFile),
            Arc::new(EditFile),
            Arc::new(ApplyPatch),
            Arc::new(Shell),
            Arc::new(Grep { output_modes: true }),
            Arc::new(Grep {
                output_modes: false,
            }),
            Arc::new(Glob),
            Arc::new(ListDir),
            Arc::new(AskUser),
            Arc::new(SpawnAgent),
            Arc::new(SendInput),
            Arc::new(Wait),
            Arc::new(CloseAgent),
        ];
        tools.iter().map(|t| t.definition()).collect()
    }

    /// What the model is told about each built-in tool matches `testdata/definitions.json`,
    /// so a change to a schema or a description is one someone meant. To accept a change,
    /// run this test with `AGENTD_BLESS=1`.
    #[test]
    fn definitions_match_the_committed_copy() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/tools/testdata/definitions.json"
        );
        let generated = serde_json::to_value(builtin()).unwrap();
        if std::env::var_os("AGENTD_BLESS").is_some() {
            let text = serde_json::to_string_pretty(&generated).unwrap();
            std::fs::write(path, text + "\n").unwrap();
        }
        let committed: Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert!(
            generated == committed,
            "{path} differs from the tools' definitions; run with AGENTD_BLESS=1 if that is meant"
        );
    }

    /// The keywords every provider family takes in a tool's parameters.
    const ACCEPTED: [&str; 12] = [
        "type",
        "description",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "minimum",
        "maximum",
        "minItems",
        "maxItems",
        "minLength",
    ];

    fn check(schema: &Value, at: &str, problems: &mut Vec<String>) {
        let Some(object) = schema.as_object() else {
            problems.push(format!("{at}: not an object"));
            return;
        };
        for (keyword, value) in object {
            if !ACCEPTED.contains(&keyword.as_str()) {
                problems.push(format!("{at}: {keyword}"));
            }
            if keyword == "type" && !value.is_string() {
                problems.push(format!("{at}: type {value}"));
            }
        }
        for (name, property) in object
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            check(property, &format!("{at}.{name}"), problems);
        }
        if let Some(items) = object.get("items") {
            check(items, &format!("{at}[]"), problems);
        }
    }

    /// Each schema is one object that closes its properties and uses only keywords every
    /// provider takes: no references, no `null` types, no formats or defaults.
    #[test]
    fn every_schema_is_one_every_provider_takes() {
        let mut problems = Vec::new();
        for def in builtin() {
            let p = &def.parameters;
            if p["type"] != "object" || p["additionalProperties"] != false {
                problems.push(format!("{}: not a closed object", def.name));
            }
            check(p, &def.name, &mut problems);
        }
        assert_eq!(problems, Vec::<String>::new());
    }
}
