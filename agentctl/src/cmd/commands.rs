//! `agentctl commands`: the skills and prompt commands a session's input may start with
//! (`/name`), for people and for completion scripts (`--names`).

use super::{Context, print, resolve, table};
use crate::error::Result;
use crate::render::without_controls;
use agentd_proto::methods as m;
use agentd_proto::{CommandInfo, SessionParams};

#[derive(clap::Args)]
pub(crate) struct Commands {
    session: String,
    /// Print only `/name`, one a line (for shell completion).
    #[arg(long)]
    names: bool,
}

impl Commands {
    pub(crate) async fn run(self, ctx: &Context) -> Result<u8> {
        let session_id = resolve(&ctx.conn, &self.session).await?;
        let listed = ctx
            .conn
            .call::<m::SessionCommands>(SessionParams { session_id })
            .await?;
        if self.names && !ctx.json {
            for c in &listed.commands {
                println!("/{}", without_controls(&c.name));
            }
            return Ok(0);
        }
        print(ctx.json, &listed, |listed| {
            let rows: Vec<Vec<String>> = listed.commands.iter().map(row).collect();
            for line in table(&rows) {
                println!("{line}");
            }
            for w in &listed.warnings {
                eprintln!("warning: {}", without_controls(w));
            }
        });
        Ok(0)
    }
}

/// One command's row. Its texts come from a workspace's files (a hostile repository's):
/// control characters are blanked, so an escape sequence cannot rewrite the terminal.
fn row(c: &CommandInfo) -> Vec<String> {
    let name = match &c.argument_hint {
        Some(hint) => format!("/{} {hint}", c.name),
        None => format!("/{}", c.name),
    };
    vec![
        without_controls(&name),
        c.kind.to_string(),
        c.scope.to_string(),
        without_controls(&c.description),
    ]
}

#[cfg(test)]
mod tests {
    use super::row;
    use agentd_proto::{CommandInfo, CommandKind, ExtensionScope};

    #[test]
    fn a_command_row_holds_no_control_characters() {
        let c = CommandInfo {
            name: "x\u{1b}[2J".into(),
            kind: CommandKind::Prompt,
            description: "Tidy \u{1b}]52;c;ZWNobw==\u{7} notes".into(),
            argument_hint: Some("\u{9b}31mFILE".into()),
            scope: ExtensionScope::Project,
            path: String::new(),
        };
        let row = row(&c);
        assert!(!row.concat().chars().any(char::is_control), "{row:?}");
        assert_eq!(row[3], "Tidy  ]52;c;ZWNobw==  notes");
    }
}
