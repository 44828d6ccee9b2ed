//! The requests a client sends to the simulated broker, and the replies.
//!
//! One request per Kafka API the port needs, simplified where the wire format carries nothing
//! the engine's correctness depends on (see `docs/simulation.md`, "Protocol simplifications").
//! Values move between simulated nodes as Rust values: nothing is serialized.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use flechtwerk::kafka::{KafkaError, KafkaErrorKind, NewTopic, TopicCreation, TopicPartition};
use flechtwerk::wire::{Header, RawRecord};

/// A broker's id: broker `n` of a cluster listens on 10.0.0.(n+1).
pub type BrokerId = i32;

/// What a coordinator coordinates: the key a client's FindCoordinator names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CoordinatorKey {
    /// The transaction coordinator of a transactional id (a partition of `__transaction_state`).
    Transaction(String),
    /// The group coordinator of a consumer group (a partition of `__consumer_offsets`).
    Group(String),
}

impl fmt::Display for CoordinatorKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoordinatorKey::Transaction(id) => write!(f, "transactional id {id}"),
            CoordinatorKey::Group(group) => write!(f, "group {group}"),
        }
    }
}

/// A producer's identity on the broker: producer id and epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ProducerIdentity {
    /// Producer id (one per transactional id, or per idempotent producer).
    pub id: i64,
    /// Epoch: bumped by every `InitProducerId` of the transactional id; older epochs are fenced.
    pub epoch: i16,
}

/// Which end of a partition `ListOffsets` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The last stable offset (`read_committed`).
    LastStable,
    /// The high watermark (`read_uncommitted`).
    HighWatermark,
}

/// One record of a produce batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRecord {
    /// Key bytes.
    pub key: Option<Bytes>,
    /// Value bytes (`None`: a tombstone).
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<Header>,
    /// CreateTime in epoch milliseconds; `None`: the broker's clock.
    pub timestamp_ms: Option<i64>,
}

impl NewRecord {
    /// Key, value and header bytes: what counts against `max.message.bytes`.
    pub fn size_bytes(&self) -> usize {
        self.key.as_ref().map_or(0, Bytes::len)
            + self.value.as_ref().map_or(0, Bytes::len)
            + self.headers.iter().map(|h| h.key.len() + h.value.as_ref().map_or(0, Bytes::len)).sum::<usize>()
    }
}

/// A batch for one partition from one producer.
#[derive(Clone, Debug)]
pub struct ProduceRequest {
    /// Producer id and epoch.
    pub producer: ProducerIdentity,
    /// Set for transactional producers: the partition joins the transaction on first produce.
    pub transactional_id: Option<String>,
    /// Destination.
    pub partition: TopicPartition,
    /// Sequence number of the first record (idempotence: a retried batch is not appended twice).
    pub base_sequence: i32,
    /// The records, in order.
    pub records: Vec<NewRecord>,
}

/// Consumer offsets sent to a transaction (`AddOffsetsToTxn` + `TxnOffsetCommit` in one).
#[derive(Clone, Debug)]
pub struct TxnOffsetCommitRequest {
    /// The transaction.
    pub transactional_id: String,
    /// Producer id and epoch (fencing).
    pub producer: ProducerIdentity,
    /// Consumer group.
    pub group: String,
    /// Generation of the member's assignment; `-1` skips the generation check.
    pub generation: i32,
    /// Member id; empty skips the member check.
    pub member_id: String,
    /// Next offsets to consume, per partition.
    pub offsets: Vec<(TopicPartition, i64)>,
}

/// A consumer joining (or re-polling its pending join of) a group.
#[derive(Clone, Debug)]
pub struct JoinRequest {
    /// Consumer group.
    pub group: String,
    /// The member id from an earlier reply; `None` for a new member.
    pub member_id: Option<String>,
    /// Client id (the prefix of a new member id).
    pub client_id: String,
    /// Subscribed topics.
    pub topics: Vec<String>,
    /// Eviction after this long without a heartbeat.
    pub session_timeout: Duration,
    /// How long a rebalance waits for this member to rejoin (`max.poll.interval.ms`).
    pub rebalance_timeout: Duration,
}

