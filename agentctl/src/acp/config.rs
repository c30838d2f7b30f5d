//! A session's ACP config options, the mode (`ask`, `auto`, `read-only`) and the model
//! (`provider/model`), and the older session modes kept beside them for clients that only
//! know those. Whichever way a client changes the mode, the other view follows: a
//! `session/set_config_option` sends `current_mode_update`, a `session/set_mode` sends
//! `config_option_update`, so both stay in step as the protocol asks.

use super::session::Command;
use super::{Bridge, approvals, daemon_error};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Client, Error};
use agentd_proto::methods as m;
use agentd_proto::{ConfigPatch, SessionId, SessionParams, SessionSnapshot, SetConfigParams};

/// The `session/set_config_option` id for the model.
const MODEL_OPTION: &str = "model";

impl Bridge {
    /// The session's options: its mode, then its model (every configured provider's models,
    /// as `provider/model`).
    pub(super) async fn config_options(
        &self,
        snapshot: &SessionSnapshot,
    ) -> Result<Vec<acp::SessionConfigOption>, Error> {
        let info = self.info().await?;
        let current = format!("{}/{}", snapshot.config.provider, snapshot.config.model);
        let mut values = vec![current.clone()];
        for p in info.providers.iter().filter(|p| p.has_key) {
            for model in std::iter::once(&p.default_model).chain(&p.models) {
                let value = format!("{}/{model}", p.name);
                if !values.contains(&value) {
                    values.push(value);
                }
            }
        }
        let options: Vec<acp::SessionConfigSelectOption> = values
            .into_iter()
            .map(|v| acp::SessionConfigSelectOption::new(v.clone(), v))
            .collect();
        Ok(vec![
            approvals::mode_option(&snapshot.config.approval),
            acp::SessionConfigOption::select(MODEL_OPTION, "Model", current, options)
                .category(acp::SessionConfigOptionCategory::Model),
        ])
    }

    pub(super) async fn set_config_option(
        &self,
        req: acp::SetSessionConfigOptionRequest,
        cx: ConnectionTo<Client>,
    ) -> Result<acp::SetSessionConfigOptionResponse, Error> {
        let attached = self.attached(&req.session_id)?;
        let session_id = SessionId(req.session_id.0.to_string());
        let Some(value) = req.value.as_value_id().map(|v| v.0.to_string()) else {
            return Err(Error::invalid_params().data(format!(
                "option {:?} takes one of its listed values, not a boolean",
                req.config_id.0
            )));
        };
        let snapshot = match req.config_id.0.as_ref() {
            MODEL_OPTION => {
                let Some((provider, model)) = value.split_once('/') else {
                    return Err(Error::invalid_params()
                        .data("the model option's value is \"provider/model\", as listed"));
                };
                let patch = ConfigPatch {
                    provider: Some(provider.to_owned()),
                    model: Some(model.to_owned()),
                    ..ConfigPatch::default()
                };
                let snapshot = self
                    .daemon
                    .call::<m::SessionSetConfig>(SetConfigParams {
                        session_id,
                        config: patch,
                    })
                    .await
                    .map_err(daemon_error)?;
                let window = snapshot.config.context_window_tokens;
                let _ = attached.commands.send(Command::ContextWindow(window)).await;
                snapshot
            }
            approvals::MODE_OPTION => {
                let snapshot = self.change_mode(session_id, &value).await?;
                let mode = approvals::mode_id(&snapshot.config.approval);
                notify(
                    &cx,
                    &req.session_id,
                    acp::SessionUpdate::CurrentModeUpdate(acp::CurrentModeUpdate::new(mode)),
                );
                snapshot
            }
            other => {
                return Err(Error::invalid_params().data(format!(
                    "unknown config option {other:?}; agentd has {:?} and {MODEL_OPTION:?}",
                    approvals::MODE_OPTION
                )));
            }
        };
        Ok(acp::SetSessionConfigOptionResponse::new(
            self.config_options(&snapshot).await?,
        ))
    }

    /// The older way to choose the mode; the config options follow.
    pub(super) async fn set_mode(
        &self,
        req: acp::SetSessionModeRequest,
        cx: ConnectionTo<Client>,
    ) -> Result<acp::SetSessionModeResponse, Error> {
        self.attached(&req.session_id)?;
        let session_id = SessionId(req.session_id.0.to_string());
        let snapshot = self.change_mode(session_id, &req.mode_id.0).await?;
        let options = self.config_options(&snapshot).await?;
        notify(
            &cx,
            &req.session_id,
            acp::SessionUpdate::ConfigOptionUpdate(acp::ConfigOptionUpdate::new(options)),
        );
        Ok(acp::SetSessionModeResponse::new())
    }

    /// Puts the session in the mode with ACP id `mode`; returns its new snapshot.
    async fn change_mode(
        &self,
        session_id: SessionId,
        mode: &str,
    ) -> Result<SessionSnapshot, Error> {
        let mode = approvals::Mode::from_id(mode)?;
        let snapshot = self
            .daemon
            .call::<m::SessionGet>(SessionParams {
                session_id: session_id.clone(),
            })
            .await
            .map_err(daemon_error)?;
        let params = approvals::set_mode(session_id, &snapshot.config.approval, mode);
        self.daemon
            .call::<m::SessionSetConfig>(params)
            .await
            .map_err(daemon_error)
    }
}

/// Sends `update` about session `id` (a client gone away is not this request's failure).
fn notify(cx: &ConnectionTo<Client>, id: &acp::SessionId, update: acp::SessionUpdate) {
    if let Err(e) = cx.send_notification(acp::SessionNotification::new(id.clone(), update)) {
        eprintln!("agentctl acp: an update of {id} could not be sent: {e}");
    }
}
