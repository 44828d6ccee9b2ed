//! Replication on a cluster of three brokers, the state machine driven directly: the high
//! watermark and `acks=all`, the ISR, NOT_ENOUGH_REPLICAS, clean elections and the truncation
//! they cause, coordinators that move and load.

use std::time::Duration;

use bytes::Bytes;
use flechtwerk::kafka::{NewTopic, TopicPartition};

use super::replicas::{coordinator_topic_partition, Ack, ReplicaPosition};
use super::{Broker, BrokerConfig};
use crate::cluster::faults::NoFaults;
use crate::cluster::protocol::{
    BrokerError, BrokerId, CoordinatorKey, ErrorCode, NewRecord, ProduceRequest, ProducerIdentity, Reply, Request,
};
use crate::trace::Trace;

struct Three {
    broker: Broker,
    now: Duration,
}

fn record(value: &str) -> NewRecord {
    NewRecord {
        key: Some(Bytes::from_static(b"k")),
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Vec::new(),
        timestamp_ms: Some(1),
    }
}

const PRODUCER: ProducerIdentity = ProducerIdentity { id: 7, epoch: 0 };

impl Three {
    fn new() -> Self {
        let config = BrokerConfig { brokers: 3, ..BrokerConfig::default() };
        let mut three = Three { broker: Broker::new(config, Trace::new()), now: Duration::ZERO };
        let created =
            three.broker.handle_at(0, Request::CreateTopic(NewTopic::new("t", 1)), three.now, &mut NoFaults).0;
        assert!(created.is_ok(), "{created:?}");
        three
    }

    fn tp() -> TopicPartition {
        TopicPartition::new("t", 0)
    }

    fn leader(&self) -> BrokerId {
        self.broker.placement(&Self::tp()).and_then(|p| p.leader).expect("a leader")
    }

    fn produce(
        &mut self,
        at: BrokerId,
        sequence: i32,
        value: &str,
    ) -> (Result<Reply, BrokerError>, Option<super::AckWait>) {
        let request = Request::Produce(ProduceRequest {
            producer: PRODUCER,
            transactional_id: None,
            partition: Self::tp(),
            base_sequence: sequence,
            records: vec![record(value)],
        });
        self.broker.handle_at(at, request, self.now, &mut NoFaults)
    }

    /// One fetch of `follower` from the leader, its answer applied.
    fn fetch(&mut self, follower: BrokerId) {
        self.now += Duration::from_millis(10);
        let leader = self.leader();
        let positions: Vec<ReplicaPosition> = self.broker.follower_positions(follower, leader);
        let answers = self.broker.replica_fetch(leader, follower, &positions, self.now);
        self.broker.replica_fetched(follower, &answers);
    }

    fn followers(&self) -> Vec<BrokerId> {
        let leader = self.leader();
        (0..3).filter(|&b| b != leader).collect()
    }

    fn hw(&self) -> i64 {
        self.broker.log(&Self::tp()).expect("t/0").high_watermark()
    }

    fn end(&self) -> i64 {
        self.broker.log(&Self::tp()).expect("t/0").log_end_offset()
    }
}

#[test]
fn a_produce_is_acknowledged_once_every_in_sync_follower_fetched_it_twice() {
    let mut three = Three::new();
    let leader = three.leader();
    let (reply, wait) = three.produce(leader, 0, "a");
    assert_eq!(reply, Ok(Reply::Produced { base_offset: 0 }));
    let wait = wait.expect("acks=all waits");
    assert_eq!(three.broker.acknowledged(&wait), Ack::Waiting);
    let followers = three.followers();
    for &f in &followers {
        three.fetch(f); // gets the record: its log ends at 1, the leader does not know yet
    }
    assert_eq!((three.hw(), three.broker.acknowledged(&wait)), (0, Ack::Waiting));
    three.fetch(followers[0]);
    assert_eq!(three.hw(), 0, "one follower's position is not enough: the ISR has three");
    three.fetch(followers[1]);
    assert_eq!((three.hw(), three.broker.acknowledged(&wait)), (1, Ack::Replicated));
}

