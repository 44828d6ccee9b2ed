//! Transformers (and extractors, which run the same way): a stage fed Kafka inputs, the
//! harness's feeder writing them while the faults fire.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use flechtwerk::kafka::{Kafka, Producer, ProducerConfig, ProducerRecord, TopicPartition};
use flechtwerk::wire::RawRecord;
use flechtwerk::IntoRunner;
use madsim::rand::RngCore;
use madsim::runtime::Handle;
use madsim::time::sleep;

use super::mqtt::Relays;
use super::run::{producer_record, Feed, Positions, RunResult};
use super::{Chaos, Factory, Input, ReadTopics, Shape, FIRST_TASKS_MAX};
use crate::cluster::{Cluster, KafkaClient};
use crate::harness::disk::SimDisk;
use crate::harness::faults::FaultSchedule;
use crate::harness::replicas::{transformer_launch, LiveViews, Replicas};
use crate::harness::{topic, truth, CONFIG_CONVERGENCE_MAX, QUIESCENCE_MAX, REPLICAS_MAX};
use crate::runner::Ctx;

impl Chaos {
    /// A chaos test of the transformer that `stage` builds (called once per replica start).
    pub fn transformer<S, M>(stage: impl Fn() -> S + Send + Sync + 'static) -> Self
    where
        S: IntoRunner<M> + 'static,
        M: 'static,
    {
        let stage = Arc::new(stage);
        let read = stage.clone();
        let factory: Factory = Arc::new(move |app: String, max_poll_records: usize, _: Duration| {
            let stage = stage.clone();
            transformer_launch(app, max_poll_records, move || stage())
        });
        let read_topics: ReadTopics = Arc::new(move || read.as_ref()().read_topics());
        Chaos::new(Shape::Transformer(factory), read_topics)
    }

    /// The run of a stage fed Kafka inputs (a transformer, or with `extractor` an extractor,
    /// whose run is over once its outputs settled): set-up, the inputs fed while the faults
    /// fire, quiescence, and the config stores' convergence.
    pub(super) async fn run_once_kafka(
        &self,
        ctx: Ctx,
        schedule: FaultSchedule,
        replica_count: usize,
        feed: Feed,
        factory: Factory,
        extractor: bool,
    ) -> RunResult {
        let chaos = !schedule.is_empty();
        ctx.event(format!("{replica_count} replicas, {} faults:\n{schedule}", schedule.len()));
        let cluster = Cluster::start(&ctx);
        let topics = self.inputs_topics.iter().chain(&self.outputs_topics).map(|(t, p)| topic(t.as_str(), *p, false));
        let mut topics: Vec<_> =
            topics.chain(self.config_topics.iter().map(|(t, p)| topic(t.as_str(), *p, true))).collect();
        let mut configs: Vec<ProducerRecord> =
            self.configs.iter().map(|record| producer_record(record, None)).collect();
        if let Some((full, cleaned)) = &self.restored {
            // The chaos run finds what the log cleaner left; its reference, the whole history.
            let history = if matches!(feed, Feed::Recorded(..)) { full } else { cleaned };
            let changelog = format!("{}-changelog", self.application_id);
            let partitions = self.inputs_topics.first().map_or(1, |(_, p)| *p);
            topics.push(topic(changelog.as_str(), partitions, true));
            configs.extend(history.iter().map(|write| ProducerRecord {
                value: write.value.clone().map(bytes::Bytes::from),
                ..ProducerRecord::new(changelog.clone(), write.key.clone(), Vec::new())
            }));
        }
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
            if !self.config_changes.is_empty() {
                // The fault points belong to the fault period. A feeder waiting at a config
                // change's barrier outlasts it, and the run would go on stalling at them long
                // after the schedule's faults ended (without changes, the feeder ends with the
                // period and the faults' end turns them off).
                let (ctx, window) = (ctx.clone(), self.period.max(schedule.end()));
                let node = Handle::current().create_node().name("buggify-window").build();
                node.spawn(async move {
                    sleep(window).await;
                    if madsim::buggify::is_enabled() {
                        madsim::buggify::disable();
                        ctx.event("buggify off (the fault period is over)");
                    }
                });
            }
        }
        let feeder = Handle::current().create_node().name("feeder").ip(cluster.client_ip()).build();
        let barrier = Barrier {
            cluster: cluster.clone(),
            views: replicas.live_views(),
            group: self.application_id.clone(),
            inputs: self.inputs_topics.iter().map(|(t, _)| t.clone()).collect(),
            outputs: self.outputs_topics.iter().map(|(t, _)| t.clone()).collect(),
            configs: self.config_topics.iter().map(|(t, _)| t.clone()).collect(),
            log: Arc::default(),
        };
        let log = barrier.log.clone();
        let feeding = feeder.spawn(feed_inputs(cluster.kafka(), ctx.clone(), feed, self.period, barrier));
        let origin = ctx.now();
        replicas.run_faults(&schedule, vec![feeding]).await;
        let hits = replicas.hits().to_vec();

        let FeedLog { barriers, violations: mut feed_violations } = std::mem::take(&mut *log.lock().expect("feed log"));
        let mut violations = Vec::new();
        violations.append(&mut feed_violations);
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
        RunResult {
            outcome,
            violations,
            quiesced,
            events: Vec::new(),
            relays: Relays::default(),
            origin,
            hits,
            barriers,
        }
    }
}

