//! Transformers (and extractors, which run the same way): a stage fed Kafka inputs, the
//! harness's feeder writing them while the faults fire.

use std::sync::Arc;
use std::time::Duration;

use flechtwerk::kafka::{Kafka, ProducerConfig, ProducerRecord};
use flechtwerk::IntoRunner;
use madsim::rand::RngCore;
use madsim::runtime::Handle;
use madsim::time::sleep;

use super::mqtt::Relays;
use super::run::{producer_record, Feed, RunResult};
use super::{Chaos, Factory, ReadTopics, Shape, FIRST_TASKS_MAX};
use crate::cluster::{Cluster, KafkaClient};
use crate::harness::disk::SimDisk;
use crate::harness::faults::FaultSchedule;
use crate::harness::replicas::{transformer_launch, Replicas};
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
        let origin = ctx.now();
        replicas.run_faults(&schedule, vec![feeding]).await;
        let hits = replicas.hits().to_vec();

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
        RunResult { outcome, violations, quiesced, events: Vec::new(), relays: Relays::default(), origin, hits }
    }
}

/// The feeder: writes `feed` (generated inputs spread over `period`, or a chaos run's committed
/// inputs in order), then closes its producer.
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
