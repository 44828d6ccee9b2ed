//! Scenario `counter`: the exactly-once chaos run — the main job.
//!
//! Keyed input over 4 partitions, 2–3 replicas of a counting transformer that joins a config
//! topic, a feeder writing inputs and a writer maintaining the config topic, while a seeded
//! fault schedule crash-restarts replicas at arbitrary points, adds and removes replicas, pauses
//! one past its session timeout (a zombie), makes transactions fail (so they abort), delays
//! commit markers, partitions the network and restarts the broker.
//!
//! Properties checked after quiescence (design.md, "Properties the simulations check"):
//! - per key, the `read_committed` outputs count exactly 1..n, no gap, no repeat (n = inputs of
//!   the key actually in the input topic);
//! - the group's committed offsets reach the end of every input partition;
//! - the changelog's last value per key equals the final count;
//! - every live replica's config store equals the compaction of the config topic;
//! - same seed, same trace hash (checked by the runner with `--check-determinism`).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, TopicPartition};
use flechtwerk::observer::Observer;
use flechtwerk::testing::read_topic;
use flechtwerk::wire::RawRecord;
use flechtwerk::Flechtwerk;
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;
use madsim::task::NodeId;
use madsim::time::sleep;

use crate::cluster::protocol::RequestKind;
use crate::cluster::{Cluster, KafkaClient, RequestFaults};
use crate::runner::{Ctx, Scenario};
use crate::stages::{check_changelog, check_counts, counter};

/// The scenario.
pub static SCENARIO: Scenario = Scenario {
    name: "counter",
    about:
        "exactly-once counting transformer + config join under crashes, zombies, aborts, partitions, broker restarts",
    run: |ctx| Box::pin(run(ctx)) as Pin<Box<dyn std::future::Future<Output = ()>>>,
};

const APP: &str = "counter";
const INPUT: &str = "counter-input";
const OUTPUT: &str = "counter-output";
const CONFIGS: &str = "counter-configs";
const PARTITIONS: u32 = 4;
/// The replicas' group session timeout; a zombie pause exceeds it.
const SESSION_TIMEOUT: Duration = Duration::from_secs(6);
/// Replicas alive at most at once.
const REPLICAS_MAX: usize = 4;
/// How long the replicas get to finish everything once the faults stop.
const QUIESCENCE_MAX: Duration = Duration::from_secs(300);
/// How long the live replicas get to converge on the config topic after quiescence.
const CONFIG_CONVERGENCE_MAX: Duration = Duration::from_secs(60);
/// How long a crashed application waits before its supervisor starts it again.
const RESTART_DELAY_MAX_MS: u64 = 1_000;

/// What a replica's observer publishes for the checks.
#[derive(Default)]
struct ReplicaView {
    /// The replica's config store, as of its last bootstrap or drain.
    configs: Mutex<Option<BTreeMap<String, Vec<u8>>>>,
}

impl ReplicaView {
    fn matches(&self, want: &BTreeMap<String, Vec<u8>>) -> bool {
        self.configs.lock().expect("view lock").as_ref() == Some(want)
    }
}

struct ReplicaObserver {
    name: String,
    ctx: Ctx,
    view: Arc<ReplicaView>,
}

impl Observer for ReplicaObserver {
    fn tasks_assigned(&self, count: usize) {
        self.ctx.event(format!("{}: {count} tasks", self.name));
    }

    fn config_store_updated(&self, store: &dyn flechtwerk::observer::ConfigView) {
        *self.view.configs.lock().expect("view lock") = Some(store.to_map());
    }
}

/// One replica: a node whose init runs the application under a supervisor loop (a crashed
/// application is started again, like a restarted pod; a killed node restarts via `init`).
struct Replica {
    name: String,
    node: NodeId,
    view: Arc<ReplicaView>,
    alive: bool,
}

fn start_replica(cluster: &Cluster, ctx: &Ctx, index: usize, max_poll_records: usize) -> Replica {
    let name = format!("replica-{index}");
    let view = Arc::new(ReplicaView::default());
    let init = {
        let (kafka, ctx, name, view) = (cluster.kafka(), ctx.clone(), name.clone(), view.clone());
        move || replica_main(kafka.clone(), ctx.clone(), name.clone(), view.clone(), max_poll_records)
    };
    let node = Handle::current().create_node().name(&name).ip(cluster.client_ip()).init(init).build();
    ctx.event(format!("{name}: started"));
    Replica { name, node: node.id(), view, alive: true }
}

