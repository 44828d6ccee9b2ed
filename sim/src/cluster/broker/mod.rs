//! The simulated broker: a deterministic state machine, independent of any transport.
//!
//! Time is passed in (`now`: broker time since the cluster started) and randomness only through
//! [`BrokerFaults`], so the same inputs always give the same state, replies and trace. One
//! `Broker` is the whole cluster: partition logs, the transaction coordinator and the group
//! coordinator. The transports (madsim RPC, in-process calls) wrap it in an
//! `Arc<Mutex<Broker>>` that outlives the broker node, which is how a broker restart keeps its
//! log and loses only in-flight requests.
//!
//! - [`log`]: partition logs, LSO, `read_committed` fetch, idempotence, compaction.
//! - `txn`: producer ids, epochs and fencing, transactions, markers, transaction timeouts.
//! - `group`: consumer groups, generations, sessions, eager rebalances, committed offsets.
//! - [`assign`]: Kafka's RangeAssignor.

pub mod assign;
mod group;
pub mod log;
pub mod replicas;
mod txn;

#[cfg(test)]
mod replicas_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flechtwerk::kafka::{NewTopic, TopicCreation, TopicPartition};
use flechtwerk::wire::RawRecord;

pub use group::{GroupState, GroupView};
use log::{CompactionSettings, PartitionLog};
pub use replicas::{Ack, AckWait, Placement, ReplicaPosition};
pub use txn::{TxnStatus, TxnView};

use super::faults::BrokerFaults;
use super::protocol::{
    validate_new_topic, BrokerError, BrokerId, ErrorCode, FetchedPartition, OffsetSpec, Reply, Request, Response,
};
use crate::trace::Trace;

/// Broker-wide settings. Kafka's defaults unless noted; the simulator shortens a few so that
/// compaction happens within a run (see `docs/simulation.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerConfig {
    /// Seed of the broker's deterministic choices (member id suffixes).
    pub seed: u64,
    /// Wall clock at broker time zero, epoch milliseconds: stamps records sent without a
    /// timestamp.
    pub epoch_origin_ms: i64,
    /// `group.initial.rebalance.delay.ms`: an empty group's first rebalance waits this long for
    /// more members (Kafka: 3 s).
    pub initial_rebalance_delay: Duration,
    /// `group.min.session.timeout.ms` (Kafka: 6 s).
    pub session_timeout_min: Duration,
    /// `group.max.session.timeout.ms` (Kafka: 30 min).
    pub session_timeout_max: Duration,
    /// `transaction.max.timeout.ms` (Kafka: 15 min).
    pub transaction_timeout_max: Duration,
    /// `log.cleaner.backoff.ms`: pause between cleaner passes (Kafka: 15 s).
    pub cleaner_backoff: Duration,
    /// Default `segment.ms` (Kafka: 7 days; simulator: 60 s).
    pub segment_default: Duration,
    /// Default `delete.retention.ms` (Kafka: 1 day; simulator: 60 s).
    pub delete_retention_default: Duration,
    /// Default `min.compaction.lag.ms` (Kafka: 0).
    pub min_compaction_lag_default: Duration,
    /// Brokers in the cluster (1: the single node every seed ran on before replication).
    pub brokers: u32,
    /// `min.insync.replicas` (this project's clusters: 2; at most the replication factor).
    pub min_insync_replicas: u32,
    /// `replica.lag.time.max.ms`: a follower that has not caught up for this long leaves the
    /// ISR (Kafka: 30 s).
    pub replica_lag_max: Duration,
    /// How long a coordinator that moved loads its state (COORDINATOR_LOAD_IN_PROGRESS).
    pub coordinator_load: Duration,
    /// The cluster's `transaction.version` feature (1 or 2; 0 counts as 1). Under 2 (KIP-890
    /// part 2) every EndTxn bumps the producer's epoch: the reply carries the new epoch, the
    /// markers are written with it (fencing, at each partition, whatever the previous epoch
    /// still has in flight), and a retry of that EndTxn under the previous epoch is answered
    /// as the call it repeats.
    pub transaction_version: u8,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            seed: 0,
            epoch_origin_ms: 1_704_067_200_000,
            initial_rebalance_delay: Duration::from_secs(3),
            session_timeout_min: Duration::from_secs(6),
            session_timeout_max: Duration::from_secs(1_800),
            transaction_timeout_max: Duration::from_secs(900),
            cleaner_backoff: Duration::from_secs(15),
            segment_default: Duration::from_secs(60),
            delete_retention_default: Duration::from_secs(60),
            min_compaction_lag_default: Duration::ZERO,
            brokers: 1,
            min_insync_replicas: 2,
            replica_lag_max: Duration::from_secs(30),
            coordinator_load: Duration::from_millis(500),
            transaction_version: 1,
        }
    }
}

