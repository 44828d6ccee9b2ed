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
mod gate;
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
pub use gate::{RevocationGate, RevocationHold};

use crate::wire::{Header, RawRecord, RecordRef};

/// One partition of one topic.
///
/// ```
/// use flechtwerk::kafka::TopicPartition;
///
/// let tp = TopicPartition::new("clicks", 3);
/// assert_eq!(tp.to_string(), "clicks/3");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition number.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`/`partition`.
    ///
    /// ```
    /// # use flechtwerk::kafka::TopicPartition;
    /// assert_eq!(TopicPartition::new("clicks", 0).partition, 0);
    /// ```
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
///
/// ```
/// use flechtwerk::kafka::{StartOffset, TopicPartition};
///
/// let from_the_start = vec![(TopicPartition::new("plans", 0), StartOffset::Beginning)];
/// // consumer.assign(&from_the_start).await?
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartOffset {
    /// The log start.
    Beginning,
    /// The current end (the LSO, under `read_committed`).
    End,
    /// An explicit offset.
    At(i64),
}

/// Which end of a partition [`Consumer::extents`] looks up.
///
/// ```
/// use flechtwerk::kafka::LogEnd;
///
/// // A read_committed restore reads to the last stable offset.
/// assert_ne!(LogEnd::Stable, LogEnd::HighWatermark);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogEnd {
    /// The last stable offset (as [`Consumer::end_offset`]): in front of the first record of a
    /// transaction still open.
    Stable,
    /// The high watermark (as [`Consumer::log_end_offset`]): after the last record, decided or
    /// not.
    HighWatermark,
}

/// Where a partition's log starts and where it ends (the end [`LogEnd`] named): the records a
/// read from the beginning meets, `start..end`. Empty when `start >= end`.
///
/// ```
/// use flechtwerk::kafka::Extent;
///
/// assert!(Extent { start: 7, end: 7 }.is_empty());
/// assert!(!Extent { start: 0, end: 1 }.is_empty());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// The log start offset (the low watermark).
    pub start: i64,
    /// The end offset.
    pub end: i64,
}

impl Extent {
    /// Whether a read from the start to the end meets no offset at all.
    ///
    /// ```
    /// use flechtwerk::kafka::Extent;
    ///
    /// // A compacted-away or never-written partition: nothing to restore.
    /// assert!(Extent { start: 42, end: 42 }.is_empty());
    /// assert!(!Extent { start: 41, end: 42 }.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.start >= self.end
    }
}

/// Where a group member starts on a partition with no committed offset.
///
/// ```
/// use flechtwerk::kafka::{ConsumerConfig, OffsetReset};
///
/// let config = ConsumerConfig { offset_reset: OffsetReset::Latest, ..ConsumerConfig::member("pod-0", "tail") };
/// ```
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
///
/// ```
/// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, Rebalance};
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
/// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
/// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
/// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
/// # for user in ["ada", "bob"] {
/// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
/// # }
/// let mut consumer = kafka.consumer(ConsumerConfig::member("pod-0", "app"))?;
/// consumer.subscribe(&["clicks".to_owned()]).await?;
/// let assigned = loop {
///     let polled = consumer.poll(100, Duration::from_millis(100)).await?;
///     if let Some(Rebalance::Assigned { partitions, .. }) = polled.rebalances.into_iter().next() {
///         break partitions;
///     }
/// };
/// assert_eq!(assigned.len(), 1); // paused until resumed
/// consumer.resume(&assigned)?;
/// # Ok(())
/// # }
/// ```
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
///
/// ```
/// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, StartOffset, TopicPartition};
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
/// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
/// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
/// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
/// # for user in ["ada", "bob"] {
/// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
/// # }
/// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
/// let clicks = TopicPartition::new("clicks", 0);
/// consumer.assign(&[(clicks.clone(), StartOffset::Beginning)]).await?;
/// let polled = consumer.poll(100, Duration::from_secs(1)).await?;
/// assert!(polled.rebalances.is_empty()); // group-less: no rebalances
/// assert_eq!(polled.records[0].key.as_deref(), Some(&b"ada"[..]));
/// # Ok(())
/// # }
/// ```
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
///
/// ```
/// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, Rebalance};
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
/// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
/// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
/// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
/// # for user in ["ada", "bob"] {
/// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
/// # }
/// let mut consumer = kafka.consumer(ConsumerConfig::member("pod-0", "app"))?;
/// assert!(consumer.group_metadata().is_none()); // not a member yet
/// consumer.subscribe(&["clicks".to_owned()]).await?;
/// while consumer.poll(100, Duration::from_millis(100)).await?.rebalances.is_empty() {}
/// let metadata = consumer.group_metadata().expect("assigned");
/// assert_eq!(metadata.group_id, "app");
/// # Ok(())
/// # }
/// ```
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
///
/// ```
/// use flechtwerk::kafka::{ConsumerConfig, OffsetReset};
///
/// let config = ConsumerConfig::member("reader-0", "readers");
/// assert_eq!(config.group_id.as_deref(), Some("readers"));
/// assert_eq!(config.offset_reset, OffsetReset::Earliest);
/// ```
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
    /// Bounds on what the client fetches and buffers ahead of polls; `None`: the adapter's
    /// defaults, made for throughput (librdkafka buffers up to 64 MiB ahead of the application).
    pub fetch_limits: Option<FetchLimits>,
}

