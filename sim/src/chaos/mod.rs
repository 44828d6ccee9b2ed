//! Chaos-test your own stage: run a transformer (or an extractor, [`Chaos::extractor`], or an MQTT
//! bridge, [`Chaos::mqtt`]) you wrote under our seeded faults, from a plain `#[test]` built with `--cfg madsim`, and check it with a
//! differential oracle.
//!
//! ```ignore
//! use flechtwerk_sim::chaos::{Chaos, Input};
//!
//! #[test]
//! fn running_sums_are_exactly_once() {
//!     Chaos::transformer(|| running_sum("amounts", "sums"))
//!         .input("amounts", 4)
//!         .output("sums", 4)
//!         .inputs(300, |rng, i| Input::new("amounts", format!("acct-{}", rng.below(20)), format!(r#"{{"amount":{i}}}"#)))
//!         .profile("everything")
//!         .replicas(3)
//!         .run();
//! }
//! ```
//!
//! For every seed the harness runs the stage twice on the simulated cluster:
//!
//! 1. **under chaos**: `replicas` replicas, the profile's fault schedule (generated from the
//!    seed), the inputs fed while the faults fire, then quiescence;
//! 2. **for reference**: one replica, no faults, fed exactly the inputs that the chaos run's
//!    broker committed, partition by partition in the same order.
//!
//! Exactly-once makes the two equal, whatever the faults did: per output topic and key, the
//! committed outputs are the same sequence, and per changelog partition and key, the final state
//! is the same. A lost, repeated or reordered effect shows as a diff per key. Structural checks
//! come on top: every input offset committed and no transaction left open after quiescence (a
//! stall is a violation too), and every live replica's config store equal to the config topics'
//! compaction. `check` adds properties of your own over the committed outputs.
//!
//! The oracle needs a *deterministic* stage: the same inputs in the same order per partition give
//! the same outputs. Config entries are written before the inputs (`configs`), or during the run
//! as barriers ([`Chaos::config_change`]: every input before a change is committed before it is
//! written, and every live replica has applied it before the next input is), so a join reads the
//! same configs for every input in both runs. Outputs of one output key must come from one input partition
//! (the usual shape: keyed by the input key or the state key), since the interleaving of
//! different partitions is not fixed even without faults.
//!
//! **MQTT bridges** ([`Chaos::mqtt`]) are fed by devices publishing QoS 1 messages
//! ([`Chaos::publishes`]) to a simulated MQTT broker, under the profile's MQTT version
//! ([`FaultProfile::for_mqtt`]: MQTT broker restarts and dropped MQTT connections besides the
//! Kafka faults, partitions cutting both connections). The reference run is fed the messages the
//! chaos run's broker queued for the bridge, in publish order. MQTT redelivers what was not
//! acknowledged, and a bridge acknowledges after the commit, so a crash or a dropped connection
//! between the two makes a second copy, which the contract allows (MQ-38); "equal" is the `mqtt`
//! scenario's rule: per output topic and key, every value the reference committed is committed
//! at least as often (no loss), no other value is (nothing invented), and a value is committed
//! more often only up to the number of times the broker delivered the messages the reference
//! relayed into it (a duplicate needs a redelivery). Order is not compared: shared subscriptions
//! split a topic's messages over the replicas. Besides, at every acknowledgement the broker
//! applies, the output the relay made of that message must already be committed, and after
//! quiescence every replica subscribes the active configs' filters (no filter its process
//! retired), and its config store equals the config topics' compaction. The stage must be
//! deterministic per message: the same config, topic and payload give the same output. The
//! checks know a message by its topic and payload: give every message a distinct payload (a
//! sequence number), or two identical messages count as one.
//!
//! On a failure the test panics with the seed, each violation, the fault schedule **shrunk** to
//! few faults that still fail (no fault, then each fault alone, then greedy removal of one
//! fault at a time), and a replay line. Seeds come
//! from [`Chaos::seeds`] (default `0..20`); `FLECHTWERK_CHAOS_SEEDS=N` or `=A..B` in the test's
//! environment overrides them (CI), `FLECHTWERK_CHAOS_SEED=S` replays one seed with its trace.
//!
//! The module's files: this one holds the builder, [`Chaos::run`] and the types a test meets;
//! `transformer`, `extractor` and `mqtt` hold what is particular to each stage shape (its
//! constructor and its chaos run); `run` runs one seed, the chaos run and its reference, each on
//! its own simulated runtime; `shrink` picks the seeds and shrinks a failing seed's schedule;
//! `report` holds the [`Failure`] a test panics with, the oracle's differences per key, and the
//! timeline of the shrunk run.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use flechtwerk::wire::RawRecord;
use madsim::rand::RngCore;

