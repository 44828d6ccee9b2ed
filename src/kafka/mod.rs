//! The Kafka port: exactly what the engines need from Kafka, and nothing of any client library.
//!
//! Two adapters implement it: the production one on librdkafka (feature `rdkafka`,
//! `flechtwerk::kafka::rdkafka` module) and the simulated cluster of the `flechtwerk-sim`
//! crate (madsim). One conformance suite (`flechtwerk::testing::conformance`, feature `testing`)
//! runs the same client-level scenarios on both, so a behaviour the engine relies on is checked against a real broker and kept
//! honest in the simulator.
//!
//! Every consumer reads `read_committed`: aborted records are never returned and reads stop at
//! the last stable offset (LSO). There is no setting to change that, because exactly-once
//! depends on it.

mod error;
#[cfg(all(feature = "rdkafka-plaintext", not(madsim)))]
pub mod rdkafka;
// `pub` items here are the test kit's too (`testing` re-exports them).
#[cfg_attr(not(feature = "testing"), allow(unreachable_pub))]
pub(crate) mod read;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::BoxFuture;

pub use error::{KafkaError, KafkaErrorKind, KafkaResult};

use crate::wire::{Header, RawRecord};

/// One partition of one topic.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition number.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`/`partition`.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition { topic: topic.into(), partition }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.topic, self.partition)
    }
}

/// Where a manually assigned partition starts reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartOffset {
    /// The log start.
    Beginning,
    /// The current end (the LSO, under `read_committed`).
    End,
    /// An explicit offset.
    At(i64),
}

/// Where a group member starts on a partition with no committed offset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OffsetReset {
    /// From the log start (transformer input: nothing is skipped).
    #[default]
    Earliest,
    /// From the end (extractor membership: it never reads).
    Latest,
}

/// A change of a group member's assignment, delivered in order by [`Consumer::poll`].
///
/// Rebalancing is eager: a member first loses everything it held (`Revoked`), then gets its new
/// share (`Assigned`). Partitions arrive **paused**: the engine resumes each one once the task
/// that owns it is ready (producer fenced, state restored), so no record is fetched for a
/// partition nobody can process yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rebalance {
    /// These partitions are no longer ours. Records of them fetched earlier must not commit.
    Revoked {
        /// The partitions taken away.
        partitions: Vec<TopicPartition>,
    },
    /// These partitions are ours for `generation`, paused, positioned at the group's committed
    /// offsets (or per [`OffsetReset`]).
    Assigned {
        /// The partitions granted.
        partitions: Vec<TopicPartition>,
        /// The group generation of this assignment.
        generation: i32,
    },
}

/// What one [`Consumer::poll`] returned: rebalance events first (they happened before any of
/// the records were handed out), then records in fetch order (per partition, offset order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Polled {
    /// Assignment changes, in order.
    pub rebalances: Vec<Rebalance>,
    /// Committed records (never aborted ones, never beyond the LSO).
    pub records: Vec<RawRecord>,
}

/// Identity of a group member, for committing offsets inside a transaction.
///
/// Obtained from the member's [`Consumer::group_metadata`]; the producer sends it with the
/// offsets so the group coordinator can refuse a member of an older generation.
#[derive(Clone)]
pub struct GroupMetadata {
    /// Consumer group id.
    pub group_id: String,
    /// Generation of the member's current assignment.
    pub generation: i32,
    /// Member id assigned by the coordinator.
    pub member_id: String,
    /// Adapter-specific handle (librdkafka needs its own metadata object).
    pub native: Option<std::sync::Arc<dyn std::any::Any + Send + Sync>>,
}

impl fmt::Debug for GroupMetadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupMetadata")
            .field("group_id", &self.group_id)
            .field("generation", &self.generation)
            .field("member_id", &self.member_id)
            .finish_non_exhaustive()
    }
}

/// Settings of a consumer. Isolation is always `read_committed`.
#[derive(Clone, Debug)]
pub struct ConsumerConfig {
    /// Client id (shows up in broker logs and metrics).
    pub client_id: String,
    /// Consumer group to join on [`Consumer::subscribe`]; `None` for a group-less consumer that
    /// is only ever assigned manually.
    pub group_id: Option<String>,
    /// Start position without a committed offset.
    pub offset_reset: OffsetReset,
    /// How long the group waits for a silent member before evicting it.
    pub session_timeout: Duration,
    /// How long a member may go without polling before it is considered failed.
    pub max_poll_interval: Duration,
}

impl ConsumerConfig {
    /// A group-less consumer (config bootstrap, changelog restore, readers in tests).
    pub fn groupless(client_id: impl Into<String>) -> Self {
        ConsumerConfig {
            client_id: client_id.into(),
            group_id: None,
            offset_reset: OffsetReset::Earliest,
            session_timeout: Duration::from_secs(10),
            max_poll_interval: Duration::from_secs(300),
        }
    }

    /// A consumer that joins `group` when it subscribes.
    pub fn member(client_id: impl Into<String>, group: impl Into<String>) -> Self {
        ConsumerConfig { group_id: Some(group.into()), ..Self::groupless(client_id) }
    }
}