/// Bounds on what a consumer fetches and buffers ahead of the application: for a one-shot read
/// whose memory matters more than its last few percent of throughput (the config bootstrap:
/// every record it reads is kept, so whatever the client buffers besides is pure overhead), and
/// for a transformer's member consumer, which needs a few batches ahead, not the whole backlog
/// (see [`FetchLimits::stage`]).
///
/// A bound is a target, not a hard limit: Kafka always returns at least one whole record batch
/// per partition, so a batch larger than a bound still arrives. The simulated cluster ignores
/// these bounds (they change memory and pacing, never which records a poll returns).
///
/// ```
/// use flechtwerk::kafka::{ConsumerConfig, FetchLimits};
/// let limits = FetchLimits { buffered_records: 1_000, ..FetchLimits::BOOTSTRAP };
/// let config = ConsumerConfig::groupless("bootstrap").with_fetch_limits(limits);
/// assert_eq!(config.fetch_limits.map(|l| l.buffered_records), Some(1_000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchLimits {
    /// Most bytes one fetch response carries, all partitions together (librdkafka
    /// `fetch.max.bytes`).
    pub response_bytes: usize,
    /// Most bytes of one partition in one fetch response (`max.partition.fetch.bytes`).
    pub partition_bytes: usize,
    /// Most bytes of fetched records the client holds ahead of polls
    /// (`queued.max.messages.kbytes`, rounded up to whole KiB).
    pub buffered_bytes: usize,
    /// Most records the client holds ahead of polls (`queued.min.messages`: librdkafka keeps
    /// fetching until either this or `buffered_bytes` is reached).
    pub buffered_records: usize,
}

impl FetchLimits {
    /// The bounds of a one-shot read to the end, the config bootstrap's and a task's restore
    /// of its changelog: 64 KiB per partition per response (1 MB per response,
    /// librdkafka's floor), and at most 2 MiB or 5 000 records buffered. The fetch sizes count
    /// compressed bytes: 64 KiB of zstd-compressed config records is about 1 300 records
    /// decompressed. A fetch to localhost takes about a millisecond, so a few thousand records
    /// ahead keep the reader busy; librdkafka's defaults (1 MiB per partition, 100 000 records
    /// or 64 MiB ahead) held most of a 100 000-entry topic at once.
    pub const BOOTSTRAP: FetchLimits = FetchLimits {
        response_bytes: 1_000_000,
        partition_bytes: 64 << 10,
        buffered_bytes: 2 << 20,
        buffered_records: 5_000,
    };

    /// A transformer's member consumer, polled `max_poll_records` at a time: 64 KiB per
    /// partition per response (compressed; with zstd about 1 000 records of ~130 bytes) and
    /// at most 2 MiB or two polls' worth of records buffered per partition. At librdkafka's
    /// defaults (1 MiB per partition per response, 100 000 records or 64 MiB ahead) the
    /// consumer fetched a whole backlog at once: a stage reading 100 000 records of ~130 bytes
    /// peaked at 76 MiB of RSS, 42 MiB with these bounds, at the same records per second
    /// (docs/performance.md, issue #14).
    ///
    /// ```
    /// use flechtwerk::kafka::FetchLimits;
    /// assert_eq!(FetchLimits::stage(500).buffered_records, 1_000);
    /// assert_eq!(FetchLimits::stage(1).buffered_records, 100);
    /// ```
    pub fn stage(max_poll_records: usize) -> FetchLimits {
        FetchLimits {
            response_bytes: 1_000_000,
            partition_bytes: 64 << 10,
            buffered_bytes: 2 << 20,
            buffered_records: max_poll_records.saturating_mul(2).max(100),
        }
    }
}

/// The port's default group session timeout, a consumer's unless set: the Python
/// implementation's (the engine's default too, `engine::bounds`).
pub(crate) const SESSION_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);

/// The default time a member may go without polling before the group considers it failed:
/// Kafka's (`max.poll.interval.ms`).
pub(crate) const MAX_POLL_INTERVAL_DEFAULT: Duration = Duration::from_secs(300);

/// The default transaction timeout of a producer: Kafka's and librdkafka's
/// (`transaction.timeout.ms`); the coordinator aborts a transaction left open longer.
pub(crate) const TRANSACTION_TIMEOUT_DEFAULT: Duration = Duration::from_secs(60);

impl ConsumerConfig {
    /// A group-less consumer (config bootstrap, changelog restore, readers in tests).
    ///
    /// ```
    /// # use flechtwerk::kafka::ConsumerConfig;
    /// assert_eq!(ConsumerConfig::groupless("checker").group_id, None);
    /// ```
    pub fn groupless(client_id: impl Into<String>) -> Self {
        ConsumerConfig {
            client_id: client_id.into(),
            group_id: None,
            offset_reset: OffsetReset::Earliest,
            session_timeout: SESSION_TIMEOUT_DEFAULT,
            max_poll_interval: MAX_POLL_INTERVAL_DEFAULT,
            fetch_limits: None,
        }
    }

    /// This consumer with bounded fetching (see [`FetchLimits`]).
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, FetchLimits};
    /// let config = ConsumerConfig::groupless("bootstrap").with_fetch_limits(FetchLimits::BOOTSTRAP);
    /// assert_eq!(config.fetch_limits, Some(FetchLimits::BOOTSTRAP));
    /// ```
    pub fn with_fetch_limits(mut self, limits: FetchLimits) -> Self {
        self.fetch_limits = Some(limits);
        self
    }

    /// A consumer that joins `group` when it subscribes.
    ///
    /// ```
    /// # use flechtwerk::kafka::ConsumerConfig;
    /// assert_eq!(ConsumerConfig::member("pod-0", "app").client_id, "pod-0");
    /// ```
    pub fn member(client_id: impl Into<String>, group: impl Into<String>) -> Self {
        ConsumerConfig { group_id: Some(group.into()), ..Self::groupless(client_id) }
    }
}