use crate::harness::faults::{FaultProfile, FaultSchedule};
use crate::harness::replicas::Launch;
use crate::harness::{BRIDGE_TRANSACTION_TIMEOUT, REPLICAS_MAX, SESSION_TIMEOUT, TRANSACTION_TIMEOUT};
use crate::runner::TransactionVersions;

pub mod compaction;
mod extractor;
mod mqtt;
mod report;
mod run;
mod shrink;
mod stalls;
mod transformer;

pub use mqtt::{MqttInput, Published};
pub use report::Failure;

use mqtt::{BridgeFactory, MqttGenerator};

/// How long the inputs and faults wait at most for a replica's first tasks.
const FIRST_TASKS_MAX: Duration = Duration::from_secs(60);
/// Keys whose differences a failure prints (the rest are counted).
const DIFFS_SHOWN: usize = 5;

/// One input or config record: topic, key, value (`None`: a tombstone).
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    /// Topic.
    pub topic: String,
    /// Key.
    pub key: String,
    /// Value bytes; `None` is a tombstone.
    pub value: Option<Vec<u8>>,
}

impl Input {
    /// A record with a value.
    pub fn new(topic: impl Into<String>, key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        Input { topic: topic.into(), key: key.into(), value: Some(value.into()) }
    }

    /// A tombstone.
    pub fn tombstone(topic: impl Into<String>, key: impl Into<String>) -> Self {
        Input { topic: topic.into(), key: key.into(), value: None }
    }
}

/// The deterministic random source the input generator gets (SplitMix64, seeded from the seed):
/// the same seed gives the same inputs in every run of it, shrinking runs included.
#[derive(Clone, Debug)]
pub struct Gen(u64);

impl Gen {
    pub(crate) fn new(seed: u64, stream: u64) -> Self {
        Gen(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ stream)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

impl RngCore for Gen {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), madsim::rand::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

/// What a run's broker committed, as the checks see it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Per output topic and key, the committed values in offset order.
    pub outputs: BTreeMap<(String, String), Vec<Option<Bytes>>>,
    /// Per changelog partition and state key, the last committed value (`None`: deleted).
    pub state: BTreeMap<(i32, String), Option<Bytes>>,
    /// The committed input records, per partition in offset order.
    pub inputs: Vec<RawRecord>,
    /// MQTT bridges: the messages the devices published, in publish order.
    pub published: Vec<Published>,
}

type Property = Arc<dyn Fn(&Outcome) -> Result<(), String> + Send + Sync>;
/// The topics the stage reads (its inputs, its config topics), from a fresh instance of it.
type ReadTopics = Arc<dyn Fn() -> (Vec<String>, Vec<String>) + Send + Sync>;
/// Rewrites an output value (topic, value) before the oracle compares the two runs.
type Normalize = Arc<dyn Fn(&str, Option<Bytes>) -> Option<Bytes> + Send + Sync>;
type Generator = Arc<dyn Fn(&mut Gen, usize) -> Input + Send + Sync>;
/// The replicas' launch, given the application id, `max_poll_records` and the poll interval.
type Factory = Arc<dyn Fn(String, usize, Duration) -> Launch + Send + Sync>;

/// What runs under chaos.
#[derive(Clone)]
enum Shape {
    Transformer(Factory),
    Extractor(Factory),
    Mqtt(BridgeFactory),
}

/// A chaos test of one transformer, extractor or MQTT bridge stage (see the [module](self) docs).
#[derive(Clone)]
pub struct Chaos {
    shape: Shape,
    read_topics: ReadTopics,
    poll_interval: Duration,
    settle: Option<Duration>,
    application_id: String,
    inputs_topics: Vec<(String, u32)>,
    outputs_topics: Vec<(String, u32)>,
    config_topics: Vec<(String, u32)>,
    configs: Vec<Input>,
    /// Config records written during the run, each once its count of inputs was fed.
    config_changes: Vec<(usize, Input)>,
    /// The changelog a first start finds: (the reference run's, the chaos run's).
    restored: Option<(Vec<compaction::StateWrite>, Vec<compaction::StateWrite>)>,
    generator: Option<(usize, Generator)>,
    publisher: Option<(usize, MqttGenerator)>,
    slow_ack_max: Duration,
    profile: FaultProfile,
    /// The profile is a preset (`profile(name)`, or the default): on several brokers it gets
    /// the broker faults. A profile given knob by knob is run as given.
    preset: bool,
    brokers: u32,
    transaction_versions: TransactionVersions,
    replicas: usize,
    period: Duration,
    max_poll_records: usize,
    seeds: Range<u64>,
    properties: Vec<Property>,
    normalize: Option<Normalize>,
}

impl Chaos {
    fn new(shape: Shape, read_topics: ReadTopics) -> Self {
        Chaos {
            shape,
            read_topics,
            poll_interval: Duration::from_millis(500),
            settle: None,
            application_id: "chaos-app".into(),
            inputs_topics: Vec::new(),
            outputs_topics: Vec::new(),
            config_topics: Vec::new(),
            configs: Vec::new(),
            config_changes: Vec::new(),
            restored: None,
            generator: None,
            publisher: None,
            slow_ack_max: Duration::ZERO,
            profile: FaultProfile::everything(),
            preset: true,
            brokers: 3,
            transaction_versions: TransactionVersions::Mixed,
            replicas: 3,
            period: Duration::from_secs(15),
            max_poll_records: 50,
            seeds: 0..20,
            properties: Vec::new(),
            normalize: None,
        }
    }

