//! Human rendering of a session's events: the assistant's text to stdout as it streams, tool
//! calls and their status to stderr, so `agentctl submit --follow > answer.md` keeps only the
//! answer.

use agentd_proto::{Event, EventBody, LimitKind, ProcessingEndReason, SessionState};
use std::io::Write;

/// Renders events and remembers what it needs to end the line cleanly.
#[derive(Default)]
pub(crate) struct Renderer {
    /// Whether stdout is mid-line (assistant text without a trailing newline yet).
    open_line: bool,
}

fn summarize_args(tool: &str, args: &serde_json::Value) -> String {
    let pick = |key: &str| args.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    let text = match tool {
        "shell" => pick("command"),
        "read_file" | "write_file" | "edit_file" => pick("file_path"),
        _ => None,
    }
    .unwrap_or_else(|| args.to_string());
    let one_line = text.replace('\n', "⏎");
    if one_line.chars().count() > 100 {
        format!("{}…", one_line.chars().take(99).collect::<String>())
    } else {
        one_line
    }
}

impl Renderer {
    fn close_line(&mut self) {
        if self.open_line {
            println!();
            self.open_line = false;
        }
    }

    /// Renders one event.
    pub(crate) fn event(&mut self, event: &Event) {
        match &event.body {
            EventBody::AssistantTextDelta { delta } => {
                print!("{delta}");
                let _ = std::io::stdout().flush();
                self.open_line = !delta.ends_with('\n');
            }
            EventBody::AssistantTextEnd { .. } => self.close_line(),
            EventBody::UserInput { text, .. } => {
                self.close_line();
                eprintln!("› {}", text.lines().next().unwrap_or_default());
            }
            EventBody::ToolCallStart {
                tool_name,
                arguments,
                ..
            } => {
                self.close_line();
                eprintln!("● {tool_name} {}", summarize_args(tool_name, arguments));
            }
            EventBody::ToolCallEnd {
                tool_name,
                error,
                duration_ms,
                ..
            } => match error {
                None => eprintln!("  ✓ {tool_name} ({duration_ms} ms)"),
                Some(e) => eprintln!(
                    "  ✗ {tool_name} ({duration_ms} ms): {}",
                    e.lines().last().unwrap_or_default()
                ),
            },
            EventBody::SteeringInjected { text, .. } => eprintln!("↳ steering: {text}"),
            EventBody::TurnLimit { limit, count } => {
                let what = match limit {
                    LimitKind::MaxToolRoundsPerInput => "max_tool_rounds_per_input",
                    LimitKind::MaxTurns => "max_turns",
                };
                eprintln!("■ stopped: {what} reached ({count})");
            }
            EventBody::LoopDetection { message } => eprintln!("⚠ {message}"),
            EventBody::Warning { message } => {
                self.close_line();
                eprintln!("⚠ {message}");
            }
            EventBody::Error { message, .. } => {
                self.close_line();
                eprintln!("✗ error: {message}");
            }
            EventBody::ProcessingEnd { reason } => {
                self.close_line();
                match reason {
                    ProcessingEndReason::Aborted => eprintln!("■ aborted"),
                    ProcessingEndReason::Error => eprintln!("■ stopped by an error"),
                    ProcessingEndReason::Completed | ProcessingEndReason::TurnLimit => {}
                }
            }
            EventBody::SessionEnd { reason, .. } => {
                self.close_line();
                eprintln!("■ session closed: {reason}");
            }
            EventBody::StateChanged {
                state: SessionState::Closed,
            } => self.close_line(),
            _ => {}
        }
    }
}
