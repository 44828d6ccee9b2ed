//! Config bootstrap from a real broker, side by side with Python flechtwerk 0.17 (issue 17).
//!
//! ```text
//! set -a; eval "$(scripts/kafka start)"; eval "$(scripts/python-ref | grep '^PYTHON_REF=')"; set +a
//! cargo bench --features rdkafka --bench config_boot                       # 100k and 1M, 3 runs each
//! cargo bench --features rdkafka --bench config_boot -- 10000000 --runs 1  # Rust only above 1M
//! ```
//!
//! What an operator sees when an instance starts: one compacted config topic (4 partitions,
//! zstd, written by a Flechtwerk producer) holding the log of `benches/support/config_log.rs`
//! (20-character keys, ~180-byte canonical values; every key once, 20% rewrites, 2% deleted and
//! written again, so the boot reads 1.22 records per entry), and a transformer started with that
//! config topic, timed from `run()` until its config store is restored. The broker never
//! cleans the topic (`min.compaction.lag.ms` of ten years): every run reads the same records.
//!
//! Each run is a child process of its own, alternating Rust and Python (`$PYTHON_REF
//! benches/python/config_boot.py`, the real `Flechtwerk.of(...).run()` of flechtwerk 0.17.0
//! with a transformer whose enter hook, the first stage code after the bootstrap, takes the
//! figures). The child reports, at the moment the store is restored:
//! - wall: seconds since it called `run()`;
//! - cpu: user + system seconds of the child since then (`getrusage`: every thread of the
//!   child, librdkafka's included; the broker's CPU is not counted);
//! - peak: the child's peak resident set (`VmHWM`; not `ru_maxrss`, which Linux carries over
//!   the exec from the bench process the child was forked from), absolute (the "base" column is its
//!   resident set when it called `run()`), and its ratio to the wire size (keys + values of the
//!   surviving records: what the compacted topic holds).
//!
//! The Rust child also prints a digest of its store (every key and canonical value), which must
//! equal the digest of the generated log's compacted content: the boot is checked for
//! correctness on every run, not only timed. (Python's store is checked by its entry count.)
//!
//! The medians of the runs (3 by default) are printed per implementation (`--python-runs N`:
//! Python only in the first N rounds, for a loaded machine where one Python run at 1M takes
//! minutes). Python runs only up to
//! `--python-max` entries (default 1 000 000: at 10 M it would need ~10 minutes and ~23 GiB per
//! run); `--no-python` skips it; `--breakdown` prints, under each Rust run, where the child's
//! resident memory is when its store is restored (`/proc/self/smaps` by mapping). Figures are printed, never asserted: docs/performance.md holds
//! them.
//!
//! The topic is produced once per size and reused by later invocations (it is named after the
//! size and this generator's version); a topic left half-written by an interrupted run is
//! refused with its name.

mod support;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flechtwerk::kafka::rdkafka::RdKafka;
use flechtwerk::kafka::{
    ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, TopicCreation, TopicPartition,
};
use flechtwerk::observer::{ConfigView, Observer};
use flechtwerk::{transformer, Flechtwerk};
use support::config_log::{key, log, log_len, value, wire_bytes, Rng};
use support::{cpu_time, peak_rss_bytes};

const PARTITIONS: u32 = 4;
/// Bumped whenever the generated log changes, so an old topic is never mistaken for the new one.
const LOG_VERSION: u32 = 1;
const PYTHON_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/python/config_boot.py");
/// Ten years: the cleaner leaves every record where it is.
const NEVER_COMPACT_MS: &str = "315360000000";

fn config_topic(entries: u64) -> String {
    format!("flechtwerk-config-boot-v{LOG_VERSION}-{entries}")
}

const INPUT_TOPIC: &str = "flechtwerk-config-boot-input";

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    let line = status.lines().find(|l| l.starts_with(field)).expect("field in /proc/self/status");
    line.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()).expect("a number of kB") * 1024
}

// ---------------------------------------------------------------------------------------------
// Parent: the topics, the runs, the table

