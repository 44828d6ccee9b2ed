//! One seed of a chaos test: the chaos run and, once it quiesced, its reference run (one
//! replica, no faults, fed what the chaos run committed), each on its own madsim runtime in a
//! thread of its own; and what the checks read of a run's cluster.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use flechtwerk::kafka::{ProducerRecord, TopicPartition};
use flechtwerk::wire::RawRecord;
use madsim::runtime::Runtime;

use super::mqtt::{mqtt_diff, MqttInput, Relays};
use super::report::diff;
use super::{compaction, Chaos, Gen, Input, Outcome, Shape};
use crate::cluster::Cluster;
use crate::harness::faults::FaultSchedule;
use crate::harness::truth;
use crate::runner::Ctx;

impl Chaos {
    /// Panics on a test that feeds its stage the wrong way (a bridge gets MQTT messages, the
    /// other stages Kafka inputs): such a test would run without the records its author meant.
    /// Set-up mistakes, named before anything runs: a topic the stage reads that the test does
    /// not create, or an input topic the test feeds that the stage does not read (its inputs
    /// would never be consumed, and the run would end in a liveness failure far from the cause).
    #[track_caller]
    fn assert_topics(&self) {
        let (inputs, configs) = (self.read_topics)();
        let declared = |topics: &[(String, u32)]| topics.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>();
        let (test_inputs, test_configs) = (declared(&self.inputs_topics), declared(&self.config_topics));
        for topic in &inputs {
            assert!(
                test_inputs.contains(topic),
                "set-up: the stage reads input topic {topic:?}, which this test does not create: declare it with \
                 .input({topic:?}, partitions) (the test's inputs: {test_inputs:?})"
            );
        }
        for topic in &configs {
            assert!(
                test_configs.contains(topic),
                "set-up: the stage reads config topic {topic:?}, which this test does not create: declare it with \
                 .config({topic:?}, partitions) (the test's config topics: {test_configs:?})"
            );
        }
        if matches!(self.shape, Shape::Transformer(_)) {
            for topic in &test_inputs {
                assert!(
                    inputs.contains(topic),
                    "set-up: this test feeds input topic {topic:?}, which the stage does not read (its inputs: \
                     {inputs:?}): its records would never be consumed"
                );
            }
        }
    }

    #[track_caller]
    fn assert_feed(&self) {
        let kafka_inputs = self.generator.is_some() || !self.inputs_topics.is_empty();
        match self.shape {
            Shape::Mqtt(_) => assert!(
                !kafka_inputs,
                "an MQTT bridge is fed by `publishes(..)`, not by Kafka `input(..)`/`inputs(..)`"
            ),
            _ => assert!(self.publisher.is_none(), "`publishes(..)` feeds MQTT bridges (`Chaos::mqtt`) only"),
        }
        let config_topics: Vec<&String> = self.config_topics.iter().map(|(t, _)| t).collect();
        for record in self.configs.iter().chain(self.config_changes.iter().map(|(_, r)| r)) {
            assert!(
                config_topics.contains(&&record.topic),
                "set-up: config record {}/{} goes to a topic this test does not declare as a config topic: declare \
                 it with .config({:?}, partitions) (the test's config topics: {config_topics:?})",
                record.topic,
                record.key,
                record.topic
            );
        }
        if self.restored.is_some() {
            assert!(
                matches!(self.shape, Shape::Transformer(_)),
                "set-up: `restored_from` gives a transformer's tasks a changelog to restore; this stage has none"
            );
            let counts: std::collections::BTreeSet<u32> = self.inputs_topics.iter().map(|(_, p)| *p).collect();
            assert!(
                counts.len() == 1,
                "set-up: `restored_from` needs the input topics declared, with one partition count (the changelog's): \
                 {:?}",
                self.inputs_topics
            );
        }
        let colliding = compaction::colliding_keys(
            &self.configs.iter().chain(self.config_changes.iter().map(|(_, r)| r)).cloned().collect::<Vec<_>>(),
        );
        for (_, change) in &self.config_changes {
            assert!(
                !colliding.contains(&change.key),
                "set-up: config change {}/{} names a key written on another config topic too: which topic's write a \
                 store holds then depends on how its reads interleave (CFG-01), so the change cannot be a barrier; \
                 change such a key on one topic only",
                change.topic,
                change.key
            );
        }
        if !self.config_changes.is_empty() {
            assert!(
                matches!(self.shape, Shape::Transformer(_)),
                "set-up: config changes during a run (`config_change`) are checked for transformers only: an \
                 extractor's or a bridge's outputs after a change depend on when its polls or messages met it, \
                 which no reference run can replay"
            );
        }
    }

