//! The transaction coordinator: producer ids and epochs, fencing, the transaction state
//! machine, asynchronous markers, transaction timeouts, and offsets sent to transactions, under
//! `transaction.version` 1 or 2 ([`BrokerConfig::transaction_version`](super::BrokerConfig)).
//!
//! States per transactional id: `Empty` → `Ongoing` (first produce or offsets) →
//! `PrepareCommit`/`PrepareAbort` (EndTxn, fencing, timeout) → `CompleteCommit`/`CompleteAbort`
//! once every marker has landed. While a transaction completes, its id gets
//! CONCURRENT_TRANSACTIONS for new work, which is how Kafka keeps the next transaction's records
//! from being decided by a late marker of the previous one.
//!
//! Under transaction.version 2 (KIP-890 part 2) the end of every transaction bumps the
//! producer's epoch: EndTxn answers with the new epoch, the markers carry it (so a batch of the
//! ended transaction still in flight is refused at its partition instead of joining the next
//! transaction), and an EndTxn of the previous epoch is a retry of the producer's own last call:
//! answered with the new epoch when it asks for the same outcome, fenced otherwise. Under 1 the
//! epoch changes only when a producer is fenced (InitProducerId, a timeout) or bumps it itself
//! (KIP-360). Producer-id rollover at the epoch's maximum is not modelled (no run comes near it).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use flechtwerk::kafka::TopicPartition;

use super::log::{Batch, Stamp};
use super::Broker;
use crate::cluster::faults::BrokerFaults;
use crate::cluster::protocol::{
    BrokerError, CoordinatorKey, ErrorCode, ProduceRequest, ProducerIdentity, Reply, TxnOffsetCommitRequest,
};

/// A transaction's state, as the coordinator logs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnStatus {
    /// No transaction since the last InitProducerId.
    Empty,
    /// Open: records or offsets were added.
    Ongoing,
    /// Committing: markers are being written.
    PrepareCommit,
    /// Aborting: markers are being written.
    PrepareAbort,
    /// Committed, every marker written.
    CompleteCommit,
    /// Aborted, every marker written.
    CompleteAbort,
}

impl TxnStatus {
    fn completing(self) -> bool {
        matches!(self, TxnStatus::PrepareCommit | TxnStatus::PrepareAbort)
    }
}

/// A transactional id's coordinator state, for inspection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnView {
    /// Producer id.
    pub producer_id: i64,
    /// Current epoch.
    pub epoch: i16,
    /// State.
    pub status: TxnStatus,
    /// Partitions of the current (or last) transaction.
    pub partitions: Vec<TopicPartition>,
    /// Markers not yet landed.
    pub markers_pending: usize,
}

#[derive(Clone, Debug)]
struct TxnEntry {
    producer_id: i64,
    epoch: i16,
    timeout: Duration,
    status: TxnStatus,
    partitions: BTreeSet<TopicPartition>,
    offsets: BTreeMap<String, BTreeMap<TopicPartition, i64>>,
    started: Duration,
    /// Counts this id's transactions: a late marker only completes its own one.
    serial: u64,
    markers_pending: usize,
    /// The epoch a KIP-360 bump (an InitProducerId naming the current producer) started from:
    /// a retry of that request names it and gets the bumped epoch, not a second bump. A plain
    /// InitProducerId clears it.
    bumped_from: Option<i16>,
    /// transaction.version 2: the epoch whose transaction the producer itself ended, and how
    /// (commit or abort), while that ending is the id's last: a retry of that EndTxn names it.
    ended: Option<(i16, bool)>,
}

#[derive(Clone, Debug)]
enum MarkerTarget {
    Partition(TopicPartition),
    Group { group: String, offsets: BTreeMap<TopicPartition, i64> },
}

impl MarkerTarget {
    fn name(&self) -> String {
        match self {
            MarkerTarget::Partition(tp) => tp.to_string(),
            MarkerTarget::Group { group, .. } => format!("group {group}"),
        }
    }
}

#[derive(Clone, Debug)]
struct PendingMarker {
    transactional_id: String,
    serial: u64,
    producer_id: i64,
    /// The epoch written with the marker (transaction.version 2 only).
    epoch: Option<i16>,
    commit: bool,
    target: MarkerTarget,
}