/// Creates the config topic and writes the log into it, unless a complete one exists.
async fn ensure_topic(kafka: &dyn Kafka, entries: u64) -> String {
    let topic = config_topic(entries);
    let admin = kafka.admin().expect("admin");
    admin.create_topic(&NewTopic::new(INPUT_TOPIC, PARTITIONS).replication(1)).await.expect("create the input topic");
    let spec =
        NewTopic::new(&topic, PARTITIONS).replication(1).compacted().config("min.compaction.lag.ms", NEVER_COMPACT_MS);
    let created = admin.create_topic(&spec).await.expect("create the config topic");
    let want = log_len(entries) as i64;
    if created == TopicCreation::AlreadyExists {
        let mut consumer = kafka.consumer(ConsumerConfig::groupless("config-boot-check")).expect("consumer");
        let mut have = 0;
        for p in 0..PARTITIONS as i32 {
            have += consumer.end_offset(&TopicPartition::new(&topic, p)).await.expect("end offset");
        }
        consumer.close().await.expect("close");
        assert!(
            have == want || have == 0,
            "topic {topic} holds {have} records, not {want}: an earlier run was interrupted while writing it; \
             delete it (scripts/kafka tool kafka.admin.TopicCommand --bootstrap-server … --delete --topic {topic}) \
             or use a fresh broker"
        );
        if have == want {
            println!("topic {topic}: {want} records, written earlier");
            return topic;
        }
    }
    let started = Instant::now();
    let producer = kafka.producer(ProducerConfig::idempotent("config-boot-writer")).expect("producer");
    let mut rng = Rng(0x5eed);
    let (updates, deletes) = (entries / 5, entries / 50);
    let mut deliveries = Vec::new();
    for offset in 0..log_len(entries) {
        // The generator of `support::config_log::log`, placed by key as a producer places it.
        let (n, tombstone) = if offset < entries {
            (offset, false)
        } else if offset < entries + updates {
            (rng.next() % entries, false)
        } else if offset < entries + updates + deletes {
            (offset - entries - updates, true)
        } else {
            (offset - entries - updates - deletes, false)
        };
        let mut record = ProducerRecord::new(&topic, key(n), Vec::new());
        record.value = if tombstone { None } else { Some(value(&mut rng, n, false).into()) };
        deliveries.push(producer.send(record).await.expect("send"));
        if deliveries.len() >= 100_000 {
            for d in deliveries.drain(..) {
                d.await.expect("delivered");
            }
        }
    }
    for d in deliveries {
        d.await.expect("delivered");
    }
    producer.flush().await.expect("flush");
    producer.close().await;
    println!("topic {topic}: {want} records written in {:.1} s", started.elapsed().as_secs_f64());
    topic
}

/// One entry's share of a store digest: order-independent when summed (SipHash with fixed keys,
/// the same in every process).
fn entry_digest(key: &[u8], value: &[u8]) -> u64 {
    use std::hash::Hasher as _;
    #[allow(deprecated)]
    let mut hasher = std::hash::SipHasher::new();
    hasher.write(key);
    hasher.write_u8(0xff);
    hasher.write(value);
    hasher.finish()
}

/// The digest of the topic's compacted content: the last value of every key not deleted.
fn expected_digest(entries: u64) -> u64 {
    let mut latest = vec![0u64; entries as usize];
    for record in log(entries, false) {
        let key = record.key.as_deref().expect("keyed");
        let n: usize = std::str::from_utf8(&key[7..]).expect("ascii").parse().expect("number");
        latest[n] = record.value.as_deref().map_or(0, |value| entry_digest(key, value));
    }
    latest.iter().fold(0u64, |sum, d| sum.wrapping_add(*d))
}

#[derive(Clone, Copy, Debug)]
struct Figures {
    wall: f64,
    cpu: f64,
    peak: u64,
    base: u64,
}