/// What a config change waits on, and where the feeder notes what happened at each.
struct Barrier {
    cluster: Cluster,
    views: LiveViews,
    group: String,
    inputs: Vec<String>,
    outputs: Vec<String>,
    configs: Vec<String>,
    log: Arc<Mutex<FeedLog>>,
}

/// What the feeder saw at the config changes.
#[derive(Default)]
struct FeedLog {
    /// Where the inputs were when each change was written.
    barriers: Vec<Positions>,
    /// Changes that did not complete in time (liveness).
    violations: Vec<String>,
}

impl Barrier {
    /// One config change: waits until every input written so far is committed (and no
    /// transaction open), notes where the inputs are, writes `record` until it is acknowledged,
    /// then waits until every live replica's config store equals the config topics' compaction.
    async fn change(&self, producer: &dyn Producer, ctx: &Ctx, number: usize, record: &Input) {
        let what = format!("config change #{number} ({}/{})", record.topic, record.key);
        let inputs: Vec<&str> = self.inputs.iter().map(String::as_str).collect();
        let outputs: Vec<&str> = self.outputs.iter().map(String::as_str).collect();
        if !truth::await_quiescence(ctx, &self.cluster, &self.group, &inputs, &outputs, QUIESCENCE_MAX).await {
            self.log.lock().expect("feed log").violations.push(format!(
                "liveness: the inputs before {what} were not all committed {QUIESCENCE_MAX:?} after it was due"
            ));
        }
        let positions: Positions = self.inputs.iter().flat_map(|t| truth::log_ends(&self.cluster, t)).collect();
        self.log.lock().expect("feed log").barriers.push(positions);
        // The write must land: the oracle places the change here in both runs.
        loop {
            if let Ok(delivery) = producer.send(producer_record(record, None)).await {
                if delivery.await.is_ok() {
                    break;
                }
            }
            sleep(Duration::from_millis(200)).await;
        }
        let records: Vec<_> = self.configs.iter().flat_map(|t| truth::committed_records(&self.cluster, t)).collect();
        let want = truth::ConfigCompaction::of(&records);
        let deadline = ctx.now() + QUIESCENCE_MAX;
        loop {
            let behind = self.views.configs_behind(&want);
            if behind.is_empty() {
                ctx.event(format!("feeder: {what} applied by every live replica"));
                return;
            }
            if ctx.now() >= deadline {
                self.log.lock().expect("feed log").violations.push(format!(
                    "liveness: {what} not applied by {behind:?} {QUIESCENCE_MAX:?} after it was written"
                ));
                return;
            }
            sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The feeder: writes `feed` (generated inputs spread over `period`, or a chaos run's committed
/// inputs in order), the config changes at their barriers, then closes its producer.
async fn feed_inputs(kafka: KafkaClient, ctx: Ctx, feed: Feed, period: Duration, barrier: Barrier) {
    let producer = kafka.producer(ProducerConfig::idempotent("feeder")).expect("producer");
    match feed {
        Feed::Generated(inputs, changes) => {
            let gap = period / (inputs.len().max(1) as u32);
            let mut changes = changes.iter().peekable();
            let (mut deliveries, mut number) = (Vec::new(), 0);
            for i in 0..=inputs.len() {
                while let Some((_, record)) = changes.next_if(|(after, _)| *after <= i || i == inputs.len()) {
                    for delivery in deliveries.drain(..) {
                        let _ = delivery.await;
                    }
                    barrier.change(producer.as_ref(), &ctx, number, record).await;
                    number += 1;
                }
                let Some(input) = inputs.get(i) else { break };
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
        Feed::Recorded(records, changes) => {
            let mut sent = vec![false; records.len()];
            for (number, (positions, record)) in changes.iter().enumerate() {
                let below = |r: &RawRecord| {
                    positions
                        .get(&TopicPartition::new(r.topic.as_ref(), r.partition))
                        .is_some_and(|end| r.offset < *end)
                };
                send_recorded(producer.as_ref(), &records, &mut sent, below).await;
                barrier.change(producer.as_ref(), &ctx, number, record).await;
            }
            send_recorded(producer.as_ref(), &records, &mut sent, |_| true).await;
        }
    }
    producer.close().await;
    ctx.event("feeder: done");
}

/// Writes the recorded inputs not sent yet that `select` picks, each to its partition, in order.
async fn send_recorded(
    producer: &dyn Producer,
    records: &[RawRecord],
    sent: &mut [bool],
    select: impl Fn(&RawRecord) -> bool,
) {
    for (r, sent) in records.iter().zip(sent.iter_mut()) {
        if *sent || !select(r) {
            continue;
        }
        *sent = true;
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