/// Kafka's default `max.message.bytes` (1 MiB plus a record batch header): a produced batch
/// larger than its topic's setting is refused with MESSAGE_TOO_LARGE.
pub const MAX_MESSAGE_BYTES_DEFAULT: usize = 1_048_588;

/// One topic: its configs and partition logs.
#[derive(Clone, Debug)]
pub struct Topic {
    /// Topic configs as created.
    pub configs: BTreeMap<String, String>,
    compact: bool,
    settings: CompactionSettings,
    /// `max.message.bytes`: the largest batch a produce may append.
    max_message_bytes: usize,
    /// Partition logs, by partition number.
    pub partitions: Vec<PartitionLog>,
}

impl Topic {
    /// Whether `cleanup.policy` includes `compact`.
    pub fn is_compacted(&self) -> bool {
        self.compact
    }
}

fn duration_config(configs: &BTreeMap<String, String>, name: &str, default: Duration) -> Result<Duration, BrokerError> {
    match configs.get(name) {
        None => Ok(default),
        Some(text) => text.parse::<u64>().map(Duration::from_millis).map_err(|_| {
            BrokerError::new(ErrorCode::InvalidRequest, format!("config {name}={text:?} is not a millisecond count"))
        }),
    }
}

fn partition_counts(topics: &BTreeMap<String, Topic>) -> BTreeMap<String, u32> {
    topics.iter().map(|(name, t)| (name.clone(), t.partitions.len() as u32)).collect()
}

/// The simulated cluster's state.
#[derive(Debug)]
pub struct Broker {
    config: BrokerConfig,
    trace: Trace,
    now: Duration,
    topics: BTreeMap<String, Topic>,
    txn: txn::Coordinator,
    groups: group::Groups,
    replication: replicas::Replication,
    /// Counts appends (batches and markers): what wakes a leader's waiting replica fetches.
    appends: u64,
    last_clean: Duration,
    /// What the invariant checks saw after the previous request.
    seen: Seen,
}

/// The broker's own invariants, checked after every request ([`Broker::check_invariants`]): a
/// simulator that broke one would prove the engine against a Kafka that does not exist.
#[derive(Debug, Default)]
struct Seen {
    /// Transactional id -> (producer id, epoch).
    epochs: BTreeMap<String, (i64, i16)>,
    /// Group -> generation.
    generations: BTreeMap<String, i32>,
}

impl Broker {
    /// An empty cluster that records its events into `trace`.
    pub fn new(config: BrokerConfig, trace: Trace) -> Self {
        let groups = group::Groups::new(config.seed);
        let replication = replicas::Replication::new(config.brokers);
        Broker {
            config,
            replication,
            appends: 0,
            trace,
            now: Duration::ZERO,
            topics: BTreeMap::new(),
            txn: txn::Coordinator::default(),
            groups,
            last_clean: Duration::ZERO,
            seen: Seen::default(),
        }
    }

    /// How many batches and markers were appended so far (a follower waiting for news compares
    /// it).
    pub fn appends(&self) -> u64 {
        self.appends
    }

    /// The settings.
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// Broker time of the latest request or tick.
    pub fn now(&self) -> Duration {
        self.now
    }

    fn now_ms(&self) -> i64 {
        self.config.epoch_origin_ms + self.now.as_millis() as i64
    }

    fn event(&self, what: impl AsRef<str>) {
        self.trace.record_at(self.now, format!("kafka: {}", what.as_ref()));
    }

    /// Handles one request at broker time `now` (after running every timer due by then), on a
    /// cluster of one broker (acknowledged at once: there are no followers).
    pub fn handle(&mut self, request: Request, now: Duration, faults: &mut dyn BrokerFaults) -> Response {
        self.handle_at(0, request, now, faults).0
    }

