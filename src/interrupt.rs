//! Ctrl-C handling: the first Ctrl-C sets a flag that runs poll, so they end cleanly and
//! still write what was measured; a second Ctrl-C exits at once.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The process-wide interrupt flag.
pub fn flag() -> &'static AtomicBool {
    &INTERRUPTED
}

/// Install the handler (idempotent; failures leave default Ctrl-C behaviour).
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            if INTERRUPTED.swap(true, Ordering::SeqCst) {
                eprintln!("\niolens: interrupted again, exiting without writing results");
                std::process::exit(130);
            }
            eprintln!("\niolens: interrupted, finishing the measurement and writing results");
        });
    });
}