/// Compression of produced batches.
///
/// ```
/// use flechtwerk::kafka::Compression;
///
/// assert_eq!(Compression::default(), Compression::Zstd);
/// ```
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
    ///
    /// ```
    /// # use flechtwerk::kafka::Compression;
    /// assert_eq!(Compression::Lz4.as_str(), "lz4");
    /// ```
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
///
/// ```
/// use std::time::Duration;
/// use flechtwerk::kafka::{Compression, ProducerConfig};
///
/// let config = ProducerConfig {
///     transaction_timeout: Duration::from_secs(30),
///     compression: Compression::None,
///     ..ProducerConfig::transactional("pod-0", "app-0")
/// };
/// assert_eq!(config.transactional_id.as_deref(), Some("app-0"));
/// ```
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
    ///
    /// ```
    /// # use flechtwerk::kafka::ProducerConfig;
    /// let config = ProducerConfig::transactional("pod-0", "app-0");
    /// assert_eq!(config.transactional_id.as_deref(), Some("app-0"));
    /// ```
    pub fn transactional(client_id: impl Into<String>, transactional_id: impl Into<String>) -> Self {
        ProducerConfig {
            client_id: client_id.into(),
            transactional_id: Some(transactional_id.into()),
            transaction_timeout: TRANSACTION_TIMEOUT_DEFAULT,
            compression: Compression::Zstd,
        }
    }

    /// An idempotent producer outside transactions (tests, tooling, at-least-once mode).
    ///
    /// ```
    /// # use flechtwerk::kafka::ProducerConfig;
    /// assert_eq!(ProducerConfig::idempotent("feeder").transactional_id, None);
    /// ```
    pub fn idempotent(client_id: impl Into<String>) -> Self {
        ProducerConfig {
            client_id: client_id.into(),
            transactional_id: None,
            transaction_timeout: TRANSACTION_TIMEOUT_DEFAULT,
            compression: Compression::Zstd,
        }
    }
}

/// A record to produce.
///
/// ```
/// use flechtwerk::kafka::ProducerRecord;
///
/// let record = ProducerRecord::new("clicks", "ada", r#"{"page":"/"}"#);
/// assert_eq!(record.partition, None); // placed by the key's murmur2 hash
/// let tombstone = ProducerRecord { value: None, ..ProducerRecord::new("plans", "ada", "") };
/// assert!(tombstone.value.is_none());
/// ```
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
    ///
    /// ```
    /// # use flechtwerk::kafka::ProducerRecord;
    /// let record = ProducerRecord::new("clicks", "ada", "{}");
    /// assert_eq!(record.key.as_deref(), Some(&b"ada"[..]));
    /// ```
    ///
    /// Key and value take owned bytes as they are and copy borrowed ones, so a key built at
    /// run time works as well as a literal:
    ///
    /// ```
    /// # use flechtwerk::kafka::ProducerRecord;
    /// let account = format!("account-{}", 7);
    /// let record = ProducerRecord::new("totals", account.as_str(), br#"{"total":3}"#);
    /// assert_eq!(record.key.as_deref(), Some(&b"account-7"[..]));
    /// ```
    pub fn new(topic: impl Into<String>, key: impl IntoRecordBytes, value: impl IntoRecordBytes) -> Self {
        ProducerRecord {
            topic: topic.into(),
            partition: None,
            key: Some(key.into_record_bytes()),
            value: Some(value.into_record_bytes()),
            headers: Vec::new(),
            timestamp_ms: None,
        }
    }

    /// A tombstone: a keyed record without a value, which deletes the key from a compacted
    /// topic (a config topic also reads an empty value and exactly `{}` as deletes, CFG-31).
    ///
    /// ```
    /// # use flechtwerk::kafka::ProducerRecord;
    /// let delete = ProducerRecord::tombstone("endpoints", "eu-1");
    /// assert_eq!((delete.key.as_deref(), delete.value), (Some(&b"eu-1"[..]), None));
    /// ```
    pub fn tombstone(topic: impl Into<String>, key: impl IntoRecordBytes) -> Self {
        ProducerRecord { value: None, ..ProducerRecord::new(topic, key, Bytes::new()) }
    }

    /// Sends to an explicit partition instead of hashing the key.
    ///
    /// ```
    /// # use flechtwerk::kafka::ProducerRecord;
    /// assert_eq!(ProducerRecord::new("clicks", "ada", "{}").to_partition(2).partition, Some(2));
    /// ```
    pub fn to_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }
}

/// What a record's key or value can be made of: owned bytes (`Bytes`, `Vec<u8>`, `String`,
/// `Box<[u8]>`) are taken as they are, borrowed ones (`&str`, `&[u8]`, a byte-string literal)
/// copied.
///
/// ```
/// use flechtwerk::kafka::IntoRecordBytes;
/// let key = String::from("ada");
/// assert_eq!(key.as_str().into_record_bytes(), "ada".into_record_bytes());
/// assert_eq!(b"{}".into_record_bytes(), bytes::Bytes::from_static(b"{}"));
/// ```
pub trait IntoRecordBytes {
    /// The bytes.
    ///
    /// ```
    /// use flechtwerk::kafka::IntoRecordBytes;
    /// assert_eq!(vec![1u8, 2].into_record_bytes().len(), 2);
    /// ```
    fn into_record_bytes(self) -> Bytes;
}

macro_rules! owned_record_bytes {
    ($($owned:ty),*) => {$(
        impl IntoRecordBytes for $owned {
            fn into_record_bytes(self) -> Bytes {
                Bytes::from(self)
            }
        }
    )*};
}
owned_record_bytes!(Bytes, Vec<u8>, String, Box<[u8]>);

/// Borrowed bytes (`&str`, `&String`, `&[u8]`, `&Vec<u8>`, a byte-string literal, `&Bytes`) are
/// copied.
impl<T: AsRef<[u8]> + ?Sized> IntoRecordBytes for &T {
    fn into_record_bytes(self) -> Bytes {
        Bytes::copy_from_slice(self.as_ref())
    }
}