    /// Handles one request that reached broker `at`: refused unless `at` serves it (leader,
    /// coordinator). A produced batch comes with what it waits for before it is acknowledged.
    pub fn handle_at(
        &mut self,
        at: BrokerId,
        request: Request,
        now: Duration,
        faults: &mut dyn BrokerFaults,
    ) -> (Response, Option<AckWait>) {
        self.advance(now, faults);
        if let Err(error) = self.check_route(at, &request) {
            return (Err(error), None);
        }
        let produced = match &request {
            Request::Produce(produce) => Some((produce.partition.clone(), produce.records.len() as i64)),
            _ => None,
        };
        let response = self.serve(at, request, faults);
        let wait = match (&response, produced) {
            (Ok(Reply::Produced { base_offset }), Some((partition, count))) => {
                Some(self.ack_wait(&partition, base_offset + count))
            }
            _ => None,
        };
        self.check_invariants();
        (response, wait)
    }

    /// Panics when the simulated cluster broke one of Kafka's invariants: per partition the
    /// stored offsets increase and stay below the high watermark, every open transaction starts
    /// below it and the last stable offset lies between the log start and it; per transactional
    /// id the epoch of one producer id never decreases; per group the generation never
    /// decreases, and one step (a request, or a tick of the timers) completes at most one
    /// rebalance. Runs after every step.
    fn check_invariants(&mut self) {
        for (name, topic) in &self.topics {
            for (partition, log) in topic.partitions.iter().enumerate() {
                let (hw, lso) = (log.high_watermark(), log.last_stable_offset());
                assert!(
                    log.log_start() <= lso && lso <= hw,
                    "{name}/{partition}: LSO {lso} outside [log start {}, HW {hw}]",
                    log.log_start()
                );
                let end = log.log_end_offset();
                assert!(hw <= end, "{name}/{partition}: HW {hw} past the log end {end}");
                assert!(log.check_order(), "{name}/{partition}: stored offsets do not increase");
                assert!(
                    log.entries().last().is_none_or(|e| e.offset < end),
                    "{name}/{partition}: an entry at or past the log end {end}"
                );
                assert!(
                    log.open_transactions().values().all(|&first| first < end),
                    "{name}/{partition}: an open transaction starts at or past the log end {end}"
                );
            }
        }
        // The replicas of every partition that has a log (per placement, not per log: no
        // partition name is built per step).
        for (tp, placement) in self.placements() {
            let Some(log) = self.find_log(tp) else { continue };
            let hw = log.high_watermark();
            assert!(!placement.isr.is_empty(), "{tp}: an empty ISR");
            assert!(
                placement.leader.is_none_or(|l| placement.isr.contains(&l)),
                "{tp}: leader {:?} outside the ISR {:?}",
                placement.leader,
                placement.isr
            );
            let floor = placement.followers_in_sync_floor();
            assert!(floor.is_none_or(|f| hw <= f), "{tp}: HW {hw} past an in-sync follower's log end {floor:?}");
        }
        // A name is copied only when first seen, not on every step.
        for (id, producer_id, epoch) in self.txn.epochs() {
            let Some(seen) = self.seen.epochs.get_mut(id) else {
                self.seen.epochs.insert(id.to_owned(), (producer_id, epoch));
                continue;
            };
            let (seen_id, seen_epoch) = std::mem::replace(seen, (producer_id, epoch));
            assert!(
                seen_id != producer_id || seen_epoch <= epoch,
                "transactional id {id}: producer {producer_id}'s epoch went from {seen_epoch} back to {epoch}"
            );
        }
        for (group, generation) in self.groups.generations() {
            let Some(seen) = self.seen.generations.get_mut(group) else {
                self.seen.generations.insert(group.to_owned(), generation);
                continue;
            };
            let seen = std::mem::replace(seen, generation);
            assert!(
                seen <= generation && generation - seen <= 1,
                "group {group}: generation {seen} became {generation} in one request"
            );
        }
    }

