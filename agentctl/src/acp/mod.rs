//! `agentctl acp`: the Agent Client Protocol (v1, JSON-RPC over stdio) for editors, bridged to
//! agentd sessions over the daemon's socket, with the official Rust SDK
//! (`agent-client-protocol`, pinned: its API changes completely between majors).
//!
//! One ACP session is one agentd session, and its id is the agentd session id, so a session
//! started with `agentctl submit` opens in the editor with `session/load`, keeps running when
//! the editor closes, and several editors can follow it. Only ACP goes to stdout; diagnostics
//! go to stderr.
//!
//! This module owns the method handlers and the bridge's table of attached sessions;
//! `session` owns one attached session's task (events → `session/update`, prompts answered
//! when their input ends), `updates` the event → update translation, `tools` how tool calls
//! look (kind, title, locations, diffs), `content` a prompt's blocks → input text and images,
//! `approvals` permission requests and the modes (`ask`, `auto`, `read-only`).
//!
//! Each request's work runs in its own task: the SDK's dispatch loop waits for a handler to
//! return, and a prompt lasts minutes while `session/cancel` must get through at once.

mod approvals;
mod commands;
mod config;
mod content;
mod lifecycle;
mod mcp;
mod session;
mod tools;
mod undo;
mod updates;

use crate::client::Connection;
use crate::error::{Failure, Kind, Result, RpcError};
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Error, JsonRpcResponse, Stdio};
use agentd_proto::methods as m;
use agentd_proto::{
    AbortParams, ConfigPatch, CreateParams, DaemonInfo, Empty, ErrorKind, ListParams, ProfileId,
    SessionId, SessionParams, SessionSnapshot, SetConfigParams, SubmitParams, WhenBusy,
};
use serde_json::value::RawValue;
use session::{Attached, Command, Start};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// The auth method every `initialize` lists: ACP clients (Zed's registry) require one, and
/// agentd's keys live with the daemon, so it tells where to put one.
const AUTH_METHOD: &str = "agentd-provider-key";

/// The bridge between one editor and the daemon.
struct Bridge {
    daemon: Arc<Connection>,
    /// Attached sessions by id. Never held across an `.await`.
    sessions: Mutex<HashMap<String, Arc<Attached>>>,
}

