//! Reading partitions to their end: the shared core of the config bootstrap and the changelog
//! restore (CFG-10, STO-11, N-17).
//!
//! The end is captured once, at entry, as each partition's last stable offset. The read stops
//! when the fetch position reaches it, never on an empty poll: an empty poll only means nothing
//! arrived yet (and a broker may legitimately return empty fetches while data exists). Under
//! `read_committed` the captured end is the LSO, so an open transaction never makes the read
//! wait for it (IT-LB-2).

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Consumer, KafkaError, KafkaErrorKind, StartOffset, TopicPartition};
use crate::wire::RawRecord;

/// Records per poll while reading to the end.
pub(crate) const READ_BATCH_RECORDS: usize = 1_000;

/// Timeout of one poll while reading to the end (KNOB: 2000 ms bootstrap/restore loop).
pub(crate) const READ_POLL_TIMEOUT: Duration = Duration::from_millis(2_000);

/// A read that makes no progress (no record, no position move) for this long fails instead of
/// hanging: the partition's end was captured, so the data exists; a client that cannot reach it
/// is broken or cut off.
pub const READ_STALL_MAX: Duration = Duration::from_secs(300);

/// The end offsets captured at entry, per partition, and how many records were read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadToEnd {
    /// The captured end (LSO) of each partition read.
    pub ends: BTreeMap<TopicPartition, i64>,
    /// Records handed to the callback.
    pub records: u64,
}

/// Why a read to the end failed: Kafka, or the callback.
#[derive(Debug, thiserror::Error)]
pub enum ReadError<E> {
    /// The consumer failed.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    /// The callback refused a record.
    #[error(transparent)]
    Callback(E),
}

/// Assigns `partitions` to `consumer` from the beginning and hands every record below the end
/// captured at entry to `on_record`, in offset order per partition.
///
/// Afterwards the consumer stays assigned to all of them, positioned exactly at the captured
/// ends (records past an end fetched in the last batch are sought back), so a caller can keep
/// draining from there without a gap or a repeat (CFG-16).
pub async fn read_to_end<E>(
    consumer: &mut dyn Consumer,
    partitions: &[TopicPartition],
    on_record: impl FnMut(RawRecord) -> Result<(), E>,
) -> Result<ReadToEnd, ReadError<E>> {
    let mut ends = BTreeMap::new();
    for partition in partitions {
        ends.insert(partition.clone(), consumer.end_offset(partition).await?);
    }
    read_to(consumer, ends, READ_STALL_MAX, on_record).await
}

/// Like [`read_to_end`], up to the given ends instead of the last stable offsets: with ends
/// past an open transaction (a high watermark), the read waits until that transaction is
/// decided. `stall_max` bounds a wait without progress.
pub(crate) async fn read_to<E>(
    consumer: &mut dyn Consumer,
    ends: BTreeMap<TopicPartition, i64>,
    stall_max: Duration,
    mut on_record: impl FnMut(RawRecord) -> Result<(), E>,
) -> Result<ReadToEnd, ReadError<E>> {
    let partitions: Vec<TopicPartition> = ends.keys().cloned().collect();
    let assignment: Vec<(TopicPartition, StartOffset)> =
        partitions.iter().map(|p| (p.clone(), StartOffset::Beginning)).collect();
    consumer.assign(&assignment).await?;

    let mut open: Vec<TopicPartition> = Vec::new();
    for (partition, end) in &ends {
        if consumer.position(partition).await? < *end {
            open.push(partition.clone());
        } else {
            consumer.pause(std::slice::from_ref(partition))?;
        }
    }
    let mut records = 0u64;
    let mut positions: BTreeMap<TopicPartition, i64> = BTreeMap::new();
    let mut last_progress = tokio::time::Instant::now();
    while !open.is_empty() {
        let polled = consumer.poll(READ_BATCH_RECORDS, READ_POLL_TIMEOUT).await?;
        debug_assert!(polled.rebalances.is_empty(), "a group-less consumer never rebalances");
        // Progress is records, or a position moving past markers and aborted records.
        let mut progressed = !polled.records.is_empty();
        for record in polled.records {
            let partition = TopicPartition::new(&*record.topic, record.partition);
            let end = ends.get(&partition).copied().unwrap_or(i64::MIN);
            if record.offset < end {
                on_record(record).map_err(ReadError::Callback)?;
                records += 1;
            }
        }
        let mut still_open = Vec::with_capacity(open.len());
        for partition in open {
            let position = consumer.position(&partition).await?;
            progressed |= positions.insert(partition.clone(), position) != Some(position);
            if position < ends[&partition] {
                still_open.push(partition);
            } else {
                consumer.pause(std::slice::from_ref(&partition))?;
            }
        }
        open = still_open;
        if progressed {
            last_progress = tokio::time::Instant::now();
        }
        if last_progress.elapsed() >= stall_max && !open.is_empty() {
            let names: Vec<String> = open.iter().map(ToString::to_string).collect();
            return Err(ReadError::Kafka(
                KafkaError::new(
                    KafkaErrorKind::Retriable,
                    "read_to_end",
                    format!("no progress for {stall_max:?} towards the captured end"),
                )
                .with_context(names.join(", ")),
            ));
        }
    }
    // Leave every partition at exactly its captured end, fetching again.
    for (partition, end) in &ends {
        if consumer.position(partition).await? != *end {
            consumer.seek(partition, *end).await?;
        }
    }
    let all: Vec<TopicPartition> = ends.keys().cloned().collect();
    consumer.resume(&all)?;
    Ok(ReadToEnd { ends, records })
}
