//! Kafka's RangeAssignor, exactly: per topic, the members subscribed to it sorted by member id
//! get contiguous blocks of `partitions / members` partitions, and the first
//! `partitions % members` of them one more. So partition `p` of co-partitioned topics (same
//! partition count, same subscribers) goes to the same member.

use std::collections::BTreeMap;

use flechtwerk::kafka::TopicPartition;

/// Assigns the partitions of every subscribed topic. `subscriptions` maps member id to its
/// topics; `partition_counts` holds the existing topics (a subscribed topic missing there gets
/// no partitions). Every member appears in the result, possibly with nothing.
pub fn range_assign(
    subscriptions: &BTreeMap<String, Vec<String>>,
    partition_counts: &BTreeMap<String, u32>,
) -> BTreeMap<String, Vec<TopicPartition>> {
    let mut assignment: BTreeMap<String, Vec<TopicPartition>> =
        subscriptions.keys().map(|member| (member.clone(), Vec::new())).collect();
    let mut subscribers: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (member, topics) in subscriptions {
        for topic in topics {
            let members = subscribers.entry(topic.as_str()).or_default();
            if !members.contains(&member.as_str()) {
                members.push(member.as_str());
            }
        }
    }
    for (topic, mut members) in subscribers {
        let Some(&partitions) = partition_counts.get(topic) else { continue };
        members.sort_unstable();
        let per_member = partitions as usize / members.len();
        let extra = partitions as usize % members.len();
        for (i, member) in members.iter().enumerate() {
            let start = per_member * i + i.min(extra);
            let length = per_member + usize::from(i < extra);
            let owned = assignment.get_mut(*member).expect("every subscriber is a member");
            owned.extend((start..start + length).map(|p| TopicPartition::new(topic, p as i32)));
        }
    }
    for partitions in assignment.values_mut() {
        partitions.sort();
    }
    assignment
}
