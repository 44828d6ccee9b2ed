//! Scenario `counter`: the exactly-once chaos run — the main job.
//!
//! Keyed inputs over 4 partitions, 2–3 replicas of a counting transformer that joins a config
//! topic, a feeder writing inputs and a writer maintaining the config topic, under a fault
//! schedule generated from the seed ([`FaultProfile::everything`]): crash-restarts at any point,
//! replicas added and removed, replicas frozen past their session timeout (zombies) and
//! sometimes past the transaction timeout, request faults of every kind (lost, late, held past
//! the client's timeout, ambiguous, retriable and fatal errors), failing transactions, markers
//! that always land with jitter and sometimes seconds late — handovers forced while only the
//! changelog's markers are late — network partitions and broker restarts, and 2–4 windows in
//! which the replicas' commits fail abortably (a share of their Produce requests fails; the
//! producer stays usable, as with librdkafka's abortable errors). Task state lives on a
//! simulated disk that survives a node's crash, so restarted replicas meet their leftovers.
//! Most seeds start the inputs and the faults once a replica runs tasks (the others at launch,
//! the startup under faults); a quarter turn buggify on from that moment.
//!
//! The stage varies per seed: one or two input topics; a state key that is the message key or
//! a group taken from the value (several keys share one state); a count that resets every k-th
//! input by deleting the state (changelog tombstones); undecodable inputs that the stage skips.
//!
//! Properties checked after quiescence, on the simulated broker's own log (never through the
//! client read path the engine uses):
//! - every valid input has exactly one committed output, and no output has no input;
//! - per state identity (input partition, state key) the counts are exactly those of its n
//!   inputs: 1..n (or 1..k repeated with resets), in order within each output partition;
//! - within one transaction, a state's records ran in `input_topics` order, then offset order
//!   (TRX-03; transactions told apart by the markers in the output's log; in the half of the
//!   seeds whose batches gather polls, TRX-45, within each poll: the clients' poll log shows
//!   which records could have come from different polls);
//! - the changelog's last value per identity equals the final count (absent after a reset);
//! - the group's committed offsets reach the end of every input partition;
//! - every output's config label is one that was written for its key, and the probes written
//!   after the config topic settled carry its final label;
//! - every live replica's config store equals the compaction of the config topic;
//! - same seed, same trace hash (checked by the runner with `--check-determinism`).
//!
//! Scenario `counter-eos2` runs the same with `Producers::PerInstance` (KIP-447, TRX-40..44):
//! one transactional producer per replica, one transaction per batch for all its tasks, zombies
//! fenced by the group generation of the offsets instead of by per-task transactional ids.
//!
//! Scenario `counter-rolling` runs the same, in either producer shape (half the seeds each),
//! with clean restarts among the faults (a fifth of
//! them, [`Fault::StopRestart`](crate::harness::faults::Fault::StopRestart)): a replica's
//! application is stopped as a rolling deploy stops a pod (`run_until`'s shutdown: the batch in
//! flight, gathered polls included, commits within the grace; the tasks stop; the group is left
//! at once, LIFE-21, TRX-45) and started again, while inputs flow and the other faults go on.
//! `counter` never stops a replica cleanly (its schedules predate the kind), so the mutation
//! scores measured on it stay comparable. `counter-eos2` and `counter-rolling` have no
//! abortable-commit windows (their seeds replay as before).
//!
//! Scenario `counter-alo` runs the `counter` stage, faults and abortable-commit windows at least
//! once (`Guarantee::AtLeastOnce`, per-task producers without transactions; the group commits
//! the offsets once a batch's records are acknowledged). Its properties: every valid input has
//! an output (duplicates allowed, counted in the trace's last line); every output names a
//! valid input, its partition and state key, and a label written for its key (a probe's: the
//! settled one); the offsets reach the end of every input partition; the config stores equal
//! the compaction; and, watched every 10 ms while the run goes on, the offsets are never ahead
//! of the outputs: every valid input below a committed offset has an output in the log. The
//! counts are not checked (a batch written but not committed is processed, and counted, again).

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use flechtwerk::attribute::{Attribute, INT, STR};
use flechtwerk::kafka::{Kafka, ProducerConfig, ProducerRecord};
use flechtwerk::stage::{transformer, FnTransformer};
use flechtwerk::wire::{InvalidMessageAction, RawRecord};
use flechtwerk::{Event, FlechtwerkBuilder, Guarantee, Message, Producers, State};
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;
use madsim::time::sleep;

use crate::cluster::{Cluster, KafkaClient};
use crate::harness::disk::SimDisk;
use crate::harness::faults::{FaultProfile, FaultSchedule};
use crate::harness::replicas::{launch_with, Replicas};
use crate::harness::{
    topic, truth, CONFIG_CONVERGENCE_MAX, QUIESCENCE_MAX, REPLICAS_MAX, SESSION_TIMEOUT, TRANSACTION_TIMEOUT,
};
use crate::runner::{Ctx, Scenario};

/// The fault kinds both counter scenarios inject.
const FAULTS: &[&str] = &[
    "crash-restart",
    "add-replica",
    "remove-replica",
    "pause",
    "network-partition",
    "broker-restart",
    "request-chaos",
    "fail-transactions",
    "late-markers",
    "kafka-drop-request",
    "kafka-hold-request",
    "kafka-delay-request",
    "kafka-error",
    "kafka-drop-response",
    "kafka-delay-response",
    "kafka-marker-delay",
    "buggify",
    "broker-crash",
    "broker-pause",
    "broker-isolate",
    "leader-move",
    "lagging-failover",
    "zombie-wake",
];

/// The fault kinds of `counter-rolling`: those of the others, and clean restarts.
const FAULTS_ROLLING: [&str; FAULTS.len() + 1] = crate::harness::faults::with_stop_restart(FAULTS);

