//! The broker state machine, driven directly (no transport, no madsim): transactions, LSO,
//! fencing, idempotence, markers, groups, Range assignment, compaction.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use flechtwerk::kafka::{NewTopic, TopicCreation, TopicPartition};

use super::assign::range_assign;
use super::{Broker, BrokerConfig, GroupState, TxnStatus};
use crate::cluster::faults::BrokerFaults;
use crate::cluster::protocol::{
    BrokerError, ErrorCode, JoinOutcome, JoinRequest, NewRecord, OffsetSpec, ProduceRequest, ProducerIdentity, Reply,
    Request, Response, TxnOffsetCommitRequest,
};
use crate::trace::Trace;

/// Marker faults decided by the test.
#[derive(Default)]
struct Scripted {
    marker_delay: Duration,
    complete_before_markers: bool,
}

impl BrokerFaults for Scripted {
    fn marker_delay(&mut self, _: &str, _: &str) -> Duration {
        self.marker_delay
    }

    fn complete_before_markers(&mut self, _: &str) -> bool {
        self.complete_before_markers
    }
}

const SECOND: Duration = Duration::from_secs(1);

struct Harness {
    broker: Broker,
    now: Duration,
    faults: Scripted,
    sequences: BTreeMap<(ProducerIdentity, TopicPartition), i32>,
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

fn record(key: &str, value: Option<&str>) -> NewRecord {
    NewRecord {
        key: Some(Bytes::copy_from_slice(key.as_bytes())),
        value: value.map(|v| Bytes::copy_from_slice(v.as_bytes())),
        headers: Vec::new(),
        timestamp_ms: Some(1),
    }
}

impl Harness {
    fn new() -> Self {
        Harness {
            broker: Broker::new(BrokerConfig::default(), Trace::new()),
            now: Duration::ZERO,
            faults: Scripted::default(),
            sequences: BTreeMap::new(),
        }
    }

    fn call(&mut self, request: Request) -> Response {
        self.broker.handle(request, self.now, &mut self.faults)
    }

    fn sleep(&mut self, d: Duration) {
        self.now += d;
        self.broker.advance(self.now, &mut self.faults);
    }

    fn topic(&mut self, name: &str, partitions: u32, compact: bool) {
        let spec = NewTopic::new(name, partitions);
        let spec = if compact { spec.compacted() } else { spec };
        assert_eq!(self.call(Request::CreateTopic(spec)), Ok(Reply::TopicCreated(TopicCreation::Created)));
    }

    fn init(&mut self, id: &str) -> ProducerIdentity {
        for _ in 0..10 {
            let request = Request::InitProducerId {
                expected: None,
                transactional_id: Some(id.to_owned()),
                transaction_timeout: 60 * SECOND,
            };
            match self.call(request) {
                Ok(Reply::ProducerId(identity)) => return identity,
                Err(e) if e.code == ErrorCode::ConcurrentTransactions => self.sleep(SECOND),
                other => panic!("init {id}: {other:?}"),
            }
        }
        panic!("init {id} never completed")
    }

    fn idempotent(&mut self) -> ProducerIdentity {
        let request =
            Request::InitProducerId { expected: None, transactional_id: None, transaction_timeout: 60 * SECOND };
        match self.call(request) {
            Ok(Reply::ProducerId(identity)) => identity,
            other => panic!("init idempotent: {other:?}"),
        }
    }

    /// Produces one batch with the producer's next sequence number.
    fn produce(
        &mut self,
        txn: Option<&str>,
        producer: ProducerIdentity,
        to: &TopicPartition,
        records: &[NewRecord],
    ) -> Response {
        let sequence = self.sequences.get(&(producer, to.clone())).copied().unwrap_or(0);
        let request = Request::Produce(ProduceRequest {
            producer,
            transactional_id: txn.map(str::to_owned),
            partition: to.clone(),
            base_sequence: sequence,
            records: records.to_vec(),
        });
        let response = self.call(request);
        if response.is_ok() {
            self.sequences.insert((producer, to.clone()), sequence + records.len() as i32);
        }
        response
    }

    fn end(&mut self, id: &str, producer: ProducerIdentity, commit: bool) -> Response {
        self.call(Request::EndTxn { transactional_id: id.to_owned(), producer, commit })
    }

