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
use std::sync::Arc;

use crate::wire::{RawRecord, RecordRef};

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
pub async fn read_to_end<E: Send>(
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

/// A reader that looks at each record once, by reference ([`read_to_end_borrowed`]).
pub(crate) trait BorrowedReader: Send {
    /// What [`record`](Self::record) may fail with.
    type Error: Send;

    /// Called once, before the first record: how many offsets lie between the partitions'
    /// starts and their captured ends, summed (an upper bound of the records to come, for a
    /// reader that sizes an index ahead).
    fn expect(&mut self, offsets: u64);

    /// The records of one poll that lie below their partitions' captured ends, in offset order
    /// per partition (a poll's records come in runs per partition).
    fn records(&mut self, records: &[RecordRef<'_>]) -> Result<(), Self::Error>;
}

/// [`read_to_end`] for a [`BorrowedReader`]: up to `batch_records` records per poll, each handed
/// by reference ([`Consumer::poll_borrowed`]: no copy of its key and value on the way).
pub(crate) async fn read_to_end_borrowed<R: BorrowedReader>(
    consumer: &mut dyn Consumer,
    partitions: &[TopicPartition],
    batch_records: usize,
    reader: &mut R,
) -> Result<ReadToEnd, ReadError<R::Error>> {
    let mut ends = BTreeMap::new();
    for partition in partitions {
        ends.insert(partition.clone(), consumer.end_offset(partition).await?);
    }
    read_to_batched(consumer, ends, READ_STALL_MAX, batch_records, Sink::<NoOwned<R::Error>, R>::Borrowed(reader)).await
}

/// Like [`read_to_end`], up to the given ends instead of the last stable offsets: with ends
/// past an open transaction (a high watermark), the read waits until that transaction is
/// decided. `stall_max` bounds a wait without progress.
pub(crate) async fn read_to<E: Send>(
    consumer: &mut dyn Consumer,
    ends: BTreeMap<TopicPartition, i64>,
    stall_max: Duration,
    on_record: impl FnMut(RawRecord) -> Result<(), E>,
) -> Result<ReadToEnd, ReadError<E>> {
    read_to_batched(consumer, ends, stall_max, READ_BATCH_RECORDS, Sink::<_, NoReader<E>>::Owned(on_record)).await
}

/// Reads every partition of `extents` from its start to its end, as [`read_to`], assigning
/// only the partitions with something to read: a partition whose extent is empty (its log
/// start at its end) is left out, so a read of empty partitions only costs the lookup that
/// found the extents. The extents must have been looked up after whatever the ends must
/// include (a restore's: after the fence). Up to `batch_records` records per poll go to
/// `reader` by reference, as in [`read_to_end_borrowed`].
pub(crate) async fn read_extents<R: BorrowedReader>(
    consumer: &mut dyn Consumer,
    extents: &BTreeMap<TopicPartition, Extent>,
    stall_max: Duration,
    batch_records: usize,
    reader: &mut R,
) -> Result<ReadToEnd, ReadError<R::Error>> {
    let ranges: BTreeMap<TopicPartition, (StartOffset, i64)> = extents
        .iter()
        .filter(|(_, extent)| !extent.is_empty())
        .map(|(partition, extent)| (partition.clone(), (StartOffset::At(extent.start), extent.end)))
        .collect();
    if ranges.is_empty() {
        return Ok(ReadToEnd::default());
    }
    read_ranges(consumer, ranges, stall_max, batch_records, Sink::<NoOwned<R::Error>, R>::Borrowed(reader)).await
}

/// Where a read's records go: owned (polled with [`Consumer::poll`]) or by reference
/// ([`Consumer::poll_borrowed`]).
enum Sink<'r, O, R> {
    Owned(O),
    Borrowed(&'r mut R),
}

/// The unused sides of a [`Sink`].
type NoOwned<E> = fn(RawRecord) -> Result<(), E>;
struct NoReader<E>(std::marker::PhantomData<fn() -> E>);

impl<E: Send> BorrowedReader for NoReader<E> {
    type Error = E;
    fn expect(&mut self, _: u64) {}
    fn records(&mut self, _: &[RecordRef<'_>]) -> Result<(), E> {
        unreachable!("an owned read has no borrowed reader")
    }
}

/// The captured end of a record's partition; records come in runs per partition, so the end is
/// looked up once per run, not per record.
struct EndLookup<'a> {
    ends: &'a BTreeMap<TopicPartition, i64>,
    run: Option<(Arc<str>, i32, i64)>,
}

impl EndLookup<'_> {
    fn end(&mut self, topic: &Arc<str>, partition: i32) -> i64 {
        match &self.run {
            Some((t, p, end)) if *p == partition && **t == **topic => *end,
            _ => {
                // The reader assigned exactly these partitions: a record of another is a broken
                // adapter, not something to drop quietly.
                let end =
                    self.ends.get(&TopicPartition::new(&**topic, partition)).copied().unwrap_or_else(|| {
                        panic!("a record of {topic}/{partition}, a partition this read did not assign")
                    });
                self.run = Some((Arc::clone(topic), partition, end));
                end
            }
        }
    }
}

async fn read_to_batched<E, O, R>(
    consumer: &mut dyn Consumer,
    ends: BTreeMap<TopicPartition, i64>,
    stall_max: Duration,
    batch_records: usize,
    sink: Sink<'_, O, R>,
) -> Result<ReadToEnd, ReadError<E>>
where
    O: FnMut(RawRecord) -> Result<(), E>,
    R: BorrowedReader<Error = E>,
    E: Send,
{
    let ranges = ends.into_iter().map(|(partition, end)| (partition, (StartOffset::Beginning, end))).collect();
    read_ranges(consumer, ranges, stall_max, batch_records, sink).await
}

/// Reads each partition of `ranges` from its start offset up to its end (exclusive).
async fn read_ranges<E, O, R>(
    consumer: &mut dyn Consumer,
    ranges: BTreeMap<TopicPartition, (StartOffset, i64)>,
    stall_max: Duration,
    batch_records: usize,
    mut sink: Sink<'_, O, R>,
) -> Result<ReadToEnd, ReadError<E>>
where
    O: FnMut(RawRecord) -> Result<(), E>,
    R: BorrowedReader<Error = E>,
    E: Send,
{
    let assignment: Vec<(TopicPartition, StartOffset)> =
        ranges.iter().map(|(p, (start, _))| (p.clone(), *start)).collect();
    let ends: BTreeMap<TopicPartition, i64> = ranges.into_iter().map(|(p, (_, end))| (p, end)).collect();
    consumer.assign(&assignment).await?;

    let mut open: Vec<TopicPartition> = Vec::new();
    let mut ranges = 0u64;
    for (partition, end) in &ends {
        let position = consumer.position(partition).await?;
        if position < *end {
            ranges += (*end - position) as u64;
            open.push(partition.clone());
        } else {
            consumer.pause(std::slice::from_ref(partition))?;
        }
    }
    if let Sink::Borrowed(reader) = &mut sink {
        reader.expect(ranges);
    }
    let mut records = 0u64;
    let mut positions: BTreeMap<TopicPartition, i64> = BTreeMap::new();
    let mut last_progress = tokio::time::Instant::now();
    while !open.is_empty() {
        let mut lookup = EndLookup { ends: &ends, run: None };
        // Progress is records, or a position moving past markers and aborted records.
        let mut progressed = false;
        match &mut sink {
            Sink::Owned(on_record) => {
                let polled = consumer.poll(batch_records, READ_POLL_TIMEOUT).await?;
                debug_assert!(polled.rebalances.is_empty(), "a group-less consumer never rebalances");
                progressed = !polled.records.is_empty();
                for record in polled.records {
                    if record.offset < lookup.end(&record.topic, record.partition) {
                        on_record(record).map_err(ReadError::Callback)?;
                        records += 1;
                    }
                }
            }
            Sink::Borrowed(reader) => {
                let mut failed = None;
                let rebalances = consumer
                    .poll_borrowed(batch_records, READ_POLL_TIMEOUT, &mut |batch| {
                        progressed = true;
                        if failed.is_some() {
                            return;
                        }
                        let mut below =
                            |record: &RecordRef<'_>| record.offset < lookup.end(record.topic, record.partition);
                        // Records past an end arrive only with a partition's last batch: the
                        // whole poll goes to the reader as it came, except then.
                        let result = if batch.iter().all(&mut below) {
                            reader.records(batch).map(|()| batch.len())
                        } else {
                            let kept: Vec<RecordRef<'_>> = batch.iter().copied().filter(|r| below(r)).collect();
                            reader.records(&kept).map(|()| kept.len())
                        };
                        match result {
                            Ok(n) => records += n as u64,
                            Err(e) => failed = Some(e),
                        }
                    })
                    .await?;
                debug_assert!(rebalances.is_empty(), "a group-less consumer never rebalances");
                if let Some(e) = failed {
                    return Err(ReadError::Callback(e));
                }
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
