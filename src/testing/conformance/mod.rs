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
    Consumer, ConsumerConfig, GroupMetadata, Kafka, KafkaError, KafkaErrorKind, NewTopic, ProducerConfig,
    ProducerRecord, Rebalance, TopicCreation, TopicPartition,
};
use crate::wire::{Header, RawRecord};

/// Restarts the broker on its data (log, transactions, offsets and producer state kept), and
/// resolves once it serves requests again.
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::testing::conformance::{Env, RestartBroker};
///
/// // e.g. a broker in a container: restart it and wait until it answers
/// let restart: RestartBroker = Arc::new(|| Box::pin(async { /* docker restart kafka; wait */ }));
/// let env = Env::new("conf").with_restart(restart);
/// assert!(env.restart_broker.is_some());
/// ```
pub type RestartBroker = std::sync::Arc<dyn Fn() -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

mod cluster;

pub use cluster::{cluster_scenarios, coordinator_partition, run_cluster, ClusterControl, CoordinatorOf};

/// Settings of one suite run.
///
/// ```
/// use std::time::Duration;
/// use flechtwerk::testing::conformance::Env;
///
/// let env = Env { read_max: Duration::from_secs(60), ..Env::new("ci-run-7") }; // a slow broker
/// assert_eq!(env.replication_factor, 1);
/// ```
#[derive(Clone)]
pub struct Env {
    /// Prefix of every topic, group and transactional id the suite creates.
    pub prefix: String,
    /// Replication factor for created topics (1 on a single broker).
    pub replication_factor: i16,
    /// Upper bound for a group to settle after a join or a leave.
    pub group_settle_max: Duration,
    /// Upper bound for one read to find the records it expects.
    pub read_max: Duration,
    /// The cluster's faults and leadership moves, for [`cluster_scenarios`] (a cluster of three
    /// brokers or more); without it they fail.
    pub cluster: Option<std::sync::Arc<dyn ClusterControl>>,
    /// How the runner restarts the broker; without it the `broker-restart` scenario fails (a
    /// runner that cannot restart its broker cannot claim conformance).
    pub restart_broker: Option<RestartBroker>,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env")
            .field("prefix", &self.prefix)
            .field("replication_factor", &self.replication_factor)
            .field("group_settle_max", &self.group_settle_max)
            .field("read_max", &self.read_max)
            .field("restart_broker", &self.restart_broker.is_some())
            .field("cluster", &self.cluster.as_ref().map(|c| c.brokers()))
            .finish()
    }
}

impl Env {
    /// Defaults for a single local broker.
    ///
    /// ```
    /// let env = flechtwerk::testing::conformance::Env::new("conf");
    /// assert_eq!(env.prefix, "conf");
    /// assert!(env.restart_broker.is_none()); // the broker-restart scenario will fail without one
    /// ```
    pub fn new(prefix: impl Into<String>) -> Self {
        Env {
            prefix: prefix.into(),
            replication_factor: 1,
            group_settle_max: Duration::from_secs(60),
            read_max: Duration::from_secs(30),
            restart_broker: None,
            cluster: None,
        }
    }

    /// The same settings, with a way to restart the broker.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flechtwerk::testing::conformance::Env;
    /// let env = Env::new("conf").with_restart(Arc::new(|| Box::pin(async {})));
    /// assert!(env.restart_broker.is_some());
    /// ```
    pub fn with_restart(mut self, restart: RestartBroker) -> Self {
        self.restart_broker = Some(restart);
        self
    }

    /// The settings with the cluster's controls, for [`cluster_scenarios`].
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use flechtwerk::testing::conformance::{ClusterControl, Env};
    /// fn env_for(control: Arc<dyn ClusterControl>) -> Env {
    ///     Env { replication_factor: 3, ..Env::new("cluster") }.with_cluster(control)
    /// }
    /// ```
    pub fn with_cluster(mut self, control: std::sync::Arc<dyn ClusterControl>) -> Self {
        self.cluster = Some(control);
        self
    }

    fn name(&self, what: &str) -> String {
        format!("{}-{what}", self.prefix)
    }
}

