//! `agentctl events`: a session's events, replayed from a seq, optionally followed live.

use super::stream::{EventStream, Next};
use super::{Context, print, resolve};
use crate::error::{EX_UNAVAILABLE, Result};
use agentd_proto::methods as m;
use agentd_proto::{EventBody, SessionParams, StreamEndReason, StreamItem};

#[derive(clap::Args)]
pub(crate) struct Events {
    session: String,
    /// Only events with a greater seq [default: 0, all]
    #[arg(long, default_value_t = 0)]
    since: u64,
    /// Keep streaming new events.
    #[arg(long, short)]
    follow: bool,
}

impl Events {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let json = ctx.json;
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let last = ctx
            .conn
            .call::<m::SessionGet>(SessionParams {
                session_id: session_id.clone(),
            })
            .await?
            .last_seq;
        if !self.follow && last <= self.since {
            return Ok(0);
        }
        let mut stream = EventStream::open(&ctx.conn, session_id, self.since, json).await?;
        loop {
            match stream.next().await? {
                Next::Event(e) => {
                    print(json, &*e, |e| {
                        println!(
                            "{:>6} {} {} {}",
                            e.seq,
                            e.ts,
                            e.body.kind(),
                            event_data(&e.body)
                        )
                    });
                    if !self.follow && e.seq >= last {
                        return Ok(0);
                    }
                }
                Next::End(end) => {
                    print(json, &StreamItem::End(end.clone()), |end| {
                        if let StreamItem::End(end) = end {
                            let why = match end.reason {
                                StreamEndReason::SessionClosed => "the session closed",
                                StreamEndReason::DaemonShutdown => "agentd shut down",
                                StreamEndReason::Lagged => "this client fell behind",
                                StreamEndReason::Unsubscribed => "this client unsubscribed",
                            };
                            eprintln!(
                                "(stream ended: {why} ({}) after seq {})",
                                end.reason, end.last_seq
                            );
                        }
                    });
                    return Ok(match end.reason {
                        StreamEndReason::DaemonShutdown => EX_UNAVAILABLE,
                        _ => 0,
                    });
                }
            }
        }
    }
}

fn event_data(body: &EventBody) -> String {
    let v = serde_json::to_value(body).unwrap_or_default();
    let s = v.get("data").map(|d| d.to_string()).unwrap_or_default();
    if s.chars().count() > 200 {
        format!("{}…", s.chars().take(199).collect::<String>())
    } else {
        s
    }
}
