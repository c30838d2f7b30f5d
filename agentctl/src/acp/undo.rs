//! The bridge's own slash commands: `/undo [N] [force]`, `/redo [force]` and `/diff`, offered
//! in `available_commands_update` beside the session's skills and prompt commands. A prompt
//! that is one of them is not sent to the model: the bridge calls the daemon's
//! `session/rollback {files: true}`, `session/redo` or `session/diff`, and answers with the
//! result as the agent's text. A refusal (the session is working, files changed since, no
//! checkpoints) is that text too, with the daemon's reason, and the prompt ends normally:
//! nothing failed, the user asked for something that cannot be done now.

use super::Bridge;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Client, Error};
use agentd_proto::methods as m;
use agentd_proto::{
    DiffParams, ErrorData, ErrorKind, FilesRestored, RedoParams, RollbackParams, SessionId,
};
use std::fmt::Write;

/// The most of a diff shown in the editor; `agentctl diff` has the whole of it.
const MAX_DIFF: usize = 64 << 10;

/// One of the bridge's commands, parsed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Local {
    Undo { turns: usize, force: bool },
    Redo { force: bool },
    Diff,
}

/// The commands as `available_commands_update` lists them.
pub(super) fn offered() -> Vec<acp::AvailableCommand> {
    let hint = |h: &str| {
        acp::AvailableCommandInput::Unstructured(acp::UnstructuredCommandInput::new(h.to_owned()))
    };
    vec![
        acp::AvailableCommand::new(
            "undo",
            "Undo the last input (or N) with the files the agent changed in it",
        )
        .input(hint("[N] [force]")),
        acp::AvailableCommand::new("redo", "Bring back what the last undo took away")
            .input(hint("[force]")),
        acp::AvailableCommand::new("diff", "Show what the agent changed in the files last time"),
    ]
}

/// The names of [`offered`], which a skill or prompt command of the same name gives way to.
pub(super) const NAMES: [&str; 3] = ["undo", "redo", "diff"];

/// The command `text` is, if it is one (`Err`: it is, with arguments that do not fit).
pub(super) fn parse(text: &str) -> Option<Result<Local, String>> {
    let mut words = text.split_whitespace();
    let name = words.next()?.strip_prefix('/')?;
    let args: Vec<&str> = words.collect();
    let force = args.contains(&"force");
    let rest: Vec<&str> = args.iter().copied().filter(|a| *a != "force").collect();
    let parsed = match (name, rest.as_slice()) {
        ("undo", []) => Ok(Local::Undo { turns: 1, force }),
        ("undo", [n]) => match n.parse::<usize>() {
            Ok(turns) if turns > 0 => Ok(Local::Undo { turns, force }),
            _ => Err(format!(
                "/undo takes a number of inputs (1 or more), not {n:?}"
            )),
        },
        ("undo", _) => Err("/undo takes at most a number and `force`".to_owned()),
        ("redo", []) => Ok(Local::Redo { force }),
        ("redo", _) => Err("/redo takes only `force`".to_owned()),
        ("diff", []) if !force => Ok(Local::Diff),
        ("diff", _) => Err("/diff takes no arguments".to_owned()),
        _ => return None,
    };
    Some(parsed)
}

impl Bridge {
    /// Runs `command` on session `id` and shows what it did (or why not) as the agent's text.
    pub(super) async fn run_local(
        &self,
        id: &acp::SessionId,
        command: Result<Local, String>,
        cx: &ConnectionTo<Client>,
    ) -> Result<acp::PromptResponse, Error> {
        let session_id = SessionId(id.0.to_string());
        let text = match command {
            Err(usage) => usage,
            Ok(command) => {
                let forced = match &command {
                    Local::Undo { .. } => "/undo force",
                    Local::Redo { .. } | Local::Diff => "/redo force",
                };
                match self.local(session_id, command).await {
                    Ok(text) => text,
                    Err(jsonrpsee::core::ClientError::Call(e)) => {
                        refusal(e.message(), e.data(), forced)
                    }
                    Err(e) => return Err(super::daemon_error(e)),
                }
            }
        };
        let chunk = acp::ContentChunk::new(acp::ContentBlock::Text(acp::TextContent::new(text)));
        cx.send_notification(acp::SessionNotification::new(
            id.clone(),
            acp::SessionUpdate::AgentMessageChunk(chunk),
        ))
        .map_err(|e| Error::internal_error().data(format!("the answer could not be sent: {e}")))?;
        Ok(acp::PromptResponse::new(acp::StopReason::EndTurn))
    }

