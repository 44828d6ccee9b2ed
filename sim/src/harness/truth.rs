//! What the cluster really holds, read from the simulated broker's state — never through the
//! client read path the engine itself uses, so a bug in that path cannot hide itself from the
//! checks.

use std::collections::BTreeMap;

use std::time::Duration;

use flechtwerk::kafka::TopicPartition;
use flechtwerk::wire::RawRecord;
use madsim::time::sleep;

use crate::cluster::Cluster;
use crate::runner::Ctx;

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

/// Whether `group` committed every partition of `inputs` to its end, and no transaction is open
/// on `outputs` or the group's changelog: a consistent cut of the truth.
pub fn quiescent(cluster: &Cluster, group: &str, inputs: &[&str], outputs: &[&str]) -> bool {
    let committed = committed_offsets(cluster, group);
    let inputs_done = inputs
        .iter()
        .all(|topic| log_ends(cluster, topic).iter().all(|(tp, end)| committed.get(tp).copied().unwrap_or(0) == *end));
    inputs_done
        && outputs.iter().all(|topic| no_open_transactions(cluster, topic))
        && no_open_transactions(cluster, &format!("{group}-changelog"))
}

/// Waits (checking every second) until [`quiescent`], at most `max`; whether it got there.
pub async fn await_quiescence(
    ctx: &Ctx,
    cluster: &Cluster,
    group: &str,
    inputs: &[&str],
    outputs: &[&str],
    max: Duration,
) -> bool {
    let deadline = ctx.now() + max;
    loop {
        if quiescent(cluster, group, inputs, outputs) {
            return true;
        }
        if ctx.now() >= deadline {
            return false;
        }
        sleep(Duration::from_secs(1)).await;
    }
}

/// The compaction of config records (in log order): what every config store must equal. Written
/// from the rule (CFG-12, CFG-20), not with the engine's helpers, so a bug there cannot hide in
/// the model: the last write per key wins; null, `b""` and `{}` delete; values in canonical JSON.
/// A value that is not JSON is skipped, as a store under a skipping policy keeps nothing for it.
pub fn config_compaction(records: &[RawRecord]) -> BTreeMap<String, Vec<u8>> {
    let mut model = BTreeMap::new();
    for record in records {
        let key = String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned();
        match record.value.as_deref() {
            None | Some(b"") | Some(b"{}") => {
                model.remove(&key);
            }
            Some(bytes) => {
                let parsed = std::str::from_utf8(bytes).ok().and_then(|t| flechtwerk::json::parse(t).ok());
                if let Some(canonical) = parsed.and_then(|v| flechtwerk::json::to_canonical_bytes(&v).ok()) {
                    model.insert(key, canonical);
                }
            }
        }
    }
    model
}
