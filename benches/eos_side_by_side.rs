//! The transformer's hot path side by side with Python flechtwerk 0.17 (issue #14) and Kafka
//! Streams 4.4 (issue #38).
//!
//! ```text
//! eval "$(scripts/kafka start | grep '^KAFKA_BOOTSTRAP=')"
//! eval "$(scripts/python-ref | grep '^PYTHON_REF=')"
//! cargo bench --features rdkafka --bench eos_side_by_side -- [--records 100000] [--keys 1000] \
//!     [--partitions 4] [--rounds 3] [--only rust|python|rust-eos2|kstreams|kstreams-defaults|bare|floor|floor-eos2|floor-dr[,...]] \
//!     [--guarantee eos|alos] [--work-us 0] [--max-batch-records N] [--perf DIR]
//! cargo bench --features rdkafka --bench eos_side_by_side -- --smoke   # every implementation, 3 000 inputs
//! cargo bench --features rdkafka --bench eos_side_by_side -- --in-process 20000   # callgrind
//! ```
//!
//! The workload of the issue: a counter transformer (state `seen` += 1; output = the input value
//! plus `seen`, same key) over RECORDS keyed inputs of ~130 bytes (KEYS keys, PARTITIONS
//! partitions), `max_poll_records` 500, exactly-once. The inputs are written once; every run is
//! a fresh application id and output topic on the same broker, so each one reads all inputs from
//! the start. That broker stays up across the runs: after the first, a warm broker. On a broker
//! started afresh for every run the Rust stage's rate ratio and its time to the first output are
//! lower, its CPU ratio the same (docs/performance.md, "Method: a warm broker"): say which one a
//! figure comes from.
//!
//! Each implementation runs as its own child process (Rust: this binary with `--stage-child`;
//! Python: `benches/python/counter_app.py` under `$PYTHON_REF`), alternating which goes first
//! per round. The parent reads the output (read_committed) and, from the child's `/proc/<pid>`,
//! samples its CPU (utime + stime of every thread), peak RSS (VmHWM), threads and sockets. Per
//! run it reports: records/s from the first committed output to the last, CPU µs per record over
//! the whole run, in the steady part (after the first output) and over the second half of the
//! outputs (where a JVM has compiled its hot path), peak RSS, and the time from
//! the child's `run()` call (it prints the instant) to the first committed output, and to every
//! task started (the Rust child reports `tasks_assigned`). Medians over the rounds (the mean of
//! the two middle rounds for an even number) and the ratios (each of ours against each other
//! implementation) close the report. The broker and the parent share the machine with the
//! child: the ratios are the figures to trust, not the absolute ones.
//!
//! `rust-eos2` is the Rust stage with `Producers::PerInstance` (KIP-447: one transactional
//! producer per instance, one transaction per batch); `--only rust,rust-eos2` runs both shapes
//! side by side, alternating, and closes with their ratios.
//!
//! `--max-batch-records N` sets how many records the Rust stage gathers into one batch from the
//! polls made during a commit (TRX-45; `FlechtwerkBuilder::max_batch_records`); without it the
//! stage runs the library's default (four times `max_poll_records`), and `--max-batch-records
//! 500` (= `max_poll_records`) is one poll per batch, as Python does.
//!
//! `kstreams` is Kafka Streams 4.4 running the same counter (`benches/kstreams/CounterApp.java`,
//! built and started by `scripts/kstreams`: a RocksDB key-value store logged to its changelog,
//! `exactly_once_v2` or `at_least_once`, one stream thread) with the settings that differ from
//! ours set to ours (max.poll.records, a commit after every processing pass, zstd, linger.ms 5,
//! batch.size, the fetch sizes, read_committed: the app's header lists them);
//! `kstreams-defaults` is the same app at Kafka Streams' own defaults. Both get a fresh state
//! directory per run (removed afterwards) and stop cleanly when their stdin closes.
//!
//! `--smoke` is the run `scripts/test` makes so that none of the implementations rots: 3 000
//! inputs over 100 keys, one round of `rust,rust-eos2,python,kstreams` (unless `--only` says
//! otherwise), and every output checked: the value is the input with `"seen":N` added (the
//! same bytes from all three implementations), N counting 1, 2, 3... per key.
//!
//! `bare` is the floor under the engine (see `bare_child`): the same adapter and wire work per
//! input without the engine; `--only bare,rust` closes with the ratios of the two. `floor` and
//! `floor-eos2` are librdkafka's own floor, per task and per instance (see `floor_child`): the
//! same wire work through librdkafka's C API, batches from `rd_kafka_consume_batch_queue`,
//! neither our adapter nor the engine. `floor-dr` is `floor` with a delivery report per record
//! (a callback that reads each record's offset, served inside the commit's flush): the part of
//! the adapter's cost that any client awaiting each record's delivery pays.
//!
//! `--in-process N` runs the same stage on the in-process cluster over N inputs and exits: a
//! fixed workload for `valgrind --tool=callgrind` (the difference of two N gives instructions per
//! record without start-up).

#[path = "support/librdkafka_floor.rs"]
mod librdkafka_floor;
mod support;

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flechtwerk::attribute::{Attribute, INT};
use flechtwerk::kafka::rdkafka::RdKafka;
use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, StartOffset, TopicPartition};
use flechtwerk::stage::{transformer, FnTransformer};
use flechtwerk::{Event, Flechtwerk, Guarantee, Message, Producers};

/// The per-key count, in the state and added to every output value (as in counter_app.py).
const SEEN: Attribute<i64> = Attribute::new("seen", &INT);

/// The counter of the issue: the same transform as `benches/python/counter_app.py`.
fn seen_counter(input: &str, output: &str, work: Duration) -> FnTransformer {
    let output = output.to_owned();
    transformer([input]).transform(move |msg, mut state, out| {
        spin(work);
        let seen = state.get(&SEEN)?.unwrap_or(0) + 1;
        let value = match msg.value {
            Some(event) => event.with(&SEEN, seen)?,
            None => Event::new().with(&SEEN, seen)?,
        };
        out.send(Message::new(output.as_str(), msg.key, value));
        state.set(&SEEN, seen)?;
        out.set_state(state);
        Ok(())
    })
}

fn unix_nanos() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos()
}

