//! `agentctl events`: a session's events, replayed from a seq, optionally followed live.

use super::{Context, print, resolve};
use crate::error::{Failure, Result};
use agentd_proto::methods as m;
use agentd_proto::{EventBody, SessionParams, StreamItem, SubscribeParams};

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
        let mut stream = ctx
            .conn
            .subscribe::<m::SessionSubscribe>(SubscribeParams {
                session_id,
                since_seq: Some(self.since),
            })
            .await?;
        if !self.follow && last <= self.since {
            return Ok(0);
        }
        while let Some(item) = stream.next().await {
            let item = item.map_err(|e| Failure(1, format!("bad event: {e}")))?;
            match &item {
                StreamItem::Event(e) => {
                    print(json, e, |e| {
                        println!(
                            "{:>6} {} {} {}",
                            e.seq,
                            e.ts,
                            e.body.kind(),
                            event_data(&e.body)
                        )
                    });
                    if !self.follow && e.seq >= last {
                        break;
                    }
                }
                StreamItem::End(end) => {
                    print(json, &item, |_| {
                        eprintln!("(stream ended: {:?} at seq {})", end.reason, end.last_seq)
                    });
                    break;
                }
            }
        }
        Ok(0)
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
