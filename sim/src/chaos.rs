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
//! the same outputs. Config entries are written before the inputs (`configs`), so a join reads
//! the same configs in both runs. Outputs of one output key must come from one input partition
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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use flechtwerk::kafka::{Kafka, ProducerConfig, ProducerRecord};
use flechtwerk::stage::{BoxError, EnrichConfig, MqttBrokerConfig, MqttExtractor};
use flechtwerk::wire::{InvalidMessageAction, InvalidMessageError, RawRecord};
use flechtwerk::{Config, Event, Flechtwerk, IntoRunner, Message};
use madsim::rand::RngCore;
use madsim::runtime::{Handle, Runtime};
use madsim::time::sleep;

use crate::cluster::{Cluster, KafkaClient};
use crate::harness::disk::SimDisk;
use crate::harness::faults::{FaultProfile, FaultSchedule};
use crate::harness::mqtt::{self as bridge, OwnSubscriptions};
use crate::harness::replicas::{error_kind, stage_launch, transformer_launch, Launch, ReplicaEnv, Replicas};
use crate::harness::{
    topic, truth, BRIDGE_TRANSACTION_TIMEOUT, CONFIG_CONVERGENCE_MAX, QUIESCENCE_MAX, REPLICAS_MAX, SESSION_TIMEOUT,
    TRANSACTION_TIMEOUT,
};
use crate::mqtt::{MqttBroker, SimBrokerConfig};
use crate::runner::{Ctx, TransactionVersions};

/// How long the inputs and faults wait at most for a replica's first tasks.
const FIRST_TASKS_MAX: Duration = Duration::from_secs(60);
/// Keys whose differences a failure prints (the rest are counted).
const DIFFS_SHOWN: usize = 5;
/// Runs the shrinker may spend on one failing seed.
const SHRINK_RUNS_MAX: usize = 60;

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
    poll_interval: Duration,
    settle: Option<Duration>,
    application_id: String,
    inputs_topics: Vec<(String, u32)>,
    outputs_topics: Vec<(String, u32)>,
    config_topics: Vec<(String, u32)>,
    configs: Vec<Input>,
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
}

/// Why a seed failed.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// What was violated.
    pub violations: Vec<String>,
    /// The seed's fault schedule.
    pub schedule: FaultSchedule,
    /// The fewest faults found that still fail (the seed's schedule when nothing could go).
    pub shrunk: FaultSchedule,
    /// The SVG timeline of the shrunk schedule's failing run (see [`crate::timeline`]), if it
    /// could be written.
    pub timeline: Option<std::path::PathBuf>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seed {} failed:", self.seed)?;
        for v in &self.violations {
            writeln!(f, "  - {v}")?;
        }
        writeln!(f, "its {} faults shrink to {} that still fail:", self.schedule.len(), self.shrunk.len())?;
        for line in self.shrunk.to_string().lines() {
            writeln!(f, "  {line}")?;
        }
        if let Some(path) = &self.timeline {
            writeln!(f, "timeline of the shrunk run: {}", path.display())?;
        }
        write!(f, "replay: FLECHTWERK_CHAOS_SEED={} RUSTFLAGS=\"--cfg madsim\" cargo test <this test>", self.seed)
    }
}