#[derive(Clone)]
struct Args {
    records: usize,
    keys: usize,
    partitions: u32,
    rounds: usize,
    only: Option<String>,
    guarantee: Guarantee,
    producers: Producers,
    max_poll_records: usize,
    /// `--max-batch-records` (Rust stage only, TRX-45): polls gathered per batch while one commits.
    max_batch_records: Option<usize>,
    /// CPU each transform spins (`--work-us`, Rust only): a stage that does work of its own.
    work: Duration,
    /// `--smoke`: small defaults, every output's bytes checked.
    smoke: bool,
    /// `--kstreams-commit-ms N`: Kafka Streams' `commit.interval.ms` in both of its settings
    /// (without it: the app's choice for `kstreams`, Kafka Streams' default for the other).
    kstreams_commit_ms: Option<usize>,
    /// `--perf DIR`: `perf record` samples each child from its first output to its last one
    /// (`DIR/<run's tag>.data`, the tag ending in `-<impl>-<round>`; call graphs by DWARF
    /// unwinding). The sampling costs the child
    /// CPU of its own: a profiled run's figures are not comparable with an unprofiled one's.
    perf: Option<std::path::PathBuf>,
}

fn flag_value(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .map(|i| args.get(i + 1).unwrap_or_else(|| panic!("{name} needs a value")).clone())
}

fn parse(args: &[String]) -> Args {
    let num = |name: &str, default: usize| flag_value(args, name).map_or(default, |v| v.parse().expect(name));
    let smoke = args.iter().any(|a| a == "--smoke");
    Args {
        records: num("--records", if smoke { 3_000 } else { 100_000 }),
        keys: num("--keys", if smoke { 100 } else { 1_000 }),
        partitions: num("--partitions", 4) as u32,
        rounds: num("--rounds", if smoke { 1 } else { 3 }),
        only: flag_value(args, "--only").or_else(|| smoke.then(|| "rust,rust-eos2,python,kstreams".to_owned())),
        guarantee: match flag_value(args, "--guarantee").as_deref() {
            None | Some("eos") => Guarantee::ExactlyOnce,
            Some("alos") => Guarantee::AtLeastOnce,
            Some(other) => panic!("--guarantee eos|alos, not {other}"),
        },
        producers: match flag_value(args, "--producers").as_deref() {
            None | Some("task") => Producers::PerTask,
            Some("instance") => Producers::PerInstance,
            Some(other) => panic!("--producers task|instance, not {other}"),
        },
        max_poll_records: num("--max-poll-records", 500),
        max_batch_records: flag_value(args, "--max-batch-records").map(|v| v.parse().expect("--max-batch-records")),
        work: Duration::from_micros(num("--work-us", 0) as u64),
        smoke,
        kstreams_commit_ms: flag_value(args, "--kstreams-commit-ms").map(|v| v.parse().expect("--kstreams-commit-ms")),
        perf: flag_value(args, "--perf").map(Into::into),
    }
}

/// An input value of ~130 bytes of canonical JSON.
fn input_value(i: usize, key: &str) -> String {
    format!(
        r#"{{"amount":{},"i":{i},"key":"{key}","note":"a keyed input of about one hundred and thirty bytes, padded","unit":"EUR"}}"#,
        i % 977
    )
}

/// Observer of the Rust child: prints the instant every task has started, and once every
/// task has restored, `RESTORED <records> <start> <last task's restore end>`, `start` being the
/// instant the application was built (the engine reports a task's restore when it ends; a task
/// that reused a current local copy restores only the changelog's tail, often 0 records).
struct Announce {
    partitions: usize,
    /// When the application was built (just before `RUN`).
    started: u128,
    /// Per task restored so far this run: (records, the instant it ended), by partition.
    restored: std::sync::Mutex<BTreeMap<i32, (usize, u128)>>,
}

impl flechtwerk::observer::Observer for Announce {
    fn tasks_assigned(&self, count: usize) {
        if count == self.partitions {
            println!("TASKS {count} {}", unix_nanos());
        }
    }

    fn state_restored(&self, partition: i32, count: usize) {
        let mut restored = self.restored.lock().expect("lock");
        restored.insert(partition, (count, unix_nanos()));
        if restored.len() == self.partitions {
            let records: usize = restored.values().map(|(n, _)| n).sum();
            let last = restored.values().map(|(_, at)| *at).max().unwrap_or_default();
            println!("RESTORED {records} {} {last}", self.started);
        }
    }
}

/// The Kafka adapter of a child (the stage's or the floor's), with the settings the
/// environment asks for.
fn child_kafka(bootstrap: &str) -> RdKafka {
    // BENCH_RDKAFKA_DEBUG=fetch,cgrp: librdkafka's debug contexts (with RUST_LOG=librdkafka=debug).
    let mut settings: BTreeMap<String, String> = std::env::var("BENCH_RDKAFKA_DEBUG")
        .map(|contexts| BTreeMap::from([("debug".to_owned(), contexts)]))
        .unwrap_or_default();
    // BENCH_RDKAFKA_SETTINGS=linger.ms=1,compression.level=1: librdkafka settings of every
    // client of the stage (for trying settings before they become defaults).
    for pair in std::env::var("BENCH_RDKAFKA_SETTINGS").unwrap_or_default().split(',').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').expect("BENCH_RDKAFKA_SETTINGS: key=value,...");
        settings.insert(key.to_owned(), value.to_owned());
    }
    RdKafka::with_settings(bootstrap, settings).expect("settings")
}

