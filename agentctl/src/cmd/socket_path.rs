//! `agentctl socket-path`: where this user's daemon listens. Editor plugins call it rather than
//! each writing the rule down again (`--socket`, `AGENTD_SOCKET`, the runtime directory), and it
//! answers only after the checks every agentctl connection makes: the runtime directory is the
//! user's own and the process serving the socket runs as the user (`SO_PEERCRED`, which an
//! editor cannot read itself). Nothing answering starts the daemon, as for any other command.

use super::print;
use crate::error::Result;
use serde::Serialize;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

#[derive(Serialize)]
struct SocketPath<'a> {
    socket: std::borrow::Cow<'a, str>,
}

/// Prints `socket`, which a connection has just been checked on.
pub(crate) fn run(socket: &Path, json: bool) -> Result<u8> {
    let found = SocketPath {
        socket: socket.to_string_lossy(),
    };
    print(json, &found, |_| {
        // The bytes as they are: a plugin passes them back to connect(2).
        let mut out = std::io::stdout().lock();
        let _ = out
            .write_all(socket.as_os_str().as_bytes())
            .and_then(|()| out.write_all(b"\n"));
    });
    Ok(0)
}