fn parse_result(out: &std::process::Output, entries: u64, what: &str, digest: Option<u64>) -> Figures {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what} child failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("{what} child printed no RESULT line:\n{stdout}"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    let restored: u64 = fields[4].parse().expect("entries");
    assert_eq!(restored, entries, "{what} restored {restored} entries, the topic holds {entries}");
    // The Rust child also reports a digest of the store: it must equal the compacted topic's.
    if let (Some(expected), Some(got)) = (digest, fields.get(5)) {
        let got = u64::from_str_radix(got, 16).expect("digest");
        assert_eq!(got, expected, "{what}'s store differs from the topic's compacted content");
    }
    Figures {
        wall: fields[0].parse().expect("wall"),
        cpu: fields[1].parse().expect("cpu"),
        peak: fields[2].parse().expect("peak"),
        base: fields[3].parse().expect("base"),
    }
}

fn run_rust(bootstrap: &str, topic: &str, entries: u64, digest: u64, breakdown: bool) -> Figures {
    let exe = std::env::current_exe().expect("own path");
    let mut command = Command::new(exe);
    command.args(["--child", bootstrap, topic, &format!("config-boot-rust-{entries}")]);
    if breakdown {
        command.arg("--breakdown");
    }
    let out = command.output().expect("spawn the Rust child");
    if breakdown {
        for line in String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.strip_prefix("BREAKDOWN ")) {
            println!("    {line}");
        }
    }
    parse_result(&out, entries, "Rust", Some(digest))
}

fn run_python(python: &str, bootstrap: &str, topic: &str, entries: u64) -> Figures {
    let out = Command::new(python)
        .args([
            PYTHON_SCRIPT,
            "--bootstrap",
            bootstrap,
            "--config-topic",
            topic,
            "--input-topic",
            INPUT_TOPIC,
            "--app",
            &format!("config-boot-python-{entries}"),
        ])
        .output()
        .expect("spawn the Python child");
    parse_result(&out, entries, "Python", None)
}

fn median(values: Vec<f64>) -> f64 {
    support::stats::median(&values)
}

fn print_row(label: &str, f: &Figures, wire: u64) {
    println!(
        "{label:<14} {:>8.2} {:>8.2} {:>9.1} {:>7.2} {:>9.1}",
        f.wall,
        f.cpu,
        mib(f.peak),
        f.peak as f64 / wire as f64,
        mib(f.base)
    );
}

