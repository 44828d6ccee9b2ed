//! Replication: which broker leads each partition and each coordinator, the in-sync replicas,
//! the high watermark, leader elections and the truncation they cause.
//!
//! The model keeps one copy of every log, the leader's; a follower is its log end offset into
//! that copy (a follower's log is always a prefix of the leader's: Kafka's followers truncate
//! to the leader's epoch boundaries before they fetch, which is what makes it so). A follower
//! fetches over the network (`cluster::net`), so a dead, paused or cut-off follower falls
//! behind; the leader learns how far a follower has the log from the position of its *next*
//! fetch, as Kafka's leader does. The high watermark is the smallest log end among the
//! in-sync replicas (ISR), and a follower that has not caught up within
//! `replica.lag.time.max.ms` leaves the ISR, while one whose log reaches the high watermark
//! rejoins it.
//!
//! Elections are clean only: a new leader comes from the ISR, so everything below the high
//! watermark survives; what the old leader held above the new leader's log end is truncated
//! (never acknowledged under `acks=all`: the producers retry it). A partition whose ISR has no
//! live member has no leader until one comes back.
//!
//! The coordinators of transactional ids and groups sit on partitions of `__transaction_state`
//! and `__consumer_offsets` (50 each, placed like any topic's), each led by a broker; a
//! coordinator that moves loads its state first (COORDINATOR_LOAD_IN_PROGRESS meanwhile). Their
//! state itself is shared: a coordinator's writes are modelled as replicated once made (see
//! `docs/simulation.md`, "What the cluster model leaves out").

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use flechtwerk::kafka::TopicPartition;
use flechtwerk::testing::conformance::{coordinator_partition, CoordinatorOf};

use super::Broker;
use crate::cluster::protocol::{BrokerError, BrokerId, CoordinatorKey, ErrorCode, Request, Route};

/// Kafka's transaction state topic.
pub const TRANSACTION_STATE: &str = "__transaction_state";

/// Kafka's consumer offsets topic.
pub const CONSUMER_OFFSETS: &str = "__consumer_offsets";

/// Partitions of each coordinator topic (`transaction.state.log.num.partitions`,
/// `offsets.topic.num.partitions`: 50).
pub const COORDINATOR_PARTITIONS: i32 = 50;

/// Replicas of a topic created with replication factor -1 (`default.replication.factor` of the
/// clusters this project runs: 3, or every broker of a smaller one), and of the coordinator
/// topics.
pub const DEFAULT_REPLICATION_FACTOR: i32 = 3;

/// The partition of a coordinator topic that holds `key`'s coordinator, as Kafka places it
/// (the conformance suite's [`coordinator_partition`], with Kafka's 50 partitions).
pub fn coordinator_topic_partition(key: &CoordinatorKey) -> TopicPartition {
    let whose = match key {
        CoordinatorKey::Transaction(id) => CoordinatorOf::Transaction(id),
        CoordinatorKey::Group(group) => CoordinatorOf::Group(group),
    };
    coordinator_partition(whose, COORDINATOR_PARTITIONS)
}

fn is_coordinator_topic(topic: &str) -> bool {
    topic == TRANSACTION_STATE || topic == CONSUMER_OFFSETS
}

/// One partition's replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The replicas, the preferred leader first.
    pub replicas: Vec<BrokerId>,
    /// The leader, `None` while no in-sync replica is alive.
    pub leader: Option<BrokerId>,
    /// Bumped by every leader change: a fetch or an acknowledgement of an older epoch is stale.
    pub leader_epoch: i32,
    /// The in-sync replicas (never empty: the last one stays even when it dies).
    pub isr: BTreeSet<BrokerId>,
    /// Each follower's log end offset (what it has fetched).
    log_end: BTreeMap<BrokerId, i64>,
    /// Each follower's log end as the leader knows it (the position of its latest fetch).
    acknowledged: BTreeMap<BrokerId, i64>,
    /// When each follower last fetched from the leader's log end.
    caught_up: BTreeMap<BrokerId, Duration>,
    /// A coordinator partition's leader serves from this time on.
    pub loaded_at: Duration,
}

