//! Scenario `kafka-chaos`: the simulated cluster itself under every fault it offers, checked
//! with the smallest exactly-once client there is — a transactional copier, no engine.
//!
//! A feeder appends records to `input` (idempotent producer). Three copiers in one group read
//! `input` and, per poll, copy the records to `output` and commit their offsets in one
//! transaction (KIP-447 style: one transactional id per copier, the group generation fences
//! zombies). The copiers are the harness's replicas (`Replicas`, a `Launch` that runs the
//! copier; a crashed copier starts again under its supervisor), and the faults a schedule drawn
//! from the seed by a `FaultProfile`: the broker restarts and goes down for a
//! while, copiers crash, pause past their session (sometimes past the transaction timeout) and
//! get cut off the network. All through the fault period, as the cluster's baseline, requests
//! and responses are lost, delayed and answered with retriable errors, and markers land late.
//!
//! Property (exactly-once, as the scenario's entry in docs/simulation.md states it): after
//! quiescence, every `input` record (partition, offset) appears exactly once in the
//! `read_committed` `output`, and the group's committed offsets reach the end of `input`. A
//! violation points at the cluster or the client adapter: the copier is too small to hide a bug.

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use flechtwerk::kafka::{
    Consumer, ConsumerConfig, Kafka, KafkaError, KafkaErrorKind, KafkaResult, Producer, ProducerConfig, ProducerRecord,
    Rebalance, TopicPartition,
};
use flechtwerk::wire::RawRecord;
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;
use madsim::time::sleep;

use crate::cluster::{Cluster, KafkaClient, MarkerFaults, RequestFaults};
use crate::harness::disk::SimDisk;
use crate::harness::faults::FaultProfile;
use crate::harness::replicas::{Launch, ReplicaEnv, Replicas};
use crate::harness::{setup, topic, truth};
use crate::runner::{Ctx, Scenario};

/// The scenario.
pub static SCENARIO: Scenario = Scenario {
    name: "kafka-chaos",
    about: "transactional copier on the simulated cluster under broker restarts, crashes, partitions, lost RPCs",
    faults: &[
        "broker-restart",
        "broker-down",
        "crash-restart",
        "pause",
        "network-partition",
        "kafka-drop-request",
        "kafka-hold-request",
        "kafka-delay-request",
        "kafka-error",
        "kafka-drop-response",
        "kafka-delay-response",
        "kafka-marker-delay",
        "broker-crash",
        "broker-pause",
        "broker-isolate",
        "leader-move",
        "lagging-failover",
    ],
    run: |ctx| Box::pin(run(ctx)) as Pin<Box<dyn std::future::Future<Output = ()>>>,
};

const INPUT: &str = "input";
const OUTPUT: &str = "output";
const GROUP: &str = "copiers";
const PARTITIONS: u32 = 4;
const COPIERS: usize = 3;
/// Records the feeder writes.
const FEED_RECORDS_MAX: usize = 300;
/// How long faults are drawn for (the last one may outlast it).
const CHAOS_DURATION: Duration = Duration::from_secs(60);
/// How long the copiers get to finish once the faults stop.
const QUIESCENCE_MAX: Duration = Duration::from_secs(240);
/// Transaction timeout of the copiers (a crashed copier's transaction blocks this long).
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(20);
/// Session timeout of the copiers (the consumer default): pauses are drawn past it.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The faults the schedule is drawn from: broker restarts, broker outages of 0.5–4 s, copier
/// crash-restarts, pauses past the session timeout (one in ten past the transaction timeout as
/// well) and network partitions of 0.5–8 s, equally likely, 1–5 s apart.
fn profile() -> FaultProfile {
    FaultProfile {
        name: "kafka-chaos",
        broker_restart: 1,
        broker_down: 1,
        crash_restart: 1,
        pause: 1,
        isolate: 1,
        gap: (Duration::from_secs(1), Duration::from_secs(5)),
        session_timeout: SESSION_TIMEOUT,
        transaction_timeout: TRANSACTION_TIMEOUT,
        pause_past_transaction_timeout: 0.1,
        ..FaultProfile::calm()
    }
}

