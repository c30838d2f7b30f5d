//! `agentctl`: the command-line client of agentd.
//!
//! When no daemon answers on the socket, `agentctl` starts `agentd` in the background (set
//! `AGENTD_NO_AUTOSTART=1` to never do so).
//!
//! The exit codes are listed in `error.rs` (and docs/cli.md and the man page): 0 success; 1 an error;
//! 2 bad usage; 3 and 4 the followed work stopped at a turn or round limit; 5 the answer was cut
//! off at the output-token limit; 6 the model declined to answer; 69 the daemon cannot be
//! reached; 77 refused (by the daemon, or agentctl refused the server); 130 interrupted.
//!
//! `main` parses the command line and picks the exit code; `cli` is the command line's shape,
//! `cmd/` has one module per command (as mini-redis does), `acp` the editor bridge, `mcp` the MCP
//! server, `client` the connection, `daemon`
//! finding and starting the daemon, `render` the human view of events.

mod acp;
mod cli;
mod client;
mod cmd;
mod daemon;
mod error;
mod mcp;
mod render;

use clap::Parser;
use cli::{Cli, Command, Offline, Online};
use error::{Failure, Result};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    // `agentctl events | head` must end quietly when the reader goes away, like any Unix tool,
    // instead of panicking on the broken pipe. The stdio bridges keep Rust's SIG_IGN: their
    // client closing its end is how they end, and a message on its way out then must fail
    // (and the bridge exit 0), not kill the process while the editor waits for its status.
    let bridge = matches!(
        cli.command,
        Command::Online(Online::Acp) | Command::Offline(Offline::McpServer)
    );
    if !bridge {
        // SAFETY: no other thread exists yet, and SIG_DFL installs no Rust handler.
        let _ = unsafe {
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGPIPE,
                nix::sys::signal::SigHandler::SigDfl,
            )
        };
    }
    let json = cli.json;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            Failure::failed(format!("cannot start: {e}")).report(json);
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            failure.report(json);
            ExitCode::from(failure.exit_code)
        }
    }
}

/// Help and version go to stdout as clap prints them; a usage error too, unless `--json` was
/// given, where it becomes the same JSON object as every other error.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let json = std::env::args_os().skip(1).any(|a| a == "--json");
    if !json || matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        e.exit()
    }
    // The error and its details, without the usage and help lines after the first blank one.
    let rendered = e.render().to_string();
    let message = rendered
        .split("\n\n")
        .next()
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    let message = message.trim_start_matches("error: ");
    let mut failure = Failure::usage(message);
    failure.exit_code = u8::try_from(e.exit_code()).unwrap_or(error::EX_USAGE);
    failure.report(true);
    ExitCode::from(failure.exit_code)
}

async fn run(cli: Cli) -> Result<u8> {
    let socket = cli.socket.as_deref();
    let command = match cli.command {
        Command::Offline(Offline::Completions { shell }) => {
            print!("{}", cmd::completions::script(shell));
            return Ok(0);
        }
        Command::Offline(Offline::Man { dir }) => return cmd::man::run(dir.as_deref()),
        Command::Offline(Offline::McpServer) => return mcp::run(socket).await,
        Command::Offline(Offline::Doctor) => return cmd::doctor::run(socket, cli.json).await,
        Command::Offline(Offline::Login(provider)) => {
            return provider.login(socket, cli.json).await;
        }
        Command::Offline(Offline::Logout(provider)) => {
            return provider.logout(socket, cli.json).await;
        }
        Command::Offline(Offline::Trust(trust)) => return trust.run(socket, cli.json).await,
        Command::Offline(Offline::Daemon { command }) => {
            return command.run(socket, cli.json).await;
        }
        Command::Online(Online::Mcp(mcp)) if mcp.offline() => {
            return cmd::mcp::list_configured(cli.json);
        }
        Command::Online(command) => command,
    };
    let mut command = command;
    command.prepare()?;
    let conn = daemon::connect(socket, true).await?;
    let ctx = cmd::Context {
        conn,
        socket: daemon::socket_path(socket),
        json: cli.json,
    };
    cmd::run(command, &ctx).await
}

/// Whether the reader of stdout is gone: an editor ending a stdio bridge closes its pipes, and
/// a message the bridge was sending then fails with nobody left to tell.
fn client_gone() -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
        && fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP))
}
