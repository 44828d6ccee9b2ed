//! What the Prometheus observer costs: the counting transformer on the in-process cluster with
//! metrics on (`metrics(Metrics::unserved())`, every `flechtwerk_*` metric kept, labels
//! `app`/`pod`) and with metrics off (the no-op observer), side by side in one run.
//!
//! ```text
//! cargo bench --features prometheus --bench metrics_overhead [-- RECORDS] [--rounds N] [--only noop|prometheus]
//! ```
//!
//! Each round writes RECORDS inputs (default 50 000, 100 keys, 4 partitions, batches of 500)
//! to a fresh cluster and runs the counter over them until every input was transformed and
//! its batch committed; it reports this process's CPU time per record (user + system: the
//! engine, the simulated broker and, with metrics on, every hook's metric update; the input
//! writes are outside the measurement) for each variant, alternating which goes first. Then the
//! observer alone: the hooks a transformer calls per record (`message_in_bytes`,
//! `message_in`, `message_processed`, `message_out`, `message_out_bytes`), a million times.
//!
//! `--only VARIANT --rounds 1` runs one variant once, for instruction counts:
//! `valgrind --tool=callgrind <bench binary> 4000 --only noop`, and again with 8000; the
//! difference over 4000 is the instructions per record (docs/performance.md).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
use flechtwerk::observer::prometheus::{Metrics, PrometheusObserver};
use flechtwerk::observer::Observer;
use flechtwerk::{transformer, Event, Flechtwerk, Message};
use flechtwerk_sim::cluster::LocalCluster;
use flechtwerk_sim::stages::{COUNT, KEY};

mod support;
use support::cpu_time;

const PARTITIONS: u32 = 4;
const KEYS: usize = 100;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Variant {
    Noop,
    Prometheus,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Noop => "noop",
            Variant::Prometheus => "prometheus",
        }
    }
}

