//! Progress display on stderr: shown only on a terminal, silent when piped or disabled.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// True when progress should be drawn (stderr is a terminal).
pub(crate) fn wanted() -> bool {
    std::io::stderr().is_terminal()
}

fn target(enabled: bool) -> ProgressDrawTarget {
    if enabled && wanted() {
        ProgressDrawTarget::stderr_with_hz(4)
    } else {
        ProgressDrawTarget::hidden()
    }
}

/// A byte-progress bar (e.g. filling a scratch file).
pub(crate) fn bar(enabled: bool, len: u64, msg: &str) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(len), target(enabled));
    pb.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    pb.set_message(msg.to_string());
    pb
}

/// A one-line status display whose message the caller updates.
pub(crate) fn line(enabled: bool) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(None, target(enabled));
    pb.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("valid template"));
    pb
}