impl Placement {
    /// The smallest log end the leader knows of an in-sync follower (`None`: no follower in
    /// sync, or no leader): the high watermark never passes it.
    pub fn followers_in_sync_floor(&self) -> Option<i64> {
        self.leader?;
        let followers = self.isr.iter().filter(|b| Some(**b) != self.leader);
        followers.map(|b| self.acknowledged.get(b).copied().unwrap_or(0)).min()
    }

    fn new(replicas: Vec<BrokerId>, now: Duration) -> Self {
        Placement {
            leader: replicas.first().copied(),
            leader_epoch: 0,
            isr: replicas.iter().copied().collect(),
            log_end: replicas.iter().skip(1).map(|&b| (b, 0)).collect(),
            acknowledged: replicas.iter().skip(1).map(|&b| (b, 0)).collect(),
            caught_up: replicas.iter().skip(1).map(|&b| (b, now)).collect(),
            replicas,
            loaded_at: Duration::ZERO,
        }
    }
}

/// The cluster's replication state.
#[derive(Clone, Debug)]
pub(super) struct Replication {
    brokers: i32,
    /// Brokers the controller has fenced (dead, or cut off from it).
    fenced: BTreeSet<BrokerId>,
    placements: BTreeMap<TopicPartition, Placement>,
    /// Where the next topic's replica assignment starts (Kafka: a random broker).
    next_start: i32,
}

impl Replication {
    pub(super) fn new(brokers: u32) -> Self {
        let brokers = i32::try_from(brokers.max(1)).expect("a small cluster");
        let mut replication =
            Replication { brokers, fenced: BTreeSet::new(), placements: BTreeMap::new(), next_start: 0 };
        let factor = DEFAULT_REPLICATION_FACTOR.min(brokers);
        for topic in [TRANSACTION_STATE, CONSUMER_OFFSETS] {
            replication.place(topic, COORDINATOR_PARTITIONS, factor, Duration::ZERO);
        }
        replication
    }

    /// Assigns replicas to a new topic's partitions, Kafka's way: partition `p`'s replicas start
    /// at broker `start + p` and go round the live brokers.
    fn place(&mut self, topic: &str, partitions: i32, factor: i32, now: Duration) {
        let live: Vec<BrokerId> = (0..self.brokers).filter(|b| !self.fenced.contains(b)).collect();
        let start = self.next_start;
        self.next_start += 1;
        for p in 0..partitions {
            let first = (start + p) as usize;
            let replicas = (0..factor as usize).map(|r| live[(first + r) % live.len()]).collect();
            self.placements.insert(TopicPartition::new(topic, p), Placement::new(replicas, now));
        }
    }

    fn live(&self) -> i32 {
        self.brokers - self.fenced.len() as i32
    }
}

/// What `Broker::acknowledged` says of an appended batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ack {
    /// Every in-sync replica has it (below the high watermark).
    Replicated,
    /// Not yet.
    Waiting,
    /// The leader changed since the append: the batch may be gone.
    LeaderChanged,
}

/// A produced batch waiting for its replication (`acks=all`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckWait {
    /// The partition.
    pub partition: TopicPartition,
    /// One past the batch's last offset.
    pub end: i64,
    /// The leader epoch it was appended in.
    pub leader_epoch: i32,
}

/// One partition of a follower's fetch: where its log ends, in which leader epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaPosition {
    /// The partition.
    pub partition: TopicPartition,
    /// The leader epoch the follower fetches in.
    pub leader_epoch: i32,
    /// The follower's log end offset.
    pub log_end: i64,
}

impl Broker {
    /// The number of brokers.
    pub fn brokers(&self) -> u32 {
        self.replication.brokers as u32
    }

    /// A partition's replicas (data and coordinator topics).
    pub fn placement(&self, partition: &TopicPartition) -> Option<&Placement> {
        self.replication.placements.get(partition)
    }

    /// Every partition's replicas, in name order.
    pub(super) fn placements(&self) -> impl Iterator<Item = (&TopicPartition, &Placement)> {
        self.replication.placements.iter()
    }

    /// The partitions a fault can usefully move or fail, in name order: every data partition,
    /// and the coordinator partitions of the transactional ids and groups in use.
    pub fn busy_partitions(&self) -> Vec<TopicPartition> {
        let mut coordinators: BTreeSet<TopicPartition> = BTreeSet::new();
        for (id, _, _) in self.txn.epochs() {
            coordinators.insert(coordinator_topic_partition(&CoordinatorKey::Transaction(id.to_owned())));
        }
        for (group, _) in self.groups.generations() {
            coordinators.insert(coordinator_topic_partition(&CoordinatorKey::Group(group.to_owned())));
        }
        let data = self.replication.placements.keys().filter(|tp| !is_coordinator_topic(&tp.topic)).cloned();
        data.chain(coordinators).collect()
    }

