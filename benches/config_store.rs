//! Config store size and speed: the four figures of the size contract (docs/performance.md).
//!
//! ```text
//! cargo bench --bench config_store                 # 100k and 1M entries
//! cargo bench --bench config_store -- 250000       # other sizes
//! ```
//!
//! For each size it prints, side by side:
//! - wire: key + value bytes of the surviving records (what the topic holds after compaction);
//! - rss: resident memory the finished store adds to the process, and its ratio to wire;
//! - apply: CPU seconds to bootstrap the store from records already in memory (offer every
//!   record, then decide every survivor), canonical values (the fast path) and pretty-printed
//!   ones (parse and re-encode), and the decode-to-`Config` path an enriching stage takes;
//! - peak: the bootstrap's high-water RSS above the baseline, and its ratio to wire.
//!
//! Memory figures come from a child process per measurement (a fresh heap), reading
//! `/proc/self/status`; records are generated on the fly there so only the store is resident.
//! The log holds 20% superseded records and 2% tombstones, as a live config topic does.

mod support;

use flechtwerk::observer::NoopObserver;
use flechtwerk::testing::ConfigBootstrap;
use flechtwerk::wire::{RaisePolicy, RawRecord};
use flechtwerk::Config;
use support::config_log::{log, wire_bytes};
use support::cpu_time;

#[derive(Clone, Copy, PartialEq)]
enum Path {
    /// Baseline, not the framework: a std `HashMap<String, Vec<u8>>` taking the last write per
    /// key with no decoding at all (what a naive store costs on this machine).
    HashMap,
    /// Values as they are when canonical (a stage without `enrich_config`).
    Unenriched,
    /// Every survivor decoded to a `Config` and re-encoded (what an enriching stage pays).
    Decoded,
}

/// Bootstraps a store from `records`.
fn bootstrap<R: std::borrow::Borrow<RawRecord>>(
    records: impl Iterator<Item = R>,
    path: Path,
) -> flechtwerk::ConfigStore {
    let mut bootstrap =
        if path == Path::Unenriched { ConfigBootstrap::new().without_enrichment() } else { ConfigBootstrap::new() };
    for record in records {
        bootstrap.offer(record.borrow(), &RaisePolicy, &NoopObserver).expect("valid config log");
    }
    match path {
        Path::HashMap => unreachable!("the baseline has its own loop"),
        Path::Unenriched => bootstrap.finish_unenriched(&RaisePolicy, &NoopObserver).expect("valid values"),
        Path::Decoded => {
            while let Some(survivor) = bootstrap.next_survivor() {
                let map = flechtwerk::testing::decode_value_with(&survivor.record, &RaisePolicy, &NoopObserver)
                    .expect("valid value")
                    .expect("raise never skips");
                bootstrap.put(&survivor.key, &Config::wrap(map)).expect("encodable");
            }
            bootstrap.finish()
        }
    }
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    let line = status.lines().find(|l| l.starts_with(field)).expect("field in /proc/self/status");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("a number of kB")
}

/// Child process: bootstrap from a lazily generated log, report RSS and peak deltas in KiB
/// and the store's own accounting in bytes. Nothing else is allocated alongside the store, so
/// the deltas are the store's.
fn measure_memory(entries: u64) {
    let baseline = status_kib("VmRSS:");
    // Reset the high-water mark to the current RSS, so the peak is the bootstrap's own.
    std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM");
    let store = bootstrap(log(entries, false), Path::Unenriched);
    let peak = status_kib("VmHWM:");
    let rss = status_kib("VmRSS:");
    assert_eq!(store.len() as u64, entries);
    println!("{} {} {}", rss - baseline, peak - baseline, store.memory_bytes());
}

fn run_child(entries: u64) -> (u64, u64, u64) {
    let exe = std::env::current_exe().expect("own path");
    let out = std::process::Command::new(exe).arg("--memory-child").arg(entries.to_string()).output().expect("child");
    assert!(out.status.success(), "child failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let numbers: Vec<u64> = text.split_whitespace().map(|v| v.parse().expect("number")).collect();
    (numbers[0] * 1024, numbers[1] * 1024, numbers[2])
}

fn apply_seconds(entries: u64, pretty: bool, path: Path) -> f64 {
    let records: Vec<RawRecord> = log(entries, pretty).collect();
    let started_cpu = cpu_time();
    // By reference: freeing the consumer's records is the consumer's cost, not the store's.
    let len = if path == Path::HashMap {
        let mut map: std::collections::HashMap<String, Vec<u8>> = std::collections::HashMap::new();
        for record in &records {
            let key = std::str::from_utf8(record.key.as_deref().unwrap()).unwrap().to_owned();
            match record.value.as_deref() {
                None | Some(b"") | Some(b"{}") => {
                    map.remove(&key);
                }
                Some(value) => {
                    map.insert(key, value.to_vec());
                }
            }
        }
        map.len()
    } else {
        bootstrap(records.iter(), path).len()
    };
    let cpu = cpu_time() - started_cpu;
    assert_eq!(len as u64, entries);
    cpu.as_secs_f64()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if args.first().map(String::as_str) == Some("--memory-child") {
        measure_memory(args[1].parse().expect("entries"));
        return;
    }
    if args.first().map(String::as_str) == Some("--apply-only") {
        // For profilers: one canonical apply, nothing else.
        println!("{:.3} s", apply_seconds(args[1].parse().expect("entries"), false, Path::Unenriched));
        return;
    }
    let sizes: Vec<u64> = if args.is_empty() {
        vec![100_000, 1_000_000]
    } else {
        args.iter().map(|a| a.parse().expect("entry count")).collect()
    };
    println!("config store: 20-char keys, ~180-byte values; log = entries + 20% rewrites + 2% delete/re-add");
    println!(
        "{:>9} {:>10} {:>10} {:>6} {:>10} {:>6} {:>9} {:>9} {:>9} {:>9}",
        "entries",
        "wire MiB",
        "rss MiB",
        "x wire",
        "peak MiB",
        "x wire",
        "apply s",
        "pretty s",
        "decode s",
        "HashMap s"
    );
    for entries in sizes {
        let (rss, peak, _accounted) = run_child(entries);
        let wire_bytes = wire_bytes(entries);
        let apply = apply_seconds(entries, false, Path::Unenriched);
        let pretty = apply_seconds(entries, true, Path::Unenriched);
        let decoded = apply_seconds(entries, false, Path::Decoded);
        let baseline = apply_seconds(entries, false, Path::HashMap);
        println!(
            "{:>9} {:>10.1} {:>10.1} {:>6.2} {:>10.1} {:>6.2} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
            entries,
            mib(wire_bytes),
            mib(rss),
            rss as f64 / wire_bytes as f64,
            mib(peak),
            peak as f64 / wire_bytes as f64,
            apply,
            pretty,
            decoded,
            baseline
        );
    }
}