/// A request to the broker.
#[derive(Clone, Debug)]
pub enum Request {
    /// CreateTopics (one topic).
    CreateTopic(NewTopic),
    /// Metadata of one topic: its partitions and their leaders.
    Metadata {
        /// Topic.
        topic: String,
    },
    /// FindCoordinator: which broker coordinates a transactional id or a group.
    FindCoordinator(CoordinatorKey),
    /// ListOffsets of one partition.
    ListOffsets {
        /// Partition.
        partition: TopicPartition,
        /// Which end.
        spec: OffsetSpec,
    },
    /// A `read_committed` fetch from several partitions, at most `max_records` in total.
    Fetch {
        /// Partitions and their fetch positions, filled in this order.
        partitions: Vec<(TopicPartition, i64)>,
        /// Upper bound on records returned, over all partitions.
        max_records: usize,
    },
    /// InitProducerId.
    InitProducerId {
        /// The fencing identity, or `None` for an idempotent producer (a fresh producer id).
        transactional_id: Option<String>,
        /// KIP-360: the producer bumping its own epoch (refused if it is no longer current);
        /// `None` for a new producer session (fences the current one).
        expected: Option<ProducerIdentity>,
        /// Transaction timeout (aborted by the coordinator past it).
        transaction_timeout: Duration,
    },
    /// Produce one batch to one partition.
    Produce(ProduceRequest),
    /// Offsets into a transaction.
    TxnOffsetCommit(TxnOffsetCommitRequest),
    /// EndTxn: commit or abort.
    EndTxn {
        /// The transaction.
        transactional_id: String,
        /// Producer id and epoch (fencing).
        producer: ProducerIdentity,
        /// Commit (`true`) or abort.
        commit: bool,
    },
    /// JoinGroup (polled: re-sent until the rebalance completes).
    JoinGroup(JoinRequest),
    /// SyncGroup: the member's assignment for a generation.
    SyncGroup {
        /// Consumer group.
        group: String,
        /// Member id.
        member_id: String,
        /// Generation the member joined.
        generation: i32,
    },
    /// Heartbeat.
    Heartbeat {
        /// Consumer group.
        group: String,
        /// Member id.
        member_id: String,
        /// The member's generation.
        generation: i32,
    },
    /// LeaveGroup.
    LeaveGroup {
        /// Consumer group.
        group: String,
        /// Member id.
        member_id: String,
    },
    /// OffsetFetch with `require_stable` (like the Java consumer under `read_committed`).
    OffsetFetch {
        /// Consumer group.
        group: String,
        /// Partitions.
        partitions: Vec<TopicPartition>,
    },
    /// A plain (non-transactional) OffsetCommit.
    OffsetCommit {
        /// Consumer group.
        group: String,
        /// Generation; `-1` skips the check.
        generation: i32,
        /// Member id; empty skips the check.
        member_id: String,
        /// Offsets.
        offsets: Vec<(TopicPartition, i64)>,
    },
}

/// The kind of a request: what the fault plan is keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RequestKind {
    /// [`Request::CreateTopic`].
    CreateTopic,
    /// [`Request::Metadata`].
    Metadata,
    /// [`Request::FindCoordinator`].
    FindCoordinator,
    /// [`Request::ListOffsets`].
    ListOffsets,
    /// [`Request::Fetch`].
    Fetch,
    /// [`Request::InitProducerId`].
    InitProducerId,
    /// [`Request::Produce`].
    Produce,
    /// [`Request::TxnOffsetCommit`].
    TxnOffsetCommit,
    /// [`Request::EndTxn`].
    EndTxn,
    /// [`Request::JoinGroup`].
    JoinGroup,
    /// [`Request::SyncGroup`].
    SyncGroup,
    /// [`Request::Heartbeat`].
    Heartbeat,
    /// [`Request::LeaveGroup`].
    LeaveGroup,
    /// [`Request::OffsetFetch`].
    OffsetFetch,
    /// [`Request::OffsetCommit`].
    OffsetCommit,
}

