//! kill -9 for extractors: three replicas of a paging extractor read 20,000 items over 50
//! config entries (400 each) while their processes are killed with SIGKILL over and over; the
//! final `read_committed` output must hold every item exactly once, per key in order. Needs
//! `--features rdkafka` and a broker at `KAFKA_BOOTSTRAP`.
//!
//! One binary, two roles (`harness = false`): without arguments it is the test (the parent); the
//! children are the same binary with `--child <prefix> <client id>`, running the extractor
//! until they are killed. The source is a pure function of the config key and the cursor, so
//! every process sees the same items.

use std::collections::BTreeMap;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flechtwerk::attribute::{Attribute, INT};
use flechtwerk::kafka::rdkafka::RdKafka;
use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
use flechtwerk::stage::BoxError;
use flechtwerk::testing::read_topic;
use flechtwerk::{Config, Event, Extractor, Flechtwerk, Message, Page, State};

const CONFIGS: usize = 50;
const ITEMS_PER_CONFIG: i64 = 400;
const TOKENS: u32 = 4;
/// Replicas alive at once.
const CHILDREN: usize = 3;
/// The test is void unless the children were killed at least this often mid-stream.
const KILLS_MIN: usize = 5;
/// Enough kills: each costs a rebalance, so more only make the test slower.
const KILLS_MAX: usize = 10;
/// Items per page; pages per poll.
const PAGE_ITEMS: i64 = 20;
const PAGES_PER_POLL: usize = 2;
/// Upper bound for the extraction to finish once the killing stops.
const DRAIN_MAX: Duration = Duration::from_secs(600);

const SEQ: Attribute<i64> = Attribute::new("seq", &INT);
const CURSOR: Attribute<i64> = Attribute::new("cursor", &INT);

fn names(prefix: &str) -> (String, String, String) {
    (format!("{prefix}-configs"), format!("{prefix}-output"), format!("{prefix}-app"))
}

fn bootstrap() -> String {
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP").unwrap_or_default();
    assert!(!bootstrap.is_empty(), "KAFKA_BOOTSTRAP is not set: run through scripts/test");
    bootstrap
}

/// Pages through items 1..=400 of its config, 20 a page, a little slowly (a real source takes
/// its time), so that kills land in the middle of pages.
struct Pager {
    output: String,
}

impl Extractor for Pager {
    fn config_topics(&self) -> Vec<String> {
        vec![self.output.replace("-output", "-configs")]
    }

