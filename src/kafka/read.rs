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

use super::{Consumer, Extent, KafkaError, KafkaErrorKind, StartOffset, TopicPartition};
use crate::wire::RawRecord;

/// Records per poll while reading to the end.
pub(crate) const READ_BATCH_RECORDS: usize = 1_000;

/// Timeout of one poll while reading to the end (KNOB: 2000 ms bootstrap/restore loop).
pub(crate) const READ_POLL_TIMEOUT: Duration = Duration::from_millis(2_000);

/// A read that makes no progress (no record, no position move) for this long fails instead of
/// hanging: the partition's end was captured, so the data exists; a client that cannot reach it
/// is broken or cut off.
///
/// ```
/// assert_eq!(flechtwerk::testing::READ_STALL_MAX, std::time::Duration::from_secs(300));
/// ```
pub const READ_STALL_MAX: Duration = Duration::from_secs(300);

/// The end offsets captured at entry, per partition, and how many records were read.
///
/// ```
/// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, TopicPartition};
/// use flechtwerk::testing::{read_to_end, ReadError};
/// use flechtwerk_sim::cluster::LocalCluster;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let kafka = LocalCluster::new();
/// kafka.admin()?.create_topic(&NewTopic::new("events", 1)).await?;
/// let producer = kafka.producer(ProducerConfig::idempotent("writer"))?;
/// producer.send(ProducerRecord::new("events", "k", "{}")).await?.await?;
/// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
/// let partitions = [TopicPartition::new("events", 0)];
/// let read = read_to_end(consumer.as_mut(), &partitions, |_record| Ok::<(), std::convert::Infallible>(())).await?;
/// assert_eq!((read.records, read.ends[&partitions[0]]), (1, 1));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadToEnd {
    /// The captured end (LSO) of each partition read.
    pub ends: BTreeMap<TopicPartition, i64>,
    /// Records handed to the callback.
    pub records: u64,
}

/// Why a read to the end failed: Kafka, or the callback.
///
/// ```
/// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, TopicPartition};
/// use flechtwerk::testing::{read_to_end, ReadError};
/// use flechtwerk_sim::cluster::LocalCluster;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let kafka = LocalCluster::new();
/// kafka.admin()?.create_topic(&NewTopic::new("events", 1)).await?;
/// let producer = kafka.producer(ProducerConfig::idempotent("writer"))?;
/// producer.send(ProducerRecord::new("events", "k", "{}")).await?.await?;
/// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
/// let partitions = [TopicPartition::new("events", 0)];
/// // The callback may stop the read with an error of its own.
/// let read = read_to_end(consumer.as_mut(), &partitions, |_record| Err("enough")).await;
/// assert!(matches!(read, Err(ReadError::Callback("enough"))));
/// # Ok(())
/// # }
/// ```
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
///
/// ```
/// use flechtwerk::kafka::{ConsumerConfig, Kafka, NewTopic, ProducerConfig, ProducerRecord, TopicPartition};
/// use flechtwerk::testing::{read_to_end, ReadError};
/// use flechtwerk_sim::cluster::LocalCluster;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let kafka = LocalCluster::new();
/// kafka.admin()?.create_topic(&NewTopic::new("events", 1)).await?;
/// let producer = kafka.producer(ProducerConfig::idempotent("writer"))?;
/// producer.send(ProducerRecord::new("events", "k", "{}")).await?.await?;
/// let mut consumer = kafka.consumer(ConsumerConfig::groupless("reader"))?;
/// let partitions = [TopicPartition::new("events", 0)];
/// let mut keys = Vec::new();
/// read_to_end(consumer.as_mut(), &partitions, |record| {
///     keys.push(record.key);
///     Ok::<(), std::convert::Infallible>(())
/// })
/// .await?;
/// assert_eq!(keys.len(), 1); // and the consumer stays positioned at the end, to keep draining
/// # Ok(())
/// # }
/// ```
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub async fn read_to_end<E>(
    consumer: &mut dyn Consumer,
    partitions: &[TopicPartition],
    on_record: impl FnMut(RawRecord) -> Result<(), E>,
) -> Result<ReadToEnd, ReadError<E>> {
    read_to_end_batched(consumer, partitions, READ_BATCH_RECORDS, on_record).await
}