    fn values(&self, partition: &TopicPartition) -> Vec<String> {
        let records = self.broker.read_committed(partition).expect("partition exists");
        records.iter().map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or(b"<null>")).into_owned()).collect()
    }

    fn lso(&mut self, partition: &TopicPartition) -> i64 {
        match self.call(Request::ListOffsets { partition: partition.clone(), spec: OffsetSpec::LastStable }) {
            Ok(Reply::Offset(offset)) => offset,
            other => panic!("list offsets: {other:?}"),
        }
    }

    fn join(
        &mut self,
        group: &str,
        member: Option<&str>,
        client: &str,
        topics: &[&str],
    ) -> Result<JoinOutcome, BrokerError> {
        let request = Request::JoinGroup(JoinRequest {
            group: group.to_owned(),
            member_id: member.map(str::to_owned),
            client_id: client.to_owned(),
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
            session_timeout: 10 * SECOND,
            rebalance_timeout: 30 * SECOND,
        });
        match self.call(request) {
            Ok(Reply::Joined(outcome)) => Ok(outcome),
            Ok(other) => panic!("join: {other:?}"),
            Err(e) => Err(e),
        }
    }
}

fn code(response: Response) -> ErrorCode {
    response.expect_err("an error").code
}

fn member_of(outcome: &JoinOutcome) -> String {
    match outcome {
        JoinOutcome::Pending { member_id } | JoinOutcome::Joined { member_id, .. } => member_id.clone(),
    }
}

#[test]
fn lso_stops_at_an_open_transaction_and_fetch_never_passes_it() {
    let mut h = Harness::new();
    h.topic("t", 1, false);
    let p0 = tp("t", 0);
    let a = h.init("a");
    h.produce(Some("a"), a, &p0, &[record("k", Some("a1"))]).unwrap();
    h.end("a", a, true).unwrap();
    assert_eq!(h.lso(&p0), 2, "record + commit marker");
    let b = h.init("b");
    h.produce(Some("b"), b, &p0, &[record("k", Some("b1"))]).unwrap();
    let c = h.idempotent();
    h.produce(None, c, &p0, &[record("k", Some("plain"))]).unwrap();
    assert_eq!(h.lso(&p0), 2, "the open transaction starts at 2");
    assert_eq!(h.broker.log(&p0).unwrap().high_watermark(), 4);
    assert_eq!(h.values(&p0), ["a1"], "nothing at or after the LSO, even non-transactional records");
    let (records, next) = h.broker.log(&p0).unwrap().fetch(0, 100).unwrap();
    assert_eq!((records.len(), next), (1, 2));
    h.end("b", b, true).unwrap();
    assert_eq!(h.lso(&p0), 5);
    assert_eq!(h.values(&p0), ["a1", "b1", "plain"]);
}

#[test]
fn aborted_records_are_invisible_and_skipped_by_the_position() {
    let mut h = Harness::new();
    h.topic("t", 1, false);
    let p0 = tp("t", 0);
    let a = h.init("a");
    for (value, commit) in [("c1", true), ("x", false), ("c2", true)] {
        h.produce(Some("a"), a, &p0, &[record("k", Some(value)), record("k2", Some(value))]).unwrap();
        h.end("a", a, commit).unwrap();
    }
    assert_eq!(h.values(&p0), ["c1", "c1", "c2", "c2"]);
    let log = h.broker.log(&p0).unwrap();
    // Reading from just after the first commit skips the marker and the aborted batch.
    let (records, next) = log.fetch(2, 1).unwrap();
    assert_eq!(records[0].offset, 6);
    assert_eq!(next, 7);
    let (records, next) = log.fetch(3, 100).unwrap();
    assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), [6, 7]);
    assert_eq!(next, 9, "past the last marker, at the LSO");
    assert_eq!(code(Err(log.fetch(10, 1).unwrap_err())), ErrorCode::OffsetOutOfRange);
}

