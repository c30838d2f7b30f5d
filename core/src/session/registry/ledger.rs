//! The process ledger: every environment records the process groups it starts in the store's
//! `groups.json`, so that the next start of the daemon ends what a crash left running.

use crate::exec::{ProcessId, ProcessLedger};
use crate::store::{ProcessRecords, RecordedGroup};

/// The store's group records as environments see them.
pub(super) struct Ledger(pub(super) ProcessRecords);

impl ProcessLedger for Ledger {
    fn started(&self, group: ProcessId) {
        self.0.add(recorded(group));
    }
    fn ended(&self, group: ProcessId) {
        self.0.remove(recorded(group));
    }
}

fn recorded(group: ProcessId) -> RecordedGroup {
    RecordedGroup {
        pgid: group.pid,
        start_time: group.start_time,
    }
}