    fn serve(&mut self, at: BrokerId, request: Request, faults: &mut dyn BrokerFaults) -> Response {
        match request {
            Request::CreateTopic(topic) => self.create_topic(&topic).map(Reply::TopicCreated),
            Request::Metadata { topic } => Ok(Reply::Metadata(self.leaders(&topic))),
            Request::FindCoordinator(key) => self.coordinator(&key).map(Reply::Coordinator),
            Request::ListOffsets { partition, spec } => self.list_offsets(&partition, spec).map(Reply::Offset),
            Request::Fetch { partitions, max_records } => Ok(Reply::Fetched(self.fetch(at, &partitions, max_records))),
            Request::InitProducerId { transactional_id, expected, transaction_timeout } => self
                .init_producer_id(transactional_id.as_deref(), expected, transaction_timeout, faults)
                .map(Reply::ProducerId),
            Request::Produce(produce) => self.produce(produce),
            Request::TxnOffsetCommit(commit) => self.txn_offset_commit(commit).map(|()| Reply::Done),
            Request::EndTxn { transactional_id, producer, commit } => {
                self.end_txn(&transactional_id, producer, commit, faults).map(|bumped| match bumped {
                    Some(identity) => Reply::ProducerId(identity),
                    None => Reply::Done,
                })
            }
            Request::JoinGroup(join) => self.join_group(join).map(Reply::Joined),
            Request::SyncGroup { group, member_id, generation } => {
                self.sync_group(&group, &member_id, generation).map(Reply::Assignment)
            }
            Request::Heartbeat { group, member_id, generation } => {
                self.heartbeat(&group, &member_id, generation).map(|()| Reply::Done)
            }
            Request::LeaveGroup { group, member_id } => self.leave_group(&group, &member_id).map(|()| Reply::Done),
            Request::OffsetFetch { group, partitions } => self.offset_fetch(&group, &partitions).map(Reply::Committed),
            Request::OffsetCommit { group, generation, member_id, offsets } => {
                self.offset_commit(&group, generation, &member_id, &offsets).map(|()| Reply::Done)
            }
        }
    }

    /// Moves broker time to `now` and runs every timer due by then: delayed markers,
    /// transaction timeouts, session and rebalance timeouts, the log cleaner.
    pub fn advance(&mut self, now: Duration, faults: &mut dyn BrokerFaults) {
        self.now = self.now.max(now);
        self.shrink_isrs();
        self.write_due_markers();
        self.expire_transactions(faults);
        self.write_due_markers();
        self.run_group_timers();
        if self.now >= self.last_clean + self.config.cleaner_backoff {
            self.last_clean = self.now;
            self.clean_logs();
        }
        self.check_invariants();
    }

    fn create_topic(&mut self, spec: &NewTopic) -> Result<TopicCreation, BrokerError> {
        validate_new_topic(spec)?;
        if self.topics.contains_key(&spec.name) {
            return Ok(TopicCreation::AlreadyExists);
        }
        let policy = spec.configs.get("cleanup.policy").map_or("delete", String::as_str);
        let compact = policy.split(',').any(|p| p.trim() == "compact");
        let settings = CompactionSettings {
            segment: duration_config(&spec.configs, "segment.ms", self.config.segment_default)?,
            min_lag: duration_config(&spec.configs, "min.compaction.lag.ms", self.config.min_compaction_lag_default)?,
            delete_retention: duration_config(
                &spec.configs,
                "delete.retention.ms",
                self.config.delete_retention_default,
            )?,
        };
        let name: Arc<str> = Arc::from(spec.name.as_str());
        let partitions = (0..spec.partitions as i32).map(|p| PartitionLog::new(name.clone(), p)).collect();
        let max_message_bytes = match spec.configs.get("max.message.bytes") {
            None => MAX_MESSAGE_BYTES_DEFAULT,
            Some(v) => v.parse().map_err(|_| {
                BrokerError::new(ErrorCode::InvalidRequest, format!("max.message.bytes={v} is not a byte count"))
            })?,
        };
        self.place_topic(&spec.name, spec.partitions, spec.replication_factor)?;
        self.topics.insert(
            spec.name.clone(),
            Topic { configs: spec.configs.clone(), compact, settings, max_message_bytes, partitions },
        );
        let configs: Vec<String> = spec.configs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.event(format!("topic {} created: {} partitions [{}]", spec.name, spec.partitions, configs.join(",")));
        self.on_topic_created(&spec.name);
        Ok(TopicCreation::Created)
    }

