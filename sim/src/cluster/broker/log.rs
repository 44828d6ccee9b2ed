//! One partition's log: data and control records at offsets, the high watermark, the last
//! stable offset, idempotent-producer sequence state, the aborted-transaction index, the
//! `read_committed` fetch, and compaction.

use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use flechtwerk::wire::RawRecord;

use crate::cluster::protocol::{BrokerError, ErrorCode, NewRecord, ProducerIdentity};

/// Batches per producer and partition remembered for duplicate detection (Kafka keeps 5).
pub const PRODUCER_BATCHES_MAX: usize = 5;

/// A data record as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataRecord {
    /// Producer id that wrote it.
    pub producer_id: i64,
    /// Written inside a transaction.
    pub transactional: bool,
    /// Key.
    pub key: Option<Bytes>,
    /// Value (`None`: tombstone).
    pub value: Option<Bytes>,
    /// Headers.
    pub headers: Vec<flechtwerk::wire::Header>,
    /// CreateTime, epoch milliseconds.
    pub timestamp_ms: i64,
}

/// What sits at an offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// A data record.
    Data(DataRecord),
    /// A transaction marker (control record).
    Marker {
        /// Producer id whose transaction it ends.
        producer_id: i64,
        /// COMMIT (`true`) or ABORT.
        commit: bool,
    },
}

/// One stored entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its offset (never renumbered).
    pub offset: i64,
    /// Data or marker.
    pub body: Body,
    /// When it was appended (broker time).
    pub appended_at: Duration,
    /// For a tombstone the cleaner has seen: when it may be removed.
    pub delete_horizon: Option<Duration>,
}

#[derive(Clone, Debug)]
struct SequenceState {
    epoch: i16,
    next_sequence: i32,
    /// (first sequence, record count, base offset) of the latest batches.
    recent: VecDeque<(i32, usize, i64)>,
}

/// Compaction settings of one topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactionSettings {
    /// `segment.ms`: the active segment (never cleaned) rolls when older than this.
    pub segment: Duration,
    /// `min.compaction.lag.ms`: records younger than this are not cleaned.
    pub min_lag: Duration,
    /// `delete.retention.ms`: a tombstone survives this long after the cleaner first saw it.
    pub delete_retention: Duration,
}

/// What one compaction pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// The cleaned range ended here (exclusive).
    pub cleanable_end: i64,
    /// Superseded records removed.
    pub superseded: usize,
    /// Aborted records removed.
    pub aborted: usize,
    /// Tombstones removed past their delete horizon.
    pub tombstones: usize,
}

impl CompactionReport {
    /// Records removed in total.
    pub fn removed(&self) -> usize {
        self.superseded + self.aborted + self.tombstones
    }
}

/// A producer's batch for one partition.
#[derive(Clone, Debug)]
pub struct Batch {
    /// Producer id and epoch.
    pub producer: ProducerIdentity,
    /// Written inside a transaction.
    pub transactional: bool,
    /// Sequence number of the first record.
    pub base_sequence: i32,
    /// The records.
    pub records: Vec<NewRecord>,
}

/// When an append happens: broker time, wall-clock milliseconds for records without a
/// timestamp, and the topic's `segment.ms`.
#[derive(Clone, Copy, Debug)]
pub struct Stamp {
    /// Broker time.
    pub now: Duration,
    /// Wall clock, epoch milliseconds.
    pub now_ms: i64,
    /// `segment.ms` of the topic.
    pub segment: Duration,
}

/// Outcome of an append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    /// Offset of the batch's first record.
    pub base_offset: i64,
    /// The batch was a retry of one already appended: nothing was written.
    pub duplicate: bool,
}

/// A non-duplicate batch as appended: what rebuilds the idempotence state after a truncation.
#[derive(Clone, Copy, Debug)]
struct BatchMeta {
    base_offset: i64,
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
    count: usize,
}