#[test]
fn init_producer_id_fences_the_previous_owner_and_aborts_its_transaction() {
    let mut h = Harness::new();
    h.topic("t", 2, false);
    let (p0, p1) = (tp("t", 0), tp("t", 1));
    let zombie = h.init("task-0");
    h.produce(Some("task-0"), zombie, &p0, &[record("k", Some("zombie"))]).unwrap();
    let request = Request::InitProducerId {
        expected: None,
        transactional_id: Some("task-0".into()),
        transaction_timeout: 60 * SECOND,
    };
    assert_eq!(code(h.call(request)), ErrorCode::ConcurrentTransactions, "first the open transaction is aborted");
    let successor = h.init("task-0");
    assert_eq!(successor.id, zombie.id);
    assert!(successor.epoch > zombie.epoch);
    assert_eq!(code(h.produce(Some("task-0"), zombie, &p1, &[record("k", Some("late"))])), ErrorCode::ProducerFenced);
    assert_eq!(code(h.end("task-0", zombie, true)), ErrorCode::ProducerFenced);
    let offsets = Request::TxnOffsetCommit(TxnOffsetCommitRequest {
        transactional_id: "task-0".into(),
        producer: zombie,
        group: "g".into(),
        generation: -1,
        member_id: String::new(),
        offsets: vec![(p0.clone(), 5)],
    });
    assert_eq!(code(h.call(offsets)), ErrorCode::ProducerFenced);
    h.produce(Some("task-0"), successor, &p0, &[record("k", Some("successor"))]).unwrap();
    h.end("task-0", successor, true).unwrap();
    assert_eq!(h.values(&p0), ["successor"]);
    assert!(h.values(&p1).is_empty());
}

/// KIP-360: a producer bumping its own epoch names itself. The current producer's bump aborts
/// its open transaction and a retry gets the bumped epoch (no second bump); a fenced zombie's
/// bump is refused, so it cannot fence the new owner in turn (the extractor seed 9815 of a
/// 10k run: a zombie's abort-time bump fenced the token's new owner).
#[test]
fn an_epoch_bump_names_the_producer_and_a_zombie_cannot_bump() {
    let mut h = Harness::new();
    h.topic("t", 1, false);
    let p0 = tp("t", 0);
    let bump = |expected: ProducerIdentity| Request::InitProducerId {
        expected: Some(expected),
        transactional_id: Some("task-0".into()),
        transaction_timeout: 60 * SECOND,
    };
    let owner = h.init("task-0");
    h.produce(Some("task-0"), owner, &p0, &[record("k", Some("aborted"))]).unwrap();
    assert_eq!(code(h.call(bump(owner))), ErrorCode::ConcurrentTransactions, "the open transaction is aborted");
    h.sleep(SECOND);
    let Ok(Reply::ProducerId(bumped)) = h.call(bump(owner)) else { panic!("the retry of the bump is answered") };
    assert_eq!((bumped.id, bumped.epoch), (owner.id, owner.epoch + 1), "one bump, not two");
    assert!(h.values(&p0).is_empty(), "the open transaction was aborted");
    // A new session fences the bumped producer; the zombie's own bump is refused.
    let successor = h.init("task-0");
    assert_eq!(code(h.call(bump(bumped))), ErrorCode::ProducerFenced);
    assert_eq!(code(h.call(bump(owner))), ErrorCode::ProducerFenced);
    h.produce(Some("task-0"), successor, &p0, &[record("k", Some("successor"))]).unwrap();
    h.end("task-0", successor, true).unwrap();
    assert_eq!(h.values(&p0), ["successor"]);
}

#[test]
fn offsets_commit_with_the_transaction_and_are_unstable_until_then() {
    let mut h = Harness::new();
    h.topic("in", 1, false);
    h.topic("out", 1, false);
    let input = tp("in", 0);
    let member = member_of(&h.join("g", None, "c", &["in"]).unwrap());
    h.sleep(4 * SECOND);
    let generation = match h.join("g", Some(&member), "c", &["in"]).unwrap() {
        JoinOutcome::Joined { generation, .. } => generation,
        pending => panic!("still {pending:?}"),
    };
    let p = h.init("txn");
    let send_offsets = |offset: i64, generation: i32| {
        Request::TxnOffsetCommit(TxnOffsetCommitRequest {
            transactional_id: "txn".into(),
            producer: p,
            group: "g".into(),
            generation,
            member_id: member.clone(),
            offsets: vec![(input.clone(), offset)],
        })
    };
    let fetch = Request::OffsetFetch { group: "g".into(), partitions: vec![input.clone()] };
    h.produce(Some("txn"), p, &tp("out", 0), &[record("k", Some("aborted"))]).unwrap();
    h.call(send_offsets(99, generation)).unwrap();
    assert_eq!(code(h.call(fetch.clone())), ErrorCode::UnstableOffsetCommit);
    h.end("txn", p, false).unwrap();
    assert_eq!(h.call(fetch.clone()), Ok(Reply::Committed(vec![None])));
    h.call(send_offsets(2, generation)).unwrap();
    assert_eq!(code(h.call(send_offsets(3, generation + 1))), ErrorCode::IllegalGeneration);
    h.end("txn", p, true).unwrap();
    assert_eq!(h.call(fetch), Ok(Reply::Committed(vec![Some(2)])));
}