impl Chaos {
    /// A chaos test of the transformer that `stage` builds (called once per replica start).
    pub fn transformer<S, M>(stage: impl Fn() -> S + Send + Sync + 'static) -> Self
    where
        S: IntoRunner<M> + 'static,
        M: 'static,
    {
        let stage = Arc::new(stage);
        let factory: Factory = Arc::new(move |app: String, max_poll_records: usize, _: Duration| {
            let stage = stage.clone();
            transformer_launch(app, max_poll_records, move || stage())
        });
        Chaos::new(Shape::Transformer(factory))
    }

    /// A chaos test of the extractor that `stage` builds (called once per replica start).
    ///
    /// The things to poll are the config entries (`config`, `configs`); the stage reads its
    /// external source itself, and that source must give both runs the same items (a fixed or
    /// seeded one, shared by the replicas as a real source is). There are no inputs: once the
    /// faults stop, the run is over when no transaction is open and the output topics have
    /// not grown for [`Chaos::settle`] (default 20 poll intervals, at least
    /// 10 s). The oracle is the same: per output key the committed outputs, and per config the
    /// final state (its cursor), equal those of a one-replica run without faults.
    pub fn extractor<S, M>(stage: impl Fn() -> S + Send + Sync + 'static) -> Self
    where
        S: IntoRunner<M> + 'static,
        M: 'static,
    {
        let stage = Arc::new(stage);
        let factory: Factory = Arc::new(move |app: String, max_poll_records: usize, poll_interval: Duration| {
            let stage = stage.clone();
            stage_launch(app, max_poll_records, Some(poll_interval), move || stage())
        });
        Chaos::new(Shape::Extractor(factory))
    }

    /// A chaos test of the MQTT bridge that `stage` builds (called once per replica start):
    /// devices publish [`Chaos::publishes`] to a simulated MQTT broker while the faults fire,
    /// the fault profile's MQTT version ([`FaultProfile::for_mqtt`]: MQTT broker restarts and
    /// dropped MQTT connections besides the Kafka faults; no scale-up or -down).
    ///
    /// The config entries (`config`, `configs`) name the filters; the run is over when the MQTT
    /// broker holds nothing unacknowledged, every replica subscribes the active filters and no
    /// transaction is open. The oracle compares per output key with a one-replica run without
    /// faults fed the messages the chaos run's broker queued for the bridge; MQTT QoS 1 redelivers
    /// what was not acknowledged, so the chaos run may hold a value more often, but only as often
    /// as the broker delivered the messages it comes from (see the [module](self) docs). Besides,
    /// at every acknowledgement the broker applies, the output the relay made of the message must
    /// be committed (no acknowledgement before the commit).
    pub fn mqtt<S: MqttExtractor>(stage: impl Fn() -> S + Send + Sync + 'static) -> Self {
        let stage = Arc::new(stage);
        let factory: BridgeFactory = Arc::new(move |run: BridgeRun| {
            let stage = stage.clone();
            Arc::new(move |env: ReplicaEnv| {
                let (stage, run) = (stage.clone(), run.clone());
                Box::pin(async move {
                    let mqtt = bridge::client(&run.broker, &run.cluster, &env.name, run.slow_ack_max, &run.own);
                    let recorded = Recorded { inner: stage(), replica: env.name.clone(), relays: run.relays.clone() };
                    let app = Flechtwerk::builder()
                        .application_id(&run.application_id)
                        .client_id(&env.name)
                        .kafka(Arc::new(env.kafka.clone()))
                        .poll_interval(run.poll_interval)
                        .replication_factor(env.kafka.replication_factor())
                        .observer(Arc::new(env.observer()))
                        .mqtt(MqttBrokerConfig::new(mqtt))
                        .build(recorded)
                        .map_err(|e| e.to_string())?;
                    app.run_until(env.stop_requested()).await.map_err(|error| error_kind(&error))
                }) as std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>>>>
            }) as Launch
        });
        Chaos::new(Shape::Mqtt(factory))
    }

    fn new(shape: Shape) -> Self {
        Chaos {
            shape,
            poll_interval: Duration::from_millis(500),
            settle: None,
            application_id: "chaos-app".into(),
            inputs_topics: Vec::new(),
            outputs_topics: Vec::new(),
            config_topics: Vec::new(),
            configs: Vec::new(),
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

    /// `count` inputs, the `i`-th made by `generate(rng, i)`; fed while the faults fire.
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

    /// Runs every seed; panics with the first failure (shrunk) and its replay line.
    pub fn run(self) {
        if let Err(failure) = self.try_run() {
            panic!("{failure}");
        }
    }

    /// Runs every seed; the first failure, shrunk.
    pub fn try_run(&self) -> Result<(), Failure> {
        let (seeds, verbose) = self.seeds_to_run();
        for seed in seeds {
            let schedule = self.schedule(seed);
            let violations = self.run_seed(seed, &schedule, verbose);
            if !violations.is_empty() {
                let shrunk = self.shrink(seed, &schedule);
                let timeline = self.write_timeline(seed, &shrunk);
                return Err(Failure { seed, violations, schedule, shrunk, timeline });
            }
        }
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
    pub fn run_seed(&self, seed: u64, schedule: &FaultSchedule, verbose: bool) -> Vec<String> {
        self.run_seed_traced(seed, schedule, verbose).0
    }

    /// Panics on a test that feeds its stage the wrong way (a bridge gets MQTT messages, the
    /// other stages Kafka inputs): such a test would run without the records its author meant.
    fn assert_feed(&self) {
        let kafka_inputs = self.generator.is_some() || !self.inputs_topics.is_empty();
        match self.shape {
            Shape::Mqtt(_) => assert!(
                !kafka_inputs,
                "an MQTT bridge is fed by `publishes(..)`, not by Kafka `input(..)`/`inputs(..)`"
            ),
            _ => assert!(self.publisher.is_none(), "`publishes(..)` feeds MQTT bridges (`Chaos::mqtt`) only"),
        }
    }

    /// Runs `schedule` on `seed` again and writes the chaos run's timeline: into
    /// `FLECHTWERK_CHAOS_TIMELINE_DIR`, or `flechtwerk-chaos` in the system's temporary
    /// directory, named after the test (its thread) and the seed.
    fn write_timeline(&self, seed: u64, schedule: &FaultSchedule) -> Option<std::path::PathBuf> {
        let (violations, events) = self.run_seed_traced(seed, schedule, false);
        let dir = std::env::var_os("FLECHTWERK_CHAOS_TIMELINE_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("flechtwerk-chaos"));
        let test = std::thread::current().name().unwrap_or("chaos").replace("::", "-");
        let path = dir.join(format!("{test}-seed-{seed}.svg"));
        let mut notes: Vec<String> = violations.iter().map(|v| format!("violated: {v}")).collect();
        notes.push(format!("faults ({}):", schedule.len()));
        notes.extend(schedule.to_string().lines().map(|l| format!("  {l}")));
        let svg = crate::timeline::render_svg(&events, &format!("{test}: seed {seed}"), &notes);
        std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, svg)).ok().map(|()| path)
    }

    fn run_seed_traced(
        &self,
        seed: u64,
        schedule: &FaultSchedule,
        verbose: bool,
    ) -> (Vec<String>, Vec<crate::trace::Event>) {
        self.assert_feed();
        let mqtt = matches!(self.shape, Shape::Mqtt(_));
        let feed =
            if mqtt { Feed::Mqtt(self.generate_messages(seed)) } else { Feed::Generated(self.generate_inputs(seed)) };
        let chaos = self.simulate(seed, schedule.clone(), self.replicas, feed, verbose);
        let mut violations = chaos.violations.clone();
        for property in &self.properties {
            if let Err(why) = property(&chaos.outcome) {
                violations.push(format!("property: {why}"));
            }
        }
        if chaos.quiesced {
            let feed = if mqtt {
                let queued = chaos.outcome.published.iter().filter(|p| p.queued);
                Feed::Mqtt(queued.map(|p| MqttInput::new(p.topic.clone(), p.payload.to_vec())).collect())
            } else {
                Feed::Recorded(chaos.outcome.inputs.clone())
            };
            let reference = self.simulate(seed, FaultSchedule::none(), 1, feed, false);
            if !reference.violations.is_empty() || !reference.quiesced {
                violations
                    .push(format!("the reference run (no faults, one replica) failed: {:?}", reference.violations));
            } else if mqtt {
                violations.extend(mqtt_diff(&reference, &chaos));
            } else {
                violations.extend(diff(&reference.outcome, &chaos.outcome));
            }
        }
        (violations, chaos.events)
    }

    /// Shrinking, within [`SHRINK_RUNS_MAX`] runs: no fault at all, then each fault alone (the
    /// simulation is chaotic: dropping one fault moves every later event, so a bug that one
    /// fault triggers is often found this way and not by removal), then greedy removal of one
    /// fault at a time while the seed still fails.
    fn shrink(&self, seed: u64, schedule: &FaultSchedule) -> FaultSchedule {
        let mut runs = 0;
        let fails = |candidate: &FaultSchedule, runs: &mut usize| {
            *runs += 1;
            !self.run_seed(seed, candidate, false).is_empty()
        };
        if schedule.len() > 1 {
            let none = FaultSchedule::none();
            if fails(&none, &mut runs) {
                return none;
            }
            for keep in 0..schedule.len() {
                if runs >= SHRINK_RUNS_MAX {
                    break;
                }
                let others: Vec<usize> = (0..schedule.len()).filter(|&i| i != keep).collect();
                let alone = schedule.without(&others);
                if fails(&alone, &mut runs) {
                    return alone;
                }
            }
        }
        let mut current = schedule.clone();
        let mut changed = true;
        while changed && runs < SHRINK_RUNS_MAX {
            changed = false;
            let mut i = current.len();
            while i > 0 && runs < SHRINK_RUNS_MAX {
                i -= 1;
                let candidate = current.without(&[i]);
                if fails(&candidate, &mut runs) {
                    current = candidate;
                    changed = true;
                }
            }
        }
        current
    }

    fn seeds_to_run(&self) -> (Vec<u64>, bool) {
        if let Some(seed) = std::env::var("FLECHTWERK_CHAOS_SEED").ok().and_then(|s| s.trim().parse().ok()) {
            return (vec![seed], true);
        }
        match std::env::var("FLECHTWERK_CHAOS_SEEDS").ok().as_deref().map(str::trim) {
            Some(range) if range.contains("..") => {
                let (a, b) = range.split_once("..").expect("checked");
                let (a, b) = (a.parse().unwrap_or(0), b.parse().unwrap_or(0));
                ((a..b).collect(), false)
            }
            Some(n) if n.parse::<u64>().is_ok() => ((0..n.parse().expect("checked")).collect(), false),
            _ => (self.seeds.clone().collect(), false),
        }
    }

    fn generate_inputs(&self, seed: u64) -> Vec<Input> {
        let Some((count, generate)) = &self.generator else { return Vec::new() };
        let mut rng = Gen::new(seed, 2);
        (0..*count).map(|i| generate(&mut rng, i)).collect()
    }

    fn generate_messages(&self, seed: u64) -> Vec<MqttInput> {
        let Some((count, generate)) = &self.publisher else { return Vec::new() };
        let mut rng = Gen::new(seed, 2);
        (0..*count).map(|i| generate(&mut rng, i)).collect()
    }

    fn simulate(&self, seed: u64, schedule: FaultSchedule, replicas: usize, feed: Feed, verbose: bool) -> RunResult {
        let spec = self.clone();
        let mut ctx = Ctx::default();
        ctx.brokers = self.brokers;
        ctx.transaction_version = self.transaction_versions.for_seed(seed);
        let run_ctx = ctx.clone();
        let result = Arc::new(Mutex::new(None));
        let out = result.clone();
        let joined = std::thread::Builder::new()
            .name(format!("chaos-seed-{seed}"))
            .spawn(move || {
                let mut runtime = Runtime::with_seed_and_config(seed, madsim::Config::default());
                runtime.set_time_limit(crate::runner::SIMULATED_TIME_MAX);
                runtime.block_on(async move {
                    let result = spec.run_once(run_ctx, schedule, replicas, feed).await;
                    *out.lock().expect("result lock") = Some(result);
                })
            })
            .expect("spawn a seed thread")
            .join();
        let mut result = result.lock().expect("result lock").take().unwrap_or_default();
        if let Err(panic) = joined {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "non-string panic".to_owned());
            result.violations.push(format!("panicked: {message}"));
        }
        if verbose {
            eprintln!("{}", ctx.trace.render());
        }
        result.events = ctx.trace.events();
        result
    }

    async fn run_once(&self, ctx: Ctx, schedule: FaultSchedule, replica_count: usize, feed: Feed) -> RunResult {
        let (factory, extractor) = match &self.shape {
            Shape::Mqtt(factory) => {
                let Feed::Mqtt(messages) = feed else { unreachable!("a bridge is fed MQTT messages") };
                return self.run_once_mqtt(ctx, schedule, replica_count, messages, factory).await;
            }
            Shape::Transformer(factory) => (factory.clone(), false),
            Shape::Extractor(factory) => (factory.clone(), true),
        };
        let chaos = !schedule.is_empty();
        ctx.event(format!("{replica_count} replicas, {} faults:\n{schedule}", schedule.len()));
        let cluster = Cluster::start(&ctx);
        let topics = self.inputs_topics.iter().chain(&self.outputs_topics).map(|(t, p)| topic(t.as_str(), *p, false));
        let topics = topics.chain(self.config_topics.iter().map(|(t, p)| topic(t.as_str(), *p, true))).collect();
        let configs = self.configs.iter().map(|record| producer_record(record, None)).collect();
        crate::harness::setup(&cluster, topics, configs).await;

        let launch = factory(self.application_id.clone(), self.max_poll_records, self.poll_interval);
        let disk = SimDisk::default();
        let mut replicas = Replicas::start(&cluster, &ctx, &disk, launch, replica_count, REPLICAS_MAX);
        // Inputs and faults begin once the application runs tasks: faults that end before the
        // stage processed anything test nothing.
        replicas.wait_for_tasks(FIRST_TASKS_MAX, Duration::from_millis(100)).await;
        if chaos && madsim::rand::thread_rng().next_u64() % 1000 < (self.profile.buggify * 1000.0) as u64 {
            madsim::buggify::enable();
            ctx.event("buggify on");
        }
        let feeder = Handle::current().create_node().name("feeder").ip(cluster.client_ip()).build();
        let feeding = feeder.spawn(feed_inputs(cluster.kafka(), ctx.clone(), feed, self.period));
        replicas.run_faults(&schedule, vec![feeding]).await;

        let mut violations = Vec::new();
        let inputs: Vec<&str> = self.inputs_topics.iter().map(|(t, _)| t.as_str()).collect();
        let outputs: Vec<&str> = self.outputs_topics.iter().map(|(t, _)| t.as_str()).collect();
        let quiesced =
            truth::await_quiescence(&ctx, &cluster, &self.application_id, &inputs, &outputs, QUIESCENCE_MAX).await;
        let quiesced = quiesced && (!extractor || self.settled(&ctx, &cluster, &outputs).await);
        if !quiesced {
            violations.push(format!(
                "liveness: not every input committed (or a transaction still open) {QUIESCENCE_MAX:?} after the \
                 faults stopped"
            ));
        }
        // Config stores converge to the topics' compaction.
        if !self.config_topics.is_empty() {
            let want = self.config_compaction(&cluster);
            replicas.await_configs(&want, CONFIG_CONVERGENCE_MAX).await;
            let topics: Vec<&str> = self.config_topics.iter().map(|(t, _)| t.as_str()).collect();
            violations.extend(replicas.config_mismatches(&want, &topics.join("+")));
        }
        let outcome = self.outcome(&cluster);
        for v in &violations {
            ctx.violation(v.clone());
        }
        RunResult { outcome, violations, quiesced, events: Vec::new(), relays: Relays::default() }
    }

    async fn run_once_mqtt(
        &self,
        ctx: Ctx,
        schedule: FaultSchedule,
        replica_count: usize,
        messages: Vec<MqttInput>,
        factory: &BridgeFactory,
    ) -> RunResult {
        let chaos = !schedule.is_empty();
        ctx.event(format!("{replica_count} replicas, {} faults:\n{schedule}", schedule.len()));
        let cluster = Cluster::start(&ctx);
        let topics = self.outputs_topics.iter().map(|(t, p)| topic(t.as_str(), *p, false));
        let topics = topics.chain(self.config_topics.iter().map(|(t, p)| topic(t.as_str(), *p, true))).collect();
        let configs = self.configs.iter().map(|record| producer_record(record, None)).collect();
        crate::harness::setup(&cluster, topics, configs).await;

        let broker = bridge::start_broker(&ctx, SimBrokerConfig::default());
        let names: Vec<String> = (0..replica_count).map(|i| format!("replica-{i}")).collect();
        let relays = Relays::default();
        let acks: Arc<Mutex<AckJournal>> = Arc::default();
        {
            let (cluster, relays, acks) = (cluster.clone(), relays.clone(), acks.clone());
            let ids: Vec<String> = names.iter().map(|n| format!("{}-{n}", self.application_id)).collect();
            let outputs: Vec<String> = self.outputs_topics.iter().map(|(t, _)| t.clone()).collect();
            broker.on_ack(Arc::new(move |ack| {
                let Some(content) = canonical_bytes(&ack.message.payload) else { return };
                let key = (ack.client_id.clone(), ack.message.topic.clone(), content);
                let Some(Some(out)) = relays.lock().expect("relays lock").get(&key).cloned() else { return };
                let mut journal = acks.lock().expect("acks lock");
                if journal.decided.contains(&out) {
                    return;
                }
                for topic in &outputs {
                    let decided = bridge::decided_outputs(&cluster, &ids, topic, |key, value| {
                        let key = String::from_utf8_lossy(key.unwrap_or_default()).into_owned();
                        Some((topic.clone(), key, value.map(Bytes::copy_from_slice)))
                    });
                    journal.decided.extend(decided);
                }
                if !journal.decided.contains(&out) {
                    journal.violations.push(format!(
                        "{} acknowledged {} (publish #{}) before the Kafka transaction carrying its output {}/{} committed",
                        ack.client_id, ack.message.topic, ack.message.number, out.0, out.1
                    ));
                }
            }));
        }
        let own = OwnSubscriptions::default();
        let run = BridgeRun {
            application_id: self.application_id.clone(),
            broker: broker.clone(),
            cluster: cluster.clone(),
            poll_interval: self.poll_interval,
            slow_ack_max: self.slow_ack_max,
            own: own.clone(),
            relays: relays.clone(),
        };
        let disk = SimDisk::default();
        let mut replicas = Replicas::start(&cluster, &ctx, &disk, factory(run), replica_count, replica_count);
        replicas.set_mqtt_broker(broker.clone());
        let config_topics: Vec<&str> = self.config_topics.iter().map(|(t, _)| t.as_str()).collect();
        // The devices begin once every replica subscribed the configs' filters: messages that
        // no subscription matches are lost before any bridge sees them.
        let want = bridge::wanted_subscriptions(&cluster, &self.application_id, &config_topics);
        let deadline = ctx.now() + FIRST_TASKS_MAX;
        let subscribed = |n: &String| broker.subscriptions(n).is_some_and(|s| want.is_subset(&s.into_iter().collect()));
        while ctx.now() < deadline && !names.iter().all(subscribed) {
            sleep(Duration::from_millis(100)).await;
        }
        if chaos && madsim::rand::thread_rng().next_u64() % 1000 < (self.profile.buggify * 1000.0) as u64 {
            madsim::buggify::enable();
            ctx.event("buggify on");
        }
        let journal: Arc<Mutex<Vec<(u64, MqttInput)>>> = Arc::default();
        let devices = Handle::current().create_node().name("devices").build();
        let publishing =
            devices.spawn(publish_mqtt(broker.clone(), ctx.clone(), messages, self.period, journal.clone()));
        replicas.run_faults(&schedule, vec![publishing]).await;

        // Quiescence: nothing held at the broker, every active filter subscribed (none that the
        // current processes retired), no transaction open.
        let mut violations = Vec::new();
        let outputs: Vec<&str> = self.outputs_topics.iter().map(|(t, _)| t.as_str()).collect();
        let deadline = ctx.now() + QUIESCENCE_MAX;
        let quiesced = loop {
            let want = bridge::wanted_subscriptions(&cluster, &self.application_id, &config_topics);
            let idle = names.iter().all(|n| bridge::settled(&broker, &own, n, &want))
                && outputs.iter().all(|t| truth::no_open_transactions(&cluster, t));
            if idle {
                break true;
            }
            if ctx.now() >= deadline {
                break false;
            }
            sleep(Duration::from_secs(1)).await;
        };
        if !quiesced {
            let want = bridge::wanted_subscriptions(&cluster, &self.application_id, &config_topics);
            let held: Vec<String> = names
                .iter()
                .filter(|n| broker.held(n) > 0)
                .map(|n| format!("{} messages held for {n}", broker.held(n)))
                .collect();
            let unsettled: Vec<&String> = names.iter().filter(|n| !bridge::settled(&broker, &own, n, &want)).collect();
            let open: Vec<&&str> = outputs.iter().filter(|t| !truth::no_open_transactions(&cluster, t)).collect();
            violations.push(format!(
                "liveness: not settled {QUIESCENCE_MAX:?} after the faults stopped: unacknowledged at the MQTT broker: \
                 {held:?}; replicas unsettled (held messages or subscriptions): {unsettled:?}; open transactions on \
                 {open:?}"
            ));
        }
        // Every last reconcile sees the final configs.
        sleep(Duration::from_secs(3)).await;
        let want = bridge::wanted_subscriptions(&cluster, &self.application_id, &config_topics);
        let (subscriptions, extra) = bridge::subscription_violations(&broker, &own, &names, &want);
        violations.extend(subscriptions);
        if extra > 0 {
            ctx.event(format!("{extra} left-over subscriptions of previous processes"));
        }
        let want = self.config_compaction(&cluster);
        replicas.await_configs(&want, CONFIG_CONVERGENCE_MAX).await;
        violations.extend(replicas.config_mismatches(&want, &config_topics.join("+")));
        violations.extend(acks.lock().expect("acks lock").violations.iter().take(DIFFS_SHOWN).cloned());

        let mut outcome = self.outcome(&cluster);
        outcome.published = journal
            .lock()
            .expect("journal lock")
            .iter()
            .map(|(number, m)| Published {
                number: *number,
                topic: m.topic.clone(),
                payload: Bytes::from(m.payload.clone()),
                queued: broker.outcome(*number).is_some_and(|o| !o.queued_for.is_empty() && o.dropped_by.is_empty()),
                deliveries: broker.deliveries(*number),
            })
            .collect();
        for v in &violations {
            ctx.violation(v.clone());
        }
        RunResult { outcome, violations, quiesced, events: Vec::new(), relays }
    }

    /// Extractors: waits until the output topics stay unchanged with no transaction open (on
    /// them or the changelog) for the settle time, at most [`QUIESCENCE_MAX`]; whether they did.
    async fn settled(&self, ctx: &Ctx, cluster: &Cluster, outputs: &[&str]) -> bool {
        let quiet = self.settle.unwrap_or_else(|| (self.poll_interval * 20).max(Duration::from_secs(10)));
        let changelog = format!("{}-changelog", self.application_id);
        let topics: Vec<&str> = outputs.iter().copied().chain([changelog.as_str()]).collect();
        // The outputs' ends (a page's cursor commits with its outputs, so the changelog is
        // settled with them; a stage may re-commit an unchanged cursor on every poll).
        let snapshot = || -> Option<Vec<BTreeMap<flechtwerk::kafka::TopicPartition, i64>>> {
            topics
                .iter()
                .all(|t| truth::no_open_transactions(cluster, t))
                .then(|| outputs.iter().map(|t| truth::log_ends(cluster, t)).collect())
        };
        let deadline = ctx.now() + QUIESCENCE_MAX;
        let mut last = (snapshot(), ctx.now());
        while ctx.now() < deadline {
            sleep(Duration::from_secs(1)).await;
            let now = snapshot();
            if now.is_none() || now != last.0 {
                last = (now, ctx.now());
            } else if ctx.now() - last.1 >= quiet {
                return true;
            }
        }
        false
    }

    fn config_compaction(&self, cluster: &Cluster) -> BTreeMap<String, Vec<u8>> {
        let records: Vec<RawRecord> =
            self.config_topics.iter().flat_map(|(topic, _)| truth::committed_records(cluster, topic)).collect();
        truth::config_compaction(&records)
    }

    fn outcome(&self, cluster: &Cluster) -> Outcome {
        let mut outcome = Outcome::default();
        for (topic, _) in &self.outputs_topics {
            for r in truth::committed_records(cluster, topic) {
                let key = String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned();
                outcome.outputs.entry((topic.clone(), key)).or_default().push(r.value.clone());
            }
        }
        for r in truth::committed_records(cluster, &format!("{}-changelog", self.application_id)) {
            let key = String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned();
            let value = r.value.clone().filter(|v| !flechtwerk::wire::is_tombstone(Some(v)));
            outcome.state.insert((r.partition, key), value);
        }
        for (topic, _) in &self.inputs_topics {
            outcome.inputs.extend(truth::committed_records(cluster, topic));
        }
        outcome
    }
}

/// What the feeder writes.
#[derive(Clone)]
enum Feed {
    /// Generated inputs, placed by key hash, spread over the fault period.
    Generated(Vec<Input>),
    /// A chaos run's committed inputs, each to its partition, in order.
    Recorded(Vec<RawRecord>),
    /// MQTT messages, published in order over the fault period.
    Mqtt(Vec<MqttInput>),
}

#[derive(Default)]
struct RunResult {
    outcome: Outcome,
    violations: Vec<String>,
    quiesced: bool,
    events: Vec<crate::trace::Event>,
    /// MQTT bridges: what the relays made of the messages.
    relays: Relays,
}

fn producer_record(input: &Input, partition: Option<i32>) -> ProducerRecord {
    ProducerRecord {
        partition,
        value: input.value.clone().map(Bytes::from),
        ..ProducerRecord::new(input.topic.clone(), input.key.clone(), Vec::new())
    }
}

async fn feed_inputs(kafka: KafkaClient, ctx: Ctx, feed: Feed, period: Duration) {
    let producer = kafka.producer(ProducerConfig::idempotent("feeder")).expect("producer");
    match feed {
        Feed::Generated(inputs) => {
            let gap = period / (inputs.len().max(1) as u32);
            let mut deliveries = Vec::new();
            for (i, input) in inputs.iter().enumerate() {
                match producer.send(producer_record(input, None)).await {
                    Ok(delivery) => deliveries.push(delivery),
                    Err(e) => ctx.event(format!("feeder: input {i} refused ({:?})", e.kind())),
                }
                sleep(gap).await;
            }
            for delivery in deliveries {
                let _ = delivery.await;
            }
        }
        Feed::Mqtt(_) => unreachable!("MQTT messages go to the MQTT broker"),
        Feed::Recorded(records) => {
            for r in records {
                let record = ProducerRecord {
                    partition: Some(r.partition),
                    key: r.key.clone(),
                    value: r.value.clone(),
                    ..ProducerRecord::new(r.topic.to_string(), Vec::new(), Vec::new())
                };
                let delivery = producer.send(record).await.expect("a calm send");
                delivery.await.expect("a calm delivery");
            }
        }
    }
    producer.close().await;
    ctx.event("feeder: done");
}

/// The differences between the reference outcome and the chaos run's, per key.
fn diff(reference: &Outcome, chaos: &Outcome) -> Vec<String> {
    let mut diffs = Vec::new();
    let show = |values: &[Option<Bytes>]| -> String {
        let shown: Vec<String> = values
            .iter()
            .take(8)
            .map(|v| v.as_deref().map_or("null".into(), |b| String::from_utf8_lossy(b).into_owned()))
            .collect();
        let more = if values.len() > 8 { format!(" … ({} in all)", values.len()) } else { String::new() };
        format!("[{}]{more}", shown.join(", "))
    };
    let keys: std::collections::BTreeSet<_> = reference.outputs.keys().chain(chaos.outputs.keys()).collect();
    let mut differing = 0;
    for key in keys {
        let want = reference.outputs.get(key).map(Vec::as_slice).unwrap_or_default();
        let got = chaos.outputs.get(key).map(Vec::as_slice).unwrap_or_default();
        if want != got {
            differing += 1;
            if differing > DIFFS_SHOWN {
                continue;
            }
            let at = want.iter().zip(got).position(|(a, b)| a != b).unwrap_or(want.len().min(got.len()));
            diffs.push(format!(
                "outputs of {}/{}: {} under chaos, {} in the reference; first difference at #{at}: chaos {} vs \
                 reference {}",
                key.0,
                key.1,
                got.len(),
                want.len(),
                show(&got[at.min(got.len())..]),
                show(&want[at.min(want.len())..]),
            ));
        }
    }
    if differing > DIFFS_SHOWN {
        diffs.push(format!("… and the outputs of {} more keys differ", differing - DIFFS_SHOWN));
    }
    let keys: std::collections::BTreeSet<_> = reference.state.keys().chain(chaos.state.keys()).collect();
    let mut differing = 0;
    for key in keys {
        let want = reference.state.get(key).cloned().flatten();
        let got = chaos.state.get(key).cloned().flatten();
        if want != got {
            differing += 1;
            if differing > DIFFS_SHOWN {
                continue;
            }
            diffs.push(format!(
                "final state of {} (changelog partition {}): chaos {:?}, reference {:?}",
                key.1,
                key.0,
                got.as_deref().map(String::from_utf8_lossy),
                want.as_deref().map(String::from_utf8_lossy),
            ));
        }
    }
    if differing > DIFFS_SHOWN {
        diffs.push(format!("… and the final states of {} more keys differ", differing - DIFFS_SHOWN));
    }
    diffs
}

// ---- MQTT bridge runs ----

/// One MQTT message a device publishes (QoS 1) in a test of an MQTT bridge
/// ([`Chaos::mqtt`], [`Chaos::publishes`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MqttInput {
    /// The MQTT topic.
    pub topic: String,
    /// The payload bytes (the bridge decodes them as a JSON object; anything else is poison).
    pub payload: Vec<u8>,
}

impl MqttInput {
    /// A message on `topic`.
    ///
    /// ```
    /// use flechtwerk_sim::chaos::MqttInput;
    /// let reading = MqttInput::new("site/7/temp", r#"{"celsius":21.5}"#);
    /// assert_eq!(reading.topic, "site/7/temp");
    /// ```
    pub fn new(topic: impl Into<String>, payload: impl Into<Vec<u8>>) -> Self {
        MqttInput { topic: topic.into(), payload: payload.into() }
    }
}

/// A message the devices of an MQTT bridge run published, as the MQTT broker saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct Published {
    /// The broker-wide publish number (1, 2, …).
    pub number: u64,
    /// The MQTT topic.
    pub topic: String,
    /// The payload.
    pub payload: Bytes,
    /// Whether the broker queued it for a bridge session. Not queued: no live subscription
    /// matched, e.g. a shared subscription that a broker restart restored dead (Mosquitto's
    /// behaviour) and the bridge had not subscribed again yet; such a message is lost before
    /// the bridge could see it, and the oracle leaves it out.
    pub queued: bool,
    /// How often the broker sent it to a bridge replica: the first send and every redelivery
    /// (after a crash, a dropped connection or a broker restart).
    pub deliveries: u32,
}

type MqttGenerator = Arc<dyn Fn(&mut Gen, usize) -> MqttInput + Send + Sync>;

/// An output record as the checks name it: topic, key (as text), value.
type OutputId = (String, String, Option<Bytes>);

/// What a relay made of a message: per (replica, MQTT topic, canonical payload), the output of
/// its last relay (`None`: dropped, filtered or poison).
type Relays = Arc<Mutex<BTreeMap<(String, String, Vec<u8>), Option<OutputId>>>>;

/// What a bridge replica's launch is given by the run.
#[derive(Clone)]
struct BridgeRun {
    application_id: String,
    broker: MqttBroker,
    cluster: Cluster,
    poll_interval: Duration,
    slow_ack_max: Duration,
    own: OwnSubscriptions,
    relays: Relays,
}

/// The replicas' launch of a bridge run.
type BridgeFactory = Arc<dyn Fn(BridgeRun) -> Launch + Send + Sync>;

/// The user's stage, its relays recorded (for the acknowledgement check and the oracle's
/// bound on duplicates); everything else goes to the stage unchanged.
struct Recorded<S> {
    inner: S,
    replica: String,
    relays: Relays,
}

impl<S: MqttExtractor> MqttExtractor for Recorded<S> {
    fn config_topics(&self) -> Vec<String> {
        self.inner.config_topics()
    }

