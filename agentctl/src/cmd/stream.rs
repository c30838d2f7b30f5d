//! A session's event stream that survives `lagged`: when the daemon drops this subscriber for
//! falling behind, it resubscribes from the last `seq` it delivered, so a slow terminal never
//! loses an event (`submit --follow`, `events --follow`).

use crate::client::Connection;
use crate::error::{Failure, Result};
use agentd_proto::methods as m;
use agentd_proto::{Event, SessionId, StreamEnd, StreamEndReason, StreamItem, SubscribeParams};
use jsonrpsee::core::client::Subscription;

/// What [`EventStream::next`] yields.
pub(crate) enum Next {
    /// The next event, in `seq` order, none missing.
    Event(Box<Event>),
    /// The stream ended for good (`session_closed` or `daemon_shutdown`).
    End(StreamEnd),
}

/// A subscription that resubscribes after `lagged`.
pub(crate) struct EventStream<'c> {
    conn: &'c Connection,
    session_id: SessionId,
    subscription: Subscription<StreamItem>,
    /// The seq of the last event delivered (the `since_seq` to resubscribe with).
    last_seq: u64,
    /// `--json`: stderr is for error objects only, so resubscribing is not announced.
    json: bool,
    /// The stream ended `lagged` and a new subscription is still to be made. Kept here, not
    /// in a local, so [`EventStream::next`] stays cancel-safe inside `select!`: a call dropped
    /// while resubscribing leaves the next call to do it.
    resubscribe: bool,
}

impl<'c> EventStream<'c> {
    /// Subscribes to `session_id`'s events with `seq > since`.
    pub(crate) async fn open(
        conn: &'c Connection,
        session_id: SessionId,
        since: u64,
        json: bool,
    ) -> Result<Self> {
        let subscription = subscribe(conn, &session_id, since).await?;
        Ok(Self {
            conn,
            session_id,
            subscription,
            last_seq: since,
            json,
            resubscribe: false,
        })
    }

    /// The next event or the end; a `lagged` end is handled here by resubscribing.
    pub(crate) async fn next(&mut self) -> Result<Next> {
        loop {
            if self.resubscribe {
                self.subscription = subscribe(self.conn, &self.session_id, self.last_seq).await?;
                self.resubscribe = false;
                if !self.json {
                    eprintln!(
                        "(agentctl fell behind and the daemon dropped its stream (lagged); \
                         resubscribed after seq {}, nothing lost)",
                        self.last_seq
                    );
                }
            }
            let item = match self.subscription.next().await {
                Some(item) => item.map_err(|e| Failure::failed(format!("bad event: {e}")))?,
                // The connection closed without a final item: the daemon went away.
                None => {
                    return Err(Failure::unavailable(
                        "the connection to agentd closed while streaming events",
                    ));
                }
            };
            match item {
                // A replay after resubscribing may repeat what was delivered already.
                StreamItem::Event(e) if e.seq <= self.last_seq => continue,
                StreamItem::Event(e) => {
                    self.last_seq = e.seq;
                    return Ok(Next::Event(Box::new(e)));
                }
                StreamItem::End(StreamEnd {
                    reason: StreamEndReason::Lagged,
                    ..
                }) => self.resubscribe = true,
                StreamItem::End(end) => return Ok(Next::End(end)),
            }
        }
    }
}

async fn subscribe(
    conn: &Connection,
    session_id: &SessionId,
    since: u64,
) -> Result<Subscription<StreamItem>> {
    Ok(conn
        .subscribe::<m::SessionSubscribe>(SubscribeParams {
            session_id: session_id.clone(),
            since_seq: Some(since),
        })
        .await?)
}
