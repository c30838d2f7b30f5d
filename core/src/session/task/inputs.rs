//! Input: submits (started at once when idle, queued as `when_busy` says otherwise, idempotent
//! by client input id) and the steering and follow-up queues.

use super::{Core, Work, new_id};

/// Queued steering and follow-up messages, each.
const MAX_QUEUED: usize = 100;
use crate::agent::Input;
use crate::session::Error;
use agentd_proto::{
    Disposition, ImageData, InputId, QueueContents, SessionState, SubmitResponse, WhenBusy,
};
use tokio_util::sync::CancellationToken;

impl Core {
    fn new_input(&self, text: String, images: Vec<ImageData>) -> Input {
        Input {
            input_id: InputId(new_id("in_")),
            text,
            images,
        }
    }

    pub(super) fn submit(
        &mut self,
        cancel: &CancellationToken,
        text: String,
        images: Vec<ImageData>,
        client_input_id: Option<String>,
        when_busy: WhenBusy,
    ) -> Result<SubmitResponse, Error> {
        self.check_open()?;
        if let Some(previous) = client_input_id.as_ref().and_then(|k| self.submitted.get(k)) {
            return Ok(previous.clone());
        }
        self.check_storage()?;
        let input = self.new_input(text, images);
        let input_id = input.input_id.clone();
        let disposition = if self.state == SessionState::Idle && self.next.is_none() {
            let token = cancel.child_token();
            self.turn = Some(token.clone());
            self.next = Some(Work::Process(input, token));
            self.set_state(SessionState::Processing);
            Disposition::Started
        } else {
            let queue = match when_busy {
                WhenBusy::Queue => &mut self.follow_up,
                WhenBusy::Steer => &mut self.steering,
                WhenBusy::Reject => return Err(Error::Busy(self.info.id.clone())),
            };
            if queue.len() >= MAX_QUEUED {
                return Err(Error::InvalidParams(format!(
                    "the queue is full ({MAX_QUEUED} items); wait, or clear it with session/queue_clear"
                )));
            }
            queue.push_back(input);
            self.queue_changed();
            if when_busy == WhenBusy::Steer {
                Disposition::Steering
            } else {
                Disposition::FollowUp
            }
        };
        let response = SubmitResponse {
            input_id,
            disposition,
            queued: disposition != Disposition::Started,
        };
        if let Some(key) = client_input_id {
            self.submitted.remember(key, response.clone());
        }
        Ok(response)
    }

    pub(super) fn steer(
        &mut self,
        text: String,
        images: Vec<ImageData>,
    ) -> Result<SubmitResponse, Error> {
        self.check_open()?;
        self.check_storage()?;
        if self.steering.len() >= MAX_QUEUED {
            return Err(Error::InvalidParams(format!(
                "the steering queue is full ({MAX_QUEUED} items); wait for the next tool round"
            )));
        }
        let input = self.new_input(text, images);
        let input_id = input.input_id.clone();
        self.steering.push_back(input);
        self.queue_changed();
        Ok(SubmitResponse {
            input_id,
            disposition: Disposition::Steering,
            queued: true,
        })
    }

    /// Removes and returns every queued steering message.
    pub(in crate::session) fn drain_steering(&mut self) -> Vec<Input> {
        if self.steering.is_empty() {
            return Vec::new();
        }
        let drained = self.steering.drain(..).collect();
        self.queue_changed();
        drained
    }

    pub(super) fn queue_clear(&mut self) -> QueueContents {
        let removed = self.queue();
        if !self.steering.is_empty() || !self.follow_up.is_empty() {
            self.steering.clear();
            self.follow_up.clear();
            self.queue_changed();
        }
        removed
    }
}