/// The request faults of the whole fault period (the cluster's baseline, beside the schedule).
fn baseline_requests() -> RequestFaults {
    RequestFaults {
        drop_request: 0.01,
        drop_response: 0.01,
        delay_request: 0.05,
        hold_past_timeout: 0.005,
        delay_response: 0.05,
        delay_max: Duration::from_millis(1_500),
        retriable_error: 0.01,
        fatal_error: 0.0,
    }
}

/// The marker faults of the whole fault period: three markers in ten land up to a second late.
fn baseline_markers() -> MarkerFaults {
    MarkerFaults {
        delay: 0.3,
        delay_max: Duration::from_millis(1_000),
        complete_before_markers: 0.0,
        ..MarkerFaults::default()
    }
}

async fn feeder(kafka: KafkaClient, ctx: Ctx) {
    let producer = kafka.producer(ProducerConfig::idempotent("feeder")).expect("producer");
    for i in 0..FEED_RECORDS_MAX {
        let key = format!("k{}", i % 17);
        match producer.send(ProducerRecord::new(INPUT, key, format!("{i}"))).await {
            Ok(delivery) => {
                if let Err(e) = delivery.await {
                    ctx.event(format!("feeder: record {i} not delivered: {e}"));
                }
            }
            Err(e) => ctx.event(format!("feeder: record {i} refused: {e}")),
        }
        sleep(Duration::from_millis(thread_rng().gen_range(10..150))).await;
    }
    producer.close().await;
    ctx.event("feeder: done");
}

/// One transaction: copies `records` and commits their offsets.
async fn transact(consumer: &dyn Consumer, producer: &dyn Producer, records: Vec<RawRecord>) -> KafkaResult<()> {
    producer.begin_transaction().await?;
    let mut deliveries = Vec::with_capacity(records.len());
    let mut next: BTreeMap<TopicPartition, i64> = BTreeMap::new();
    for record in records {
        let value = format!("{}:{}", record.partition, record.offset);
        let out = ProducerRecord {
            topic: OUTPUT.to_owned(),
            partition: Some(record.partition),
            key: record.key.clone(),
            value: Some(value.into()),
            headers: Vec::new(),
            timestamp_ms: None,
        };
        deliveries.push(producer.send(out).await?);
        next.insert(TopicPartition::new(INPUT, record.partition), record.offset + 1);
    }
    for delivery in deliveries {
        delivery.await?;
    }
    let metadata = consumer
        .group_metadata()
        .ok_or_else(|| KafkaError::new(KafkaErrorKind::Abortable, "copy", "no group metadata"))?;
    let offsets: Vec<(TopicPartition, i64)> = next.into_iter().collect();
    producer.send_offsets_to_transaction(&offsets, &metadata).await?;
    producer.commit_transaction().await
}

/// Puts every held partition back to the group's committed offset after an abort.
async fn rewind(consumer: &mut dyn Consumer, held: &BTreeSet<TopicPartition>) -> KafkaResult<()> {
    let partitions: Vec<TopicPartition> = held.iter().cloned().collect();
    let committed = consumer.committed(&partitions).await?;
    for (partition, offset) in partitions.iter().zip(committed) {
        consumer.seek(partition, offset.unwrap_or(0)).await?;
    }
    Ok(())
}

