//! `agentctl pending` and `agentctl respond`: list a session's pending requests (approvals,
//! questions, client tool calls) and answer one; and [`Prompter`], which answers them at the
//! terminal while `submit --follow` runs.

use super::{Context, print, resolve, table};
use crate::client::Connection;
use crate::error::{Failure, Result};
use agentd_proto::methods as m;
use agentd_proto::{
    Decision, EventBody, PendingRequest, RequestBody, RequestId, RespondParams, SessionId,
    SessionParams,
};
use std::collections::VecDeque;
use std::io::{BufRead, IsTerminal, Write};
use tokio::sync::mpsc;

#[derive(clap::Args)]
pub(crate) struct Pending {
    /// The session (an id or a unique prefix).
    session: String,
}

impl Pending {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let pending = pending(&ctx.conn, &session_id).await?;
        if ctx.json {
            for request in &pending {
                print(true, request, |_| {});
            }
            return Ok(0);
        }
        if pending.is_empty() {
            println!("no pending requests");
            return Ok(0);
        }
        let mut rows = vec![vec![
            "REQUEST".into(),
            "TYPE".into(),
            "EXPIRES".into(),
            "WHAT".into(),
        ]];
        for r in &pending {
            let (kind, what) = match &r.body {
                RequestBody::Approval { tool, summary, .. } => {
                    ("approval", format!("{tool}: {}", first_line(summary)))
                }
                RequestBody::Question { question, .. } => ("question", first_line(question)),
                RequestBody::ClientTool { tool, .. } => ("client_tool", tool.clone()),
            };
            rows.push(vec![
                r.request_id.to_string(),
                kind.into(),
                r.expires.clone(),
                what,
            ]);
        }
        for line in table(&rows) {
            println!("{line}");
        }
        Ok(0)
    }
}

#[derive(clap::Args)]
pub(crate) struct Respond {
    /// The session (an id or a unique prefix).
    session: String,
    /// The request (`agentctl pending SESSION` lists them; a unique prefix will do).
    request: String,
    /// For an approval: allow, allow_always (or always) or deny. For a question: the answer.
    /// For a client tool: its output.
    answer: Vec<String>,
    /// With deny: a message for the model (what to do instead).
    #[arg(long, short)]
    message: Option<String>,
    /// For a client tool: the output describes a failure.
    #[arg(long)]
    error: bool,
}

impl Respond {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let pending = pending(&ctx.conn, &session_id).await?;
        let matching: Vec<&PendingRequest> = pending
            .iter()
            .filter(|r| r.request_id.as_str().starts_with(&self.request))
            .collect();
        let text = self.answer.join(" ");
        let mut params = RespondParams {
            session_id,
            request_id: RequestId(self.request.clone()),
            decision: None,
            message: self.message,
            answer: None,
            output: None,
            is_error: None,
        };
        match matching.as_slice() {
            [one] => {
                params.request_id = one.request_id.clone();
                fill(&mut params, &one.body, &text, self.error)?;
            }
            // Not pending (any more): the daemon says what became of it.
            [] => params.decision = decision(&text),
            _ => {
                return Err(Failure::usage(format!(
                    "request prefix {:?} is ambiguous ({} pending requests match)",
                    self.request,
                    matching.len()
                )));
            }
        }
        let answered = ctx.conn.call::<m::SessionRespond>(params).await?;
        print(ctx.json, &answered, |a| {
            println!("answered {} ({} still pending)", a.request_id, a.pending)
        });
        Ok(0)
    }
}

/// A session's pending requests.
async fn pending(conn: &Connection, session_id: &SessionId) -> Result<Vec<PendingRequest>> {
    Ok(conn
        .call::<m::SessionGet>(SessionParams {
            session_id: session_id.clone(),
        })
        .await?
        .pending)
}

/// A decision as people type it.
fn decision(text: &str) -> Option<Decision> {
    match text.trim().to_ascii_lowercase().as_str() {
        "allow" | "y" | "yes" => Some(Decision::Allow),
        "allow_always" | "always" | "a" => Some(Decision::AllowAlways),
        "deny" | "n" | "no" => Some(Decision::Deny),
        _ => None,
    }
}