async fn replica_main(kafka: KafkaClient, ctx: Ctx, name: String, view: Arc<ReplicaView>, max_poll_records: usize) {
    let mut incarnation = 0;
    loop {
        incarnation += 1;
        *view.configs.lock().expect("view lock") = None;
        let observer = ReplicaObserver { name: name.clone(), ctx: ctx.clone(), view: view.clone() };
        let app = Flechtwerk::builder()
            .application_id(APP)
            .client_id(&name)
            .kafka(Arc::new(kafka.clone()))
            .max_poll_records(max_poll_records)
            .session_timeout(SESSION_TIMEOUT)
            .replication_factor(1)
            .observer(Arc::new(observer))
            .build(counter(INPUT, OUTPUT, Some(CONFIGS)))
            .expect("valid settings");
        ctx.event(format!("{name}: application start #{incarnation}"));
        let Err(error) = app.run().await;
        ctx.event(format!("{name}: application crashed: {}", error_kind(&error)));
        sleep(Duration::from_millis(thread_rng().gen_range(10..RESTART_DELAY_MAX_MS))).await;
    }
}

/// A deterministic one-word description of why an application stopped (full error texts can
/// hold generation numbers that are deterministic too, but keep traces short).
fn error_kind(error: &flechtwerk::Error) -> String {
    match error {
        flechtwerk::Error::Kafka(e) => format!("kafka {} {:?}", e.operation(), e.kind()),
        other => other.to_string(),
    }
}