/// `--work-us`: the stage's own CPU per record (parsing, enrichment), spun.
fn spin(work: Duration) {
    let until = std::time::Instant::now() + work;
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// The Rust stage process: runs until its stdin closes.
fn stage_child(argv: &[String]) {
    let get = |name: &str| flag_value(argv, name).unwrap_or_else(|| panic!("{name}"));
    let args = parse(argv);
    // RUST_LOG=flechtwerk=debug: the engine's spans on stderr (where the start-up goes).
    support::trace_to_stderr_if_asked();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let result = runtime.block_on(async {
        let kafka: Arc<dyn Kafka> = Arc::new(child_kafka(&get("--bootstrap")));
        let builder = Flechtwerk::builder()
            .application_id(get("--app"))
            .client_id("bench-pod-0")
            .kafka(kafka)
            .replication_factor(1)
            .guarantee(args.guarantee)
            .producers(args.producers)
            .max_poll_records(args.max_poll_records)
            .observer(Arc::new(Announce {
                partitions: args.partitions as usize,
                started: unix_nanos(),
                restored: Default::default(),
            }));
        // A fixed state root (the restore rounds) lets a restart reuse its local copy; without
        // it, the library's default (a fresh temp directory: every start restores in full).
        let builder = match flag_value(argv, "--state-dir") {
            Some(dir) => builder.state_stores(Arc::new(flechtwerk::state::RocksDbStores::new(dir))),
            None => builder,
        };
        // Without the flag, the library's default: what a user who sets nothing runs.
        let builder = match args.max_batch_records {
            Some(records) => builder.max_batch_records(records),
            None => builder,
        };
        let app = builder.build(seen_counter(&get("--input"), &get("--output"), args.work)).expect("settings");
        let stdin_closed = tokio::task::spawn_blocking(|| {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        });
        println!("RUN {}", unix_nanos());
        app.run_until(async {
            let _ = stdin_closed.await;
        })
        .await
    });
    if let Err(error) = result {
        // Exit at once: the runtime would wait for the blocking stdin reader on its way down.
        eprintln!("the stage failed: {error}");
        std::process::exit(1);
    }
    runtime.shutdown_background();
}

/// librdkafka's own floor (`--only floor,floor-eos2`): the same wire work through its C API,
/// neither our adapter nor the engine (benches/support/librdkafka_floor.rs). Exactly-once only.
fn floor_child(argv: &[String]) {
    use std::sync::atomic::AtomicBool;
    let get = |name: &str| flag_value(argv, name).unwrap_or_else(|| panic!("{name}"));
    let args = parse(argv);
    assert!(args.guarantee == Guarantee::ExactlyOnce, "the librdkafka floor is measured exactly-once only");
    let (input, output, app) = (get("--input"), get("--output"), get("--app"));
    let changelog = format!("{app}-changelog");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let kafka = child_kafka(&get("--bootstrap"));
        let topic = NewTopic::new(&changelog, args.partitions).replication(1).compacted();
        kafka.admin().expect("admin").create_topic(&topic).await.expect("changelog");
    });
    drop(runtime);
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::spawn({
        let stop = stop.clone();
        move || {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    println!("RUN {}", unix_nanos());
    let floor = librdkafka_floor::Floor {
        bootstrap: &get("--bootstrap"),
        app: &app,
        input: &input,
        output: &output,
        changelog: &changelog,
        partitions: args.partitions,
        max_poll_records: args.max_poll_records,
        per_instance: args.producers == flechtwerk::Producers::PerInstance,
        reports: argv.iter().any(|a| a == "--delivery-reports"),
    };
    librdkafka_floor::run(&floor, &stop, unix_nanos);
}

/// The floor under the engine (`--only bare`): the same Kafka adapter, the same settings and
/// the same wire work per input (one output record of the input plus `,"seen":N`, one changelog
/// record `{"seen":N}`, the input offsets; one transaction per partition and poll in
/// exactly-once mode, a producer per partition in both modes), but no engine: no JSON parse or
/// encode, no state store, no buckets, counts in a `HashMap`, bytes spliced. What the stage
/// costs beyond this is the engine's own; what this costs is librdkafka, the adapter and the
/// broker's round trips, which no engine work can remove. `--work-us` spins per input as the
/// stage's transform does. No rebalance handling: it runs alone.
fn bare_child(argv: &[String]) {
    use flechtwerk::kafka::{ConsumerConfig, FetchLimits, Rebalance};
    use std::collections::HashMap;
    let get = |name: &str| flag_value(argv, name).unwrap_or_else(|| panic!("{name}"));
    let args = parse(argv);
    let (input, output, app) = (get("--input"), get("--output"), get("--app"));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        let kafka: Arc<dyn Kafka> = Arc::new(child_kafka(&get("--bootstrap")));
        let changelog = format!("{app}-changelog");
        let topic = NewTopic::new(&changelog, args.partitions).replication(1).compacted();
        kafka.admin().expect("admin").create_topic(&topic).await.expect("changelog");
        let mut consumer = kafka
            .consumer(ConsumerConfig {
                fetch_limits: Some(FetchLimits::stage(args.max_poll_records)),
                ..ConsumerConfig::member("bench-pod-0", &app)
            })
            .expect("consumer");
        println!("RUN {}", unix_nanos());
        consumer.subscribe(std::slice::from_ref(&input)).await.expect("subscribe");
        let eos = args.guarantee == Guarantee::ExactlyOnce;
        let mut producers: HashMap<i32, Box<dyn flechtwerk::kafka::Producer>> = HashMap::new();
        let mut seen: HashMap<Vec<u8>, i64> = HashMap::new();
        let (stop_tx, mut stop) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            let _ = stop_tx.send(());
        });
        while stop.try_recv().is_err() {
            let polled = consumer.poll(args.max_poll_records, Duration::from_millis(100)).await.expect("poll");
            for event in polled.rebalances {
                if let Rebalance::Assigned { partitions, .. } = event {
                    for tp in &partitions {
                        let id = format!("{app}-{input}-{}", tp.partition);
                        let config = if eos {
                            ProducerConfig::transactional("bench-pod-0", id)
                        } else {
                            ProducerConfig::idempotent("bench-pod-0")
                        };
                        let producer = kafka.producer(config).expect("producer");
                        if eos {
                            producer.init_transactions().await.expect("init");
                        }
                        producers.insert(tp.partition, producer);
                    }
                    consumer.resume(&partitions).expect("resume");
                    println!("TASKS {} {}", partitions.len(), unix_nanos());
                }
            }
            if polled.records.is_empty() {
                continue;
            }
            let group = consumer.group_metadata().expect("a member");
            let mut by_partition: BTreeMap<i32, Vec<_>> = BTreeMap::new();
            for record in polled.records {
                by_partition.entry(record.partition).or_default().push(record);
            }
            let mut offsets = Vec::new();
            let commits = by_partition.into_iter().map(|(partition, records)| {
                let producer = &producers[&partition];
                let next = records.last().expect("one").offset + 1;
                offsets.push((TopicPartition::new(&input, partition), next));
                let mut outputs = Vec::with_capacity(records.len() * 2);
                for record in records {
                    spin(args.work);
                    let key = record.key.expect("keyed");
                    let count = seen.entry(key.to_vec()).or_insert(0);
                    *count += 1;
                    let mut value = record.value.expect("a value").to_vec();
                    value.pop(); // the closing brace
                    value.extend_from_slice(format!(",\"seen\":{count}}}").as_bytes());
                    outputs.push(ProducerRecord::new(output.as_str(), key.clone(), value));
                    let state = format!("{{\"seen\":{count}}}").into_bytes();
                    outputs.push(ProducerRecord::new(changelog.as_str(), key, state).to_partition(partition));
                }
                let (group, input) = (&group, &input);
                async move {
                    if eos {
                        producer.begin_transaction().await.expect("begin");
                    }
                    let mut deliveries = Vec::with_capacity(outputs.len());
                    for record in outputs {
                        deliveries.push(producer.send(record).await.expect("send"));
                    }
                    let delivered = async {
                        producer.flush().await.expect("flush");
                        for d in deliveries {
                            d.await.expect("delivered");
                        }
                    };
                    if eos {
                        let offsets = [(TopicPartition::new(input, partition), next)];
                        let send_offsets = producer.send_offsets_to_transaction(&offsets, group);
                        let ((), sent) = futures::join!(delivered, send_offsets);
                        sent.expect("send offsets");
                        producer.commit_transaction().await.expect("commit");
                    } else {
                        delivered.await;
                    }
                }
            });
            futures::future::join_all(commits.collect::<Vec<_>>()).await;
            if !eos {
                consumer.commit_offsets(&offsets).await.expect("commit offsets");
            }
        }
        for producer in producers.values() {
            producer.close().await;
        }
        consumer.close().await.expect("close");
    });
    runtime.shutdown_background();
}