async fn copy_until_failure(kafka: &KafkaClient, name: &str) -> KafkaResult<()> {
    let mut consumer = kafka.consumer(ConsumerConfig::member(name, GROUP))?;
    consumer.subscribe(&[INPUT.to_owned()]).await?;
    let config =
        ProducerConfig { transaction_timeout: TRANSACTION_TIMEOUT, ..ProducerConfig::transactional(name, name) };
    let producer = kafka.producer(config)?;
    producer.init_transactions().await?;
    let mut held = BTreeSet::new();
    loop {
        let polled = consumer.poll(50, Duration::from_millis(200)).await?;
        for event in polled.rebalances {
            match event {
                Rebalance::Revoked { partitions } => partitions.iter().for_each(|p| {
                    held.remove(p);
                }),
                Rebalance::Assigned { partitions, .. } => {
                    consumer.resume(&partitions)?;
                    held.extend(partitions);
                }
            }
        }
        if polled.records.is_empty() {
            continue;
        }
        if let Err(error) = transact(consumer.as_ref(), producer.as_ref(), polled.records).await {
            if error.is_fatal() {
                return Err(error);
            }
            producer.abort_transaction().await?;
            rewind(consumer.as_mut(), &held).await?;
        }
    }
}

/// The copier as a replica's application: its name is its client and transactional id; an
/// error ends the incarnation (the supervisor starts the next one).
fn copier_launch() -> Launch {
    Arc::new(|env: ReplicaEnv| {
        Box::pin(async move {
            copy_until_failure(&env.kafka, &env.name)
                .await
                .map_err(|error| format!("{:?} error in {}", error.kind(), error.operation()))
        })
    })
}

fn check_exactly_once(ctx: &Ctx, cluster: &Cluster) {
    let (inputs, outputs) = (truth::committed_records(cluster, INPUT), truth::committed_records(cluster, OUTPUT));
    let mut copies: BTreeMap<String, usize> = BTreeMap::new();
    for record in &outputs {
        let value = String::from_utf8_lossy(record.value.as_deref().unwrap_or_default()).into_owned();
        *copies.entry(value).or_default() += 1;
    }
    let expected: BTreeSet<String> = inputs.iter().map(|r| format!("{}:{}", r.partition, r.offset)).collect();
    let missing: Vec<&String> = expected.iter().filter(|id| !copies.contains_key(*id)).take(10).collect();
    let repeated: Vec<(&String, &usize)> = copies.iter().filter(|(_, n)| **n > 1).take(10).collect();
    let strays: Vec<&String> = copies.keys().filter(|id| !expected.contains(*id)).take(10).collect();
    ctx.event(format!("check: {} inputs, {} outputs", inputs.len(), outputs.len()));
    if !missing.is_empty() || !repeated.is_empty() || !strays.is_empty() {
        ctx.violation(format!("exactly-once broken: missing {missing:?}, repeated {repeated:?}, strays {strays:?}"));
    }
}

async fn run(ctx: Ctx) {
    let cluster = Cluster::start(&ctx);
    let schedule = profile().on_brokers(cluster.brokers()).generate(&mut thread_rng(), CHAOS_DURATION);
    ctx.event(format!(
        "kafka-chaos: {COPIERS} copiers, {} faults over {CHAOS_DURATION:?}:\n{schedule}",
        schedule.len()
    ));
    setup(&cluster, vec![topic(INPUT, PARTITIONS, false), topic(OUTPUT, PARTITIONS, false)], Vec::new()).await;
    let mut copiers = Replicas::start(&cluster, &ctx, &SimDisk::default(), copier_launch(), COPIERS, COPIERS);
    copiers.set_baseline_requests(baseline_requests());
    copiers.set_baseline_markers(baseline_markers());
    let feeding = {
        let (kafka, ctx) = (cluster.kafka(), ctx.clone());
        Handle::current().create_node().name("feeder").ip(cluster.client_ip()).build().spawn(feeder(kafka, ctx))
    };
    copiers.run_faults(&schedule, vec![feeding]).await;
    if !truth::await_quiescence(&ctx, &cluster, GROUP, &[INPUT], &[OUTPUT], QUIESCENCE_MAX).await {
        ctx.violation(format!("the copiers did not commit to the end of {INPUT} within {QUIESCENCE_MAX:?}"));
    }
    check_exactly_once(&ctx, &cluster);
}