    async fn local(
        &self,
        session_id: SessionId,
        command: Local,
    ) -> Result<String, jsonrpsee::core::ClientError> {
        match command {
            Local::Undo { turns, force } => {
                let r = self
                    .daemon
                    .call::<m::SessionRollback>(RollbackParams {
                        session_id,
                        turns,
                        files: true,
                        force,
                    })
                    .await?;
                let mut text = format!(
                    "Undone: {turns} input(s), {} entries off the conversation ({} left). The \
                     model no longer sees them; this view still shows them. `/redo` brings them \
                     back.\n",
                    r.removed, r.entries
                );
                files(&mut text, r.files.as_ref());
                Ok(text)
            }
            Local::Redo { force } => {
                let r = self
                    .daemon
                    .call::<m::SessionRedo>(RedoParams { session_id, force })
                    .await?;
                let mut text = format!("Redone: {} entries on the conversation.\n", r.entries);
                files(&mut text, r.files.as_ref());
                Ok(text)
            }
            Local::Diff => {
                let r = self
                    .daemon
                    .call::<m::SessionDiff>(DiffParams {
                        session_id,
                        input_id: None,
                    })
                    .await?;
                Ok(diff_text(&r.diff))
            }
        }
    }
}

/// Why the daemon refused: over files the user changed, those files (from the error's data)
/// one a line and how to go on with `forced`; otherwise its message.
fn refusal(message: &str, data: Option<&serde_json::value::RawValue>, forced: &str) -> String {
    let data = data
        .and_then(|d| serde_json::from_str::<ErrorData>(d.get()).ok())
        .filter(|d| d.kind == ErrorKind::FilesChanged);
    let Some(data) = data else {
        return format!("Refused: {message}");
    };
    let mut text = "Refused: you changed these files since the agent did, so nothing was \
                    restored:\n"
        .to_owned();
    for file in data.files.unwrap_or_default() {
        let _ = writeln!(text, "- `{file}`");
    }
    if let Some(more) = data.more_files {
        let _ = writeln!(text, "- and {more} more");
    }
    let _ = writeln!(
        text,
        "`{forced}` restores them anyway (your versions are kept for a redo)."
    );
    text
}

/// What happened to the files, one line each.
fn files(text: &mut String, files: Option<&FilesRestored>) {
    let Some(files) = files else { return };
    for path in &files.restored {
        let _ = writeln!(text, "- restored `{path}`");
    }
    for path in &files.kept {
        let _ = writeln!(
            text,
            "- your version of `{path}` is kept: `/redo force` brings it back"
        );
    }
    for why in &files.not_restored {
        let _ = writeln!(text, "- not restored: {why}");
    }
}

/// A diff as a fenced block, cut to [`MAX_DIFF`] bytes.
fn diff_text(diff: &str) -> String {
    if diff.is_empty() {
        return "The agent changed no file in the last input.".to_owned();
    }
    let mut end = diff.len().min(MAX_DIFF);
    while !diff.is_char_boundary(end) {
        end -= 1;
    }
    let mut text = format!("```diff\n{}", &diff[..end]);
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("```\n");
    if end < diff.len() {
        let _ = writeln!(
            text,
            "({} more bytes: `agentctl diff` shows the whole diff)",
            diff.len() - end
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_their_arguments_and_others_pass_through() {
        assert_eq!(
            parse("/undo"),
            Some(Ok(Local::Undo {
                turns: 1,
                force: false
            }))
        );
        assert_eq!(
            parse(" /undo 2 force "),
            Some(Ok(Local::Undo {
                turns: 2,
                force: true
            }))
        );
        assert_eq!(parse("/redo force"), Some(Ok(Local::Redo { force: true })));
        assert_eq!(parse("/diff"), Some(Ok(Local::Diff)));
        assert!(matches!(parse("/undo 0"), Some(Err(_))));
        assert!(matches!(parse("/undo two"), Some(Err(_))));
        assert!(matches!(parse("/diff 3"), Some(Err(_))));
        assert_eq!(parse("/fix 7"), None);
        assert_eq!(parse("undo it"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn a_long_diff_is_cut_on_a_char_boundary_and_says_so() {
        let diff = "é".repeat(MAX_DIFF);
        let text = diff_text(&diff);
        assert!(text.len() < diff.len() + 100);
        assert!(text.contains("more bytes"), "{}", &text[text.len() - 80..]);
        assert_eq!(
            diff_text(""),
            "The agent changed no file in the last input."
        );
    }
}