/// Why a scenario failed.
///
/// ```
/// use flechtwerk::testing::conformance::Failure;
/// let failure = Failure::Verdict("an aborted record was visible".into());
/// assert_eq!(failure.to_string(), "an aborted record was visible");
/// ```
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
///
/// ```
/// use std::time::Duration;
/// use flechtwerk::testing::conformance::{scenarios, Env};
/// use flechtwerk_sim::cluster::LocalCluster;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// // Run two of the scenarios on the in-process cluster.
/// let kafka = LocalCluster::new();
/// let env = Env { group_settle_max: Duration::from_secs(20), ..Env::new("doc") };
/// for scenario in scenarios().into_iter().filter(|s| ["topics", "commit-abort"].contains(&s.name)) {
///     (scenario.run)(&kafka, &env).await.map_err(|failure| format!("{}: {failure}", scenario.name))?;
/// }
/// # Ok(())
/// # }
/// ```
pub struct Scenario {
    /// Short name.
    pub name: &'static str,
    /// What it checks, with behaviour IDs.
    pub pins: &'static str,
    /// The check.
    pub run: for<'a> fn(&'a dyn Kafka, &'a Env) -> ScenarioFuture<'a>,
}

/// Every scenario, in a fixed order.
///
/// ```
/// let names: Vec<&str> = flechtwerk::testing::conformance::scenarios().iter().map(|s| s.name).collect();
/// assert!(names.contains(&"zombie-races-init"));
/// assert_eq!(names.len(), 17);
/// ```
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
            name: "extents",
            pins: "extents: Stable ends at an open transaction, HighWatermark past it; a fence moves the LSO (STO-11, TRX-43)",
            run: |k, e| Box::pin(extents(k, e)),
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
        Scenario {
            name: "lso-per-partition",
            pins: "an open transaction holds back only its own partitions' LSO (IT-LB-2, STO-11)",
            run: |k, e| Box::pin(lso_per_partition(k, e)),
        },
        Scenario {
            name: "zombie-races-init",
            pins: "a zombie sending while its successor inits: fenced, none of its records visible (IT-LB-1)",
            run: |k, e| Box::pin(zombie_races_init(k, e)),
        },
        Scenario {
            name: "transaction-timeout",
            pins: "the coordinator aborts a transaction past its timeout; its producer is fenced (EXT-17)",
            run: |k, e| Box::pin(transaction_timeout(k, e)),
        },
        Scenario {
            name: "unstable-offsets",
            pins: "committed() waits for offsets pending in an open transaction (TRX-31)",
            run: |k, e| Box::pin(unstable_offsets(k, e)),
        },
        Scenario {
            name: "silent-member-open-transaction",
            pins: "a member gone silent with an open transaction: its successor fences and aborts it (TRX-31, TRX-33)",
            run: |k, e| Box::pin(silent_member_open_transaction(k, e)),
        },
        Scenario {
            name: "generation-fencing",
            pins:
                "offsets sent with a stale generation are refused and the transaction cannot commit (KIP-447, TRX-42)",
            run: |k, e| Box::pin(generation_fencing(k, e)),
        },
        Scenario {
            name: "compaction",
            pins: "compaction removes superseded values, and tombstones after delete.retention.ms (CFG-11, CFG-12)",
            run: |k, e| Box::pin(compaction(k, e)),
        },
        Scenario {
            name: "broker-restart",
            pins: "a restart keeps logs, offsets, open transactions and producer epochs (TRX-31, LIFE-23)",
            run: |k, e| Box::pin(broker_restart(k, e)),
        },
    ]
}

/// Runs every scenario in order, each to completion, and returns the verdicts.
///
/// Against a real broker (the simulated one runs it in `flechtwerk-sim`'s tests, with paused
/// time: it waits out transaction and session timeouts):
///
/// ```no_run
/// # #[cfg(feature = "rdkafka")]
/// #[tokio::main(flavor = "current_thread")]
/// async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///     use flechtwerk::kafka::rdkafka::RdKafka; // feature `rdkafka`
///     use flechtwerk::testing::conformance::{run_all, Env};
///
///     let kafka = RdKafka::new(std::env::var("KAFKA_BOOTSTRAP")?);
///     let verdicts = run_all(&kafka, &Env::new("conformance")).await;
///     let failed: Vec<_> = verdicts.into_iter().filter(|(_, verdict)| verdict.is_err()).collect();
///     assert!(failed.is_empty(), "{failed:?}");
///     Ok(())
/// }
/// # #[cfg(not(feature = "rdkafka"))]
/// # fn main() {}
/// ```
pub async fn run_all(kafka: &dyn Kafka, env: &Env) -> Vec<(&'static str, Result<(), Failure>)> {
    run_each(scenarios(), kafka, env).await
}

/// Runs `scenarios` in order, each to completion under its own prefix, and returns the verdicts.
pub(super) async fn run_each(
    scenarios: Vec<Scenario>,
    kafka: &dyn Kafka,
    env: &Env,
) -> Vec<(&'static str, Result<(), Failure>)> {
    let mut verdicts = Vec::new();
    for scenario in scenarios {
        let scoped = Env { prefix: format!("{}-{}", env.prefix, scenario.name), ..env.clone() };
        tracing::info!(scenario = scenario.name, "conformance scenario");
        verdicts.push((scenario.name, (scenario.run)(kafka, &scoped).await));
    }
    verdicts
}