/// A marker as written: what reopens its transaction if a truncation removes it.
#[derive(Clone, Copy, Debug)]
struct MarkerMeta {
    offset: i64,
    producer_id: i64,
    commit: bool,
    /// The epoch the marker was written with, under transaction.version 2 (it fences the
    /// producer's earlier epochs here); `None` under 1.
    epoch: Option<i16>,
    /// First offset of the transaction it closed here, if one was open.
    first: Option<i64>,
}

/// What [`PartitionLog::truncate_to`] removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Truncated {
    /// Entries removed.
    pub entries: usize,
    /// Markers removed: (offset, producer id, commit).
    pub markers: Vec<(i64, i64, bool)>,
}

/// One partition's log: the leader's copy (followers hold prefixes of it, see
/// `broker::replicas`).
#[derive(Clone, Debug)]
pub struct PartitionLog {
    topic: Arc<str>,
    partition: i32,
    entries: Vec<Entry>,
    next_offset: i64,
    /// The high watermark: below it, every in-sync replica has the records.
    high_watermark: i64,
    batches: Vec<BatchMeta>,
    markers: Vec<MarkerMeta>,
    /// Producer id -> first offset of its open transaction on this partition.
    open: BTreeMap<i64, i64>,
    /// Producer id -> aborted ranges `[first, marker]`, in offset order.
    aborted: BTreeMap<i64, Vec<(i64, i64)>>,
    sequences: BTreeMap<i64, SequenceState>,
    segment_base: i64,
    segment_created: Duration,
    /// How many leading entries [`PartitionLog::check_order`] found in increasing offset
    /// order: the next check resumes there (an append only adds entries after them; a
    /// truncation shortens the prefix; a compaction pass, which rewrites the entries, empties
    /// it).
    ordered: Cell<usize>,
}

impl PartitionLog {
    /// An empty log.
    pub fn new(topic: Arc<str>, partition: i32) -> Self {
        PartitionLog {
            topic,
            partition,
            entries: Vec::new(),
            next_offset: 0,
            high_watermark: 0,
            batches: Vec::new(),
            markers: Vec::new(),
            open: BTreeMap::new(),
            aborted: BTreeMap::new(),
            sequences: BTreeMap::new(),
            segment_base: 0,
            segment_created: Duration::ZERO,
            ordered: Cell::new(0),
        }
    }

    /// The log start offset (compaction never moves it; there is no retention).
    pub fn log_start(&self) -> i64 {
        0
    }

    /// The high watermark: every in-sync replica has the records below it, which is as far as
    /// consumers read.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// The log end offset: the offset the next append gets.
    pub fn log_end_offset(&self) -> i64 {
        self.next_offset
    }

    /// Moves the high watermark up to `offset` (never down, never past the log end).
    pub fn advance_high_watermark(&mut self, offset: i64) {
        self.high_watermark = self.high_watermark.max(offset.min(self.next_offset));
    }

    /// The last stable offset: the first offset of the earliest open transaction, capped at the
    /// high watermark.
    pub fn last_stable_offset(&self) -> i64 {
        self.open.values().copied().min().unwrap_or(self.next_offset).min(self.high_watermark)
    }

    /// The stored entries (compaction leaves gaps).
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether the stored offsets increase: the broker's invariant check after every step.
    /// Checks only the entries after the prefix an earlier call found ordered, so a run's checks
    /// cost what it appends, not its log's length on every request.
    pub fn check_order(&self) -> bool {
        let from = self.ordered.get().saturating_sub(1);
        let ordered = self.entries[from..].windows(2).all(|pair| pair[0].offset < pair[1].offset);
        if ordered {
            self.ordered.set(self.entries.len());
        }
        ordered
    }

    /// Producer ids with an open transaction here, with its first offset.
    pub fn open_transactions(&self) -> &BTreeMap<i64, i64> {
        &self.open
    }

    fn is_aborted(&self, producer_id: i64, offset: i64) -> bool {
        let Some(ranges) = self.aborted.get(&producer_id) else { return false };
        let i = ranges.partition_point(|(_, last)| *last < offset);
        ranges.get(i).is_some_and(|(first, _)| *first <= offset)
    }