    /// The data partitions, in name order.
    pub fn data_partitions(&self) -> Vec<TopicPartition> {
        self.replication.placements.keys().filter(|tp| !is_coordinator_topic(&tp.topic)).cloned().collect()
    }

    /// The brokers the controller has fenced.
    pub fn fenced(&self) -> &BTreeSet<BrokerId> {
        &self.replication.fenced
    }

    pub(super) fn place_topic(&mut self, topic: &str, partitions: u32, factor: i16) -> Result<(), BrokerError> {
        let live = self.replication.live();
        let factor =
            if factor < 0 { DEFAULT_REPLICATION_FACTOR.min(self.replication.brokers) } else { i32::from(factor) };
        if factor == 0 || factor > live {
            return Err(BrokerError::new(
                ErrorCode::InvalidReplicationFactor,
                format!("replication factor {factor} with {live} live brokers"),
            ));
        }
        self.replication.place(topic, partitions as i32, factor, self.now);
        Ok(())
    }

    /// The leaders of a topic's partitions.
    pub(super) fn leaders(&self, topic: &str) -> Option<Vec<Option<BrokerId>>> {
        let count = self.partition_count(topic)?;
        Some(
            (0..count as i32)
                .map(|p| self.placement(&TopicPartition::new(topic, p)).and_then(|pl| pl.leader))
                .collect(),
        )
    }

    /// The broker coordinating `key`, or COORDINATOR_NOT_AVAILABLE while its partition has no
    /// leader.
    pub fn coordinator(&self, key: &CoordinatorKey) -> Result<BrokerId, BrokerError> {
        let partition = coordinator_topic_partition(key);
        self.placement(&partition).and_then(|p| p.leader).ok_or_else(|| {
            BrokerError::new(ErrorCode::CoordinatorNotAvailable, format!("{key}: {partition} has no leader"))
        })
    }

    /// Whether the coordinator of `key` serves now (it has a leader that finished loading).
    pub(super) fn coordinator_ready(&self, key: &CoordinatorKey) -> Result<(), BrokerError> {
        let partition = coordinator_topic_partition(key);
        let placement = self.placement(&partition).expect("coordinator partitions are placed at start");
        if placement.leader.is_none() {
            return Err(BrokerError::new(
                ErrorCode::CoordinatorNotAvailable,
                format!("{key}: {partition} has no leader"),
            ));
        }
        if self.now < placement.loaded_at {
            return Err(BrokerError::new(
                ErrorCode::CoordinatorLoadInProgress,
                format!("{key}: the coordinator loads {partition} until {:?}", placement.loaded_at),
            ));
        }
        Ok(())
    }

    /// The leader epoch of a coordinator's partition (changes when the coordinator moves).
    pub(super) fn coordinator_epoch(&self, key: &CoordinatorKey) -> i32 {
        self.placement(&coordinator_topic_partition(key)).map_or(0, |p| p.leader_epoch)
    }

