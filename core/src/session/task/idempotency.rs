//! Client input ids remembered for idempotent submits: a submit that repeats one gets the
//! first one's result and does nothing else.

use agentd_proto::SubmitResponse;
use std::collections::{HashMap, VecDeque};

/// Client input ids remembered per session.
const IDEMPOTENCY_KEYS: usize = 1024;

/// The results of the newest submits that carried a client input id; the oldest is forgotten
/// first.
#[derive(Default)]
pub(super) struct Submitted {
    results: HashMap<String, SubmitResponse>,
    order: VecDeque<String>,
}

impl Submitted {
    /// The result of the submit that carried `key`, while it is remembered.
    pub(super) fn get(&self, key: &str) -> Option<&SubmitResponse> {
        self.results.get(key)
    }

    /// Remembers `response` as the result of the submit that carried `key`.
    pub(super) fn remember(&mut self, key: String, response: SubmitResponse) {
        if self.order.len() >= IDEMPOTENCY_KEYS
            && let Some(old) = self.order.pop_front()
        {
            self.results.remove(&old);
        }
        self.results.insert(key.clone(), response);
        self.order.push_back(key);
    }
}
