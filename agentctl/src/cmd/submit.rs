//! `agentctl submit`: send a prompt to a session (or a new one), optionally following the work
//! until it ends.

use super::new::NewArgs;
use super::stream::EventStream;
use super::{Context, find, follow, join_text, print};
use crate::error::{Failure, Kind, Result};
use agentd_proto::methods as m;
use agentd_proto::{Disposition, ErrorKind, SessionParams, SubmitParams, WhenBusy};
use clap::ValueEnum;

#[derive(Clone, Copy, ValueEnum)]
enum BusyArg {
    Queue,
    Steer,
    Reject,
}

#[derive(clap::Args)]
pub(crate) struct Submit {
    /// Create a new session for this prompt (the options below apply to it).
    #[arg(long)]
    new: bool,
    /// Stream the work until it ends; Ctrl-C aborts it.
    #[arg(long, short)]
    follow: bool,
    /// What to do if the session is busy.
    #[arg(long, value_enum, default_value = "queue")]
    when_busy: BusyArg,
    /// Idempotency key: a repeated submit with the same key does nothing.
    #[arg(long)]
    client_input_id: Option<String>,
    #[command(flatten)]
    pub(crate) images: super::image::ImageArgs,
    #[command(flatten)]
    new_args: NewArgs,
    /// SESSION (unless --new), then the prompt.
    args: Vec<String>,
}

const USAGE: &str = "agentctl submit SESSION PROMPT, or agentctl submit --new PROMPT";

/// Whether `word` looks like a session id or a prefix of one someone typed on purpose
/// (hexadecimal and dashes, at least 4 characters), rather than a word of a prompt.
fn id_like(word: &str) -> bool {
    word.len() >= 4 && word.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

/// `session_busy` in agentctl's words: the daemon's message names its `when_busy` field.
fn busy_in_flags(e: jsonrpsee::core::ClientError) -> Failure {
    let mut f = Failure::from(e);
    if f.kind == Kind::Daemon(ErrorKind::SessionBusy) {
        f.message = "the session is busy (session_busy): leave out --when-busy reject to queue \
                     the prompt as a follow-up, or use --when-busy steer"
            .into();
    }
    f
}

impl Submit {
    pub(crate) async fn run(mut self, ctx: &Context) -> Result<u8> {
        let (conn, json) = (&ctx.conn, ctx.json);
        let (session_id, words) = if self.new {
            if let Some(first) = self.args.first().filter(|w| id_like(w))
                && let Some(id) = find(conn, first).await?
            {
                return Err(Failure::usage(format!(
                    "{first:?} is session {id}, but --new creates a session: drop --new to \
                     submit to {id}, or leave the id out"
                )));
            }
            // Read before creating the session, so an empty prompt leaves nothing behind.
            let text = join_text(&self.args)?;
            let snapshot = super::new::create(conn, self.new_args.params()?).await?;
            if !json {
                eprintln!("session {}", snapshot.session_id);
            }
            (snapshot.session_id, text)
        } else {
            let Some((first, rest)) = self.args.split_first() else {
                return Err(Failure::usage(format!(
                    "no session and no prompt; usage: {USAGE}"
                )));
            };
            let Some(id) = find(conn, first).await? else {
                let hint = if rest.is_empty() {
                    format!(
                        "no session {first:?}: to start one with this prompt use \
                         `agentctl submit --new {first:?}`; usage: {USAGE}"
                    )
                } else {
                    format!("no session {first:?} (see `agentctl ls`); usage: {USAGE}")
                };
                return Err(Failure::usage(hint));
            };
            (id, join_text(rest)?)
        };
        let when_busy = match self.when_busy {
            BusyArg::Queue => WhenBusy::Queue,
            BusyArg::Steer => WhenBusy::Steer,
            BusyArg::Reject => WhenBusy::Reject,
        };
        let params = SubmitParams {
            session_id: session_id.clone(),
            text: words,
            images: self.images.take(),
            client_input_id: self.client_input_id,
            when_busy: Some(when_busy),
        };
        if !self.follow {
            let r = conn
                .call::<m::SessionSubmit>(params)
                .await
                .map_err(busy_in_flags)?;
            print(json, &r, |r| {
                let what = match r.disposition {
                    Disposition::Started => "started",
                    Disposition::FollowUp => "queued as a follow-up (the session is busy)",
                    Disposition::Steering => "queued as steering (the session is busy)",
                };
                println!("{} {what}", r.input_id);
            });
            return Ok(0);
        }
        // Installed before submitting, so no Ctrl-C is lost between here and the loop.
        let sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .map_err(|e| Failure::failed(format!("cannot handle Ctrl-C: {e}")))?;
        // A new session's stream starts at its first event (`session_start`); an existing
        // one's at what comes after this submit.
        let since = if self.new {
            0
        } else {
            conn.call::<m::SessionGet>(SessionParams {
                session_id: session_id.clone(),
            })
            .await?
            .last_seq
        };
        let stream = EventStream::open(conn, session_id.clone(), since, json).await?;
        let submitted = conn
            .call::<m::SessionSubmit>(params)
            .await
            .map_err(busy_in_flags)?;
        follow::work(conn, stream, sigint, session_id, submitted.input_id, json).await
    }
}