    async fn poll(&self, _config: Config, mut state: State, page: &mut Page<'_>) -> Result<(), BoxError> {
        let mut cursor = state.get(&CURSOR)?.unwrap_or(0);
        for _ in 0..PAGES_PER_POLL {
            if cursor >= ITEMS_PER_CONFIG {
                break;
            }
            let last = (cursor + PAGE_ITEMS).min(ITEMS_PER_CONFIG);
            for seq in cursor + 1..=last {
                page.send(Message::new(self.output.as_str(), page.key(), Event::new().with(&SEQ, seq)?)).await?;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            cursor = last;
            state.set(&CURSOR, cursor)?;
            page.commit(state.clone()).await?;
        }
        Ok(())
    }
}

async fn child(prefix: &str, client_id: &str) {
    let (_, output, app) = names(prefix);
    let kafka: Arc<dyn Kafka> = Arc::new(RdKafka::new(bootstrap()));
    let app = Flechtwerk::builder()
        .application_id(app)
        .client_id(client_id)
        .kafka(kafka)
        .replication_factor(1)
        .session_timeout(Duration::from_secs(6))
        .poll_interval(Duration::from_millis(100))
        .build(Pager { output })
        .expect("valid settings");
    let Err(error) = app.run().await;
    eprintln!("child {client_id}: {error}");
    std::process::exit(3);
}

fn spawn_child(prefix: &str, n: usize) -> Child {
    Command::new(std::env::current_exe().expect("own path"))
        .args(["--child", prefix, &format!("pod-{}", n % CHILDREN)])
        .spawn()
        .expect("start a child")
}

/// Per config key, the sequence numbers in output order.
async fn outputs(kafka: &dyn Kafka, topic: &str) -> BTreeMap<String, Vec<i64>> {
    let mut per_key: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for record in read_topic(kafka, "kill9-reader", topic).await.expect("read") {
        let value = Event::wrap(flechtwerk::wire::decode_value(record.value.as_deref()).expect("json"));
        let key = String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned();
        per_key.entry(key).or_default().push(value.require(&SEQ).expect("seq"));
    }
    per_key
}

/// The test: replicas SIGKILLed over and over mid-extraction, then every feed's committed items
/// checked.
///
/// Pins: EXT-10 (a page's items and its cursor commit together: a kill mid-page repeats and loses
/// no item), EXT-20 (the cursor survives restarts through the changelog), EXT-25 (a cursor never
/// goes back across a crash or a handover: every feed's items once, in order).
async fn parent() {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos();
    let prefix = format!("kill9x-{nanos:x}");
    let (configs, output, _) = names(&prefix);
    let kafka: Arc<dyn Kafka> = Arc::new(RdKafka::new(bootstrap()));
    let admin = kafka.admin().expect("admin");
    admin.create_topic(&NewTopic::new(&configs, TOKENS).replication(1).compacted()).await.expect("create");
    admin.create_topic(&NewTopic::new(&output, 4).replication(1)).await.expect("create");
    let producer = kafka.producer(ProducerConfig::idempotent("kill9x-configs")).expect("producer");
    for k in 0..CONFIGS {
        let record = ProducerRecord::new(&configs, format!("feed-{k:02}"), format!(r#"{{"feed":{k}}}"#));
        producer.send(record).await.expect("send").await.expect("delivered");
    }
    producer.close().await;

    let total = CONFIGS as i64 * ITEMS_PER_CONFIG;
    let mut children: Vec<Child> = (0..CHILDREN).map(|n| spawn_child(&prefix, n)).collect();
    let mut started = CHILDREN;
    let mut kills = 0;
    let mut rng = nanos as u64;
    let kill_until = Instant::now() + DRAIN_MAX;
    loop {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        tokio::time::sleep(Duration::from_millis(2_000 + rng % 4_000)).await;
        let done: usize = outputs(&*kafka, &output).await.values().map(Vec::len).sum();
        // Kill while at most three quarters are out, at least KILLS_MIN times.
        if kills >= KILLS_MAX || (done as i64 > total * 3 / 4 && kills >= KILLS_MIN) || Instant::now() > kill_until {
            break;
        }
        assert!((done as i64) < total, "the extraction finished before {KILLS_MIN} kills: make the source slower");
        let victim = (rng as usize / 7) % CHILDREN;
        children[victim].kill().expect("SIGKILL");
        children[victim].wait().expect("reap");
        kills += 1;
        children[victim] = spawn_child(&prefix, started);
        started += 1;
    }
    println!("kill9 extractor: {kills} children killed with SIGKILL mid-extraction");
    assert!(kills >= KILLS_MIN, "only {kills} kills happened while the items flowed");

    let deadline = Instant::now() + DRAIN_MAX;
    let per_key = loop {
        let per_key = outputs(&*kafka, &output).await;
        let done: usize = per_key.values().map(Vec::len).sum();
        if done as i64 >= total || Instant::now() > deadline {
            break per_key;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
    let want: Vec<i64> = (1..=ITEMS_PER_CONFIG).collect();
    let mut violations = Vec::new();
    for k in 0..CONFIGS {
        let key = format!("feed-{k:02}");
        let got = per_key.get(&key).cloned().unwrap_or_default();
        if got != want {
            violations.push(format!(
                "{key}: {} items, first differences at {:?}",
                got.len(),
                first_difference(&got, &want)
            ));
        }
    }
    assert!(violations.is_empty(), "extraction not exactly once after {kills} kills:\n{}", violations.join("\n"));
    println!("kill9 extractor: {total} items over {CONFIGS} configs, each exactly once and in order");
}

fn first_difference(got: &[i64], want: &[i64]) -> Option<(usize, Option<i64>, Option<i64>)> {
    (0..got.len().max(want.len()))
        .find(|&i| got.get(i) != want.get(i))
        .map(|i| (i, got.get(i).copied(), want.get(i).copied()))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    match args.first().map(String::as_str) {
        Some("--child") => runtime.block_on(child(&args[1], &args[2])),
        _ => runtime.block_on(parent()),
    }
}
