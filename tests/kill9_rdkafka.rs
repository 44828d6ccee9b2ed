//! kill -9: a counting transformer process is killed with SIGKILL over and over while 20,000
//! inputs flow; the final `read_committed` output must count every key exactly 1..n — no gap,
//! no duplicate. Needs `--features rdkafka` and a broker at `KAFKA_BOOTSTRAP`.
//!
//! One binary, two roles: run without arguments it is the test (the parent); the children it
//! starts are the same binary with `--child <prefix> <client id>`, running the application
//! until they are killed. (`harness = false` in Cargo.toml: this file has its own `main`.)

use std::collections::BTreeMap;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flechtwerk::kafka::rdkafka::RdKafka;
use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
use flechtwerk::testing::read_topic;
use flechtwerk::wire::RawRecord;
use flechtwerk::Flechtwerk;
use flechtwerk_sim::stages::{check_changelog, check_counts, counter};

const INPUTS: usize = 20_000;
const KEYS: usize = 100;
const PARTITIONS: u32 = 4;
/// Children alive at once.
const CHILDREN: usize = 2;
/// The test is void unless the children were killed at least this often mid-stream.
const KILLS_MIN: usize = 5;
/// Upper bound for the last child to finish the backlog once the killing stops.
const DRAIN_MAX: Duration = Duration::from_secs(600);

fn names(prefix: &str) -> (String, String, String) {
    (format!("{prefix}-input"), format!("{prefix}-output"), format!("{prefix}-app"))
}

fn bootstrap() -> String {
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP").unwrap_or_default();
    assert!(!bootstrap.is_empty(), "KAFKA_BOOTSTRAP is not set: run through scripts/test");
    bootstrap
}

/// The child: runs the counter until it is killed.
async fn child(prefix: &str, client_id: &str) {
    let (input, output, app) = names(prefix);
    let kafka: Arc<dyn Kafka> = Arc::new(RdKafka::new(bootstrap()));
    let app = Flechtwerk::builder()
        .application_id(app)
        .client_id(client_id)
        .kafka(kafka)
        .replication_factor(1)
        .build(counter(&input, &output, None))
        .expect("valid settings");
    let Err(error) = app.run().await;
    // A crash (a fence after a takeover, most likely) ends the child; the parent starts another.
    eprintln!("child {client_id}: {error}");
    std::process::exit(3);
}

fn spawn_child(prefix: &str, n: usize) -> Child {
    Command::new(std::env::current_exe().expect("own path"))
        .args(["--child", prefix, &format!("pod-{}", n % CHILDREN)])
        .spawn()
        .expect("start a child")
}

async fn read_all(kafka: &dyn Kafka, topic: &str) -> Vec<RawRecord> {
    read_topic(kafka, "kill9-reader", topic).await.expect("read")
}

/// The test: children SIGKILLed over and over while the inputs flow, then every key's committed
/// counts and the changelog checked.
///
/// Pins: IT-X-1 (SIGKILL chaos: every key counts 1..n, no gap, no repeat), TRX-10 (outputs,
/// state changes and input offsets commit in one transaction per task: a kill between them would
/// repeat or lose a count), TRX-11 (the committed offset is the batch's last + 1), TRX-31 (a
/// restarted task restores its state from the changelog after the fence, so it counts on from n).
async fn parent() {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos();
    let prefix = format!("kill9-{nanos:x}");
    let (input, output, app) = names(&prefix);
    let kafka: Arc<dyn Kafka> = Arc::new(RdKafka::new(bootstrap()));
    let admin = kafka.admin().expect("admin");
    for topic in [&input, &output] {
        admin.create_topic(&NewTopic::new(topic.as_str(), PARTITIONS).replication(1)).await.expect("create");
    }

    // Feed 20,000 inputs while children are killed and restarted.
    let feeder = {
        let (kafka, input) = (kafka.clone(), input.clone());
        tokio::spawn(async move {
            let producer = kafka.producer(ProducerConfig::idempotent("kill9-feeder")).expect("producer");
            let mut per_key: BTreeMap<String, i64> = BTreeMap::new();
            // Paced (about 25 s in all) so that the children are killed many times mid-stream.
            for chunk in (0..INPUTS).collect::<Vec<_>>().chunks(250) {
                let mut deliveries = Vec::new();
                for &i in chunk {
                    let key = format!("key-{}", i % KEYS);
                    *per_key.entry(key.clone()).or_default() += 1;
                    deliveries.push(
                        producer.send(ProducerRecord::new(&input, key, format!(r#"{{"i":{i}}}"#))).await.expect("send"),
                    );
                }
                for d in deliveries {
                    d.await.expect("delivered");
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            producer.close().await;
            per_key
        })
    };
    let mut children: Vec<Child> = (0..CHILDREN).map(|n| spawn_child(&prefix, n)).collect();
    let mut started = CHILDREN;
    let mut kills = 0;
    let mut rng = nanos as u64;
    while !feeder.is_finished() {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        tokio::time::sleep(Duration::from_millis(1_000 + rng % 4_000)).await;
        let victim = (rng as usize / 7) % CHILDREN;
        children[victim].kill().expect("SIGKILL"); // Child::kill sends SIGKILL on Unix
        children[victim].wait().expect("reap");
        kills += 1;
        children[victim] = spawn_child(&prefix, started);
        started += 1;
    }
    let per_key = feeder.await.expect("feeder");
    assert!(kills >= KILLS_MIN, "only {kills} kills happened while the inputs flowed");
    println!("kill9: {kills} children killed with SIGKILL while {INPUTS} inputs were written");

    // Let the survivors finish the backlog.
    let deadline = Instant::now() + DRAIN_MAX;
    let outputs = loop {
        let outputs = read_all(&*kafka, &output).await;
        if outputs.len() >= INPUTS || Instant::now() > deadline {
            break outputs;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
    let (mut violations, finals) = check_counts(&per_key, &outputs);
    let changelog = read_all(&*kafka, &format!("{app}-changelog")).await;
    violations.extend(check_changelog(&finals, &changelog));
    assert!(violations.is_empty(), "exactly-once violated after {kills} kills:\n{}", violations.join("\n"));
    println!("kill9: {} outputs, every key counted exactly 1..n", outputs.len());
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    match args.first().map(String::as_str) {
        Some("--child") => runtime.block_on(child(&args[1], &args[2])),
        // cargo test passes harness flags (e.g. --nocapture); they mean nothing here.
        _ => runtime.block_on(parent()),
    }
}