/// Where a produced record landed.
///
/// ```
/// # use std::sync::Arc;
/// use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
/// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
/// kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
/// let producer = kafka.producer(ProducerConfig::idempotent("feeder"))?;
/// let delivered = producer.send(ProducerRecord::new("clicks", "ada", "{}")).await?.await?;
/// assert_eq!((delivered.partition, delivered.offset), (0, 0));
/// # Ok(())
/// # }
/// ```
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
///
/// ```
/// # use std::sync::Arc;
/// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, StartOffset, TopicPartition};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
/// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
/// kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
/// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
/// consumer.assign(&[(TopicPartition::new("clicks", 0), StartOffset::Beginning)]).await?;
/// # Ok(())
/// # }
/// ```
/// Reading a topic to its end is what `testing::read_topic` (feature `testing`) does.
#[async_trait]
pub trait Consumer: Send {
    /// Joins the configured group on `topics` (Range assignment, eager rebalancing). Assignment
    /// changes arrive as [`Rebalance`] events from [`poll`](Consumer::poll).
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, Rebalance};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let mut consumer = kafka.consumer(ConsumerConfig::member("pod-0", "app"))?;
    /// consumer.subscribe(&["clicks".to_owned()]).await?;
    /// // The assignment arrives through poll, as a Rebalance event.
    /// let polled = loop {
    ///     let polled = consumer.poll(100, Duration::from_millis(100)).await?;
    ///     if !polled.rebalances.is_empty() {
    ///         break polled;
    ///     }
    /// };
    /// assert!(matches!(polled.rebalances[0], Rebalance::Assigned { .. }));
    /// # Ok(())
    /// # }
    /// ```
    async fn subscribe(&mut self, topics: &[String]) -> KafkaResult<()>;

    /// Assigns partitions manually (group-less), each from the given start.
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, StartOffset, TopicPartition};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
    /// let clicks = TopicPartition::new("clicks", 0);
    /// consumer.assign(&[(clicks.clone(), StartOffset::At(1))]).await?; // skip the first record
    /// assert_eq!(consumer.position(&clicks).await?, 1);
    /// # Ok(())
    /// # }
    /// ```
    async fn assign(&mut self, partitions: &[(TopicPartition, StartOffset)]) -> KafkaResult<()>;

    /// Waits up to `timeout` for records or rebalance events, then returns what is available,
    /// at most `max_records` records. Returns early once anything is available; an empty result
    /// means nothing arrived, never "end of log".
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, StartOffset, TopicPartition};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
    /// let clicks = TopicPartition::new("clicks", 0);
    /// consumer.assign(&[(clicks.clone(), StartOffset::Beginning)]).await?;
    /// let mut keys = Vec::new();
    /// while keys.len() < 2 {
    ///     for record in consumer.poll(100, Duration::from_secs(1)).await?.records {
    ///         keys.push(record.key.unwrap());
    ///     }
    /// }
    /// assert_eq!(keys, ["ada", "bob"]);
    /// # Ok(())
    /// # }
    /// ```
    async fn poll(&mut self, max_records: usize, timeout: Duration) -> KafkaResult<Polled>;

    /// [`poll`](Consumer::poll) for a reader that looks at each record once: the records (the
    /// same ones `poll` would return) are handed to `on_records` by reference, borrowed from the
    /// client's own buffers, instead of being copied into owned [`RawRecord`]s first; the
    /// rebalance events are returned. Headers are not handed (see [`RecordRef`]).
    ///
    /// The provided method polls and lends the owned records; the rdkafka adapter lends
    /// librdkafka's messages themselves, so the config bootstrap copies each key and value
    /// once, into its store. The rdkafka adapter also takes the next records out of librdkafka
    /// while `on_records` runs (a prefetch on a blocking thread, so the client's work and the
    /// reader's overlap); nothing of it is visible: the next call of any method sees the
    /// consumer as if the records had not been taken ahead (positions, seeks and pauses
    /// included).
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, StartOffset, TopicPartition};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
    /// let clicks = TopicPartition::new("clicks", 0);
    /// consumer.assign(&[(clicks.clone(), StartOffset::Beginning)]).await?;
    /// let mut bytes = 0;
    /// while consumer.position(&clicks).await? < 2 {
    ///     consumer.poll_borrowed(100, Duration::from_secs(1), &mut |records| {
    ///         bytes += records.iter().map(|r| r.key.map_or(0, <[u8]>::len)).sum::<usize>();
    ///     }).await?;
    /// }
    /// assert_eq!(bytes, 6); // "ada" and "bob", never copied out of the consumer
    /// # Ok(())
    /// # }
    /// ```
    async fn poll_borrowed(
        &mut self,
        max_records: usize,
        timeout: Duration,
        on_records: &mut (dyn for<'s, 'r> FnMut(&'s [RecordRef<'r>]) + Send),
    ) -> KafkaResult<Vec<Rebalance>> {
        let polled = self.poll(max_records, timeout).await?;
        let records: Vec<RecordRef<'_>> = polled.records.iter().map(RawRecord::borrowed).collect();
        if !records.is_empty() {
            on_records(&records);
        }
        Ok(polled.rebalances)
    }

    /// Stops fetching these (assigned) partitions until resumed.
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, StartOffset, TopicPartition};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
    /// let clicks = TopicPartition::new("clicks", 0);
    /// consumer.assign(&[(clicks.clone(), StartOffset::Beginning)]).await?;
    /// consumer.pause(&[clicks.clone()])?;
    /// assert!(consumer.poll(100, Duration::from_millis(50)).await?.records.is_empty());
    /// consumer.resume(&[clicks])?;
    /// # Ok(())
    /// # }
    /// ```
    fn pause(&mut self, partitions: &[TopicPartition]) -> KafkaResult<()>;

    /// Resumes fetching these partitions.
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, StartOffset, TopicPartition};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
    /// let clicks = TopicPartition::new("clicks", 0);
    /// consumer.assign(&[(clicks.clone(), StartOffset::Beginning)]).await?;
    /// consumer.pause(&[clicks.clone()])?;
    /// consumer.resume(&[clicks])?;
    /// assert_eq!(consumer.poll(100, Duration::from_secs(1)).await?.records[0].offset, 0);
    /// # Ok(())
    /// # }
    /// ```
    fn resume(&mut self, partitions: &[TopicPartition]) -> KafkaResult<()>;

    /// Moves the fetch position of an assigned partition.
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, StartOffset, TopicPartition};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
    /// let clicks = TopicPartition::new("clicks", 0);
    /// consumer.assign(&[(clicks.clone(), StartOffset::Beginning)]).await?;
    /// consumer.seek(&clicks, 1).await?;
    /// assert_eq!(consumer.poll(100, Duration::from_secs(1)).await?.records[0].key.as_deref(), Some(&b"bob"[..]));
    /// # Ok(())
    /// # }
    /// ```
    async fn seek(&mut self, partition: &TopicPartition, offset: i64) -> KafkaResult<()>;

    /// The offset of the next record the consumer will return for an assigned partition.
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, StartOffset, TopicPartition};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
    /// let clicks = TopicPartition::new("clicks", 0);
    /// consumer.assign(&[(clicks.clone(), StartOffset::Beginning)]).await?;
    /// assert_eq!(consumer.position(&clicks).await?, 0);
    /// let read = consumer.poll(1, Duration::from_secs(1)).await?.records.len();
    /// assert_eq!(consumer.position(&clicks).await?, read as i64);
    /// # Ok(())
    /// # }
    /// ```
    async fn position(&mut self, partition: &TopicPartition) -> KafkaResult<i64>;

    /// Commits offsets for the group outside any transaction (at-least-once processing only;
    /// exactly-once commits offsets through [`Producer::send_offsets_to_transaction`]).
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, StartOffset, TopicPartition};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let mut consumer = kafka.consumer(ConsumerConfig::member("pod-0", "app"))?;
    /// let clicks = TopicPartition::new("clicks", 0);
    /// consumer.commit_offsets(&[(clicks.clone(), 2)]).await?; // at-least-once: both clicks done
    /// assert_eq!(consumer.committed(&[clicks]).await?, [Some(2)]);
    /// # Ok(())
    /// # }
    /// ```
    async fn commit_offsets(&mut self, offsets: &[(TopicPartition, i64)]) -> KafkaResult<()> {
        let _ = offsets;
        Err(KafkaError::new(KafkaErrorKind::Other, "commit_offsets", "not supported by this adapter"))
    }

    /// The group's committed offsets (`None`: nothing committed). Needs a group id.
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, StartOffset, TopicPartition};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let mut consumer = kafka.consumer(ConsumerConfig::member("pod-0", "app"))?;
    /// assert_eq!(consumer.committed(&[TopicPartition::new("clicks", 0)]).await?, [None]);
    /// # Ok(())
    /// # }
    /// ```
    async fn committed(&mut self, partitions: &[TopicPartition]) -> KafkaResult<Vec<Option<i64>>>;

    /// The end of a partition as this consumer sees it: the last stable offset.
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, StartOffset, TopicPartition};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
    /// let clicks = TopicPartition::new("clicks", 0);
    /// consumer.assign(&[(clicks.clone(), StartOffset::Beginning)]).await?;
    /// assert_eq!(consumer.end_offset(&clicks).await?, 2); // two committed records
    /// # Ok(())
    /// # }
    /// ```
    async fn end_offset(&mut self, partition: &TopicPartition) -> KafkaResult<i64>;

    /// The high watermark of a partition: the offset after its last record, whether that
    /// record's transaction is decided or not (`ListOffsets(latest)` under
    /// `read_uncommitted`). A `read_committed` position reaches it only once every transaction
    /// with records below it has committed or aborted.
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, StartOffset, TopicPartition};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
    /// let clicks = TopicPartition::new("clicks", 0);
    /// consumer.assign(&[(clicks.clone(), StartOffset::Beginning)]).await?;
    /// // A transaction left open: its record raises the high watermark, not the stable end.
    /// let producer = kafka.producer(ProducerConfig::transactional("pod-0", "app-0"))?;
    /// producer.init_transactions().await?;
    /// producer.begin_transaction().await?;
    /// producer.send(ProducerRecord::new("clicks", "carol", "{}")).await?.await?;
    /// assert_eq!(consumer.log_end_offset(&clicks).await?, 3);
    /// assert_eq!(consumer.end_offset(&clicks).await?, 2);
    /// producer.abort_transaction().await?;
    /// # Ok(())
    /// # }
    /// ```
    async fn log_end_offset(&mut self, partition: &TopicPartition) -> KafkaResult<i64>;

    /// The [`Extent`] of each of `partitions`, in their order: the log start offset and the
    /// end `end` names, looked up together (one `ListOffsets` per broker and kind, not one per
    /// partition). The ends are those of this instant: a caller that needs the end after some
    /// event (a producer's fence) looks it up after that event.
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Extent, Kafka, LogEnd, NewTopic, ProducerConfig, ProducerRecord, TopicPartition};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = flechtwerk_sim::cluster::LocalCluster::new();
    /// kafka.admin()?.create_topic(&NewTopic::new("clicks", 2)).await?;
    /// let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// feeder.send(ProducerRecord::new("clicks", "ada", "{}").to_partition(1)).await?.await?;
    /// // A transaction left open on partition 1: it raises the high watermark only.
    /// let producer = kafka.producer(ProducerConfig::transactional("pod-0", "app-1"))?;
    /// producer.init_transactions().await?;
    /// producer.begin_transaction().await?;
    /// producer.send(ProducerRecord::new("clicks", "bob", "{}").to_partition(1)).await?.await?;
    /// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
    /// let partitions = [TopicPartition::new("clicks", 0), TopicPartition::new("clicks", 1)];
    /// let stable = consumer.extents(&partitions, LogEnd::Stable).await?;
    /// assert_eq!(stable, [Extent { start: 0, end: 0 }, Extent { start: 0, end: 1 }]);
    /// let high = consumer.extents(&partitions, LogEnd::HighWatermark).await?;
    /// assert_eq!(high[1], Extent { start: 0, end: 2 });
    /// # producer.abort_transaction().await?;
    /// # Ok(())
    /// # }
    /// ```
    async fn extents(&mut self, partitions: &[TopicPartition], end: LogEnd) -> KafkaResult<Vec<Extent>>;

    /// The partition count of `topic`, `None` when the topic does not exist. Fresh metadata: a
    /// topic created a moment ago is visible.
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, StartOffset, TopicPartition};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
    /// assert_eq!(consumer.partition_count("clicks").await?, Some(1));
    /// assert_eq!(consumer.partition_count("nope").await?, None);
    /// # Ok(())
    /// # }
    /// ```
    async fn partition_count(&mut self, topic: &str) -> KafkaResult<Option<u32>>;

    /// The member's identity for transactional offset commits (`None` outside a group, before
    /// the first assignment, and once the member is known to be evicted: never a generation
    /// below 0 or an empty member id, which the group coordinator would take without checking
    /// membership).
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, StartOffset, TopicPartition};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
    /// assert!(consumer.group_metadata().is_none()); // no group, no transactional offset commits
    /// # Ok(())
    /// # }
    /// ```
    fn group_metadata(&self) -> Option<GroupMetadata>;

    /// Makes this member's revocations wait while `gate` is held: it gives up its partitions
    /// (and rejoins the group) only once no hold is out (TRX-33). The engine holds the gate for
    /// each commit, so a rebalance cannot move the group to its next generation under a batch
    /// whose offsets carry the current one. A consumer that never gets a gate (or an adapter
    /// that ignores it: the default) revokes at once.
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, RevocationGate};
    /// # use std::sync::Arc;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// let mut consumer = kafka.consumer(ConsumerConfig::member("pod-0", "app"))?;
    /// let gate = RevocationGate::default();
    /// consumer.hold_revocations(gate.clone());
    /// let commit = gate.hold(); // a revocation the next poll serves waits ...
    /// drop(commit); // ... until the commit finished
    /// # Ok(())
    /// # }
    /// ```
    fn hold_revocations(&mut self, gate: RevocationGate) {
        let _ = gate;
    }

    /// Leaves the group (if any) and releases the consumer.
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, Rebalance, TopicPartition};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// let topics = ["clicks".to_owned()];
    /// let mut first = kafka.consumer(ConsumerConfig::member("pod-0", "app"))?;
    /// first.subscribe(&topics).await?;
    /// while first.poll(100, Duration::from_millis(100)).await?.rebalances.is_empty() {}
    /// first.close().await?; // leaves the group at once, no session timeout to wait for
    /// let mut second = kafka.consumer(ConsumerConfig::member("pod-1", "app"))?;
    /// second.subscribe(&topics).await?;
    /// let partitions = loop {
    ///     let polled = second.poll(100, Duration::from_millis(100)).await?;
    ///     if let Some(Rebalance::Assigned { partitions, .. }) = polled.rebalances.into_iter().last() {
    ///         break partitions;
    ///     }
    /// };
    /// assert_eq!(partitions, [TopicPartition::new("clicks", 0)]);
    /// # Ok(())
    /// # }
    /// ```
    async fn close(&mut self) -> KafkaResult<()>;
}

