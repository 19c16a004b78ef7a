//! Ctrl-C, SIGTERM and SIGHUP handling: the first such signal sets a flag that runs poll, so
//! they end cleanly and still write what was measured; a second one exits at once.
//!
//! `timeout`, systemd and Kubernetes stop a process with SIGTERM; a closed terminal sends
//! SIGHUP: both are handled exactly as Ctrl-C (SIGINT). Which signal arrived is kept, so the
//! command exits with the shell's convention, 128 + the signal number: 130 for Ctrl-C, 143 for
//! SIGTERM, 129 for SIGHUP.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGTERM};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// Whether the command will write a results file when interrupted (what the first signal's
/// message promises).
static WRITES_RESULTS: AtomicBool = AtomicBool::new(false);
/// Whether the command is reading its inputs ([`reading`]): a signal then ends it at once.
static READING: AtomicBool = AtomicBool::new(false);
/// The temp files of the outputs of a command that reads inputs (directory, name), removed
/// when a signal ends the reading; set once, before the handler can see [`READING`].
static READ_TEMPS: std::sync::OnceLock<Vec<(std::os::fd::OwnedFd, std::ffi::CString)>> =
    std::sync::OnceLock::new();

/// While a command reads other tools' files (`trace`, `ingest`), until the returned guard is
/// dropped: a signal (Ctrl-C, SIGTERM, SIGHUP) ends it at once, as reading a file further has
/// nothing to finish: the output temp files `temps` (their directory and name, from
/// [`crate::output::Output::temp`]) are removed, that is said, and the exit status is 128 +
/// the signal, as every command's. A read blocked on a slow pipe ends too. After the reading, a
/// signal is what it is for every command: the results of what was read are written and the
/// exit status says the signal.
pub(crate) fn reading(temps: Vec<(std::os::fd::OwnedFd, std::ffi::CString)>) -> Reading {
    let _ = READ_TEMPS.set(temps);
    READING.store(true, Ordering::SeqCst);
    install();
    Reading(())
}

/// See [`reading`]: while it lives a signal ends the command at once.
pub(crate) struct Reading(());

impl Drop for Reading {
    fn drop(&mut self) {
        READING.store(false, Ordering::SeqCst);
    }
}

/// Say whether this command writes a results file when stopped early: the first signal's
/// message then says "writing results"; otherwise it says only that the work is finishing
/// (a command without `--json` must not promise a file it will not write).
pub(crate) fn set_writes_results(writes: bool) {
    WRITES_RESULTS.store(writes, Ordering::SeqCst);
}

/// The process-wide interrupt flag (set by the first SIGINT, SIGTERM or SIGHUP).
pub(crate) fn flag() -> &'static AtomicBool {
    &INTERRUPTED
}

/// Whether the work was interrupted by a signal.
pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The signal that interrupted the work, if one did.
pub(crate) fn signal() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The exit status of a command that a signal ended early: 128 + the signal number (130 for
/// Ctrl-C, 143 for SIGTERM, 129 for SIGHUP); 130 when the work stopped early without a signal
/// being recorded (the flag set directly).
pub(crate) fn exit_code() -> u8 {
    signal()
        .and_then(|s| u8::try_from(128 + s).ok())
        .unwrap_or(130)
}

/// Write a fixed message to stderr from signal context (write(2) is async-signal-safe).
fn say(msg: &[u8]) {
    // SAFETY: a plain write of a valid buffer to file descriptor 2.
    let _ = unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
}

/// Install the handler (idempotent; when it cannot be installed the default behaviour stays).
///
/// The handler does only async-signal-safe work: atomic loads and stores, write(2) of a fixed
/// message, and `_exit` on the second signal.
pub(crate) fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            let while_reading: &'static [u8] = match sig {
                SIGINT => b"\niolens: interrupted (Ctrl-C) while reading the input: no results written\n",
                SIGTERM => b"\niolens: terminated (SIGTERM) while reading the input: no results written\n",
                _ => b"\niolens: hung up (SIGHUP) while reading the input: no results written\n",
            };
            let (first, first_no_results, again): (&'static [u8], &'static [u8], &'static [u8]) =
                match sig {
                    SIGINT => (
                        b"\niolens: interrupted (Ctrl-C), finishing the measurement and writing results\n",
                        b"\niolens: interrupted (Ctrl-C), finishing the measurement\n",
                        b"\niolens: interrupted again, exiting without writing results\n",
                    ),
                    SIGTERM => (
                        b"\niolens: terminated (SIGTERM), finishing the measurement and writing results\n",
                        b"\niolens: terminated (SIGTERM), finishing the measurement\n",
                        b"\niolens: terminated again, exiting without writing results\n",
                    ),
                    _ => (
                        b"\niolens: hung up (SIGHUP), finishing the measurement and writing results\n",
                        b"\niolens: hung up (SIGHUP), finishing the measurement\n",
                        b"\niolens: hung up again, exiting without writing results\n",
                    ),
                };
            // SAFETY: the action only touches atomics (a OnceLock's get is one), calls
            // unlinkat(2), write(2) and _exit, all of which are async-signal-safe; it allocates
            // nothing and takes no lock.
            let _ = unsafe {
                signal_hook::low_level::register(sig, move || {
                    if READING.load(Ordering::SeqCst) {
                        use std::os::fd::AsRawFd as _;
                        for (dir, name) in READ_TEMPS.get().into_iter().flatten() {
                            libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0);
                        }
                        say(while_reading);
                        signal_hook::low_level::exit(128 + sig);
                    }
                    if INTERRUPTED.load(Ordering::SeqCst) {
                        say(again);
                        signal_hook::low_level::exit(128 + sig);
                    }
                    SIGNAL.store(sig, Ordering::SeqCst);
                    INTERRUPTED.store(true, Ordering::SeqCst);
                    say(if WRITES_RESULTS.load(Ordering::SeqCst) {
                        first
                    } else {
                        first_no_results
                    });
                })
            };
        }
    });
}

/// The longest a sleep goes without looking at the flags: a signal ends any wait within it.
pub(crate) const SLEEP_SLICE: std::time::Duration = std::time::Duration::from_millis(20);

/// Sleep for `d`, or less: wake within [`SLEEP_SLICE`] once `stop` is set (a run's stop flag,
/// which its driver sets on a signal or at the end; or [`flag`] itself). True when it slept
/// the whole `d`, false when it was cut short.
pub(crate) fn sleep(d: std::time::Duration, stop: &AtomicBool) -> bool {
    let Some(end) = std::time::Instant::now().checked_add(d) else {
        // Beyond the clock's range: sleep until stopped.
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(SLEEP_SLICE);
        }
        return false;
    };
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(SLEEP_SLICE));
    }
}

/// [`sleep`] that wakes on a signal (Ctrl-C, SIGTERM, SIGHUP).
pub(crate) fn sleep_unless_interrupted(d: std::time::Duration) -> bool {
    sleep(d, &INTERRUPTED)
}