/// Writes `inputs` records over `keys` keys with small random gaps.
async fn feed(kafka: KafkaClient, ctx: Ctx, inputs: usize, keys: u32) {
    let producer = kafka.producer(ProducerConfig::idempotent("feeder")).expect("producer");
    for i in 0..inputs {
        let key = format!("key-{}", thread_rng().gen_range(0..keys));
        let record = ProducerRecord::new(INPUT, key.clone(), format!(r#"{{"i":{i}}}"#));
        match producer.send(record).await {
            Ok(delivery) => {
                if let Err(e) = delivery.await {
                    ctx.event(format!("feeder: input {i} not acknowledged ({:?})", e.kind()));
                }
            }
            Err(e) => ctx.event(format!("feeder: input {i} refused ({:?})", e.kind())),
        }
        sleep(Duration::from_millis(thread_rng().gen_range(1..60))).await;
    }
    producer.close().await;
    ctx.event("feeder: done");
}

/// Maintains the config topic: labels for some keys, rewrites, and all three deletions.
async fn write_configs(kafka: KafkaClient, ctx: Ctx, writes: usize, keys: u32) {
    let producer = kafka.producer(ProducerConfig::idempotent("config-writer")).expect("producer");
    for i in 0..writes {
        let key = format!("key-{}", thread_rng().gen_range(0..keys));
        let value = match thread_rng().gen_range(0..10) {
            0 => None,
            1 => Some(Bytes::new()),
            2 => Some(Bytes::from_static(b"{}")),
            _ => Some(Bytes::from(format!(r#"{{"label":"v{i}"}}"#))),
        };
        // Keyed placement, so one key's writes are ordered: across partitions the winner of a
        // key is undefined on Kafka too (CFG-12), and no reader could agree with a model.
        ctx.event(format!("config writer: {key}: {:?}", value.as_deref().map(String::from_utf8_lossy)));
        let record = ProducerRecord { value, ..ProducerRecord::new(CONFIGS, key, Vec::new()) };
        if let Ok(delivery) = producer.send(record).await {
            let _ = delivery.await;
        }
        sleep(Duration::from_millis(thread_rng().gen_range(20..400))).await;
    }
    producer.close().await;
    ctx.event("config writer: done");
}

/// Adds a replica (a fault: the group rebalances and tasks change hands).
fn add_replica(cluster: &Cluster, ctx: &Ctx, replicas: &mut Vec<Replica>, max_poll_records: usize) {
    ctx.fault("add-replica", format!("replica-{}", replicas.len()));
    let replica = start_replica(cluster, ctx, replicas.len(), max_poll_records);
    replicas.push(replica);
}

/// One fault from the schedule.
async fn inject(cluster: &Cluster, ctx: &Ctx, replicas: &mut Vec<Replica>, max_poll_records: usize) {
    let alive: Vec<usize> = (0..replicas.len()).filter(|&i| replicas[i].alive).collect();
    let pick = alive[thread_rng().gen_range(0..alive.len())];
    match thread_rng().gen_range(0..9) {
        0 | 1 => cluster.crash_restart(replicas[pick].node, &replicas[pick].name),
        2 if alive.len() < REPLICAS_MAX => add_replica(cluster, ctx, replicas, max_poll_records),
        3 if alive.len() > 1 => {
            ctx.fault("remove-replica", replicas[pick].name.clone());
            Handle::current().kill(replicas[pick].node);
            replicas[pick].alive = false;
        }
        4 => {
            // A zombie: frozen past its session timeout; the group moves its tasks, its
            // producers get fenced, and when it wakes up it must not commit anything.
            let pause = SESSION_TIMEOUT + Duration::from_millis(thread_rng().gen_range(1_000..6_000));
            cluster.pause_for(replicas[pick].node, &replicas[pick].name, pause).await;
        }
        5 => {
            ctx.fault("abort-transactions", "EndTxn and Produce fail for 2 s");
            let failing = RequestFaults { fatal_error: 0.3, retriable_error: 0.2, ..RequestFaults::default() };
            cluster.faults().update(|f| {
                f.by_kind.insert(RequestKind::EndTxn, failing.clone());
                f.by_kind.insert(RequestKind::Produce, failing.clone());
            });
            sleep(Duration::from_secs(2)).await;
            cluster.faults().update(|f| {
                f.by_kind.remove(&RequestKind::EndTxn);
                f.by_kind.remove(&RequestKind::Produce);
            });
        }
        6 => {
            // Usually a little late; sometimes later than a whole rebalance takes, so that a
            // task is handed over while its previous owner's commit is still completing (the
            // new owner must fence, and wait for that commit, before it restores). The window
            // runs in the background: later faults (handovers above all) land in it.
            let late = Duration::from_secs(if thread_rng().gen_bool(0.5) { 12 } else { 2 });
            ctx.fault("delay-markers", format!("commit/abort markers up to {late:?} late for 5 s"));
            // Sometimes only the changelog's markers: the previous owner's offsets are then
            // decided while its state is not readable yet, the window in which a new owner that
            // restored before fencing would miss that state.
            let only_changelog = thread_rng().gen_bool(0.3);
            cluster.faults().update(|f| {
                f.markers.delay = 0.8;
                f.markers.delay_max = late;
                f.markers.only_targets_containing = only_changelog.then(|| "-changelog/".to_owned());
            });
            let faults = cluster.faults().clone();
            tokio::spawn(async move {
                sleep(Duration::from_secs(5)).await;
                faults.update(|f| f.markers.delay = 0.0);
            });
            if alive.len() < REPLICAS_MAX && thread_rng().gen_bool(0.5) {
                // A rebalance right away: tasks change hands while commits are still completing.
                sleep(Duration::from_millis(thread_rng().gen_range(0..1_000))).await;
                add_replica(cluster, ctx, replicas, max_poll_records);
            }
        }
        7 => {
            let cut = Duration::from_millis(thread_rng().gen_range(500..8_000));
            cluster.isolate(replicas[pick].node, &replicas[pick].name);
            sleep(cut).await;
            cluster.heal(replicas[pick].node, &replicas[pick].name);
        }
        _ => cluster.restart_broker(),
    }
}

/// Reads `topic` to its end from a group-less consumer.
async fn read_all(kafka: &KafkaClient, topic: &str) -> Result<Vec<RawRecord>, String> {
    read_topic(kafka, "checker", topic).await.map_err(|e| e.to_string())
}

fn per_key(records: &[RawRecord]) -> BTreeMap<String, i64> {
    let mut counts = BTreeMap::new();
    for r in records {
        *counts.entry(String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned()).or_default() += 1;
    }
    counts
}

/// The compaction of the config topic, written from the rule (last write per key; null, `b""`
/// and `{}` delete), canonicalised like the store.
fn config_compaction(records: &[RawRecord]) -> BTreeMap<String, Vec<u8>> {
    let mut model = BTreeMap::new();
    for r in records {
        let key = String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned();
        match r.value.as_deref() {
            None | Some(b"") | Some(b"{}") => {
                model.remove(&key);
            }
            Some(bytes) => {
                let value = flechtwerk::json::parse(std::str::from_utf8(bytes).expect("utf-8")).expect("json");
                model.insert(key, flechtwerk::json::to_canonical_bytes(&value).expect("finite"));
            }
        }
    }
    model
}

/// Whether no transaction is open on the changelog: its markers may land later than the
/// outputs' (markers are delayed per partition), and a read before then ends at its last stable
/// offset.
fn changelog_stable(cluster: &Cluster) -> bool {
    cluster.inspect(|broker| {
        (0..PARTITIONS as i32).all(|p| {
            let tp = TopicPartition::new(format!("{APP}-changelog"), p);
            broker.log(&tp).map_or(true, |log| log.open_transactions().is_empty())
        })
    })
}

/// Everything the checks need, read after quiescence from a checker node.
struct Observed {
    inputs: Vec<RawRecord>,
    outputs: Vec<RawRecord>,
    changelog: Vec<RawRecord>,
    configs: Vec<RawRecord>,
    committed: Vec<Option<i64>>,
    ends: Vec<i64>,
}

async fn observe(kafka: KafkaClient) -> Result<Observed, String> {
    let inputs = read_all(&kafka, INPUT).await?;
    let outputs = read_all(&kafka, OUTPUT).await?;
    let changelog = read_all(&kafka, &format!("{APP}-changelog")).await?;
    let configs = read_all(&kafka, CONFIGS).await?;
    let tps: Vec<TopicPartition> = (0..PARTITIONS as i32).map(|p| TopicPartition::new(INPUT, p)).collect();
    let mut consumer = kafka.consumer(ConsumerConfig::member("checker-offsets", APP)).map_err(|e| e.to_string())?;
    let committed = consumer.committed(&tps).await.map_err(|e| e.to_string())?;
    let mut ends = Vec::new();
    for tp in &tps {
        ends.push(consumer.end_offset(tp).await.map_err(|e| e.to_string())?);
    }
    consumer.close().await.map_err(|e| e.to_string())?;
    Ok(Observed { inputs, outputs, changelog, configs, committed, ends })
}

async fn run(ctx: Ctx) {
    // Half the seeds also stall the engine at its fault points (src/buggify.rs); buggify also
    // makes madsim delay some network operations by seconds.
    if thread_rng().gen_bool(0.5) {
        madsim::buggify::enable();
        ctx.event("buggify on");
    }
    let cluster = Cluster::start(&ctx);
    let (replica_count, inputs, keys, config_writes, max_poll_records) = {
        let mut rng = thread_rng();
        let max_poll = [1usize, 7, 50, 500][rng.gen_range(0..4)];
        (
            rng.gen_range(2..=3usize),
            rng.gen_range(100..400usize),
            rng.gen_range(3..30u32),
            rng.gen_range(5..40usize),
            max_poll,
        )
    };
    ctx.event(format!(
        "counter: {replica_count} replicas, {inputs} inputs over {keys} keys, {config_writes} config writes, max_poll_records {max_poll_records}"
    ));
    let setup = Handle::current().create_node().name("setup").ip(cluster.client_ip()).build();
    let admin_kafka = cluster.kafka();
    setup
        .spawn(async move {
            let admin = admin_kafka.admin().expect("admin");
            for (topic, partitions, compact) in
                [(INPUT, PARTITIONS, false), (OUTPUT, PARTITIONS, false), (CONFIGS, 2, true)]
            {
                let mut spec = NewTopic::new(topic, partitions).replication(1);
                if compact {
                    spec = spec.compacted();
                }
                // Retried until the broker answers (the network is clean during setup).
                while admin.create_topic(&spec).await.is_err() {
                    sleep(Duration::from_millis(100)).await;
                }
            }
        })
        .await
        .expect("the setup node is never killed");

    let mut replicas: Vec<Replica> =
        (0..replica_count).map(|i| start_replica(&cluster, &ctx, i, max_poll_records)).collect();
    let feeder = Handle::current().create_node().name("feeder").ip(cluster.client_ip()).build();
    let feeding = feeder.spawn(feed(cluster.kafka(), ctx.clone(), inputs, keys));
    let writer = Handle::current().create_node().name("config-writer").ip(cluster.client_ip()).build();
    let writing = writer.spawn(write_configs(cluster.kafka(), ctx.clone(), config_writes, keys));

    while !(feeding.is_finished() && writing.is_finished()) {
        sleep(Duration::from_millis(thread_rng().gen_range(300..3_000))).await;
        inject(&cluster, &ctx, &mut replicas, max_poll_records).await;
    }
    feeding.await.expect("the feeder node is never killed");
    writing.await.expect("the writer node is never killed");
    // Quiescence: no more faults, engine stalls included.
    madsim::buggify::disable();
    cluster.faults().update(|f| f.markers.delay = 0.0);
    ctx.event("faults stop");

    // Quiescence: every input counted (or the deadline).
    let checker = Handle::current().create_node().name("checker").ip(cluster.client_ip()).build();
    let deadline = ctx.now() + QUIESCENCE_MAX;
    let observed = loop {
        sleep(Duration::from_secs(2)).await;
        let observed = checker.spawn(observe(cluster.kafka())).await.expect("the checker node is never killed");
        let done = match &observed {
            Ok(o) => {
                o.outputs.len() >= o.inputs.len() && o.committed.iter().zip(&o.ends).all(|(c, e)| c.unwrap_or(0) == *e)
            }
            Err(_) => false,
        };
        if done || ctx.now() > deadline {
            break observed;
        }
    };
    // Every input is committed now, so no transaction starts any more; but the last ones may
    // have committed *while* the topics were read (a changelog marker can land after the
    // outputs'). Read again until one read sees the changelog stable before and after it: one
    // consistent cut.
    let observed = match observed {
        Ok(_) => loop {
            sleep(Duration::from_secs(1)).await;
            let stable_before = changelog_stable(&cluster);
            let again = checker.spawn(observe(cluster.kafka())).await.expect("the checker node is never killed");
            if (stable_before && changelog_stable(&cluster)) || ctx.now() > deadline {
                break again;
            }
        },
        failed => failed,
    };
    let observed = match observed {
        Ok(observed) => observed,
        Err(e) => {
            ctx.violation(format!("the checker could not read the topics: {e}"));
            return;
        }
    };
    // Config stores are eventually consistent: give every live replica (one may just have come
    // back from a partition and be rejoining) a bounded time to drain to the topic's end.
    let want = config_compaction(&observed.configs);
    let deadline = ctx.now() + CONFIG_CONVERGENCE_MAX;
    while ctx.now() < deadline && !replicas.iter().filter(|r| r.alive).all(|r| r.view.matches(&want)) {
        sleep(Duration::from_millis(500)).await;
    }
    check(&ctx, &observed, &replicas);
}

fn check(ctx: &Ctx, observed: &Observed, replicas: &[Replica]) {
    let inputs = per_key(&observed.inputs);
    let (violations, finals) = check_counts(&inputs, &observed.outputs);
    for v in violations {
        ctx.violation(format!("exactly-once: {v}"));
    }
    for (p, (committed, end)) in observed.committed.iter().zip(&observed.ends).enumerate() {
        // An empty partition has nothing to commit.
        if committed.unwrap_or(0) != *end {
            ctx.violation(format!("committed offset of {INPUT}/{p} is {committed:?}, the partition ends at {end}"));
        }
    }
    for v in check_changelog(&finals, &observed.changelog) {
        ctx.violation(format!("changelog: {v}"));
    }
    let want = config_compaction(&observed.configs);
    for replica in replicas.iter().filter(|r| r.alive) {
        match replica.view.configs.lock().expect("view lock").as_ref() {
            Some(got) if *got == want => {}
            Some(got) => {
                let missing: Vec<&String> = want.keys().filter(|k| !got.contains_key(*k)).collect();
                let extra: Vec<&String> = got.keys().filter(|k| !want.contains_key(*k)).collect();
                let differing: Vec<&String> =
                    want.keys().filter(|k| got.get(*k).is_some_and(|v| v != &want[*k])).collect();
                ctx.violation(format!(
                    "{}: config store != compaction of {CONFIGS}: missing {missing:?}, extra {extra:?}, differing {differing:?}",
                    replica.name
                ))
            }
            None => ctx.violation(format!("{}: no config store after quiescence", replica.name)),
        }
    }
    ctx.event(format!(
        "end: {} inputs, {} outputs, {} keys, {} changelog records, {} configs",
        observed.inputs.len(),
        observed.outputs.len(),
        inputs.len(),
        observed.changelog.len(),
        want.len()
    ));
}