/// Puts `text` in the field that answers `body`.
fn fill(params: &mut RespondParams, body: &RequestBody, text: &str, error: bool) -> Result<()> {
    match body {
        RequestBody::Approval { .. } => {
            params.decision = Some(decision(text).ok_or_else(|| {
                Failure::usage(format!(
                    "{text:?} does not answer an approval: say allow, allow_always or deny"
                ))
            })?);
        }
        RequestBody::Question { options, .. } => {
            if text.trim().is_empty() {
                return Err(Failure::usage("the answer is empty"));
            }
            params.answer = Some(option_or_text(options, text));
        }
        RequestBody::ClientTool { .. } => {
            params.output = Some(text.to_owned());
            params.is_error = Some(error);
        }
    }
    Ok(())
}

/// `2` picks the second option when there are options; anything else is the answer itself.
fn option_or_text(options: &[String], text: &str) -> String {
    text.trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| options.get(i))
        .cloned()
        .unwrap_or_else(|| text.trim().to_owned())
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}

/// Answers approvals and questions at the terminal while `submit --follow` shows the work:
/// one prompt at a time, in the order they came; a request settled elsewhere (another client,
/// a timeout, an abort) is dropped from the queue.
pub(crate) struct Prompter {
    session_id: SessionId,
    queue: VecDeque<(RequestId, RequestBody)>,
    /// Whether the head of the queue has been shown its prompt.
    asked: bool,
    lines: mpsc::Receiver<String>,
}

impl Prompter {
    /// A prompter reading answers from stdin, when stdin and stderr are a terminal.
    pub(crate) fn on_terminal(session_id: SessionId) -> Option<Self> {
        if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
            return None;
        }
        let (tx, lines) = mpsc::channel(4);
        // Blocking reads need a thread of their own; it ends with the process.
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { return };
                if tx.blocking_send(line).is_err() {
                    return;
                }
            }
        });
        Some(Self {
            session_id,
            queue: VecDeque::new(),
            asked: false,
            lines,
        })
    }

    /// Takes note of requests raised and settled.
    pub(crate) fn event(&mut self, body: &EventBody) {
        match body {
            EventBody::ApprovalRequested {
                request_id,
                tool,
                arguments,
                summary,
                ..
            } => self.queue.push_back((
                request_id.clone(),
                RequestBody::Approval {
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                    summary: summary.clone(),
                },
            )),
            EventBody::QuestionRequested {
                request_id,
                question,
                options,
                ..
            } => self.queue.push_back((
                request_id.clone(),
                RequestBody::Question {
                    question: question.clone(),
                    options: options.clone(),
                },
            )),
            EventBody::ApprovalResolved { request_id, .. }
            | EventBody::QuestionResolved { request_id, .. } => {
                if self.queue.front().is_some_and(|(r, _)| r == request_id) {
                    self.asked = false;
                }
                self.queue.retain(|(r, _)| r != request_id);
            }
            _ => {}
        }
        if !self.asked
            && let Some((_, body)) = self.queue.front()
        {
            let prompt = match body {
                RequestBody::Approval { .. } => {
                    "allow? [y]es / [n]o (n: MESSAGE to say why) / [a]lways: ".to_owned()
                }
                RequestBody::Question { options, .. } if !options.is_empty() => {
                    format!("answer (1-{} or your own words): ", options.len())
                }
                _ => "answer: ".to_owned(),
            };
            eprint!("{prompt}");
            let _ = std::io::stderr().flush();
            self.asked = true;
        }
    }

    /// The next line typed.
    pub(crate) async fn line(&mut self) -> Option<String> {
        self.lines.recv().await
    }

    /// The answer `line` gives to the request being asked, if one is.
    pub(crate) fn answer(&mut self, line: &str) -> Option<RespondParams> {
        let (request_id, body) = self.queue.front()?.clone();
        let mut params = RespondParams {
            session_id: self.session_id.clone(),
            request_id,
            decision: None,
            message: None,
            answer: None,
            output: None,
            is_error: None,
        };
        match &body {
            RequestBody::Approval { .. } => {
                let (word, message) = match line.split_once(':') {
                    Some((w, m)) => (w, Some(m.trim().to_owned()).filter(|m| !m.is_empty())),
                    None => (line, None),
                };
                match decision(word) {
                    Some(d) => {
                        params.decision = Some(d);
                        params.message = message;
                    }
                    None => {
                        eprint!("say y, n or a: ");
                        let _ = std::io::stderr().flush();
                        return None;
                    }
                }
            }
            RequestBody::Question { options, .. } => {
                if line.trim().is_empty() {
                    eprint!("answer: ");
                    let _ = std::io::stderr().flush();
                    return None;
                }
                params.answer = Some(option_or_text(options, line));
            }
            RequestBody::ClientTool { .. } => return None,
        }
        Some(params)
    }
}
