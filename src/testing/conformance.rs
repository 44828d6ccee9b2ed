//! The conformance suite: client-level scenarios every [`Kafka`] adapter must pass.
//!
//! Written once against the port and run on both adapters — the simulated cluster (many seeds,
//! with the determinism check) and a real Kafka-protocol broker through librdkafka — so the
//! simulator cannot drift from what the engine meets in production. A scenario that passes on
//! one and fails on the other is a bug in the simulator or in the adapter (or a broker quirk,
//! documented in `docs/simulation.md`).
//!
//! Every scenario waits on events with bounded timeouts, never on fixed sleeps, and uses topic
//! and group names under a caller-chosen prefix, so the suite can run repeatedly against one
//! long-lived broker.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;

use super::read_topic;
use crate::kafka::{
    ConsumerConfig, Kafka, KafkaError, NewTopic, ProducerConfig, ProducerRecord, Rebalance, TopicCreation,
    TopicPartition,
};
use crate::wire::{Header, RawRecord};

/// Settings of one suite run.
#[derive(Clone, Debug)]
pub struct Env {
    /// Prefix of every topic, group and transactional id the suite creates.
    pub prefix: String,
    /// Replication factor for created topics (1 on a single broker).
    pub replication_factor: i16,
    /// Upper bound for a group to settle after a join or a leave.
    pub group_settle_max: Duration,
    /// Upper bound for one read to find the records it expects.
    pub read_max: Duration,
}

impl Env {
    /// Defaults for a single local broker.
    pub fn new(prefix: impl Into<String>) -> Self {
        Env {
            prefix: prefix.into(),
            replication_factor: 1,
            group_settle_max: Duration::from_secs(60),
            read_max: Duration::from_secs(30),
        }
    }

    fn name(&self, what: &str) -> String {
        format!("{}-{what}", self.prefix)
    }
}

/// Why a scenario failed.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// A Kafka call failed that should have succeeded.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    /// The behaviour differs from Kafka's.
    #[error("{0}")]
    Verdict(String),
}

fn check(condition: bool, message: impl FnOnce() -> String) -> Result<(), Failure> {
    if condition {
        Ok(())
    } else {
        Err(Failure::Verdict(message()))
    }
}

type ScenarioFuture<'a> = Pin<Box<dyn Future<Output = Result<(), Failure>> + Send + 'a>>;

/// One scenario: its name, the behaviour IDs it pins, and the check.
pub struct Scenario {
    /// Short name.
    pub name: &'static str,
    /// What it checks, with behaviour IDs.
    pub pins: &'static str,
    /// The check.
    pub run: for<'a> fn(&'a dyn Kafka, &'a Env) -> ScenarioFuture<'a>,
}

/// Every scenario, in a fixed order.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "topics",
            pins: "admin: create N partitions + compact, exists = success (LIFE-14/15)",
            run: |k, e| Box::pin(topics(k, e)),
        },
        Scenario {
            name: "partitioning",
            pins: "explicit partition; keyed = murmur2 like Kafka (EXT-30, STO-09)",
            run: |k, e| Box::pin(partitioning(k, e)),
        },
        Scenario {
            name: "commit-abort",
            pins: "commit visible, abort invisible under read_committed (CFG-26)",
            run: |k, e| Box::pin(commit_abort(k, e)),
        },
        Scenario {
            name: "lso",
            pins: "read to end under an open transaction returns committed only (IT-LB-2)",
            run: |k, e| Box::pin(lso(k, e)),
        },
        Scenario {
            name: "fencing",
            pins: "zombie fenced by init_transactions, its records invisible (IT-LB-1, TRX-31)",
            run: |k, e| Box::pin(fencing(k, e)),
        },
        Scenario {
            name: "offsets-in-transaction",
            pins: "offsets commit with the transaction, abort leaves none (IT-EOS-1/2)",
            run: |k, e| Box::pin(offsets_in_transaction(k, e)),
        },
        Scenario {
            name: "group-handover",
            pins: "two members split by Range, survivor takes all on leave (TRX-32/33, IT-LB-3)",
            run: |k, e| Box::pin(group_handover(k, e)),
        },
        Scenario {
            name: "tombstones-headers-timestamps",
            pins: "null values, headers and timestamps round-trip (CFG-12, TRX-13)",
            run: |k, e| Box::pin(round_trip(k, e)),
        },
    ]
}