/// Coordinator state.
#[derive(Debug, Default)]
pub(super) struct Coordinator {
    txns: BTreeMap<String, TxnEntry>,
    next_producer_id: i64,
    /// Delayed markers by (due time, sequence).
    markers: BTreeMap<(Duration, u64), PendingMarker>,
    marker_sequence: u64,
    /// Markers written to a partition but not yet below its high watermark: the coordinator
    /// counts a marker only once every in-sync replica has it (it writes them with acks=all).
    landing: BTreeMap<(TopicPartition, i64), PendingMarker>,
}

/// How soon the coordinator tries again a marker it could not write (no leader for the
/// partition, or the coordinator itself not serving).
const MARKER_RETRY: Duration = Duration::from_millis(100);

impl Coordinator {
    /// Every transactional id's producer id and epoch (for the broker's invariant checks).
    pub(super) fn epochs(&self) -> impl Iterator<Item = (&str, i64, i16)> {
        self.txns.iter().map(|(id, t)| (id.as_str(), t.producer_id, t.epoch))
    }

    fn allocate_producer_id(&mut self) -> i64 {
        self.next_producer_id += 1;
        self.next_producer_id
    }

    /// Whether offsets of `group` for `partition` wait in an unfinished transaction.
    pub(super) fn offsets_pending(&self, group: &str, partition: &TopicPartition) -> bool {
        // Ongoing: the offsets wait for the decision. Decided: they wait only for the group's own
        // marker (in flight below), as on Kafka, where the group coordinator materialises them
        // when that marker reaches it — whatever the transaction's other markers are doing.
        let in_txn = self
            .txns
            .values()
            .any(|t| t.status == TxnStatus::Ongoing && t.offsets.get(group).is_some_and(|o| o.contains_key(partition)));
        let in_flight = self.markers.values().any(|m| {
            matches!(&m.target, MarkerTarget::Group { group: g, offsets } if g == group && offsets.contains_key(partition))
        });
        in_txn || in_flight
    }
}

fn invalid_end(id: &str, commit: bool, status: TxnStatus) -> BrokerError {
    BrokerError::new(
        ErrorCode::InvalidTxnState,
        format!("transactional id {id}: cannot {} in state {status:?}", if commit { "commit" } else { "abort" }),
    )
}

fn concurrent(id: &str) -> BrokerError {
    BrokerError::new(
        ErrorCode::ConcurrentTransactions,
        format!("transactional id {id}: the previous transaction is still completing"),
    )
}

impl Broker {
    /// A transactional id's coordinator state.
    pub fn transaction(&self, transactional_id: &str) -> Option<TxnView> {
        self.txn.txns.get(transactional_id).map(|t| TxnView {
            producer_id: t.producer_id,
            epoch: t.epoch,
            status: t.status,
            partitions: t.partitions.iter().cloned().collect(),
            markers_pending: t.markers_pending,
        })
    }

    pub(super) fn init_producer_id(
        &mut self,
        transactional_id: Option<&str>,
        expected: Option<ProducerIdentity>,
        timeout: Duration,
        faults: &mut dyn BrokerFaults,
    ) -> Result<ProducerIdentity, BrokerError> {
        if timeout.is_zero() || timeout > self.config.transaction_timeout_max {
            return Err(BrokerError::new(
                ErrorCode::InvalidTransactionTimeout,
                format!("transaction timeout {timeout:?} outside (0, {:?}]", self.config.transaction_timeout_max),
            ));
        }
        let Some(id) = transactional_id else {
            let producer_id = self.txn.allocate_producer_id();
            self.event(format!("producer id {producer_id} (idempotent)"));
            return Ok(ProducerIdentity { id: producer_id, epoch: 0 });
        };
        if !self.txn.txns.contains_key(id) {
            let producer_id = self.txn.allocate_producer_id();
            let entry = TxnEntry {
                producer_id,
                epoch: -1,
                timeout,
                status: TxnStatus::Empty,
                partitions: BTreeSet::new(),
                offsets: BTreeMap::new(),
                started: self.now,
                serial: 0,
                markers_pending: 0,
                bumped_from: None,
                ended: None,
            };
            self.txn.txns.insert(id.to_owned(), entry);
        }
        let entry = self.txn.txns.get_mut(id).expect("inserted above");
        // KIP-360: a producer bumping its own epoch names itself; the coordinator refuses a
        // producer that is no longer current (a zombie must not fence the new owner), and
        // answers a retry of its own bump with the bumped epoch.
        entry.ended = None;
        match expected {
            None => entry.bumped_from = None,
            Some(expected) if expected.id != entry.producer_id => {
                return Err(BrokerError::new(
                    ErrorCode::InvalidProducerIdMapping,
                    format!("transactional id {id}: producer id {} is not the current one", expected.id),
                ));
            }
            Some(expected) if expected.epoch == entry.epoch => entry.bumped_from = Some(expected.epoch),
            Some(expected) if entry.bumped_from == Some(expected.epoch) => {
                return match entry.status {
                    TxnStatus::PrepareCommit | TxnStatus::PrepareAbort => Err(concurrent(id)),
                    TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort => {
                        entry.status = TxnStatus::Empty;
                        entry.timeout = timeout;
                        Ok(ProducerIdentity { id: entry.producer_id, epoch: entry.epoch })
                    }
                    TxnStatus::Ongoing => Err(BrokerError::new(
                        ErrorCode::ProducerFenced,
                        format!("transactional id {id}: epoch {} is fenced", expected.epoch),
                    )),
                };
            }
            Some(expected) => {
                return Err(BrokerError::new(
                    ErrorCode::ProducerFenced,
                    format!("transactional id {id}: epoch {} is fenced (current {})", expected.epoch, entry.epoch),
                ));
            }
        }
        match entry.status {
            TxnStatus::PrepareCommit | TxnStatus::PrepareAbort => Err(concurrent(id)),
            TxnStatus::Ongoing => {
                entry.epoch += 1;
                let epoch = entry.epoch;
                self.event(format!(
                    "txn {id}: fenced by InitProducerId (epoch now {epoch}), aborting its open transaction"
                ));
                self.begin_completion(id, false, faults);
                Err(concurrent(id))
            }
            TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort => {
                entry.epoch += 1;
                entry.status = TxnStatus::Empty;
                entry.timeout = timeout;
                let identity = ProducerIdentity { id: entry.producer_id, epoch: entry.epoch };
                self.event(format!("txn {id}: producer {} epoch {} initialized", identity.id, identity.epoch));
                Ok(identity)
            }
        }
    }