/// Weight of clean restarts in `counter-rolling` (the everything profile's weights add up to 24:
/// a fifth of its faults).
const STOP_RESTART_WEIGHT: u32 = 6;

/// The fault kinds of `counter` and `counter-alo`: those of the others, and abortable commits.
const FAULTS_ABORTABLE: [&str; FAULTS.len() + 1] = with_abortable_commits(FAULTS);

const fn with_abortable_commits<const N: usize>(kinds: &[&'static str]) -> [&'static str; N] {
    assert!(N == kinds.len() + 1, "N is kinds.len() + 1");
    let mut all = [""; N];
    let mut i = 0;
    while i < kinds.len() {
        all[i] = kinds[i];
        i += 1;
    }
    all[kinds.len()] = "abortable-commits";
    all
}

/// The scenario.
pub static SCENARIO: Scenario = Scenario {
    name: "counter",
    about: "exactly-once counting transformer + config join, varied per seed, under every fault kind",
    faults: &FAULTS_ABORTABLE,
    run: |ctx| {
        let setup = Setup {
            producers: Some(Producers::PerTask),
            abortable_commits: true,
            zombie_wakes: ZOMBIE_WAKES,
            ..Setup::default()
        };
        Box::pin(run(ctx, setup)) as Pin<Box<dyn std::future::Future<Output = ()>>>
    },
};

/// Directed zombies per seed at most in `counter` (none in the other two, whose seeds replay as
/// before): an owner frozen at a batch's offsets, woken at the next owner's fence, restore or
/// first commit (`harness::directed`).
const ZOMBIE_WAKES: u32 = 2;

/// The same with one producer per instance (KIP-447's exactly-once v2 shape).
pub static SCENARIO_EOS2: Scenario = Scenario {
    name: "counter-eos2",
    about: "the counter scenario with one transactional producer per instance (KIP-447, generation fencing)",
    faults: FAULTS,
    run: |ctx| {
        let setup = Setup { producers: Some(Producers::PerInstance), ..Setup::default() };
        Box::pin(run(ctx, setup)) as Pin<Box<dyn std::future::Future<Output = ()>>>
    },
};

/// The same with clean restarts among the faults (rolling deploys).
pub static SCENARIO_ROLLING: Scenario = Scenario {
    name: "counter-rolling",
    about: "the counter scenario, either producer shape, with clean stops and restarts among the faults (rolling deploys, LIFE-21)",
    faults: &FAULTS_ROLLING,
    run: |ctx| {
        let setup = Setup { stop_restart: STOP_RESTART_WEIGHT, ..Setup::default() };
        Box::pin(run(ctx, setup)) as Pin<Box<dyn std::future::Future<Output = ()>>>
    },
};

/// The same stage at least once (`Guarantee::AtLeastOnce`: no transactions, the offsets
/// committed by the group once the batch's records are acknowledged), with its own properties.
pub static SCENARIO_ALO: Scenario = Scenario {
    name: "counter-alo",
    about: "the counter scenario at least once: no input lost, duplicates counted, offsets never ahead of the outputs",
    faults: &FAULTS_ABORTABLE,
    run: |ctx| {
        let setup = Setup {
            producers: Some(Producers::PerTask),
            abortable_commits: true,
            guarantee: Guarantee::AtLeastOnce,
            ..Setup::default()
        };
        Box::pin(run(ctx, setup)) as Pin<Box<dyn std::future::Future<Output = ()>>>
    },
};

/// What a counter scenario varies.
#[derive(Clone, Copy, Default)]
struct Setup {
    /// The producer shape (`None`: drawn per seed, half the seeds each).
    producers: Option<Producers>,
    /// Weight of clean restarts in the fault profile.
    stop_restart: u32,
    /// 2–4 windows of [`Fault::AbortableCommits`](crate::harness::faults::Fault::AbortableCommits) join the seed's schedule (drawn after
    /// everything else, so the schedule keeps every fault it drew before).
    abortable_commits: bool,
    guarantee: Guarantee,
    /// At most this many directed zombies per seed (`harness::directed`), drawn after everything
    /// else.
    zombie_wakes: u32,
}

const APP: &str = "counter";
const INPUT_A: &str = "counter-input-a";
const INPUT_B: &str = "counter-input-b";
const OUTPUT: &str = "counter-output";
const CONFIGS: &str = "counter-configs";
const PARTITIONS: u32 = 4;
/// Share of seeds with buggify on (the engine's fault points and madsim's network delays).
const BUGGIFY: f64 = 0.25;
/// Share of seeds whose inputs and faults start at launch rather than once a replica runs tasks.
const FAULTS_FROM_LAUNCH: f64 = 0.2;
/// How long the inputs and faults wait at most for a replica's first tasks.
const FIRST_TASKS_MAX: Duration = Duration::from_secs(30);

const COUNT: Attribute<i64> = Attribute::new("count", &INT);
const INPUT: Attribute<i64> = Attribute::new("i", &INT);
const GROUP: Attribute<String> = Attribute::new("group", &STR);
const KEY: Attribute<String> = Attribute::new("key", &STR);
const LABEL: Attribute<String> = Attribute::optional("label", &STR);
const PARTITION: Attribute<i64> = Attribute::new("partition", &INT);
const STATE_KEY: Attribute<String> = Attribute::new("state", &STR);

/// How the counting stage of one seed is built.
#[derive(Clone, Debug)]
struct Variant {
    /// Inputs spread over two input topics (co-partitioned by key).
    two_inputs: bool,
    /// The state key is the value's `group` (several message keys share one state).
    groups: bool,
    /// The k-th count of a state deletes it (a changelog tombstone), so counting restarts.
    reset_every: Option<i64>,
    /// Some inputs do not decode; the stage skips them.
    invalid_inputs: bool,
    /// Batches gather polls (TRX-45): `max_batch_records` above `max_poll_records`.
    gathers: bool,
}

impl Variant {
    fn inputs(&self) -> Vec<&'static str> {
        if self.two_inputs {
            vec![INPUT_A, INPUT_B]
        } else {
            vec![INPUT_A]
        }
    }

    fn state_key(&self, key: &str, value: Option<&Event>) -> String {
        if self.groups {
            value.and_then(|v| v.get(&GROUP).ok().flatten()).unwrap_or_default()
        } else {
            key.to_owned()
        }
    }

    /// The count of the j-th input (1-based) of a state identity.
    fn count_of(&self, j: i64) -> i64 {
        match self.reset_every {
            Some(k) => (j - 1) % k + 1,
            None => j,
        }
    }

    /// The state after n inputs (`None`: deleted or never written).
    fn final_state(&self, n: i64) -> Option<i64> {
        let count = self.count_of(n);
        (n > 0 && self.reset_every != Some(count)).then_some(count)
    }
}

