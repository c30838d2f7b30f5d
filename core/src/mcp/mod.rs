//! MCP servers as tool sources: the checks on their configuration.

mod config;

pub(crate) use config::validate;
