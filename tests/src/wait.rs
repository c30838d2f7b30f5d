//! Waiting for a condition the tests cannot be told about (a file appearing, a process
//! gone, a log line): one polling helper with one patience, instead of a loop per test.

use std::time::Duration;

/// How long a condition polled by [`eventually`] may take, on a loaded 2-core machine.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until `check` holds, polling; fails the test naming `what` after [`PATIENCE`].
pub async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