/// One run: CPU time and wall time of processing `records` inputs.
async fn run(variant: Variant, records: usize) -> (Duration, Duration) {
    let cluster = LocalCluster::new();
    let kafka: Arc<dyn Kafka> = Arc::new(cluster);
    let admin = kafka.admin().expect("admin");
    admin.create_topic(&NewTopic::new("in", PARTITIONS)).await.expect("topic");
    admin.create_topic(&NewTopic::new("out", PARTITIONS)).await.expect("topic");
    let producer = kafka.producer(ProducerConfig::idempotent("bench-feeder")).expect("producer");
    let mut deliveries = Vec::with_capacity(records);
    for i in 0..records {
        let record = ProducerRecord::new("in", format!("key-{}", i % KEYS), format!(r#"{{"i":{i}}}"#));
        deliveries.push(producer.send(record).await.expect("send"));
    }
    for delivery in deliveries {
        delivery.await.expect("delivered");
    }
    producer.close().await;

    // The counter of flechtwerk_sim::stages, counting its calls to know when all are in.
    let transformed = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(tokio::sync::Notify::new());
    let stage = {
        let (transformed, done) = (transformed.clone(), done.clone());
        transformer(["in"]).transform(move |msg, mut state, out| {
            let count = state.get(&COUNT)?.unwrap_or(0) + 1;
            state.set(&COUNT, count)?;
            let value = Event::new().with(&COUNT, count)?.with(&KEY, msg.key.clone())?;
            out.send(Message::new("out", msg.key.as_str(), value));
            out.set_state(state);
            if transformed.fetch_add(1, Ordering::Relaxed) + 1 == records {
                done.notify_one();
            }
            Ok(())
        })
    };
    let builder = Flechtwerk::builder().application_id("bench").client_id("pod-0").kafka(kafka).max_poll_records(500);
    let builder = match variant {
        Variant::Noop => builder,
        Variant::Prometheus => {
            builder.metrics_labels([("app", "bench"), ("pod", "pod-0")]).metrics(Metrics::unserved())
        }
    };
    let app = builder.build(stage).expect("app");
    let (cpu, wall) = (cpu_time(), Instant::now());
    // The clean stop lets the last batch commit before the run returns.
    app.run_until(done.notified()).await.expect("run");
    let (cpu, wall) = (cpu_time() - cpu, wall.elapsed());
    assert_eq!(transformed.load(Ordering::Relaxed), records, "no retries in a fault-free run");
    if variant == Variant::Prometheus {
        let text = app.render_metrics().expect("metrics on");
        assert!(text.contains(&format!(
            "flechtwerk_messages_in_total{{app=\"bench\",pod=\"pod-0\",topic=\"in\"}} {records}.0"
        )));
    }
    (cpu, wall)
}

/// The per-record hooks, `n` times: nanoseconds per record.
fn hooks_alone(observer: &dyn Observer, n: usize) -> f64 {
    let started = Instant::now();
    for i in 0..n {
        observer.message_in_bytes("in", 40 + i % 16);
        observer.message_in("in");
        observer.message_processed(Duration::from_micros(3));
        observer.message_out("out");
        observer.message_out_bytes("out", 60 + i % 16);
    }
    started.elapsed().as_nanos() as f64 / n as f64
}

/// The median of the runs (the mean of the two middle ones for an even count).
fn median(values: &[f64]) -> f64 {
    support::stats::median(values)
}

fn main() {
    let mut records = 50_000;
    let mut rounds = 3;
    let mut only: Option<Variant> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bench" => {}
            "--rounds" => rounds = args.next().and_then(|v| v.parse().ok()).expect("--rounds N"),
            "--only" => {
                only = Some(match args.next().as_deref() {
                    Some("noop") => Variant::Noop,
                    Some("prometheus") => Variant::Prometheus,
                    other => panic!("--only noop|prometheus, not {other:?}"),
                })
            }
            other => {
                records = other.parse().unwrap_or_else(|_| panic!("RECORDS, --rounds N or --only V, not {other:?}"))
            }
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let variants: Vec<Variant> = match only {
        Some(v) => vec![v],
        None => vec![Variant::Noop, Variant::Prometheus],
    };
    println!(
        "counter transformer on LocalCluster: {records} records, {KEYS} keys, {PARTITIONS} partitions, {rounds} rounds"
    );
    let mut per_record: Vec<(Variant, Vec<f64>)> = variants.iter().map(|&v| (v, Vec::new())).collect();
    for round in 0..rounds {
        let mut order = variants.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        for variant in order {
            let (cpu, wall) = runtime.block_on(run(variant, records));
            let us = cpu.as_secs_f64() * 1e6 / records as f64;
            println!(
                "  round {round} {:<10} cpu {:>7.3} s  {us:>6.2} µs/record  wall {:>6.2} s",
                variant.name(),
                cpu.as_secs_f64(),
                wall.as_secs_f64()
            );
            per_record.iter_mut().find(|(v, _)| *v == variant).unwrap().1.push(us);
        }
    }
    let medians: Vec<(Variant, f64)> = per_record.iter_mut().map(|(v, us)| (*v, median(us))).collect();
    for (variant, us) in &medians {
        println!("median {:<10} {us:.3} µs CPU/record", variant.name());
    }
    if let [(_, noop), (_, prometheus)] = medians[..] {
        println!("overhead of the Prometheus observer: {:+.2} % CPU per record", (prometheus - noop) / noop * 100.0);
    }
    if only.is_none() {
        let labels = [("app".to_owned(), "bench".to_owned()), ("pod".to_owned(), "pod-0".to_owned())];
        let observer = PrometheusObserver::new(&labels, 500).expect("observer");
        hooks_alone(&observer, 100_000);
        let ns = hooks_alone(&observer, 1_000_000);
        println!("the observer alone: {ns:.1} ns per record (5 hooks: 2 histograms, 2 counters, 1 duration histogram, running maxima)");
    }
}
