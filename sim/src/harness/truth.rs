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

/// What config stores must hold once they read every config topic to its end (CFG-01, CFG-12):
/// per key, the last write on each topic that wrote it (`None`: a delete). A key written on one
/// topic must hold that write exactly. A key written on several may hold the last write of any of
/// them: the store has one key space, and which topic's write it applied last depends on how its
/// reads of the topics interleaved.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConfigCompaction {
    candidates: BTreeMap<String, Vec<Option<Vec<u8>>>>,
}

impl ConfigCompaction {
    /// The compaction of `records` (each topic's in log order; topics in any order), by the rule
    /// [`config_compaction`] applies to one topic.
    pub fn of(records: &[RawRecord]) -> Self {
        let mut topics: BTreeMap<&str, Vec<RawRecord>> = BTreeMap::new();
        for record in records {
            topics.entry(&record.topic).or_default().push(record.clone());
        }
        let mut candidates: BTreeMap<String, Vec<Option<Vec<u8>>>> = BTreeMap::new();
        for records in topics.values() {
            let survivors = config_compaction(records);
            let written: std::collections::BTreeSet<String> = records
                .iter()
                .map(|r| String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned())
                .collect();
            for key in written {
                let last = survivors.get(&key).cloned();
                let entry = candidates.entry(key).or_default();
                if !entry.contains(&last) {
                    entry.push(last);
                }
            }
        }
        ConfigCompaction { candidates }
    }

    /// Whether `store` holds one of the candidates for every key, and nothing else.
    pub fn accepts(&self, store: &BTreeMap<String, Vec<u8>>) -> bool {
        self.differences(store).is_none()
    }

    /// How `store` differs: the keys missing, extra and holding another value, named; `None`
    /// when it is accepted.
    pub fn differences(&self, store: &BTreeMap<String, Vec<u8>>) -> Option<String> {
        let held = |key: &str| store.get(key).cloned();
        let missing: Vec<&String> =
            self.candidates.iter().filter(|(k, c)| held(k).is_none() && !c.contains(&None)).map(|(k, _)| k).collect();
        let extra: Vec<&String> = store.keys().filter(|k| !self.candidates.contains_key(*k)).collect();
        let differing: Vec<&String> = self
            .candidates
            .iter()
            .filter(|(k, c)| held(k).is_some() && !c.contains(&held(k)))
            .map(|(k, _)| k)
            .collect();
        if missing.is_empty() && extra.is_empty() && differing.is_empty() {
            None
        } else {
            Some(format!("missing {missing:?}, extra {extra:?}, differing {differing:?}"))
        }
    }

    /// The keys written on several topics with different last writes: a store may hold any of
    /// them, so a join on such a key may differ between two runs without any fault.
    pub fn ambiguous_keys(&self) -> Vec<&str> {
        self.candidates.iter().filter(|(_, c)| c.len() > 1).map(|(k, _)| k.as_str()).collect()
    }
}

impl From<BTreeMap<String, Vec<u8>>> for ConfigCompaction {
    /// Exactly these entries (one topic's compaction).
    fn from(entries: BTreeMap<String, Vec<u8>>) -> Self {
        ConfigCompaction { candidates: entries.into_iter().map(|(k, v)| (k, vec![Some(v)])).collect() }
    }
}