impl RequestKind {
    /// Every kind, in a fixed order.
    pub const ALL: [RequestKind; 15] = [
        RequestKind::CreateTopic,
        RequestKind::Metadata,
        RequestKind::ListOffsets,
        RequestKind::Fetch,
        RequestKind::InitProducerId,
        RequestKind::Produce,
        RequestKind::TxnOffsetCommit,
        RequestKind::EndTxn,
        RequestKind::JoinGroup,
        RequestKind::SyncGroup,
        RequestKind::Heartbeat,
        RequestKind::LeaveGroup,
        RequestKind::OffsetFetch,
        RequestKind::OffsetCommit,
        RequestKind::FindCoordinator,
    ];

    /// Whether requests of this kind are served by a coordinator (transaction or group) rather
    /// than by a partition leader: decides which retriable error an injected fault returns.
    pub fn is_coordinator_request(self) -> bool {
        matches!(
            self,
            RequestKind::InitProducerId
                | RequestKind::TxnOffsetCommit
                | RequestKind::EndTxn
                | RequestKind::JoinGroup
                | RequestKind::SyncGroup
                | RequestKind::Heartbeat
                | RequestKind::LeaveGroup
                | RequestKind::OffsetFetch
                | RequestKind::OffsetCommit
        )
    }
}

impl fmt::Display for RequestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Which broker of a cluster serves a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Any broker.
    Any,
    /// The partition's leader.
    Leader(TopicPartition),
    /// The coordinator of a transactional id or a group.
    Coordinator(CoordinatorKey),
    /// The leaders of the fetched partitions: a client splits a fetch by leader.
    Leaders,
}

impl Request {
    /// The broker that serves the request.
    pub fn route(&self) -> Route {
        match self {
            Request::CreateTopic(_) | Request::Metadata { .. } | Request::FindCoordinator(_) => Route::Any,
            Request::InitProducerId { transactional_id: None, .. } => Route::Any,
            Request::InitProducerId { transactional_id: Some(id), .. }
            | Request::EndTxn { transactional_id: id, .. } => {
                Route::Coordinator(CoordinatorKey::Transaction(id.clone()))
            }
            Request::ListOffsets { partition, .. } => Route::Leader(partition.clone()),
            Request::Produce(produce) => Route::Leader(produce.partition.clone()),
            Request::Fetch { .. } => Route::Leaders,
            Request::TxnOffsetCommit(TxnOffsetCommitRequest { group, .. })
            | Request::JoinGroup(JoinRequest { group, .. })
            | Request::SyncGroup { group, .. }
            | Request::Heartbeat { group, .. }
            | Request::LeaveGroup { group, .. }
            | Request::OffsetFetch { group, .. }
            | Request::OffsetCommit { group, .. } => Route::Coordinator(CoordinatorKey::Group(group.clone())),
        }
    }

    /// The request's kind.
    pub fn kind(&self) -> RequestKind {
        match self {
            Request::CreateTopic(_) => RequestKind::CreateTopic,
            Request::Metadata { .. } => RequestKind::Metadata,
            Request::FindCoordinator(_) => RequestKind::FindCoordinator,
            Request::ListOffsets { .. } => RequestKind::ListOffsets,
            Request::Fetch { .. } => RequestKind::Fetch,
            Request::InitProducerId { .. } => RequestKind::InitProducerId,
            Request::Produce(_) => RequestKind::Produce,
            Request::TxnOffsetCommit(_) => RequestKind::TxnOffsetCommit,
            Request::EndTxn { .. } => RequestKind::EndTxn,
            Request::JoinGroup(_) => RequestKind::JoinGroup,
            Request::SyncGroup { .. } => RequestKind::SyncGroup,
            Request::Heartbeat { .. } => RequestKind::Heartbeat,
            Request::LeaveGroup { .. } => RequestKind::LeaveGroup,
            Request::OffsetFetch { .. } => RequestKind::OffsetFetch,
            Request::OffsetCommit { .. } => RequestKind::OffsetCommit,
        }
    }
}

