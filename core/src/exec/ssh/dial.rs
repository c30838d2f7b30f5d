//! A remote program's stdin and stdout as one byte stream over a host's verified connection
//! (its master: `StrictHostKeyChecking=yes`, `BatchMode=yes`): what an `ssh://` container
//! engine's API travels on (`docker system dial-stdio`, `container/ssh_engine.rs`).

use super::super::Error;
use super::super::process::{self, SpawnedChild};
use super::connection::{Connection, Output};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, ChildStdin, ChildStdout};

/// A remote program started by [`Connection::dial`]: its pipes, and its mux client.
pub(crate) struct Dialed {
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
    pub(crate) client: MuxClient,
}

/// The `ssh` mux client of a [`Dialed`] program. Dropping it kills the client, which closes
/// the channel: the remote program's stdin ends.
pub(crate) struct MuxClient {
    child: Child,
    _spawned: SpawnedChild,
}

impl Dialed {
    /// Whether its mux client still runs (its channel is open).
    pub(crate) fn alive(&mut self) -> bool {
        matches!(self.client.child.try_wait(), Ok(None))
    }
}

impl Connection {
    /// Starts `script` (bash) with `args` on the remote, its stdin and stdout piped to this
    /// side and its stderr discarded, on a channel of the master (which must be open:
    /// [`Connection::open`]).
    pub(crate) fn dial(&self, script: &str, args: &[&str]) -> Result<Dialed, Error> {
        let mut command = self.command(script, args);
        command.stderr(Stdio::null());
        let (mut child, spawned) = process::spawn(&mut command).map_err(Error::Spawn)?;
        let pipe = || Error::Spawn(std::io::Error::other("ssh's pipes were not made"));
        Ok(Dialed {
            stdin: child.stdin.take().ok_or_else(pipe)?,
            stdout: child.stdout.take().ok_or_else(pipe)?,
            client: MuxClient {
                child,
                _spawned: spawned,
            },
        })
    }

    /// Runs `script` with `args` to its end on a channel of its own, keeping at most `cap`
    /// bytes of stdout and 64 KiB of stderr; past `timeout` it fails, naming `what`.
    pub(crate) async fn check(
        &self,
        what: &str,
        script: &str,
        args: &[&str],
        cap: usize,
        timeout: Duration,
    ) -> Result<Output, Error> {
        tokio::time::timeout(timeout, self.run_alone(script, args, None, cap))
            .await
            .map_err(|_| {
                Error::Unavailable(format!(
                    "ssh host {}: {what} did not answer within {} s",
                    self.target().label,
                    timeout.as_secs()
                ))
            })?
    }
}
