//! The bridge's own commands (`undo`) and the session's skills and prompt commands as ACP's
//! `available_commands_update`, sent after `session/new`, `session/load` and `session/resume`
//! are answered, so editors offer them after `/`. A prompt that starts with `/name` of a skill
//! or prompt command goes to the daemon as typed, which expands it.

use super::{Bridge, undo};
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use agentd_proto::methods as m;
use agentd_proto::{CommandsResponse, SessionId, SessionParams};

/// The update listing the bridge's own commands, then `listed` (without those of the same
/// names: the bridge's come first and take them).
pub(super) fn update(listed: &CommandsResponse) -> acp::SessionUpdate {
    let daemons = listed
        .commands
        .iter()
        .filter(|c| !undo::NAMES.contains(&c.name.as_str()))
        .map(|c| {
            let command = acp::AvailableCommand::new(c.name.clone(), c.description.clone());
            match &c.argument_hint {
                Some(hint) => command.input(acp::AvailableCommandInput::Unstructured(
                    acp::UnstructuredCommandInput::new(hint.clone()),
                )),
                None => command,
            }
        });
    let commands = undo::offered().into_iter().chain(daemons).collect();
    acp::SessionUpdate::AvailableCommandsUpdate(acp::AvailableCommandsUpdate::new(commands))
}

impl Bridge {
    /// Tells the editor what session `id` offers after `/`.
    pub(super) async fn send_commands(&self, id: &acp::SessionId, cx: &ConnectionTo<Client>) {
        let params = SessionParams {
            session_id: SessionId(id.0.to_string()),
        };
        match self.daemon.call::<m::SessionCommands>(params).await {
            Ok(listed) => {
                let notification = acp::SessionNotification::new(id.clone(), update(&listed));
                if let Err(e) = cx.send_notification(notification) {
                    eprintln!("agentctl acp: the commands of {id} could not be sent: {e}");
                }
            }
            Err(e) => eprintln!("agentctl acp: the commands of {id}: {e}"),
        }
    }
}
