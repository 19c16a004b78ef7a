//! The exit status of every command, decided here alone: 0 when the work is done, 2 for an
//! error (bad input, a usage error, text for people that could not be written), 3 when corrupt
//! data was read, and 128 + the signal (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP) when a
//! signal ended the work early. Producers say what happened through the error types here
//! ([`Corrupt`], [`Interrupted`]) or in their results; `main.rs` and `commands::finish` ask
//! this module for the status.

/// The work is done.
pub const SUCCESS: u8 = 0;
/// An error: bad input, a failed command, a usage error, or standard output that could not be
/// written.
pub const ERROR: u8 = 2;
/// Corrupt data was read (a run or `iolens verify` found corrupt blocks, a scratch file's
/// header is damaged or the file is truncated).
pub const CORRUPTION: u8 = 3;

/// A target that shows corruption (truncated, damaged header, blocks of another target): the
/// command stops without writing and exits with [`CORRUPTION`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Corrupt(pub String);

/// Work before the measurement was stopped by Ctrl-C or SIGTERM (a scratch-file fill, whose
/// filled part is kept and resumed by the next fill; the wait for `--start-at`). The command
/// exits as an interrupted run does ([`interrupted`]).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Interrupted(pub String);

/// The status of a command that a signal ended early: 128 + the signal number; 130 when the
/// work stopped early without a signal being recorded.
pub(crate) fn interrupted() -> u8 {
    crate::interrupt::exit_code()
}

/// The status an error calls for: [`CORRUPTION`] for corruption, 130 (143 for SIGTERM) for
/// interrupted preparation, [`ERROR`] else.
pub fn of_error(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<Corrupt>()) {
        CORRUPTION
    } else if e.chain().any(|c| c.is::<Interrupted>()) {
        interrupted().max(130)
    } else {
        ERROR
    }
}

/// The status of a command that finished its work: [`CORRUPTION`] when corrupt data was read,
/// else [`interrupted`] when a signal ended it early, else [`SUCCESS`].
pub(crate) fn of_finished(corruption: bool, interrupted_early: bool) -> u8 {
    if corruption {
        CORRUPTION
    } else if interrupted_early {
        interrupted()
    } else {
        SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corruption_outranks_interruption_and_errors_say_which() {
        assert_eq!(of_finished(true, true), CORRUPTION);
        assert_eq!(of_finished(false, false), SUCCESS);
        assert!(of_finished(false, true) >= 128);
        let e = anyhow::Error::new(Corrupt("damaged header".into())).context("preparing /x");
        assert_eq!(of_error(&e), CORRUPTION);
        let e = anyhow::Error::new(Interrupted("stopped".into())).context("filling");
        assert!(of_error(&e) >= 130);
        assert_eq!(of_error(&anyhow::anyhow!("bad input")), ERROR);
    }
}