/// What one partition of a fetch returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedPartition {
    /// Partition.
    pub partition: TopicPartition,
    /// Committed records at or after the fetch position, below the LSO.
    pub records: Vec<RawRecord>,
    /// Where the next fetch starts: past every returned record, and past control records and
    /// aborted records the broker skipped.
    pub next_offset: i64,
    /// Set when this partition could not be read (unknown partition, offset out of range).
    pub error: Option<BrokerError>,
}

/// Outcome of a JoinGroup poll.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinOutcome {
    /// The rebalance is still waiting for other members: re-send the join.
    Pending {
        /// The member id to use from now on.
        member_id: String,
    },
    /// The member is part of `generation`: fetch the assignment with SyncGroup.
    Joined {
        /// The member id.
        member_id: String,
        /// The completed generation.
        generation: i32,
    },
}

/// A successful reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// [`Request::CreateTopic`].
    TopicCreated(TopicCreation),
    /// [`Request::Metadata`]: per partition its leader (`None` while it has none), `None` for
    /// an unknown topic.
    Metadata(Option<Vec<Option<BrokerId>>>),
    /// [`Request::FindCoordinator`]: the coordinator's broker.
    Coordinator(BrokerId),
    /// [`Request::ListOffsets`].
    Offset(i64),
    /// [`Request::Fetch`].
    Fetched(Vec<FetchedPartition>),
    /// [`Request::InitProducerId`].
    ProducerId(ProducerIdentity),
    /// [`Request::Produce`]: offset of the batch's first record.
    Produced {
        /// Offset of the first record.
        base_offset: i64,
    },
    /// [`Request::JoinGroup`].
    Joined(JoinOutcome),
    /// [`Request::SyncGroup`]: the member's partitions.
    Assignment(Vec<TopicPartition>),
    /// [`Request::OffsetFetch`]: committed offsets, in request order.
    Committed(Vec<Option<i64>>),
    /// Success without data.
    Done,
}

/// The Kafka error codes the simulated broker returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// UNKNOWN_SERVER_ERROR (-1).
    UnknownServerError,
    /// OFFSET_OUT_OF_RANGE (1).
    OffsetOutOfRange,
    /// UNKNOWN_TOPIC_OR_PARTITION (3).
    UnknownTopicOrPartition,
    /// NOT_LEADER_OR_FOLLOWER (6).
    NotLeaderOrFollower,
    /// REQUEST_TIMED_OUT (7): an `acks=all` produce was not replicated in time.
    RequestTimedOut,
    /// COORDINATOR_LOAD_IN_PROGRESS (14): the coordinator is loading its state after a move.
    CoordinatorLoadInProgress,
    /// COORDINATOR_NOT_AVAILABLE (15): the coordinator's partition has no leader.
    CoordinatorNotAvailable,
    /// NOT_ENOUGH_REPLICAS (19): the in-sync replicas are fewer than `min.insync.replicas`.
    NotEnoughReplicas,
    /// INVALID_REPLICATION_FACTOR (38): more replicas than brokers.
    InvalidReplicationFactor,
    /// MESSAGE_TOO_LARGE (10): a batch larger than the topic's `max.message.bytes`.
    MessageTooLarge,
    /// NOT_COORDINATOR (16).
    NotCoordinator,
    /// ILLEGAL_GENERATION (22).
    IllegalGeneration,
    /// UNKNOWN_MEMBER_ID (25).
    UnknownMemberId,
    /// INVALID_SESSION_TIMEOUT (26).
    InvalidSessionTimeout,
    /// REBALANCE_IN_PROGRESS (27).
    RebalanceInProgress,
    /// INVALID_PARTITIONS (37).
    InvalidPartitions,
    /// INVALID_REQUEST (42).
    InvalidRequest,
    /// OUT_OF_ORDER_SEQUENCE_NUMBER (45).
    OutOfOrderSequenceNumber,
    /// INVALID_PRODUCER_EPOCH (47): an older epoch at a partition.
    InvalidProducerEpoch,
    /// INVALID_TXN_STATE (48).
    InvalidTxnState,
    /// INVALID_PRODUCER_ID_MAPPING (49).
    InvalidProducerIdMapping,
    /// INVALID_TRANSACTION_TIMEOUT (50).
    InvalidTransactionTimeout,
    /// CONCURRENT_TRANSACTIONS (51).
    ConcurrentTransactions,
    /// INVALID_RECORD (87).
    InvalidRecord,
    /// UNSTABLE_OFFSET_COMMIT (88).
    UnstableOffsetCommit,
    /// PRODUCER_FENCED (90).
    ProducerFenced,
}