    /// Fencing: the producer must be the id's current producer id and epoch.
    fn check_producer(&self, id: &str, producer: ProducerIdentity) -> Result<(), BrokerError> {
        let Some(entry) = self.txn.txns.get(id) else {
            return Err(BrokerError::new(
                ErrorCode::InvalidProducerIdMapping,
                format!("transactional id {id} is unknown (no InitProducerId)"),
            ));
        };
        if entry.producer_id != producer.id {
            return Err(BrokerError::new(
                ErrorCode::InvalidProducerIdMapping,
                format!("transactional id {id} belongs to producer {}, not {}", entry.producer_id, producer.id),
            ));
        }
        if producer.epoch < entry.epoch {
            return Err(BrokerError::new(
                ErrorCode::ProducerFenced,
                format!("transactional id {id}: epoch {} fenced by epoch {}", producer.epoch, entry.epoch),
            ));
        }
        if producer.epoch > entry.epoch {
            return Err(BrokerError::new(
                ErrorCode::InvalidTxnState,
                format!(
                    "transactional id {id}: epoch {} is newer than the coordinator's {}",
                    producer.epoch, entry.epoch
                ),
            ));
        }
        Ok(())
    }

    /// Makes the id's transaction `Ongoing` (starting one if none is), unless one is completing.
    fn ensure_ongoing(&mut self, id: &str) -> Result<(), BrokerError> {
        let now = self.now;
        let entry = self.txn.txns.get_mut(id).expect("checked by check_producer");
        match entry.status {
            TxnStatus::Ongoing => Ok(()),
            TxnStatus::PrepareCommit | TxnStatus::PrepareAbort => Err(concurrent(id)),
            TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort => {
                entry.status = TxnStatus::Ongoing;
                entry.started = now;
                entry.serial += 1;
                entry.partitions.clear();
                entry.offsets.clear();
                entry.ended = None;
                let (pid, epoch, serial) = (entry.producer_id, entry.epoch, entry.serial);
                self.event(format!("txn {id}: begin #{serial} (producer {pid} epoch {epoch})"));
                Ok(())
            }
        }
    }

