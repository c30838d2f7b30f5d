//! The tool registry: lookup by name, latest registration wins (spec 3.7), arguments checked
//! against each tool's JSON Schema before it runs.

use super::{Tool, ToolDefinition};
use std::sync::Arc;

/// A tool with its definition and compiled argument validator.
pub(crate) struct RegisteredTool {
    /// The tool.
    pub(crate) tool: Arc<dyn Tool>,
    /// Its definition, read once at registration.
    pub(crate) definition: ToolDefinition,
    validator: jsonschema::Validator,
    /// For a tool of an MCP server: which, and what it says of itself.
    pub(crate) origin: Option<McpOrigin>,
}

/// Where an MCP tool comes from, and the hints its server gave (`readOnlyHint`,
/// `destructiveHint`), which the approval policy reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct McpOrigin {
    /// The server's name.
    pub(crate) server: String,
    /// The server's own name of the tool.
    pub(crate) tool: String,
    /// The server says the tool only reads.
    pub(crate) read_only: bool,
    /// The server says the tool may destroy data.
    pub(crate) destructive: bool,
}

impl RegisteredTool {
    /// Checks `args` against the schema; the error lists every violation with its location.
    pub(crate) fn validate(&self, args: &serde_json::Value) -> Result<(), String> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(args)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// Why a tool could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// The parameter schema's root is not an object schema.
    #[error("tool {0}: the parameters schema must have \"type\": \"object\" at its root")]
    RootNotObject(String),
    /// The parameter schema is not a valid JSON Schema.
    #[error("tool {name}: invalid parameters schema: {message}")]
    InvalidSchema {
        /// The tool.
        name: String,
        /// What is wrong.
        message: String,
    },
}

/// The tools of one session, in registration order.
#[derive(Clone, Default)]
pub(crate) struct ToolRegistry {
    tools: Vec<Arc<RegisteredTool>>,
}

impl ToolRegistry {
    /// Adds a tool, replacing one of the same name.
    pub(crate) fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegisterError> {
        self.register_from(tool, None)
    }

    /// Adds a tool of an MCP server.
    pub(crate) fn register_mcp(
        &mut self,
        tool: Arc<dyn Tool>,
        origin: McpOrigin,
    ) -> Result<(), RegisterError> {
        self.register_from(tool, Some(origin))
    }

    fn register_from(
        &mut self,
        tool: Arc<dyn Tool>,
        origin: Option<McpOrigin>,
    ) -> Result<(), RegisterError> {
        let definition = tool.definition();
        if definition.parameters.get("type").and_then(|t| t.as_str()) != Some("object") {
            return Err(RegisterError::RootNotObject(definition.name));
        }
        // Draft 7 covers tool schemas and needs far less memory than the newest draft (its
        // meta-schema is smaller); a schema that names its own draft gets that one.
        let validator = if definition.parameters.get("$schema").is_some() {
            jsonschema::validator_for(&definition.parameters)
        } else {
            jsonschema::draft7::new(&definition.parameters)
        }
        .map_err(|e| RegisterError::InvalidSchema {
            name: definition.name.clone(),
            message: e.to_string(),
        })?;
        let entry = Arc::new(RegisteredTool {
            tool,
            definition,
            validator,
            origin,
        });
        match self
            .tools
            .iter_mut()
            .find(|t| t.definition.name == entry.definition.name)
        {
            Some(slot) => *slot = entry,
            None => self.tools.push(entry),
        }
        Ok(())
    }

    /// The tool with this name.
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<RegisteredTool>> {
        self.tools.iter().find(|t| t.definition.name == name)
    }

    /// Every definition, in registration order.
    pub(crate) fn definitions(&self) -> impl Iterator<Item = &ToolDefinition> {
        self.tools.iter().map(|t| &t.definition)
    }

    /// These tools, then those of `more` whose names are not taken: a session's own tools
    /// are never shadowed by an MCP server's.
    pub(crate) fn with(&self, more: &ToolRegistry) -> ToolRegistry {
        let mut tools = self.tools.clone();
        for t in &more.tools {
            if self.get(&t.definition.name).is_none() {
                tools.push(t.clone());
            }
        }
        ToolRegistry { tools }
    }

    /// The MCP tools: server, the server's name, the model's name.
    pub(crate) fn origins(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.tools.iter().filter_map(|t| {
            let o = t.origin.as_ref()?;
            Some((
                o.server.as_str(),
                o.tool.as_str(),
                t.definition.name.as_str(),
            ))
        })
    }

    /// Every name, in registration order.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.definitions().map(|d| d.name.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{ToolContext, ToolError};
    use async_trait::async_trait;
    use serde_json::json;

    struct Fixed(&'static str, &'static str);

    #[async_trait]
    impl Tool for Fixed {
        fn definition(&self) -> ToolDefinition {
            ToolDefinition {
                name: self.0.into(),
                description: self.1.into(),
                parameters: json!({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}),
            }
        }
        async fn execute(
            &self,
            _: serde_json::Value,
            _: &ToolContext<'_>,
        ) -> Result<String, ToolError> {
            Ok(self.1.into())
        }
    }

    #[test]
    fn latest_registration_wins_and_keeps_its_place() {
        let mut r = ToolRegistry::default();
        r.register(Arc::new(Fixed("a", "first"))).unwrap();
        r.register(Arc::new(Fixed("b", "other"))).unwrap();
        r.register(Arc::new(Fixed("a", "second"))).unwrap();
        assert_eq!(r.names(), ["a", "b"]);
        assert_eq!(r.get("a").unwrap().definition.description, "second");
    }

    #[test]
    fn validation_names_each_problem() {
        let mut r = ToolRegistry::default();
        r.register(Arc::new(Fixed("a", ""))).unwrap();
        let t = r.get("a").unwrap();
        assert!(t.validate(&json!({"n": 3})).is_ok());
        let err = t.validate(&json!({"n": "x"})).unwrap_err();
        assert!(err.starts_with("/n: "), "{err}");
        let err = t.validate(&json!({})).unwrap_err();
        assert!(err.contains("\"n\" is a required property"), "{err}");
    }
}
