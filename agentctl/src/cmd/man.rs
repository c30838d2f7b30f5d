//! `agentctl man`: the man pages, generated from the command line's definition.

use crate::cli::Cli;
use crate::error::{Failure, Result};

pub(crate) fn run(dir: Option<&std::path::Path>) -> Result<u8> {
    let command = <Cli as clap::CommandFactory>::command();
    let fail = |e: std::io::Error| Failure::failed(format!("cannot write man pages: {e}"));
    let Some(dir) = dir else {
        clap_mangen::Man::new(command)
            .render(&mut std::io::stdout())
            .map_err(fail)?;
        return Ok(0);
    };
    std::fs::create_dir_all(dir).map_err(fail)?;
    let mut pages = vec![("agentctl".to_owned(), command.clone())];
    pages.extend(command.get_subcommands().map(|sub| {
        let name = format!("agentctl-{}", sub.get_name());
        (name.clone(), sub.clone().name(name))
    }));
    for (name, page) in pages {
        let mut out = Vec::new();
        clap_mangen::Man::new(page).render(&mut out).map_err(fail)?;
        std::fs::write(dir.join(format!("{name}.1")), out).map_err(fail)?;
    }
    Ok(0)
}
