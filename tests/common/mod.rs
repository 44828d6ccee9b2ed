//! Engine acceptance scenarios, written once against the Kafka port and run on the in-process
//! simulated cluster (every `cargo test`) and on the real broker through librdkafka
//! (`--features rdkafka`, the broker from `scripts/kafka`). Each scenario names the behaviour
//! IDs it pins (spec §15).

#![allow(dead_code)] // each test binary uses a subset

pub mod doubles;
pub mod engine_tests;
pub mod extractor;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use flechtwerk::attribute::{Attribute, INT, STR};
use flechtwerk::kafka::{ConsumerConfig, FetchLimits, Kafka, NewTopic, ProducerConfig, ProducerRecord, TopicPartition};
use flechtwerk::observer::{InvalidOutcome, Observer};
use flechtwerk::stage::transformer;
use flechtwerk::testing::read_topic;
use flechtwerk::testing::{Observed, RecordingObserver};
use flechtwerk::wire::{InvalidMessageAction, RawRecord};
use flechtwerk::{Error, Event, Flechtwerk, Message, Transformer};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long a scenario waits for the engine to produce what it expects.
pub const SETTLE_MAX: Duration = Duration::from_secs(90);

/// A scenario's view of one cluster: unique names and client helpers.
pub struct Harness {
    pub kafka: Arc<dyn Kafka>,
    pub prefix: String,
    pub replication: i16,
    /// The producer shape of every application the harness starts.
    pub producers: flechtwerk::Producers,
    /// `max_poll_records` and `max_batch_records` of every transformer it starts (`None`: the
    /// defaults).
    pub batches: Option<(usize, usize)>,
    /// The session timeout of every application it starts (6 s unless a scenario asks for more).
    pub session_timeout: Duration,
}

/// A record to seed a topic with: explicit partition (or by key), key, value (or a tombstone).
pub type Seed<'a> = (Option<i32>, &'a str, Option<&'a [u8]>);

/// A running application: stop it with [`Running::stop`].
pub struct Running {
    shutdown: Option<oneshot::Sender<()>>,
    handle: JoinHandle<Result<(), Error>>,
}

impl Running {
    /// Asks for a clean shutdown and waits for it.
    pub async fn stop(mut self) -> Result<(), Error> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.handle.await.expect("the app task panicked")
    }

    /// Whether the app has ended (by itself or stopped).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Waits for the app to end by itself (an error).
    pub async fn ended(self) -> Result<(), Error> {
        self.handle.await.expect("the app task panicked")
    }
}

/// Observer that records events and tracks the live task count and the config store.
#[derive(Default)]
pub struct Probe {
    pub recording: RecordingObserver,
    pub tasks: AtomicUsize,
    pub configs: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl Observer for Probe {
    fn message_invalid(&self, topic: &str, outcome: InvalidOutcome) {
        self.recording.message_invalid(topic, outcome);
    }
    fn message_out_bytes(&self, topic: &str, bytes: usize) {
        self.recording.message_out_bytes(topic, bytes);
    }
    fn message_in(&self, topic: &str) {
        self.recording.message_in(topic);
    }
    fn message_in_bytes(&self, topic: &str, bytes: usize) {
        self.recording.message_in_bytes(topic, bytes);
    }
    fn state_restored(&self, partition: i32, count: usize) {
        self.recording.state_restored(partition, count);
    }
    fn tasks_assigned(&self, count: usize) {
        self.tasks.store(count, Ordering::SeqCst);
        self.recording.tasks_assigned(count);
    }
    fn transaction_committed(&self) {
        self.recording.transaction_committed();
    }
    fn batch_processed(&self, size: usize, elapsed: Duration) {
        self.recording.batch_processed(size, elapsed);
    }
    fn config_store_updated(&self, store: &dyn flechtwerk::observer::ConfigView) {
        *self.configs.lock().unwrap() = store.to_map();
    }
}

impl Harness {
    pub fn new(kafka: Arc<dyn Kafka>, prefix: impl Into<String>, replication: i16) -> Self {
        Harness {
            kafka,
            prefix: prefix.into(),
            replication,
            producers: flechtwerk::Producers::PerTask,
            batches: None,
            session_timeout: Duration::from_secs(6),
        }
    }

    /// A copy of this harness whose applications have session timeout `timeout`.
    pub fn with_session_timeout(&self, timeout: Duration) -> Harness {
        Harness { session_timeout: timeout, ..self.with_kafka(self.kafka.clone()) }
    }

    /// The same harness starting applications with `producers` (TRX-40: the per-instance
    /// shape runs the same scenarios).
    #[allow(dead_code)]
    pub fn with_producers(mut self, producers: flechtwerk::Producers) -> Harness {
        self.producers = producers;
        self
    }

    /// Every transformer the harness starts polls `poll` records at a time and gathers up to
    /// `batch` into one batch (TRX-45).
    pub fn with_batches(mut self, poll: usize, batch: usize) -> Harness {
        self.batches = Some((poll, batch));
        self
    }

    pub fn name(&self, what: &str) -> String {
        format!("{}-{what}", self.prefix)
    }

    /// Creates topic `what` (prefixed) and returns its name.
    pub async fn topic(&self, what: &str, partitions: u32, compact: bool) -> String {
        let name = self.name(what);
        let mut spec = NewTopic::new(&name, partitions).replication(self.replication);
        if compact {
            spec = spec.compacted();
        }
        self.kafka.admin().unwrap().create_topic(&spec).await.unwrap();
        name
    }

