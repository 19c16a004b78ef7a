//! `iolens man`: the manual page (roff), generated from the CLI definition.

use std::process::ExitCode;

use anyhow::Result;
use clap::CommandFactory;

use super::Cli;

/// The manual page: the top-level page followed by one section per visible subcommand.
pub fn page() -> Result<String> {
    let cmd = Cli::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        // Each subcommand as a section of the one page: its name, synopsis, options.
        out.extend_from_slice(
            format!(".SH \"IOLENS {}\"\n", sub.get_name().to_uppercase()).as_bytes(),
        );
        let man = clap_mangen::Man::new(sub.clone().bin_name(format!("iolens {}", sub.get_name())));
        man.render_synopsis_section(&mut out)?;
        man.render_description_section(&mut out)?;
        man.render_options_section(&mut out)?;
        man.render_subcommands_section(&mut out)?;
    }
    Ok(String::from_utf8(out)?)
}

/// `iolens man`.
pub(crate) fn main() -> Result<ExitCode> {
    crate::render::print_out(&page()?)?;
    Ok(ExitCode::SUCCESS)
}
