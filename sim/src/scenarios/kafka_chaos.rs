//! Scenario `kafka-chaos`: the simulated cluster itself under every fault it offers, checked
//! with the smallest exactly-once client there is — a transactional copier, no engine.
//!
//! A feeder appends records to `input` (idempotent producer). Three copiers in one group read
//! `input` and, per poll, copy the records to `output` and commit their offsets in one
//! transaction (KIP-447 style: one transactional id per copier, the group generation fences
//! zombies). Meanwhile the broker restarts and goes down, copiers crash, pause past their
//! session and get cut off the network; requests and responses are lost, delayed and
//! answered with retriable errors; markers land late.
//!
//! Property (exactly-once, design.md "Properties"): after quiescence, every `input` record
//! (partition, offset) appears exactly once in the `read_committed` `output`, and the group's
//! committed offsets reach the end of `input`. A violation points at the cluster or the client
//! adapter: the copier is too small to hide a bug.

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::time::Duration;

use flechtwerk::kafka::{
    Consumer, ConsumerConfig, Kafka, KafkaError, KafkaErrorKind, KafkaResult, NewTopic, Producer, ProducerConfig,
    ProducerRecord, Rebalance, TopicPartition,
};
use flechtwerk::wire::RawRecord;
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;
use madsim::time::sleep;

use crate::cluster::protocol::RequestKind;
use crate::cluster::{Cluster, Faults, KafkaClient, MarkerFaults, RequestFaults};
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
/// How long the fault schedule runs.
const CHAOS_DURATION: Duration = Duration::from_secs(60);
/// How long the copiers get to finish once the faults stop.
const QUIESCENCE_MAX: Duration = Duration::from_secs(240);
/// Transaction timeout of the copiers (a crashed copier's transaction blocks this long).
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(20);

fn faults() -> Faults {
    let requests = RequestFaults {
        drop_request: 0.01,
        drop_response: 0.01,
        delay_request: 0.05,
        hold_past_timeout: 0.005,
        delay_response: 0.05,
        delay_max: Duration::from_millis(1_500),
        retriable_error: 0.01,
        fatal_error: 0.0,
    };
    let create = RequestFaults { drop_response: 0.0, delay_response: 0.0, ..requests.clone() };
    Faults {
        requests,
        by_kind: BTreeMap::from([(RequestKind::CreateTopic, create)]),
        markers: MarkerFaults {
            delay: 0.3,
            delay_max: Duration::from_millis(1_000),
            complete_before_markers: 0.0,
            ..MarkerFaults::default()
        },
    }
}

async fn feeder(kafka: KafkaClient, ctx: Ctx) {
    let admin = kafka.admin().expect("admin");
    for topic in [INPUT, OUTPUT] {
        while admin.create_topic(&NewTopic::new(topic, PARTITIONS)).await.is_err() {
            sleep(Duration::from_secs(1)).await;
        }
    }
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

async fn copier(kafka: KafkaClient, ctx: Ctx, name: String) {
    loop {
        if let Err(error) = copy_until_failure(&kafka, &name).await {
            ctx.event(format!("{name}: restarting after {:?} error in {}", error.kind(), error.operation()));
        }
        sleep(Duration::from_secs(1)).await;
    }
}

async fn chaos(cluster: &Cluster, copiers: &[madsim::task::NodeId]) {
    let end = madsim::time::Instant::now() + CHAOS_DURATION;
    while madsim::time::Instant::now() < end {
        sleep(Duration::from_millis(thread_rng().gen_range(1_000..5_000))).await;
        let i = thread_rng().gen_range(0..copiers.len());
        let name = format!("copier-{i}");
        match thread_rng().gen_range(0..6) {
            0 => cluster.restart_broker(),
            1 => {
                cluster.stop_broker();
                sleep(Duration::from_millis(thread_rng().gen_range(500..4_000))).await;
                cluster.start_broker();
            }
            2 => cluster.crash_restart(copiers[i], &name),
            3 => {
                let pause = Duration::from_millis(thread_rng().gen_range(1_000..15_000));
                cluster.pause_for(copiers[i], &name, pause).await;
            }
            4 => {
                cluster.isolate(copiers[i], &name);
                sleep(Duration::from_millis(thread_rng().gen_range(1_000..12_000))).await;
                cluster.heal(copiers[i], &name);
            }
            _ => {}
        }
    }
}

/// Whether the group's committed offsets reached the end of every input partition.
/// Quiescence: the group's offsets reach the end of every input partition, and as many outputs
/// are visible as there are inputs. (Committed offsets alone are not enough: a delayed commit
/// marker on an output partition can land after the group's offsets marker, and until it does
/// that transaction's outputs are invisible, like on Kafka.)
fn caught_up(cluster: &Cluster) -> bool {
    cluster.inspect(|broker| {
        let Some(group) = broker.group(GROUP) else { return false };
        let offsets_done = (0..PARTITIONS as i32).all(|p| {
            let tp = TopicPartition::new(INPUT, p);
            let end = broker.log(&tp).map(|l| l.high_watermark()).unwrap_or(0);
            end == 0 || group.committed.get(&tp) == Some(&end)
        });
        let visible = |topic: &str| -> usize {
            (0..PARTITIONS as i32)
                .map(|p| broker.read_committed(&TopicPartition::new(topic, p)).map_or(0, |r| r.len()))
                .sum()
        };
        offsets_done && visible(OUTPUT) >= visible(INPUT)
    })
}

fn check_exactly_once(ctx: &Ctx, cluster: &Cluster) {
    let (inputs, outputs) = cluster.inspect(|broker| {
        let read = |topic: &str| -> Vec<RawRecord> {
            (0..PARTITIONS as i32)
                .flat_map(|p| broker.read_committed(&TopicPartition::new(topic, p)).unwrap_or_default())
                .collect()
        };
        (read(INPUT), read(OUTPUT))
    });
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
    cluster.faults().set(faults());
    let handle = Handle::current();
    let feeder_node = {
        let (kafka, ctx) = (cluster.kafka(), ctx.clone());
        handle.create_node().name("feeder").ip(cluster.client_ip()).build().spawn(feeder(kafka, ctx))
    };
    let mut copiers = Vec::with_capacity(COPIERS);
    for i in 0..COPIERS {
        let (kafka, ctx, name) = (cluster.kafka(), ctx.clone(), format!("copier-{i}"));
        let init = move || copier(kafka.clone(), ctx.clone(), name.clone());
        let node = handle.create_node().name(format!("copier-{i}")).ip(cluster.client_ip()).init(init).build();
        copiers.push(node.id());
    }
    chaos(&cluster, &copiers).await;
    cluster.faults().set(Faults::none());
    ctx.event("faults stopped");
    if feeder_node.await.is_err() {
        ctx.violation("the feeder node died");
        return;
    }
    let deadline = madsim::time::Instant::now() + QUIESCENCE_MAX;
    while !caught_up(&cluster) {
        if madsim::time::Instant::now() > deadline {
            ctx.violation(format!("the copiers did not commit to the end of {INPUT} within {QUIESCENCE_MAX:?}"));
            break;
        }
        sleep(Duration::from_millis(500)).await;
    }
    check_exactly_once(&ctx, &cluster);
}