/// What `/proc/<pid>` says about a child.
#[derive(Clone, Copy, Default)]
struct Sample {
    cpu: Duration,
    hwm_kib: u64,
    threads: u64,
    sockets: u64,
}

fn sample(pid: u32) -> Sample {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis: utime is field 14, stime 15 (1-based).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0) as f64;
    let cpu = Duration::from_secs_f64((tick(11) + tick(12)) / ticks);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let sockets = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket:")))
                .count() as u64
        })
        .unwrap_or(0);
    Sample { cpu, hwm_kib: field("VmHWM:"), threads: field("Threads:"), sockets }
}

#[derive(Clone, Copy, Default)]
struct Run {
    records_per_s: f64,
    cpu_us_whole: f64,
    cpu_us_steady: f64,
    /// CPU per record over the second half of the outputs (a JVM's JIT has warmed up).
    cpu_us_tail: f64,
    peak_mib: f64,
    first_output_s: f64,
    tasks_started_s: Option<f64>,
    threads: u64,
    sockets: u64,
    /// Threads and sockets when the last output arrived (the steady state: the task starts'
    /// restore consumers are gone).
    threads_end: u64,
    sockets_end: u64,
}

/// Lines the child prints (`RUN <ns>`, `TASKS <n> <ns>`, Kafka Streams' `RESTORED <records>
/// <ns> <ns>`), by first word (`RESTORED`'s as `RESTORED`, `RESTORE_START` and `RESTORE_END`).
fn watch_stdout(child: &mut Child) -> Arc<std::sync::Mutex<BTreeMap<String, u128>>> {
    let seen = Arc::new(std::sync::Mutex::new(BTreeMap::new()));
    let stdout = child.stdout.take().expect("piped stdout");
    let sink = seen.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let words: Vec<&str> = line.split_whitespace().collect();
            if let (Some(&"RUN"), Some(ns)) = (words.first(), words.get(1)) {
                sink.lock().expect("lock").insert("RUN".into(), ns.parse().expect("nanos"));
            } else if let (Some(&"TASKS"), Some(ns)) = (words.first(), words.get(2)) {
                sink.lock().expect("lock").insert("TASKS".into(), ns.parse().expect("nanos"));
            } else if let (Some(&"RESTORED"), [records, start, end]) = (words.first(), words.get(1..).unwrap_or(&[])) {
                let mut sink = sink.lock().expect("lock");
                sink.insert("RESTORED".into(), records.parse().expect("records"));
                sink.insert("RESTORE_START".into(), start.parse().expect("nanos"));
                sink.insert("RESTORE_END".into(), end.parse().expect("nanos"));
            }
        }
    });
    seen
}

/// The command that starts implementation `which` on `input` (its stdout and stdin piped; it
/// stops when its stdin closes, Python on SIGTERM). `state_dir`: Kafka Streams' state directory.
fn stage_command(
    args: &Args,
    which: &str,
    bootstrap: &str,
    input: &str,
    output: &str,
    app: &str,
    state_dir: &std::path::Path,
) -> Command {
    let mut command = match which {
        "rust" | "rust-eos2" | "bare" | "floor" | "floor-eos2" | "floor-dr" => {
            let mut c = Command::new(std::env::current_exe().expect("this binary"));
            c.arg(match which {
                "bare" => "--bare-child",
                "floor" | "floor-eos2" | "floor-dr" => "--floor-child",
                _ => "--stage-child",
            });
            c
        }
        "kstreams" | "kstreams-defaults" => {
            // `run` execs the JVM: the child's pid is the JVM's.
            let mut c = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kstreams"));
            c.arg("run").args(["--client", "bench-pod-0", "--partitions", &args.partitions.to_string()]);
            c.args(["--state-dir".as_ref(), state_dir.as_os_str()]);
            c.args(["--guarantee", if args.guarantee == Guarantee::AtLeastOnce { "alos" } else { "eos" }]);
            c.args(["--settings", if which == "kstreams" { "matched" } else { "defaults" }]);
            if let Some(ms) = args.kstreams_commit_ms {
                c.args(["--commit-interval-ms", &ms.to_string()]);
            }
            c
        }
        "python" => {
            let python = std::env::var("PYTHON_REF").expect("PYTHON_REF (scripts/python-ref prints it)");
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/python/counter_app.py");
            let mut c = Command::new(python);
            c.arg(script).args(["--client", "bench-pod-0", "--announce-run", "--log-level", "WARNING"]);
            c
        }
        other => panic!("--only: no implementation {other}"),
    };
    command
        .args(["--bootstrap", bootstrap, "--input", input, "--output", output, "--app", app])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    if which != "kstreams-defaults" {
        command.args(["--max-poll-records", &args.max_poll_records.to_string()]);
    }
    if which == "rust-eos2" || which == "floor-eos2" {
        command.args(["--producers", "instance"]);
    }
    if which == "floor-dr" {
        command.arg("--delivery-reports");
    }
    if let (Some(batch), "rust" | "rust-eos2") = (args.max_batch_records, which) {
        command.args(["--max-batch-records", &batch.to_string()]);
    }
    if which.starts_with("rust") {
        // The stage's RocksDB root: kept across a restore round's restarts, so a start reuses
        // the copy its previous incarnation left (STO-05) unless the round emptied it.
        command.args(["--state-dir".as_ref(), state_dir.as_os_str()]);
    }
    if which.starts_with("rust") || which == "bare" || which.starts_with("floor") {
        command.args(["--partitions", &args.partitions.to_string()]);
        command.args(["--work-us", &args.work.as_micros().to_string()]);
        if args.guarantee == Guarantee::AtLeastOnce {
            command.args(["--guarantee", "alos"]);
        }
    }
    command
}

