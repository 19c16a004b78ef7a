//! The `iolens` binary: parse, dispatch, print errors. Everything else lives in the library.
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let code = match iolens::commands::main_with(std::env::args_os().collect()) {
        Ok(code) => code,
        Err(e) => {
            let text = format!("{e:#}");
            let _ = writeln!(
                std::io::stderr(),
                "{}",
                iolens::out::for_stderr(&format!("iolens: error: {text}"))
            );
            return ExitCode::from(iolens::target::exit_code_of(&e));
        }
    };
    // Text for people that could not be written (stdout full, or an I/O error) makes an
    // otherwise successful command fail; a reader that closed the pipe (`| head`) does not.
    match iolens::out::status() {
        iolens::out::Status::Failed(why) if code == ExitCode::SUCCESS => {
            let _ = writeln!(
                std::io::stderr(),
                "iolens: error: cannot write to standard output: {why}"
            );
            ExitCode::from(2)
        }
        _ => code,
    }
}