/// The counting transformer of `variant`: output `{count, i, key, label, partition, state}`.
fn stage(variant: &Variant) -> FnTransformer {
    let mut builder = transformer(variant.inputs()).config_topics([CONFIGS]);
    if variant.invalid_inputs {
        builder = builder.on_invalid_message(|_| InvalidMessageAction::Skip);
    }
    if variant.groups {
        let v = variant.clone();
        builder = builder.extract_state_key(move |msg| v.state_key(&msg.key, msg.value.as_ref()));
    }
    let v = variant.clone();
    builder.transform(move |msg, mut state, out| {
        let count = state.get(&COUNT)?.unwrap_or(0) + 1;
        let label = out.configs().get(&msg.key)?.and_then(|c| c.get(&LABEL).ok().flatten());
        let value = Event::new()
            .with(&COUNT, count)?
            .with(&INPUT, msg.value.as_ref().map(|v| v.get(&INPUT)).transpose()?.flatten())?
            .with(&KEY, msg.key.clone())?
            .with(&LABEL, label)?
            .with(&PARTITION, i64::from(msg.partition))?
            .with(&STATE_KEY, v.state_key(&msg.key, msg.value.as_ref()))?;
        out.send(Message::new(OUTPUT, msg.key.as_str(), value));
        if v.reset_every == Some(count) {
            state = State::new();
        } else {
            state.set(&COUNT, count)?;
        }
        out.set_state(state);
        Ok(())
    })
}

