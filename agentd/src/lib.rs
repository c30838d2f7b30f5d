//! agentd: a daemon that hosts many concurrent coding-agent sessions and serves them over
//! JSON-RPC on a Unix socket.
//!
//! The library is usable without the server (spec 1.2): build a [`session::SessionSpec`] with
//! a [`profile::Profile`], an [`exec::ExecutionEnvironment`] and an [`llm::Provider`], call
//! [`session::Session::spawn`], submit input, and read the session's events.
//!
//! Modules, one concern each (see ARCHITECTURE.md for the code map and invariants):
//! - [`server`]: socket lifecycle, framing, dispatch, peer credentials;
//! - [`session`]: the session actor, registry, queues, state machine and event log;
//! - [`agent`]: the agentic loop;
//! - [`llm`]: provider clients over HTTP + SSE;
//! - [`profile`]: provider-aligned tool sets and system prompts;
//! - [`tools`]: the tool registry and tools;
//! - [`exec`]: where tools run (process groups, environment filtering);
//! - [`store`]: persistence of sessions, their history trees and event logs;
//! - [`config`]: the configuration file and environment.

pub mod agent;
pub mod config;
pub mod exec;
pub mod llm;
pub mod profile;
pub mod server;
pub mod session;
pub mod store;
pub mod tools;