    /// Produces records (committed, idempotent) and waits for their delivery.
    pub async fn produce(&self, topic: &str, records: &[Seed<'_>]) {
        let producer = self.kafka.producer(ProducerConfig::idempotent(self.name("seed"))).unwrap();
        for (partition, key, value) in records {
            let record = ProducerRecord {
                topic: topic.to_owned(),
                partition: *partition,
                key: Some(Bytes::copy_from_slice(key.as_bytes())),
                value: value.map(Bytes::copy_from_slice),
                headers: Vec::new(),
                timestamp_ms: None,
            };
            producer.send(record).await.unwrap().await.unwrap();
        }
        producer.close().await;
    }

    /// Every committed record of `topic`, sorted by (partition, offset).
    pub async fn read(&self, topic: &str) -> Vec<RawRecord> {
        read_topic(&*self.kafka, &self.name("reader"), topic).await.unwrap()
    }

    /// A harness whose applications use `kafka` (a wrapper of this harness's cluster), with the
    /// same names.
    pub fn with_kafka(&self, kafka: Arc<dyn Kafka>) -> Harness {
        Harness {
            kafka,
            prefix: self.prefix.clone(),
            replication: self.replication,
            producers: self.producers,
            batches: self.batches,
            session_timeout: self.session_timeout,
        }
    }

    /// Reads `topic` until `done` holds, or fails after [`SETTLE_MAX`].
    pub async fn read_until(&self, topic: &str, done: impl Fn(&[RawRecord]) -> bool) -> Vec<RawRecord> {
        self.read_within(topic, SETTLE_MAX, done).await
    }

    /// Reads `topic` until `done` holds, or fails after `bound`.
    pub async fn read_within(
        &self,
        topic: &str,
        bound: Duration,
        done: impl Fn(&[RawRecord]) -> bool,
    ) -> Vec<RawRecord> {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let records = self.read(topic).await;
            if done(&records) {
                return records;
            }
            assert!(tokio::time::Instant::now() < deadline, "{topic}: condition not met within {bound:?}: {records:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The group's committed offsets.
    pub async fn committed(&self, group: &str, partitions: &[TopicPartition]) -> Vec<Option<i64>> {
        let mut consumer = self.kafka.consumer(ConsumerConfig::member(self.name("offsets"), group)).unwrap();
        let committed = consumer.committed(partitions).await.unwrap();
        consumer.close().await.unwrap();
        committed
    }

    /// Builds and starts an application (a transformer or an extractor; extractors poll every
    /// 200 ms).
    pub fn start<S: flechtwerk::IntoRunner<M>, M>(
        &self,
        app_id: &str,
        client_id: &str,
        stage: S,
        observer: Arc<dyn Observer>,
    ) -> Running {
        self.start_on(app_id, client_id, stage, observer, None)
    }

    /// [`start`](Self::start) with the given state stores (`None`: the default, a fresh
    /// directory per start).
    pub fn start_on<S: flechtwerk::IntoRunner<M>, M>(
        &self,
        app_id: &str,
        client_id: &str,
        stage: S,
        observer: Arc<dyn Observer>,
        stores: Option<Arc<dyn flechtwerk::state::StateStores>>,
    ) -> Running {
        let app = Flechtwerk::builder()
            .application_id(app_id)
            .client_id(client_id)
            .kafka(self.kafka.clone())
            .replication_factor(self.replication)
            .session_timeout(self.session_timeout)
            .poll_interval(Duration::from_millis(200))
            .producers(self.producers)
            .observer(observer);
        let app = match self.batches {
            Some((poll, batch)) => app.max_poll_records(poll).max_batch_records(batch),
            None => app,
        };
        let app = match stores {
            Some(stores) => app.state_stores(stores),
            None => app,
        };
        let app = app.build(stage).unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(async move {
            app.run_until(async {
                let _ = rx.await;
            })
            .await
        });
        Running { shutdown: Some(tx), handle }
    }
}

pub async fn wait_for(what: &str, condition: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + SETTLE_MAX;
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "{what}: not reached within {SETTLE_MAX:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const N: Attribute<i64> = Attribute::new("n", &INT);
const CURSOR: Attribute<String> = Attribute::new("cursor", &STR);

fn value(record: &RawRecord) -> &[u8] {
    record.value.as_deref().unwrap_or_default()
}

/// IT-EOS-1 (engine level): one batch commits its output, its state change (changelog) and its
/// input offset together.
pub async fn eos_commit_makes_all_three_sides_visible(h: &Harness) {
    let input = h.topic("input", 1, false).await;
    let output = h.topic("output", 1, false).await;
    let app = h.name("eos1");
    h.produce(&input, &[(None, "k", Some(br#"{"n":1}"#))]).await;
    let out = output.clone();
    let stage = transformer([input.as_str()]).transform(move |_msg, mut state, o| {
        o.send(Message::new(
            out.as_str(),
            "out-key",
            Event::new().with(&Attribute::new("derived", &STR), "yes".to_owned())?,
        ));
        state.set(&CURSOR, "done".to_owned())?;
        o.set_state(state);
        Ok(())
    });
    let running = h.start(&app, "pod-0", stage, Arc::new(Probe::default()));
    let outputs = h.read_until(&output, |r| !r.is_empty()).await;
    running.stop().await.unwrap();
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0].key.as_deref(), Some(&b"out-key"[..]));
    assert_eq!(value(&outputs[0]), br#"{"derived":"yes"}"#);
    let changelog = h.read(&format!("{app}-changelog")).await;
    assert_eq!(changelog.len(), 1);
    assert_eq!(changelog[0].key.as_deref(), Some(&b"k"[..]));
    assert_eq!(value(&changelog[0]), br#"{"cursor":"done"}"#);
    assert_eq!(h.committed(&app, &[TopicPartition::new(&input, 0)]).await, vec![Some(1)]);
}

/// IT-EOS-2 (engine level), TRX-15: a transform error ends the run and nothing of the batch is
/// visible — no output, no state, no offset.
pub async fn eos_failed_batch_makes_nothing_visible(h: &Harness) {
    let input = h.topic("input", 1, false).await;
    let output = h.topic("output", 1, false).await;
    let app = h.name("eos2");
    h.produce(&input, &[(None, "k", Some(br#"{"n":1}"#))]).await;
    let out = output.clone();
    let stage = transformer([input.as_str()]).transform(move |msg, mut state, o| {
        o.send(Message::new(out.as_str(), msg.key.as_str(), msg.value));
        state.set(&CURSOR, "half".to_owned())?;
        o.set_state(state);
        Err("boom".into())
    });
    let result = h.start(&app, "pod-0", stage, Arc::new(Probe::default())).ended().await;
    let error = result.expect_err("a failing transform ends the run");
    assert!(matches!(error, Error::Transform { offset: 0, .. }), "{error:?}");
    assert!(h.read(&output).await.is_empty());
    assert!(h.read(&format!("{app}-changelog")).await.is_empty());
    assert_eq!(h.committed(&app, &[TopicPartition::new(&input, 0)]).await, vec![None]);
}

/// IT-INV-1, INV-12, TRX-11: a skipped record never reaches `transform`, its offset commits
/// with the batch, and the decision is counted.
pub async fn invalid_skipped_offset_commits(h: &Harness) {
    let input = h.topic("input", 1, false).await;
    let output = h.topic("output", 1, false).await;
    let app = h.name("inv1");
    h.produce(&input, &[(None, "k", Some(b"{not json")), (None, "k", Some(br#"{"n":1}"#))]).await;
    let out = output.clone();
    let stage = transformer([input.as_str()]).on_invalid_message(|_| InvalidMessageAction::Skip).transform(
        move |msg, _state, o| {
            o.send(Message::new(out.as_str(), msg.key.as_str(), msg.value));
            Ok(())
        },
    );
    let probe = Arc::new(Probe::default());
    let running = h.start(&app, "pod-0", stage, probe.clone());
    let outputs = h.read_until(&output, |r| !r.is_empty()).await;
    let deadline = tokio::time::Instant::now() + SETTLE_MAX;
    while h.committed(&app, &[TopicPartition::new(&input, 0)]).await != vec![Some(2)] {
        assert!(tokio::time::Instant::now() < deadline, "offset 2 never committed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    running.stop().await.unwrap();
    assert_eq!(outputs.iter().map(value).collect::<Vec<_>>(), vec![&br#"{"n":1}"#[..]]);
    let invalid: Vec<Observed> =
        probe.recording.events().into_iter().filter(|e| matches!(e, Observed::MessageInvalid { .. })).collect();
    assert_eq!(invalid, vec![Observed::MessageInvalid { topic: input.clone(), outcome: InvalidOutcome::Skipped }]);
}

/// IT-CFG-1, CFG-01, CFG-12: the bootstrap reads several config topics of different sizes into
/// one key space; a tombstone deletes across partitions.
pub async fn config_bootstrap_across_topics(h: &Harness) {
    let a = h.topic("cfg-a", 2, true).await;
    let b = h.topic("cfg-b", 3, true).await;
    let input = h.topic("input", 1, false).await;
    h.produce(
        &a,
        &[(Some(0), "gone", Some(br#"{"n":1}"#)), (Some(1), "kept", Some(br#"{"n":2}"#)), (Some(0), "gone", None)],
    )
    .await;
    h.produce(&b, &[(Some(2), "far", Some(br#"{"n":3}"#))]).await;
    let stage = transformer([input.as_str()]).config_topics([a.as_str(), b.as_str()]).transform(|_, _, _| Ok(()));
    let probe = Arc::new(Probe::default());
    let running = h.start(&h.name("cfg1"), "pod-0", stage, probe.clone());
    wait_for("bootstrap", || !probe.configs.lock().unwrap().is_empty()).await;
    running.stop().await.unwrap();
    let store = probe.configs.lock().unwrap().clone();
    let want: BTreeMap<String, Vec<u8>> =
        [("far".to_owned(), br#"{"n":3}"#.to_vec()), ("kept".to_owned(), br#"{"n":2}"#.to_vec())].into();
    assert_eq!(store, want);
}

/// IT-CFG-2, CFG-24: a lookup finds a config wherever it was written (no co-partitioning), and
/// a config written after startup reaches a later request.
pub async fn config_join_and_live_update(h: &Harness) {
    let configs = h.topic("configs", 2, true).await;
    let requests = h.topic("requests", 4, false).await;
    let output = h.topic("output", 1, false).await;
    h.produce(&configs, &[(Some(0), "k1", Some(br#"{"secret":"s1"}"#))]).await;
    h.produce(&requests, &[(Some(3), "k1", Some(b"{}"))]).await;
    let out = output.clone();
    let stage = transformer([requests.as_str()]).config_topics([configs.as_str()]).transform(move |msg, _state, o| {
        if let Some(config) = o.configs().get(&msg.key)? {
            o.send(Message::new(out.as_str(), msg.key.as_str(), Event::from(config.into_record())));
        }
        Ok(())
    });
    let probe = Arc::new(Probe::default());
    let running = h.start(&h.name("cfg2"), "pod-0", stage, probe.clone());
    let first = h.read_until(&output, |r| !r.is_empty()).await;
    assert_eq!(first[0].key.as_deref(), Some(&b"k1"[..]));
    assert_eq!(value(&first[0]), br#"{"secret":"s1"}"#);
    h.produce(&configs, &[(Some(1), "k2", Some(br#"{"secret":"s2"}"#))]).await;
    wait_for("k2 drained into the config store", || probe.configs.lock().unwrap().contains_key("k2")).await;
    h.produce(&requests, &[(Some(0), "k2", Some(b"{}"))]).await;
    let both = h.read_until(&output, |r| r.iter().any(|x| x.key.as_deref() == Some(b"k2"))).await;
    running.stop().await.unwrap();
    let k2 = both.iter().find(|x| x.key.as_deref() == Some(b"k2")).unwrap();
    assert_eq!(value(k2), br#"{"secret":"s2"}"#);
}

const COUNT: Attribute<i64> = Attribute::new("count", &INT);

/// A counter for IT-LB-3: state `count`, output `{count, key}`.
fn counter(input: &str, output: &str) -> impl Transformer + use<> {
    let output = output.to_owned();
    transformer([input]).transform(move |msg, mut state, o| {
        let count = state.get(&COUNT)?.unwrap_or(0) + 1;
        state.set(&COUNT, count)?;
        o.send(Message::new(output.as_str(), msg.key.as_str(), Event::new().with(&COUNT, count)?));
        o.set_state(state);
        Ok(())
    })
}

fn counts_by_key(records: &[RawRecord]) -> BTreeMap<String, Vec<i64>> {
    let mut counts: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for r in records {
        let event = Event::wrap(flechtwerk::wire::decode_value(r.value.as_deref()).unwrap());
        counts
            .entry(String::from_utf8_lossy(r.key.as_deref().unwrap()).into_owned())
            .or_default()
            .push(event.require(&COUNT).unwrap());
    }
    counts
}

/// Produces one record per partition and waits until `n` rounds of outputs are visible.
async fn round(h: &Harness, input: &str, output: &str, n: usize) -> Vec<RawRecord> {
    h.produce(input, &[(Some(0), "p0", Some(b"{}")), (Some(1), "p1", Some(b"{}"))]).await;
    h.read_until(output, |r| r.len() >= 2 * n).await
}

/// IT-LB-3, TRX-31..33: two instances split the tasks and hand the state over both ways; per
/// key the counts are exactly [1, 2, 3].
pub async fn two_instances_hand_over_state(h: &Harness) {
    let input = h.topic("input", 2, false).await;
    let output = h.topic("output", 2, false).await;
    let app = h.name("lb3");
    let probe_a = Arc::new(Probe::default());
    let a = h.start(&app, "pod-a", counter(&input, &output), probe_a.clone());
    wait_for("A owns both tasks", || probe_a.tasks.load(Ordering::SeqCst) == 2).await;
    round(h, &input, &output, 1).await;
    let probe_b = Arc::new(Probe::default());
    let b = h.start(&app, "pod-b", counter(&input, &output), probe_b.clone());
    wait_for("tasks split 1/1", || {
        probe_a.tasks.load(Ordering::SeqCst) == 1 && probe_b.tasks.load(Ordering::SeqCst) == 1
    })
    .await;
    round(h, &input, &output, 2).await;
    a.stop().await.unwrap();
    wait_for("B owns both tasks", || probe_b.tasks.load(Ordering::SeqCst) == 2).await;
    let outputs = round(h, &input, &output, 3).await;
    b.stop().await.unwrap();
    let counts = counts_by_key(&outputs);
    assert_eq!(counts.get("p0"), Some(&vec![1, 2, 3]), "{counts:?}");
    assert_eq!(counts.get("p1"), Some(&vec![1, 2, 3]), "{counts:?}");
}

/// LIFE-21: a clean stop leaves the group before `run()` returns. Under a session timeout of
/// 45 s, two instances take turns: each holds all four tasks, counts one record per partition,
/// and stops cleanly; right after `run()` returned, `members(group)` (the broker's member list)
/// must be empty, and the next instance must hold every task well within that session (30 s).
/// A stop that returns while its consumer's close still runs in the background leaves the
/// member listed, and in a process that exits then, the group waits for it to rejoin until its
/// session expires: ≥ 45 s. Six turns, because such a close races the check.
pub async fn a_clean_stop_leaves_the_group<F>(h: &Harness, members: impl Fn(String) -> F)
where
    F: std::future::Future<Output = Vec<String>>,
{
    const SESSION: Duration = Duration::from_secs(45);
    const WITHIN: Duration = Duration::from_secs(30);
    let h = &h.with_session_timeout(SESSION);
    let input = h.topic("input", 4, false).await;
    let output = h.topic("output", 4, false).await;
    let app = h.name("leave");
    let mut waits = Vec::new();
    for turn in 1..=6usize {
        let probe = Arc::new(Probe::default());
        let client = if turn % 2 == 1 { "pod-a" } else { "pod-b" };
        let started = tokio::time::Instant::now();
        let running = h.start(&app, client, counter(&input, &output), probe.clone());
        while probe.tasks.load(Ordering::SeqCst) != 4 {
            let waited = started.elapsed();
            assert!(
                waited < WITHIN,
                "turn {turn}: {client} held {} of 4 tasks {waited:?} after its start, the previous instance having \
                 stopped cleanly (session timeout {SESSION:?}) (earlier turns: {waits:?})",
                probe.tasks.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        waits.push(started.elapsed());
        let records: Vec<Seed<'_>> = (0..4).map(|p| (Some(p), "k", Some(b"{}".as_slice()))).collect();
        h.produce(&input, &records).await;
        let outputs = h.read_until(&output, |r| r.len() >= 4 * turn).await;
        running.stop().await.unwrap();
        let left = members(app.clone()).await;
        assert!(left.is_empty(), "turn {turn}: run() of {client} returned with the group's members still {left:?}");
        assert_eq!(outputs.len(), 4 * turn, "one output per input");
    }
    // The counter keeps a count per task: each partition's key "k" counted 1..=6, once each.
    let mut counts = counts_by_key(&h.read(&output).await).remove("k").unwrap_or_default();
    counts.sort_unstable();
    let want: Vec<i64> = (1..=6).flat_map(|n| [n; 4]).collect();
    assert_eq!(counts, want, "every turn counted once per partition (waits for all tasks: {waits:?})");
}

const PAD: Attribute<String> = Attribute::new("pad", &STR);

/// STO-05..07 beyond the RocksDB store's cache (256 KiB per store): 300 keys on one
/// partition with ~2 KiB of state each, so every round's writes overflow the cache and go into
/// RocksDB, and the next round reads them back from it. Three rounds on one instance, then a
/// handover (the new owner restores the changelog into a new store) and a fourth round: every
/// key counts exactly [1, 2, 3, 4]. A state lost or stale in the cache or in RocksDB repeats or
/// skips a count.
pub async fn state_beyond_the_store_cache(h: &Harness) {
    const KEYS: usize = 300;
    let input = h.topic("input", 1, false).await;
    let output = h.topic("output", 1, false).await;
    let app = h.name("cache");
    let stage = |input: &str, output: &str| {
        let output = output.to_owned();
        transformer([input]).transform(move |msg, mut state, o| {
            let count = state.get(&COUNT)?.unwrap_or(0) + 1;
            state.set(&COUNT, count)?;
            state.set(&PAD, format!("{count:>2048}"))?;
            o.send(Message::new(output.as_str(), msg.key.as_str(), Event::new().with(&COUNT, count)?));
            o.set_state(state);
            Ok(())
        })
    };
    let keys: Vec<String> = (0..KEYS).map(|k| format!("key-{k:03}")).collect();
    let round = |n: usize| {
        let (keys, input, output) = (&keys, &input, &output);
        async move {
            let seeds: Vec<Seed<'_>> = keys.iter().map(|k| (Some(0), k.as_str(), Some(&b"{}"[..]))).collect();
            h.produce(input, &seeds).await;
            h.read_until(output, |r| r.len() >= KEYS * n).await
        }
    };
    let probe_a = Arc::new(Probe::default());
    let a = h.start(&app, "pod-a", stage(&input, &output), probe_a.clone());
    wait_for("A owns the task", || probe_a.tasks.load(Ordering::SeqCst) == 1).await;
    for n in 1..=3 {
        round(n).await;
    }
    a.stop().await.unwrap();
    let probe_b = Arc::new(Probe::default());
    let b = h.start(&app, "pod-b", stage(&input, &output), probe_b.clone());
    wait_for("B owns the task", || probe_b.tasks.load(Ordering::SeqCst) == 1).await;
    let outputs = round(4).await;
    b.stop().await.unwrap();
    let counts = counts_by_key(&outputs);
    assert_eq!(counts.len(), KEYS, "every key has outputs");
    for key in &keys {
        assert_eq!(counts.get(key), Some(&vec![1, 2, 3, 4]), "{key}");
    }
}

/// TRX-31 (start order: fence, then restore): a task handed over while its previous owner's
/// last commit is still completing — the commit decided, its changelog marker late — continues
/// from that commit's state. The new owner's fence waits for the commit to complete, and only
/// then does the restore read the changelog; a restore before the fence would stop at the open
/// transaction, miss the last count and repeat it. `late_changelog_markers(true)` must make
/// every changelog marker land seconds late (longer than a handover takes), `false` undo it.
pub async fn handover_while_the_changelog_marker_is_late(h: &Harness, late_changelog_markers: impl Fn(bool)) {
    let input = h.topic("input", 1, false).await;
    let output = h.topic("output", 1, false).await;
    let app = h.name("trx31");
    let probe_a = Arc::new(Probe::default());
    let a = h.start(&app, "pod-a", counter(&input, &output), probe_a.clone());
    wait_for("A owns the task", || probe_a.tasks.load(Ordering::SeqCst) == 1).await;
    h.produce(&input, &[(Some(0), "k", Some(b"{}"))]).await;
    h.read_until(&output, |r| r.len() == 1).await;
    // A's next commit: output and offset decided at once, the changelog marker late.
    late_changelog_markers(true);
    h.produce(&input, &[(Some(0), "k", Some(b"{}"))]).await;
    h.read_until(&output, |r| r.len() == 2).await;
    a.stop().await.unwrap();
    let probe_b = Arc::new(Probe::default());
    let b = h.start(&app, "pod-b", counter(&input, &output), probe_b.clone());
    wait_for("B owns the task", || probe_b.tasks.load(Ordering::SeqCst) == 1).await;
    late_changelog_markers(false);
    h.produce(&input, &[(Some(0), "k", Some(b"{}"))]).await;
    let outputs = h.read_until(&output, |r| r.len() == 3).await;
    b.stop().await.unwrap();
    let counts = counts_by_key(&outputs);
    assert_eq!(counts.get("k"), Some(&vec![1, 2, 3]), "{counts:?}");
}

/// TRX-20, TRX-03: records of one key in one batch run in order, each seeing the state the
/// previous one set, and only the batch's final state is written to the changelog.
pub async fn one_state_write_per_key_and_batch(h: &Harness) {
    let input = h.topic("input", 1, false).await;
    let output = h.topic("output", 1, false).await;
    let app = h.name("trx20");
    // Written before the app starts, so its first fetch holds all three.
    h.produce(&input, &[(None, "k", Some(b"{}")), (None, "k", Some(b"{}")), (None, "k", Some(b"{}"))]).await;
    let running = h.start(&app, "pod-0", counter(&input, &output), Arc::new(Probe::default()));
    let outputs = h.read_until(&output, |r| r.len() >= 3).await;
    running.stop().await.unwrap();
    assert_eq!(counts_by_key(&outputs).get("k"), Some(&vec![1, 2, 3]));
    let changelog = h.read(&format!("{app}-changelog")).await;
    let values: Vec<&[u8]> = changelog.iter().map(value).collect();
    assert_eq!(values, vec![&br#"{"count":3}"#[..]], "one changelog write for the batch");
}

/// The keys [`held_first_commit`] produces, in turn.
const GATHER_KEYS: [&str; 4] = ["k0", "k1", "k2", "k3"];

/// A counter application (`pod-0`, one input and one output partition) whose first batch, one
/// record of `k0`, is committing with its output's delivery held, so it cannot finish; `seeds`
/// more records of [`GATHER_KEYS`] in turn are produced behind it.
struct HeldFirstCommit {
    input: String,
    output: String,
    app: String,
    holding: Arc<doubles::Holding>,
    probe: Arc<Probe>,
    running: Running,
}

async fn held_first_commit(h: &Harness, app: &str, seeds: usize) -> HeldFirstCommit {
    let input = h.topic("input", 1, false).await;
    let output = h.topic("output", 1, false).await;
    let app = h.name(app);
    let holding = Arc::new(doubles::Holding::new(h.kafka.clone(), output.clone()));
    let probe = Arc::new(Probe::default());
    let running = h.with_kafka(holding.clone()).start(&app, "pod-0", counter(&input, &output), probe.clone());
    wait_for("the task started", || probe.tasks.load(Ordering::SeqCst) == 1).await;
    h.produce(&input, &[(Some(0), "k0", Some(b"{}"))]).await;
    in_transaction(&probe, &output).await;
    let seeds: Vec<Seed<'_>> = (0..seeds).map(|i| (Some(0), GATHER_KEYS[i % 4], Some(&b"{}"[..]))).collect();
    h.produce(&input, &seeds).await;
    HeldFirstCommit { input, output, app, holding, probe, running }
}

/// Inputs the stage was handed so far.
fn processed(probe: &Probe) -> usize {
    probe.recording.events().iter().filter(|e| matches!(e, Observed::MessageIn { .. })).count()
}

/// Transactions committed so far.
fn committed(probe: &Probe) -> usize {
    probe.recording.events().iter().filter(|e| matches!(e, Observed::TransactionCommitted)).count()
}

/// TRX-45, TRX-02, MET-03: while a batch's commit waits (its output's delivery held), the next
/// batch gathers every poll made meanwhile, up to `max_batch_records`, and commits them as one
/// transaction per task: each key's counts continue exactly, the gathered batch writes each key
/// once to the changelog, and the observer counts it as one batch of all its records, once per
/// committed batch (in either producer shape: one input partition, so one transaction per
/// batch). `h` must poll 5 records at a time (`with_batches(5, cap)`, `cap` a multiple of 5 up
/// to 40); with `cap` 5 every poll is its own batch, as in Python flechtwerk.
pub async fn batches_gather_polls_while_a_commit_waits(h: &Harness) {
    const SEEDS: usize = 40;
    let Some((5, cap)) = h.batches else { panic!("the harness must poll 5 records at a time") };
    assert!(cap % 5 == 0 && (5..=SEEDS).contains(&cap));
    let HeldFirstCommit { output, app, holding, probe, running, .. } =
        held_first_commit(h, &format!("gather{cap}"), SEEDS).await;
    // The next batch gathers polls until it holds `cap` records, then polls no more; without
    // gathering it holds the first poll that brought records (up to 5: a broker's poll may
    // return fewer).
    let gathered = if cap > 5 {
        wait_for("the next batch gathered its records", || processed(&probe) > cap).await;
        cap
    } else {
        wait_for("the next batch polled its records", || processed(&probe) > 1).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        processed(&probe) - 1
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(processed(&probe), 1 + gathered, "a batch gathers up to max_batch_records and no further");
    assert!((1..=cap).contains(&gathered), "{gathered} records in the next batch");
    assert_eq!(committed(&probe), 0, "nothing commits while the first batch's delivery is held");
    holding.release();
    let outputs = h.read_until(&output, |r| r.len() > SEEDS).await;
    running.stop().await.unwrap();
    let counts = counts_by_key(&outputs);
    assert_eq!(counts["k0"], (1..=11).collect::<Vec<i64>>());
    for key in ["k1", "k2", "k3"] {
        assert_eq!(counts[key], (1..=10).collect::<Vec<i64>>(), "{key}");
    }
    let events = probe.recording.events();
    let sizes: Vec<usize> = events
        .iter()
        .filter_map(|e| if let Observed::BatchProcessed { size } = e { Some(*size) } else { None })
        .collect();
    assert_eq!(sizes.iter().sum::<usize>(), 1 + SEEDS, "every record in one batch observation: {sizes:?}");
    // One observation per committed batch, with every record it gathered (MET-03): the first
    // batch's one record, then the gathered batch whole (not its polls one by one).
    assert_eq!(sizes[..2], [1, gathered], "the first batch, then the gathered one (MET-03): {sizes:?}");
    assert!(sizes.iter().all(|&size| size <= cap), "no batch beyond max_batch_records: {sizes:?}");
    // At least the first batch and one per `cap` records after it (more when polls return
    // fewer than 5 records, or a commit is quick).
    let transactions = committed(&probe);
    assert!((1 + SEEDS / cap..=1 + SEEDS).contains(&transactions), "{transactions} transactions");
    assert_eq!(sizes.len(), transactions, "one batch observation per committed batch (MET-03): {sizes:?}");
    // The second batch (the first `gathered` seeds) wrote each key once: its last state.
    let mut want: BTreeMap<&str, i64> = BTreeMap::from([("k0", 1)]);
    for i in 0..gathered {
        *want.entry(GATHER_KEYS[i % 4]).or_default() += 1;
    }
    let changelog = h.read(&format!("{app}-changelog")).await;
    let second: Vec<(String, String)> = changelog[1..1 + want.len()]
        .iter()
        .map(|r| {
            let key = String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned();
            (key, String::from_utf8_lossy(value(r)).into_owned())
        })
        .collect();
    let want: Vec<(String, String)> =
        want.into_iter().map(|(key, count)| (key.to_owned(), format!(r#"{{"count":{count}}}"#))).collect();
    assert_eq!(second, want, "the second batch writes each key's final state once");
}

/// LIFE-21 with TRX-45: a stop raised while the next batch gathers polls (its commit waiting
/// behind the batch in flight) ends the gathering, and both batches commit before the run
/// returns: their outputs are visible at once, and a successor neither repeats nor skips them.
pub async fn stop_while_gathering_commits_the_gathered_batch(h: &Harness) {
    const SEEDS: usize = 12;
    let Some((5, cap)) = h.batches else { panic!("the harness must poll 5 records at a time") };
    assert!(cap > SEEDS, "the gathering must still be polling when the stop comes");
    let HeldFirstCommit { input, output, app, holding, probe, running } =
        held_first_commit(h, "stopgather", SEEDS).await;
    wait_for("the next batch gathered every record", || processed(&probe) == 1 + SEEDS).await;
    // The stop comes while the gathering still polls for more (the cap is not reached).
    let stopping = tokio::spawn(running.stop());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!stopping.is_finished(), "the run waits for the batch in flight");
    assert_eq!(committed(&probe), 0, "nothing commits while the first batch's delivery is held");
    holding.release();
    stopping.await.expect("the stop's task").unwrap();
    // Both batches committed before the run returned.
    let outputs = h.read_until(&output, |r| r.len() > SEEDS).await;
    assert_eq!(outputs.len(), 1 + SEEDS, "every gathered record committed its output by the stop");
    let counts = counts_by_key(&outputs);
    assert_eq!(counts["k0"], vec![1, 2, 3, 4]);
    for key in ["k1", "k2", "k3"] {
        assert_eq!(counts[key], vec![1, 2, 3], "{key}");
    }
    assert_eq!(processed(&probe), 1 + SEEDS);
    // A successor starts from the gathered batch's offsets and state: the next k1 is its fourth.
    let successor = h.start(&app, "pod-1", counter(&input, &output), Arc::new(Probe::default()));
    h.produce(&input, &[(Some(0), "k1", Some(b"{}"))]).await;
    let outputs = h.read_until(&output, |r| r.len() > 1 + SEEDS).await;
    successor.stop().await.unwrap();
    let outputs_after = h.read(&output).await;
    assert_eq!(outputs_after.len(), 2 + SEEDS, "the successor repeated nothing: {:?}", keys(&outputs_after));
    assert_eq!(counts_by_key(&outputs)["k1"], vec![1, 2, 3, 4]);
}

/// TRX-21, STG-43: an empty state over a key without state writes nothing (no tombstone); an
/// empty state over an existing one deletes it with a tombstone (null value, never `b""`).
pub async fn empty_state_deletes_only_what_exists(h: &Harness) {
    let input = h.topic("input", 1, false).await;
    let output = h.topic("output", 1, false).await;
    let app = h.name("trx21");
    let out = output.clone();
    let stage = transformer([input.as_str()]).transform(move |msg, mut state, o| {
        if msg.key == "set" {
            state.set(&N, 1)?;
        } else {
            state = flechtwerk::State::new();
        }
        o.set_state(state);
        o.send(Message::new(out.as_str(), msg.key.as_str(), Event::new()));
        Ok(())
    });
    h.produce(&input, &[(None, "absent", Some(b"{}"))]).await;
    let running = h.start(&app, "pod-0", stage, Arc::new(Probe::default()));
    h.read_until(&output, |r| !r.is_empty()).await;
    h.produce(&input, &[(None, "set", Some(b"{}"))]).await;
    h.read_until(&output, |r| r.len() >= 2).await;
    // Same key "set", now emptied: a separate record after the first one committed.
    let out2 = output.clone();
    running.stop().await.unwrap();
    let stage = transformer([input.as_str()]).transform(move |msg, _state, o| {
        o.set_state(flechtwerk::State::new());
        o.send(Message::new(out2.as_str(), msg.key.as_str(), Event::new()));
        Ok(())
    });
    h.produce(&input, &[(None, "set", Some(b"{}"))]).await;
    let running = h.start(&app, "pod-0", stage, Arc::new(Probe::default()));
    h.read_until(&output, |r| r.len() >= 3).await;
    running.stop().await.unwrap();
    let changelog = h.read(&format!("{app}-changelog")).await;
    let entries: Vec<_> = changelog.iter().map(|r| (r.key.as_deref(), r.value.as_deref())).collect();
    assert_eq!(entries, vec![(Some(&b"set"[..]), Some(&br#"{"n":1}"#[..])), (Some(&b"set"[..]), None)]);
}

/// TRX-14, INV-11: with the default policy an undecodable record ends the run before any
/// transaction: nothing is output, no offset commits, and the decision is counted as raised.
pub async fn default_policy_raises_before_any_transaction(h: &Harness) {
    let input = h.topic("input", 1, false).await;
    let output = h.topic("output", 1, false).await;
    let app = h.name("trx14");
    h.produce(&input, &[(None, "k", Some(br#"{"n":1}"#)), (None, "k", Some(b"[1,2]"))]).await;
    let out = output.clone();
    let stage = transformer([input.as_str()]).transform(move |msg, _state, o| {
        o.send(Message::new(out.as_str(), msg.key.as_str(), msg.value));
        Ok(())
    });
    let probe = Arc::new(Probe::default());
    let error = h.start(&app, "pod-0", stage, probe.clone()).ended().await.expect_err("the run crashes");
    let Error::InvalidMessage(policy) = &error else { panic!("not an invalid-message error: {error:?}") };
    assert!(error.to_string().contains(&format!("{input}/0/1")), "{error}");
    assert!(matches!(**policy, flechtwerk::wire::PolicyError::Raised(_)));
    assert!(h.read(&output).await.is_empty(), "the good record of the batch must not be output either");
    assert_eq!(h.committed(&app, &[TopicPartition::new(&input, 0)]).await, vec![None]);
    let events = probe.recording.events();
    assert!(events.contains(&Observed::MessageInvalid { topic: input.clone(), outcome: InvalidOutcome::Raised }));
    assert!(!events.contains(&Observed::TransactionCommitted));
}

/// A stage wrapper that records whether its teardown ran (STG-02).
pub struct TornDown<S> {
    pub inner: S,
    pub torn_down: Arc<std::sync::atomic::AtomicBool>,
}

impl<S: Transformer> Transformer for TornDown<S> {
    fn input_topics(&self) -> Vec<String> {
        self.inner.input_topics()
    }
    async fn transform(
        &self,
        msg: flechtwerk::IncomingMessage,
        state: flechtwerk::State,
        out: &mut flechtwerk::Output<'_>,
    ) -> Result<(), flechtwerk::stage::BoxError> {
        self.inner.transform(msg, state, out).await
    }
    async fn teardown(&self) -> Result<(), flechtwerk::stage::BoxError> {
        self.torn_down.store(true, Ordering::SeqCst);
        Ok(())
    }
}

/// Waits until the engine sent an output to `topic` inside a transaction, and a little longer
/// for the record to reach the broker.
async fn in_transaction(probe: &Probe, topic: &str) {
    wait_for("an output is sent inside the batch's transaction", || {
        probe.recording.events().iter().any(|e| matches!(e, Observed::MessageOutBytes { topic: t, .. } if t == topic))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
}

fn keys(records: &[RawRecord]) -> Vec<String> {
    records.iter().map(|r| String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned()).collect()
}

/// How long a test waits for a record written after an aborted transaction: well below the
/// transaction timeout (60 s), so a transaction left open instead of aborted fails the test.
pub const AFTER_ABORT_VISIBLE_MAX: Duration = Duration::from_secs(20);

/// Writes a committed record to `topic` and waits (within [`AFTER_ABORT_VISIBLE_MAX`]) until a
/// `read_committed` reader sees it: proof that no open transaction holds the topic's last
/// stable offset below it. Returns what the reader saw.
async fn lso_not_held(h: &Harness, topic: &str) -> Vec<RawRecord> {
    h.produce(topic, &[(Some(0), "after", Some(b"{}"))]).await;
    h.read_within(topic, AFTER_ABORT_VISIBLE_MAX, |r| keys(r).iter().any(|k| k == "after")).await
}

/// IT-EOS-2 with a failure *after* the transaction began, TRX-15: a batch whose second output
/// the broker refuses (larger than its topic's `max.message.bytes`) after the first output was
/// appended inside the transaction ends the run with that error; the transaction is aborted at
/// once (the first output's topic is not held at its LSO), and nothing of the batch is visible:
/// no output, no state, no offset.
pub async fn failure_after_begin_aborts_at_once(h: &Harness) {
    let input = h.topic("input", 1, false).await;
    let output = h.topic("output", 1, false).await;
    let limited = h.name("limited");
    let spec = NewTopic::new(&limited, 1).replication(h.replication).config("max.message.bytes", "1024");
    h.kafka.admin().unwrap().create_topic(&spec).await.unwrap();
    let app = h.name("eos2b");
    h.produce(&input, &[(None, "k", Some(br#"{"n":1}"#))]).await;
    let (out, too_large) = (output.clone(), limited.clone());
    let stage = transformer([input.as_str()]).transform(move |msg, mut state, o| {
        o.send(Message::new(out.as_str(), msg.key.as_str(), msg.value));
        o.send(Message::new(too_large.as_str(), "big", incompressible(4096)));
        state.set(&CURSOR, "half".to_owned())?;
        o.set_state(state);
        Ok(())
    });
    let error = h.start(&app, "pod-0", stage, Arc::new(Probe::default())).ended().await.expect_err("the send fails");
    assert!(matches!(&error, Error::Kafka(_)), "{error:?}");
    assert!(error.to_string().contains(&limited), "the error names the refused topic: {error}");
    let outputs = lso_not_held(h, &output).await;
    assert_eq!(keys(&outputs), ["after"], "the aborted batch's first output must stay invisible");
    assert!(h.read(&format!("{app}-changelog")).await.is_empty());
    assert_eq!(h.committed(&app, &[TopicPartition::new(&input, 0)]).await, vec![None]);
}

/// Shutdown mid-transaction: a batch whose delivery hangs is abandoned after the shutdown grace;
/// its open transaction is aborted before the run returns, so the output's LSO is not held, and
/// the stage's teardown ran (STG-02).
pub async fn shutdown_mid_transaction_aborts(h: &Harness) {
    let input = h.topic("input", 1, false).await;
    let output = h.topic("output", 1, false).await;
    let app = h.name("stopmid");
    let holding = Arc::new(doubles::Holding::new(h.kafka.clone(), output.clone()));
    let held = h.with_kafka(holding.clone());
    let torn_down = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stage = TornDown { inner: counter(&input, &output), torn_down: torn_down.clone() };
    let probe = Arc::new(Probe::default());
    let running = held.start(&app, "pod-0", stage, probe.clone());
    wait_for("the task started", || probe.tasks.load(Ordering::SeqCst) == 1).await;
    h.produce(&input, &[(Some(0), "k", Some(b"{}"))]).await;
    // The batch's output is on the broker inside the open transaction; its delivery hangs.
    in_transaction(&probe, &output).await;
    running.stop().await.expect("a clean stop");
    assert!(torn_down.load(Ordering::SeqCst), "the stage's teardown runs on shutdown");
    holding.release();
    let outputs = lso_not_held(h, &output).await;
    assert_eq!(keys(&outputs), ["after"], "the abandoned batch must stay invisible");
    assert_eq!(h.committed(&app, &[TopicPartition::new(&input, 0)]).await, vec![None]);
}

/// LIFE-22, STG-02: dropping the `run_until` future (a caller's `select!` or timeout) winds the
/// run down like a shutdown: the open transaction is aborted, the tasks stop, the stage's
/// teardown runs.
pub async fn dropped_run_future_cleans_up(h: &Harness) {
    let input = h.topic("input", 1, false).await;
    let output = h.topic("output", 1, false).await;
    let app = h.name("dropped");
    let holding = Arc::new(doubles::Holding::new(h.kafka.clone(), output.clone()));
    let torn_down = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stage = TornDown { inner: counter(&input, &output), torn_down: torn_down.clone() };
    let probe = Arc::new(Probe::default());
    let flechtwerk = Flechtwerk::builder()
        .application_id(&app)
        .client_id("pod-0")
        .kafka(holding.clone())
        .replication_factor(h.replication)
        .session_timeout(Duration::from_secs(6))
        .observer(probe.clone())
        .build(stage)
        .unwrap();
    let run = tokio::spawn(async move {
        let _ = flechtwerk.run().await;
    });
    wait_for("the task started", || probe.tasks.load(Ordering::SeqCst) == 1).await;
    h.produce(&input, &[(Some(0), "k", Some(b"{}"))]).await;
    in_transaction(&probe, &output).await;
    run.abort(); // drops the run future
    let _ = run.await;
    wait_for("the stage's teardown ran", || torn_down.load(Ordering::SeqCst)).await;
    assert!(
        probe.recording.events().ends_with(&[Observed::TasksAssigned { count: 0 }]),
        "the tasks stopped: {:?}",
        probe.recording.events().last()
    );
    holding.release();
    let outputs = lso_not_held(h, &output).await;
    assert_eq!(keys(&outputs), ["after"], "the interrupted batch must stay invisible");
}

/// Runs `stage` as `app` until it ends by itself, and returns its error.
async fn crash<S: Transformer>(h: &Harness, app: &str, stage: S) -> Error {
    h.start(app, "pod-0", stage, Arc::new(Probe::default())).ended().await.expect_err("the run must fail")
}

fn forward(input: &str, output: &str) -> impl Transformer + use<> {
    let output = output.to_owned();
    transformer([input]).transform(move |msg, _state, o| {
        o.send(Message::new(output.as_str(), msg.key.as_str(), msg.value));
        Ok(())
    })
}

/// IT-CFG-3, LIFE-13: a declared config topic that does not exist fails the startup with an
/// unknown-topic error naming it, before anything is consumed.
pub async fn missing_config_topic_fails_startup(h: &Harness) {
    let input = h.topic("input", 1, false).await;
    let missing = h.name("no-such-configs");
    let stage = transformer([input.as_str()]).config_topics([missing.as_str()]).transform(|_, _, _| Ok(()));
    let error = crash(h, &h.name("cfg3"), stage).await;
    let Error::Kafka(kafka) = &error else { panic!("not a Kafka error: {error:?}") };
    assert_eq!(kafka.kind(), flechtwerk::kafka::KafkaErrorKind::UnknownTopic, "{error}");
    assert!(error.to_string().contains(&missing), "{error}");
}

/// LIFE-14, ERR-05: input topics with unequal partition counts fail the startup, naming the
/// counts.
pub async fn unequal_input_partition_counts_fail_startup(h: &Harness) {
    let a = h.topic("in-a", 2, false).await;
    let b = h.topic("in-b", 3, false).await;
    let stage = transformer([a.as_str(), b.as_str()]).transform(|_, _, _| Ok(()));
    let error = crash(h, &h.name("err05"), stage).await.to_string();
    assert!(
        error.contains("must have equal partition counts") && error.contains(": 2") && error.contains(": 3"),
        "{error}"
    );
}

/// LIFE-14, ERR-06: a pre-existing changelog with another partition count than the inputs fails
/// the startup; LIFE-15: one with the same count is adopted.
pub async fn changelog_partition_count_must_match(h: &Harness) {
    let input = h.topic("input", 2, false).await;
    let app = h.name("err06");
    let changelog = format!("{app}-changelog");
    let spec = NewTopic::new(&changelog, 3).replication(h.replication).compacted();
    h.kafka.admin().unwrap().create_topic(&spec).await.unwrap();
    let error = crash(h, &app, forward(&input, &input)).await.to_string();
    assert!(error.contains("repartitioning requires a state migration") && error.contains(&changelog), "{error}");
    // LIFE-15: a pre-existing changelog with the inputs' count is adopted (and described once).
    let adopted = h.name("err06-adopted");
    let adopted_changelog = format!("{adopted}-changelog");
    let spec = NewTopic::new(&adopted_changelog, 2).replication(h.replication).compacted();
    h.kafka.admin().unwrap().create_topic(&spec).await.unwrap();
    let recording = Arc::new(doubles::Recording::new(h.kafka.clone()));
    let probe = Arc::new(Probe::default());
    let running = h.with_kafka(recording.clone()).start(&adopted, "pod-0", forward(&input, &input), probe.clone());
    wait_for("both tasks started", || probe.tasks.load(Ordering::SeqCst) == 2).await;
    running.stop().await.unwrap();
    let described = recording.clients.lock().unwrap().described.clone();
    assert_eq!(described.iter().filter(|t| **t == adopted_changelog).count(), 1, "{described:?}");
}

/// STO-03, INV-40: a state value in the changelog that does not decode crashes the task with a
/// named error when its key is read, even under a skipping invalid-message policy (state bytes
/// are framework-owned: the hook is never consulted).
pub async fn corrupt_state_crashes_with_a_named_error(h: &Harness) {
    let input = h.topic("input", 1, false).await;
    let app = h.name("sto03");
    let changelog = format!("{app}-changelog");
    let spec = NewTopic::new(&changelog, 1).replication(h.replication).compacted();
    h.kafka.admin().unwrap().create_topic(&spec).await.unwrap();
    h.produce(&changelog, &[(Some(0), "k", Some(b"not json"))]).await;
    h.produce(&input, &[(Some(0), "k", Some(b"{}"))]).await;
    let stage = transformer([input.as_str()]).on_invalid_message(|_| InvalidMessageAction::Skip).transform(
        |_, mut state, o| {
            state.set(&N, 1)?;
            o.set_state(state);
            Ok(())
        },
    );
    let error = crash(h, &app, stage).await;
    assert!(matches!(&error, Error::CorruptState { partition: 0, key, .. } if key == "k"), "{error:?}");
    assert!(error.to_string().contains("reset the state"), "{error}");
}

/// STO-13: a changelog key that is not UTF-8 crashes the restore with a named error.
pub async fn non_utf8_changelog_key_crashes_the_restore(h: &Harness) {
    let input = h.topic("input", 1, false).await;
    let app = h.name("sto13");
    let changelog = format!("{app}-changelog");
    let spec = NewTopic::new(&changelog, 1).replication(h.replication).compacted();
    h.kafka.admin().unwrap().create_topic(&spec).await.unwrap();
    let producer = h.kafka.producer(ProducerConfig::idempotent(h.name("bad-key"))).unwrap();
    let record =
        ProducerRecord::new(&changelog, Bytes::from_static(b"\xff\xfe"), Bytes::from_static(b"{}")).to_partition(0);
    producer.send(record).await.unwrap().await.unwrap();
    producer.close().await;
    let error = crash(h, &app, forward(&input, &input)).await;
    assert!(matches!(&error, Error::CorruptState { partition: 0, .. }), "{error:?}");
}

/// IT-RST-2/3/4, STO-11: the restore replays every changelog record (tombstones delete), passes
/// values through as bytes (a non-JSON value is only an error once its key is read), and an
/// empty changelog restores nothing.
pub async fn restore_replays_the_changelog(h: &Harness) {
    let input = h.topic("input", 2, false).await;
    let output = h.topic("output", 2, false).await;
    let app = h.name("rst");
    let changelog = format!("{app}-changelog");
    let spec = NewTopic::new(&changelog, 2).replication(h.replication).compacted();
    h.kafka.admin().unwrap().create_topic(&spec).await.unwrap();
    h.produce(
        &changelog,
        &[
            (Some(0), "alive", Some(br#"{"count":5}"#)),
            (Some(0), "gone", Some(br#"{"count":9}"#)),
            (Some(0), "gone", None),
            (Some(0), "opaque", Some(b"\x80\x04 not json")),
        ],
    )
    .await;
    let probe = Arc::new(Probe::default());
    let running = h.start(&app, "pod-0", counter(&input, &output), probe.clone());
    h.produce(&input, &[(Some(0), "alive", Some(b"{}")), (Some(0), "gone", Some(b"{}"))]).await;
    let outputs = h.read_until(&output, |r| r.len() >= 2).await;
    running.stop().await.unwrap();
    let counts = counts_by_key(&outputs);
    assert_eq!(counts.get("alive"), Some(&vec![6]), "alive continues from its restored count: {counts:?}");
    assert_eq!(counts.get("gone"), Some(&vec![1]), "a tombstone deleted gone: {counts:?}");
    let events = probe.recording.events();
    assert!(events.contains(&Observed::StateRestored { partition: 0, count: 4 }), "{events:?}");
    assert!(events.contains(&Observed::StateRestored { partition: 1, count: 0 }), "{events:?}");
}

/// STO-05: a restart on the same state directory reuses the copy its previous run left at its
/// clean stop: the restore reads only the changelog's tail (nothing: the copy is current), and
/// the counts continue. A start on another directory restores the changelog in full; a copy
/// written for another partition count is discarded.
#[cfg(not(madsim))]
pub async fn restart_reuses_local_state(h: &Harness) {
    let input = h.topic("input", 1, false).await;
    let output = h.topic("output", 1, false).await;
    let app = h.name("reuse");
    let root = std::env::temp_dir().join(format!("flechtwerk-reuse-{app}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let stores: Arc<dyn flechtwerk::state::StateStores> = Arc::new(flechtwerk::state::RocksDbStores::new(&root));
    let run = |keys: &'static [&'static str], want: usize, stores: Arc<dyn flechtwerk::state::StateStores>| {
        let (app, input, output) = (app.clone(), input.clone(), output.clone());
        async move {
            let probe = Arc::new(Probe::default());
            let running = h.start_on(&app, "pod-0", counter(&input, &output), probe.clone(), Some(stores));
            let records: Vec<Seed<'_>> = keys.iter().map(|k| (Some(0), *k, Some(b"{}".as_slice()))).collect();
            h.produce(&input, &records).await;
            let outputs = h.read_until(&output, |r| r.len() >= want).await;
            running.stop().await.unwrap();
            let restored: Vec<usize> = probe
                .recording
                .events()
                .iter()
                .filter_map(|e| match e {
                    Observed::StateRestored { partition: 0, count } => Some(*count),
                    _ => None,
                })
                .collect();
            (counts_by_key(&outputs), restored)
        }
    };
    let (counts, restored) = run(&["a", "a", "b"], 3, stores.clone()).await;
    assert_eq!(counts.get("a"), Some(&vec![1, 2]), "{counts:?}");
    assert_eq!(restored, vec![0], "an empty changelog");
    let (counts, restored) = run(&["a"], 4, stores.clone()).await;
    assert_eq!(counts.get("a"), Some(&vec![1, 2, 3]), "the count continues on the reused copy: {counts:?}");
    assert_eq!(restored, vec![0], "the copy was current: no record restored");
    let elsewhere: Arc<dyn flechtwerk::state::StateStores> =
        Arc::new(flechtwerk::state::RocksDbStores::new(root.join("elsewhere")));
    let (counts, restored) = run(&["b"], 5, elsewhere).await;
    assert_eq!(counts.get("b"), Some(&vec![1, 2]), "{counts:?}");
    assert!(restored.first().is_some_and(|&n| n >= 2), "another directory restores in full: {restored:?}");
    let _ = std::fs::remove_dir_all(&root);
}

/// INV-21: `message_in_bytes` counts every raw record before decoding (a skipped one too);
/// `message_in` only the records dispatched to `transform`.
pub async fn input_metrics_split(h: &Harness) {
    let input = h.topic("input", 1, false).await;
    let output = h.topic("output", 1, false).await;
    h.produce(&input, &[(None, "k", Some(b"{broken")), (None, "k", Some(br#"{"n":1}"#))]).await;
    let out = output.clone();
    let stage = transformer([input.as_str()]).on_invalid_message(|_| InvalidMessageAction::Skip).transform(
        move |msg, _state, o| {
            o.send(Message::new(out.as_str(), msg.key.as_str(), msg.value));
            Ok(())
        },
    );
    let probe = Arc::new(Probe::default());
    let running = h.start(&h.name("inv21"), "pod-0", stage, probe.clone());
    h.read_until(&output, |r| !r.is_empty()).await;
    running.stop().await.unwrap();
    let events = probe.recording.events();
    let bytes: Vec<usize> = events
        .iter()
        .filter_map(|e| match e {
            Observed::MessageInBytes { topic, bytes } if *topic == input => Some(*bytes),
            _ => None,
        })
        .collect();
    assert_eq!(bytes, vec![1 + 7, 1 + 7], "key + value bytes of both records");
    assert_eq!(events.iter().filter(|e| matches!(e, Observed::MessageIn { .. })).count(), 1, "{events:?}");
}

/// TRX-23, TRX-30, LIFE-04, CFG-17: state identity is (partition, key): one key on two
/// partitions has two states in two changelog partitions. Each task's producer has the
/// transactional id `{application_id}-{partition}` and the client id `{client_id}-{partition}`;
/// the config consumers, the boot's one-shot read (with bounded fetching) and then the drain,
/// are both `{client_id}-config` as in Python, group-less, and commit nothing.
pub async fn identities_and_state_per_partition(h: &Harness) {
    let input = h.topic("input", 2, false).await;
    let output = h.topic("output", 2, false).await;
    let configs = h.topic("configs", 1, true).await;
    h.produce(&configs, &[(Some(0), "c", Some(b"{}"))]).await;
    let app = h.name("ids");
    let recording = Arc::new(doubles::Recording::new(h.kafka.clone()));
    let out = output.clone();
    let stage = transformer([input.as_str()]).config_topics([configs.as_str()]).transform(move |msg, mut state, o| {
        let count = state.get(&COUNT)?.unwrap_or(0) + 1;
        state.set(&COUNT, count)?;
        o.send(Message::new(out.as_str(), msg.key.as_str(), Event::new().with(&COUNT, count)?));
        o.set_state(state);
        Ok(())
    });
    let probe = Arc::new(Probe::default());
    let running = h.with_kafka(recording.clone()).start(&app, "pod-0", stage, probe.clone());
    wait_for("both tasks started", || probe.tasks.load(Ordering::SeqCst) == 2).await;
    h.produce(&input, &[(Some(0), "k", Some(b"{}")), (Some(1), "k", Some(b"{}"))]).await;
    let outputs = h.read_until(&output, |r| r.len() >= 2).await;
    running.stop().await.unwrap();
    assert_eq!(counts_by_key(&outputs).get("k"), Some(&vec![1, 1]), "two independent states");
    let changelog = h.read(&format!("{app}-changelog")).await;
    let entries: Vec<_> = changelog.iter().map(|r| (r.partition, r.key.as_deref().unwrap(), value(r))).collect();
    assert_eq!(entries, vec![(0, &b"k"[..], &br#"{"count":1}"#[..]), (1, &b"k"[..], &br#"{"count":1}"#[..])]);
    let clients = recording.clients.lock().unwrap().clone();
    let mut tasks: Vec<(String, Option<String>)> =
        clients.producers.iter().map(|p| (p.client_id.clone(), p.transactional_id.clone())).collect();
    tasks.sort();
    assert_eq!(
        tasks,
        vec![("pod-0-0".to_owned(), Some(format!("{app}-0"))), ("pod-0-1".to_owned(), Some(format!("{app}-1"))),]
    );
    let consumers: Vec<(String, Option<String>)> =
        clients.consumers.iter().map(|c| (c.client_id.clone(), c.group_id.clone())).collect();
    assert!(consumers.contains(&("pod-0".to_owned(), Some(app.clone()))), "{consumers:?}");
    let config_consumers: Vec<_> = clients.consumers.iter().filter(|c| c.client_id == "pod-0-config").collect();
    assert_eq!(config_consumers.len(), 2, "the bootstrap's and the drain's: {consumers:?}");
    assert!(config_consumers.iter().all(|c| c.group_id.is_none()), "{consumers:?}");
    // The bootstrap's bounded fetching is its own (the first config consumer; the drain keeps
    // the adapter's defaults), and the member consumer has the stage's bounds (issue #14: a
    // few batches ahead, not the whole backlog).
    assert_eq!(config_consumers[0].fetch_limits, Some(FetchLimits::BOOTSTRAP), "{:?}", config_consumers[0]);
    assert_eq!(config_consumers[1].fetch_limits, None, "{:?}", config_consumers[1]);
    let members: Vec<_> = clients.consumers.iter().filter(|c| c.group_id.as_deref() == Some(&*app)).collect();
    assert!(!members.is_empty(), "{consumers:?}");
    assert!(
        members.iter().all(|c| c.fetch_limits == Some(FetchLimits::stage(500))),
        "the member consumer has the stage's bounds at the default max_poll_records (500): {members:?}"
    );
    assert_eq!(h.committed(&app, &[TopicPartition::new(&configs, 0)]).await, vec![None], "CFG-17");
    // LIFE-14, USR-08: the changelog was created, and (fresh) never described afterwards.
    let changelog = format!("{app}-changelog");
    assert!(clients.created.contains(&changelog), "{:?}", clients.created);
    assert!(!clients.described.contains(&changelog), "a fresh changelog is not described: {:?}", clients.described);
}

/// A stage that implements the trait and declares its enricher (STG-03, CFG-13): every config
/// arrives enriched, in every build profile (enrichment is declared in one place).
struct Enriching {
    input: String,
    configs: String,
    output: String,
    enricher: fn(flechtwerk::Config) -> Result<flechtwerk::Config, flechtwerk::stage::BoxError>,
}

impl Transformer for Enriching {
    fn input_topics(&self) -> Vec<String> {
        vec![self.input.clone()]
    }
    fn config_topics(&self) -> Vec<String> {
        vec![self.configs.clone()]
    }
    fn config_enricher(&self) -> Option<&dyn flechtwerk::stage::EnrichConfig> {
        Some(&self.enricher)
    }
    async fn transform(
        &self,
        msg: flechtwerk::IncomingMessage,
        _state: flechtwerk::State,
        out: &mut flechtwerk::Output<'_>,
    ) -> Result<(), flechtwerk::stage::BoxError> {
        if let Some(config) = out.configs().get(&msg.key)? {
            out.send(Message::new(self.output.as_str(), msg.key.as_str(), Event::from(config.into_record())));
        }
        Ok(())
    }
}

const URL: Attribute<String> = Attribute::new("url", &STR);
const HOST: Attribute<String> = Attribute::new("host", &STR);

/// STG-03, CFG-13: a trait-implemented stage's enricher runs for bootstrapped and drained
/// configs alike, and the stage reads the enriched config.
pub async fn trait_stage_enriches_configs(h: &Harness) {
    let input = h.topic("input", 1, false).await;
    let output = h.topic("output", 1, false).await;
    let configs = h.topic("configs", 1, true).await;
    h.produce(&configs, &[(Some(0), "a", Some(br#"{"host":"a.example"}"#))]).await;
    let stage = Enriching {
        input: input.clone(),
        configs: configs.clone(),
        output: output.clone(),
        enricher: |config| {
            let host = config.get(&HOST)?.unwrap_or_default();
            Ok(config.with(&URL, format!("https://{host}/"))?)
        },
    };
    let probe = Arc::new(Probe::default());
    let running = h.start(&h.name("enrich"), "pod-0", stage, probe.clone());
    h.produce(&input, &[(Some(0), "a", Some(b"{}"))]).await;
    h.read_until(&output, |r| !r.is_empty()).await;
    h.produce(&configs, &[(Some(0), "b", Some(br#"{"host":"b.example"}"#))]).await;
    wait_for("b drained", || probe.configs.lock().unwrap().contains_key("b")).await;
    h.produce(&input, &[(Some(0), "b", Some(b"{}"))]).await;
    let outputs = h.read_until(&output, |r| r.len() >= 2).await;
    running.stop().await.unwrap();
    let values: Vec<&[u8]> = outputs.iter().map(value).collect();
    assert_eq!(
        values,
        vec![
            &br#"{"host":"a.example","url":"https://a.example/"}"#[..],
            &br#"{"host":"b.example","url":"https://b.example/"}"#[..]
        ]
    );
}

/// `n` bytes no compression shrinks (a fixed xorshift sequence): producers compress batches, and
/// a broker checks `max.message.bytes` against the compressed size.
pub fn incompressible(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
