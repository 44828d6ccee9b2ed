//! Transformer throughput on a real broker: exactly-once against at-least-once, side by side.
//!
//! ```text
//! scripts/kafka start
//! KAFKA_BOOTSTRAP=127.0.0.1:9092 cargo bench --features rdkafka --bench eos_throughput [-- RECORDS]
//! ```
//!
//! Writes RECORDS inputs (default 50 000, 100 keys, 4 partitions), then runs the counting
//! transformer over them twice — once exactly-once (one transaction per task per batch), once
//! at-least-once (idempotent sends, offsets committed after the acks) — each with a fresh
//! application id and output topic, and reports for each run the wall time from start until
//! every output is visible (from the first task assigned, so the group join is left out),
//! records per second, and this process's CPU time per record (the broker's CPU is not
//! included: it runs in its own process; the reader that polls for completion is). The rounds alternate twice so
//! that a warm-up or a noisy neighbour shows up as a spread, not as a ratio.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flechtwerk::kafka::rdkafka::RdKafka;
use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, TopicPartition};
use flechtwerk::{Flechtwerk, Guarantee};
use flechtwerk_sim::stages::counter;
use support::cpu_time;

const PARTITIONS: u32 = 4;
const KEYS: usize = 100;

/// The committed record count of `topic`, from the partitions' end offsets (non-transactional
/// outputs) or by reading (transactional outputs hold markers, so count records).
async fn visible(kafka: &dyn Kafka, topic: &str) -> usize {
    let mut consumer = kafka.consumer(ConsumerConfig::groupless("bench-reader")).expect("consumer");
    let partitions: Vec<TopicPartition> = (0..PARTITIONS as i32).map(|p| TopicPartition::new(topic, p)).collect();
    let mut count = 0;
    flechtwerk::testing::read_to_end(consumer.as_mut(), &partitions, |_| {
        count += 1;
        Ok::<(), std::convert::Infallible>(())
    })
    .await
    .expect("read outputs");
    consumer.close().await.expect("close");
    count
}

struct Run {
    /// From the first task assigned (the group joined) to the last output visible.
    wall: Duration,
    cpu: Duration,
}

/// Notes when the first task starts, so the group join (seconds on some brokers) stays out of
/// the throughput.
#[derive(Default)]
struct Joined(std::sync::Mutex<Option<(Instant, Duration)>>);

impl flechtwerk::observer::Observer for Joined {
    fn tasks_assigned(&self, count: usize) {
        let mut joined = self.0.lock().expect("lock");
        if count > 0 && joined.is_none() {
            *joined = Some((Instant::now(), cpu_time()));
        }
    }
}

async fn run(kafka: Arc<dyn Kafka>, input: &str, tag: &str, guarantee: Guarantee, records: usize) -> Run {
    let output = format!("{tag}-output");
    kafka
        .admin()
        .expect("admin")
        .create_topic(&NewTopic::new(&output, PARTITIONS).replication(1))
        .await
        .expect("create output");
    let joined = Arc::new(Joined::default());
    let app = Flechtwerk::builder()
        .application_id(format!("{tag}-app"))
        .client_id("bench-0")
        .kafka(kafka.clone())
        .replication_factor(1)
        .guarantee(guarantee)
        .observer(joined.clone())
        .build(counter(input, &output, None))
        .expect("settings");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move { app.run_until(async { stopped.await.unwrap_or(()) }).await });
    while visible(&*kafka, &output).await < records {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (started, cpu_start) = joined.0.lock().expect("lock").expect("tasks were assigned");
    let wall = started.elapsed();
    let cpu = cpu_time() - cpu_start;
    let _ = stop.send(());
    running.await.expect("app task").expect("app run");
    Run { wall, cpu }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let records: usize =
        std::env::args().skip(1).find(|a| !a.starts_with("--")).map_or(50_000, |a| a.parse().expect("a record count"));
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP").expect("KAFKA_BOOTSTRAP (scripts/kafka start prints it)");
    let kafka: Arc<dyn Kafka> = Arc::new(RdKafka::new(bootstrap));
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos();
    let prefix = format!("bench-{nanos:x}");
    let input = format!("{prefix}-input");
    kafka.admin().expect("admin").create_topic(&NewTopic::new(&input, PARTITIONS).replication(1)).await.expect("input");
    let producer = kafka.producer(ProducerConfig::idempotent("bench-feeder")).expect("producer");
    let mut deliveries = Vec::with_capacity(records);
    for i in 0..records {
        let record = ProducerRecord::new(&input, format!("key-{}", i % KEYS), format!(r#"{{"i":{i}}}"#));
        deliveries.push(producer.send(record).await.expect("send"));
    }
    for d in deliveries {
        d.await.expect("delivered");
    }
    producer.close().await;

    println!("counting transformer, {records} inputs over {KEYS} keys, {PARTITIONS} partitions, max_poll_records 500");
    println!("{:<14} {:>9} {:>12} {:>14}", "mode", "wall s", "records/s", "cpu us/record");
    let mut totals = [(Duration::ZERO, Duration::ZERO); 2];
    for round in 0..2 {
        for (slot, (name, guarantee)) in
            [("exactly-once", Guarantee::ExactlyOnce), ("at-least-once", Guarantee::AtLeastOnce)]
                .into_iter()
                .enumerate()
        {
            let tag = format!("{prefix}-{slot}-{round}");
            let r = run(kafka.clone(), &input, &tag, guarantee, records).await;
            totals[slot].0 += r.wall;
            totals[slot].1 += r.cpu;
            println!(
                "{:<14} {:>9.2} {:>12.0} {:>14.1}",
                name,
                r.wall.as_secs_f64(),
                records as f64 / r.wall.as_secs_f64(),
                r.cpu.as_secs_f64() * 1e6 / records as f64
            );
        }
    }
    let wall_ratio = totals[0].0.as_secs_f64() / totals[1].0.as_secs_f64();
    let cpu_ratio = totals[0].1.as_secs_f64() / totals[1].1.as_secs_f64();
    println!("exactly-once / at-least-once: wall {wall_ratio:.2}x, cpu {cpu_ratio:.2}x");
}