/// Compression of produced batches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    /// No compression.
    None,
    /// gzip.
    Gzip,
    /// Snappy.
    Snappy,
    /// LZ4.
    Lz4,
    /// Zstandard: the default; canonical JSON compresses about 13×.
    #[default]
    Zstd,
}

impl Compression {
    /// The Kafka configuration value (`compression.type`).
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// Settings of a producer.
#[derive(Clone, Debug)]
pub struct ProducerConfig {
    /// Client id.
    pub client_id: String,
    /// Transactional id (the fencing identity), or `None` for an idempotent, non-transactional
    /// producer.
    pub transactional_id: Option<String>,
    /// How long a transaction may stay open before the coordinator aborts it.
    pub transaction_timeout: Duration,
    /// Batch compression.
    pub compression: Compression,
}

impl ProducerConfig {
    /// A transactional producer.
    pub fn transactional(client_id: impl Into<String>, transactional_id: impl Into<String>) -> Self {
        ProducerConfig {
            client_id: client_id.into(),
            transactional_id: Some(transactional_id.into()),
            transaction_timeout: Duration::from_secs(60),
            compression: Compression::Zstd,
        }
    }

    /// An idempotent producer outside transactions (tests, tooling, at-least-once mode).
    pub fn idempotent(client_id: impl Into<String>) -> Self {
        ProducerConfig {
            client_id: client_id.into(),
            transactional_id: None,
            transaction_timeout: Duration::from_secs(60),
            compression: Compression::Zstd,
        }
    }
}

/// A record to produce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerRecord {
    /// Destination topic.
    pub topic: String,
    /// Explicit partition, or `None` for Kafka's default partitioner: murmur2 of the key bytes
    /// ([`murmur2`](crate::murmur2)), exactly as the Java client places keyed records.
    pub partition: Option<i32>,
    /// Key bytes.
    pub key: Option<Bytes>,
    /// Value bytes (`None`: a tombstone).
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<Header>,
    /// Timestamp in epoch milliseconds (`None`: the producer's clock).
    pub timestamp_ms: Option<i64>,
}

impl ProducerRecord {
    /// A keyed record with a value, partitioned by key.
    pub fn new(topic: impl Into<String>, key: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        ProducerRecord {
            topic: topic.into(),
            partition: None,
            key: Some(key.into()),
            value: Some(value.into()),
            headers: Vec::new(),
            timestamp_ms: None,
        }
    }

    /// Sends to an explicit partition instead of hashing the key.
    pub fn to_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }
}

/// Where a produced record landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivered {
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
}

/// Resolves once the broker has the record (or the send has failed). A transaction must await
/// every delivery of its records before it commits (EXT-13): a failed delivery aborts the
/// transaction instead of committing around a hole.
pub type DeliveryFuture = BoxFuture<'static, KafkaResult<Delivered>>;

/// A consumer: group member (after [`subscribe`](Consumer::subscribe)) or group-less (after
/// [`assign`](Consumer::assign)). Not shared between tasks.
#[async_trait]
pub trait Consumer: Send {
    /// Joins the configured group on `topics` (Range assignment, eager rebalancing). Assignment
    /// changes arrive as [`Rebalance`] events from [`poll`](Consumer::poll).
    async fn subscribe(&mut self, topics: &[String]) -> KafkaResult<()>;

    /// Assigns partitions manually (group-less), each from the given start.
    async fn assign(&mut self, partitions: &[(TopicPartition, StartOffset)]) -> KafkaResult<()>;

    /// Waits up to `timeout` for records or rebalance events, then returns what is available,
    /// at most `max_records` records. Returns early once anything is available; an empty result
    /// means nothing arrived, never "end of log".
    async fn poll(&mut self, max_records: usize, timeout: Duration) -> KafkaResult<Polled>;

    /// Stops fetching these (assigned) partitions until resumed.
    fn pause(&mut self, partitions: &[TopicPartition]) -> KafkaResult<()>;

    /// Resumes fetching these partitions.
    fn resume(&mut self, partitions: &[TopicPartition]) -> KafkaResult<()>;

    /// Moves the fetch position of an assigned partition.
    async fn seek(&mut self, partition: &TopicPartition, offset: i64) -> KafkaResult<()>;

    /// The offset of the next record the consumer will return for an assigned partition.
    async fn position(&mut self, partition: &TopicPartition) -> KafkaResult<i64>;

    /// Commits offsets for the group outside any transaction (at-least-once processing only;
    /// exactly-once commits offsets through [`Producer::send_offsets_to_transaction`]).
    async fn commit_offsets(&mut self, offsets: &[(TopicPartition, i64)]) -> KafkaResult<()> {
        let _ = offsets;
        Err(KafkaError::new(KafkaErrorKind::Other, "commit_offsets", "not supported by this adapter"))
    }

    /// The group's committed offsets (`None`: nothing committed). Needs a group id.
    async fn committed(&mut self, partitions: &[TopicPartition]) -> KafkaResult<Vec<Option<i64>>>;

