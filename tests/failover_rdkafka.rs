//! Reads through a broker failover (issue 40), on the replicated 3-broker Apache Kafka of
//! `scripts/kafka start --brokers 3` (`KAFKA_CLUSTER_BOOTSTRAP`, and `KAFKA_CLUSTER_COMMAND` to
//! kill, pause and restart its brokers; `scripts/test` starts it).
//!
//! A transformer's config bootstrap and an extractor's token restore are started while one
//! broker is down (SIGKILL) and while one is paused (SIGSTOP) — the broker comes back after
//! [`HOLD`], past the controller's fencing of it (`broker.session.timeout.ms`, 9 s) so that its
//! leaderships move and librdkafka replaces its broker handle while the reads wait. Each must
//! then finish with every effect exactly once. Before the fix, the reads' retry loops treated
//! librdkafka's `_DESTROY_BROKER` (the handle of a broker that left the metadata, failing the
//! requests it still held) as fatal, and `run()` ended with "Meta data fetch error:
//! DestroyBroker".
//!
//! The four cases run one after another in one test (they fault the same cluster).

#![cfg(all(feature = "rdkafka", not(madsim)))]

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{Harness, Probe, Seed};
use flechtwerk::attribute::{Attribute, INT};
use flechtwerk::kafka::rdkafka::RdKafka;
use flechtwerk::stage::BoxError;
use flechtwerk::{Config, Event, Extractor, Message, Page, State};
use flechtwerk_sim::stages::{check_counts, counter, LABEL};

/// How long a faulted broker stays down or paused: past the controller's session timeout of a
/// broker (9 s), so its leaderships and coordinators move while the stage reads.
const HOLD: Duration = Duration::from_secs(15);
/// How long a stage may take to finish once the broker is back.
const FINISH_MAX: Duration = Duration::from_secs(120);
/// Partitions of every topic: with three brokers, each leads one of every topic.
const PARTITIONS: u32 = 3;

const KEYS: usize = 30;
const INPUTS: usize = 600;
const FEEDS: usize = 9;
const ITEMS: i64 = 120;
const PAGE_ITEMS: i64 = 10;

const SEQ: Attribute<i64> = Attribute::new("seq", &INT);
const CURSOR: Attribute<i64> = Attribute::new("cursor", &INT);

#[derive(Clone, Copy, Debug)]
enum Fault {
    /// SIGKILL, then a start on its data.
    Killed,
    /// SIGSTOP, then SIGCONT.
    Paused,
}

/// A faulted broker of the cluster; brought back when dropped, so a failed case leaves the
/// cluster whole for the next.
struct Faulted {
    broker: u32,
    fault: Fault,
    healed: bool,
}

fn cluster(args: &[&str]) {
    let command = std::env::var("KAFKA_CLUSTER_COMMAND").expect("KAFKA_CLUSTER_COMMAND");
    let status = Command::new(&command).args(args).status().expect("run the cluster command");
    assert!(status.success(), "{command} {args:?}: {status}");
}

impl Faulted {
    fn new(broker: u32, fault: Fault) -> Self {
        let b = broker.to_string();
        cluster(&["broker", &b, if matches!(fault, Fault::Killed) { "kill" } else { "pause" }]);
        Faulted { broker, fault, healed: false }
    }

    fn heal(&mut self) {
        if !self.healed {
            self.healed = true;
            let b = self.broker.to_string();
            cluster(&["broker", &b, if matches!(self.fault, Fault::Killed) { "start" } else { "resume" }]);
        }
    }
}

impl Drop for Faulted {
    fn drop(&mut self) {
        self.heal();
    }
}

fn harness(case: &str) -> Harness {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let bootstrap = std::env::var("KAFKA_CLUSTER_BOOTSTRAP").unwrap_or_default();
    assert!(
        !bootstrap.is_empty(),
        "KAFKA_CLUSTER_BOOTSTRAP is not set: run through scripts/test, or `scripts/kafka start --brokers 3` \
         and export what it prints"
    );
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_nanos();
    // Replication -1: the cluster's default, 3 with min.insync.replicas 2.
    Harness::new(Arc::new(RdKafka::new(bootstrap)), format!("failover-{case}-{nanos:x}"), -1)
}