/// `--perf`: `perf record` attached to the child `pid`, sampling its CPU (all threads) into
/// `dir/<name>.data` until [`stop_perf`].
fn start_perf(dir: &std::path::Path, name: &str, pid: u32) -> Child {
    std::fs::create_dir_all(dir).expect("the --perf directory");
    let data = dir.join(format!("{name}.data"));
    Command::new("perf")
        .args(["record", "--quiet", "-e", "cpu-clock", "-F", "997", "--call-graph", "dwarf,16384", "-o"])
        .arg(&data)
        .args(["-p", &pid.to_string()])
        .stdout(Stdio::null())
        .spawn()
        .expect("perf (Debian's linux-perf)")
}

/// Ends a [`start_perf`] recording (SIGINT: perf writes its file and exits).
fn stop_perf(mut perf: Child) {
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(perf.id() as i32, libc::SIGINT) };
    let status = perf.wait().expect("wait for perf");
    // perf writes its file on SIGINT and then ends by that signal; interrupted while it still
    // starts up (a restart that reaches its first output in a fraction of a second), it exits
    // with 255 and may leave no usable file: a profile missing, not a failed run.
    let interrupted = std::os::unix::process::ExitStatusExt::signal(&status) == Some(libc::SIGINT);
    if !status.success() && !interrupted {
        eprintln!("perf record: {status} (its profile may be missing)");
    }
}