    /// Refuses a request that reached a broker which does not serve it: NOT_LEADER_OR_FOLLOWER,
    /// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, NOT_ENOUGH_REPLICAS. (A fetch is checked
    /// per partition.)
    pub(super) fn check_route(&self, at: BrokerId, request: &Request) -> Result<(), BrokerError> {
        match request.route() {
            Route::Any | Route::Leaders => {}
            Route::Leader(partition) => {
                if let Some(placement) = self.placement(&partition) {
                    if placement.leader != Some(at) {
                        return Err(not_leader(at, &partition, placement));
                    }
                }
            }
            Route::Coordinator(key) => {
                if self.coordinator(&key)? != at {
                    return Err(BrokerError::new(
                        ErrorCode::NotCoordinator,
                        format!("broker {at} is not the coordinator of {key}"),
                    ));
                }
                self.coordinator_ready(&key)?;
            }
        }
        match request {
            Request::Produce(produce) => {
                if let Some(id) = &produce.transactional_id {
                    // AddPartitionsToTxn: the transaction coordinator must answer first.
                    self.coordinator_ready(&CoordinatorKey::Transaction(id.clone()))?;
                }
                if let Some(placement) = self.placement(&produce.partition) {
                    let needed = self.config.min_insync_replicas.min(placement.replicas.len() as u32) as usize;
                    if placement.isr.len() < needed {
                        return Err(BrokerError::new(
                            ErrorCode::NotEnoughReplicas,
                            format!(
                                "{}: {} in-sync replicas, min.insync.replicas is {needed}",
                                produce.partition,
                                placement.isr.len()
                            ),
                        ));
                    }
                }
            }
            // AddOffsetsToTxn: the transaction coordinator too.
            Request::TxnOffsetCommit(commit) => {
                self.coordinator_ready(&CoordinatorKey::Transaction(commit.transactional_id.clone()))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether broker `at` leads `partition` (checked per partition of a fetch).
    pub(super) fn check_leader(&self, at: BrokerId, partition: &TopicPartition) -> Result<(), BrokerError> {
        match self.placement(partition) {
            Some(placement) if placement.leader != Some(at) => Err(not_leader(at, partition, placement)),
            _ => Ok(()),
        }
    }

    /// Where a batch appended just now must be replicated to before it is acknowledged.
    pub(super) fn ack_wait(&self, partition: &TopicPartition, end: i64) -> AckWait {
        let leader_epoch = self.placement(partition).map_or(0, |p| p.leader_epoch);
        AckWait { partition: partition.clone(), end, leader_epoch }
    }

    /// Whether an appended batch is replicated.
    pub fn acknowledged(&self, wait: &AckWait) -> Ack {
        let Some(placement) = self.placement(&wait.partition) else { return Ack::LeaderChanged };
        if placement.leader_epoch != wait.leader_epoch {
            return Ack::LeaderChanged;
        }
        match self.log(&wait.partition) {
            Ok(log) if log.high_watermark() >= wait.end => Ack::Replicated,
            Ok(_) => Ack::Waiting,
            Err(_) => Ack::LeaderChanged,
        }
    }

    /// Recomputes a data partition's high watermark (the smallest log end in the ISR) and lands
    /// the transaction markers below it.
    pub(super) fn update_high_watermark(&mut self, partition: &TopicPartition) {
        let Some(placement) = self.replication.placements.get(partition) else { return };
        if placement.leader.is_none() {
            return;
        }
        let floor = placement.followers_in_sync_floor();
        let Ok((log, _)) = self.log_mut(partition) else { return };
        let before = log.high_watermark();
        log.advance_high_watermark(floor.unwrap_or(i64::MAX));
        if log.high_watermark() > before {
            self.land_markers(partition);
        }
    }

    /// The partitions `follower` replicates from `leader`, with its positions.
    pub fn follower_positions(&self, follower: BrokerId, leader: BrokerId) -> Vec<ReplicaPosition> {
        let mut positions = Vec::new();
        for (partition, placement) in &self.replication.placements {
            if placement.leader != Some(leader) || leader == follower || is_coordinator_topic(&partition.topic) {
                continue;
            }
            let Some(&log_end) = placement.log_end.get(&follower) else { continue };
            positions.push(ReplicaPosition {
                partition: partition.clone(),
                leader_epoch: placement.leader_epoch,
                log_end,
            });
        }
        positions
    }

    /// The leader `leader` serves a follower's fetch: it learns the follower's positions (the
    /// high watermark may move, the follower may rejoin the ISR) and answers its log ends.
    pub fn replica_fetch(
        &mut self,
        leader: BrokerId,
        follower: BrokerId,
        positions: &[ReplicaPosition],
        now: Duration,
    ) -> Vec<ReplicaPosition> {
        self.now = self.now.max(now);
        let mut answers = Vec::new();
        for position in positions {
            let Some(placement) = self.replication.placements.get(&position.partition) else { continue };
            if placement.leader != Some(leader) || placement.leader_epoch != position.leader_epoch {
                continue;
            }
            let Ok(log) = self.log(&position.partition) else { continue };
            let (log_end, high_watermark) = (log.log_end_offset(), log.high_watermark());
            let now = self.now;
            let placement = self.replication.placements.get_mut(&position.partition).expect("looked up");
            // Fetches travel in order on Kafka's connection; a datagram may overtake another,
            // so an older (lower) position is ignored.
            let fetched = position.log_end.min(log_end);
            let acknowledged = placement.acknowledged.entry(follower).or_insert(fetched);
            *acknowledged = (*acknowledged).max(fetched);
            let fetched = *acknowledged;
            if fetched >= log_end {
                placement.caught_up.insert(follower, now);
            }
            if !placement.isr.contains(&follower)
                && fetched >= high_watermark
                && !self.replication.fenced.contains(&follower)
            {
                placement.isr.insert(follower);
                placement.caught_up.insert(follower, now);
                let isr = format_isr(&placement.isr);
                self.event(format!("{}: broker {follower} rejoins the ISR {isr}", position.partition));
            }
            self.update_high_watermark(&position.partition);
            answers.push(ReplicaPosition { log_end, ..position.clone() });
        }
        self.check_invariants();
        answers
    }

    /// A follower got its leader's answer: its log now ends where the leader's did.
    pub fn replica_fetched(&mut self, follower: BrokerId, answers: &[ReplicaPosition]) {
        for answer in answers {
            let Some(placement) = self.replication.placements.get_mut(&answer.partition) else { continue };
            if placement.leader_epoch != answer.leader_epoch {
                continue;
            }
            if let Some(log_end) = placement.log_end.get_mut(&follower) {
                *log_end = (*log_end).max(answer.log_end);
            }
        }
    }

    /// The leaders drop followers that have not caught up within `replica.lag.time.max.ms`
    /// from their ISRs (never the last one).
    pub(super) fn shrink_isrs(&mut self) {
        let (now, lag_max) = (self.now, self.config.replica_lag_max);
        let mut shrunk = Vec::new();
        for (partition, placement) in &mut self.replication.placements {
            if placement.leader.is_none() || is_coordinator_topic(&partition.topic) {
                continue;
            }
            let laggards: Vec<BrokerId> = placement
                .isr
                .iter()
                .copied()
                .filter(|b| Some(*b) != placement.leader)
                .filter(|b| placement.caught_up.get(b).is_some_and(|&at| now > at + lag_max))
                .collect();
            for laggard in laggards {
                placement.isr.remove(&laggard);
                shrunk.push((partition.clone(), laggard, format_isr(&placement.isr)));
            }
        }
        for (partition, laggard, isr) in shrunk {
            self.event(format!("{partition}: broker {laggard} lags, ISR shrinks to {isr}"));
            self.update_high_watermark(&partition);
        }
    }

    /// The controller fences a broker (its session expired, or it restarted): every partition
    /// it led gets a new leader from its ISR (clean election), and it leaves every ISR.
    pub fn fence_broker(&mut self, broker: BrokerId, now: Duration) {
        self.now = self.now.max(now);
        if !self.replication.fenced.insert(broker) {
            return;
        }
        self.event(format!("controller: broker {broker} fenced"));
        let partitions: Vec<TopicPartition> = self.replication.placements.keys().cloned().collect();
        for partition in partitions {
            let placement = &self.replication.placements[&partition];
            if !placement.replicas.contains(&broker) {
                continue;
            }
            if placement.leader == Some(broker) {
                let successor = placement
                    .replicas
                    .iter()
                    .copied()
                    .find(|b| *b != broker && placement.isr.contains(b) && !self.replication.fenced.contains(b));
                self.elect(&partition, successor, "its leader was fenced");
            }
            let placement = self.replication.placements.get_mut(&partition).expect("listed");
            if placement.isr.len() > 1 && placement.isr.remove(&broker) {
                self.update_high_watermark(&partition);
            }
        }
        self.check_invariants();
    }

    /// The controller unfences a broker that registered again: partitions without a leader
    /// whose last in-sync replica it is get it back as leader; elsewhere it follows.
    pub fn unfence_broker(&mut self, broker: BrokerId, now: Duration) {
        self.now = self.now.max(now);
        if !self.replication.fenced.remove(&broker) {
            return;
        }
        self.event(format!("controller: broker {broker} unfenced"));
        // The coordinator topics are modelled as always replicated: a broker back in service
        // is in sync on them at once.
        for (partition, placement) in &mut self.replication.placements {
            if is_coordinator_topic(&partition.topic) && placement.replicas.contains(&broker) {
                placement.isr.insert(broker);
            }
        }
        let offline: Vec<TopicPartition> = self
            .replication
            .placements
            .iter()
            .filter(|(_, p)| p.leader.is_none() && p.isr.contains(&broker))
            .map(|(tp, _)| tp.clone())
            .collect();
        for partition in offline {
            self.elect(&partition, Some(broker), "its last in-sync replica is back");
        }
        self.check_invariants();
    }

    /// Moves a partition's leadership to `to` (an in-sync, unfenced replica), as a
    /// preferred-leader election or a reassignment does. Returns whether it moved.
    pub fn move_leader(&mut self, partition: &TopicPartition, to: BrokerId, now: Duration) -> bool {
        self.now = self.now.max(now);
        let Some(placement) = self.replication.placements.get(partition) else { return false };
        if placement.leader == Some(to) || !placement.isr.contains(&to) || self.replication.fenced.contains(&to) {
            return false;
        }
        self.elect(partition, Some(to), "leadership moved");
        self.check_invariants();
        true
    }

    /// Makes `leader` the partition's leader (or leaves it without one): a new leader epoch, the
    /// log truncated to the new leader's log end, a coordinator partition loading anew.
    fn elect(&mut self, partition: &TopicPartition, leader: Option<BrokerId>, reason: &str) {
        let (now, load) = (self.now, self.config.coordinator_load);
        let placement = self.replication.placements.get_mut(partition).expect("placed");
        let old = placement.leader;
        if old == leader {
            return;
        }
        placement.leader = leader;
        placement.leader_epoch += 1;
        let epoch = placement.leader_epoch;
        let mut truncate_to = None;
        if let Some(new) = leader {
            let new_end = placement.log_end.remove(&new);
            placement.acknowledged.remove(&new);
            placement.caught_up.remove(&new);
            if let Some(old) = old {
                // The old leader follows now, from the end of its log (clamped below).
                placement.log_end.insert(old, i64::MAX);
                placement.acknowledged.insert(old, i64::MAX);
                placement.caught_up.insert(old, now);
            }
            truncate_to = new_end;
            placement.loaded_at = now + load;
        }
        let name = |b: Option<BrokerId>| b.map_or_else(|| "none".to_owned(), |b| format!("broker {b}"));
        let what = format!("{partition}: leader {} -> {} (epoch {epoch}, {reason})", name(old), name(leader));
        self.event(what);
        if is_coordinator_topic(&partition.topic) {
            return;
        }
        let Ok((log, _)) = self.log_mut(partition) else { return };
        let end = truncate_to.unwrap_or_else(|| log.log_end_offset()).min(log.log_end_offset());
        let truncated = log.truncate_to(end);
        let placement = self.replication.placements.get_mut(partition).expect("placed");
        for offset in placement.log_end.values_mut().chain(placement.acknowledged.values_mut()) {
            *offset = (*offset).min(end);
        }
        if truncated.entries > 0 {
            self.event(format!("{partition}: truncated to {end} ({} entries)", truncated.entries));
            self.markers_truncated(partition, &truncated.markers);
        }
        self.update_high_watermark(partition);
    }
}

fn not_leader(at: BrokerId, partition: &TopicPartition, placement: &Placement) -> BrokerError {
    let leader = placement.leader.map_or_else(|| "no broker".to_owned(), |b| format!("broker {b}"));
    BrokerError::new(
        ErrorCode::NotLeaderOrFollower,
        format!("broker {at} does not lead {partition} ({leader} does, epoch {})", placement.leader_epoch),
    )
}

fn format_isr(isr: &BTreeSet<BrokerId>) -> String {
    let members: Vec<String> = isr.iter().map(ToString::to_string).collect();
    format!("[{}]", members.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinators_sit_on_the_partitions_kafka_places_them_on() {
        // "group".hashCode() == 98629247; "counter-group".hashCode() == -1563364498.
        let group = coordinator_topic_partition(&CoordinatorKey::Group("group".into()));
        assert_eq!(group, TopicPartition::new(CONSUMER_OFFSETS, 98_629_247 % 50));
        let txn = coordinator_topic_partition(&CoordinatorKey::Transaction("counter-group".into()));
        assert_eq!(txn, TopicPartition::new(TRANSACTION_STATE, 1_563_364_498 % 50));
    }
}