/// A producer. Transactional when configured with a transactional id: then every send happens
/// inside `begin_transaction` … `commit_transaction` / `abort_transaction`, one transaction at a
/// time.
///
/// ```
/// # use std::sync::Arc;
/// use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
/// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
/// kafka.admin()?.create_topic(&NewTopic::new("out", 1)).await?;
/// let producer = kafka.producer(ProducerConfig::transactional("pod-0", "app-0"))?;
/// producer.init_transactions().await?;
/// producer.begin_transaction().await?;
/// let delivery = producer.send(ProducerRecord::new("out", "k", "{}")).await?;
/// delivery.await?;
/// producer.commit_transaction().await?;
/// producer.close().await;
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait Producer: Send + Sync {
    /// The transactional id, if any.
    ///
    /// ```
    /// use flechtwerk::kafka::{Kafka, ProducerConfig};
    /// let kafka = flechtwerk_sim::cluster::LocalCluster::new();
    /// let producer = kafka.producer(ProducerConfig::transactional("pod-0", "app-0"))?;
    /// assert_eq!(producer.transactional_id(), Some("app-0"));
    /// # Ok::<(), flechtwerk::kafka::KafkaError>(())
    /// ```
    fn transactional_id(&self) -> Option<&str>;

    /// Registers the transactional id with the coordinator: bumps its epoch, which fences every
    /// earlier producer with this id (their later sends and commits fail with
    /// [`KafkaErrorKind::Fenced`]) and aborts the transaction it left open.
    ///
    /// ```
    /// use flechtwerk::kafka::{KafkaErrorKind, NewTopic, ProducerConfig, ProducerRecord};
    /// use flechtwerk::kafka::Kafka;
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let zombie = kafka.producer(ProducerConfig::transactional("pod-0", "app-0"))?;
    /// zombie.init_transactions().await?;
    /// let successor = kafka.producer(ProducerConfig::transactional("pod-1", "app-0"))?;
    /// successor.init_transactions().await?; // same id: the zombie is fenced
    /// let fenced: Result<(), _> = async {
    ///     zombie.begin_transaction().await?;
    ///     zombie.send(ProducerRecord::new("clicks", "ada", "{}")).await?.await?;
    ///     zombie.commit_transaction().await
    /// }
    /// .await;
    /// assert_eq!(fenced.unwrap_err().kind(), KafkaErrorKind::Fenced);
    /// # Ok(())
    /// # }
    /// ```
    async fn init_transactions(&self) -> KafkaResult<()>;

    /// Starts a transaction.
    ///
    /// ```
    /// use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
    /// use flechtwerk::testing::read_topic;
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let producer = kafka.producer(ProducerConfig::transactional("pod-0", "app-0"))?;
    /// producer.init_transactions().await?;
    /// producer.begin_transaction().await?;
    /// producer.send(ProducerRecord::new("clicks", "carol", "{}")).await?.await?;
    /// producer.commit_transaction().await?;
    /// assert_eq!(read_topic(&*kafka, "reader", "clicks").await?.len(), 3);
    /// # Ok(())
    /// # }
    /// ```
    async fn begin_transaction(&self) -> KafkaResult<()>;

    /// Hands a record to the producer; the returned future resolves with its delivery.
    ///
    /// ```
    /// use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let producer = kafka.producer(ProducerConfig::idempotent("feeder-2"))?;
    /// let delivery = producer.send(ProducerRecord::new("clicks", "carol", "{}")).await?; // queued
    /// let delivered = delivery.await?; // on the broker
    /// assert_eq!(delivered.offset, 2);
    /// # Ok(())
    /// # }
    /// ```
    async fn send(&self, record: ProducerRecord) -> KafkaResult<DeliveryFuture>;

    /// Adds consumer offsets to the open transaction: they become the group's committed offsets
    /// exactly when the transaction commits.
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, TopicPartition};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let mut consumer = kafka.consumer(ConsumerConfig::member("pod-0", "app"))?;
    /// consumer.subscribe(&["clicks".to_owned()]).await?;
    /// while consumer.poll(100, Duration::from_millis(100)).await?.rebalances.is_empty() {}
    /// let group = consumer.group_metadata().expect("a member");
    /// let clicks = TopicPartition::new("clicks", 0);
    /// let producer = kafka.producer(ProducerConfig::transactional("pod-0", "app-0"))?;
    /// producer.init_transactions().await?;
    /// producer.begin_transaction().await?;
    /// producer.send_offsets_to_transaction(&[(clicks.clone(), 2)], &group).await?;
    /// producer.commit_transaction().await?;
    /// assert_eq!(consumer.committed(&[clicks]).await?, [Some(2)]);
    /// # Ok(())
    /// # }
    /// ```
    async fn send_offsets_to_transaction(
        &self,
        offsets: &[(TopicPartition, i64)],
        group: &GroupMetadata,
    ) -> KafkaResult<()>;

    /// Commits the open transaction (after flushing its records).
    ///
    /// ```
    /// use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
    /// use flechtwerk::testing::read_topic;
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let producer = kafka.producer(ProducerConfig::transactional("pod-0", "app-0"))?;
    /// producer.init_transactions().await?;
    /// producer.begin_transaction().await?;
    /// producer.send(ProducerRecord::new("clicks", "carol", "{}")).await?.await?;
    /// assert_eq!(read_topic(&*kafka, "reader", "clicks").await?.len(), 2); // not visible yet
    /// producer.commit_transaction().await?;
    /// assert_eq!(read_topic(&*kafka, "reader", "clicks").await?.len(), 3);
    /// # Ok(())
    /// # }
    /// ```
    async fn commit_transaction(&self) -> KafkaResult<()>;

    /// Aborts the open transaction: none of its records or offsets ever become visible to a
    /// `read_committed` reader.
    ///
    /// ```
    /// use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
    /// use flechtwerk::testing::read_topic;
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let producer = kafka.producer(ProducerConfig::transactional("pod-0", "app-0"))?;
    /// producer.init_transactions().await?;
    /// producer.begin_transaction().await?;
    /// producer.send(ProducerRecord::new("clicks", "carol", "{}")).await?.await?;
    /// producer.abort_transaction().await?;
    /// assert_eq!(read_topic(&*kafka, "reader", "clicks").await?.len(), 2); // carol never shows
    /// # Ok(())
    /// # }
    /// ```
    async fn abort_transaction(&self) -> KafkaResult<()>;

    /// Flushes outstanding non-transactional sends.
    ///
    /// ```
    /// use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
    /// use flechtwerk::testing::read_topic;
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let producer = kafka.producer(ProducerConfig::idempotent("feeder-2"))?;
    /// let _delivery = producer.send(ProducerRecord::new("clicks", "carol", "{}")).await?;
    /// producer.flush().await?; // without awaiting the delivery itself
    /// assert_eq!(read_topic(&*kafka, "reader", "clicks").await?.len(), 3);
    /// # Ok(())
    /// # }
    /// ```
    async fn flush(&self) -> KafkaResult<()>;

    /// Releases the producer. An open transaction is left to the coordinator (the next
    /// `init_transactions` of this id, or the transaction timeout, aborts it).
    ///
    /// ```
    /// use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// feeder.close().await;
    /// let producer = kafka.producer(ProducerConfig::idempotent("feeder"))?; // a new one may follow
    /// let delivered = producer.send(ProducerRecord::new("clicks", "carol", "{}")).await?.await?;
    /// assert_eq!(delivered.offset, 2); // after the two records the closed one had delivered
    /// # Ok(())
    /// # }
    /// ```
    async fn close(&self);
}