#[test]
fn a_retried_batch_is_not_appended_twice() {
    let mut h = Harness::new();
    h.topic("t", 1, false);
    let p0 = tp("t", 0);
    let p = h.idempotent();
    let batch = |base_sequence: i32, values: &[&str]| {
        Request::Produce(ProduceRequest {
            producer: p,
            transactional_id: None,
            partition: p0.clone(),
            base_sequence,
            records: values.iter().map(|v| record("k", Some(v))).collect(),
        })
    };
    assert_eq!(h.call(batch(0, &["a", "b"])), Ok(Reply::Produced { base_offset: 0 }));
    assert_eq!(h.call(batch(2, &["c"])), Ok(Reply::Produced { base_offset: 2 }));
    assert_eq!(h.call(batch(0, &["a", "b"])), Ok(Reply::Produced { base_offset: 0 }), "a retry of a recent batch");
    assert_eq!(h.call(batch(2, &["c"])), Ok(Reply::Produced { base_offset: 2 }));
    assert_eq!(code(h.call(batch(7, &["gap"]))), ErrorCode::OutOfOrderSequenceNumber);
    assert_eq!(h.values(&p0), ["a", "b", "c"]);
    let stale = ProducerIdentity { epoch: -1, ..p };
    let request = Request::Produce(ProduceRequest {
        producer: stale,
        transactional_id: None,
        partition: p0.clone(),
        base_sequence: 3,
        records: vec![record("k", Some("old"))],
    });
    assert_eq!(code(h.call(request)), ErrorCode::InvalidProducerEpoch);
}

#[test]
fn a_completing_transaction_refuses_new_work_until_its_delayed_markers_land() {
    let mut h = Harness::new();
    h.topic("t", 1, false);
    let p0 = tp("t", 0);
    h.faults.marker_delay = 2 * SECOND;
    let a = h.init("a");
    h.produce(Some("a"), a, &p0, &[record("k", Some("first"))]).unwrap();
    h.end("a", a, true).unwrap();
    assert_eq!(h.broker.transaction("a").unwrap().status, TxnStatus::PrepareCommit);
    assert_eq!(h.lso(&p0), 0, "not committed until the marker lands");
    assert_eq!(code(h.produce(Some("a"), a, &p0, &[record("k", Some("second"))])), ErrorCode::ConcurrentTransactions);
    assert_eq!(h.end("a", a, true), Ok(Reply::Done), "a retried EndTxn is idempotent");
    assert_eq!(code(h.end("a", a, false)), ErrorCode::InvalidTxnState);
    h.sleep(2 * SECOND);
    assert_eq!(h.broker.transaction("a").unwrap().status, TxnStatus::CompleteCommit);
    assert_eq!(h.values(&p0), ["first"]);
    h.produce(Some("a"), a, &p0, &[record("k", Some("second"))]).unwrap();
    h.end("a", a, false).unwrap();
    h.sleep(2 * SECOND);
    assert_eq!(h.values(&p0), ["first"], "the second transaction aborted");
}

/// The first half of the Jepsen schedule: a transaction aborts, the buggy coordinator
/// completes it before its ABORT marker lands, and the producer's next transaction writes.
fn jepsen_schedule() -> (Harness, TopicPartition, ProducerIdentity) {
    let mut h = Harness::new();
    h.topic("t", 1, false);
    let p0 = tp("t", 0);
    h.faults.marker_delay = 5 * SECOND;
    h.faults.complete_before_markers = true;
    let a = h.init("a");
    h.produce(Some("a"), a, &p0, &[record("k", Some("aborted"))]).unwrap();
    h.end("a", a, false).unwrap();
    assert_eq!(h.broker.transaction("a").unwrap().status, TxnStatus::CompleteAbort, "the buggy coordinator");
    h.faults = Scripted::default();
    h.produce(Some("a"), a, &p0, &[record("k", Some("committed"))]).unwrap();
    (h, p0, a)
}

