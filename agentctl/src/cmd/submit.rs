//! `agentctl submit`: send a prompt to a session (or a new one), optionally following the work
//! until it ends.

use super::new::NewArgs;
use super::{Context, follow, join_text, print, resolve};
use crate::error::{Failure, Result};
use agentd_proto::methods as m;
use agentd_proto::{SessionParams, SubmitParams, SubscribeParams, WhenBusy};
use clap::ValueEnum;

#[derive(Clone, Copy, ValueEnum)]
enum BusyArg {
    Queue,
    Steer,
    Reject,
}

#[derive(clap::Args)]
pub(crate) struct Submit {
    /// Create a new session for this prompt.
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
    new_args: NewArgs,
    /// SESSION (unless --new), then the prompt.
    args: Vec<String>,
}

impl Submit {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let (conn, json) = (&ctx.conn, ctx.json);
        let (session_id, words) = if self.new {
            let snapshot = conn
                .call::<m::SessionCreate>(self.new_args.params()?)
                .await?;
            if !json {
                eprintln!("session {}", snapshot.session_id);
            }
            (snapshot.session_id, self.args)
        } else {
            let Some((first, rest)) = self.args.split_first() else {
                return Err(Failure(
                    2,
                    "usage: agentctl submit SESSION [PROMPT] or agentctl submit --new [PROMPT]"
                        .into(),
                ));
            };
            (resolve(conn, first).await?, rest.to_vec())
        };
        let text = join_text(&words)?;
        let when_busy = match self.when_busy {
            BusyArg::Queue => WhenBusy::Queue,
            BusyArg::Steer => WhenBusy::Steer,
            BusyArg::Reject => WhenBusy::Reject,
        };
        let params = SubmitParams {
            session_id: session_id.clone(),
            text,
            client_input_id: self.client_input_id,
            when_busy: Some(when_busy),
        };
        if !self.follow {
            let r = conn.call::<m::SessionSubmit>(params).await?;
            print(json, &r, |r| println!("{}", r.input_id));
            return Ok(0);
        }
        // Installed before submitting, so no Ctrl-C is lost between here and the loop.
        let sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .map_err(|e| Failure(1, format!("cannot handle Ctrl-C: {e}")))?;
        let since = conn
            .call::<m::SessionGet>(SessionParams {
                session_id: session_id.clone(),
            })
            .await?
            .last_seq;
        let stream = conn
            .subscribe::<m::SessionSubscribe>(SubscribeParams {
                session_id: session_id.clone(),
                since_seq: Some(since),
            })
            .await?;
        let submitted = conn.call::<m::SessionSubmit>(params).await?;
        follow::work(conn, stream, sigint, session_id, submitted.input_id, json).await
    }
}
