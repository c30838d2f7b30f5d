//! Following a session's work as it happens (`submit --follow`), and the exit code it ends
//! with.

use super::print;
use super::respond::Prompter;
use super::stream::{EventStream, Next};
use crate::client::Connection;
use crate::error::{
    EX_FAILURE, EX_INTERRUPTED, EX_MAX_TOKENS, EX_REFUSED, EX_ROUND_LIMIT, EX_TURN_LIMIT, Failure,
    Kind, Local, Result,
};
use crate::render;
use agentd_proto::methods as m;
use agentd_proto::{
    AbortParams, ErrorKind, EventBody, InputId, LimitKind, ProcessingEndReason, SessionId,
    SessionParams, StreamEndReason, StreamItem,
};

/// Renders the session's events until the work that includes `input_id` ends. Ctrl-C aborts
/// that work.
pub(super) async fn work(
    conn: &Connection,
    mut stream: EventStream<'_>,
    mut sigint: tokio::signal::unix::Signal,
    session_id: SessionId,
    input_id: InputId,
    json: bool,
) -> Result<u8> {
    let mut renderer = render::Renderer::default();
    let mut prompter = if json {
        None
    } else {
        Prompter::on_terminal(session_id.clone())
    };
    let mut seen_input = false;
    let mut interrupted = false;
    // The limit the last `turn_limit` event named: it decides the exit code.
    let mut limit = None;
    let mut ticker = tokio::time::interval(std::time::Duration::from_millis(100));
    loop {
        let next = tokio::select! {
            next = stream.next() => next?,
            _ = ticker.tick(), if renderer.animated() && !json => {
                renderer.tick();
                continue;
            }
            Some(line) = async { prompter.as_mut()?.line().await }, if prompter.is_some() => {
                if let Some(params) = prompter.as_mut().and_then(|p| p.answer(&line))
                    && let Err(e) = conn.call::<m::SessionRespond>(params).await
                {
                    eprintln!("(not answered: {})", Failure::from(e).message);
                }
                continue;
            }
            _ = sigint.recv(), if !interrupted => {
                interrupted = true;
                eprintln!("\n(aborting…)");
                conn.call::<m::SessionAbort>(AbortParams { session_id: session_id.clone(), close: false }).await?;
                continue;
            }
        };
        let event = match next {
            Next::Event(e) => e,
            Next::End(end) => {
                print(json, &StreamItem::End(end.clone()), |_| {});
                if interrupted {
                    return Ok(EX_INTERRUPTED);
                }
                return Err(match end.reason {
                    StreamEndReason::DaemonShutdown => shutdown_failure(),
                    reason => Failure {
                        code: None,
                        kind: Kind::StreamEnded(reason),
                        message: format!("the event stream ended ({reason}) before the work did"),
                        exit_code: EX_FAILURE,
                    },
                });
            }
        };
        if json {
            print(true, &*event, |_| {});
        } else {
            renderer.event(&event);
            match (&mut prompter, &event.body) {
                (Some(prompter), body) => prompter.event(body),
                (
                    None,
                    EventBody::ApprovalRequested { request_id, .. }
                    | EventBody::QuestionRequested { request_id, .. },
                ) => eprintln!(
                    "  (answer with: agentctl respond {session_id} {request_id} {})",
                    if matches!(event.body, EventBody::ApprovalRequested { .. }) {
                        "allow|allow_always|deny"
                    } else {
                        "ANSWER"
                    }
                ),
                _ => {}
            }
        }
        match &event.body {
            EventBody::UserInput { input_id: id, .. } if *id == input_id => seen_input = true,
            EventBody::TurnLimit { limit: l, .. } => limit = Some(*l),
            EventBody::ProcessingEnd { reason, .. } if seen_input || interrupted => {
                return match reason {
                    _ if interrupted => Ok(EX_INTERRUPTED),
                    ProcessingEndReason::Completed => Ok(0),
                    ProcessingEndReason::TurnLimit => Ok(match limit {
                        Some(LimitKind::MaxToolRoundsPerInput) => EX_ROUND_LIMIT,
                        Some(LimitKind::MaxTurns) | None => EX_TURN_LIMIT,
                    }),
                    ProcessingEndReason::Aborted if shutting_down(conn, &session_id).await => {
                        Err(shutdown_failure())
                    }
                    ProcessingEndReason::Aborted => {
                        eprintln!("(another client aborted the work: session/abort)");
                        Ok(EX_INTERRUPTED)
                    }
                    ProcessingEndReason::MaxTokens => Ok(EX_MAX_TOKENS),
                    ProcessingEndReason::Refusal => Ok(EX_REFUSED),
                    ProcessingEndReason::Error => Ok(EX_FAILURE),
                };
            }
            EventBody::SessionEnd { .. } => {
                return Ok(if interrupted {
                    EX_INTERRUPTED
                } else {
                    EX_FAILURE
                });
            }
            _ => {}
        }
    }
}

/// Whether the daemon is going away: it refuses calls with `shutting_down` from the moment it
/// starts aborting work, or has closed the connection already.
async fn shutting_down(conn: &Connection, session_id: &SessionId) -> bool {
    match conn
        .call::<m::SessionGet>(SessionParams {
            session_id: session_id.clone(),
        })
        .await
    {
        Ok(_) => false,
        Err(e) => matches!(
            Failure::from(e).kind,
            Kind::Daemon(ErrorKind::ShuttingDown) | Kind::Local(Local::Unavailable)
        ),
    }
}

fn shutdown_failure() -> Failure {
    Failure::daemon_shutdown(
        "agentd shut down (daemon_shutdown) and stopped the work; the session keeps its \
         history: start agentd again and resubmit",
    )
}
