//! Human rendering of a session's events: the assistant's text to stdout as it streams, tool
//! calls and their status (and, when the work ends, the tokens it used) to stderr, so
//! `agentctl submit --follow > answer.md` keeps only the answer. On a terminal, status lines are coloured (unless `NO_COLOR` is set) and a spinner
//! shows while the model works; neither appears when stderr is not a terminal.
//!
//! A running command's output is shown as it arrives (`tool_call_output_delta`): on a terminal
//! as a live tail, its newest line in the spinner's place; otherwise every line, indented
//! under the tool call, as soon as it is complete.

use agentd_proto::{
    BuiltinTool, Decision, Event, EventBody, HookEvent, HookOutcome, LimitKind, McpServerState,
    ProcessingEndReason, ResolvedBy, SessionState, ToolCallId, Usage,
};
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::time::Instant;

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// What the terminal allows.
#[derive(Debug, Clone, Copy, Default)]
struct Style {
    color: bool,
    animate: bool,
}

impl Style {
    fn detect() -> Self {
        let tty =
            std::io::stderr().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb");
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self {
            color: tty && !no_color,
            animate: tty,
        }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
}

/// Renders events and remembers what it needs to end lines cleanly.
pub(crate) struct Renderer {
    /// Whether stdout is mid-line (assistant text without a trailing newline yet).
    open_line: bool,
    style: Style,
    /// Since when the model has been working with nothing to show.
    waiting: Option<Instant>,
    /// Whether a spinner frame is on the screen.
    drawn: bool,
    frame: usize,
    /// The LLM calls' usage since the last `processing_end`, shown when the work ends.
    usage: Option<Usage>,
    /// Output of running tool calls not yet ended by a newline, per call.
    partial: HashMap<ToolCallId, String>,
    /// The newest complete output line, for the live tail on a terminal.
    tail: Option<String>,
    /// The running tool calls' names, for the hooks that run for them.
    tools: HashMap<ToolCallId, String>,
}

impl Default for Renderer {
    fn default() -> Self {
        Self {
            open_line: false,
            style: Style::detect(),
            waiting: None,
            drawn: false,
            frame: 0,
            usage: None,
            partial: HashMap::new(),
            tail: None,
            tools: HashMap::new(),
        }
    }
}

/// One line on what the work used. A server that reports no usage leaves it unknown, which
/// is not the same as zero.
fn describe_usage(u: &Usage) -> String {
    let input = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens;
    if u.unreported_calls > 0 && input == 0 && u.output_tokens == 0 {
        return "tokens: unknown (the server reported no usage)".into();
    }
    let mut line = format!("tokens: {input} in, {} out", u.output_tokens);
    if u.unreported_calls == 0
        && let Some(cost) = u.cost_usd
    {
        line.push_str(&format!(", ${cost:.4}"));
    }
    if u.unreported_calls > 0 {
        let calls = if u.unreported_calls == 1 {
            "1 call".to_owned()
        } else {
            format!("{} calls", u.unreported_calls)
        };
        line.push_str(&format!(
            " and unknown for {calls} (the server reported no usage)"
        ));
    }
    line
}

/// An MCP server's new state, for people: `⚙ MCP server git ready (12 tools)`.
fn describe_mcp_state(
    server: &str,
    state: McpServerState,
    reason: Option<&str>,
    tools: Option<&[String]>,
) -> String {
    let detail = match (reason, tools) {
        (Some(r), _) => format!(": {r}"),
        (None, Some(t)) => format!(" ({} tools)", t.len()),
        (None, None) => String::new(),
    };
    format!("⚙ MCP server {server} {state}{detail}")
}

fn summarize_args(tool: &str, args: &serde_json::Value) -> String {
    let pick = |key: &str| args.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    let text = match tool.parse() {
        Ok(BuiltinTool::Shell) => pick("command"),
        Ok(BuiltinTool::ReadFile | BuiltinTool::WriteFile | BuiltinTool::EditFile) => {
            pick("file_path")
        }
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

/// A hook starting, under its tool call's line when it runs for one:
/// `◆ hook pre_tool_use for shell: ./guard.py (hooks.pre_tool_use[0])`.
fn describe_hook_start(event: HookEvent, tool: Option<&str>, program: &str, hook: &str) -> String {
    let target = tool.map(|t| format!(" for {t}")).unwrap_or_default();
    format!(
        "hook {event}{target}: {} ({})",
        printable(program, 100),
        printable(hook, 100)
    )
}

/// A hook's end: its mark, colour and line (`✗ hook pre_tool_use blocked (12 ms): why`).
fn describe_hook_end(
    event: HookEvent,
    outcome: HookOutcome,
    exit_code: Option<i32>,
    duration_ms: u64,
    reason: Option<&str>,
) -> (&'static str, &'static str, String) {
    let (mark, color, what) = match outcome {
        HookOutcome::Ok => ("✓", "32", String::new()),
        HookOutcome::Blocked => ("✗", "31", " blocked".to_owned()),
        HookOutcome::Failed => (
            "⚠",
            "33",
            match exit_code {
                Some(code) => format!(" failed, exit {code}"),
                None => " failed".to_owned(),
            },
        ),
        HookOutcome::TimedOut => ("⚠", "33", " timed out".to_owned()),
        HookOutcome::Aborted => ("■", "33", " aborted".to_owned()),
    };
    // A hook's own words, on one line: its first non-empty one.
    let why = reason
        .and_then(|r| r.lines().find(|l| !l.trim().is_empty()))
        .map(|r| format!(": {}", printable(r.trim(), 200)))
        .unwrap_or_default();
    (
        mark,
        color,
        format!("hook {event}{what} ({duration_ms} ms){why}"),
    )
}

/// Text from a hook (a program of the user's, or of a trusted workspace) fit for a terminal:
/// no control characters (an escape sequence could rewrite the screen), cut to `max`.
fn printable(text: &str, max: usize) -> String {
    clip(&without_controls(text), max)
}

/// `text` with its control characters as spaces.
pub(crate) fn without_controls(text: &str) -> String {
    text.replace(|c: char| c.is_control(), " ")
}

/// `text` cut to `max` characters.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() > max {
        format!("{}…", text.chars().take(max - 1).collect::<String>())
    } else {
        text.to_owned()
    }
}

impl Renderer {
    /// One complete line of a running command's output.
    fn output_line(&mut self, line: &str) {
        if self.style.animate {
            // A progress bar redraws its line after `\r`; escape sequences and other control
            // characters would move the cursor off the spinner's row.
            let shown = line.rsplit('\r').next().unwrap_or_default();
            self.tail = Some(shown.chars().filter(|c| !c.is_control()).collect());
        } else {
            self.close_line();
            eprintln!("  │ {line}");
        }
    }