    fn relay(&self, config: &Config, topic: &str, payload: Event) -> Result<Option<Message>, BoxError> {
        let content = canonical(payload.clone());
        let out = self.inner.relay(config, topic, payload);
        let id = match &out {
            Ok(Some(message)) => output_id(message),
            _ => None,
        };
        self.relays.lock().expect("relays lock").insert((self.replica.clone(), topic.to_owned(), content), id);
        out
    }

    fn drain_limit(&self) -> usize {
        self.inner.drain_limit()
    }

    fn config_enricher(&self) -> Option<&dyn EnrichConfig> {
        self.inner.config_enricher()
    }

    fn on_invalid_message(&self, error: &InvalidMessageError) -> InvalidMessageAction {
        self.inner.on_invalid_message(error)
    }

    fn setup(&self) -> impl std::future::Future<Output = Result<(), BoxError>> + Send {
        self.inner.setup()
    }

    fn teardown(&self) -> impl std::future::Future<Output = Result<(), BoxError>> + Send {
        self.inner.teardown()
    }
}

/// A payload as the bridge hands it to the relay, encoded again (the same bytes for the same
/// JSON object, whatever its spelling on the wire).
fn canonical(payload: Event) -> Vec<u8> {
    Message::new("", "", payload).encode_value().ok().flatten().map(|b| b.to_vec()).unwrap_or_default()
}

/// The canonical form of a published payload (`None`: not a JSON object, never relayed).
fn canonical_bytes(payload: &[u8]) -> Option<Vec<u8>> {
    flechtwerk::wire::decode_value(Some(payload)).ok().map(|map| canonical(Event::wrap(map)))
}

fn output_id(message: &Message) -> Option<OutputId> {
    let key = message.encode_key().ok()?;
    let value = message.encode_value().ok()?;
    Some((message.topic().to_owned(), String::from_utf8_lossy(&key).into_owned(), value))
}

/// Checks of an MQTT bridge run made while it runs.
#[derive(Default)]
struct AckJournal {
    /// Outputs seen decided committed.
    decided: BTreeSet<OutputId>,
    violations: Vec<String>,
}

/// Devices: publish `messages` in order, spread over `period`, each retried while the broker is
/// down; the publish numbers go to `journal`.
async fn publish_mqtt(
    broker: MqttBroker,
    ctx: Ctx,
    messages: Vec<MqttInput>,
    period: Duration,
    journal: Arc<Mutex<Vec<(u64, MqttInput)>>>,
) {
    let gap = period / (messages.len().max(1) as u32);
    for message in messages {
        let number = loop {
            if let Some(number) = broker.publish(&message.topic, message.payload.clone()) {
                break number;
            }
            sleep(Duration::from_millis(200)).await;
        };
        journal.lock().expect("journal lock").push((number, message));
        sleep(gap).await;
    }
    ctx.event("devices: done");
}

/// The oracle of an MQTT bridge run (the `mqtt` scenario's rule: no loss, duplicates only
/// from redeliveries, nothing else), per output topic and key and value: the chaos run holds
/// every value at least as often as the reference, no value the reference lacks, and a value
/// more often than the reference only up to the deliveries of the messages the reference
/// relayed into it.
fn mqtt_diff(reference: &RunResult, chaos: &RunResult) -> Vec<String> {
    type Counts = BTreeMap<(String, String), BTreeMap<Option<Bytes>, usize>>;
    let count = |outcome: &Outcome| -> Counts {
        let mut counts = Counts::new();
        for (key, values) in &outcome.outputs {
            let per_value = counts.entry(key.clone()).or_default();
            for value in values {
                *per_value.entry(value.clone()).or_default() += 1;
            }
        }
        counts
    };
    // What the reference's relay made of each message (one replica: one entry per content).
    let mapping: BTreeMap<(String, Vec<u8>), Option<OutputId>> = reference
        .relays
        .lock()
        .expect("relays lock")
        .iter()
        .map(|((_, topic, content), out)| ((topic.clone(), content.clone()), out.clone()))
        .collect();
    let mut delivered: BTreeMap<OutputId, u64> = BTreeMap::new();
    for p in chaos.outcome.published.iter().filter(|p| p.queued) {
        let Some(content) = canonical_bytes(&p.payload) else { continue };
        if let Some(Some(out)) = mapping.get(&(p.topic.clone(), content)) {
            *delivered.entry(out.clone()).or_default() += u64::from(p.deliveries);
        }
    }
    let (want, got) = (count(&reference.outcome), count(&chaos.outcome));
    let show = |v: &Option<Bytes>| v.as_deref().map_or("null".into(), |b| String::from_utf8_lossy(b).into_owned());
    let keys: BTreeSet<&(String, String)> = want.keys().chain(got.keys()).collect();
    let mut diffs = Vec::new();
    let mut differing = 0;
    for key in keys {
        let none = BTreeMap::new();
        let (w, g) = (want.get(key).unwrap_or(&none), got.get(key).unwrap_or(&none));
        let values: BTreeSet<&Option<Bytes>> = w.keys().chain(g.keys()).collect();
        let mut problems = Vec::new();
        for value in values {
            let (r, c) = (w.get(value).copied().unwrap_or(0), g.get(value).copied().unwrap_or(0));
            let d = delivered.get(&(key.0.clone(), key.1.clone(), value.clone())).copied().unwrap_or(0) as usize;
            if c < r {
                problems.push(format!("{} {c} times under chaos, {r} in the reference (lost)", show(value)));
            } else if r == 0 {
                problems.push(format!("{} {c} times under chaos, never in the reference", show(value)));
            } else if c > r && c > d {
                problems.push(format!(
                    "{} {c} times under chaos, {r} in the reference, but its messages were delivered only {d} times \
                     (a duplicate without a redelivery)",
                    show(value)
                ));
            }
        }
        if !problems.is_empty() {
            differing += 1;
            if differing > DIFFS_SHOWN {
                continue;
            }
            let more =
                if problems.len() > 3 { format!("; … ({} values in all)", problems.len()) } else { String::new() };
            problems.truncate(3);
            diffs.push(format!("outputs of {}/{}: {}{more}", key.0, key.1, problems.join("; ")));
        }
    }
    if differing > DIFFS_SHOWN {
        diffs.push(format!("… and the outputs of {} more keys differ", differing - DIFFS_SHOWN));
    }
    diffs
}

#[cfg(test)]
mod tests {
    use super::*;

