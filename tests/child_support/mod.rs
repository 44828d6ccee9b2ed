//! For the tests whose engine instances run as child processes (`--child …`) that the parent
//! stops with SIGTERM: the child runs its application until SIGTERM, then stops cleanly and
//! exits with status 0, or exits with status 3 if the run ended in an error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use flechtwerk::Flechtwerk;

static TERMINATED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigterm(_: libc::c_int) {
    TERMINATED.store(true, Ordering::SeqCst);
}

/// Runs `app` until this process gets SIGTERM (a clean stop: prints `stopped cleanly`); a run
/// that ends in an error prints `crashed: …` (the error and its causes) and exits the process
/// with status 3.
pub async fn run_until_sigterm(app: Flechtwerk) {
    // SAFETY: installs an async-signal-safe handler (one atomic store).
    unsafe { libc::signal(libc::SIGTERM, on_sigterm as *const () as libc::sighandler_t) };
    let terminated = async {
        while !TERMINATED.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    match app.run_until(terminated).await {
        Ok(()) => println!("stopped cleanly"),
        Err(error) => {
            // The whole chain of causes: a stage's error is the source of "transform failed ...".
            let mut words = error.to_string();
            let mut cause = std::error::Error::source(&error);
            while let Some(c) = cause {
                words.push_str(&format!(": {c}"));
                cause = c.source();
            }
            println!("crashed: {words}");
            std::process::exit(3);
        }
    }
}