    /// Refuses generated inputs the oracle cannot check: a record to a config topic (it would be
    /// written at a point of the inputs that the reference run does not replay, and every seed
    /// would fail with no fault), or to a topic that is not an input of the test.
    #[track_caller]
    fn assert_inputs(&self, inputs: &[Input]) {
        let declared: Vec<&String> = self.inputs_topics.iter().map(|(t, _)| t).collect();
        for (i, input) in inputs.iter().enumerate() {
            let to_config = self.config_topics.iter().any(|(t, _)| t == &input.topic);
            assert!(
                !to_config,
                "set-up: input #{i} ({}/{}) writes config topic {:?}: a config record fed with the inputs is not \
                 replayed by the reference run at the same point; write it before the run with .configs(..) or \
                 during it with .config_change(after, record)",
                input.topic, input.key, input.topic
            );
            assert!(
                declared.contains(&&input.topic),
                "set-up: input #{i} ({}/{}) goes to topic {:?}, which is not an input of this test (its inputs: \
                 {declared:?}): declare it with .input(..)",
                input.topic,
                input.key,
                input.topic
            );
        }
    }

    /// Runs one seed with `schedule`: the chaos run, the test's properties over its outcome,
    /// and once it quiesced the reference run and the oracle's differences.
    #[track_caller]
    pub(super) fn run_seed_traced(&self, seed: u64, schedule: &FaultSchedule, verbose: bool) -> SeedRun {
        self.assert_feed();
        self.assert_topics();
        let mqtt = matches!(self.shape, Shape::Mqtt(_));
        let feed = if mqtt {
            Feed::Mqtt(self.generate_messages(seed))
        } else {
            let inputs = self.generate_inputs(seed);
            self.assert_inputs(&inputs);
            Feed::Generated(inputs, self.config_changes.clone())
        };
        let chaos = self.simulate(seed, schedule.clone(), self.replicas, feed, verbose);
        let mut violations = chaos.violations.clone();
        let mut reference_trace = None;
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
                let changes = self.config_changes.iter().map(|(_, record)| record.clone());
                Feed::Recorded(chaos.outcome.inputs.clone(), chaos.barriers.iter().cloned().zip(changes).collect())
            };
            let reference = self.simulate(seed, FaultSchedule::none(), 1, feed, false);
            reference_trace = Some((reference.events.clone(), reference.origin));
            if !reference.violations.is_empty() || !reference.quiesced {
                violations
                    .push(format!("the reference run (no faults, one replica) failed: {:?}", reference.violations));
            } else if mqtt {
                violations.extend(mqtt_diff(&reference, &chaos));
            } else if let Some(normalize) = &self.normalize {
                let normalized = |outcome: &Outcome| {
                    let mut outcome = outcome.clone();
                    for ((topic, _), values) in &mut outcome.outputs {
                        for value in values.iter_mut() {
                            *value = normalize(topic, value.take());
                        }
                    }
                    outcome
                };
                violations.extend(diff(&normalized(&reference.outcome), &normalized(&chaos.outcome)));
            } else {
                violations.extend(diff(&reference.outcome, &chaos.outcome));
            }
        }
        if !violations.is_empty() {
            let unknown =
                chaos.events.iter().filter(|e| e.what.contains("application crashed: kafka send UnknownTopic"));
            if let Some(first) = unknown.clone().next() {
                let outputs: Vec<&String> = self.outputs_topics.iter().map(|(t, _)| t).collect();
                violations.insert(
                    0,
                    format!(
                        "set-up: replicas crashed {} times sending to a topic that does not exist (first at {:?}: \
                         {}); declare every topic the stage writes with .output(name, partitions) (the test's \
                         outputs: {outputs:?})",
                        unknown.count(),
                        first.at,
                        first.what
                    ),
                );
            }
        }
        SeedRun { violations, events: chaos.events, origin: chaos.origin, hits: chaos.hits, reference: reference_trace }
    }

    /// The seed's Kafka inputs, from the test's generator.
    fn generate_inputs(&self, seed: u64) -> Vec<Input> {
        let Some((count, generate)) = &self.generator else { return Vec::new() };
        let mut rng = Gen::new(seed, 2);
        (0..*count).map(|i| generate(&mut rng, i)).collect()
    }

    /// The seed's MQTT messages, from the test's generator.
    fn generate_messages(&self, seed: u64) -> Vec<MqttInput> {
        let Some((count, generate)) = &self.publisher else { return Vec::new() };
        let mut rng = Gen::new(seed, 2);
        (0..*count).map(|i| generate(&mut rng, i)).collect()
    }

    /// One run on a madsim runtime of its own, seeded with `seed`, in a thread of its own (a
    /// panic in the run is a violation); its trace printed when `verbose`.
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
                // The engine's stalls at its fault points, into the run's trace.
                let stalls = tracing::Dispatch::new(super::stalls::Stalls::new(run_ctx.clone()));
                tracing::dispatcher::with_default(&stalls, || {
                    runtime.block_on(async move {
                        let result = spec.run_once(run_ctx, schedule, replicas, feed).await;
                        *out.lock().expect("result lock") = Some(result);
                    })
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

    /// One run of the stage on a fresh cluster: `replica_count` replicas under `schedule`, fed
    /// `feed`, then quiescence and the checks of its shape.
    async fn run_once(&self, ctx: Ctx, schedule: FaultSchedule, replica_count: usize, feed: Feed) -> RunResult {
        match &self.shape {
            Shape::Mqtt(factory) => {
                let Feed::Mqtt(messages) = feed else { unreachable!("a bridge is fed MQTT messages") };
                self.run_once_mqtt(ctx, schedule, replica_count, messages, factory).await
            }
            Shape::Transformer(factory) => {
                self.run_once_kafka(ctx, schedule, replica_count, feed, factory.clone(), false).await
            }
            Shape::Extractor(factory) => {
                self.run_once_kafka(ctx, schedule, replica_count, feed, factory.clone(), true).await
            }
        }
    }

    /// The compaction of the config topics, as the cluster committed them.
    pub(super) fn config_compaction(&self, cluster: &Cluster) -> truth::ConfigCompaction {
        let records: Vec<RawRecord> =
            self.config_topics.iter().flat_map(|(topic, _)| truth::committed_records(cluster, topic)).collect();
        truth::ConfigCompaction::of(&records)
    }

    /// What the run's cluster committed: the outputs per key, the final state per changelog
    /// key, the inputs.
    pub(super) fn outcome(&self, cluster: &Cluster) -> Outcome {
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

/// Where the inputs were when a config change was written: the end of every input partition.
pub(super) type Positions = BTreeMap<TopicPartition, i64>;

/// What the feeder writes.
#[derive(Clone)]
pub(super) enum Feed {
    /// Generated inputs, placed by key hash, spread over the fault period, and the config
    /// changes, each after its count of inputs.
    Generated(Vec<Input>, Vec<(usize, Input)>),
    /// A chaos run's committed inputs, each to its partition, in order, and its config changes,
    /// each where the chaos run wrote it (the inputs below those positions first).
    Recorded(Vec<RawRecord>, Vec<(Positions, Input)>),
    /// MQTT messages, published in order over the fault period.
    Mqtt(Vec<MqttInput>),
}

/// What one run left: what its broker committed, its violations, whether it quiesced, its
/// trace.
#[derive(Default)]
pub(super) struct RunResult {
    pub(super) outcome: Outcome,
    pub(super) violations: Vec<String>,
    pub(super) quiesced: bool,
    pub(super) events: Vec<crate::trace::Event>,
    /// MQTT bridges: what the relays made of the messages.
    pub(super) relays: Relays,
    /// When the fault period started (the first replica ran tasks), from the run's start: the
    /// origin of the schedule's times.
    pub(super) origin: std::time::Duration,
    /// What each fault of the schedule hit ([`crate::harness::replicas::Replicas::hits`]).
    pub(super) hits: Vec<Option<String>>,
    /// Where the inputs were when each config change was written, in order.
    pub(super) barriers: Vec<Positions>,
}

/// One seed's chaos run and its reference, as a report needs them.
pub(super) struct SeedRun {
    /// The violations: the chaos run's own, the test's properties', the oracle's differences.
    pub(super) violations: Vec<String>,
    /// The chaos run's trace.
    pub(super) events: Vec<crate::trace::Event>,
    /// When its fault period started.
    pub(super) origin: std::time::Duration,
    /// What each of its faults hit.
    pub(super) hits: Vec<Option<String>>,
    /// The reference run's trace and the start of its fault period, if it ran.
    pub(super) reference: Option<(Vec<crate::trace::Event>, std::time::Duration)>,
}

/// A record to write: an input or config record, to `partition` or placed by its key.
pub(super) fn producer_record(input: &Input, partition: Option<i32>) -> ProducerRecord {
    ProducerRecord {
        partition,
        value: input.value.clone().map(Bytes::from),
        ..ProducerRecord::new(input.topic.clone(), input.key.clone(), Vec::new())
    }
}