/// Topic to create.
///
/// ```
/// use flechtwerk::kafka::NewTopic;
///
/// let plans = NewTopic::new("plans", 1).compacted().replication(3).config("min.insync.replicas", "2");
/// assert_eq!(plans.configs["cleanup.policy"], "compact");
/// ```
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
    ///
    /// ```
    /// # use flechtwerk::kafka::NewTopic;
    /// assert_eq!(NewTopic::new("clicks", 4).replication_factor, -1);
    /// ```
    pub fn new(name: impl Into<String>, partitions: u32) -> Self {
        NewTopic { name: name.into(), partitions, replication_factor: -1, configs: BTreeMap::new() }
    }

    /// Sets `cleanup.policy=compact`.
    ///
    /// ```
    /// # use flechtwerk::kafka::NewTopic;
    /// assert_eq!(NewTopic::new("plans", 1).compacted().configs["cleanup.policy"], "compact");
    /// ```
    pub fn compacted(mut self) -> Self {
        self.configs.insert("cleanup.policy".into(), "compact".into());
        self
    }

    /// Sets a topic config (`retention.ms`, `max.message.bytes`, ...).
    ///
    /// ```
    /// # use flechtwerk::kafka::NewTopic;
    /// let topic = NewTopic::new("clicks", 4).config("retention.ms", "86400000");
    /// assert_eq!(topic.configs["retention.ms"], "86400000");
    /// ```
    pub fn config(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.configs.insert(name.into(), value.into());
        self
    }

    /// Sets the replication factor.
    ///
    /// ```
    /// # use flechtwerk::kafka::NewTopic;
    /// assert_eq!(NewTopic::new("clicks", 4).replication(3).replication_factor, 3);
    /// ```
    pub fn replication(mut self, factor: i16) -> Self {
        self.replication_factor = factor;
        self
    }
}

