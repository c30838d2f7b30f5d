//! One module per command (as mini-redis does); [`run`] dispatches the commands that talk to
//! the daemon, and the helpers below are what several commands share.

pub(crate) mod abort;
pub(crate) mod close;
pub(crate) mod commands;
pub(crate) mod compact;
pub(crate) mod completions;
pub(crate) mod config;
pub(crate) mod daemon;
pub(crate) mod diff;
pub(crate) mod doctor;
pub(crate) mod events;
pub(crate) mod fork;
pub(crate) mod gc;
pub(crate) mod history;
pub(crate) mod image;
pub(crate) mod login;
pub(crate) mod ls;
pub(crate) mod man;
pub(crate) mod mcp;
pub(crate) mod models;
pub(crate) mod new;
pub(crate) mod queue;
pub(crate) mod respond;
pub(crate) mod rm;
pub(crate) mod rollback;
pub(crate) mod show;
pub(crate) mod socket_path;
pub(crate) mod status;
pub(crate) mod steer;
pub(crate) mod submit;
pub(crate) mod trust;
pub(crate) mod undo;

mod follow;
pub(crate) mod stream;

use crate::cli::Online;
use crate::client::Connection;
use crate::error::{Failure, Result};
use agentd_proto::methods as m;
use agentd_proto::{ListParams, SessionId};
use serde::Serialize;
use std::io::{IsTerminal, Read};

/// What a command that talks to the daemon gets.
pub(crate) struct Context {
    /// The connection to the daemon.
    pub(crate) conn: Connection,
    /// The socket `conn` was made on.
    pub(crate) socket: std::path::PathBuf,
    /// `--json`: NDJSON on stdout instead of text.
    pub(crate) json: bool,
}

impl Online {
    /// What a command does before the daemon is contacted: reading the files it sends.
    pub(crate) fn prepare(&mut self) -> Result<()> {
        match self {
            Online::Submit(args) => args.images.read(),
            Online::Steer(args) | Online::FollowUp(args) => args.images.read(),
            _ => Ok(()),
        }
    }
}

/// Runs a command that needs the daemon; returns the exit code.
pub(crate) async fn run(command: Online, ctx: &Context) -> Result<u8> {
    match command {
        Online::Status => status::run(ctx).await,
        Online::Models => models::run(ctx).await,
        Online::New(args) => new::run(args, ctx).await,
        Online::Ls(args) => args.run(ctx).await,
        Online::Show(args) => args.run(ctx).await,
        Online::Submit(args) => args.run(ctx).await,
        Online::Steer(args) => args.steer(ctx).await,
        Online::FollowUp(args) => args.follow_up(ctx).await,
        Online::Queue(args) => args.run(ctx).await,
        Online::Commands(args) => args.run(ctx).await,
        Online::Abort(args) => args.run(ctx).await,
        Online::Close(args) => args.run(ctx).await,
        Online::Mcp(args) => args.run(ctx).await,
        Online::Events(args) => args.run(ctx).await,
        Online::History(args) => args.run(ctx).await,
        Online::Fork(args) => args.run(ctx).await,
        Online::Rollback(args) => args.run(ctx).await,
        Online::Undo(args) => args.run(ctx).await,
        Online::Redo(args) => args.run(ctx).await,
        Online::Diff(args) => args.run(ctx).await,
        Online::Compact(args) => args.run(ctx).await,
        Online::Rm(args) => args.run(ctx).await,
        Online::Gc(args) => args.run(ctx).await,
        Online::Config(args) => args.run(ctx).await,
        Online::Pending(args) => args.run(ctx).await,
        Online::Respond(args) => args.run(ctx).await,
        Online::Acp => crate::acp::run(ctx.conn.clone()).await,
        Online::SocketPath => socket_path::run(&ctx.socket, ctx.json),
    }
}

/// Prints `value` as one JSON line with `--json`, else as `human` renders it.
pub(crate) fn print<T: Serialize>(json: bool, value: &T, human: impl FnOnce(&T)) {
    if json {
        println!("{}", serde_json::to_string(value).unwrap_or_default());
    } else {
        human(value);
    }
}

/// The prompt: the words joined, or stdin when there are none (or just `-`).
pub(crate) fn join_text(words: &[String]) -> Result<String> {
    let text = if words.is_empty() || words == ["-"] {
        let mut text = String::new();
        if std::io::stdin().is_terminal() {
            eprintln!("(reading the prompt from stdin; end with Ctrl-D)");
        }
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Failure::failed(format!("cannot read stdin: {e}")))?;
        text
    } else {
        words.join(" ")
    };
    if text.trim().is_empty() {
        return Err(Failure::usage(if words.is_empty() {
            "the prompt is empty: give it after the session, or on stdin"
        } else {
            "the prompt is empty"
        }));
    }
    Ok(text)
}

/// Accepts a full session id or a unique prefix of one; an id that matches nothing is passed
/// on as it is, so the daemon's `session_not_found` says so.
pub(crate) async fn resolve(conn: &Connection, id: &str) -> Result<SessionId> {
    Ok(find(conn, id).await?.unwrap_or_else(|| SessionId::from(id)))
}

/// The session `id` names, in full or by a unique prefix; `None` when none matches.
pub(crate) async fn find(conn: &Connection, id: &str) -> Result<Option<SessionId>> {
    let list = conn.call::<m::SessionList>(ListParams::default()).await?;
    // Damaged sessions too: `rm` removes them, and the others say why they cannot be used.
    let ids = || {
        list.sessions
            .iter()
            .map(|s| &s.session_id)
            .chain(list.damaged.iter().map(|d| &d.session_id))
    };
    if ids().any(|s| s.as_str() == id) {
        return Ok(Some(SessionId::from(id)));
    }
    let matches: Vec<&SessionId> = ids().filter(|s| s.as_str().starts_with(id)).collect();
    match matches.as_slice() {
        [one] => Ok(Some((*one).clone())),
        [] => Ok(None),
        _ => Err(Failure::usage(format!(
            "session prefix {id:?} is ambiguous ({} sessions match)",
            matches.len()
        ))),
    }
}

/// Lines of `rows` with every column but the last padded to its widest cell, two spaces
/// apart.
pub(crate) fn table(rows: &[Vec<String>]) -> Vec<String> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|row| {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                if c + 1 == row.len() {
                    line += cell;
                } else {
                    line += &format!("{cell:<w$}  ", w = widths[c]);
                }
            }
            line.trim_end().to_owned()
        })
        .collect()
}
