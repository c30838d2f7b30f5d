//! Following a session's work as it happens: `submit --follow`.

use super::print;
use crate::client::Connection;
use crate::error::{EX_UNAVAILABLE, Failure, Result};
use crate::render;
use agentd_proto::methods as m;
use agentd_proto::{AbortParams, EventBody, InputId, ProcessingEndReason, SessionId, StreamItem};

/// Renders the session's events until the work that includes `input_id` ends. Ctrl-C aborts
/// that work.
pub(super) async fn work(
    conn: &Connection,
    mut stream: jsonrpsee::core::client::Subscription<StreamItem>,
    mut sigint: tokio::signal::unix::Signal,
    session_id: SessionId,
    input_id: InputId,
    json: bool,
) -> Result<u8> {
    let mut renderer = render::Renderer::default();
    let mut seen_input = false;
    let mut interrupted = false;
    let mut ticker = tokio::time::interval(std::time::Duration::from_millis(100));
    loop {
        let item = tokio::select! {
            item = stream.next() => item,
            _ = ticker.tick(), if renderer.animated() && !json => {
                renderer.tick();
                continue;
            }
            _ = sigint.recv(), if !interrupted => {
                interrupted = true;
                eprintln!("\n(aborting…)");
                conn.call::<m::SessionAbort>(AbortParams { session_id: session_id.clone(), close: false }).await?;
                continue;
            }
        };
        let Some(item) = item else {
            return Err(Failure(
                EX_UNAVAILABLE,
                "the daemon closed the event stream".into(),
            ));
        };
        let item = item.map_err(|e| Failure(1, format!("bad event: {e}")))?;
        let event = match item {
            StreamItem::Event(e) => e,
            StreamItem::End(end) => {
                print(json, &StreamItem::End(end.clone()), |_| {});
                return Ok(if interrupted { 130 } else { 1 });
            }
        };
        if json {
            print(true, &event, |_| {});
        } else {
            renderer.event(&event);
        }
        match &event.body {
            EventBody::UserInput { input_id: id, .. } if *id == input_id => seen_input = true,
            EventBody::ProcessingEnd { reason } if seen_input || interrupted => {
                return Ok(match reason {
                    _ if interrupted => 130,
                    ProcessingEndReason::Completed | ProcessingEndReason::TurnLimit => 0,
                    ProcessingEndReason::Aborted => 130,
                    ProcessingEndReason::Error => 1,
                });
            }
            EventBody::SessionEnd { .. } => return Ok(if interrupted { 130 } else { 1 }),
            _ => {}
        }
    }
}