    fn close_line(&mut self) {
        if self.open_line {
            println!();
            self.open_line = false;
        }
    }

    /// Whether [`Renderer::tick`] draws anything.
    pub(crate) fn animated(&self) -> bool {
        self.style.animate
    }

    /// Draws the next spinner frame while the model works.
    pub(crate) fn tick(&mut self) {
        let Some(since) = self.waiting.filter(|_| self.style.animate) else {
            return;
        };
        self.frame = (self.frame + 1) % FRAMES.len();
        let secs = since.elapsed().as_secs();
        let label = match &self.tail {
            Some(line) => self
                .style
                .paint("2", &format!("│ {} ({secs}s)", clip(line, 70))),
            None => self.style.paint("2", &format!("working {secs}s")),
        };
        eprint!("\r{} {label}", FRAMES[self.frame]);
        let _ = std::io::stderr().flush();
        self.drawn = true;
    }

    fn clear_spinner(&mut self) {
        if self.drawn {
            eprint!("\r\x1b[K");
            self.drawn = false;
        }
    }

    /// Renders one event.
    pub(crate) fn event(&mut self, event: &Event) {
        self.clear_spinner();
        self.waiting = match &event.body {
            EventBody::UserInput { .. }
            | EventBody::ToolCallEnd { .. }
            | EventBody::SteeringInjected { .. } => Some(Instant::now()),
            EventBody::AssistantReasoningDelta { .. }
            | EventBody::ToolCallStart { .. }
            | EventBody::ToolCallOutputDelta { .. }
            | EventBody::HookStarted { .. }
            | EventBody::HookFinished { .. } => self.waiting.or(Some(Instant::now())),
            _ => None,
        };
        let style = self.style;
        if let EventBody::ToolCallEnd { call_id, .. } = &event.body {
            if let Some(rest) = self.partial.remove(call_id).filter(|r| !r.is_empty()) {
                self.output_line(&rest);
            }
            self.tail = None;
            self.tools.remove(call_id);
        }
        match &event.body {
            EventBody::AssistantTextDelta { delta } => {
                print!("{delta}");
                let _ = std::io::stdout().flush();
                self.open_line = !delta.ends_with('\n');
            }
            EventBody::AssistantTextEnd { .. } => self.close_line(),
            EventBody::UserInput { text, images, .. } => {
                self.close_line();
                let first = text.lines().next().unwrap_or_default();
                let line = format!("› {first}{}", image_note(images.len()));
                eprintln!("{}", style.paint("2", &line));
            }
            EventBody::ToolCallStart {
                call_id,
                tool_name,
                arguments,
                ..
            } => {
                self.close_line();
                self.tools.insert(call_id.clone(), tool_name.clone());
                eprintln!(
                    "{} {}",
                    style.paint("1;36", &format!("● {tool_name}")),
                    summarize_args(tool_name, arguments)
                );
            }
            EventBody::ToolCallOutputDelta { call_id, delta, .. } => {
                let buffer = self.partial.entry(call_id.clone()).or_default();
                buffer.push_str(delta);
                let Some(end) = buffer.rfind('\n') else {
                    return;
                };
                let complete: String = buffer.drain(..=end).collect();
                for line in complete.lines() {
                    self.output_line(line);
                }
            }
            EventBody::ToolCallEnd {
                tool_name,
                error,
                duration_ms,
                ..
            } => match error {
                None => eprintln!(
                    "  {} {tool_name} ({duration_ms} ms)",
                    style.paint("32", "✓")
                ),
                // An error may quote a command's or a hook's output, escapes and all.
                Some(e) => eprintln!(
                    "  {} {tool_name} ({duration_ms} ms): {}",
                    style.paint("31", "✗"),
                    without_controls(e.lines().last().unwrap_or_default())
                ),
            },
            EventBody::HookStarted {
                event,
                hook,
                program,
                call_id,
                ..
            } => {
                self.close_line();
                // A tool's hooks show under its line, as its output does.
                let indent = if call_id.is_some() { "  " } else { "" };
                let tool = call_id.as_ref().map(|id| {
                    self.tools
                        .get(id)
                        .map_or_else(|| id.to_string(), String::clone)
                });
                eprintln!(
                    "{indent}{} {}",
                    style.paint("36", "◆"),
                    describe_hook_start(*event, tool.as_deref(), program, hook)
                );
            }
            EventBody::HookFinished {
                event,
                outcome,
                exit_code,
                duration_ms,
                reason,
                ..
            } => {
                self.close_line();
                let indent = if event.is_tool_event() { "    " } else { "  " };
                let (mark, color, line) = describe_hook_end(
                    *event,
                    *outcome,
                    *exit_code,
                    *duration_ms,
                    reason.as_deref(),
                );
                eprintln!("{indent}{} {line}", style.paint(color, mark));
            }
            EventBody::SteeringInjected { text, images, .. } => {
                eprintln!("↳ steering: {text}{}", image_note(images.len()));
            }
            EventBody::TurnLimit { limit, count } => {
                self.close_line();
                let what = match limit {
                    LimitKind::MaxToolRoundsPerInput => {
                        "the round limit for one input (max-rounds)"
                    }
                    LimitKind::MaxTurns => "the session's turn limit (max-turns)",
                };
                eprintln!(
                    "{}",
                    style.paint("33", &format!("■ stopped at {what}: {count}"))
                );
            }
            EventBody::ApprovalRequested {
                request_id,
                tool,
                summary,
                ..
            } => {
                self.close_line();
                eprintln!(
                    "{} {tool} (request {request_id}):",
                    style.paint("1;35", "? approve")
                );
                for line in summary.lines() {
                    eprintln!("  {line}");
                }
            }
            EventBody::ApprovalResolved {
                tool,
                decision,
                by,
                message,
                ..
            } => {
                let (mark, color) = match decision {
                    Decision::Deny => ("✗ denied", "31"),
                    Decision::Allow => ("✓ allowed", "32"),
                    Decision::AllowAlways => ("✓ allowed always", "32"),
                };
                let why = match (by, message) {
                    (ResolvedBy::Rule, Some(rule)) => format!("by the rule {rule}"),
                    (ResolvedBy::Client, Some(m)) => format!("by a client: {m}"),
                    (ResolvedBy::Client, None) => "by a client".into(),
                    (ResolvedBy::Timeout, _) => "nobody answered in time".into(),
                    (ResolvedBy::Abort, _) | (ResolvedBy::Rule, None) => {
                        "the work was aborted".into()
                    }
                };
                eprintln!("  {} {tool} ({why})", style.paint(color, mark));
            }
            EventBody::QuestionRequested {
                request_id,
                question,
                options,
                ..
            } => {
                self.close_line();
                eprintln!(
                    "{} {question} (request {request_id})",
                    style.paint("1;35", "? question:")
                );
                for (i, option) in options.iter().enumerate() {
                    eprintln!("  {}. {option}", i + 1);
                }
            }
            EventBody::QuestionResolved { answer, by, .. } => match answer {
                Some(a) => eprintln!("  {} {a}", style.paint("32", "↳ answered:")),
                None => eprintln!(
                    "  {} ({})",
                    style.paint("33", "↳ unanswered"),
                    if *by == ResolvedBy::Timeout {
                        "timed out"
                    } else {
                        "withdrawn"
                    }
                ),
            },
            EventBody::ClientToolRequested { tool, .. } => {
                self.close_line();
                eprintln!(
                    "{}",
                    style.paint("2", &format!("… waiting for a client to run {tool}"))
                );
            }
            EventBody::LoopDetection { message } => {
                eprintln!("{}", style.paint("33", &format!("⚠ {message}")))
            }
            EventBody::Warning { message, .. } => {
                self.close_line();
                // A warning may quote a workspace's file names and texts.
                let message = without_controls(message);
                eprintln!("{}", style.paint("33", &format!("⚠ {message}")));
            }
            EventBody::McpServerState {
                server,
                state,
                reason,
                tools,
                ..
            } => {
                self.close_line();
                let color = if *state == McpServerState::Failed {
                    "33"
                } else {
                    "2"
                };
                eprintln!(
                    "{}",
                    style.paint(
                        color,
                        &describe_mcp_state(server, *state, reason.as_deref(), tools.as_deref())
                    )
                );
            }
            EventBody::Error { message, .. } => {
                self.close_line();
                eprintln!("{}", style.paint("31", &format!("✗ error: {message}")));
            }
            EventBody::Usage { call, .. } => {
                self.usage.get_or_insert_with(Usage::default).add(call);
            }
            EventBody::ProcessingEnd { reason, .. } => {
                self.close_line();
                if let Some(usage) = self.usage.take() {
                    eprintln!("{}", style.paint("2", &describe_usage(&usage)));
                }
                match reason {
                    ProcessingEndReason::Aborted => eprintln!("{}", style.paint("33", "■ aborted")),
                    ProcessingEndReason::Error => {
                        eprintln!("{}", style.paint("31", "■ stopped by an error"))
                    }
                    // The `warning` before it already says what was cut off or refused, and why.
                    ProcessingEndReason::Completed
                    | ProcessingEndReason::TurnLimit
                    | ProcessingEndReason::MaxTokens
                    | ProcessingEndReason::Refusal => {}
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

/// ` [N image(s)]` after a user's text, when it came with images.
pub(crate) fn image_note(images: usize) -> String {
    match images {
        0 => String::new(),
        1 => " [1 image]".into(),
        n => format!(" [{n} images]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_states_read_as_a_line() {
        let tools = ["mcp__git__status".to_owned()];
        assert_eq!(
            describe_mcp_state("git", McpServerState::Ready, None, Some(&tools)),
            "⚙ MCP server git ready (1 tools)"
        );
        assert_eq!(
            describe_mcp_state("git", McpServerState::Failed, Some("it crashed"), None),
            "⚙ MCP server git failed: it crashed"
        );
    }

    #[test]
    fn hooks_read_as_lines_of_their_own_words_without_escapes() {
        assert_eq!(
            describe_hook_start(
                HookEvent::PreToolUse,
                Some("shell"),
                "./guard.py",
                "hooks.pre_tool_use[0]"
            ),
            "hook pre_tool_use for shell: ./guard.py (hooks.pre_tool_use[0])"
        );
        assert_eq!(
            describe_hook_start(
                HookEvent::Stop,
                None,
                "make",
                ".agents/hooks.toml hooks.stop[1]"
            ),
            "hook stop: make (.agents/hooks.toml hooks.stop[1])"
        );
        let end = |outcome, code, reason| {
            describe_hook_end(HookEvent::PreToolUse, outcome, code, 12, reason)
        };
        assert_eq!(
            end(HookOutcome::Ok, Some(0), None),
            ("✓", "32", "hook pre_tool_use (12 ms)".into())
        );
        assert_eq!(
            end(
                HookOutcome::Blocked,
                Some(2),
                Some("\nrm is not allowed\x1b[2J here\nsecond line")
            ),
            (
                "✗",
                "31",
                "hook pre_tool_use blocked (12 ms): rm is not allowed [2J here".into()
            )
        );
        assert_eq!(
            end(HookOutcome::Failed, Some(1), Some("crashed")).2,
            "hook pre_tool_use failed, exit 1 (12 ms): crashed"
        );
        assert_eq!(
            end(HookOutcome::TimedOut, None, Some("it ran past 1 s")).2,
            "hook pre_tool_use timed out (12 ms): it ran past 1 s"
        );
        assert_eq!(
            end(HookOutcome::Aborted, None, None),
            ("■", "33", "hook pre_tool_use aborted (12 ms)".into())
        );
        let long = "x".repeat(500);
        assert_eq!(
            end(HookOutcome::Blocked, Some(2), Some(&long))
                .2
                .chars()
                .count(),
            "hook pre_tool_use blocked (12 ms): ".len() + 200
        );
    }

    #[test]
    fn unknown_usage_is_not_shown_as_zero() {
        let known = Usage {
            input_tokens: 100,
            output_tokens: 20,
            cache_read_tokens: 50,
            cost_usd: Some(0.00019),
            ..Usage::default()
        };
        let unknown = Usage {
            unreported_calls: 1,
            ..Usage::default()
        };
        let mut both = known;
        both.add(&unknown);
        both.add(&unknown);
        assert_eq!(
            [&known, &unknown, &both].map(describe_usage),
            [
                "tokens: 150 in, 20 out, $0.0002",
                "tokens: unknown (the server reported no usage)",
                "tokens: 150 in, 20 out and unknown for 2 calls (the server reported no usage)",
            ]
        );
    }
}