#[test]
fn only_the_leader_serves_a_partition_and_only_the_coordinator_its_ids() {
    let mut three = Three::new();
    let leader = three.leader();
    let other = three.followers()[0];
    let refused = three.produce(other, 0, "a").0.expect_err("a follower refuses");
    assert_eq!(refused.code, ErrorCode::NotLeaderOrFollower);
    let key = CoordinatorKey::Transaction("txn".into());
    let coordinator = three.broker.coordinator(&key).expect("placed");
    let wrong = (coordinator + 1) % 3;
    let init = |_: BrokerId| Request::InitProducerId {
        transactional_id: Some("txn".into()),
        expected: None,
        transaction_timeout: Duration::from_secs(60),
    };
    let refused =
        three.broker.handle_at(wrong, init(wrong), three.now, &mut NoFaults).0.expect_err("not the coordinator");
    assert_eq!(refused.code, ErrorCode::NotCoordinator);
    assert!(three.broker.handle_at(coordinator, init(coordinator), three.now, &mut NoFaults).0.is_ok());
    // The coordinator's partition moves: the new one loads first.
    let partition = coordinator_topic_partition(&key);
    assert!(three.broker.move_leader(&partition, wrong, three.now));
    let loading = three.broker.handle_at(wrong, init(wrong), three.now, &mut NoFaults).0.expect_err("loading");
    assert_eq!(loading.code, ErrorCode::CoordinatorLoadInProgress);
    three.now += Duration::from_secs(1);
    assert!(three.broker.handle_at(wrong, init(wrong), three.now, &mut NoFaults).0.is_ok());
    assert_eq!(leader, three.leader(), "moving a coordinator moves no data partition");
}

#[test]
fn a_lagging_follower_leaves_the_isr_and_below_min_insync_a_produce_is_refused() {
    let mut three = Three::new();
    let leader = three.leader();
    let followers = three.followers();
    assert!(three.produce(leader, 0, "a").0.is_ok());
    // Only the first follower fetches for longer than replica.lag.time.max.ms (30 s).
    for _ in 0..3_100 {
        three.fetch(followers[0]);
    }
    three.broker.advance(three.now, &mut NoFaults);
    let isr = three.broker.placement(&Three::tp()).expect("placed").isr.clone();
    assert_eq!(isr, [leader, followers[0]].into_iter().collect(), "the silent follower left the ISR");
    assert_eq!(three.hw(), 1, "the HW needs only the in-sync replicas");
    // Fence the remaining follower: one in-sync replica, min.insync.replicas is 2.
    three.broker.fence_broker(followers[0], three.now);
    let refused = three.produce(leader, 1, "b").0.expect_err("below min.insync.replicas");
    assert_eq!(refused.code, ErrorCode::NotEnoughReplicas);
    // The silent follower catches up and rejoins.
    three.fetch(followers[1]);
    three.fetch(followers[1]);
    assert!(three.broker.placement(&Three::tp()).expect("placed").isr.contains(&followers[1]));
    assert!(three.produce(leader, 1, "b").0.is_ok());
}

#[test]
fn a_failover_truncates_what_the_new_leader_lacks_and_the_retry_is_appended_anew() {
    let mut three = Three::new();
    let old = three.leader();
    assert!(three.produce(old, 0, "a").0.is_ok());
    for _ in 0..2 {
        for f in three.followers() {
            three.fetch(f);
        }
    }
    assert_eq!(three.hw(), 1);
    // Appended on the leader alone (not acknowledged), then the leader dies.
    let (_, wait) = three.produce(old, 1, "b");
    let wait = wait.expect("acks=all");
    assert_eq!(three.end(), 2);
    three.broker.fence_broker(old, three.now);
    let new = three.leader();
    assert_ne!(new, old);
    assert_eq!((three.end(), three.hw()), (1, 1), "the unreplicated record is gone, the acknowledged one stays");
    assert_eq!(three.broker.acknowledged(&wait), Ack::LeaderChanged, "the producer learns nothing was acknowledged");
    // The producer retries the batch with the same sequence: appended, not taken for a duplicate.
    let (reply, _) = three.produce(new, 1, "b");
    assert_eq!(reply, Ok(Reply::Produced { base_offset: 1 }));
    assert_eq!(three.end(), 2);
    // And a retry of the first batch is still recognised as one.
    let (reply, _) = three.produce(new, 0, "a");
    assert_eq!(reply, Ok(Reply::Produced { base_offset: 0 }));
    assert_eq!(three.end(), 2);
}

#[test]
fn a_partition_whose_only_in_sync_replica_died_has_no_leader_until_it_returns() {
    let mut three = Three::new();
    let old = three.leader();
    let followers = three.followers();
    for &f in &followers {
        three.broker.fence_broker(f, three.now);
    }
    assert_eq!(three.leader(), old);
    three.broker.fence_broker(old, three.now);
    assert_eq!(three.broker.placement(&Three::tp()).and_then(|p| p.leader), None, "clean elections only");
    three.broker.unfence_broker(followers[0], three.now);
    assert_eq!(three.broker.placement(&Three::tp()).and_then(|p| p.leader), None, "an out-of-sync replica never leads");
    three.broker.unfence_broker(old, three.now);
    assert_eq!(three.leader(), old);
}