/// Outcome of a topic creation.
///
/// ```
/// use flechtwerk::kafka::TopicCreation;
///
/// let created = TopicCreation::AlreadyExists;
/// assert_ne!(created, TopicCreation::Created); // and still a success
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopicCreation {
    /// The topic was created.
    Created,
    /// It existed already (success: an operator may pre-create it).
    AlreadyExists,
}

/// Topic administration.
///
/// ```
/// # use std::sync::Arc;
/// use flechtwerk::kafka::{Kafka, NewTopic, TopicCreation};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
/// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
/// let admin = kafka.admin()?;
/// assert_eq!(admin.create_topic(&NewTopic::new("clicks", 4)).await?, TopicCreation::Created);
/// assert_eq!(admin.create_topic(&NewTopic::new("clicks", 4)).await?, TopicCreation::AlreadyExists);
/// assert_eq!(admin.partition_count("clicks").await?, Some(4));
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait Admin: Send + Sync {
    /// Creates a topic; an existing one is success ([`TopicCreation::AlreadyExists`]).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use flechtwerk::kafka::{Kafka, NewTopic, TopicCreation};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// let admin = kafka.admin()?;
    /// let plans = NewTopic::new("plans", 1).compacted();
    /// assert_eq!(admin.create_topic(&plans).await?, TopicCreation::Created);
    /// assert_eq!(admin.create_topic(&plans).await?, TopicCreation::AlreadyExists);
    /// # Ok(())
    /// # }
    /// ```
    async fn create_topic(&self, topic: &NewTopic) -> KafkaResult<TopicCreation>;

    /// The partition count of `topic`, `None` when it does not exist.
    ///
    /// ```
    /// use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
    /// # let kafka = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
    /// # kafka.admin()?.create_topic(&NewTopic::new("clicks", 1)).await?;
    /// # let feeder = kafka.producer(ProducerConfig::idempotent("feeder"))?;
    /// # for user in ["ada", "bob"] {
    /// #     feeder.send(ProducerRecord::new("clicks", user, "{}")).await?.await?;
    /// # }
    /// let admin = kafka.admin()?;
    /// assert_eq!(admin.partition_count("clicks").await?, Some(1));
    /// assert_eq!(admin.partition_count("nope").await?, None);
    /// # Ok(())
    /// # }
    /// ```
    async fn partition_count(&self, topic: &str) -> KafkaResult<Option<u32>>;
}