    /// Whether the entry at `offset` (if data) is part of an aborted transaction.
    pub fn entry_aborted(&self, entry: &Entry) -> bool {
        match &entry.body {
            Body::Data(data) => data.transactional && self.is_aborted(data.producer_id, entry.offset),
            Body::Marker { .. } => false,
        }
    }

    fn roll_segment_if_due(&mut self, now: Duration, segment: Duration) {
        if self.next_offset == self.segment_base {
            self.segment_created = now;
        } else if now >= self.segment_created + segment {
            self.segment_base = self.next_offset;
            self.segment_created = now;
        }
    }

    fn push(&mut self, body: Body, now: Duration) -> i64 {
        let offset = self.next_offset;
        self.entries.push(Entry { offset, body, appended_at: now, delete_horizon: None });
        self.next_offset += 1;
        offset
    }

    /// Checks an idempotent batch's sequence: `Ok(Some(base))` for a duplicate of an appended
    /// batch, `Ok(None)` to append.
    fn check_sequence(
        &self,
        producer: ProducerIdentity,
        base_sequence: i32,
        count: usize,
    ) -> Result<Option<i64>, BrokerError> {
        let context = format!("{}/{} producer {} epoch {}", self.topic, self.partition, producer.id, producer.epoch);
        let expected = match self.sequences.get(&producer.id) {
            None => 0,
            Some(state) if producer.epoch < state.epoch => {
                return Err(BrokerError::new(
                    ErrorCode::InvalidProducerEpoch,
                    format!("{context}: epoch {} is current here", state.epoch),
                ))
            }
            Some(state) if producer.epoch > state.epoch => 0,
            Some(state) => {
                if let Some(&(_, _, base)) =
                    state.recent.iter().find(|(first, n, _)| *first == base_sequence && *n == count)
                {
                    return Ok(Some(base));
                }
                state.next_sequence
            }
        };
        if base_sequence != expected {
            return Err(BrokerError::new(
                ErrorCode::OutOfOrderSequenceNumber,
                format!("{context}: sequence {base_sequence}, expected {expected}"),
            ));
        }
        Ok(None)
    }

    /// Appends a producer's batch. Transactional records join the producer's open transaction
    /// on this partition (opening one at the first record if none is open).
    pub fn append(&mut self, batch: Batch, at: Stamp) -> Result<Appended, BrokerError> {
        let Batch { producer, transactional, base_sequence, records } = batch;
        let Stamp { now, now_ms, segment } = at;
        assert!(!records.is_empty(), "an empty batch is never sent");
        let count = records.len();
        if let Some(base_offset) = self.check_sequence(producer, base_sequence, count)? {
            return Ok(Appended { base_offset, duplicate: true });
        }
        self.roll_segment_if_due(now, segment);
        let base_offset = self.next_offset;
        if transactional {
            self.open.entry(producer.id).or_insert(base_offset);
        }
        for record in records {
            let data = DataRecord {
                producer_id: producer.id,
                transactional,
                key: record.key,
                value: record.value,
                headers: record.headers,
                timestamp_ms: record.timestamp_ms.unwrap_or(now_ms),
            };
            self.push(Body::Data(data), now);
        }
        let state = self.sequences.entry(producer.id).or_insert(SequenceState {
            epoch: producer.epoch,
            next_sequence: 0,
            recent: VecDeque::new(),
        });
        if state.epoch != producer.epoch {
            *state = SequenceState { epoch: producer.epoch, next_sequence: 0, recent: VecDeque::new() };
        }
        state.next_sequence = base_sequence + count as i32;
        state.recent.push_back((base_sequence, count, base_offset));
        if state.recent.len() > PRODUCER_BATCHES_MAX {
            state.recent.pop_front();
        }
        self.batches.push(BatchMeta {
            base_offset,
            producer_id: producer.id,
            epoch: producer.epoch,
            base_sequence,
            count,
        });
        Ok(Appended { base_offset, duplicate: false })
    }