impl ErrorCode {
    /// Every code the simulated broker returns.
    pub const ALL: [ErrorCode; 26] = [
        ErrorCode::UnknownServerError,
        ErrorCode::OffsetOutOfRange,
        ErrorCode::UnknownTopicOrPartition,
        ErrorCode::NotLeaderOrFollower,
        ErrorCode::RequestTimedOut,
        ErrorCode::CoordinatorLoadInProgress,
        ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotEnoughReplicas,
        ErrorCode::InvalidReplicationFactor,
        ErrorCode::MessageTooLarge,
        ErrorCode::NotCoordinator,
        ErrorCode::IllegalGeneration,
        ErrorCode::UnknownMemberId,
        ErrorCode::InvalidSessionTimeout,
        ErrorCode::RebalanceInProgress,
        ErrorCode::InvalidPartitions,
        ErrorCode::InvalidRequest,
        ErrorCode::OutOfOrderSequenceNumber,
        ErrorCode::InvalidProducerEpoch,
        ErrorCode::InvalidTxnState,
        ErrorCode::InvalidProducerIdMapping,
        ErrorCode::InvalidTransactionTimeout,
        ErrorCode::ConcurrentTransactions,
        ErrorCode::InvalidRecord,
        ErrorCode::UnstableOffsetCommit,
        ErrorCode::ProducerFenced,
    ];