    /// The application id (default `chaos-app`): group, transactional ids, changelog name.
    pub fn application_id(mut self, id: impl Into<String>) -> Self {
        self.application_id = id.into();
        self
    }

    /// An input topic the stage consumes, with its partition count.
    pub fn input(mut self, topic: impl Into<String>, partitions: u32) -> Self {
        self.inputs_topics.push((topic.into(), partitions));
        self
    }

    /// An output topic the stage writes, with its partition count.
    pub fn output(mut self, topic: impl Into<String>, partitions: u32) -> Self {
        self.outputs_topics.push((topic.into(), partitions));
        self
    }

    /// A config topic the stage joins (created compacted), with its partition count.
    pub fn config(mut self, topic: impl Into<String>, partitions: u32) -> Self {
        self.config_topics.push((topic.into(), partitions));
        self
    }

    /// Config records written (and acknowledged) before the replicas start.
    pub fn configs(mut self, records: impl IntoIterator<Item = Input>) -> Self {
        self.configs.extend(records);
        self
    }

    /// A config record written during the run (a tombstone, `Input::tombstone`, deletes), once
    /// the first `after` inputs were fed. Transformers only.
    ///
    /// The change is a barrier, in the chaos run and in its reference alike: the feeder waits
    /// until every input written before it is committed, writes the record, and goes on with the
    /// inputs once every live replica's config store has applied it. So an input is processed
    /// under the configs written before it in both runs, and the oracle stays exact. What this
    /// does not test is an input processed *while* a config change spreads (the join is
    /// eventually consistent there, and no reference could say which config it must see); the
    /// `config-topics` simulation scenario checks the stores themselves under that race.
    /// A change that does not reach every live replica within 300 s is a liveness violation.
    ///
    /// ```ignore
    /// test.config_change(100, Input::new("limits", "acct-3", r#"{"max":10}"#))
    ///     .config_change(200, Input::tombstone("limits", "acct-3"))
    /// ```
    pub fn config_change(mut self, after: usize, record: Input) -> Self {
        self.config_changes.push((after, record));
        self.config_changes.sort_by_key(|(after, _)| *after);
        self
    }

    /// `count` inputs, the `i`-th made by `generate(rng, i)`; fed while the faults fire. Each
    /// goes to an input topic of the test: a config record goes through [`Chaos::configs`] (before
    /// the run) or [`Chaos::config_change`] (during it), and one fed here is refused.
    pub fn inputs(mut self, count: usize, generate: impl Fn(&mut Gen, usize) -> Input + Send + Sync + 'static) -> Self {
        self.generator = Some((count, Arc::new(generate)));
        self
    }

    /// MQTT bridges: `count` messages the devices publish, the `i`-th made by `generate(rng, i)`;
    /// published while the faults fire, spread over the period.
    pub fn publishes(
        mut self,
        count: usize,
        generate: impl Fn(&mut Gen, usize) -> MqttInput + Send + Sync + 'static,
    ) -> Self {
        self.publisher = Some((count, Arc::new(generate)));
        self
    }