    /// Writes a COMMIT or ABORT marker for `producer_id`: it closes the producer's open
    /// transaction here (whatever records it holds), and an ABORT makes them invisible. Under
    /// transaction.version 2 the marker carries the producer's bumped `epoch`, which becomes the
    /// producer's epoch here: a batch of an earlier epoch still in flight is refused
    /// (INVALID_PRODUCER_EPOCH) instead of joining a later transaction. Returns the marker's
    /// offset.
    pub fn write_marker(
        &mut self,
        producer_id: i64,
        commit: bool,
        epoch: Option<i16>,
        now: Duration,
        segment: Duration,
    ) -> i64 {
        self.roll_segment_if_due(now, segment);
        let offset = self.push(Body::Marker { producer_id, commit }, now);
        let first = self.open.remove(&producer_id);
        if let (Some(first), false) = (first, commit) {
            self.aborted.entry(producer_id).or_default().push((first, offset));
        }
        if let Some(epoch) = epoch {
            self.raise_epoch(producer_id, epoch);
        }
        self.markers.push(MarkerMeta { offset, producer_id, commit, epoch, first });
        offset
    }

    /// Makes `epoch` the producer's epoch here if it is newer: sequences start again at 0.
    fn raise_epoch(&mut self, producer_id: i64, epoch: i16) {
        let state = self.sequences.entry(producer_id).or_insert(SequenceState {
            epoch,
            next_sequence: 0,
            recent: VecDeque::new(),
        });
        if state.epoch < epoch {
            *state = SequenceState { epoch, next_sequence: 0, recent: VecDeque::new() };
        }
    }

    /// Removes every entry at or past `offset` (at or above the high watermark): what a
    /// replica does when a leader that lacks them takes over. Transactions whose marker goes
    /// are open again, and the idempotence state is what it was before the removed batches,
    /// so that a producer's retry of them is appended anew.
    pub fn truncate_to(&mut self, offset: i64) -> Truncated {
        assert!(
            offset >= self.high_watermark,
            "{}/{}: truncating to {offset}, below the high watermark {}",
            self.topic,
            self.partition,
            self.high_watermark
        );
        let mut truncated = Truncated::default();
        if offset >= self.next_offset {
            return truncated;
        }
        while let Some(marker) = self.markers.last().copied().filter(|m| m.offset >= offset) {
            self.markers.pop();
            truncated.markers.push((marker.offset, marker.producer_id, marker.commit));
            let Some(first) = marker.first else { continue };
            if !marker.commit {
                let ranges = self.aborted.get_mut(&marker.producer_id).expect("an abort marker's range");
                assert_eq!(ranges.pop(), Some((first, marker.offset)), "the last aborted range is the marker's");
                if ranges.is_empty() {
                    self.aborted.remove(&marker.producer_id);
                }
            }
            self.open.insert(marker.producer_id, first);
        }
        self.open.retain(|_, first| *first < offset);
        let mut producers = std::collections::BTreeSet::new();
        while let Some(batch) = self.batches.last().copied().filter(|b| b.base_offset >= offset) {
            self.batches.pop();
            producers.insert(batch.producer_id);
        }
        for producer_id in producers {
            let mine: Vec<BatchMeta> = self.batches.iter().filter(|b| b.producer_id == producer_id).copied().collect();
            match mine.last() {
                None => {
                    self.sequences.remove(&producer_id);
                }
                Some(last) => {
                    let same_epoch: Vec<&BatchMeta> = mine.iter().filter(|b| b.epoch == last.epoch).collect();
                    let recent: VecDeque<(i32, usize, i64)> = same_epoch
                        [same_epoch.len().saturating_sub(PRODUCER_BATCHES_MAX)..]
                        .iter()
                        .map(|b| (b.base_sequence, b.count, b.base_offset))
                        .collect();
                    let next_sequence = last.base_sequence + last.count as i32;
                    self.sequences.insert(producer_id, SequenceState { epoch: last.epoch, next_sequence, recent });
                }
            }
            // A kept marker of a later epoch (transaction.version 2) still fences the earlier.
            let marked = self.markers.iter().filter(|m| m.producer_id == producer_id).filter_map(|m| m.epoch).max();
            if let Some(epoch) = marked {
                self.raise_epoch(producer_id, epoch);
            }
        }
        let before = self.entries.len();
        self.entries.retain(|e| e.offset < offset);
        self.ordered.set(self.ordered.get().min(self.entries.len()));
        truncated.entries = before - self.entries.len();
        self.next_offset = offset;
        self.segment_base = self.segment_base.min(offset);
        truncated
    }