/// Waits `HOLD` while `running` must not end, then heals the broker.
async fn hold_then_heal(mut faulted: Faulted, running: common::Running, what: &str) -> common::Running {
    let until = tokio::time::Instant::now() + HOLD;
    while tokio::time::Instant::now() < until {
        if running.is_finished() {
            let ended = running.ended().await;
            panic!("{what}: run() ended while broker {} was {:?}: {ended:?}", faulted.broker, faulted.fault);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    faulted.heal();
    running
}

/// The config bootstrap of a counting transformer started while `broker` is faulted: every
/// count exactly once, each joined with its key's config (the bootstrap finished before the
/// first batch).
async fn config_bootstrap(broker: u32, fault: Fault) {
    let h = harness(&format!("configs-{broker}"));
    let configs = h.topic("configs", PARTITIONS, true).await;
    let input = h.topic("input", PARTITIONS, false).await;
    let output = h.topic("output", PARTITIONS, false).await;
    let labels: Vec<(String, String)> =
        (0..KEYS).map(|k| (format!("key-{k}"), format!(r#"{{"label":"config of key-{k}"}}"#))).collect();
    let seeds: Vec<Seed<'_>> = labels.iter().map(|(key, value)| (None, key.as_str(), Some(value.as_bytes()))).collect();
    h.produce(&configs, &seeds).await;
    let keys: Vec<String> = (0..INPUTS).map(|i| format!("key-{}", i % KEYS)).collect();
    let seeds: Vec<Seed<'_>> = keys.iter().map(|key| (None, key.as_str(), Some(&b"{}"[..]))).collect();
    h.produce(&input, &seeds).await;

    let started = Instant::now();
    let faulted = Faulted::new(broker, fault);
    let running =
        h.start(&h.name("app"), "pod-0", counter(&input, &output, Some(&configs)), Arc::new(Probe::default()));
    let running = hold_then_heal(faulted, running, "config bootstrap").await;
    let outputs = h.read_within(&output, FINISH_MAX, |records| records.len() >= INPUTS).await;
    assert!(!running.is_finished(), "run() ended");
    running.stop().await.expect("a clean stop");

    let mut per_key: BTreeMap<String, i64> = BTreeMap::new();
    for key in &keys {
        *per_key.entry(key.clone()).or_default() += 1;
    }
    let (violations, _) = check_counts(&per_key, &outputs);
    assert!(violations.is_empty(), "exactly-once violated: {violations:?}");
    for record in &outputs {
        let value = Event::wrap(flechtwerk::wire::decode_value(record.value.as_deref()).expect("json"));
        let label = value.get(&LABEL).expect("label").expect("every output joined with its config");
        assert!(label.starts_with("config of key-"), "{label}");
    }
    println!(
        "config bootstrap, broker {broker} {fault:?} for {HOLD:?}: {} outputs, done {:.1} s after the fault",
        outputs.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Pages through items 1..=ITEMS of its feed, PAGE_ITEMS a page; the cursor is the state.
struct Pager {
    output: String,
    configs: String,
    /// Stops paging at this cursor (the first run leaves the feeds half done).
    until: i64,
}

impl Extractor for Pager {
    fn config_topics(&self) -> Vec<String> {
        vec![self.configs.clone()]
    }

    async fn poll(&self, _config: Config, mut state: State, page: &mut Page<'_>) -> Result<(), BoxError> {
        let mut cursor = state.get(&CURSOR)?.unwrap_or(0);
        while cursor < self.until {
            let last = (cursor + PAGE_ITEMS).min(self.until);
            for seq in cursor + 1..=last {
                page.send(Message::new(self.output.as_str(), page.key(), Event::new().with(&SEQ, seq)?)).await?;
            }
            cursor = last;
            state.set(&CURSOR, cursor)?;
            page.commit(state.clone()).await?;
        }
        Ok(())
    }
}

/// Per feed, the sequence numbers in output order.
async fn items(h: &Harness, output: &str) -> BTreeMap<String, Vec<i64>> {
    let mut per_feed: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for record in h.read(output).await {
        let value = Event::wrap(flechtwerk::wire::decode_value(record.value.as_deref()).expect("json"));
        let key = String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned();
        per_feed.entry(key).or_default().push(value.require(&SEQ).expect("seq"));
    }
    per_feed
}

/// An extractor's token restore started while `broker` is faulted: a first run pages every
/// feed half way and stops; the second starts during the fault, restores its cursors from the
/// changelog and finishes every feed — items 1..=ITEMS once each, in order.
async fn token_restore(broker: u32, fault: Fault) {
    let h = harness(&format!("tokens-{broker}"));
    let configs = h.topic("configs", PARTITIONS, true).await;
    let output = h.topic("output", PARTITIONS, false).await;
    let feeds: Vec<String> = (0..FEEDS).map(|f| format!("feed-{f}")).collect();
    // Not `{}`: an empty config is a delete.
    let seeds: Vec<Seed<'_>> = feeds.iter().map(|feed| (None, feed.as_str(), Some(&br#"{"on":true}"#[..]))).collect();
    h.produce(&configs, &seeds).await;
    let app = h.name("app");
    let pager = |until| Pager { output: output.clone(), configs: configs.clone(), until };

    let first = h.start(&app, "pod-0", pager(ITEMS / 2), Arc::new(Probe::default()));
    h.read_within(&output, FINISH_MAX, |records| records.len() >= FEEDS * (ITEMS / 2) as usize).await;
    first.stop().await.expect("a clean stop");

    let started = Instant::now();
    let faulted = Faulted::new(broker, fault);
    let running = h.start(&app, "pod-0", pager(ITEMS), Arc::new(Probe::default()));
    let running = hold_then_heal(faulted, running, "token restore").await;
    h.read_within(&output, FINISH_MAX, |records| records.len() >= FEEDS * ITEMS as usize).await;
    assert!(!running.is_finished(), "run() ended");
    running.stop().await.expect("a clean stop");

    let expected: Vec<i64> = (1..=ITEMS).collect();
    let per_feed = items(&h, &output).await;
    assert_eq!(per_feed.keys().cloned().collect::<Vec<_>>(), feeds);
    for (feed, seqs) in &per_feed {
        assert_eq!(seqs, &expected, "{feed}: every item once, in order");
    }
    println!(
        "token restore, broker {broker} {fault:?} for {HOLD:?}: {} items, done {:.1} s after the fault",
        per_feed.values().map(Vec::len).sum::<usize>(),
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_wait_through_a_broker_failover() {
    config_bootstrap(1, Fault::Killed).await;
    config_bootstrap(2, Fault::Paused).await;
    token_restore(3, Fault::Killed).await;
    token_restore(1, Fault::Paused).await;
}