    /// MQTT bridges: the longest delay of an acknowledgement on its way to the MQTT broker
    /// (uniform from zero; default none). A connection that drops meanwhile loses it, and the
    /// broker sends the message again.
    pub fn slow_acks(mut self, max: Duration) -> Self {
        self.slow_ack_max = max;
        self
    }

    /// A fault profile by preset name: `calm`, `rebalances`, `crashes`, `zombies`, `network`,
    /// `broker` or `everything` (the default). Panics on another name, listing the presets.
    #[track_caller]
    pub fn profile(mut self, name: &str) -> Self {
        self.profile = FaultProfile::named(name)
            .unwrap_or_else(|| panic!("no fault profile {name:?}; presets: {:?}", FaultProfile::PRESETS));
        self.preset = true;
        self
    }

    /// A fault profile with its knobs set (start from a preset, e.g. `FaultProfile::crashes()`),
    /// run as given: on several brokers the broker faults fire only with weights set here
    /// (e.g. `..FaultProfile::everything().on_brokers(3)`).
    pub fn fault_profile(mut self, profile: FaultProfile) -> Self {
        self.profile = profile;
        self.preset = false;
        self
    }

    /// Brokers of the simulated Kafka cluster (default 3, 1 to 9): partitions replicated 3×
    /// (fewer on fewer brokers) with `min.insync.replicas` 2, leaders, the transaction and group
    /// coordinators on the brokers Kafka places them on, and failover. On several brokers the
    /// preset profiles get the broker faults too ([`FaultProfile::on_brokers`]: a broker
    /// crashed, paused or cut off, leadership moved, a failover while the followers lag); on
    /// one, the single node that every seed ran on before (its seeds draw the schedules they
    /// drew then).
    pub fn brokers(mut self, count: u32) -> Self {
        self.brokers = count.clamp(1, 9);
        self
    }

    /// The cluster's `transaction.version` per seed: 1, 2 (KIP-890: an epoch bump per
    /// transaction), or by default both, seeds alternating ([`TransactionVersions::Mixed`]).
    pub fn transaction_version(mut self, versions: TransactionVersions) -> Self {
        self.transaction_versions = versions;
        self
    }

    /// Replicas under chaos (default 3; at most 4 alive at once).
    pub fn replicas(mut self, count: usize) -> Self {
        self.replicas = count.clamp(1, REPLICAS_MAX);
        self
    }

    /// How long faults fire and inputs flow (default 15 s of simulated time).
    pub fn period(mut self, period: Duration) -> Self {
        self.period = period;
        self
    }

    /// The replicas' `max_poll_records` (default 50).
    pub fn max_poll_records(mut self, records: usize) -> Self {
        self.max_poll_records = records.max(1);
        self
    }

    /// Extractors: the wait between poll cycles (default 500 ms).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// Extractors: how long the output topics must stay unchanged, with no transaction open on
    /// them or the changelog, for a run to be over (default: 20 poll intervals, at least 10 s).
    pub fn settle(mut self, quiet: Duration) -> Self {
        self.settle = Some(quiet);
        self
    }

    /// The seeds to run when the environment names none (default `0..20`).
    pub fn seeds(mut self, seeds: Range<u64>) -> Self {
        self.seeds = seeds;
        self
    }

    /// A property of your own over a chaos run's committed outcome, checked on every seed.
    pub fn check(mut self, property: impl Fn(&Outcome) -> Result<(), String> + Send + Sync + 'static) -> Self {
        self.properties.push(Arc::new(property));
        self
    }

    /// Rewrites every output value of both runs before the oracle compares them, for a stage
    /// whose outputs carry what may legitimately differ between two runs (a processing time, a
    /// replica's name): mask or drop that field here. Your `.check` properties still see the
    /// outputs as committed.
    ///
    /// ```ignore
    /// use flechtwerk::json::{self, Value};
    /// // Drop the `processed_at` field of every output before the comparison.
    /// test.normalize_outputs(|_topic, value| {
    ///     let value = value?;
    ///     let Ok(Value::Object(mut map)) = json::parse(std::str::from_utf8(&value).ok()?) else { return Some(value) };
    ///     map.remove("processed_at");
    ///     Some(json::to_canonical_bytes(&Value::Object(map)).ok()?.into())
    /// })
    /// ```
    pub fn normalize_outputs(
        mut self,
        normalize: impl Fn(&str, Option<Bytes>) -> Option<Bytes> + Send + Sync + 'static,
    ) -> Self {
        self.normalize = Some(Arc::new(normalize));
        self
    }