    pub(super) fn produce(&mut self, request: ProduceRequest) -> Result<Reply, BrokerError> {
        let ProduceRequest { producer, transactional_id, partition, base_sequence, records } = request;
        let (compacted, segment, max_bytes) = {
            let topic = self.topics.get(&partition.topic);
            (
                topic.is_some_and(|t| t.compact),
                topic.map_or(Duration::ZERO, |t| t.settings.segment),
                topic.map_or(super::MAX_MESSAGE_BYTES_DEFAULT, |t| t.max_message_bytes),
            )
        };
        self.log(&partition)?;
        let batch_bytes: usize = records.iter().map(|r| r.size_bytes()).sum();
        if batch_bytes > max_bytes {
            return Err(BrokerError::new(
                ErrorCode::MessageTooLarge,
                format!("{partition}: a batch of {batch_bytes} bytes exceeds max.message.bytes {max_bytes}"),
            ));
        }
        if compacted && records.iter().any(|r| r.key.is_none()) {
            return Err(BrokerError::new(
                ErrorCode::InvalidRecord,
                format!("{partition}: a compacted topic does not accept records without a key"),
            ));
        }
        if let Some(id) = &transactional_id {
            self.check_producer(id, producer)?;
            self.ensure_ongoing(id)?;
            self.txn.txns.get_mut(id).expect("checked").partitions.insert(partition.clone());
        }
        let stamp = Stamp { now: self.now, now_ms: self.now_ms(), segment };
        let count = records.len();
        let batch = Batch { producer, transactional: transactional_id.is_some(), base_sequence, records };
        let (log, _) = self.log_mut(&partition)?;
        let appended = log.append(batch, stamp)?;
        self.appends += u64::from(!appended.duplicate);
        self.update_high_watermark(&partition);
        let txn = transactional_id.map_or(String::new(), |id| format!(" txn {id}"));
        let last = appended.base_offset + count as i64 - 1;
        if appended.duplicate {
            self.event(format!(
                "produce {partition} duplicate batch @{}..{last} seq {base_sequence}{txn}",
                appended.base_offset
            ));
        } else {
            self.event(format!(
                "produce {partition} @{}..{last} producer {} epoch {}{txn}",
                appended.base_offset, producer.id, producer.epoch
            ));
        }
        Ok(Reply::Produced { base_offset: appended.base_offset })
    }

    pub(super) fn txn_offset_commit(&mut self, request: TxnOffsetCommitRequest) -> Result<(), BrokerError> {
        let TxnOffsetCommitRequest { transactional_id: id, producer, group, generation, member_id, offsets } = request;
        self.check_producer(&id, producer)?;
        if self.txn.txns[&id].status.completing() {
            return Err(concurrent(&id));
        }
        self.check_group_member(&group, generation, &member_id, true)?;
        self.ensure_ongoing(&id)?;
        let entry = self.txn.txns.get_mut(&id).expect("checked");
        let pending = entry.offsets.entry(group.clone()).or_default();
        pending.extend(offsets.iter().cloned());
        let listed: Vec<String> = offsets.iter().map(|(tp, o)| format!("{tp}={o}")).collect();
        self.event(format!("txn {id}: offsets of group {group} pending: {}", listed.join(", ")));
        Ok(())
    }

    /// EndTxn. Under transaction.version 2 returns the producer's new (bumped) identity.
    pub(super) fn end_txn(
        &mut self,
        id: &str,
        producer: ProducerIdentity,
        commit: bool,
        faults: &mut dyn BrokerFaults,
    ) -> Result<Option<ProducerIdentity>, BrokerError> {
        if self.config.transaction_version >= 2 {
            return self.end_txn_v2(id, producer, commit, faults);
        }
        self.check_producer(id, producer)?;
        let status = self.txn.txns[id].status;
        match (status, commit) {
            (TxnStatus::Ongoing, _) => {
                self.begin_completion(id, commit, faults);
                Ok(None)
            }
            (TxnStatus::PrepareCommit | TxnStatus::CompleteCommit, true)
            | (TxnStatus::PrepareAbort | TxnStatus::CompleteAbort, false) => Ok(None),
            _ => Err(invalid_end(id, commit, status)),
        }
    }