#[test]
fn jepsen_mode_a_late_abort_marker_loses_the_next_committed_transaction() {
    let (mut h, p0, a) = jepsen_schedule();
    h.sleep(5 * SECOND);
    h.end("a", a, true).unwrap();
    // The late ABORT marker closed the producer's open transaction, new records included; the
    // next transaction's COMMIT found nothing open: a committed write is lost.
    assert!(h.values(&p0).is_empty(), "anomaly expected, read {:?}", h.values(&p0));
}

#[test]
fn jepsen_mode_an_early_commit_marker_exposes_the_aborted_transaction() {
    let (mut h, p0, a) = jepsen_schedule();
    h.end("a", a, true).unwrap();
    h.sleep(5 * SECOND);
    // The next transaction's COMMIT marker landed first and committed the aborted records too.
    assert_eq!(h.values(&p0), ["aborted", "committed"], "anomaly expected");
}

#[test]
fn without_the_broker_bug_the_same_schedule_keeps_the_commit() {
    let mut h = Harness::new();
    h.topic("t", 1, false);
    let p0 = tp("t", 0);
    h.faults.marker_delay = 5 * SECOND;
    let a = h.init("a");
    h.produce(Some("a"), a, &p0, &[record("k", Some("aborted"))]).unwrap();
    h.end("a", a, false).unwrap();
    h.faults = Scripted::default();
    assert_eq!(
        code(h.produce(Some("a"), a, &p0, &[record("k", Some("committed"))])),
        ErrorCode::ConcurrentTransactions
    );
    h.sleep(5 * SECOND);
    h.produce(Some("a"), a, &p0, &[record("k", Some("committed"))]).unwrap();
    h.end("a", a, true).unwrap();
    assert_eq!(h.values(&p0), ["committed"]);
}

#[test]
fn an_expired_transaction_is_aborted_and_its_producer_fenced() {
    let mut h = Harness::new();
    h.topic("t", 1, false);
    let p0 = tp("t", 0);
    let request = Request::InitProducerId {
        expected: None,
        transactional_id: Some("slow".into()),
        transaction_timeout: 10 * SECOND,
    };
    let Ok(Reply::ProducerId(p)) = h.call(request) else { panic!("init") };
    h.produce(Some("slow"), p, &p0, &[record("k", Some("late"))]).unwrap();
    h.sleep(11 * SECOND);
    let view = h.broker.transaction("slow").unwrap();
    assert_eq!((view.status, view.epoch), (TxnStatus::CompleteAbort, p.epoch + 1));
    assert_eq!(code(h.end("slow", p, true)), ErrorCode::ProducerFenced);
    assert!(h.values(&p0).is_empty());
    assert_eq!(h.lso(&p0), 2);
}

/// Range, written independently: with `q = n / m` and `r = n % m`, the first `r` members own
/// blocks of `q + 1`, the rest blocks of `q`, so partition `p` belongs to member
/// `p / (q + 1)` if `p < r (q + 1)`, else `r + (p - r (q + 1)) / q`.
fn range_owner(p: u32, partitions: u32, members: u32) -> u32 {
    let (q, r) = (partitions / members, partitions % members);
    if p < r * (q + 1) {
        p / (q + 1)
    } else {
        r + (p - r * (q + 1)) / q
    }
}

#[test]
fn range_assignment_matches_the_closed_form_for_1_to_5_members_and_1_to_7_partitions() {
    for members in 1..=5u32 {
        for partitions in 1..=7u32 {
            let ids: Vec<String> = (0..members).map(|i| format!("m-{i}")).collect();
            let subscriptions: BTreeMap<String, Vec<String>> =
                ids.iter().map(|id| (id.clone(), vec!["a".to_owned(), "b".to_owned()])).collect();
            let counts = BTreeMap::from([("a".to_owned(), partitions), ("b".to_owned(), partitions)]);
            let assignment = range_assign(&subscriptions, &counts);
            for p in 0..partitions {
                let owner = &ids[range_owner(p, partitions, members) as usize];
                for topic in ["a", "b"] {
                    let holders: Vec<&String> = assignment
                        .iter()
                        .filter(|(_, parts)| parts.contains(&tp(topic, p as i32)))
                        .map(|(m, _)| m)
                        .collect();
                    assert_eq!(holders, [owner], "{members} members, {partitions} partitions, {topic}/{p}");
                }
            }
        }
    }
}

