//! The `iolens` binary: parse, dispatch, print errors. Everything else lives in the library.
use std::process::ExitCode;

fn main() -> ExitCode {
    match iolens::cli::main_with(std::env::args_os().collect()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("iolens: error: {e:#}");
            ExitCode::from(iolens::target::exit_code_of(&e))
        }
    }
}