/// [`read_to_end`] with up to `batch_records` records per poll.
pub(crate) async fn read_to_end_batched<E>(
    consumer: &mut dyn Consumer,
    partitions: &[TopicPartition],
    batch_records: usize,
    on_record: impl FnMut(RawRecord) -> Result<(), E>,
) -> Result<ReadToEnd, ReadError<E>> {
    let mut ends = BTreeMap::new();
    for partition in partitions {
        ends.insert(partition.clone(), consumer.end_offset(partition).await?);
    }
    read_to_batched(consumer, ends, READ_STALL_MAX, batch_records, on_record).await
}

/// Like [`read_to_end`], up to the given ends instead of the last stable offsets: with ends
/// past an open transaction (a high watermark), the read waits until that transaction is
/// decided. `stall_max` bounds a wait without progress.
pub(crate) async fn read_to<E>(
    consumer: &mut dyn Consumer,
    ends: BTreeMap<TopicPartition, i64>,
    stall_max: Duration,
    on_record: impl FnMut(RawRecord) -> Result<(), E>,
) -> Result<ReadToEnd, ReadError<E>> {
    read_to_batched(consumer, ends, stall_max, READ_BATCH_RECORDS, on_record).await
}

/// Reads every partition of `extents` from its start to its end, as [`read_to`], assigning
/// only the partitions with something to read: a partition whose extent is empty (its log
/// start at its end) is left out, so a read of empty partitions only costs the lookup that
/// found the extents. The extents must have been looked up after whatever the ends must
/// include (a restore's: after the fence).
pub(crate) async fn read_extents<E>(
    consumer: &mut dyn Consumer,
    extents: &BTreeMap<TopicPartition, Extent>,
    stall_max: Duration,
    on_record: impl FnMut(RawRecord) -> Result<(), E>,
) -> Result<ReadToEnd, ReadError<E>> {
    let ranges: BTreeMap<TopicPartition, (StartOffset, i64)> = extents
        .iter()
        .filter(|(_, extent)| !extent.is_empty())
        .map(|(partition, extent)| (partition.clone(), (StartOffset::At(extent.start), extent.end)))
        .collect();
    if ranges.is_empty() {
        return Ok(ReadToEnd::default());
    }
    read_ranges(consumer, ranges, stall_max, READ_BATCH_RECORDS, on_record).await
}

async fn read_to_batched<E>(
    consumer: &mut dyn Consumer,
    ends: BTreeMap<TopicPartition, i64>,
    stall_max: Duration,
    batch_records: usize,
    on_record: impl FnMut(RawRecord) -> Result<(), E>,
) -> Result<ReadToEnd, ReadError<E>> {
    let ranges = ends.into_iter().map(|(partition, end)| (partition, (StartOffset::Beginning, end))).collect();
    read_ranges(consumer, ranges, stall_max, batch_records, on_record).await
}

async fn read_ranges<E>(
    consumer: &mut dyn Consumer,
    ranges: BTreeMap<TopicPartition, (StartOffset, i64)>,
    stall_max: Duration,
    batch_records: usize,
    mut on_record: impl FnMut(RawRecord) -> Result<(), E>,
) -> Result<ReadToEnd, ReadError<E>> {
    let assignment: Vec<(TopicPartition, StartOffset)> =
        ranges.iter().map(|(p, (start, _))| (p.clone(), *start)).collect();
    let ends: BTreeMap<TopicPartition, i64> = ranges.into_iter().map(|(p, (_, end))| (p, end)).collect();
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
        let polled = consumer.poll(batch_records, READ_POLL_TIMEOUT).await?;
        debug_assert!(polled.rebalances.is_empty(), "a group-less consumer never rebalances");
        // Progress is records, or a position moving past markers and aborted records.
        let mut progressed = !polled.records.is_empty();
        // Records come in runs per partition: look the end up once per run, not per record.
        let mut run: Option<(std::sync::Arc<str>, i32, i64)> = None;
        for record in polled.records {
            let end = match &run {
                Some((topic, partition, end)) if *partition == record.partition && **topic == *record.topic => *end,
                _ => {
                    let partition = TopicPartition::new(&*record.topic, record.partition);
                    let end = ends.get(&partition).copied().unwrap_or(i64::MIN);
                    run = Some((std::sync::Arc::clone(&record.topic), record.partition, end));
                    end
                }
            };
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