#[test]
fn range_assigns_each_topic_among_its_own_subscribers() {
    let subscriptions = BTreeMap::from([
        ("x".to_owned(), vec!["a".to_owned()]),
        ("y".to_owned(), vec!["a".to_owned(), "b".to_owned()]),
        ("z".to_owned(), vec!["missing".to_owned()]),
    ]);
    let counts = BTreeMap::from([("a".to_owned(), 3), ("b".to_owned(), 2)]);
    let assignment = range_assign(&subscriptions, &counts);
    assert_eq!(assignment["x"], [tp("a", 0), tp("a", 1)]);
    assert_eq!(assignment["y"], [tp("a", 2), tp("b", 0), tp("b", 1)]);
    assert!(assignment["z"].is_empty());
}

#[test]
fn group_rebalances_evict_silent_and_lagging_members() {
    let mut h = Harness::new();
    h.topic("in", 4, false);
    let a = member_of(&h.join("g", None, "a", &["in"]).unwrap());
    assert!(matches!(h.join("g", Some(&a), "a", &["in"]), Ok(JoinOutcome::Pending { .. })), "initial delay");
    h.sleep(3 * SECOND);
    assert!(matches!(h.join("g", Some(&a), "a", &["in"]), Ok(JoinOutcome::Joined { generation: 1, .. })));
    let b = member_of(&h.join("g", None, "b", &["in"]).unwrap());
    let heartbeat = |member: &str, generation: i32| Request::Heartbeat {
        group: "g".into(),
        member_id: member.to_owned(),
        generation,
    };
    assert_eq!(code(h.call(heartbeat(&a, 1))), ErrorCode::RebalanceInProgress);
    assert!(matches!(h.join("g", Some(&a), "a", &["in"]), Ok(JoinOutcome::Joined { generation: 2, .. })));
    let view = h.broker.group("g").unwrap();
    assert_eq!(view.state, GroupState::Stable);
    let mut owned: Vec<usize> = view.members.values().map(Vec::len).collect();
    owned.sort_unstable();
    assert_eq!(owned, [2, 2]);
    // b stops heartbeating; a keeps going: b is evicted after its session timeout.
    for _ in 0..4 {
        h.sleep(3 * SECOND);
        let _ = h.call(heartbeat(&a, 2));
    }
    assert_eq!(code(h.call(heartbeat(&b, 2))), ErrorCode::UnknownMemberId);
    // a never rejoins the rebalance b's eviction started: the rebalance timeout evicts a too.
    for _ in 0..11 {
        h.sleep(3 * SECOND);
        let _ = h.call(heartbeat(&a, 2));
    }
    let view = h.broker.group("g").unwrap();
    assert_eq!((view.state, view.generation, view.members.len()), (GroupState::Empty, 3, 0));
}

#[test]
fn compaction_keeps_the_last_write_per_key_and_drops_tombstones_after_the_retention() {
    let mut h = Harness::new();
    h.topic("c", 1, true);
    let p0 = tp("c", 0);
    let p = h.idempotent();
    h.produce(None, p, &p0, &[record("a", Some("a1")), record("b", Some("b1")), record("a", Some("a2"))]).unwrap();
    h.produce(None, p, &p0, &[record("b", None), record("c", Some("c1"))]).unwrap();
    h.broker.clean_now(h.now, &mut h.faults);
    assert_eq!(h.values(&p0).len(), 5, "the active segment is never cleaned");
    h.sleep(61 * SECOND);
    h.produce(None, p, &p0, &[record("a", Some("a3"))]).unwrap(); // rolls the segment
    let a = h.init("txn");
    h.produce(Some("txn"), a, &p0, &[record("c", Some("open"))]).unwrap();
    h.broker.clean_now(h.now, &mut h.faults);
    assert_eq!(h.values(&p0), ["a2", "<null>", "c1", "a3"], "below the new segment: last per key, tombstone kept");
    let offsets: Vec<i64> = h.broker.read_committed(&p0).unwrap().iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [2, 3, 4, 5], "offsets are never renumbered");
    h.end("txn", a, true).unwrap();
    h.sleep(61 * SECOND);
    h.produce(None, p, &p0, &[record("d", Some("d1"))]).unwrap(); // rolls again
    h.broker.clean_now(h.now, &mut h.faults);
    assert_eq!(h.values(&p0), ["a3", "open", "d1"], "a2 and c1 superseded, the tombstone past delete.retention");
}

