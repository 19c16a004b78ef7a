//! `iolens completions SHELL`: a shell completion script generated from the CLI definition.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::Cli;

/// `iolens completions`.
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// Shell to complete for. Bash: `iolens completions bash >
    /// /etc/bash_completion.d/iolens`; zsh: write it as `_iolens` on $fpath; fish: to
    /// ~/.config/fish/completions/iolens.fish.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// `iolens completions`.
pub(crate) fn main(a: &CompletionsArgs) -> Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut Cli::command(), "iolens", &mut script);
    crate::render::print_out(&String::from_utf8_lossy(&script))?;
    Ok(ExitCode::SUCCESS)
}