/// A Kafka cluster: the factory of clients. The engine holds one and builds every client from
/// it, which is how a simulation swaps the whole of Kafka out.
///
/// The simulated cluster of `flechtwerk-sim` in tests, `rdkafka::RdKafka` in production
/// (feature `rdkafka`); the application takes it as an `Arc<dyn Kafka>`:
///
/// ```
/// use std::sync::Arc;
/// use flechtwerk::kafka::Kafka;
///
/// let kafka: Arc<dyn Kafka> = Arc::new(flechtwerk_sim::cluster::LocalCluster::new());
/// let admin = kafka.admin()?;
/// # Ok::<(), flechtwerk::kafka::KafkaError>(())
/// ```
pub trait Kafka: Send + Sync {
    /// A new consumer.
    ///
    /// ```
    /// use flechtwerk::kafka::{ConsumerConfig, Kafka};
    /// # let kafka = flechtwerk_sim::cluster::LocalCluster::new();
    /// let consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
    /// # Ok::<(), flechtwerk::kafka::KafkaError>(())
    /// ```
    fn consumer(&self, config: ConsumerConfig) -> KafkaResult<Box<dyn Consumer>>;

    /// A new producer.
    ///
    /// ```
    /// use flechtwerk::kafka::{Kafka, ProducerConfig};
    /// # let kafka = flechtwerk_sim::cluster::LocalCluster::new();
    /// let producer = kafka.producer(ProducerConfig::transactional("pod-0", "app-0"))?;
    /// # Ok::<(), flechtwerk::kafka::KafkaError>(())
    /// ```
    fn producer(&self, config: ProducerConfig) -> KafkaResult<Box<dyn Producer>>;

    /// An admin client.
    ///
    /// ```
    /// use flechtwerk::kafka::Kafka;
    /// # let kafka = flechtwerk_sim::cluster::LocalCluster::new();
    /// let admin = kafka.admin()?;
    /// # Ok::<(), flechtwerk::kafka::KafkaError>(())
    /// ```
    fn admin(&self) -> KafkaResult<Box<dyn Admin>>;
}
