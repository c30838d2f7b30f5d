//! Answering commands. Never waits: what needs waiting becomes work, or a reply sent when the
//! work ends or the disk has the change.

use super::{Core, StorageRetry, Task, Work};
use crate::session::events::Joined;
use crate::session::{Command, Error};
use agentd_proto::{ImageData, SessionState};
use std::time::Instant;

impl Task {
    /// Answers a command. Never waits: what needs waiting becomes work, or a reply sent when
    /// the work ends.
    pub(super) fn handle(&self, command: Command) {
        let mut core = self.core();
        // Any command is use: an unloaded session would only have to load again.
        core.view.send_modify(|v| v.active = Instant::now());
        match command {
            Command::Submit {
                text,
                images,
                client_input_id,
                when_busy,
                reply,
            } => {
                let result = self.check_takes_images(&core, &images).and_then(|()| {
                    core.submit(&self.cancel, text, images, client_input_id, when_busy)
                });
                core.reply_when_written(reply, result);
            }
            Command::Steer {
                text,
                images,
                reply,
            } => {
                let result = self
                    .check_takes_images(&core, &images)
                    .and_then(|()| core.steer(text, images));
                core.reply_when_written(reply, result);
            }
            Command::QueueClear(reply) => {
                let result = core.queue_clear();
                core.reply_when_written(reply, result);
            }
            Command::SetConfig {
                patch,
                provider,
                reply,
            } => {
                let result = core.set_config(&patch);
                // The servers' tools depend on the sandbox too: a read-only one offers fewer.
                let mcp_changed = patch.mcp_servers.is_some() || patch.sandbox.is_some();
                if let (Ok(config), Some(mcp), true) = (&result, &self.mcp, mcp_changed) {
                    let read_only = config.sandbox == agentd_proto::SandboxMode::ReadOnly;
                    mcp.reconfigure(config.mcp_servers.clone(), read_only);
                }
                if let (Ok(config), Some(hooks)) = (&result, &self.hooks) {
                    hooks.reconfigure(config);
                }
                if let (Ok(_), Some((name, client))) = (&result, provider) {
                    self.providers.insert(&name, client);
                }
                core.reply_when_saved(reply, result);
            }
            Command::Rollback {
                turns,
                files: false,
                reply,
                ..
            } => {
                let result = core.rollback(turns);
                core.reply_when_saved(reply, result);
            }
            Command::Rollback {
                turns,
                force,
                reply,
                ..
            } => {
                // The files are put back off the task, as work, while commands are answered.
                match core.check_idle().and_then(|()| core.rollback_inputs(turns)) {
                    Ok(_) => {
                        core.next = Some(Work::Undo {
                            turns,
                            force,
                            reply,
                        });
                        core.set_state(SessionState::Processing);
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            Command::Redo { force, reply } => {
                match core.check_idle().and_then(|()| core.redo_point()) {
                    Ok(_) => {
                        core.next = Some(Work::Redo { force, reply });
                        core.set_state(SessionState::Processing);
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            Command::Compact(reply) => {
                let started = core.check_open().and_then(|()| {
                    if core.state != SessionState::Idle || core.next.is_some() {
                        return Err(Error::Busy(self.info.id.clone()));
                    }
                    core.check_storage()
                });
                match started {
                    Ok(()) => {
                        let token = self.cancel.child_token();
                        core.turn = Some(token.clone());
                        core.next = Some(Work::Compact(token, reply));
                        core.set_state(SessionState::Processing);
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            Command::History(reply) => {
                let _ = reply.send(core.history.branch());
            }
            Command::InputEntry { input_id, reply } => {
                let _ = reply.send(core.history.input(&input_id));
            }
            Command::Subscribe { since_seq, reply } => {
                let joined: Joined = core.log.subscribe(since_seq);
                let _ = reply.send(joined);
            }
            Command::Abort(reply) => {
                let working = core.state.is_working();
                core.cancel_turn();
                core.aborts.push((reply, working));
                if !working && core.next.is_none() {
                    core.next = Some(Work::Terminate);
                }
            }
            Command::Close { reason, reply } => {
                if core.state == SessionState::Closed {
                    let _ = reply.send(());
                    return;
                }
                core.closes.push(reply);
                if core.closing.is_none() {
                    core.closing = Some(reason);
                }
                core.cancel_turn();
                if !core.state.is_working() && core.next.is_none() {
                    core.next = Some(Work::Close);
                }
            }
            // Only an idle task unloads (see `run`).
            Command::Evict(reply) => {
                let _ = reply.send(None);
            }
            Command::RetryStorage(reply) => {
                let retry: StorageRetry = match core.log.writer() {
                    Some(writer) => Box::pin(writer.sync()),
                    None => Box::pin(async { Ok(()) }),
                };
                let _ = reply.send(retry);
            }
            Command::Emit(body) => core.emit(body),
            Command::Result(reply) => {
                let _ = reply.send(core.result());
            }
            Command::Saved(reply) => core.reply_when_saved(reply, ()),
            Command::Respond { params, reply } => {
                let result = core.respond(params);
                core.reply_when_written(reply, result);
            }
        }
    }

    /// Images are taken only when the session's provider takes them: refused here, never
    /// dropped on the way to the model.
    fn check_takes_images(&self, core: &Core, images: &[ImageData]) -> Result<(), Error> {
        let provider = &core.config.provider;
        let takes = self
            .providers
            .get(provider)
            .is_none_or(|p| p.takes_input_images());
        if images.is_empty() || takes {
            return Ok(());
        }
        Err(Error::InvalidParams(format!(
            "images: provider {provider:?} does not take images (its models are text-only by \
             default; set `images = true` under [providers.{provider}] in the daemon's config \
             if they take them), so {} image(s) cannot be sent; switch the session to a \
             provider that does, or send text only",
            images.len()
        )))
    }
}