    const READING: &str = r#"{"seq":1}"#;
    const OUT: &str = r#"{"seq":1,"unit":"C"}"#;

    /// A run whose outputs of key `readings/k` are `outputs`; its relay made OUT of READING;
    /// READING was published once, delivered `deliveries` times.
    fn run(outputs: &[&str], deliveries: u32) -> RunResult {
        let value = |v: &str| Some(Bytes::from(v.to_owned()));
        let mut outcome = Outcome::default();
        outcome.outputs.insert(("readings".into(), "k".into()), outputs.iter().map(|v| value(v)).collect());
        outcome.published =
            vec![Published { number: 1, topic: "t".into(), payload: Bytes::from(READING), queued: true, deliveries }];
        let relays = Relays::default();
        let content = canonical_bytes(READING.as_bytes()).expect("a JSON object");
        let out = ("readings".to_owned(), "k".to_owned(), value(OUT));
        relays.lock().expect("relays lock").insert(("replica-0".into(), "t".into(), content), Some(out));
        RunResult { outcome, violations: Vec::new(), quiesced: true, events: Vec::new(), relays }
    }

    #[test]
    fn the_mqtt_oracle_allows_copies_up_to_the_deliveries_and_nothing_else() {
        let reference = run(&[OUT], 1);
        // Delivered three times (two redeliveries): up to three copies are fine.
        assert!(mqtt_diff(&reference, &run(&[OUT], 3)).is_empty());
        assert!(mqtt_diff(&reference, &run(&[OUT, OUT, OUT], 3)).is_empty());
        // A copy more than the broker's deliveries: one delivery relayed into two commits.
        let diffs = mqtt_diff(&reference, &run(&[OUT, OUT, OUT], 2));
        assert!(diffs.len() == 1 && diffs[0].contains("delivered only 2 times"), "{diffs:?}");
        // Lost.
        let diffs = mqtt_diff(&reference, &run(&[], 2));
        assert!(diffs.len() == 1 && diffs[0].contains("(lost)"), "{diffs:?}");
        // A value the reference never made (e.g. a counter kept in the stage's memory).
        let diffs = mqtt_diff(&reference, &run(&[OUT, r#"{"seq":1,"unit":"F"}"#], 2));
        assert!(diffs.len() == 1 && diffs[0].contains("never in the reference"), "{diffs:?}");
    }

    #[test]
    fn canonical_payloads_ignore_the_spelling_on_the_wire() {
        assert_eq!(canonical_bytes(br#"{ "seq" : 1 }"#), canonical_bytes(br#"{"seq":1}"#));
        assert_ne!(canonical_bytes(br#"{"seq":1}"#), canonical_bytes(br#"{"seq":2}"#));
        assert_eq!(canonical_bytes(b"not json"), None);
    }
}
