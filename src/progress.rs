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

/// A byte-progress bar (e.g. filling a scratch file), its message cut to fit the terminal.
pub(crate) fn bar(enabled: bool, len: u64, msg: &str) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(len), target(enabled));
    pb.set_style(
        ProgressStyle::with_template("{wide_msg} [{bar:16}] {bytes}/{total_bytes} eta {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_message(msg.to_string());
    pb
}

/// `msg` cut (ending in `…`) to the width of the terminal on stderr less the spinner's two
/// columns: a progress line never wraps onto a second line that its next update could not
/// erase. (indicatif's `wide_msg` pads such a line to twice the width on some terminals.)
pub(crate) fn fit(msg: &str) -> String {
    let Some(w) = terminal_size::terminal_size_of(std::io::stderr()).map(|(w, _)| w.0 as usize)
    else {
        return msg.to_string();
    };
    let room = w.saturating_sub(3).max(10);
    if msg.chars().count() <= room {
        return msg.to_string();
    }
    let mut s: String = msg.chars().take(room - 1).collect();
    s.push('…');
    s
}

/// A one-line status display whose message the caller updates, through [`fit`].
pub(crate) fn line(enabled: bool) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(None, target(enabled));
    pb.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("valid template"));
    pb
}