    /// The error of Kafka's numeric `code`, if the simulated broker returns it.
    ///
    /// ```
    /// use flechtwerk_sim::cluster::protocol::ErrorCode;
    /// assert_eq!(ErrorCode::from_code(90), Some(ErrorCode::ProducerFenced));
    /// assert_eq!(ErrorCode::from_code(0), None);
    /// ```
    pub fn from_code(code: i32) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|error| error.code() == code)
    }

    /// Kafka's numeric code.
    pub fn code(self) -> i32 {
        match self {
            ErrorCode::UnknownServerError => -1,
            ErrorCode::OffsetOutOfRange => 1,
            ErrorCode::UnknownTopicOrPartition => 3,
            ErrorCode::NotLeaderOrFollower => 6,
            ErrorCode::RequestTimedOut => 7,
            ErrorCode::CoordinatorLoadInProgress => 14,
            ErrorCode::CoordinatorNotAvailable => 15,
            ErrorCode::NotEnoughReplicas => 19,
            ErrorCode::InvalidReplicationFactor => 38,
            ErrorCode::MessageTooLarge => 10,
            ErrorCode::NotCoordinator => 16,
            ErrorCode::IllegalGeneration => 22,
            ErrorCode::UnknownMemberId => 25,
            ErrorCode::InvalidSessionTimeout => 26,
            ErrorCode::RebalanceInProgress => 27,
            ErrorCode::InvalidPartitions => 37,
            ErrorCode::InvalidRequest => 42,
            ErrorCode::OutOfOrderSequenceNumber => 45,
            ErrorCode::InvalidProducerEpoch => 47,
            ErrorCode::InvalidTxnState => 48,
            ErrorCode::InvalidProducerIdMapping => 49,
            ErrorCode::InvalidTransactionTimeout => 50,
            ErrorCode::ConcurrentTransactions => 51,
            ErrorCode::InvalidRecord => 87,
            ErrorCode::UnstableOffsetCommit => 88,
            ErrorCode::ProducerFenced => 90,
        }
    }

    /// How a client must react, as a transactional Kafka client classifies the code.
    pub fn kind(self) -> KafkaErrorKind {
        match self {
            ErrorCode::ProducerFenced | ErrorCode::InvalidProducerEpoch => KafkaErrorKind::Fenced,
            ErrorCode::NotLeaderOrFollower
            | ErrorCode::RequestTimedOut
            | ErrorCode::CoordinatorLoadInProgress
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::NotEnoughReplicas
            | ErrorCode::NotCoordinator
            | ErrorCode::RebalanceInProgress
            | ErrorCode::ConcurrentTransactions
            | ErrorCode::UnstableOffsetCommit => KafkaErrorKind::Retriable,
            // A refused batch fails its transaction, which must be aborted (the Java client's
            // RecordTooLargeException in a transaction; librdkafka likewise).
            ErrorCode::IllegalGeneration | ErrorCode::UnknownMemberId | ErrorCode::MessageTooLarge => {
                KafkaErrorKind::Abortable
            }
            ErrorCode::UnknownTopicOrPartition => KafkaErrorKind::UnknownTopic,
            ErrorCode::InvalidTxnState
            | ErrorCode::InvalidProducerIdMapping
            | ErrorCode::InvalidTransactionTimeout
            | ErrorCode::OutOfOrderSequenceNumber
            | ErrorCode::InvalidSessionTimeout => KafkaErrorKind::Fatal,
            ErrorCode::UnknownServerError
            | ErrorCode::OffsetOutOfRange
            | ErrorCode::InvalidPartitions
            | ErrorCode::InvalidReplicationFactor
            | ErrorCode::InvalidRequest
            | ErrorCode::InvalidRecord => KafkaErrorKind::Other,
        }
    }
}

/// An error reply: Kafka's code, its classification, and what it was about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerError {
    /// The error code.
    pub code: ErrorCode,
    /// The classification (the code's, unless a fault injection chose another).
    pub kind: KafkaErrorKind,
    /// Explanation, naming the topic/partition, transactional id or group.
    pub message: String,
}

impl BrokerError {
    /// An error with the code's own classification.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        BrokerError { code, kind: code.kind(), message: message.into() }
    }

    /// The port's error for `operation`, with `context`.
    pub fn into_kafka(self, operation: &'static str, context: impl Into<String>) -> KafkaError {
        KafkaError::new(self.kind, operation, format!("{:?}: {}", self.code, self.message))
            .with_code(self.code.code())
            .with_context(context)
    }
}

impl fmt::Display for BrokerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ({}): {}", self.code, self.code.code(), self.message)
    }
}

/// The broker's answer to one request.
pub type Response = Result<Reply, BrokerError>;

/// What a topic creation request asks for, checked (partitions > 0, a name).
pub(crate) fn validate_new_topic(topic: &NewTopic) -> Result<(), BrokerError> {
    if topic.name.is_empty() || topic.name.len() > 249 {
        return Err(BrokerError::new(ErrorCode::InvalidRequest, format!("invalid topic name {:?}", topic.name)));
    }
    if topic.partitions == 0 || topic.partitions > i32::MAX as u32 {
        return Err(BrokerError::new(
            ErrorCode::InvalidPartitions,
            format!("topic {}: {} partitions", topic.name, topic.partitions),
        ));
    }
    Ok(())
}