/// Runs every scenario in order, each to completion, and returns the verdicts.
pub async fn run_all(kafka: &dyn Kafka, env: &Env) -> Vec<(&'static str, Result<(), Failure>)> {
    let mut verdicts = Vec::new();
    for scenario in scenarios() {
        let scoped = Env { prefix: format!("{}-{}", env.prefix, scenario.name), ..env.clone() };
        tracing::info!(scenario = scenario.name, "conformance scenario");
        verdicts.push((scenario.name, (scenario.run)(kafka, &scoped).await));
    }
    verdicts
}

async fn create(kafka: &dyn Kafka, env: &Env, topic: &str, partitions: u32, compact: bool) -> Result<(), Failure> {
    let mut spec = NewTopic::new(topic, partitions).replication(env.replication_factor);
    if compact {
        spec = spec.compacted();
    }
    kafka.admin()?.create_topic(&spec).await?;
    Ok(())
}

/// Reads every committed record of `topic` (all partitions) to the end captured now.
async fn read_all(kafka: &dyn Kafka, env: &Env, topic: &str) -> Result<Vec<RawRecord>, Failure> {
    tokio::time::timeout(env.read_max, read_topic(kafka, &env.name("reader"), topic))
        .await
        .map_err(|_| Failure::Verdict(format!("reading {topic} to its end took longer than {:?}", env.read_max)))?
        .map_err(Failure::Kafka)
}