    /// The end of a partition as this consumer sees it: the last stable offset.
    async fn end_offset(&mut self, partition: &TopicPartition) -> KafkaResult<i64>;

    /// The high watermark of a partition: the offset after its last record, whether that
    /// record's transaction is decided or not (`ListOffsets(latest)` under
    /// `read_uncommitted`). A `read_committed` position reaches it only once every transaction
    /// with records below it has committed or aborted.
    async fn log_end_offset(&mut self, partition: &TopicPartition) -> KafkaResult<i64>;

    /// The partition count of `topic`, `None` when the topic does not exist. Fresh metadata: a
    /// topic created a moment ago is visible.
    async fn partition_count(&mut self, topic: &str) -> KafkaResult<Option<u32>>;

    /// The member's identity for transactional offset commits (`None` outside a group, or before
    /// the first assignment).
    fn group_metadata(&self) -> Option<GroupMetadata>;

    /// Leaves the group (if any) and releases the consumer.
    async fn close(&mut self) -> KafkaResult<()>;
}

/// A producer. Transactional when configured with a transactional id: then every send happens
/// inside `begin_transaction` … `commit_transaction` / `abort_transaction`, one transaction at a
/// time.
#[async_trait]
pub trait Producer: Send + Sync {
    /// The transactional id, if any.
    fn transactional_id(&self) -> Option<&str>;

    /// Registers the transactional id with the coordinator: bumps its epoch, which fences every
    /// earlier producer with this id (their later sends and commits fail with
    /// [`KafkaErrorKind::Fenced`]) and aborts the transaction it left open.
    async fn init_transactions(&self) -> KafkaResult<()>;

    /// Starts a transaction.
    async fn begin_transaction(&self) -> KafkaResult<()>;

    /// Hands a record to the producer; the returned future resolves with its delivery.
    async fn send(&self, record: ProducerRecord) -> KafkaResult<DeliveryFuture>;

    /// Adds consumer offsets to the open transaction: they become the group's committed offsets
    /// exactly when the transaction commits.
    async fn send_offsets_to_transaction(
        &self,
        offsets: &[(TopicPartition, i64)],
        group: &GroupMetadata,
    ) -> KafkaResult<()>;

    /// Commits the open transaction (after flushing its records).
    async fn commit_transaction(&self) -> KafkaResult<()>;

    /// Aborts the open transaction: none of its records or offsets ever become visible to a
    /// `read_committed` reader.
    async fn abort_transaction(&self) -> KafkaResult<()>;

    /// Flushes outstanding non-transactional sends.
    async fn flush(&self) -> KafkaResult<()>;

    /// Releases the producer. An open transaction is left to the coordinator (the next
    /// `init_transactions` of this id, or the transaction timeout, aborts it).
    async fn close(&self);
}

/// Topic to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewTopic {
    /// Name.
    pub name: String,
    /// Partition count.
    pub partitions: u32,
    /// Replication factor; `-1` asks for the broker default.
    pub replication_factor: i16,
    /// Topic configs, e.g. `cleanup.policy=compact`.
    pub configs: BTreeMap<String, String>,
}

impl NewTopic {
    /// A topic with `partitions` partitions and the broker's default replication.
    pub fn new(name: impl Into<String>, partitions: u32) -> Self {
        NewTopic { name: name.into(), partitions, replication_factor: -1, configs: BTreeMap::new() }
    }

    /// Sets `cleanup.policy=compact`.
    pub fn compacted(mut self) -> Self {
        self.configs.insert("cleanup.policy".into(), "compact".into());
        self
    }

    /// Sets a topic config (`retention.ms`, `max.message.bytes`, ...).
    pub fn config(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.insert(name.into(), value.into());
        self
    }

    /// Sets the replication factor.
    pub fn replication(mut self, factor: i16) -> Self {
        self.replication_factor = factor;
        self
    }
}

/// Outcome of a topic creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopicCreation {
    /// The topic was created.
    Created,
    /// It existed already (success: an operator may pre-create it).
    AlreadyExists,
}

/// Topic administration.
#[async_trait]
pub trait Admin: Send + Sync {
    /// Creates a topic; an existing one is success ([`TopicCreation::AlreadyExists`]).
    async fn create_topic(&self, topic: &NewTopic) -> KafkaResult<TopicCreation>;

    /// The partition count of `topic`, `None` when it does not exist.
    async fn partition_count(&self, topic: &str) -> KafkaResult<Option<u32>>;
}

/// A Kafka cluster: the factory of clients. The engine holds one and builds every client from
/// it, which is how a simulation swaps the whole of Kafka out.
pub trait Kafka: Send + Sync {
    /// A new consumer.
    fn consumer(&self, config: ConsumerConfig) -> KafkaResult<Box<dyn Consumer>>;

    /// A new producer.
    fn producer(&self, config: ProducerConfig) -> KafkaResult<Box<dyn Producer>>;

    /// An admin client.
    fn admin(&self) -> KafkaResult<Box<dyn Admin>>;
}