/// Serves ACP on stdin/stdout until the editor closes stdin.
pub(crate) async fn run(conn: Connection) -> Result<u8> {
    let bridge = Arc::new(Bridge {
        daemon: Arc::new(conn),
        sessions: Mutex::new(HashMap::new()),
    });
    let b = || bridge.clone();
    Agent
        .v1()
        .name("agentd")
        .on_receive_request(
            {
                let b = b();
                async move |req: acp::InitializeRequest, responder, _cx| {
                    responder.respond(b.initialize(&req))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let b = b();
                async move |_req: acp::AuthenticateRequest, responder, _cx| {
                    let b = b.clone();
                    answer(responder, async move { b.authenticate().await });
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let b = b();
                async move |req: acp::NewSessionRequest, responder, cx| {
                    let work = b.clone().new_session(req, cx.clone());
                    opening(b.clone(), responder, cx, work, |r| r.session_id.clone());
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let b = b();
                async move |req: acp::LoadSessionRequest, responder, cx| {
                    let id = req.session_id.clone();
                    let work = b.clone().load_session(req, cx.clone());
                    opening(b.clone(), responder, cx, work, move |_| id);
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let b = b();
                async move |req: acp::ResumeSessionRequest, responder, cx| {
                    let id = req.session_id.clone();
                    let work = b.clone().resume_session(req, cx.clone());
                    opening(b.clone(), responder, cx, work, move |_| id);
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let b = b();
                async move |req: acp::ListSessionsRequest, responder, _cx| {
                    let b = b.clone();
                    answer(responder, async move { b.list_sessions(req).await });
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let b = b();
                async move |req: acp::PromptRequest, responder, cx| {
                    let b = b.clone();
                    answer(responder, async move { b.prompt(req, cx).await });
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let b = b();
                async move |req: acp::SetSessionConfigOptionRequest, responder, cx| {
                    let b = b.clone();
                    answer(responder, async move { b.set_config_option(req, cx).await });
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let b = b();
                async move |req: acp::SetSessionModeRequest, responder, cx| {
                    let b = b.clone();
                    answer(responder, async move { b.set_mode(req, cx).await });
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let b = b();
                async move |req: acp::CloseSessionRequest, responder, _cx| {
                    let b = b.clone();
                    answer(responder, async move { b.close(req).await });
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let b = b();
                async move |req: acp::DeleteSessionRequest, responder, _cx| {
                    let b = b.clone();
                    answer(responder, async move { b.delete(req).await });
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            {
                let b = b();
                async move |req: acp::CancelNotification, _cx| {
                    let b = b.clone();
                    tokio::spawn(async move {
                        if let Err(e) = b.cancel(&req.session_id).await {
                            eprintln!("agentctl acp: cancel {}: {}", req.session_id, e.message);
                        }
                    });
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await
        .or_else(|e| match crate::client_gone() {
            true => Ok(()),
            false => Err(Failure::failed(format!("ACP connection: {e}"))),
        })?;
    Ok(0)
}

/// Runs `work` in its own task and answers the request with its result.
fn answer<T: JsonRpcResponse + Send + 'static>(
    responder: Responder<T>,
    work: impl Future<Output = std::result::Result<T, Error>> + Send + 'static,
) {
    tokio::spawn(async move { respond(responder, work.await) });
}

/// Runs `work`, a request that opens a session (the one `id_of` its answer names), in its own
/// task; answers it, then offers the session's commands (after the answer: the editor knows
/// the session by then).
fn opening<T: JsonRpcResponse + Send + 'static>(
    b: Arc<Bridge>,
    responder: Responder<T>,
    cx: ConnectionTo<Client>,
    work: impl Future<Output = std::result::Result<T, Error>> + Send + 'static,
    id_of: impl FnOnce(&T) -> acp::SessionId + Send + 'static,
) {
    tokio::spawn(async move {
        let result = work.await;
        let id = result.as_ref().ok().map(id_of);
        respond(responder, result);
        if let Some(id) = id {
            b.send_commands(&id, &cx).await;
        }
    });
}

/// Answers a request.
fn respond<T: JsonRpcResponse>(responder: Responder<T>, result: std::result::Result<T, Error>) {
    if let Err(e) = responder.respond_with_result(result) {
        eprintln!("agentctl acp: a response could not be sent: {e}");
    }
}

/// A daemon error as an ACP error: the codes ACP defines where one fits (an unknown session is
/// "resource not found", a provider without a key is "auth required"), the daemon's message
/// and `data.kind` kept.
fn daemon_error(e: jsonrpsee::core::ClientError) -> Error {
    match &e {
        jsonrpsee::core::ClientError::Call(call) => {
            acp_error(call.code(), call.message(), call.data())
        }
        _ => Error::internal_error().data(format!("the daemon: {e}")),
    }
}

/// The ACP error for a daemon's error of `code`, `message` and `data`.
fn acp_error(code: i32, message: &str, data: Option<&RawValue>) -> Error {
    let base = match Kind::of_error(code, data) {
        Kind::Daemon(ErrorKind::SessionNotFound) => Error::new(-32002, "Resource not found"),
        Kind::Daemon(ErrorKind::ProviderNotConfigured) => Error::auth_required(),
        Kind::Daemon(ErrorKind::InvalidConfig) | Kind::Rpc(RpcError::InvalidParams) => {
            Error::invalid_params()
        }
        _ => Error::internal_error(),
    };
    let kind = Kind::of_data(data);
    base.data(serde_json::json!({ "message": message, "kind": kind }))
}

/// `_meta.<key>` as a string, if the client sent one (any other type is an error).
fn meta_str(meta: Option<&acp::Meta>, key: &str) -> std::result::Result<Option<String>, Error> {
    match meta.and_then(|m| m.get(key)) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => {
            Err(Error::invalid_params().data(format!("_meta.{key} must be a string, not {other}")))
        }
    }
}

impl Bridge {
    fn initialize(&self, req: &acp::InitializeRequest) -> acp::InitializeResponse {
        let capabilities = acp::AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(
                acp::PromptCapabilities::new()
                    .embedded_context(true)
                    .image(true),
            )
            .session_capabilities(
                acp::SessionCapabilities::new()
                    .list(acp::SessionListCapabilities::new())
                    .resume(acp::SessionResumeCapabilities::new())
                    .close(acp::SessionCloseCapabilities::new())
                    .delete(acp::SessionDeleteCapabilities::new()),
            )
            .mcp_capabilities(acp::McpCapabilities::new().http(true));
        let auth = acp::AuthMethod::Agent(
            acp::AuthMethodAgent::new(AUTH_METHOD, "Provider API key for agentd").description(
                "agentd calls the model with its own keys: set ANTHROPIC_API_KEY, \
                 OPENAI_API_KEY or GEMINI_API_KEY in the daemon's environment (or api_key_env \
                 for a provider in ~/.config/agentd/config.toml), then restart it with \
                 `agentctl daemon restart`. `agentctl doctor` shows which providers have a key."
                    .to_owned(),
            ),
        );
        // Version 1 is the only one spoken; a client asking for a newer one gets 1 back and
        // decides, as the protocol says.
        let version = std::cmp::min(req.protocol_version, acp_version());
        acp::InitializeResponse::new(version)
            .agent_capabilities(capabilities)
            .auth_methods(vec![auth])
            .agent_info(
                acp::Implementation::new("agentd", env!("CARGO_PKG_VERSION"))
                    .title("agentd".to_owned()),
            )
    }

    async fn info(&self) -> std::result::Result<DaemonInfo, Error> {
        self.daemon
            .call::<m::DaemonInfoMethod>(Empty {})
            .await
            .map_err(daemon_error)
    }

    /// There is nothing to log in to: succeeds when the default provider has a key, and says
    /// how to give it one otherwise.
    async fn authenticate(&self) -> std::result::Result<acp::AuthenticateResponse, Error> {
        let info = self.info().await?;
        if info.providers.iter().any(|p| p.has_key) {
            return Ok(acp::AuthenticateResponse::new());
        }
        Err(Error::auth_required().data(
            "no provider has an API key: set ANTHROPIC_API_KEY, OPENAI_API_KEY or \
             GEMINI_API_KEY where agentd runs and restart it (`agentctl daemon restart`)",
        ))
    }

    async fn new_session(
        self: Arc<Self>,
        req: acp::NewSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> std::result::Result<acp::NewSessionResponse, Error> {
        let servers = mcp::servers(&req.mcp_servers)?;
        let cwd = absolute_dir(&req.cwd)?;
        let meta = req.meta.as_ref();
        let profile = meta_str(meta, "profile")?
            .map(|p| p.parse::<ProfileId>())
            .transpose()
            .map_err(|e| Error::invalid_params().data(format!("_meta.profile: {e}")))?;
        let params = CreateParams {
            cwd: cwd.display().to_string(),
            provider: meta_str(meta, "provider")?,
            model: meta_str(meta, "model")?,
            profile,
            title: meta_str(meta, "title")?,
            config: (!servers.is_empty()).then(|| ConfigPatch {
                mcp_servers: Some(servers),
                ..ConfigPatch::default()
            }),
            ..CreateParams::default()
        };
        let snapshot = self
            .daemon
            .call::<m::SessionCreate>(params)
            .await
            .map_err(daemon_error)?;
        let start = Start {
            since_seq: snapshot.last_seq,
            replay_until: snapshot.last_seq,
            replayed: None,
            pending: Vec::new(),
        };
        let options = self.config_options(&snapshot).await?;
        self.attach(&snapshot, cx, start);
        Ok(acp::NewSessionResponse::new(snapshot.session_id.0.clone())
            .config_options(options)
            .modes(approvals::modes(&snapshot.config.approval)))
    }

    async fn load_session(
        self: Arc<Self>,
        req: acp::LoadSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> std::result::Result<acp::LoadSessionResponse, Error> {
        let snapshot = self.reopen(&req.session_id, &req.mcp_servers).await?;
        let (done, replayed) = oneshot::channel();
        let start = Start {
            since_seq: 0,
            replay_until: snapshot.last_seq,
            replayed: Some(done),
            pending: Vec::new(),
        };
        let options = self.config_options(&snapshot).await?;
        self.attach(&snapshot, cx, start);
        // ACP: the whole conversation is sent before the answer.
        let _ = replayed.await;
        Ok(acp::LoadSessionResponse::new()
            .config_options(options)
            .modes(approvals::modes(&snapshot.config.approval)))
    }

    /// The snapshot of an existing session, given the editor's MCP servers for it (ACP sends
    /// them with every load and resume).
    async fn reopen(
        &self,
        id: &acp::SessionId,
        servers: &[acp::McpServer],
    ) -> std::result::Result<SessionSnapshot, Error> {
        let servers = mcp::servers(servers)?;
        let session_id = SessionId(id.0.to_string());
        if !servers.is_empty() {
            self.daemon
                .call::<m::SessionSetConfig>(SetConfigParams {
                    session_id: session_id.clone(),
                    config: ConfigPatch {
                        mcp_servers: Some(servers),
                        ..ConfigPatch::default()
                    },
                })
                .await
                .map_err(daemon_error)?;
        }
        self.daemon
            .call::<m::SessionGet>(SessionParams { session_id })
            .await
            .map_err(daemon_error)
    }

    /// Follows the session in its own task (replacing an earlier attachment of it).
    fn attach(&self, snapshot: &SessionSnapshot, cx: ConnectionTo<Client>, start: Start) {
        let attached = session::attach(
            self.daemon.clone(),
            cx,
            snapshot.session_id.clone(),
            PathBuf::from(&snapshot.cwd),
            snapshot.config.context_window_tokens,
            start,
        );
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.insert(snapshot.session_id.0.clone(), Arc::new(attached));
        }
    }

    fn attached(&self, id: &acp::SessionId) -> std::result::Result<Arc<Attached>, Error> {
        self.sessions
            .lock()
            .ok()
            .and_then(|s| s.get(id.0.as_ref()).cloned())
            .ok_or_else(|| {
                Error::new(-32002, "Resource not found").data(format!(
                    "session {id} is not open here: create it with session/new or open it with \
                     session/load"
                ))
            })
    }

    async fn list_sessions(
        &self,
        req: acp::ListSessionsRequest,
    ) -> std::result::Result<acp::ListSessionsResponse, Error> {
        let params = ListParams {
            state: None,
            cwd: req.cwd.map(|c| c.display().to_string()),
        };
        let list = self
            .daemon
            .call::<m::SessionList>(params)
            .await
            .map_err(daemon_error)?;
        let sessions = list
            .sessions
            .into_iter()
            // Subagents are their parent's business, not sessions to open by themselves.
            .filter(|s| s.parent_id.is_none())
            .map(|s| {
                acp::SessionInfo::new(s.session_id.0, s.cwd)
                    .title(s.title)
                    .updated_at(s.updated)
            })
            .collect();
        Ok(acp::ListSessionsResponse::new(sessions))
    }

    async fn prompt(
        &self,
        req: acp::PromptRequest,
        cx: ConnectionTo<Client>,
    ) -> std::result::Result<acp::PromptResponse, Error> {
        let attached = self.attached(&req.session_id)?;
        let content::Input { text, images } = content::input(&req.prompt)?;
        if images.is_empty()
            && let Some(command) = undo::parse(&text)
        {
            return self.run_local(&req.session_id, command, &cx).await;
        }
        let steer = match req.meta.as_ref().and_then(|m| m.get("steer")) {
            None | Some(serde_json::Value::Null) => false,
            Some(serde_json::Value::Bool(b)) => *b,
            Some(other) => {
                return Err(Error::invalid_params()
                    .data(format!("_meta.steer must be true or false, not {other}")));
            }
        };
        let question = attached
            .request(|reply| Command::Question { reply })
            .await?
            .await?;
        if let Some(request_id) = question {
            if !images.is_empty() {
                return Err(Error::invalid_params().data(
                    "the model asked a question and waits for a text answer; send the answer \
                     without images, then the images in the next prompt",
                ));
            }
            return self
                .answer_question(&req.session_id, &attached, request_id, text)
                .await;
        }
        let submitted = self
            .daemon
            .call::<m::SessionSubmit>(SubmitParams {
                session_id: SessionId(req.session_id.0.to_string()),
                text,
                images,
                client_input_id: None,
                when_busy: Some(if steer {
                    WhenBusy::Steer
                } else {
                    WhenBusy::Queue
                }),
            })
            .await
            .map_err(daemon_error)?;
        let input_id = submitted.input_id;
        let stop = attached
            .request(|reply| Command::Await { input_id, reply })
            .await?
            .await??;
        Ok(acp::PromptResponse::new(stop))
    }

    /// A prompt sent while the model waits on its question is the answer; it ends with the
    /// input that asked. The prompt rides with that input before the answer is sent, so the
    /// input cannot end unseen in between.
    async fn answer_question(
        &self,
        id: &acp::SessionId,
        attached: &Attached,
        request_id: agentd_proto::RequestId,
        text: String,
    ) -> std::result::Result<acp::PromptResponse, Error> {
        let outcome = attached.request(|reply| Command::Ride { reply }).await?;
        self.daemon
            .call::<m::SessionRespond>(agentd_proto::RespondParams {
                session_id: SessionId(id.0.to_string()),
                request_id,
                decision: None,
                message: None,
                answer: Some(text),
                output: None,
                is_error: None,
            })
            .await
            .map_err(daemon_error)?;
        Ok(acp::PromptResponse::new(outcome.await??))
    }

    /// Stops the session's work, and takes back what this client queued: ACP cancels every
    /// pending prompt, so none may run later.
    async fn cancel(&self, id: &acp::SessionId) -> std::result::Result<(), Error> {
        let attached = self.attached(id)?;
        let session_id = SessionId(id.0.to_string());
        let _ = attached.commands.send(Command::Cancelled).await;
        self.daemon
            .call::<m::SessionQueueClear>(SessionParams {
                session_id: session_id.clone(),
            })
            .await
            .map_err(daemon_error)?;
        self.daemon
            .call::<m::SessionAbort>(AbortParams {
                session_id,
                close: false,
            })
            .await
            .map_err(daemon_error)?;
        Ok(())
    }
}

fn acp_version() -> agent_client_protocol::schema::ProtocolVersion {
    agent_client_protocol::schema::ProtocolVersion::V1
}

/// The session directory: absolute (ACP requires it) and existing.
fn absolute_dir(cwd: &Path) -> std::result::Result<PathBuf, Error> {
    if !cwd.is_absolute() {
        return Err(Error::invalid_params().data(format!(
            "cwd must be an absolute path, not {:?}",
            cwd.display()
        )));
    }
    if !cwd.is_dir() {
        return Err(
            Error::invalid_params().data(format!("cwd {} is not a directory", cwd.display()))
        );
    }
    Ok(cwd.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::acp_error;
    use serde_json::json;
    use serde_json::value::{RawValue, to_raw_value};

    /// The ACP code and `data` a daemon error of `code` and `data` becomes.
    fn check(code: i32, data: Option<serde_json::Value>) -> (i32, serde_json::Value) {
        let data: Option<Box<RawValue>> = data.map(|d| to_raw_value(&d).unwrap());
        let e = acp_error(code, "m", data.as_deref());
        (i32::from(e.code), e.data.unwrap_or_default())
    }

    #[test]
    fn daemon_errors_map_by_their_kind() {
        let kind = |k: &str| Some(json!({"kind": k, "retryable": false}));
        assert_eq!(
            check(-32010, kind("session_not_found")),
            (-32002, json!({"message": "m", "kind": "session_not_found"}))
        );
        assert_eq!(check(-32021, kind("provider_not_configured")).0, -32000);
        assert_eq!(check(-32020, kind("invalid_config")).0, -32602);
        assert_eq!(
            check(-32602, None),
            (-32602, json!({"message": "m", "kind": null}))
        );
        assert_eq!(check(-32011, kind("session_busy")).0, -32603);
        // A kind from a newer daemon is passed on as sent.
        assert_eq!(
            check(-32099, kind("brand_new")),
            (-32603, json!({"message": "m", "kind": "brand_new"}))
        );
    }
}