    /// Runs every seed; panics with the first failure (shrunk) and its replay line. The panic
    /// names the caller's line (your test), not the harness's.
    #[track_caller]
    pub fn run(self) {
        if let Err(failure) = self.try_run() {
            panic!("{failure}");
        }
    }

    /// Runs every seed; the first failure, shrunk. Prints one line to stderr at the end (seeds,
    /// faults by kind, handovers, aborted transactions, simulated time), shown by
    /// `cargo test -- --nocapture` or when the test fails.
    #[allow(clippy::result_large_err, reason = "a test's failure path, returned once")]
    #[track_caller]
    pub fn try_run(&self) -> Result<(), Failure> {
        let (seeds, verbose) = self.seeds_to_run();
        let mut summary = report::RunSummary::default();
        let only = self.faults_to_replay();
        for seed in seeds {
            let mut schedule = self.schedule(seed);
            if let Some(kept) = &only {
                let dropped: Vec<usize> = (0..schedule.len()).filter(|i| !kept.contains(i)).collect();
                schedule = schedule.without(&dropped);
            }
            let run::SeedRun { violations, events, .. } = self.run_seed_traced(seed, &schedule, verbose);
            summary.add(&schedule, &events);
            if !violations.is_empty() {
                eprintln!("{summary} (seed {seed} failed)");
                let shrunk = self.shrink(seed, &schedule);
                // The shrunk schedule's run once more, traced: the one the timeline draws and
                // the failure lists.
                let run = self.run_seed_traced(seed, &shrunk, false);
                let timeline = self.write_timeline(seed, &shrunk, &run);
                // Positions in the seed's whole schedule, so the replay line names them alike.
                let whole = self.schedule(seed);
                let replay = Failure::replay_command(seed, &Failure::kept(&whole, &shrunk));
                return Err(Failure {
                    seed,
                    violations,
                    schedule,
                    shrunk,
                    buggify: report::buggify_window(&run.events, run.origin),
                    buggify_stalls: report::buggify_stalls(&run.events, run.origin),
                    shrunk_violations: run.violations,
                    shrunk_hits: run.hits,
                    timeline,
                    replay,
                });
            }
        }
        eprintln!("{summary}");
        Ok(())
    }

    /// The seed's fault schedule (from the profile, drawn from the seed).
    pub fn schedule(&self, seed: u64) -> FaultSchedule {
        self.timed_profile().generate(&mut Gen::new(seed, 1), self.period)
    }

    /// A proptest strategy over this test's fault schedules: the profile's
    /// [`FaultProfile::strategy`] over the period, pauses drawn around the replicas' timeouts.
    /// For properties of your own over any schedule, each case run with [`Chaos::run_seed`]:
    ///
    /// ```ignore
    /// let test = Chaos::transformer(running_sum).input("amounts", 4) /* … */.profile("rebalances");
    /// proptest!(|(schedule in test.schedule_strategy())| {
    ///     let violations = test.run_seed(0, &schedule, false);
    ///     prop_assert!(violations.is_empty(), "{}", violations.join("\n"));
    /// });
    /// ```
    pub fn schedule_strategy(&self) -> proptest::strategy::BoxedStrategy<FaultSchedule> {
        self.timed_profile().strategy(self.period)
    }

    fn timed_profile(&self) -> FaultProfile {
        let brokers = if self.preset { self.brokers } else { 1 };
        match self.shape {
            // The bridge's pages commit within the engine's page transaction timeout.
            Shape::Mqtt(_) => FaultProfile {
                session_timeout: SESSION_TIMEOUT,
                transaction_timeout: BRIDGE_TRANSACTION_TIMEOUT,
                ..self.profile.for_mqtt().on_brokers(brokers)
            },
            _ => FaultProfile {
                session_timeout: SESSION_TIMEOUT,
                transaction_timeout: TRANSACTION_TIMEOUT,
                ..self.profile.on_brokers(brokers)
            },
        }
    }

    /// Runs one seed with `schedule` (the chaos run and its reference): its violations.
    #[track_caller]
    pub fn run_seed(&self, seed: u64, schedule: &FaultSchedule, verbose: bool) -> Vec<String> {
        self.run_seed_traced(seed, schedule, verbose).violations
    }
}