    /// EndTxn under transaction.version 2: the current epoch ends its ongoing transaction and
    /// gets the next epoch (the markers carry it); the previous epoch is a retry of that call.
    fn end_txn_v2(
        &mut self,
        id: &str,
        producer: ProducerIdentity,
        commit: bool,
        faults: &mut dyn BrokerFaults,
    ) -> Result<Option<ProducerIdentity>, BrokerError> {
        let retry =
            self.txn.txns.get(id).is_some_and(|t| {
                t.producer_id == producer.id && t.ended.is_some_and(|(epoch, _)| epoch == producer.epoch)
            });
        if retry {
            let entry = &self.txn.txns[id];
            let (ended_commit, status) = (entry.ended.is_some_and(|(_, c)| c), entry.status);
            let current = ProducerIdentity { id: entry.producer_id, epoch: entry.epoch };
            return match status {
                _ if ended_commit != commit => Err(invalid_end(id, commit, status)),
                TxnStatus::PrepareCommit | TxnStatus::PrepareAbort => Err(concurrent(id)),
                _ => {
                    self.event(format!(
                        "txn {id}: EndTxn retry of epoch {}, answered epoch {}",
                        producer.epoch, current.epoch
                    ));
                    Ok(Some(current))
                }
            };
        }
        self.check_producer(id, producer)?;
        let status = self.txn.txns[id].status;
        if status != TxnStatus::Ongoing {
            return Err(invalid_end(id, commit, status));
        }
        let entry = self.txn.txns.get_mut(id).expect("checked");
        entry.ended = Some((entry.epoch, commit));
        entry.epoch += 1;
        let bumped = ProducerIdentity { id: entry.producer_id, epoch: entry.epoch };
        self.event(format!("txn {id}: epoch bumped to {} by EndTxn", bumped.epoch));
        self.begin_completion(id, commit, faults);
        Ok(Some(bumped))
    }

    /// Moves an ongoing transaction to Prepare{Commit,Abort} and writes (or schedules) its
    /// markers: one per partition, one per group whose offsets it carries.
    fn begin_completion(&mut self, id: &str, commit: bool, faults: &mut dyn BrokerFaults) {
        let entry = self.txn.txns.get_mut(id).expect("a known transactional id");
        debug_assert_eq!(entry.status, TxnStatus::Ongoing);
        entry.status = if commit { TxnStatus::PrepareCommit } else { TxnStatus::PrepareAbort };
        let mut targets: Vec<MarkerTarget> = entry.partitions.iter().cloned().map(MarkerTarget::Partition).collect();
        for (group, offsets) in &entry.offsets {
            targets.push(MarkerTarget::Group { group: group.clone(), offsets: offsets.clone() });
        }
        entry.markers_pending = targets.len();
        let (serial, producer_id) = (entry.serial, entry.producer_id);
        // Under transaction.version 2 the markers carry the epoch current at the decision (the
        // bumped one: EndTxn, a fence and a timeout all bump before deciding).
        let epoch = (self.config.transaction_version >= 2).then_some(entry.epoch);
        let names: Vec<String> = targets.iter().map(MarkerTarget::name).collect();
        let verb = if commit { "commit" } else { "abort" };
        self.event(format!("txn {id}: prepare {verb} #{serial} [{}]", names.join(", ")));
        let early = faults.complete_before_markers(id);
        for target in targets {
            let delay = faults.marker_delay(id, &target.name());
            let marker = PendingMarker { transactional_id: id.to_owned(), serial, producer_id, epoch, commit, target };
            if delay.is_zero() && self.marker_deliverable(&marker) {
                self.apply_marker(marker);
            } else if delay.is_zero() {
                self.retry_marker(marker);
            } else {
                let due = self.now + delay;
                self.event(format!("txn {id}: {verb} marker on {} delayed to {due:?}", marker.target.name()));
                self.txn.marker_sequence += 1;
                self.txn.markers.insert((due, self.txn.marker_sequence), marker);
            }
        }
        let entry = &self.txn.txns[id];
        let (completing, pending) = (entry.status.completing(), entry.markers_pending);
        if completing && (pending == 0 || early) {
            if pending > 0 {
                self.event(format!("txn {id}: BROKER BUG MODE: completing before {pending} markers landed"));
            }
            self.complete(id);
        }
    }

    fn complete(&mut self, id: &str) {
        let entry = self.txn.txns.get_mut(id).expect("known");
        let commit = entry.status == TxnStatus::PrepareCommit;
        entry.status = if commit { TxnStatus::CompleteCommit } else { TxnStatus::CompleteAbort };
        entry.offsets.clear();
        let serial = entry.serial;
        self.event(format!("txn {id}: complete {} #{serial}", if commit { "commit" } else { "abort" }));
    }

    /// Whether the coordinator can write `marker` now: it serves, and the marker's partition
    /// has a leader (or its group's coordinator serves).
    fn marker_deliverable(&self, marker: &PendingMarker) -> bool {
        let coordinator = CoordinatorKey::Transaction(marker.transactional_id.clone());
        self.coordinator_ready(&coordinator).is_ok()
            && match &marker.target {
                MarkerTarget::Partition(tp) => self.placement(tp).is_none_or(|p| p.leader.is_some()),
                MarkerTarget::Group { group, .. } => {
                    self.coordinator_ready(&CoordinatorKey::Group(group.clone())).is_ok()
                }
            }
    }