    /// `read_committed` fetch of at most `max_records` from `position`: committed data records
    /// below the LSO, and the position after them (past skipped markers and aborted records).
    pub fn fetch(&self, position: i64, max_records: usize) -> Result<(Vec<RawRecord>, i64), BrokerError> {
        if position < self.log_start() || position > self.next_offset {
            return Err(BrokerError::new(
                ErrorCode::OffsetOutOfRange,
                format!(
                    "{}/{}: offset {position} outside [{}, {}]",
                    self.topic,
                    self.partition,
                    self.log_start(),
                    self.next_offset
                ),
            ));
        }
        let stable = self.last_stable_offset();
        let mut records = Vec::new();
        let start = self.entries.partition_point(|e| e.offset < position);
        for entry in self.entries[start..].iter().take_while(|e| e.offset < stable) {
            if records.len() == max_records {
                return Ok((records, entry.offset));
            }
            let Body::Data(data) = &entry.body else { continue };
            if self.entry_aborted(entry) {
                continue;
            }
            records.push(RawRecord {
                topic: self.topic.clone(),
                partition: self.partition,
                offset: entry.offset,
                timestamp_ms: Some(data.timestamp_ms),
                key: data.key.clone(),
                value: data.value.clone(),
                headers: data.headers.clone(),
            });
        }
        Ok((records, position.max(stable)))
    }

    /// One cleaner pass (`cleanup.policy=compact`): below the cleanable end (the LSO, the
    /// active segment, the minimum compaction lag), only the last committed record per key
    /// survives; aborted records go; a surviving tombstone gets a delete horizon when first
    /// seen and goes once the horizon has passed. Markers stay. Offsets never change.
    pub fn compact(&mut self, now: Duration, settings: CompactionSettings) -> CompactionReport {
        // Kafka rolls a segment only on append: an idle active segment is never cleaned.
        let lag_end =
            self.entries.iter().find(|e| e.appended_at + settings.min_lag > now).map_or(self.next_offset, |e| e.offset);
        let cleanable_end = self.last_stable_offset().min(self.segment_base).min(lag_end);
        let mut report = CompactionReport { cleanable_end, ..CompactionReport::default() };
        let mut last: BTreeMap<Bytes, i64> = BTreeMap::new();
        for entry in self.entries.iter().take_while(|e| e.offset < cleanable_end) {
            if let Body::Data(DataRecord { key: Some(key), .. }) = &entry.body {
                if !self.entry_aborted(entry) {
                    last.insert(key.clone(), entry.offset);
                }
            }
        }
        let mut kept = Vec::with_capacity(self.entries.len());
        for mut entry in std::mem::take(&mut self.entries) {
            if entry.offset >= cleanable_end {
                kept.push(entry);
                continue;
            }
            let Body::Data(data) = &entry.body else {
                kept.push(entry);
                continue;
            };
            if self.entry_aborted(&entry) {
                report.aborted += 1;
                continue;
            }
            let Some(key) = &data.key else {
                kept.push(entry);
                continue;
            };
            if last.get(key) != Some(&entry.offset) {
                report.superseded += 1;
                continue;
            }
            if data.value.is_none() {
                match entry.delete_horizon {
                    Some(horizon) if now >= horizon => {
                        report.tombstones += 1;
                        continue;
                    }
                    Some(_) => {}
                    None => entry.delete_horizon = Some(now + settings.delete_retention),
                }
            }
            kept.push(entry);
        }
        self.entries = kept;
        self.ordered.set(0);
        report
    }
}
