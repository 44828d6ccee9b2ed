//! Helpers shared by the bench binaries.

// Each bench uses what it needs of these.
#![allow(dead_code)]

pub mod config_log;
pub mod stats;

use std::time::Duration;

/// With `RUST_LOG` set (e.g. `flechtwerk=debug`): the engine's events and span closes on stderr.
pub fn trace_to_stderr_if_asked() {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .init();
    }
}

/// CPU time (user + system) this process has used so far.
pub fn cpu_time() -> Duration {
    let usage = rusage();
    let time = |tv: libc::timeval| Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// The peak resident set of this process's address space so far, in bytes (`VmHWM` of
/// `/proc/self/status`).
///
/// Not `getrusage`'s `ru_maxrss`: Linux carries that over an `execve` from the address space
/// it replaces, so a child spawned by a large bench process (fork, then exec) reports the
/// parent's resident set as its own peak until it grows past it. `VmHWM` belongs to the
/// address space, which starts empty at the exec.
pub fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM in /proc/self/status");
    kib * 1024
}

fn rusage() -> libc::rusage {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage fills the whole struct for RUSAGE_SELF, and we read it only on success.
    unsafe {
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()), 0);
        usage.assume_init()
    }
}