    /// The partition count of `topic`, `None` when it does not exist.
    pub fn partition_count(&self, topic: &str) -> Option<u32> {
        self.topics.get(topic).map(|t| t.partitions.len() as u32)
    }

    fn partition_counts(&self) -> BTreeMap<String, u32> {
        partition_counts(&self.topics)
    }

    /// A topic, by name.
    pub fn topic(&self, name: &str) -> Option<&Topic> {
        self.topics.get(name)
    }

    /// A partition's log, or UNKNOWN_TOPIC_OR_PARTITION.
    pub fn log(&self, partition: &TopicPartition) -> Result<&PartitionLog, BrokerError> {
        self.find_log(partition)
            .ok_or_else(|| BrokerError::new(ErrorCode::UnknownTopicOrPartition, format!("{partition} does not exist")))
    }

    /// A partition's log, if the partition exists (no error built for one that does not).
    fn find_log(&self, partition: &TopicPartition) -> Option<&PartitionLog> {
        self.topics
            .get(&partition.topic)
            .and_then(|t| usize::try_from(partition.partition).ok().and_then(|p| t.partitions.get(p)))
    }

    fn log_mut(&mut self, partition: &TopicPartition) -> Result<(&mut PartitionLog, CompactionSettings), BrokerError> {
        self.topics
            .get_mut(&partition.topic)
            .and_then(|t| {
                let settings = t.settings;
                usize::try_from(partition.partition).ok().and_then(|p| t.partitions.get_mut(p)).map(|l| (l, settings))
            })
            .ok_or_else(|| BrokerError::new(ErrorCode::UnknownTopicOrPartition, format!("{partition} does not exist")))
    }

    fn list_offsets(&self, partition: &TopicPartition, spec: OffsetSpec) -> Result<i64, BrokerError> {
        let log = self.log(partition)?;
        Ok(match spec {
            OffsetSpec::Earliest => log.log_start(),
            OffsetSpec::LastStable => log.last_stable_offset(),
            OffsetSpec::HighWatermark => log.high_watermark(),
        })
    }

    fn fetch(&self, at: BrokerId, partitions: &[(TopicPartition, i64)], max_records: usize) -> Vec<FetchedPartition> {
        let mut budget = max_records;
        let mut fetched = Vec::with_capacity(partitions.len());
        for (partition, position) in partitions {
            let result = self
                .check_leader(at, partition)
                .and_then(|()| self.log(partition))
                .and_then(|log| log.fetch(*position, budget));
            fetched.push(match result {
                Ok((records, next_offset)) => {
                    budget -= records.len();
                    FetchedPartition { partition: partition.clone(), records, next_offset, error: None }
                }
                Err(error) => FetchedPartition {
                    partition: partition.clone(),
                    records: Vec::new(),
                    next_offset: *position,
                    error: Some(error),
                },
            });
        }
        fetched
    }

    /// Every committed record of a partition below its LSO, as a `read_committed` consumer
    /// reading from the start would see it (for property checks).
    pub fn read_committed(&self, partition: &TopicPartition) -> Result<Vec<RawRecord>, BrokerError> {
        let log = self.log(partition)?;
        log.fetch(log.log_start(), usize::MAX).map(|(records, _)| records)
    }

    fn clean_logs(&mut self) {
        let mut reports = Vec::new();
        for (name, topic) in &mut self.topics {
            if !topic.compact {
                continue;
            }
            for (p, log) in topic.partitions.iter_mut().enumerate() {
                let report = log.compact(self.now, topic.settings);
                if report.removed() > 0 {
                    reports.push((format!("{name}/{p}"), report));
                }
            }
        }
        for (partition, r) in reports {
            self.event(format!(
                "compacted {partition} below {}: {} superseded, {} aborted, {} tombstones removed",
                r.cleanable_end, r.superseded, r.aborted, r.tombstones
            ));
        }
    }

    /// Runs the log cleaner now, whatever its backoff (tests, scenarios).
    pub fn clean_now(&mut self, now: Duration, faults: &mut dyn BrokerFaults) {
        self.advance(now, faults);
        self.last_clean = self.now;
        self.clean_logs();
    }
}