/// Prints each verdict (`PASS name (what it pins)`, or `FAIL ...: why`) and returns the
/// failures, one line each: what a runner of the suite asserts empty.
///
/// ```
/// use flechtwerk::testing::conformance::{report, scenarios, Failure};
/// let verdicts = vec![("topics", Ok(())), ("lso", Err(Failure::Verdict("saw an open record".into())))];
/// assert_eq!(report(&scenarios(), &verdicts), ["lso: saw an open record"]);
/// ```
pub fn report(scenarios: &[Scenario], verdicts: &[(&'static str, Result<(), Failure>)]) -> Vec<String> {
    let mut failures = Vec::new();
    for (name, verdict) in verdicts {
        let pinned = scenarios.iter().find(|s| s.name == *name).map_or("", |s| s.pins);
        match verdict {
            Ok(()) => println!("PASS {name} ({pinned})"),
            Err(failure) => {
                println!("FAIL {name} ({pinned}): {failure}");
                failures.push(format!("{name}: {failure}"));
            }
        }
    }
    failures
}

async fn create(kafka: &dyn Kafka, env: &Env, topic: &str, partitions: u32, compact: bool) -> Result<(), Failure> {
    let mut spec = NewTopic::new(topic, partitions).replication(env.replication_factor);
    if compact {
        spec = spec.compacted();
    }
    kafka.admin()?.create_topic(&spec).await?;
    Ok(())
}

/// The input and output topics most scenarios start with: one partition each, not compacted.
async fn input_and_output(kafka: &dyn Kafka, env: &Env) -> Result<(String, String), Failure> {
    let (input, output) = (env.name("input"), env.name("output"));
    create(kafka, env, &input, 1, false).await?;
    create(kafka, env, &output, 1, false).await?;
    Ok((input, output))
}

/// A member made with `config`, subscribed to `tp`'s topic, once it holds `tp`; and its group
/// metadata (what a transaction sends its offsets with).
async fn member_holding(
    kafka: &dyn Kafka,
    env: &Env,
    config: ConsumerConfig,
    tp: &TopicPartition,
) -> Result<(Box<dyn Consumer>, GroupMetadata), Failure> {
    let mut member = kafka.consumer(config)?;
    member.subscribe(std::slice::from_ref(&tp.topic)).await?;
    await_assignment(member.as_mut(), env, |held| held.contains(tp)).await?;
    let metadata = member
        .group_metadata()
        .ok_or_else(|| Failure::Verdict("a member with an assignment has no group metadata".into()))?;
    Ok((member, metadata))
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

/// What a restore's one lookup of its changelog partitions answers (STO-11, TRX-43): partition
/// 0 empty; partition 1 holding only a zombie's open transaction (empty up to its LSO, not up
/// to its high watermark); partition 2 a committed record, then the open transaction. Once
/// the zombie's successor (same transactional id) has initialised, the zombie's transaction
/// is aborted and the LSO has caught up with the high watermark on both: a restore that looks
/// its ends up after its fence reads to where the previous owner's writes end.
async fn extents(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    use crate::kafka::{Extent, LogEnd};
    let topic = env.name("extents");
    create(kafka, env, &topic, 3, true).await?;
    let committer = kafka.producer(ProducerConfig::transactional(env.name("c"), env.name("txn-c")))?;
    committer.init_transactions().await?;
    committer.begin_transaction().await?;
    committer.send(ProducerRecord::new(&topic, "kept", b"1".to_vec()).to_partition(2)).await?.await?;
    committer.commit_transaction().await?;
    committer.close().await;
    let zombie = kafka.producer(ProducerConfig::transactional(env.name("z"), env.name("txn-z")))?;
    zombie.init_transactions().await?;
    zombie.begin_transaction().await?;
    zombie.send(ProducerRecord::new(&topic, "open", b"2".to_vec()).to_partition(1)).await?.await?;
    zombie.send(ProducerRecord::new(&topic, "open", b"3".to_vec()).to_partition(2)).await?.await?;
    let partitions: Vec<TopicPartition> = (0..3).map(|p| TopicPartition::new(&topic, p)).collect();
    let mut consumer = kafka.consumer(ConsumerConfig::groupless(env.name("extents-reader")))?;
    let stable = consumer.extents(&partitions, LogEnd::Stable).await?;
    // Partition 2's committed record sits after the committer's marker: offsets 0 and 1.
    let expected = [Extent { start: 0, end: 0 }, Extent { start: 0, end: 0 }, Extent { start: 0, end: 2 }];
    check(stable == expected, || format!("stable extents under an open transaction: {stable:?}"))?;
    let high = consumer.extents(&partitions, LogEnd::HighWatermark).await?;
    let expected = [Extent { start: 0, end: 0 }, Extent { start: 0, end: 1 }, Extent { start: 0, end: 3 }];
    check(high == expected, || format!("high-watermark extents under an open transaction: {high:?}"))?;
    check(stable[1].is_empty() && !high[1].is_empty(), || "partition 1 must be empty only up to its LSO".into())?;
    // The successor's fence aborts the zombie's transaction (its marker follows its records).
    let successor = kafka.producer(ProducerConfig::transactional(env.name("z2"), env.name("txn-z")))?;
    successor.init_transactions().await?;
    let stable = consumer.extents(&partitions, LogEnd::Stable).await?;
    let high = consumer.extents(&partitions, LogEnd::HighWatermark).await?;
    check(
        stable == high && stable[1] == Extent { start: 0, end: 2 } && stable[2] == Extent { start: 0, end: 4 },
        || format!("after the fence: stable {stable:?}, high watermark {high:?}"),
    )?;
    let _ = consumer.close().await;
    successor.close().await;
    zombie.close().await;
    Ok(())
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
    let (input, output) = input_and_output(kafka, env).await?;
    let seed = kafka.producer(ProducerConfig::idempotent(env.name("seed")))?;
    for i in 0..3 {
        seed.send(ProducerRecord::new(&input, "k", format!("in-{i}").into_bytes())).await?.await?;
    }
    seed.close().await;
    let group = env.name("group");
    let tp = TopicPartition::new(&input, 0);

    // A member that owns input-0, so its group metadata is real.
    let (mut member, metadata) =
        member_holding(kafka, env, ConsumerConfig::member(env.name("member"), &group), &tp).await?;

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

/// KIP-447's fencing (TRX-42): a transactional producer sends offsets with the group
/// metadata of member A. Accepted while A's generation is current; once B's join completed a
/// new generation, the same metadata is refused (ILLEGAL_GENERATION), the transaction can
/// no longer commit, and after its abort none of its records are visible and the group's
/// offsets are unchanged. A's fresh metadata is accepted again. The producer's transactional
/// id plays no part: nothing fences it by id.
async fn generation_fencing(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let (input, output) = input_and_output(kafka, env).await?;
    let group = env.name("group");
    let tp = TopicPartition::new(&input, 0);
    let (mut a, stale) = member_holding(kafka, env, ConsumerConfig::member(env.name("a"), &group), &tp).await?;
    let producer = kafka.producer(ProducerConfig::transactional(env.name("p"), env.name("instance")))?;
    producer.init_transactions().await?;
    producer.begin_transaction().await?;
    producer.send(ProducerRecord::new(&output, "k", "committed")).await?.await?;
    producer.send_offsets_to_transaction(&[(tp.clone(), 3)], &stale).await?;
    producer.commit_transaction().await?;

    // The zombie's transaction opens under generation g…
    producer.begin_transaction().await?;
    let zombie = producer.send(ProducerRecord::new(&output, "k", "zombie")).await?;
    // …then B joins and the group moves to a new generation (both members poll through it).
    let mut b = kafka.consumer(ConsumerConfig::member(env.name("b"), &group))?;
    b.subscribe(std::slice::from_ref(&input)).await?;
    let deadline = tokio::time::Instant::now() + env.group_settle_max;
    let fresh = loop {
        for consumer in [&mut a, &mut b] {
            consumer.poll(100, Duration::from_millis(100)).await?;
        }
        let (ma, mb) = (a.group_metadata(), b.group_metadata());
        if let (Some(ma), Some(mb)) = (ma, mb) {
            if ma.generation > stale.generation && ma.generation == mb.generation {
                break ma;
            }
        }
        check(tokio::time::Instant::now() < deadline, || {
            format!("no new generation after {:?} (a at {:?})", env.group_settle_max, a.group_metadata())
        })?;
    };
    let _ = zombie.await;
    let refused = producer.send_offsets_to_transaction(&[(tp.clone(), 7)], &stale).await;
    let error = match refused {
        Ok(()) => {
            return Err(Failure::Verdict(format!(
                "offsets with generation {} accepted while the group is at {}",
                stale.generation, fresh.generation
            )))
        }
        Err(error) => error,
    };
    check(error.kind() == KafkaErrorKind::Abortable, || {
        format!("a stale generation's refusal is not abortable: {error}")
    })?;
    let commit = producer.commit_transaction().await;
    check(commit.is_err(), || "the transaction committed after its offsets were refused".into())?;
    producer.abort_transaction().await?;
    let values = values(&read_all(kafka, env, &output).await?);
    check(values == vec![Some(Bytes::from_static(b"committed"))], || {
        format!("the zombie's record is visible: {values:?}")
    })?;
    let committed = a.committed(std::slice::from_ref(&tp)).await?;
    check(committed == vec![Some(3)], || format!("the refused offsets moved the group's: {committed:?}"))?;

    // The current generation's metadata is accepted, by the same producer.
    producer.begin_transaction().await?;
    producer.send_offsets_to_transaction(&[(tp.clone(), 5)], &fresh).await?;
    producer.commit_transaction().await?;
    let committed = a.committed(std::slice::from_ref(&tp)).await?;
    check(committed == vec![Some(5)], || format!("offsets of the current generation: {committed:?}"))?;
    producer.close().await;
    b.close().await?;
    // A polls through the rebalance B's leave starts before it closes itself: librdkafka's
    // close of a member whose rebalance is pending can hang in the revocation it then runs
    // (librdkafka#4884; seen here once, a's close not done within 30 s). Group-handover closes
    // the same way.
    await_assignment(a.as_mut(), env, |held| held.contains(&tp)).await?;
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

fn keys_of(records: &[RawRecord]) -> Vec<String> {
    records.iter().map(|r| String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned()).collect()
}

/// Reads `topic` until `done` holds or `bound` passes; returns the last read.
async fn read_until(
    kafka: &dyn Kafka,
    env: &Env,
    topic: &str,
    bound: Duration,
    done: impl Fn(&[RawRecord]) -> bool,
) -> Result<Vec<RawRecord>, Failure> {
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        let records = read_all(kafka, env, topic).await?;
        if done(&records) || tokio::time::Instant::now() >= deadline {
            return Ok(records);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An open transaction on partition 1 holds back partition 1 only: records committed on
/// partition 0 after it began are visible at once, and a read of both partitions to their ends
/// returns promptly with partition 0's records.
async fn lso_per_partition(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let topic = env.name("two");
    create(kafka, env, &topic, 2, false).await?;
    let open = kafka.producer(ProducerConfig::transactional(env.name("open"), env.name("txn-open")))?;
    open.init_transactions().await?;
    open.begin_transaction().await?;
    open.send(ProducerRecord::new(&topic, "held", b"1".to_vec()).to_partition(1)).await?.await?;
    let committer = kafka.producer(ProducerConfig::transactional(env.name("c"), env.name("txn-c")))?;
    committer.init_transactions().await?;
    committer.begin_transaction().await?;
    committer.send(ProducerRecord::new(&topic, "free", b"2".to_vec()).to_partition(0)).await?.await?;
    committer.send(ProducerRecord::new(&topic, "blocked", b"3".to_vec()).to_partition(1)).await?.await?;
    committer.commit_transaction().await?;
    let records = read_at_least(kafka, env, &topic, 1).await?;
    let seen: Vec<(i32, String)> = records.iter().map(|r| r.partition).zip(keys_of(&records)).collect();
    check(seen == vec![(0, "free".to_owned())], || {
        format!("with partition 1 held by an open transaction, readers see {seen:?}")
    })?;
    open.abort_transaction().await?;
    let after = read_at_least(kafka, env, &topic, 2).await?;
    let seen: Vec<(i32, String)> = after.iter().map(|r| r.partition).zip(keys_of(&after)).collect();
    check(seen == vec![(0, "free".to_owned()), (1, "blocked".to_owned())], || {
        format!("after the abort, readers see {seen:?}")
    })?;
    open.close().await;
    committer.close().await;
    Ok(())
}

/// A zombie keeps sending while its successor (same transactional id) initialises: whatever the
/// interleaving, the zombie ends fenced and none of its records is ever visible; the
/// successor's transaction commits.
async fn zombie_races_init(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let topic = env.name("raced");
    create(kafka, env, &topic, 1, false).await?;
    let id = env.name("task-7");
    let zombie = kafka.producer(ProducerConfig::transactional(env.name("zombie"), &id))?;
    zombie.init_transactions().await?;
    zombie.begin_transaction().await?;
    zombie.send(ProducerRecord::new(&topic, "zombie", b"0".to_vec())).await?.await?;
    let successor = kafka.producer(ProducerConfig::transactional(env.name("successor"), &id))?;
    let done = std::sync::atomic::AtomicBool::new(false);
    let sending = async {
        let mut deliveries = Vec::new();
        for i in 1..200u32 {
            if done.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            match zombie.send(ProducerRecord::new(&topic, "zombie", i.to_string().into_bytes())).await {
                Ok(delivery) => deliveries.push(delivery),
                Err(_) => break,
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        deliveries
    };
    let init = async {
        let result = successor.init_transactions().await;
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        result
    };
    let (deliveries, init) = futures::join!(sending, init);
    init?;
    let commit = zombie.commit_transaction().await;
    check(commit.as_ref().is_err_and(KafkaError::is_fenced), || {
        format!("the racing zombie's commit returned {commit:?}, expected fenced")
    })?;
    for delivery in deliveries {
        let _ = delivery.await; // delivered into the aborted transaction, or failed: never visible
    }
    successor.begin_transaction().await?;
    successor.send(ProducerRecord::new(&topic, "successor", b"s".to_vec())).await?.await?;
    successor.commit_transaction().await?;
    zombie.close().await;
    successor.close().await;
    let keys = keys_of(&read_at_least(kafka, env, &topic, 1).await?);
    check(keys == vec!["successor".to_owned()], || format!("after the race readers see {keys:?}"))
}

/// A transaction left open past its producer's transaction timeout is aborted by the
/// coordinator: its records never become visible, the partition's LSO moves on, and the
/// producer is fenced (the abort bumped its epoch).
async fn transaction_timeout(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let topic = env.name("timed");
    create(kafka, env, &topic, 1, false).await?;
    let mut config = ProducerConfig::transactional(env.name("slow"), env.name("txn-slow"));
    config.transaction_timeout = Duration::from_secs(2);
    let slow = kafka.producer(config)?;
    slow.init_transactions().await?;
    slow.begin_transaction().await?;
    // On a slow network the timeout may strike before the record is even acknowledged: then its
    // delivery fails fenced, which is the same outcome seen earlier.
    let doomed = match slow.send(ProducerRecord::new(&topic, "doomed", b"1".to_vec())).await {
        Ok(delivery) => delivery.await.map(|_| ()),
        Err(e) => Err(e),
    };
    check(doomed.as_ref().map_or_else(KafkaError::is_fenced, |()| true), || {
        format!("the doomed record's delivery: {doomed:?}")
    })?;
    let other = kafka.producer(ProducerConfig::idempotent(env.name("other")))?;
    other.send(ProducerRecord::new(&topic, "after", b"2".to_vec())).await?.await?;
    other.close().await;
    // The coordinator notices the timeout within its abort interval (seconds).
    let records = read_until(kafka, env, &topic, Duration::from_secs(30), |r| !r.is_empty()).await?;
    let keys = keys_of(&records);
    check(keys == vec!["after".to_owned()], || format!("after the transaction timed out, readers see {keys:?}"))?;
    let commit = slow.commit_transaction().await;
    check(commit.as_ref().is_err_and(KafkaError::is_fenced), || {
        format!("a commit after the coordinator aborted on timeout returned {commit:?}, expected fenced")
    })?;
    slow.close().await;
    // The id is usable again by a new producer.
    let fresh = kafka.producer(ProducerConfig::transactional(env.name("fresh"), env.name("txn-slow")))?;
    fresh.init_transactions().await?;
    fresh.begin_transaction().await?;
    fresh.send(ProducerRecord::new(&topic, "fresh", b"3".to_vec())).await?.await?;
    fresh.commit_transaction().await?;
    fresh.close().await;
    let keys = keys_of(&read_at_least(kafka, env, &topic, 2).await?);
    check(keys == vec!["after".to_owned(), "fresh".to_owned()], || format!("finally readers see {keys:?}"))
}

/// Offsets added to an open transaction are not yet the group's: a member asking for its
/// committed offsets meanwhile gets them only once the transaction commits (never the stale
/// value, never the pending one of an aborted transaction).
async fn unstable_offsets(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let input = env.name("input");
    create(kafka, env, &input, 1, false).await?;
    let group = env.name("group");
    let tp = TopicPartition::new(&input, 0);
    let (mut member, metadata) =
        member_holding(kafka, env, ConsumerConfig::member(env.name("member"), &group), &tp).await?;
    let producer = kafka.producer(ProducerConfig::transactional(env.name("p"), env.name("txn")))?;
    producer.init_transactions().await?;
    producer.begin_transaction().await?;
    producer.send_offsets_to_transaction(&[(tp.clone(), 5)], &metadata).await?;
    let asked = tokio::time::Instant::now();
    let commit = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        producer.commit_transaction().await
    };
    let (committed, commit) = futures::join!(member.committed(std::slice::from_ref(&tp)), commit);
    commit?;
    let committed = committed?;
    check(committed == vec![Some(5)], || {
        format!("committed() during a pending transactional commit returned {committed:?}, expected Some(5) once it commits")
    })?;
    check(asked.elapsed() >= Duration::from_millis(900), || {
        format!("committed() answered after {:?}, before the transaction committed", asked.elapsed())
    })?;
    producer.close().await;
    member.close().await?;
    Ok(())
}

/// A member that stops polling while its task holds an open transaction (offsets included) is
/// removed from the group; its successor gets the partition, and the successor's producer (same
/// transactional id) fences the silent member and aborts its transaction: nothing of it is
/// visible, the group's offsets stay uncommitted, and the silent member's commit fails fenced.
async fn silent_member_open_transaction(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let (input, output) = input_and_output(kafka, env).await?;
    let group = env.name("group");
    let tp = TopicPartition::new(&input, 0);
    let id = env.name("task-0");
    // Kafka's smallest session timeout by default (group.min.session.timeout.ms = 6 s), and
    // librdkafka wants max.poll.interval.ms >= session.timeout.ms.
    let silent_config = ConsumerConfig {
        max_poll_interval: Duration::from_secs(6),
        session_timeout: Duration::from_secs(6),
        ..ConsumerConfig::member(env.name("silent"), &group)
    };
    // The premise: a member that holds the partition has a transaction open with output and
    // offsets. On a faulty network the member may lose its membership before the offsets are
    // in (the offsets are then refused); it then joins again, up to three times.
    let mut attempt = 0;
    let (mut silent, zombie) = loop {
        attempt += 1;
        let (mut silent, metadata) = member_holding(kafka, env, silent_config.clone(), &tp).await?;
        // The member stays alive (keeps polling) until its transaction holds output and
        // offsets, however slow the network; then it goes silent.
        let zombie = kafka.producer(ProducerConfig::transactional(env.name("zombie"), &id))?;
        let in_transaction = std::sync::atomic::AtomicBool::new(false);
        let work = async {
            let result = async {
                zombie.init_transactions().await?;
                zombie.begin_transaction().await?;
                zombie.send(ProducerRecord::new(&output, "k", b"from-silent".to_vec())).await?.await?;
                zombie.send_offsets_to_transaction(&[(tp.clone(), 1)], &metadata).await?;
                Ok::<(), KafkaError>(())
            }
            .await;
            in_transaction.store(true, std::sync::atomic::Ordering::SeqCst);
            result
        };
        let alive = async {
            while !in_transaction.load(std::sync::atomic::Ordering::SeqCst) {
                silent.poll(1, Duration::from_millis(200)).await?;
            }
            Ok::<(), KafkaError>(())
        };
        let (work, alive) = futures::join!(work, alive);
        alive?;
        match work {
            Ok(()) => break (silent, zombie),
            Err(e) if attempt < 3 && e.kind() == crate::kafka::KafkaErrorKind::Abortable => {
                tracing::info!(error = %e, "the member lost its membership before its offsets were in: again");
                zombie.close().await;
                let _ = silent.close().await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    // The silent member polls no more; its successor joins and waits for the partition.
    let mut successor = kafka.consumer(ConsumerConfig::member(env.name("successor"), &group))?;
    successor.subscribe(std::slice::from_ref(&input)).await?;
    await_assignment(successor.as_mut(), env, |parts| parts.contains(&tp)).await?;
    let producer = kafka.producer(ProducerConfig::transactional(env.name("next"), &id))?;
    producer.init_transactions().await?;
    let committed = successor.committed(std::slice::from_ref(&tp)).await?;
    check(committed == vec![None], || format!("after the fence the group has offsets {committed:?}"))?;
    let commit = zombie.commit_transaction().await;
    check(commit.as_ref().is_err_and(KafkaError::is_fenced), || {
        format!("the silent member's commit returned {commit:?}, expected fenced")
    })?;
    producer.begin_transaction().await?;
    producer.send(ProducerRecord::new(&output, "k", b"from-successor".to_vec())).await?.await?;
    producer.commit_transaction().await?;
    let got = values(&read_at_least(kafka, env, &output, 1).await?);
    check(got == vec![Some(Bytes::from_static(b"from-successor"))], || format!("readers see {got:?}"))?;
    zombie.close().await;
    producer.close().await;
    successor.close().await?;
    let _ = silent.close().await;
    Ok(())
}

/// Compaction really runs: on a compacted topic with short segments, a superseded value is
/// removed, and a tombstone is removed too once `delete.retention.ms` has passed; the last
/// value of every live key stays.
async fn compaction(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let topic = env.name("table");
    let spec = NewTopic::new(&topic, 1)
        .replication(env.replication_factor)
        .compacted()
        .config("segment.ms", "100")
        .config("min.cleanable.dirty.ratio", "0.01")
        .config("delete.retention.ms", "100")
        .config("min.compaction.lag.ms", "0");
    kafka.admin()?.create_topic(&spec).await?;
    let producer = kafka.producer(ProducerConfig::idempotent(env.name("writer")))?;
    for (key, value) in [("k1", Some("a")), ("k2", Some("x")), ("k1", Some("b")), ("k2", None)] {
        let record = ProducerRecord {
            value: value.map(|v| Bytes::from(v.as_bytes().to_vec())),
            ..ProducerRecord::new(&topic, key, Vec::new())
        };
        producer.send(record).await?.await?;
    }
    // Later writes roll the segments (the active one is never cleaned).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let mut tick = 0u32;
    let compacted = loop {
        tick += 1;
        producer.send(ProducerRecord::new(&topic, "filler", tick.to_string().into_bytes())).await?.await?;
        let records = read_all(kafka, env, &topic).await?;
        let k1: Vec<Option<Bytes>> =
            records.iter().filter(|r| r.key.as_deref() == Some(b"k1")).map(|r| r.value.clone()).collect();
        let k2 = records.iter().filter(|r| r.key.as_deref() == Some(b"k2")).count();
        if k1 == vec![Some(Bytes::from_static(b"b"))] && k2 == 0 {
            break Some(records);
        }
        if tokio::time::Instant::now() >= deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    producer.close().await;
    let records = compacted.ok_or_else(|| {
        Failure::Verdict("within 90 s compaction did not leave k1=b alone and remove k2's tombstone".into())
    })?;
    let fillers = records.iter().filter(|r| r.key.as_deref() == Some(b"filler")).count();
    check(fillers >= 1, || "the filler's last value is gone".into())
}

/// A broker restart keeps what it promised: committed records, the group's offsets, a
/// transaction that was open (its producer commits it after the restart), and the producer
/// epoch (a successor's init still fences the old producer).
async fn broker_restart(kafka: &dyn Kafka, env: &Env) -> Result<(), Failure> {
    let restart = env.restart_broker.clone().ok_or_else(|| {
        Failure::Verdict("this runner cannot restart its broker (Env::restart_broker is not set)".into())
    })?;
    let topic = env.name("durable");
    let input = env.name("input");
    create(kafka, env, &topic, 1, false).await?;
    create(kafka, env, &input, 1, false).await?;
    let group = env.name("group");
    let tp = TopicPartition::new(&input, 0);
    let mut member = kafka.consumer(ConsumerConfig::member(env.name("member"), &group))?;
    member.subscribe(std::slice::from_ref(&input)).await?;
    await_assignment(member.as_mut(), env, |parts| parts.contains(&tp)).await?;
    member.commit_offsets(&[(tp.clone(), 3)]).await?;
    member.close().await?;
    let id = env.name("txn");
    let producer = kafka.producer(ProducerConfig::transactional(env.name("p"), &id))?;
    producer.init_transactions().await?;
    producer.begin_transaction().await?;
    producer.send(ProducerRecord::new(&topic, "c1", b"1".to_vec())).await?.await?;
    producer.commit_transaction().await?;
    producer.begin_transaction().await?;
    producer.send(ProducerRecord::new(&topic, "c2", b"2".to_vec())).await?.await?;
    restart().await;
    producer.commit_transaction().await?;
    let keys = keys_of(&read_at_least(kafka, env, &topic, 2).await?);
    check(keys == vec!["c1".to_owned(), "c2".to_owned()], || {
        format!("after the restart (and the open transaction's commit) readers see {keys:?}")
    })?;
    let mut reader = kafka.consumer(ConsumerConfig::member(env.name("reader"), &group))?;
    let committed = reader.committed(std::slice::from_ref(&tp)).await?;
    check(committed == vec![Some(3)], || format!("after the restart the group's offsets are {committed:?}"))?;
    reader.close().await?;
    let successor = kafka.producer(ProducerConfig::transactional(env.name("successor"), &id))?;
    successor.init_transactions().await?;
    let fenced = producer.begin_transaction().await.and(
        match producer.send(ProducerRecord::new(&topic, "late", b"3".to_vec())).await {
            Ok(delivery) => delivery.await.map(|_| ()),
            Err(e) => Err(e),
        },
    );
    let fenced = match fenced {
        Ok(()) => producer.commit_transaction().await,
        Err(e) => Err(e),
    };
    check(fenced.as_ref().is_err_and(KafkaError::is_fenced), || {
        format!("the old producer after its successor's init (across a restart): {fenced:?}, expected fenced")
    })?;
    producer.close().await;
    successor.close().await;
    let keys = keys_of(&read_at_least(kafka, env, &topic, 2).await?);
    check(keys == vec!["c1".to_owned(), "c2".to_owned()], || format!("finally readers see {keys:?}"))
}
