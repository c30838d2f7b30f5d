//! `agentctl`: the command-line client of agentd.
//!
//! When no daemon answers on the socket, `agentctl` starts `agentd` in the background (set
//! `AGENTD_NO_AUTOSTART=1` to never do so).
//!
//! Exit codes: 0 success; 1 the daemon answered with an error (or the work ended in one);
//! 2 bad usage; 69 the daemon cannot be reached; 77 the daemon refused this user;
//! 130 interrupted (Ctrl-C aborted the work).
//!
//! `main` parses the command line and picks the exit code; `cli` is the command line's shape,
//! `cmd/` has one module per command (as mini-redis does), `client` the connection, `daemon`
//! finding and starting the daemon, `render` the human view of events.

mod cli;
mod client;
mod cmd;
mod daemon;
mod error;
mod render;

use clap::Parser;
use cli::{Cli, Command, Offline};
use error::{Failure, Result};
use std::process::ExitCode;

fn main() -> ExitCode {
    // `agentctl events | head` must end quietly when the reader goes away, like any Unix tool,
    // instead of panicking on the broken pipe.
    // SAFETY: no other thread exists yet, and SIG_DFL installs no Rust handler.
    let _ = unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        )
    };
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agentctl: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(Failure(code, message)) => {
            eprintln!("agentctl: {message}");
            ExitCode::from(code)
        }
    }
}

async fn run(cli: Cli) -> Result<u8> {
    let socket = cli.socket.as_deref();
    let command = match cli.command {
        Command::Offline(Offline::Completions { shell }) => {
            clap_complete::generate(
                shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "agentctl",
                &mut std::io::stdout(),
            );
            return Ok(0);
        }
        Command::Offline(Offline::Man { dir }) => return cmd::man::run(dir.as_deref()),
        Command::Offline(Offline::Doctor) => return cmd::doctor::run(socket).await,
        Command::Online(command) => command,
    };
    let conn = daemon::connect(socket, true).await?;
    let ctx = cmd::Context {
        conn,
        json: cli.json,
    };
    cmd::run(command, &ctx).await
}
