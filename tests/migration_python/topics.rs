//! Topics, the feed, progress, transactions: topic creation, the paced counter input, the
//! groups' committed offsets, and the watermarks that show a transaction left open.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flechtwerk::kafka::{ConsumerConfig, NewTopic, Producer, ProducerConfig, ProducerRecord, TopicPartition};
use rdkafka::consumer::{BaseConsumer, Consumer as _};

use crate::{block, bootstrap, kafka, CHUNK, INPUTS, KEYS, LEAD, PACE, PARTITIONS, PHASE_MAX};

pub(crate) fn create_topics(topics: &[(&str, u32, bool)]) {
    block(async {
        let admin = kafka().admin().expect("admin");
        for &(name, partitions, compacted) in topics {
            let mut spec = NewTopic::new(name, partitions).replication(1);
            if compacted {
                spec = spec.compacted();
            }
            admin.create_topic(&spec).await.unwrap_or_else(|e| panic!("create {name}: {e}"));
        }
    });
}

pub(crate) fn produce(topic: &str, records: &[(Option<&str>, Option<&[u8]>)]) {
    block(async {
        let producer = kafka().producer(ProducerConfig::idempotent("migration-feeder")).expect("producer");
        send_all(&*producer, topic, records).await;
        producer.close().await;
    });
}

/// Sends `records` to `topic` and waits until every one is delivered.
async fn send_all(producer: &dyn Producer, topic: &str, records: &[(Option<&str>, Option<&[u8]>)]) {
    let mut deliveries = Vec::new();
    for &(key, value) in records {
        let record = ProducerRecord {
            topic: topic.to_owned(),
            partition: None,
            key: key.map(|k| bytes::Bytes::copy_from_slice(k.as_bytes())),
            value: value.map(bytes::Bytes::copy_from_slice),
            headers: Vec::new(),
            timestamp_ms: None,
        };
        deliveries.push(producer.send(record).await.expect("send"));
    }
    for delivery in deliveries {
        delivery.await.expect("delivered");
    }
}

/// Writes the counter inputs at a steady pace on a thread of its own: input `i` is
/// `{"i": i}` under key `key-{i % KEYS}`. The feed never runs more than `LEAD` inputs ahead of
/// what `groups` have committed (the most of them), so a slow consumer slows it down and every
/// switch happens while input still flows, however slow the machine. Returns the number written
/// so far.
pub(crate) fn feed(
    topic: &str,
    groups: Vec<String>,
) -> (Arc<std::sync::atomic::AtomicUsize>, std::thread::JoinHandle<()>) {
    let fed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (topic, count) = (topic.to_owned(), fed.clone());
    let handle = std::thread::spawn(move || {
        block(async {
            // One producer for the whole feed (a client per chunk costs more than the pace).
            let producer = kafka().producer(ProducerConfig::idempotent("migration-feeder")).expect("producer");
            // The committed input last seen: asked again only when it holds the feed back.
            let mut known = 0;
            for start in (0..INPUTS).step_by(CHUNK) {
                let deadline = Instant::now() + PHASE_MAX;
                while start > LEAD && known < (start - LEAD) as i64 && Instant::now() < deadline {
                    known = 0;
                    for group in &groups {
                        known = known.max(committed_now(group, &topic, PARTITIONS).await);
                    }
                    if known < (start - LEAD) as i64 {
                        tokio::time::sleep(PACE).await;
                    }
                }
                let values: Vec<(String, String)> =
                    (start..start + CHUNK).map(|i| (format!("key-{}", i % KEYS), format!(r#"{{"i":{i}}}"#))).collect();
                let records: Vec<(Option<&str>, Option<&[u8]>)> =
                    values.iter().map(|(k, v)| (Some(k.as_str()), Some(v.as_bytes()))).collect();
                send_all(&*producer, &topic, &records).await;
                count.fetch_add(CHUNK, Ordering::SeqCst);
                tokio::time::sleep(PACE).await;
            }
            producer.close().await;
        });
    });
    (fed, handle)
}

/// Input records the group `group` has committed (summed over the input partitions).
pub(crate) fn committed(group: &str, topic: &str, partitions: u32) -> i64 {
    block(committed_now(group, topic, partitions))
}

/// Retries for up to 30 s: on a loaded machine a metadata request can time out now and then.
async fn committed_now(group: &str, topic: &str, partitions: u32) -> i64 {
    let tps: Vec<TopicPartition> = (0..partitions as i32).map(|p| TopicPartition::new(topic, p)).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut consumer = kafka().consumer(ConsumerConfig::member("migration-progress", group)).expect("consumer");
        let offsets = consumer.committed(&tps).await;
        let _ = consumer.close().await;
        match offsets {
            Ok(offsets) => return offsets.into_iter().flatten().sum(),
            Err(e) if Instant::now() < deadline => eprintln!("migration: committed offsets of {group}: {e}; retrying"),
            Err(e) => panic!("committed offsets of {group}: {e}"),
        }
        tokio::time::sleep(PACE).await;
    }
}

/// High watermarks (read_uncommitted) against last stable offsets (read_committed): a
/// partition whose LSO is below its high watermark has an open transaction.
pub(crate) struct Watermarks {
    committed: BaseConsumer,
    uncommitted: BaseConsumer,
}

impl Watermarks {
    pub(crate) fn new() -> Self {
        let consumer = |isolation: &str| -> BaseConsumer {
            rdkafka::ClientConfig::new()
                .set("bootstrap.servers", bootstrap())
                .set("group.id", "migration-watermarks")
                .set("isolation.level", isolation)
                .create()
                .expect("watermark consumer")
        };
        Watermarks { committed: consumer("read_committed"), uncommitted: consumer("read_uncommitted") }
    }

    /// (LSO, high watermark) of a partition.
    pub(crate) fn of(&self, topic: &str, partition: i32) -> (i64, i64) {
        let timeout = Duration::from_secs(10);
        // A few tries: on a loaded machine a request can time out now and then.
        let fetch = |consumer: &BaseConsumer, what: &str| {
            let mut tries = 0;
            loop {
                match consumer.fetch_watermarks(topic, partition, timeout) {
                    Ok((_, offset)) => return offset,
                    Err(e) if tries < 3 => eprintln!("migration: {what} of {topic}/{partition}: {e}; retrying"),
                    Err(e) => panic!("{what} of {topic}/{partition}: {e}"),
                }
                tries += 1;
            }
        };
        let lso = fetch(&self.committed, "LSO");
        let high = fetch(&self.uncommitted, "high watermark");
        (lso, high)
    }

    /// The partitions of `topics` with an open transaction, each with its high watermark.
    pub(crate) fn open_positions(&self, topics: &[&str]) -> Vec<(String, i32, i64)> {
        let mut open = Vec::new();
        for topic in topics {
            for p in 0..PARTITIONS as i32 {
                let (lso, high) = self.of(topic, p);
                if lso < high {
                    open.push(((*topic).to_owned(), p, high));
                }
            }
        }
        open
    }

    /// Whether any partition of `topics` has an open transaction, answered at the first one found
    /// (the kill follows at once: a Rust transaction stays open for milliseconds only).
    pub(crate) fn any_open(&self, topics: &[&str]) -> bool {
        topics.iter().any(|topic| {
            (0..PARTITIONS as i32).any(|p| {
                let (lso, high) = self.of(topic, p);
                lso < high
            })
        })
    }

    pub(crate) fn stable(&self, topic: &str) -> Vec<i64> {
        (0..PARTITIONS as i32).map(|p| self.of(topic, p).0).collect()
    }
}