/// Reads `topic` until at least `count` records are visible (or [`Env::read_max`] passes), then
/// returns what is there. On Kafka a transaction's markers land just after its commit returns,
/// so a read right after a commit may not see it yet; the checks then compare exact contents,
/// so anything extra (an aborted record, a duplicate) still fails them.
async fn read_at_least(kafka: &dyn Kafka, env: &Env, topic: &str, count: usize) -> Result<Vec<RawRecord>, Failure> {
    let deadline = tokio::time::Instant::now() + env.read_max;
    loop {
        let records = read_all(kafka, env, topic).await?;
        if records.len() >= count || tokio::time::Instant::now() >= deadline {
            return Ok(records);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

fn values(records: &[RawRecord]) -> Vec<Option<Bytes>> {
    records.iter().map(|r| r.value.clone()).collect()
}

async fn topics(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let admin = kafka.admin()?;
    let topic = env.name("compacted");
    let spec = NewTopic::new(&topic, 3).replication(env.replication_factor).compacted();
    let first = admin.create_topic(&spec).await?;
    check(first == TopicCreation::Created, || format!("first creation of {topic}: {first:?}"))?;
    let again = admin.create_topic(&spec).await?;
    check(again == TopicCreation::AlreadyExists, || format!("second creation of {topic}: {again:?}"))?;
    let count = admin.partition_count(&topic).await?;
    check(count == Some(3), || format!("partition count of {topic}: {count:?}"))?;
    let missing = admin.partition_count(&env.name("never-created")).await?;
    check(missing.is_none(), || format!("a missing topic has partitions: {missing:?}"))?;
    let mut consumer = kafka.consumer(ConsumerConfig::groupless(env.name("meta")))?;
    let seen = consumer.partition_count(&topic).await?;
    check(seen == Some(3), || format!("consumer sees {seen:?} partitions of a fresh topic"))?;
    consumer.close().await?;
    Ok(())
}

async fn partitioning(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let topic = env.name("keyed");
    create(kafka, env, &topic, 5, false).await?;
    let producer = kafka.producer(ProducerConfig::transactional(env.name("p"), env.name("txn")))?;
    producer.init_transactions().await?;
    producer.begin_transaction().await?;
    let keys = ["tenant/channel", "a", "key42", "ütf-8 ✓", "", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"];
    let mut deliveries = Vec::new();
    for key in keys {
        deliveries.push(producer.send(ProducerRecord::new(&topic, key.as_bytes().to_vec(), b"{}".to_vec())).await?);
    }
    let explicit = producer.send(ProducerRecord::new(&topic, "a", b"{}".to_vec()).to_partition(4)).await?;
    for (key, delivery) in keys.iter().zip(deliveries) {
        let delivered = delivery.await?;
        let want = (crate::token::murmur2(key.as_bytes()) as u32 & 0x7fff_ffff) % 5;
        check(delivered.partition as u32 == want, || {
            format!("key {key:?} landed on partition {}, Kafka's partitioner says {want}", delivered.partition)
        })?;
    }
    let explicit = explicit.await?;
    check(explicit.partition == 4, || format!("explicit partition 4 landed on {}", explicit.partition))?;
    producer.commit_transaction().await?;
    producer.close().await;
    let records = read_at_least(kafka, env, &topic, keys.len() + 1).await?;
    check(records.len() == keys.len() + 1, || {
        format!("{} records read back, {} written", records.len(), keys.len() + 1)
    })?;
    for record in &records {
        let key = record.key.as_deref().unwrap_or_default();
        let hashed = (crate::token::murmur2(key) as u32 & 0x7fff_ffff) % 5;
        check(record.partition as u32 == hashed || record.partition == 4, || {
            format!("record {:?} read from partition {}", String::from_utf8_lossy(key), record.partition)
        })?;
    }
    Ok(())
}

async fn commit_abort(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let topic = env.name("data");
    create(kafka, env, &topic, 1, false).await?;
    let producer = kafka.producer(ProducerConfig::transactional(env.name("p"), env.name("txn")))?;
    producer.init_transactions().await?;
    for (value, commit) in [("committed-1", true), ("aborted", false), ("committed-2", true)] {
        producer.begin_transaction().await?;
        let delivery = producer.send(ProducerRecord::new(&topic, "k", value.as_bytes().to_vec())).await?;
        delivery.await?;
        if commit {
            producer.commit_transaction().await?;
        } else {
            producer.abort_transaction().await?;
        }
    }
    producer.close().await;
    let got = values(&read_at_least(kafka, env, &topic, 2).await?);
    let want = vec![Some(Bytes::from_static(b"committed-1")), Some(Bytes::from_static(b"committed-2"))];
    check(got == want, || format!("read_committed saw {got:?}, expected {want:?}"))
}

async fn lso(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let topic = env.name("changelog");
    create(kafka, env, &topic, 1, true).await?;
    let committer = kafka.producer(ProducerConfig::transactional(env.name("p1"), env.name("txn-1")))?;
    committer.init_transactions().await?;
    committer.begin_transaction().await?;
    committer.send(ProducerRecord::new(&topic, "k1", b"{\"v\":1}".to_vec()).to_partition(0)).await?.await?;
    committer.commit_transaction().await?;
    let open = kafka.producer(ProducerConfig::transactional(env.name("p2"), env.name("txn-2")))?;
    open.init_transactions().await?;
    open.begin_transaction().await?;
    open.send(ProducerRecord::new(&topic, "k2", b"{\"v\":2}".to_vec()).to_partition(0)).await?.await?;
    // The read must return promptly, with k1 only, although k2 sits in an open transaction.
    let records = read_at_least(kafka, env, &topic, 1).await?;
    let keys: Vec<Option<Bytes>> = records.iter().map(|r| r.key.clone()).collect();
    check(keys == vec![Some(Bytes::from_static(b"k1"))], || format!("read to the LSO returned keys {keys:?}"))?;
    open.abort_transaction().await?;
    open.close().await;
    committer.close().await;
    let after = read_at_least(kafka, env, &topic, 1).await?;
    check(after.len() == 1, || format!("after the abort, {} records are visible", after.len()))
}

async fn fencing(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let topic = env.name("out");
    create(kafka, env, &topic, 1, false).await?;
    let id = env.name("task-0");
    let zombie = kafka.producer(ProducerConfig::transactional(env.name("zombie"), &id))?;
    zombie.init_transactions().await?;
    zombie.begin_transaction().await?;
    zombie.send(ProducerRecord::new(&topic, "k", b"from-zombie".to_vec())).await?.await?;
    let successor = kafka.producer(ProducerConfig::transactional(env.name("successor"), &id))?;
    successor.init_transactions().await?;
    let committed = zombie.commit_transaction().await;
    check(committed.as_ref().is_err_and(KafkaError::is_fenced), || {
        format!("the zombie's commit after a successor's init returned {committed:?}, expected fenced")
    })?;
    successor.begin_transaction().await?;
    successor.send(ProducerRecord::new(&topic, "k", b"from-successor".to_vec())).await?.await?;
    successor.commit_transaction().await?;
    zombie.close().await;
    successor.close().await;
    let got = values(&read_at_least(kafka, env, &topic, 1).await?);
    check(got == vec![Some(Bytes::from_static(b"from-successor"))], || format!("after fencing, readers see {got:?}"))
}

async fn offsets_in_transaction(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let input = env.name("input");
    let output = env.name("output");
    create(kafka, env, &input, 1, false).await?;
    create(kafka, env, &output, 1, false).await?;
    let seed = kafka.producer(ProducerConfig::idempotent(env.name("seed")))?;
    for i in 0..3 {
        seed.send(ProducerRecord::new(&input, "k", format!("in-{i}").into_bytes())).await?.await?;
    }
    seed.close().await;
    let group = env.name("group");
    let tp = TopicPartition::new(&input, 0);

    // A member that owns input-0, so its group metadata is real.
    let mut member = kafka.consumer(ConsumerConfig::member(env.name("member"), &group))?;
    member.subscribe(std::slice::from_ref(&input)).await?;
    await_assignment(member.as_mut(), env, |parts| parts.contains(&tp)).await?;
    let metadata = member
        .group_metadata()
        .ok_or_else(|| Failure::Verdict("a member with an assignment has no group metadata".into()))?;

    // IT-EOS-2: an aborted transaction commits no offset.
    let producer = kafka.producer(ProducerConfig::transactional(env.name("p"), env.name("txn")))?;
    producer.init_transactions().await?;
    producer.begin_transaction().await?;
    producer.send(ProducerRecord::new(&output, "k", b"aborted".to_vec())).await?.await?;
    producer.send_offsets_to_transaction(&[(tp.clone(), 99)], &metadata).await?;
    producer.abort_transaction().await?;
    let committed = member.committed(std::slice::from_ref(&tp)).await?;
    check(committed == vec![None], || format!("after an aborted transaction the group has offsets {committed:?}"))?;

    // IT-EOS-1: a committed transaction makes output and offsets visible together.
    producer.begin_transaction().await?;
    producer.send(ProducerRecord::new(&output, "k", b"derived".to_vec())).await?.await?;
    producer.send_offsets_to_transaction(&[(tp.clone(), 2)], &metadata).await?;
    producer.commit_transaction().await?;
    let committed = member.committed(std::slice::from_ref(&tp)).await?;
    check(committed == vec![Some(2)], || format!("after a committed transaction the group has offsets {committed:?}"))?;
    producer.close().await;
    member.close().await?;
    let got = values(&read_at_least(kafka, env, &output, 1).await?);
    check(got == vec![Some(Bytes::from_static(b"derived"))], || format!("output after commit + abort: {got:?}"))?;

    // A new member of the group starts at the committed offset: it reads in-2 first.
    let mut next = kafka.consumer(ConsumerConfig::member(env.name("next"), &group))?;
    next.subscribe(std::slice::from_ref(&input)).await?;
    await_assignment(next.as_mut(), env, |parts| parts.contains(&tp)).await?;
    next.resume(std::slice::from_ref(&tp))?;
    let first = first_record(next.as_mut(), env).await?;
    check(first.value.as_deref() == Some(b"in-2"), || {
        format!("a new member resumed at {:?}, expected in-2 (offset 2)", first.value)
    })?;
    next.close().await?;
    Ok(())
}

/// Polls until the consumer's latest assignment satisfies `done`; returns it.
async fn await_assignment(
    consumer: &mut dyn crate::kafka::Consumer,
    env: &Env,
    done: impl Fn(&BTreeSet<TopicPartition>) -> bool,
) -> Result<BTreeSet<TopicPartition>, Failure> {
    let mut held = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + env.group_settle_max;
    loop {
        let polled = consumer.poll(100, Duration::from_millis(200)).await?;
        check(polled.records.is_empty(), || "records arrived for partitions that start paused".into())?;
        for event in polled.rebalances {
            match event {
                Rebalance::Revoked { partitions } => {
                    for p in partitions {
                        held.remove(&p);
                    }
                }
                Rebalance::Assigned { partitions, .. } => held.extend(partitions),
            }
        }
        if done(&held) {
            return Ok(held);
        }
        check(tokio::time::Instant::now() < deadline, || {
            format!("no satisfying assignment within {:?}; holding {held:?}", env.group_settle_max)
        })?;
    }
}

async fn first_record(consumer: &mut dyn crate::kafka::Consumer, env: &Env) -> Result<RawRecord, Failure> {
    let deadline = tokio::time::Instant::now() + env.read_max;
    loop {
        let polled = consumer.poll(1, Duration::from_millis(500)).await?;
        if let Some(record) = polled.records.into_iter().next() {
            return Ok(record);
        }
        check(tokio::time::Instant::now() < deadline, || format!("no record within {:?}", env.read_max))?;
    }
}

async fn group_handover(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let topic = env.name("input");
    create(kafka, env, &topic, 4, false).await?;
    let group = env.name("group");
    let all: BTreeSet<TopicPartition> = (0..4).map(|p| TopicPartition::new(&topic, p)).collect();
    let mut a = kafka.consumer(ConsumerConfig::member(env.name("a"), &group))?;
    a.subscribe(std::slice::from_ref(&topic)).await?;
    let alone = await_assignment(a.as_mut(), env, |held| held == &all).await?;
    check(alone == all, || format!("a single member holds {alone:?}"))?;

    // B joins: both must keep polling for the rebalance to complete.
    let mut b = kafka.consumer(ConsumerConfig::member(env.name("b"), &group))?;
    b.subscribe(std::slice::from_ref(&topic)).await?;
    let mut held_a = alone;
    let mut held_b = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + env.group_settle_max;
    loop {
        for (consumer, held) in [(&mut a, &mut held_a), (&mut b, &mut held_b)] {
            let polled = consumer.poll(100, Duration::from_millis(100)).await?;
            for event in polled.rebalances {
                match event {
                    Rebalance::Revoked { partitions } => partitions.iter().for_each(|p| {
                        held.remove(p);
                    }),
                    Rebalance::Assigned { partitions, .. } => held.extend(partitions),
                }
            }
        }
        if held_a.len() == 2 && held_b.len() == 2 {
            break;
        }
        check(tokio::time::Instant::now() < deadline, || {
            format!("no 2/2 split within {:?}: a {held_a:?}, b {held_b:?}", env.group_settle_max)
        })?;
    }
    check(held_a.is_disjoint(&held_b), || format!("overlap: a {held_a:?}, b {held_b:?}"))?;
    let union: BTreeSet<TopicPartition> = held_a.union(&held_b).cloned().collect();
    check(union == all, || format!("split misses partitions: a {held_a:?}, b {held_b:?}"))?;
    // Range: each member holds a contiguous block.
    for held in [&held_a, &held_b] {
        let numbers: Vec<i32> = held.iter().map(|p| p.partition).collect();
        check(numbers[1] == numbers[0] + 1, || format!("not a Range block: {numbers:?}"))?;
    }

    // B leaves: A takes everything again.
    b.close().await?;
    let after = await_assignment(a.as_mut(), env, |held| held == &all).await?;
    check(after == all, || format!("after the leave a holds {after:?}"))?;
    a.close().await?;
    Ok(())
}

async fn round_trip(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let topic = env.name("configs");
    create(kafka, env, &topic, 1, true).await?;
    let producer = kafka.producer(ProducerConfig::transactional(env.name("p"), env.name("txn")))?;
    producer.init_transactions().await?;
    producer.begin_transaction().await?;
    let headers = vec![
        Header { key: "trace".into(), value: Some(Bytes::from_static(b"abc")) },
        Header { key: "empty".into(), value: None },
    ];
    let timestamp_ms = 1_704_067_200_123;
    let mut with_headers = ProducerRecord::new(&topic, "k1", b"{\"a\":1}".to_vec());
    with_headers.headers = headers.clone();
    with_headers.timestamp_ms = Some(timestamp_ms);
    producer.send(with_headers).await?.await?;
    let tombstone = ProducerRecord { value: None, ..ProducerRecord::new(&topic, "k1", Vec::new()) };
    producer.send(tombstone).await?.await?;
    producer.commit_transaction().await?;
    producer.close().await;
    let records = read_at_least(kafka, env, &topic, 2).await?;
    check(records.len() == 2, || format!("{} records read back, 2 written", records.len()))?;
    check(records[0].headers == headers, || format!("headers read back: {:?}", records[0].headers))?;
    check(records[0].timestamp_ms == Some(timestamp_ms), || {
        format!("timestamp read back: {:?}", records[0].timestamp_ms)
    })?;
    check(records[1].value.is_none(), || format!("a tombstone read back as {:?}", records[1].value))?;
    check(records[1].key.as_deref() == Some(b"k1"), || "a tombstone lost its key".into())
}
