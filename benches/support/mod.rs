//! Helpers shared by the bench binaries.

// Each bench uses what it needs of these.
#![allow(dead_code)]

pub mod config_log;

use std::time::Duration;

/// CPU time (user + system) this process has used so far.
pub fn cpu_time() -> Duration {
    let usage = rusage();
    let time = |tv: libc::timeval| Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// The peak resident set of this process so far, in bytes (`getrusage`'s `ru_maxrss`).
pub fn peak_rss_bytes() -> u64 {
    rusage().ru_maxrss as u64 * 1024
}

fn rusage() -> libc::rusage {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage fills the whole struct for RUSAGE_SELF, and we read it only on success.
    unsafe {
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()), 0);
        usage.assume_init()
    }
}