/// The feeder's inputs: `inputs` records over `keys` keys, spread over `period`; every 20th is
/// undecodable when the variant has invalid inputs. Returns nothing: the checks read the topics.
async fn feed(kafka: KafkaClient, ctx: Ctx, variant: Variant, inputs: i64, keys: u32, period: Duration) {
    let producer = kafka.producer(ProducerConfig::idempotent("feeder")).expect("producer");
    let gap_max_ms = (period.as_millis() as u64 * 2 / inputs.max(1) as u64).max(2);
    // Paced by the clock, not by acknowledgements (a buggified network delays some by seconds):
    // the inputs span the fault period. Deliveries are awaited at the end.
    let mut deliveries = Vec::new();
    for i in 0..inputs {
        let k = thread_rng().gen_range(0..keys);
        let topic = variant.inputs()[thread_rng().gen_range(0..variant.inputs().len())];
        let value = if variant.invalid_inputs && thread_rng().gen_range(0..20) == 0 {
            b"{broken".to_vec()
        } else {
            format!(r#"{{"group":"g-{}","i":{i}}}"#, k % 5).into_bytes()
        };
        match producer.send(ProducerRecord::new(topic, format!("key-{k}"), value)).await {
            Ok(delivery) => deliveries.push((i, delivery)),
            Err(e) => ctx.event(format!("feeder: input {i} refused ({:?})", e.kind())),
        }
        sleep(Duration::from_millis(thread_rng().gen_range(1..gap_max_ms))).await;
    }
    for (i, delivery) in deliveries {
        if let Err(e) = delivery.await {
            ctx.event(format!("feeder: input {i} not acknowledged ({:?})", e.kind()));
        }
    }
    producer.close().await;
    ctx.event("feeder: done");
}

/// One input per key, after the config topic settled: their outputs must carry its final labels.
async fn feed_probes(kafka: KafkaClient, ctx: Ctx, variant: Variant, first: i64, keys: u32) {
    let producer = kafka.producer(ProducerConfig::idempotent("prober")).expect("producer");
    for k in 0..keys {
        let value = format!(r#"{{"group":"g-{}","i":{}}}"#, k % 5, first + i64::from(k));
        send(&*producer, &ctx, ProducerRecord::new(variant.inputs()[0], format!("key-{k}"), value)).await;
    }
    producer.close().await;
}

async fn send(producer: &dyn flechtwerk::kafka::Producer, ctx: &Ctx, record: ProducerRecord) {
    let what = format!("{}:{:?}", record.topic, record.key);
    match producer.send(record).await {
        Ok(delivery) => {
            if let Err(e) = delivery.await {
                ctx.event(format!("input {what} not acknowledged ({:?})", e.kind()));
            }
        }
        Err(e) => ctx.event(format!("input {what} refused ({:?})", e.kind())),
    }
}

/// Maintains the config topic: labels for some keys, rewrites, and all three deletions. Returns
/// every label written per key.
async fn write_configs(
    kafka: KafkaClient,
    ctx: Ctx,
    writes: usize,
    keys: u32,
    labels: Arc<Mutex<BTreeMap<String, BTreeSet<String>>>>,
) {
    let producer = kafka.producer(ProducerConfig::idempotent("config-writer")).expect("producer");
    let mut deliveries = Vec::new();
    for i in 0..writes {
        let key = format!("key-{}", thread_rng().gen_range(0..keys));
        let value = match thread_rng().gen_range(0..10) {
            0 => None,
            1 => Some(Bytes::new()),
            2 => Some(Bytes::from_static(b"{}")),
            _ => {
                labels.lock().expect("labels lock").entry(key.clone()).or_default().insert(format!("v{i}"));
                Some(Bytes::from(format!(r#"{{"label":"v{i}"}}"#)))
            }
        };
        // Keyed placement, so one key's writes are ordered: across partitions the winner of a
        // key is undefined on Kafka too (CFG-12), and no reader could agree with a model.
        ctx.event(format!("config writer: {key}: {:?}", value.as_deref().map(String::from_utf8_lossy)));
        let record = ProducerRecord { value, ..ProducerRecord::new(CONFIGS, key, Vec::new()) };
        if let Ok(delivery) = producer.send(record).await {
            deliveries.push(delivery);
        }
        sleep(Duration::from_millis(thread_rng().gen_range(20..400))).await;
    }
    for delivery in deliveries {
        let _ = delivery.await;
    }
    producer.close().await;
    ctx.event("config writer: done");
}

/// One run of `setup`.
async fn run(ctx: Ctx, setup: Setup) {
    let Setup { producers, stop_restart, abortable_commits, guarantee, zombie_wakes } = setup;
    let profile = FaultProfile {
        session_timeout: SESSION_TIMEOUT,
        transaction_timeout: TRANSACTION_TIMEOUT,
        // A quarter, not half: buggify's network delays congest the broker (see below), and
        // congested seeds caught almost none of the planted handover bugs (docs/simulation.md,
        // "Mutation score").
        buggify: BUGGIFY,
        stop_restart,
        zombie_wakes,
        ..FaultProfile::everything()
    };
    // Drawn now, enabled when the faults start (see below).
    let buggify = thread_rng().gen_bool(profile.buggify);
    let cluster = Cluster::start(&ctx);
    let plan = draw_plan(&ctx, &cluster, &profile, producers, abortable_commits);
    let topics = vec![
        topic(INPUT_A, PARTITIONS, false),
        topic(INPUT_B, PARTITIONS, false),
        topic(OUTPUT, PARTITIONS, false),
        topic(CONFIGS, 2, true),
    ];
    crate::harness::setup(&cluster, topics, Vec::new()).await;

    let disk = SimDisk::default();
    let launch = {
        let (variant, producers, max_batch_records) = (plan.variant.clone(), plan.producers, plan.max_batch_records);
        let configure = move |builder: FlechtwerkBuilder| {
            builder.producers(producers).max_batch_records(max_batch_records).guarantee(guarantee)
        };
        launch_with(APP, plan.max_poll_records, configure, move || stage(&variant))
    };
    let at_least_once = guarantee == Guarantee::AtLeastOnce;
    // At least once, the offsets are watched while everything runs: never ahead of the outputs.
    let watch = at_least_once.then(|| {
        let watcher = Handle::current().create_node().name("offset-watcher").build();
        watcher.spawn(watch_offsets(ctx.clone(), cluster.clone()))
    });
    let mut replicas = Replicas::start(&cluster, &ctx, &disk, launch, plan.replica_count, REPLICAS_MAX);
    let labels = run_faults(&ctx, &cluster, &mut replicas, &plan, buggify).await;
    let want_configs = settle_and_probe(&ctx, &cluster, &replicas, &plan).await;

    // Not reaching quiescence is reported by the checks (offsets short of the end, inputs
    // without outputs).
    truth::await_quiescence(&ctx, &cluster, APP, &plan.variant.inputs(), &[OUTPUT], QUIESCENCE_MAX).await;
    // How often the replicas met their own state again (STO-05).
    let counts = disk.counts();
    ctx.event(format!(
        "disk: {} copies found, {} discarded, {} torn, {} crashes lost buffered writes",
        counts.copies_found, counts.discarded, counts.torn, counts.writes_lost
    ));
    // A replica may still crash after the faults stopped (a zombie waking from a pause that
    // ended with them is fenced); it restarts, and its config store converges again.
    replicas.await_configs(&want_configs.clone().into(), CONFIG_CONVERGENCE_MAX).await;
    let labels = labels.lock().expect("labels lock").clone();
    if let Some(watch) = watch {
        watch.abort();
        // The last commits since its last look.
        check_offsets_behind_outputs(&ctx, &cluster, &mut BTreeMap::new());
        check_at_least_once(&ctx, &cluster, &plan.variant, &replicas, plan.inputs, &labels, &want_configs);
    } else {
        check(&ctx, &cluster, &plan.variant, &replicas, plan.inputs, &labels, &want_configs);
    }
}

/// What one seed draws for its run: the stage, the replicas and their settings, the inputs and
/// config writes, the fault period and schedule.
struct Plan {
    variant: Variant,
    producers: Producers,
    replica_count: usize,
    inputs: i64,
    keys: u32,
    config_writes: usize,
    max_poll_records: usize,
    max_batch_records: usize,
    period: Duration,
    /// The inputs and faults start at launch, not once a replica runs tasks.
    faults_from_launch: bool,
    schedule: FaultSchedule,
}

/// Draws the seed's plan (the producer shape only where the scenario leaves it open), and
/// traces it.
fn draw_plan(
    ctx: &Ctx,
    cluster: &Cluster,
    profile: &FaultProfile,
    producers: Option<Producers>,
    abortable_commits: bool,
) -> Plan {
    let (variant, replica_count, inputs, keys, config_writes, max_poll_records, period, faults_from_launch) = {
        let mut rng = thread_rng();
        let variant = Variant {
            two_inputs: rng.gen_bool(0.5),
            groups: rng.gen_bool(0.3),
            reset_every: rng.gen_bool(0.3).then(|| rng.gen_range(1..6)),
            invalid_inputs: rng.gen_bool(0.3),
            gathers: false,
        };
        (
            variant,
            rng.gen_range(2..=3usize),
            rng.gen_range(100..400i64),
            rng.gen_range(3..30u32),
            rng.gen_range(5..40usize),
            [1usize, 7, 50, 500][rng.gen_range(0..4)],
            Duration::from_secs(rng.gen_range(8..30)),
            rng.gen_bool(FAULTS_FROM_LAUNCH),
        )
    };
    let schedule = profile.on_brokers(cluster.brokers()).generate(&mut thread_rng(), period);
    // Half the seeds gather the polls made during a commit into the next batch (TRX-45).
    let max_batch_records = {
        let mut rng = thread_rng();
        max_poll_records * if rng.gen_bool(0.5) { [2, 4, 10][rng.gen_range(0..3)] } else { 1 }
    };
    let variant = Variant { gathers: max_batch_records > max_poll_records, ..variant };
    // Drawn last, and only where the scenario leaves it open: the others draw what they drew.
    let producers =
        producers
            .unwrap_or_else(|| if thread_rng().gen_bool(0.5) { Producers::PerInstance } else { Producers::PerTask });
    // Drawn after everything else, so the schedule keeps the faults it drew before: 2–4 windows
    // in which commits fail abortably (the producer stays usable), so the paths that abort and
    // carry on run in most seeds, not only those of a fatal failure and a restart.
    let schedule = if abortable_commits {
        let mut rng = thread_rng();
        let count = rng.gen_range(2..=4);
        schedule.merged(FaultProfile::abortable_commit_windows(&mut rng, period, count))
    } else {
        schedule
    };
    // The directed episodes last: the seed's other draws stay those it drew.
    let schedule = schedule.merged(profile.directed(&mut thread_rng(), period));
    ctx.event(format!(
        "counter: {variant:?}, {producers:?}, {replica_count} replicas, {inputs} inputs over {keys} keys, {config_writes} config writes, \
         max_poll_records {max_poll_records}, max_batch_records {max_batch_records}, {} faults over {period:?}:\n{schedule}",
        schedule.len()
    ));
    Plan {
        variant,
        producers,
        replica_count,
        inputs,
        keys,
        config_writes,
        max_poll_records,
        max_batch_records,
        period,
        faults_from_launch,
        schedule,
    }
}

/// The fault run: once a replica runs tasks (or at once), buggify on if drawn, the feeder and
/// the config writer start, and the schedule's faults fire; returns when the faults and the
/// writers are done. Returns every label written per key.
async fn run_faults(
    ctx: &Ctx,
    cluster: &Cluster,
    replicas: &mut Replicas,
    plan: &Plan,
    buggify: bool,
) -> Arc<Mutex<BTreeMap<String, BTreeSet<String>>>> {
    // Most seeds start the inputs and the faults once a replica runs tasks: a fault schedule
    // spent on the startup (the group's initial rebalance delay alone is 3 s) tests little of
    // the engine. The others start them at launch, faults on the startup included.
    if !plan.faults_from_launch {
        replicas.wait_for_tasks(FIRST_TASKS_MAX, Duration::from_millis(50)).await;
    }
    // Buggify (the engine's fault points, and madsim's network delays) from here on only:
    // madsim delays 10 % of the broker's receives by 1–4 s in its single receive loop, which
    // congests the broker so much (a few requests per second) that replicas started under it
    // rarely ran a task before the fault period ended.
    if buggify {
        madsim::buggify::enable();
        ctx.event("buggify on");
    }
    ctx.event(if plan.faults_from_launch { "inputs and faults start at launch" } else { "inputs and faults start" });
    let labels: Arc<Mutex<BTreeMap<String, BTreeSet<String>>>> = Arc::default();
    let feeder = Handle::current().create_node().name("feeder").ip(cluster.client_ip()).build();
    let feeding =
        feeder.spawn(feed(cluster.kafka(), ctx.clone(), plan.variant.clone(), plan.inputs, plan.keys, plan.period));
    let writer = Handle::current().create_node().name("config-writer").ip(cluster.client_ip()).build();
    let writing =
        writer.spawn(write_configs(cluster.kafka(), ctx.clone(), plan.config_writes, plan.keys, labels.clone()));

    // Faults that last end in the background; then quiescence: no more faults, no engine stalls.
    replicas.run_faults(&plan.schedule, vec![feeding, writing]).await;
    labels
}

/// The config topic settles (every replica's store equals its compaction); then one probe per
/// key, whose outputs must carry the settled labels. Returns the compaction.
async fn settle_and_probe(ctx: &Ctx, cluster: &Cluster, replicas: &Replicas, plan: &Plan) -> BTreeMap<String, Vec<u8>> {
    let want_configs = truth::config_compaction(&truth::committed_records(cluster, CONFIGS));
    replicas.await_configs(&want_configs.clone().into(), CONFIG_CONVERGENCE_MAX).await;
    let prober = Handle::current().create_node().name("prober").ip(cluster.client_ip()).build();
    let probing = feed_probes(cluster.kafka(), ctx.clone(), plan.variant.clone(), plan.inputs, plan.keys);
    prober.spawn(probing).await.expect("never killed");
    want_configs
}

/// An input as the truth holds it: where it landed and what the stage makes of it.
struct Input {
    partition: i32,
    state_key: String,
    key: String,
    /// Where it sits: input topic index (`input_topics` order) and offset.
    position: (usize, i64),
}

/// One identity's records within one committed transaction: (output partition, offset of the
/// transaction's marker, input partition, state key).
type TransactionIdentity = (i32, i64, i32, String);

/// The transaction of every committed record of `topic`, by (partition, offset): the offset of
/// the marker that committed it (records of one producer up to its next marker form one
/// transaction on a partition).
fn transactions(cluster: &Cluster, topic: &str) -> BTreeMap<(i32, i64), i64> {
    use crate::cluster::broker::log::Body;
    cluster.inspect(|broker| {
        let mut tags = BTreeMap::new();
        let partitions = broker.partition_count(topic).unwrap_or(0) as i32;
        for p in 0..partitions {
            let log = broker.log(&flechtwerk::kafka::TopicPartition::new(topic, p)).expect("the partition exists");
            let mut open: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
            for entry in log.entries() {
                match &entry.body {
                    Body::Data(data) if data.transactional => {
                        open.entry(data.producer_id).or_default().push(entry.offset)
                    }
                    Body::Data(_) => {}
                    Body::Marker { producer_id, .. } => {
                        for offset in open.remove(producer_id).unwrap_or_default() {
                            tags.insert((p, offset), entry.offset);
                        }
                    }
                }
            }
        }
        tags
    })
}

fn decoded(record: &RawRecord) -> Option<Event> {
    flechtwerk::wire::decode_value(record.value.as_deref()).ok().map(Event::wrap)
}

fn key_of(record: &RawRecord) -> String {
    String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned()
}

/// The checks after quiescence, each family in turn, on the broker's own log.
fn check(
    ctx: &Ctx,
    cluster: &Cluster,
    variant: &Variant,
    replicas: &Replicas,
    probes_from: i64,
    labels: &BTreeMap<String, BTreeSet<String>>,
    want_configs: &BTreeMap<String, Vec<u8>>,
) {
    let (inputs, invalid) = valid_inputs(ctx, cluster, variant);
    let outputs = truth::committed_records(cluster, OUTPUT);
    let tally = tally_outputs(ctx, cluster, &inputs, &outputs, labels, probes_from, want_configs);
    check_transaction_order(ctx, cluster, variant, &tally.per_transaction);
    let n_per_identity = check_exactly_once(ctx, variant, &inputs, &tally.per_input, tally.per_identity);
    let changelog = check_changelog(ctx, cluster, variant, &n_per_identity);
    check_offsets(ctx, cluster, variant);
    // Config stores equal the compaction.
    for violation in replicas.config_mismatches(&want_configs.clone().into(), CONFIGS) {
        ctx.violation(violation);
    }
    ctx.event(format!(
        "end: {} valid and {invalid} invalid inputs, {} outputs, {} identities, {} changelog records, {} configs",
        inputs.len(),
        outputs.len(),
        n_per_identity.len(),
        changelog,
        want_configs.len()
    ));
}

/// The valid inputs, by input id, and how many did not decode; an input id written twice is a
/// violation.
fn valid_inputs(ctx: &Ctx, cluster: &Cluster, variant: &Variant) -> (BTreeMap<i64, Input>, usize) {
    let mut inputs: BTreeMap<i64, Input> = BTreeMap::new();
    let mut invalid = 0;
    for (topic_index, topic) in variant.inputs().into_iter().enumerate() {
        for record in truth::committed_records(cluster, topic) {
            let Some(value) = decoded(&record) else {
                invalid += 1;
                continue;
            };
            let i = value.require(&INPUT).expect("inputs carry their id");
            let key = key_of(&record);
            let input = Input {
                partition: record.partition,
                state_key: variant.state_key(&key, Some(&value)),
                key,
                position: (topic_index, record.offset),
            };
            if inputs.insert(i, input).is_some() {
                ctx.violation(format!("input {i} was written twice"));
            }
        }
    }
    (inputs, invalid)
}

/// The committed outputs, grouped for the checks that follow.
struct Tally {
    /// Per (output partition, transaction, identity): the input positions in output order.
    per_transaction: BTreeMap<TransactionIdentity, Vec<(usize, i64)>>,
    /// Outputs per input id.
    per_input: BTreeMap<i64, usize>,
    /// Per identity (input partition, state key): counts in output order, per output partition.
    per_identity: BTreeMap<(i32, String), BTreeMap<i32, Vec<i64>>>,
}

/// Goes through the committed outputs in order: every output decodes, names its input, and
/// carries that input's partition and state key; its config label was written for its key,
/// and a probe's is the settled one. Groups the outputs for the checks that follow.
fn tally_outputs(
    ctx: &Ctx,
    cluster: &Cluster,
    inputs: &BTreeMap<i64, Input>,
    outputs: &[RawRecord],
    labels: &BTreeMap<String, BTreeSet<String>>,
    probes_from: i64,
    want_configs: &BTreeMap<String, Vec<u8>>,
) -> Tally {
    // Every valid input has exactly one output; every output has its input.
    let output_transactions = transactions(cluster, OUTPUT);
    let mut tally =
        Tally { per_transaction: BTreeMap::new(), per_input: BTreeMap::new(), per_identity: BTreeMap::new() };
    for record in outputs {
        let Some(value) = decoded(record) else {
            ctx.violation(format!("output {}/{} does not decode", record.partition, record.offset));
            continue;
        };
        let (Ok(i), Ok(count)) = (value.require(&INPUT), value.require(&COUNT)) else {
            ctx.violation(format!("output {}/{} lacks its input id or count", record.partition, record.offset));
            continue;
        };
        *tally.per_input.entry(i).or_default() += 1;
        match inputs.get(&i) {
            None => ctx.violation(format!("output for input {i}, which is not a valid input")),
            Some(input) => {
                if value.get(&PARTITION).ok().flatten() != Some(i64::from(input.partition))
                    || value.get(&STATE_KEY).ok().flatten().as_deref() != Some(input.state_key.as_str())
                {
                    ctx.violation(format!("output for input {i} names another partition or state key"));
                }
                if let Some(&txn) = output_transactions.get(&(record.partition, record.offset)) {
                    tally
                        .per_transaction
                        .entry((record.partition, txn, input.partition, input.state_key.clone()))
                        .or_default()
                        .push(input.position);
                }
                tally
                    .per_identity
                    .entry((input.partition, input.state_key.clone()))
                    .or_default()
                    .entry(record.partition)
                    .or_default()
                    .push(count);
                check_label(ctx, i, input, &value, labels, probes_from, want_configs);
            }
        }
    }
    tally
}

/// The config label input `i`'s output joined: one that was written for its key, and for a
/// probe the one the settled config topic holds.
fn check_label(
    ctx: &Ctx,
    i: i64,
    input: &Input,
    value: &Event,
    labels: &BTreeMap<String, BTreeSet<String>>,
    probes_from: i64,
    want_configs: &BTreeMap<String, Vec<u8>>,
) {
    let label = value.get(&LABEL).ok().flatten();
    if let Some(label) = &label {
        if !labels.get(&input.key).is_some_and(|l| l.contains(label)) {
            ctx.violation(format!("input {i} of {} joined label {label:?}, never written for it", input.key));
        }
    }
    if i >= probes_from {
        let want = want_configs
            .get(&input.key)
            .and_then(|bytes| flechtwerk::wire::decode_value(Some(bytes)).ok())
            .and_then(|map| Event::wrap(map).get(&LABEL).ok().flatten());
        if label != want {
            ctx.violation(format!("probe {i} of {} joined {label:?}, the settled config says {want:?}", input.key));
        }
    }
}

/// TRX-03: within one transaction, a state's records run in input_topics order, then offset
/// order (one report per identity). A batch that gathered several polls (TRX-45) runs each
/// poll's records in turn: its order restarts where one poll ends and the next begins. The
/// clients' poll log tells where that can be: two records out of order are a violation if no
/// consumer ever handed out the later one in a poll without the earlier one.
fn check_transaction_order(
    ctx: &Ctx,
    cluster: &Cluster,
    variant: &Variant,
    per_transaction: &BTreeMap<TransactionIdentity, Vec<(usize, i64)>>,
) {
    let client = cluster.kafka();
    let polls = client.poll_log();
    let topics = variant.inputs();
    let record = |partition: i32, (topic, offset): (usize, i64)| (topics[topic].to_owned(), partition, offset);
    let mut misordered = BTreeSet::new();
    for ((output_partition, txn, partition, state_key), positions) in per_transaction {
        let out_of_order = if variant.gathers {
            let mut last: BTreeMap<usize, i64> = BTreeMap::new();
            positions.iter().any(|&(topic, offset)| last.insert(topic, offset).is_some_and(|before| before >= offset))
                || positions
                    .windows(2)
                    .any(|w| w[0] > w[1] && polls.only_together(&record(*partition, w[0]), &record(*partition, w[1])))
        } else {
            positions.windows(2).any(|w| w[0] >= w[1])
        };
        if out_of_order && misordered.insert((*partition, state_key.clone())) {
            ctx.violation(format!(
                "TRX-03: identity ({partition}, {state_key:?}) ran out of order in the transaction committed at \
                 {OUTPUT}/{output_partition}@{txn}: (input topic, offset) {positions:?}"
            ));
        }
    }
}

/// Exactly-once: every valid input has exactly one output, and per identity the counts are
/// exactly those of its n inputs (1..n, or 1..k repeated with resets), in order within each
/// output partition when the count never resets. Returns the inputs per identity.
fn check_exactly_once(
    ctx: &Ctx,
    variant: &Variant,
    inputs: &BTreeMap<i64, Input>,
    per_input: &BTreeMap<i64, usize>,
    mut per_identity: BTreeMap<(i32, String), BTreeMap<i32, Vec<i64>>>,
) -> BTreeMap<(i32, String), i64> {
    let mut n_per_identity: BTreeMap<(i32, String), i64> = BTreeMap::new();
    for (i, input) in inputs {
        *n_per_identity.entry((input.partition, input.state_key.clone())).or_default() += 1;
        match per_input.get(i).copied().unwrap_or(0) {
            1 => {}
            0 => ctx.violation(format!(
                "exactly-once: input {i} ({} on partition {}) has no output",
                input.key, input.partition
            )),
            n => ctx.violation(format!(
                "exactly-once: input {i} ({} on partition {}) has {n} outputs",
                input.key, input.partition
            )),
        }
    }
    for (identity, n) in &n_per_identity {
        let by_partition = per_identity.remove(identity).unwrap_or_default();
        let mut counts: Vec<i64> = by_partition.values().flatten().copied().collect();
        counts.sort_unstable();
        let mut want: Vec<i64> = (1..=*n).map(|j| variant.count_of(j)).collect();
        want.sort_unstable();
        if counts != want {
            ctx.violation(format!("exactly-once: identity {identity:?} has counts {counts:?} for {n} inputs"));
        }
        if variant.reset_every.is_none() {
            for (partition, seq) in &by_partition {
                if seq.windows(2).any(|w| w[0] >= w[1]) {
                    ctx.violation(format!(
                        "identity {identity:?}: counts out of order in output partition {partition}: {seq:?}"
                    ));
                }
            }
        }
    }
    n_per_identity
}

/// The changelog's last value per identity is its final state. Returns the changelog's number
/// of committed records.
fn check_changelog(
    ctx: &Ctx,
    cluster: &Cluster,
    variant: &Variant,
    n_per_identity: &BTreeMap<(i32, String), i64>,
) -> usize {
    let changelog = truth::committed_records(cluster, &format!("{APP}-changelog"));
    let mut last: BTreeMap<(i32, String), Option<i64>> = BTreeMap::new();
    for record in &changelog {
        let count = if flechtwerk::wire::is_tombstone(record.value.as_deref()) {
            None
        } else {
            decoded(record).and_then(|v| v.get(&COUNT).ok().flatten())
        };
        last.insert((record.partition, key_of(record)), count);
    }
    for (identity, n) in n_per_identity {
        let got = last.get(identity).copied().flatten();
        let want = variant.final_state(*n);
        if got != want {
            ctx.violation(format!("changelog: identity {identity:?} ends at {got:?}, {n} inputs make {want:?}"));
        }
    }
    changelog.len()
}

/// The group's committed offsets reach the end of every input partition.
fn check_offsets(ctx: &Ctx, cluster: &Cluster, variant: &Variant) {
    let committed = truth::committed_offsets(cluster, APP);
    for topic in variant.inputs() {
        for (tp, end) in truth::log_ends(cluster, topic) {
            let got = committed.get(&tp).copied();
            if got.unwrap_or(0) != end {
                ctx.violation(format!("committed offset of {tp} is {got:?}, the partition ends at {end}"));
            }
        }
    }
}

/// How often the offset watcher of `counter-alo` looks at the group's committed offsets.
const WATCH_INTERVAL: Duration = Duration::from_millis(10);

/// At least once: every `WATCH_INTERVAL`, the group's committed offsets are compared with the
/// outputs in the log (see [`check_offsets_behind_outputs`]). Runs until aborted.
async fn watch_offsets(ctx: Ctx, cluster: Cluster) {
    let mut checked = BTreeMap::new();
    loop {
        sleep(WATCH_INTERVAL).await;
        check_offsets_behind_outputs(&ctx, &cluster, &mut checked);
    }
}

/// At least once, the offsets are never ahead of the outputs: every valid input below a
/// committed offset has an output in the log already (an offset committed before its batch's
/// outputs were acknowledged loses them if they then fail). `checked` holds, per input
/// partition, the offset up to which that was checked; only what the group committed beyond it
/// is checked (one violation per partition and look).
fn check_offsets_behind_outputs(
    ctx: &Ctx,
    cluster: &Cluster,
    checked: &mut BTreeMap<flechtwerk::kafka::TopicPartition, i64>,
) {
    let committed = truth::committed_offsets(cluster, APP);
    let advanced: Vec<(flechtwerk::kafka::TopicPartition, i64, i64)> = committed
        .into_iter()
        .filter_map(|(tp, offset)| {
            let from = checked.get(&tp).copied().unwrap_or(0);
            (offset > from).then_some((tp, from, offset))
        })
        .collect();
    if advanced.is_empty() {
        return;
    }
    // One consistent look at the inputs and the outputs.
    let (inputs, outputs): (Vec<Vec<RawRecord>>, Vec<RawRecord>) = cluster.inspect(|broker| {
        let inputs = advanced.iter().map(|(tp, _, _)| broker.read_committed(tp).unwrap_or_default()).collect();
        let partitions = broker.partition_count(OUTPUT).unwrap_or(0) as i32;
        let outputs = (0..partitions)
            .flat_map(|p| broker.read_committed(&flechtwerk::kafka::TopicPartition::new(OUTPUT, p)).unwrap_or_default())
            .collect();
        (inputs, outputs)
    });
    let answered: BTreeSet<i64> =
        outputs.iter().filter_map(|record| decoded(record).and_then(|v| v.require(&INPUT).ok())).collect();
    for ((tp, from, offset), records) in advanced.into_iter().zip(inputs) {
        let unanswered = records
            .iter()
            .filter(|r| r.offset >= from && r.offset < offset)
            .filter_map(|r| decoded(r).and_then(|v| v.require(&INPUT).ok()).map(|i| (r.offset, i)))
            .find(|(_, i)| !answered.contains(i));
        if let Some((at, i)) = unanswered {
            ctx.violation(format!(
                "at-least-once: the offset of {tp} was committed at {offset} while input {i} at {at} has no output"
            ));
        }
        checked.insert(tp, offset);
    }
}

/// The checks of `counter-alo` after quiescence: every valid input has an output (duplicates
/// allowed, counted in the trace), every output names a valid input and carries its partition,
/// state key and a label written for its key (a probe's: the settled one), the offsets reach
/// the end of every input partition, and the config stores equal the compaction. The counts
/// are not checked: a batch whose outputs and changelog records were written but whose offsets
/// were not is processed again, and its inputs counted again.
fn check_at_least_once(
    ctx: &Ctx,
    cluster: &Cluster,
    variant: &Variant,
    replicas: &Replicas,
    probes_from: i64,
    labels: &BTreeMap<String, BTreeSet<String>>,
    want_configs: &BTreeMap<String, Vec<u8>>,
) {
    let (inputs, invalid) = valid_inputs(ctx, cluster, variant);
    let outputs = truth::committed_records(cluster, OUTPUT);
    let tally = tally_outputs(ctx, cluster, &inputs, &outputs, labels, probes_from, want_configs);
    let mut duplicates = 0;
    let mut repeated = 0;
    for (i, input) in &inputs {
        match tally.per_input.get(i).copied().unwrap_or(0) {
            0 => ctx.violation(format!(
                "at-least-once: input {i} ({} on partition {}) has no output",
                input.key, input.partition
            )),
            1 => {}
            n => {
                duplicates += n - 1;
                repeated += 1;
            }
        }
    }
    check_offsets(ctx, cluster, variant);
    for violation in replicas.config_mismatches(&want_configs.clone().into(), CONFIGS) {
        ctx.violation(violation);
    }
    ctx.event(format!(
        "end: {} valid and {invalid} invalid inputs, {} outputs, {duplicates} duplicates of {repeated} inputs, {} configs",
        inputs.len(),
        outputs.len(),
        want_configs.len()
    ));
}
