//! The MCP server's connection to the daemon: made at the first tool call (starting the daemon
//! as every agentctl command does, unless `AGENTD_NO_AUTOSTART=1`), shared by the calls, and
//! made again after it was lost, so a restarted daemon is found without restarting the MCP
//! client. A daemon that cannot be reached fails that call only.

use crate::client::Connection;
use crate::daemon;
use crate::error::Result;
use std::path::PathBuf;
use std::sync::Mutex;

pub(super) struct Link {
    /// `--socket` / `AGENTD_SOCKET`, else the default.
    socket: Option<PathBuf>,
    /// The last connection made. Never held across an `.await`: two calls that find none
    /// both connect, and the later one is kept.
    conn: Mutex<Option<Connection>>,
}

impl Link {
    pub(super) fn new(socket: Option<PathBuf>) -> Self {
        Self {
            socket,
            conn: Mutex::new(None),
        }
    }

    /// A live connection to the daemon.
    pub(super) async fn get(&self) -> Result<Connection> {
        let cached = self.conn.lock().ok().and_then(|c| c.clone());
        if let Some(conn) = cached.filter(Connection::is_connected) {
            return Ok(conn);
        }
        let conn = daemon::connect(self.socket.as_deref(), true).await?;
        if let Ok(mut slot) = self.conn.lock() {
            *slot = Some(conn.clone());
        }
        Ok(conn)
    }
}
