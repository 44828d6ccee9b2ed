//! What the cluster really holds, read from the simulated broker's state — never through the
//! client read path the engine itself uses, so a bug in that path cannot hide itself from the
//! checks.

use std::collections::BTreeMap;

use flechtwerk::kafka::TopicPartition;
use flechtwerk::wire::RawRecord;

use crate::cluster::Cluster;

/// Every committed record of `topic` (all partitions, below each LSO), sorted by
/// (partition, offset); empty when the topic does not exist.
pub fn committed_records(cluster: &Cluster, topic: &str) -> Vec<RawRecord> {
    cluster.inspect(|broker| {
        let partitions = broker.partition_count(topic).unwrap_or(0) as i32;
        (0..partitions)
            .flat_map(|p| broker.read_committed(&TopicPartition::new(topic, p)).expect("the partition exists"))
            .collect()
    })
}

/// The group's committed offsets.
pub fn committed_offsets(cluster: &Cluster, group: &str) -> BTreeMap<TopicPartition, i64> {
    cluster.inspect(|broker| broker.group(group).map(|g| g.committed).unwrap_or_default())
}

/// The end (high watermark) of every partition of `topic`.
pub fn log_ends(cluster: &Cluster, topic: &str) -> BTreeMap<TopicPartition, i64> {
    cluster.inspect(|broker| {
        let partitions = broker.partition_count(topic).unwrap_or(0) as i32;
        (0..partitions)
            .map(|p| {
                let tp = TopicPartition::new(topic, p);
                let end = broker.log(&tp).expect("the partition exists").high_watermark();
                (tp, end)
            })
            .collect()
    })
}

/// Whether no transaction is open on any partition of `topic`.
pub fn no_open_transactions(cluster: &Cluster, topic: &str) -> bool {
    cluster.inspect(|broker| {
        let partitions = broker.partition_count(topic).unwrap_or(0) as i32;
        (0..partitions)
            .all(|p| broker.log(&TopicPartition::new(topic, p)).map_or(true, |log| log.open_transactions().is_empty()))
    })
}
