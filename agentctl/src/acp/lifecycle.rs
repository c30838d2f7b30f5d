//! The stable session methods beyond `session/new` and `session/load`: `session/resume`
//! (follow an existing session from now on, no replay), `session/close` (cancel its work and
//! stop following it) and `session/delete` (remove it from the daemon, and so from
//! `session/list`).
//!
//! `session/close` does not call the daemon's `session/close`: that one is final (a closed
//! agentd session takes no more input), while an ACP client closes a session to free what the
//! bridge holds and opens it again from its history later. So close cancels like
//! `session/cancel` and drops the subscription; the daemon unloads the idle, unwatched session
//! by itself.

use super::session::{Command, Start};
use super::{Bridge, daemon_error};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Client, Error};
use agentd_proto::methods as m;
use agentd_proto::{ErrorKind, SessionId, SessionParams};
use std::sync::Arc;

impl Bridge {
    /// Follows the session from its newest event; the requests it waits on are asked (an
    /// approval) or left for the next prompt (a question).
    pub(super) async fn resume_session(
        self: Arc<Self>,
        req: acp::ResumeSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> Result<acp::ResumeSessionResponse, Error> {
        let snapshot = self.reopen(&req.session_id, &req.mcp_servers).await?;
        let start = Start {
            since_seq: snapshot.last_seq,
            replay_until: snapshot.last_seq,
            replayed: None,
            pending: snapshot.pending.clone(),
        };
        let options = self.config_options(&snapshot).await?;
        self.attach(&snapshot, cx, start);
        Ok(acp::ResumeSessionResponse::new()
            .config_options(options)
            .modes(super::approvals::modes(&snapshot.config.approval)))
    }

    /// Cancels the session's work as `session/cancel` does (its waiting prompts answer
    /// `cancelled`), then stops following it. The session stays in the daemon.
    pub(super) async fn close(
        &self,
        req: acp::CloseSessionRequest,
    ) -> Result<acp::CloseSessionResponse, Error> {
        let attached = self.attached(&req.session_id)?;
        let cancelled = self.cancel(&req.session_id).await;
        // Closed either way: an error in cancelling is the answer, not a reason to stay.
        let _ = attached.commands.send(Command::Close).await;
        self.detach(&req.session_id);
        cancelled.map(|()| acp::CloseSessionResponse::new())
    }

    /// Deletes the session with its history and events (the daemon closes it first if it
    /// runs). A session that does not exist is deleted already, as the protocol asks.
    pub(super) async fn delete(
        &self,
        req: acp::DeleteSessionRequest,
    ) -> Result<acp::DeleteSessionResponse, Error> {
        let params = SessionParams {
            session_id: SessionId(req.session_id.0.to_string()),
        };
        match self.daemon.call::<m::SessionDelete>(params).await {
            Ok(_) => {}
            Err(jsonrpsee::core::ClientError::Call(e))
                if crate::error::Kind::of_error(e.code(), e.data())
                    == crate::error::Kind::Daemon(ErrorKind::SessionNotFound) => {}
            Err(e) => return Err(daemon_error(e)),
        }
        if let Ok(attached) = self.attached(&req.session_id) {
            let _ = attached.commands.send(Command::Close).await;
        }
        self.detach(&req.session_id);
        Ok(acp::DeleteSessionResponse::new())
    }

    fn detach(&self, id: &acp::SessionId) {
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.remove(id.0.as_ref());
        }
    }
}