/// KIP-447 fencing as Apache Kafka's classic group coordinator validates an offset commit
/// (`ClassicGroup.validateOffsetCommit`): with a generation or a member id, the member must be
/// in the group and the generation current; without either, a transactional commit passes (the
/// pre-KIP-447 call, which fences nothing) and a plain one is refused while the group has members.
#[test]
fn offset_commits_validate_the_member_and_generation_like_kafka() {
    let mut h = Harness::new();
    h.topic("in", 1, false);
    let input = tp("in", 0);
    let member = member_of(&h.join("g", None, "c", &["in"]).unwrap());
    h.sleep(4 * SECOND);
    let generation = match h.join("g", Some(&member), "c", &["in"]).unwrap() {
        JoinOutcome::Joined { generation, .. } => generation,
        pending => panic!("still {pending:?}"),
    };
    let p = h.init("txn");
    let txn = |generation: i32, member_id: &str| {
        Request::TxnOffsetCommit(TxnOffsetCommitRequest {
            transactional_id: "txn".into(),
            producer: p,
            group: "g".into(),
            generation,
            member_id: member_id.into(),
            offsets: vec![(input.clone(), 1)],
        })
    };
    let plain = |generation: i32, member_id: &str| Request::OffsetCommit {
        group: "g".into(),
        generation,
        member_id: member_id.into(),
        offsets: vec![(input.clone(), 1)],
    };
    // The member's current identity: accepted.
    h.call(txn(generation, &member)).unwrap();
    // A stale or future generation of a known member.
    assert_eq!(code(h.call(txn(generation - 1, &member))), ErrorCode::IllegalGeneration);
    assert_eq!(code(h.call(txn(generation + 1, &member))), ErrorCode::IllegalGeneration);
    // A member id with generation -1 is checked too (-1 is not the current generation).
    assert_eq!(code(h.call(txn(-1, &member))), ErrorCode::IllegalGeneration);
    // A generation without a member id, or an unknown member: UNKNOWN_MEMBER_ID.
    assert_eq!(code(h.call(txn(generation, ""))), ErrorCode::UnknownMemberId);
    assert_eq!(code(h.call(txn(generation, "gone"))), ErrorCode::UnknownMemberId);
    // Neither: a transactional commit passes, a plain one is refused while the group has members.
    h.call(txn(-1, "")).unwrap();
    assert_eq!(code(h.call(plain(-1, ""))), ErrorCode::UnknownMemberId);
    assert_eq!(code(h.call(plain(generation, ""))), ErrorCode::UnknownMemberId);
    h.call(plain(generation, &member)).unwrap();
    // An unknown group with a generation.
    let other = Request::TxnOffsetCommit(TxnOffsetCommitRequest {
        transactional_id: "txn".into(),
        producer: p,
        group: "nobody".into(),
        generation: 3,
        member_id: "m".into(),
        offsets: vec![(input.clone(), 1)],
    });
    assert_eq!(code(h.call(other)), ErrorCode::IllegalGeneration);
    h.end("txn", p, false).unwrap();
}

// The broker's own invariant checks can fail: a state that moved backwards is caught at the
// next step (the checks compare with what they saw after the previous one).

#[test]
#[should_panic(expected = "epoch went from")]
fn the_invariant_checks_catch_an_epoch_that_went_back() {
    let mut h = Harness::new();
    let first = h.init("tx");
    h.init("tx");
    // As if the coordinator had lost the bump: the last seen epoch lies ahead of the current one.
    h.broker.seen.epochs.insert("tx".into(), (first.id, i16::MAX));
    h.sleep(SECOND);
}