async fn measure(kafka: &Arc<dyn Kafka>, args: &Args, bootstrap: &str, input: &str, tag: &str, which: &str) -> Run {
    let output = format!("{tag}-output");
    let app = format!("{tag}-app");
    kafka
        .admin()
        .expect("admin")
        .create_topic(&NewTopic::new(&output, args.partitions).replication(1))
        .await
        .expect("create output");
    if args.partitions >= 128 {
        // A changelog of hundreds of partitions created by the stage itself is not led on every
        // partition yet when its tasks restore, and the restore's end_offset fails with
        // NotLeaderForPartition (a finding of this bench, see docs/performance.md): create it
        // here and give the broker time to elect its leaders.
        let changelog = NewTopic::new(format!("{app}-changelog"), args.partitions).replication(1).compacted();
        kafka.admin().expect("admin").create_topic(&changelog).await.expect("create changelog");
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    // The reader asks the broker not to hold an empty fetch for long (librdkafka's default
    // 500 ms would add up to half a second to the first-output figure of both implementations).
    let quick = RdKafka::with_settings(bootstrap, BTreeMap::from([("fetch.wait.max.ms".into(), "10".into())]))
        .expect("reader settings");
    let mut reader = quick.consumer(ConsumerConfig::groupless(format!("{tag}-reader"))).expect("reader");
    let assignment: Vec<_> =
        (0..args.partitions as i32).map(|p| (TopicPartition::new(&output, p), StartOffset::Beginning)).collect();
    // A topic just created may not have its leaders known yet: retry for a while.
    let mut tries = 0;
    while let Err(e) = reader.assign(&assignment).await {
        tries += 1;
        assert!(tries < 50, "assign {output}: {e}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Kafka Streams' state directory: fresh per run, under the temp dir as our stage's RocksDB.
    let state_dir = std::env::temp_dir().join(format!("{tag}-kstreams-state"));
    let mut command = stage_command(args, which, bootstrap, input, &output, &app, &state_dir);
    let mut child = command.spawn().expect("spawn the stage");
    let pid = child.id();
    let events = watch_stdout(&mut child);

    let mut count = 0usize;
    let mut counts: std::collections::HashMap<Vec<u8>, i64> = std::collections::HashMap::new();
    let mut perf = None;
    let mut first: Option<(Instant, u128, usize, Sample)> = None;
    let mut half: Option<(usize, Sample)> = None;
    let mut peak = Sample::default();
    let mut last_sample = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(600);
    while count < args.records {
        assert!(Instant::now() < deadline, "{which}: only {count} outputs after 10 minutes");
        let polled = reader.poll(5_000, Duration::from_millis(100)).await.expect("poll");
        if !polled.records.is_empty() && first.is_none() {
            first = Some((Instant::now(), unix_nanos(), count + polled.records.len(), sample(pid)));
            perf = args.perf.as_deref().map(|dir| start_perf(dir, tag, pid));
        }
        count += polled.records.len();
        if half.is_none() && count >= args.records / 2 {
            half = Some((count, sample(pid)));
        }
        if args.smoke {
            for record in &polled.records {
                check_output(&mut counts, record.key.as_deref(), record.value.as_deref(), which);
            }
        }
        if last_sample.elapsed() > Duration::from_millis(500) {
            let s = sample(pid);
            peak.threads = peak.threads.max(s.threads);
            peak.sockets = peak.sockets.max(s.sockets);
            last_sample = Instant::now();
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{which} stage exited early: {status}");
        }
    }
    let end = Instant::now();
    let last = sample(pid);
    if let Some(perf) = perf {
        stop_perf(perf);
    }
    reader.close().await.expect("close reader");
    // Stop: the Rust and Kafka Streams children on stdin's end, Python on SIGTERM (its clean
    // shutdown path).
    drop(child.stdin.take());
    if which == "python" {
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    }
    let stopped = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if stopped.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = std::fs::remove_dir_all(&state_dir);
    if args.smoke {
        assert_eq!(count, args.records, "{which}: outputs");
        assert_eq!(counts.values().sum::<i64>(), args.records as i64, "{which}: counts");
    }
    let (first_at, first_ns, first_count, first_sample) = first.expect("outputs arrived");
    let events = events.lock().expect("lock").clone();
    let run_ns = *events.get("RUN").expect("the child printed RUN");
    let steady = args.records - first_count;
    Run {
        records_per_s: steady as f64 / (end - first_at).as_secs_f64(),
        cpu_us_whole: last.cpu.as_secs_f64() * 1e6 / args.records as f64,
        cpu_us_steady: (last.cpu - first_sample.cpu).as_secs_f64() * 1e6 / steady.max(1) as f64,
        cpu_us_tail: half
            .map_or(f64::NAN, |(at, s)| (last.cpu - s.cpu).as_secs_f64() * 1e6 / (args.records - at).max(1) as f64),
        peak_mib: last.hwm_kib as f64 / 1024.0,
        first_output_s: (first_ns - run_ns) as f64 / 1e9,
        tasks_started_s: events.get("TASKS").map(|t| (t - run_ns) as f64 / 1e9),
        threads: peak.threads.max(last.threads),
        sockets: peak.sockets.max(last.sockets),
        threads_end: last.threads,
        sockets_end: last.sockets,
    }
}

/// `--smoke`: one output of `which` is the input it answers (`input_value`) with `"seen":N`
/// added in its sorted place (the floors: at the end), N one more than the key's previous
/// output's.
fn check_output(
    counts: &mut std::collections::HashMap<Vec<u8>, i64>,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    which: &str,
) {
    let key = key.unwrap_or_else(|| panic!("{which}: an output without a key"));
    let value = std::str::from_utf8(value.unwrap_or_else(|| panic!("{which}: a tombstone output"))).expect("UTF-8");
    let number = |field: &str| -> i64 {
        let at = value.find(field).unwrap_or_else(|| panic!("{which}: no {field} in {value}")) + field.len();
        let digits: String = value[at..].chars().take_while(char::is_ascii_digit).collect();
        digits.parse().unwrap_or_else(|_| panic!("{which}: {field} of {value}"))
    };
    let seen = counts.entry(key.to_vec()).or_insert(0);
    *seen += 1;
    let key = std::str::from_utf8(key).expect("UTF-8 key");
    let input = input_value(number(r#""i":"#) as usize, key);
    let expected = if which == "bare" || which.starts_with("floor") {
        // The floors splice the count in before the closing brace: bytes, no JSON encoder.
        format!("{},\"seen\":{seen}}}", &input[..input.len() - 1])
    } else {
        input.replacen(r#","unit""#, &format!(r#","seen":{seen},"unit""#), 1)
    };
    assert_eq!(value, expected, "{which}: output of key {key}");
}

/// A summary row: its label, the figure of a run, and whether higher is better.
type Row = (&'static str, fn(&Run) -> f64, bool);

/// The median of the rounds' values (the mean of the two middle ones for an even count).
fn median(values: Vec<f64>) -> f64 {
    support::stats::median(&values)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

async fn side_by_side(args: Args) {
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP").expect("KAFKA_BOOTSTRAP (scripts/kafka start prints it)");
    let kafka: Arc<dyn Kafka> = Arc::new(RdKafka::new(bootstrap.clone()));
    let prefix = format!("sbs-{:x}", unix_nanos());
    let input = format!("{prefix}-input");
    kafka
        .admin()
        .expect("admin")
        .create_topic(&NewTopic::new(&input, args.partitions).replication(1))
        .await
        .expect("input");
    let producer = kafka.producer(ProducerConfig::idempotent("bench-feeder")).expect("producer");
    let mut deliveries = Vec::with_capacity(args.records);
    let mut bytes = 0;
    for i in 0..args.records {
        let key = format!("key-{:04}", i % args.keys);
        let value = input_value(i, &key);
        bytes += key.len() + value.len();
        deliveries.push(producer.send(ProducerRecord::new(&input, key, value)).await.expect("send"));
    }
    for d in deliveries {
        d.await.expect("delivered");
    }
    producer.close().await;

    let which: Vec<&str> = match args.only.as_deref() {
        Some(names) => names.split(',').collect(),
        None => vec!["rust", "python"],
    };
    if which.iter().any(|name| name.starts_with("kstreams")) {
        // Fetch and compile once, before anything is timed (`run` finds it built).
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kstreams");
        let status = Command::new(script).arg("build").status().expect("scripts/kstreams build");
        assert!(status.success(), "scripts/kstreams build: {status}");
    }
    println!(
        "counter (seen += 1, output = input + seen), {} inputs of {:.0} B avg (key + value), {} keys, {} partitions, \
         max_poll_records {}, max_batch_records (Rust) {}, {:?}; load before: {}",
        args.records,
        bytes as f64 / args.records as f64,
        args.keys,
        args.partitions,
        args.max_poll_records,
        args.max_batch_records.map_or_else(|| "the default".to_owned(), |n| n.to_string()),
        args.guarantee,
        load()
    );
    println!(
        "{:<17} {:>5} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8}  load",
        "impl",
        "round",
        "records/s",
        "cpu us/r",
        "steady",
        "2nd half",
        "peak MiB",
        "1st out s",
        "tasks s",
        "threads",
        "sockets",
        "thr end",
        "sock end"
    );
    let mut results: BTreeMap<&str, Vec<Run>> = BTreeMap::new();
    for round in 0..args.rounds {
        let mut order = which.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        for name in order {
            let tag = format!("{prefix}-{name}-{round}");
            let r = measure(&kafka, &args, &bootstrap, &input, &tag, name).await;
            println!(
                "{:<17} {:>5} {:>10.0} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.2} {:>9} {:>8} {:>8} {:>8} {:>8}  {}",
                name,
                round,
                r.records_per_s,
                r.cpu_us_whole,
                r.cpu_us_steady,
                r.cpu_us_tail,
                r.peak_mib,
                r.first_output_s,
                r.tasks_started_s.map_or("-".into(), |t| format!("{t:.2}")),
                r.threads,
                r.sockets,
                r.threads_end,
                r.sockets_end,
                load()
            );
            results.entry(name).or_default().push(r);
        }
    }
    println!("medians of {} rounds:", args.rounds);
    let med = |name: &str, f: fn(&Run) -> f64| results.get(name).map(|runs| median(runs.iter().map(f).collect()));
    let rows: [Row; 6] = [
        ("records/s after the first commit", |r| r.records_per_s, true),
        ("CPU us per record (whole run)", |r| r.cpu_us_whole, false),
        ("CPU us per record (steady)", |r| r.cpu_us_steady, false),
        ("CPU us per record (second half)", |r| r.cpu_us_tail, false),
        ("peak RSS MiB", |r| r.peak_mib, false),
        ("run() -> first committed output s", |r| r.first_output_s, false),
    ];
    print!("{:<36}", "");
    for name in &which {
        print!(" {name:>17}");
    }
    println!();
    for (label, f, _) in rows {
        print!("{label:<36}");
        for name in &which {
            print!(" {:>17}", med(name, f).map_or("-".into(), |v| format!("{v:.2}")));
        }
        println!();
    }
    // Ratios: each of ours against each other implementation; with ours alone, the first named
    // against the others. "A/B" is how many times better A's figure is than B's (above 1: A is
    // better; rates divided, costs inverted).
    let ours = |name: &&&str| name.starts_with("rust") || **name == "bare" || name.starts_with("floor");
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for a in which.iter().filter(|n| ours(n)) {
        for b in which.iter().filter(|n| !ours(n)) {
            pairs.push((a, b));
        }
    }
    if pairs.is_empty() {
        pairs = which.iter().skip(1).map(|b| (which[0], *b)).collect();
    }
    if pairs.is_empty() {
        return;
    }
    print!("{:<36}", "ratios (A/B: A better by)");
    for (a, b) in &pairs {
        print!(" {:>17}", format!("{a}/{b}"));
    }
    println!();
    for (label, f, higher_better) in rows {
        print!("{label:<36}");
        for (a, b) in &pairs {
            let ratio = match (med(a, f), med(b, f)) {
                (Some(a), Some(b)) if higher_better => format!("{:.2}x", a / b),
                (Some(a), Some(b)) => format!("{:.2}x", b / a),
                _ => "-".into(),
            };
            print!(" {ratio:>17}");
        }
        println!();
    }
}

/// One start of a restore round (`--restore`): from the child's `RUN` line.
#[derive(Clone, Copy, Default)]
struct Restart {
    first_output_s: f64,
    tasks_started_s: f64,
    cpu_s: f64,
    peak_mib: f64,
    /// Kafka Streams only: changelog records restored, and the seconds from the first
    /// restoration's start to the last one's end (NaN: none reported).
    restored: f64,
    restore_s: f64,
}

/// Reads `output` (a topic new per start) from the beginning, read_committed, until `n` records
/// arrived; returns the instant of the first and `sample` of the child then.
async fn await_outputs(
    bootstrap: &str,
    output: &str,
    partitions: u32,
    n: usize,
    child: &mut Child,
    which: &str,
) -> (u128, Sample) {
    let quick = RdKafka::with_settings(bootstrap, BTreeMap::from([("fetch.wait.max.ms".into(), "10".into())]))
        .expect("reader settings");
    let mut reader = quick.consumer(ConsumerConfig::groupless(format!("{output}-reader"))).expect("reader");
    let assignment: Vec<_> =
        (0..partitions as i32).map(|p| (TopicPartition::new(output, p), StartOffset::Beginning)).collect();
    let mut tries = 0;
    while let Err(e) = reader.assign(&assignment).await {
        tries += 1;
        assert!(tries < 50, "assign {output}: {e}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (mut count, mut first) = (0, None);
    let deadline = Instant::now() + Duration::from_secs(1200);
    while count < n {
        assert!(Instant::now() < deadline, "{which}: only {count} of {n} outputs after 20 minutes");
        let polled = reader.poll(5_000, Duration::from_millis(100)).await.expect("poll");
        if !polled.records.is_empty() && first.is_none() {
            first = Some((unix_nanos(), sample(child.id())));
        }
        count += polled.records.len();
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{which} stage exited early: {status}");
        }
    }
    reader.close().await.expect("close reader");
    first.expect("outputs")
}

/// Waits until `child` exits (killed after 60 s).
async fn reap(child: &mut Child) {
    let stopped = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if stopped.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `--restore N`: one round of `which` over an input of N keys (one record each): the state
/// built by a first run, then three restarts on the same application id, each with 1 000 new
/// inputs written before it starts: (a) after a clean stop, on the same state directory; (b)
/// after a SIGKILL of a running instance, on the same state directory; (c) after a clean stop,
/// on an empty state directory. Each output topic is new per start, so "first output" is the
/// first of that start.
async fn restore_round(
    kafka: &Arc<dyn Kafka>,
    args: &Args,
    bootstrap: &str,
    input: &str,
    tag: &str,
    which: &str,
) -> [Restart; 3] {
    let app = format!("{tag}-app");
    let state_dir = std::env::temp_dir().join(format!("{tag}-kstreams-state"));
    let producer = kafka.producer(ProducerConfig::idempotent("bench-feeder")).expect("producer");
    let mut fed = args.records;
    let start = |output: &str| {
        let mut command = stage_command(args, which, bootstrap, input, output, &app, &state_dir);
        let mut child = command.spawn().expect("spawn the stage");
        let events = watch_stdout(&mut child);
        (child, events)
    };
    let new_output = |phase: &str| format!("{tag}-{phase}-output");
    let create = |output: String| async move {
        kafka
            .admin()
            .expect("admin")
            .create_topic(&NewTopic::new(&output, args.partitions).replication(1))
            .await
            .expect("create output");
        output
    };
    // The first run: every key counted once, the state built.
    let output = create(new_output("load")).await;
    let (mut child, _) = start(&output);
    let loaded = Instant::now();
    await_outputs(bootstrap, &output, args.partitions, args.records, &mut child, which).await;
    eprintln!("{which}: {} keys loaded in {:.1} s", args.records, loaded.elapsed().as_secs_f64());
    drop(child.stdin.take());
    reap(&mut child).await;
    let mut results = [Restart::default(); 3];
    for (phase, result) in ["clean", "kill", "empty"].into_iter().zip(results.iter_mut()) {
        if phase == "empty" {
            let _ = std::fs::remove_dir_all(&state_dir);
        }
        const NEW: usize = 1_000;
        let mut deliveries = Vec::with_capacity(NEW);
        for i in fed..fed + NEW {
            let key = format!("key-{:07}", i % args.keys);
            let record = ProducerRecord::new(input, key.clone(), input_value(i, &key));
            deliveries.push(producer.send(record).await.expect("send"));
        }
        for d in deliveries {
            d.await.expect("delivered");
        }
        fed += NEW;
        let output = create(new_output(phase)).await;
        let (mut child, events) = start(&output);
        let (first_ns, at_first) = await_outputs(bootstrap, &output, args.partitions, NEW, &mut child, which).await;
        let events = events.lock().expect("lock").clone();
        let run_ns = *events.get("RUN").expect("the child printed RUN");
        *result = Restart {
            first_output_s: (first_ns - run_ns) as f64 / 1e9,
            tasks_started_s: events.get("TASKS").map_or(f64::NAN, |t| (t - run_ns) as f64 / 1e9),
            cpu_s: at_first.cpu.as_secs_f64(),
            peak_mib: at_first.hwm_kib as f64 / 1024.0,
            restored: events.get("RESTORED").map_or(f64::NAN, |&n| n as f64),
            restore_s: match (events.get("RESTORE_START"), events.get("RESTORE_END")) {
                (Some(start), Some(end)) => (end - start) as f64 / 1e9,
                _ => f64::NAN,
            },
        };
        eprintln!(
            "{which} {phase}: first output {:.2} s, tasks {:.2} s, cpu {:.2} s, peak {:.0} MiB, restored {} in {:.2} s ({})",
            result.first_output_s,
            result.tasks_started_s,
            result.cpu_s,
            result.peak_mib,
            result.restored,
            result.restore_s,
            load()
        );
        if phase == "clean" {
            // The next start follows a crash of a running instance.
            child.kill().expect("SIGKILL");
            let _ = child.wait();
        } else {
            drop(child.stdin.take());
            reap(&mut child).await;
        }
    }
    producer.close().await;
    let _ = std::fs::remove_dir_all(&state_dir);
    results
}

/// `--restore N`: the restart comparison of issue 35 (see `restore_round`), alternating the
/// implementations of `--only` (default `kstreams`) per round; medians.
async fn restore(args: Args) {
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP").expect("KAFKA_BOOTSTRAP (scripts/kafka start prints it)");
    let kafka: Arc<dyn Kafka> = Arc::new(RdKafka::new(bootstrap.clone()));
    let prefix = format!("restore-{:x}", unix_nanos());
    let input = format!("{prefix}-input");
    kafka
        .admin()
        .expect("admin")
        .create_topic(&NewTopic::new(&input, args.partitions).replication(1))
        .await
        .expect("input");
    let producer = kafka.producer(ProducerConfig::idempotent("bench-feeder")).expect("producer");
    let mut deliveries = std::collections::VecDeque::new();
    for i in 0..args.records {
        let key = format!("key-{:07}", i % args.keys);
        deliveries.push_back(
            producer.send(ProducerRecord::new(&input, key.clone(), input_value(i, &key))).await.expect("send"),
        );
        if deliveries.len() > 100_000 {
            deliveries.pop_front().expect("one").await.expect("delivered");
        }
    }
    for d in deliveries {
        d.await.expect("delivered");
    }
    producer.close().await;
    let which: Vec<&str> = args.only.as_deref().unwrap_or("kstreams").split(',').collect();
    if which.iter().any(|name| name.starts_with("kstreams")) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kstreams");
        let status = Command::new(script).arg("build").status().expect("scripts/kstreams build");
        assert!(status.success(), "scripts/kstreams build: {status}");
    }
    println!(
        "restarts over a state of {} keys ({} inputs, {} partitions, {:?}), 1 000 new inputs before each start; load before: {}",
        args.keys,
        args.records,
        args.partitions,
        args.guarantee,
        load()
    );
    let mut results: BTreeMap<&str, Vec<[Restart; 3]>> = BTreeMap::new();
    for round in 0..args.rounds {
        let mut order = which.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        for name in order {
            let r = restore_round(&kafka, &args, &bootstrap, &input, &format!("{prefix}-{name}-{round}"), name).await;
            results.entry(name).or_default().push(r);
        }
    }
    println!(
        "medians of {} rounds: run()/start() -> first committed output s (-> all tasks running s; CPU s; peak RSS \
         MiB, both until the first output; Kafka Streams: changelog records restored in s)",
        args.rounds
    );
    println!("{:<17} {:>44} {:>44} {:>44}", "impl", "(a) clean restart", "(b) after SIGKILL", "(c) empty state dir");
    for name in &which {
        let runs = &results[name];
        print!("{name:<17}");
        for phase in 0..3 {
            let med = |f: fn(&Restart) -> f64| median(runs.iter().map(|r| f(&r[phase])).collect());
            let restored = match (med(|r| r.restored), med(|r| r.restore_s)) {
                (n, s) if n.is_nan() || s.is_nan() => "-".to_owned(),
                (n, s) => format!("{n:.0} in {s:.2}"),
            };
            let cell = format!(
                "{:.2} ({:.2}; {:.1}; {:.0}; {restored})",
                med(|r| r.first_output_s),
                med(|r| r.tasks_started_s),
                med(|r| r.cpu_s),
                med(|r| r.peak_mib)
            );
            print!(" {cell:>44}");
        }
        println!();
    }
}

/// A fixed in-process workload for callgrind: the same stage on the simulated cluster.
async fn in_process(records: usize, keys: usize) {
    use flechtwerk_sim::cluster::LocalCluster;
    let kafka: Arc<dyn Kafka> = Arc::new(LocalCluster::new());
    let admin = kafka.admin().expect("admin");
    admin.create_topic(&NewTopic::new("in", 4)).await.expect("input");
    admin.create_topic(&NewTopic::new("out", 4)).await.expect("output");
    let producer = kafka.producer(ProducerConfig::idempotent("feeder")).expect("producer");
    for i in 0..records {
        let key = format!("key-{:04}", i % keys);
        let value = input_value(i, &key);
        producer.send(ProducerRecord::new("in", key, value)).await.expect("send").await.expect("delivered");
    }
    let app = Flechtwerk::builder()
        .application_id("callgrind")
        .client_id("pod-0")
        .kafka(kafka.clone())
        .max_poll_records(500)
        .build(seen_counter("in", "out", Duration::ZERO))
        .expect("settings");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let probe = kafka.clone();
    let watcher = tokio::spawn(async move {
        loop {
            let mut consumer = probe.consumer(ConsumerConfig::groupless("probe")).expect("consumer");
            let mut total = 0;
            for p in 0..4 {
                total += consumer.end_offset(&TopicPartition::new("out", p)).await.expect("end") as usize;
            }
            // Transaction markers take offsets too: enough once the outputs alone could fill it.
            if total >= records {
                let partitions: Vec<_> = (0..4).map(|p| TopicPartition::new("out", p)).collect();
                let mut n = 0;
                flechtwerk::testing::read_to_end(consumer.as_mut(), &partitions, |_| {
                    n += 1;
                    Ok::<(), std::convert::Infallible>(())
                })
                .await
                .expect("read");
                if n >= records {
                    let _ = stop.send(());
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let started = Instant::now();
    let cpu = support::cpu_time();
    app.run_until(async { stopped.await.unwrap_or(()) }).await.expect("run");
    watcher.await.expect("watcher");
    println!(
        "in-process: {records} records in {:.2} s, {:.1} us CPU per record (this process, broker included)",
        started.elapsed().as_secs_f64(),
        (support::cpu_time() - cpu).as_secs_f64() * 1e6 / records as f64
    );
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.iter().any(|a| a == "--stage-child") {
        return stage_child(&argv);
    }
    if argv.iter().any(|a| a == "--bare-child") {
        return bare_child(&argv);
    }
    if argv.iter().any(|a| a == "--floor-child") {
        return floor_child(&argv);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    if let Some(n) = flag_value(&argv, "--in-process") {
        let keys = flag_value(&argv, "--keys").map_or(1_000, |k| k.parse().expect("keys"));
        return runtime.block_on(in_process(n.parse().expect("a record count"), keys));
    }
    // `cargo bench` passes --bench; everything else is ours.
    if argv.iter().any(|a| a == "--restore") {
        return runtime.block_on(restore(parse(&argv)));
    }
    runtime.block_on(side_by_side(parse(&argv)));
}