fn parent(args: &[String]) {
    let mut sizes = Vec::new();
    let mut runs = 3;
    let mut python_max = 1_000_000;
    let mut python_runs = usize::MAX;
    let mut breakdown = false;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--runs" => runs = iter.next().and_then(|v| v.parse().ok()).expect("--runs N"),
            "--python-max" => python_max = iter.next().and_then(|v| v.parse().ok()).expect("--python-max N"),
            "--no-python" => python_max = 0,
            "--breakdown" => breakdown = true,
            "--python-runs" => python_runs = iter.next().and_then(|v| v.parse().ok()).expect("--python-runs N"),
            other => sizes.push(other.parse::<u64>().unwrap_or_else(|_| panic!("not an entry count: {other}"))),
        }
    }
    if sizes.is_empty() {
        sizes = vec![100_000, 1_000_000];
    }
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP").expect("KAFKA_BOOTSTRAP (scripts/kafka start prints it)");
    let python = std::env::var("PYTHON_REF").ok().filter(|p| !p.is_empty());
    if python.is_none() && python_max > 0 {
        println!("PYTHON_REF is not set (scripts/python-ref prints it): Rust only");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let kafka: Arc<dyn Kafka> = Arc::new(RdKafka::new(bootstrap.clone()));
    for entries in sizes {
        let topic = runtime.block_on(ensure_topic(&*kafka, entries));
        let wire = wire_bytes(entries);
        let digest = expected_digest(entries);
        let with_python = python.as_deref().filter(|_| entries <= python_max);
        println!(
            "\nconfig bootstrap: {entries} entries, {} records on {PARTITIONS} partitions (zstd), wire {:.1} MiB; \
             {runs} run(s) per implementation, alternating",
            log_len(entries),
            mib(wire)
        );
        println!("{:<14} {:>8} {:>8} {:>9} {:>7} {:>9}", "run", "wall s", "cpu s", "peak MiB", "x wire", "base MiB");
        let mut results: BTreeMap<&str, Vec<Figures>> = BTreeMap::new();
        for run in 1..=runs {
            let rust = run_rust(&bootstrap, &topic, entries, digest, breakdown);
            print_row(&format!("rust #{run}"), &rust, wire);
            results.entry("rust").or_default().push(rust);
            if let Some(python) = with_python.filter(|_| run <= python_runs) {
                let py = run_python(python, &bootstrap, &topic, entries);
                print_row(&format!("python #{run}"), &py, wire);
                results.entry("python").or_default().push(py);
            }
        }
        let medians: BTreeMap<&str, Figures> = results
            .iter()
            .map(|(name, figures)| {
                let m = |f: fn(&Figures) -> f64| median(figures.iter().map(f).collect());
                let figures = Figures {
                    wall: m(|f| f.wall),
                    cpu: m(|f| f.cpu),
                    peak: m(|f| f.peak as f64) as u64,
                    base: m(|f| f.base as f64) as u64,
                };
                (*name, figures)
            })
            .collect();
        for (name, figures) in &medians {
            print_row(&format!("{name} median"), figures, wire);
        }
        if let (Some(rust), Some(py)) = (medians.get("rust"), medians.get("python")) {
            println!(
                "python / rust: wall {:.1}x, cpu {:.1}x, peak {:.1}x",
                py.wall / rust.wall,
                py.cpu / rust.cpu,
                py.peak as f64 / rust.peak as f64
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Child: one boot

/// Takes the figures when the store is restored, then asks the application to stop.
struct Restored {
    started: Instant,
    cpu_start: Duration,
    figures: Mutex<Option<(Figures, usize)>>,
    /// `--breakdown`: where the resident memory is when the store is restored.
    breakdown: Option<Mutex<Vec<String>>>,
    /// The digest of the store as first updated (right after the figures are taken).
    digest: Mutex<Option<u64>>,
    stop: tokio::sync::Notify,
}

impl Observer for Restored {
    fn config_store_restored(&self, count: usize) {
        let figures = Figures {
            wall: self.started.elapsed().as_secs_f64(),
            cpu: (cpu_time() - self.cpu_start).as_secs_f64(),
            peak: peak_rss_bytes(),
            base: 0,
        };
        *self.figures.lock().expect("lock") = Some((figures, count));
        if let Some(breakdown) = &self.breakdown {
            *breakdown.lock().expect("lock") = memory_breakdown();
        }
        self.stop.notify_one();
    }

    fn config_store_updated(&self, store: &dyn ConfigView) {
        let mut digest = self.digest.lock().expect("lock");
        if digest.is_none() {
            let mut sum = 0u64;
            store.for_each_entry(&mut |key, value| sum = sum.wrapping_add(entry_digest(key.as_bytes(), value)));
            *digest = Some(sum);
        }
    }
}

/// The resident memory of this process by mapping (`/proc/self/smaps`): file-backed mappings by
/// file, anonymous ones of 1 MiB or more one by one (their size and resident part), the rest
/// summed; and the status lines of the totals.
fn memory_breakdown() -> Vec<String> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("Linux /proc");
    let mut files: BTreeMap<String, u64> = BTreeMap::new();
    let mut large_anon: Vec<(u64, u64, String)> = Vec::new();
    let (mut small_anon, mut small_count) = (0u64, 0usize);
    let mut current: Option<(u64, String)> = None;
    let mut flush = |current: Option<(u64, String)>, rss: u64| {
        let Some((size, name)) = current else { return };
        if name.starts_with('/') {
            let file = name.rsplit('/').next().unwrap_or(&name).to_owned();
            *files.entry(file).or_default() += rss;
        } else if rss >= 1 << 20 {
            large_anon.push((rss, size, name));
        } else {
            small_anon += rss;
            small_count += 1;
        }
    };
    let mut rss = 0;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or_default();
        if let Some((start, end)) = first.split_once('-').filter(|(a, b)| {
            !a.is_empty() && a.bytes().all(|c| c.is_ascii_hexdigit()) && b.bytes().all(|c| c.is_ascii_hexdigit())
        }) {
            flush(current.take(), rss);
            rss = 0;
            let size = u64::from_str_radix(end, 16).unwrap_or(0) - u64::from_str_radix(start, 16).unwrap_or(0);
            let name = fields.nth(4).unwrap_or("[anon]").to_owned();
            current = Some((size, name));
        } else if first == "Rss:" {
            rss = fields.next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) * 1024;
        }
    }
    flush(current.take(), rss);
    let mut lines = Vec::new();
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    for field in ["VmHWM:", "VmRSS:", "RssAnon:", "RssFile:"] {
        if let Some(line) = status.lines().find(|l| l.starts_with(field)) {
            lines.push(line.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    let mut files: Vec<(u64, String)> = files.into_iter().map(|(name, rss)| (rss, name)).collect();
    files.sort_unstable_by(|a, b| b.cmp(a));
    let file_total: u64 = files.iter().map(|(rss, _)| rss).sum();
    lines.push(format!("file-backed {:.1} MiB:", mib(file_total)));
    for (rss, name) in files.iter().filter(|(rss, _)| *rss >= 256 << 10) {
        lines.push(format!("  {:>7.1} MiB {name}", mib(*rss)));
    }
    large_anon.sort_unstable_by(|a, b| b.cmp(a));
    let anon_total: u64 = large_anon.iter().map(|(rss, _, _)| rss).sum::<u64>() + small_anon;
    lines.push(format!("anonymous {:.1} MiB:", mib(anon_total)));
    for (rss, size, name) in &large_anon {
        lines.push(format!("  {:>7.1} MiB of a {:.1} MiB mapping {name}", mib(*rss), mib(*size)));
    }
    lines.push(format!("  {:>7.1} MiB in {small_count} mappings under 1 MiB resident each", mib(small_anon)));
    lines
}

fn child(bootstrap: &str, topic: &str, app_id: &str, breakdown: bool) {
    // RUST_LOG=flechtwerk=debug: the bootstrap's spans and its store's footprint on stderr.
    support::trace_to_stderr_if_asked();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let kafka: Arc<dyn Kafka> = Arc::new(RdKafka::new(bootstrap));
        let stage = transformer([INPUT_TOPIC]).config_topics([topic]).transform(|_, _, _| Ok(()));
        let base = status_bytes("VmRSS:");
        let restored = Arc::new(Restored {
            started: Instant::now(),
            cpu_start: cpu_time(),
            figures: Mutex::new(None),
            breakdown: breakdown.then(Mutex::default),
            digest: Mutex::new(None),
            stop: tokio::sync::Notify::new(),
        });
        let app = Flechtwerk::builder()
            .application_id(app_id)
            .client_id("boot-0")
            .kafka(kafka)
            .replication_factor(1)
            .observer(restored.clone())
            .build(stage)
            .expect("settings");
        // The clock started above: building the handle is part of it, as in Python.
        app.run_until(restored.stop.notified()).await.expect("run");
        let (mut figures, count) = restored.figures.lock().expect("lock").take().expect("the store was restored");
        figures.base = base;
        let digest = restored.digest.lock().expect("lock").expect("the store was reported");
        if let Some(breakdown) = &restored.breakdown {
            for line in breakdown.lock().expect("lock").iter() {
                println!("BREAKDOWN {line}");
            }
        }
        println!(
            "RESULT {:.3} {:.3} {} {} {count} {digest:016x}",
            figures.wall, figures.cpu, figures.peak, figures.base
        );
    });
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if args.first().map(String::as_str) == Some("--child") {
        child(&args[1], &args[2], &args[3], args.get(4).map(String::as_str) == Some("--breakdown"));
        return;
    }
    parent(&args);
}