#[test]
#[should_panic(expected = "in one request")]
fn the_invariant_checks_catch_a_generation_that_went_back() {
    let mut h = Harness::new();
    h.topic("in", 1, false);
    h.join("g", None, "c", &["in"]).expect("joined");
    h.sleep(10 * SECOND);
    h.broker.seen.generations.insert("g".into(), i32::MAX);
    h.sleep(SECOND);
}

fn harness_on_transaction_version_2() -> Harness {
    let mut h = Harness::new();
    h.broker = Broker::new(BrokerConfig { transaction_version: 2, ..BrokerConfig::default() }, Trace::new());
    h
}

#[test]
fn under_transaction_version_2_every_end_txn_bumps_the_epoch_and_a_retry_gets_the_new_one() {
    let mut h = harness_on_transaction_version_2();
    h.topic("t", 1, false);
    let p0 = tp("t", 0);
    let first = h.init("tx");
    h.produce(Some("tx"), first, &p0, &[record("k", Some("a"))]).expect("produce");
    let bumped = ProducerIdentity { epoch: first.epoch + 1, ..first };
    assert_eq!(h.end("tx", first, true), Ok(Reply::ProducerId(bumped)));
    // A retry of the same EndTxn (its response lost) names the previous epoch: the same answer.
    assert_eq!(h.end("tx", first, true), Ok(Reply::ProducerId(bumped)));
    // The opposite outcome under the previous epoch is no retry.
    assert_eq!(code(h.end("tx", first, false)), ErrorCode::InvalidTxnState);
    // The previous epoch cannot start new work; the bumped one can, its sequences from 0.
    assert_eq!(code(h.produce(Some("tx"), first, &p0, &[record("k", Some("late"))])), ErrorCode::ProducerFenced);
    h.produce(Some("tx"), bumped, &p0, &[record("k", Some("b"))]).expect("the next transaction");
    let again = ProducerIdentity { epoch: bumped.epoch + 1, ..bumped };
    assert_eq!(h.end("tx", bumped, false), Ok(Reply::ProducerId(again)));
    // Once the next transaction began, the first epoch's EndTxn is a zombie's.
    h.produce(Some("tx"), again, &p0, &[record("k", Some("c"))]).expect("a third transaction");
    assert_eq!(code(h.end("tx", first, true)), ErrorCode::ProducerFenced);
    assert_eq!(h.end("tx", again, true), Ok(Reply::ProducerId(ProducerIdentity { epoch: again.epoch + 1, ..again })));
    assert_eq!(h.values(&p0), ["a", "c"]);
}

#[test]
fn under_transaction_version_2_the_marker_fences_the_ended_epoch_at_the_partition() {
    let mut h = harness_on_transaction_version_2();
    h.topic("t", 1, false);
    let p0 = tp("t", 0);
    let first = h.init("tx");
    h.produce(Some("tx"), first, &p0, &[record("k", Some("a"))]).expect("produce");
    let Ok(Reply::ProducerId(bumped)) = h.end("tx", first, false) else { panic!("EndTxn answers the new epoch") };
    // The partition itself refuses the ended epoch now (a batch of it still in flight), even
    // where the coordinator is not asked: the log's own producer state was raised by the marker.
    let stale = Request::Produce(ProduceRequest {
        producer: first,
        transactional_id: None,
        partition: p0.clone(),
        base_sequence: 1,
        records: vec![record("k", Some("late"))],
    });
    assert_eq!(code(h.call(stale)), ErrorCode::InvalidProducerEpoch);
    h.produce(Some("tx"), bumped, &p0, &[record("k", Some("b"))]).expect("the next transaction");
    assert_eq!(
        h.end("tx", bumped, true),
        Ok(Reply::ProducerId(ProducerIdentity { epoch: bumped.epoch + 1, ..bumped }))
    );
    assert_eq!(h.values(&p0), ["b"]);
}

#[test]
fn under_transaction_version_1_end_txn_keeps_the_epoch() {
    let mut h = Harness::new();
    h.topic("t", 1, false);
    let p0 = tp("t", 0);
    let first = h.init("tx");
    h.produce(Some("tx"), first, &p0, &[record("k", Some("a"))]).expect("produce");
    assert_eq!(h.end("tx", first, true), Ok(Reply::Done));
    assert_eq!(h.end("tx", first, true), Ok(Reply::Done), "a retry");
    h.produce(Some("tx"), first, &p0, &[record("k", Some("b"))]).expect("the same epoch goes on");
}