    fn retry_marker(&mut self, marker: PendingMarker) {
        self.txn.marker_sequence += 1;
        self.txn.markers.insert((self.now + MARKER_RETRY, self.txn.marker_sequence), marker);
    }

    fn apply_marker(&mut self, marker: PendingMarker) {
        let verb = if marker.commit { "COMMIT" } else { "ABORT" };
        let (id, serial) = (marker.transactional_id.clone(), marker.serial);
        match &marker.target {
            MarkerTarget::Partition(tp) => {
                let (now, tp) = (self.now, tp.clone());
                if let Ok((log, settings)) = self.log_mut(&tp) {
                    let offset =
                        log.write_marker(marker.producer_id, marker.commit, marker.epoch, now, settings.segment);
                    self.appends += 1;
                    self.event(format!("marker {verb} {tp} @{offset} (txn {id} #{serial})"));
                    self.txn.landing.insert((tp.clone(), offset), marker);
                    self.update_high_watermark(&tp);
                    return;
                }
            }
            MarkerTarget::Group { group, offsets } => {
                if marker.commit {
                    self.commit_group_offsets(group, offsets);
                }
                let listed: Vec<String> = offsets.iter().map(|(tp, o)| format!("{tp}={o}")).collect();
                self.event(format!("marker {verb} group {group} [{}] (txn {id} #{serial})", listed.join(", ")));
            }
        }
        self.marker_landed(&id, serial);
    }

    fn marker_landed(&mut self, id: &str, serial: u64) {
        let Some(entry) = self.txn.txns.get_mut(id) else { return };
        if entry.serial == serial && entry.status.completing() {
            entry.markers_pending -= 1;
            if entry.markers_pending == 0 {
                self.complete(id);
            }
        }
    }

    /// Counts the markers of `partition` now below its high watermark as written.
    pub(super) fn land_markers(&mut self, partition: &TopicPartition) {
        let Ok(log) = self.log(partition) else { return };
        let high_watermark = log.high_watermark();
        let landed: Vec<(TopicPartition, i64)> = self
            .txn
            .landing
            .range((partition.clone(), i64::MIN)..(partition.clone(), high_watermark))
            .map(|(key, _)| key.clone())
            .collect();
        for key in landed {
            let marker = self.txn.landing.remove(&key).expect("listed");
            self.marker_landed(&marker.transactional_id, marker.serial);
        }
    }

    /// A new leader lacked these markers of `partition`: the coordinator, which never had them
    /// acknowledged, writes them again.
    pub(super) fn markers_truncated(&mut self, partition: &TopicPartition, markers: &[(i64, i64, bool)]) {
        for &(offset, _, _) in markers {
            let Some(marker) = self.txn.landing.remove(&(partition.clone(), offset)) else { continue };
            self.event(format!(
                "txn {}: marker on {partition} @{offset} truncated, written again (#{})",
                marker.transactional_id, marker.serial
            ));
            self.retry_marker(marker);
        }
    }

    pub(super) fn write_due_markers(&mut self) {
        let mut undeliverable = Vec::new();
        while let Some(entry) = self.txn.markers.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            let marker = entry.remove();
            if self.marker_deliverable(&marker) {
                self.apply_marker(marker);
            } else {
                undeliverable.push(marker);
            }
        }
        for marker in undeliverable {
            self.retry_marker(marker);
        }
    }

    /// Aborts every ongoing transaction past its timeout, bumping its epoch (which fences the
    /// producer, as Kafka's coordinator does).
    pub(super) fn expire_transactions(&mut self, faults: &mut dyn BrokerFaults) {
        let now = self.now;
        let expired: Vec<String> = self
            .txn
            .txns
            .iter()
            .filter(|(_, t)| t.status == TxnStatus::Ongoing && now >= t.started + t.timeout)
            .map(|(id, _)| id.clone())
            .filter(|id| self.coordinator_ready(&CoordinatorKey::Transaction(id.clone())).is_ok())
            .collect();
        for id in expired {
            let entry = self.txn.txns.get_mut(&id).expect("listed");
            entry.epoch += 1;
            let (timeout, epoch) = (entry.timeout, entry.epoch);
            self.event(format!("txn {id}: timed out after {timeout:?}, aborting; epoch bumped to {epoch}"));
            self.begin_completion(&id, false, faults);
        }
    }

    pub(super) fn offsets_pending(&self, group: &str, partition: &TopicPartition) -> bool {
        self.txn.offsets_pending(group, partition)
    }
}
