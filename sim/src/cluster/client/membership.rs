//! A consumer's group membership: the join → sync → committed-offsets state machine that
//! `poll` drives one request at a time, and the background heartbeat task that keeps the
//! session alive and notices rebalances, evictions and an exceeded poll interval.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use flechtwerk::kafka::{ConsumerConfig, KafkaErrorKind, KafkaResult, TopicPartition};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{unexpected, Conn};
use crate::cluster::protocol::{BrokerError, ErrorCode, JoinOutcome, JoinRequest, Reply, Request};

/// Upper bound of the heartbeat interval (Kafka's `heartbeat.interval.ms` default); it is also
/// at most a third of the session timeout.
pub const HEARTBEAT_INTERVAL_MAX: Duration = Duration::from_secs(3);

/// What the heartbeat task and `poll` share.
#[derive(Debug)]
pub(crate) struct MemberState {
    pub(crate) member_id: Option<String>,
    /// Generation of the current assignment (valid when `stable`).
    pub(crate) generation: i32,
    /// Holding an assignment; heartbeats check the generation.
    pub(crate) stable: bool,
    /// A heartbeat saw a rebalance: revoke and rejoin.
    pub(crate) rejoin: bool,
    /// The membership is gone (evicted, or left after the poll interval): rejoin as new.
    pub(crate) lost: bool,
    pub(crate) last_poll: Instant,
    pub(crate) closed: bool,
}

/// Shared membership state.
#[derive(Clone, Debug)]
pub(crate) struct SharedMember(Arc<Mutex<MemberState>>);

impl SharedMember {
    pub(crate) fn new() -> Self {
        SharedMember(Arc::new(Mutex::new(MemberState {
            member_id: None,
            generation: -1,
            stable: false,
            rejoin: false,
            lost: false,
            last_poll: Instant::now(),
            closed: false,
        })))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, MemberState> {
        self.0.lock().expect("member state lock")
    }
}

#[derive(Clone, Debug)]
enum Phase {
    Join,
    Sync { generation: i32 },
    Stable,
}

/// What one step of the protocol did.
pub(crate) enum Step {
    /// A request succeeded; the next step can run at once.
    Progressed,
    /// Nothing more to do now (pending join, lost request): try later.
    Wait,
    /// The member has its assignment (start positions are looked up when first needed).
    Assigned {
        /// The generation.
        generation: i32,
        /// The partitions.
        partitions: Vec<TopicPartition>,
    },
}

/// The group protocol of one subscribed consumer.
pub(crate) struct GroupProtocol {
    conn: Conn,
    group: String,
    config: ConsumerConfig,
    topics: Vec<String>,
    member: SharedMember,
    phase: Phase,
}

impl GroupProtocol {
    pub(crate) fn new(conn: Conn, group: String, config: ConsumerConfig, member: SharedMember) -> Self {
        GroupProtocol { conn, group, config, topics: Vec::new(), member, phase: Phase::Join }
    }

    pub(crate) fn set_topics(&mut self, topics: &[String]) {
        self.topics = topics.to_vec();
        let mut member = self.member.lock();
        if member.stable {
            member.rejoin = true;
        }
    }

    /// Whether the heartbeat signalled that the member must give up its assignment and rejoin
    /// (leaves the signal for [`GroupProtocol::take_rejoin`]).
    pub(crate) fn rejoin_requested(&self) -> bool {
        let member = self.member.lock();
        member.lost || member.rejoin
    }

    /// Takes the heartbeat's signals: `true` when the member must give up its assignment and
    /// rejoin.
    pub(crate) fn take_rejoin(&mut self) -> bool {
        let mut member = self.member.lock();
        let lost = std::mem::take(&mut member.lost);
        let rejoin = std::mem::take(&mut member.rejoin);
        if !(lost || rejoin) {
            return false;
        }
        member.stable = false;
        if lost {
            member.member_id = None;
        }
        self.phase = Phase::Join;
        true
    }

    fn context(&self) -> String {
        format!("group {}", self.group)
    }

    fn fail(&self, error: BrokerError) -> KafkaResult<Step> {
        if error.kind == KafkaErrorKind::Retriable {
            Ok(Step::Wait)
        } else {
            Err(error.into_kafka("poll", self.context()))
        }
    }

    fn forget_member(&mut self) -> Step {
        self.member.lock().member_id = None;
        self.phase = Phase::Join;
        Step::Progressed
    }

    /// Runs the current phase's request once.
    pub(crate) async fn step(&mut self) -> KafkaResult<Step> {
        match self.phase.clone() {
            Phase::Join => self.join().await,
            Phase::Sync { generation } => self.sync(generation).await,
            Phase::Stable => Ok(Step::Wait),
        }
    }

    async fn join(&mut self) -> KafkaResult<Step> {
        let member_id = self.member.lock().member_id.clone();
        let request = Request::JoinGroup(JoinRequest {
            group: self.group.clone(),
            member_id,
            client_id: self.conn.client_id().to_owned(),
            topics: self.topics.clone(),
            session_timeout: self.config.session_timeout,
            rebalance_timeout: self.config.max_poll_interval,
        });
        match self.conn.once(request).await {
            None => Ok(Step::Wait),
            Some(Ok(Reply::Joined(JoinOutcome::Pending { member_id }))) => {
                self.member.lock().member_id = Some(member_id);
                Ok(Step::Wait)
            }
            Some(Ok(Reply::Joined(JoinOutcome::Joined { member_id, generation }))) => {
                self.member.lock().member_id = Some(member_id);
                self.phase = Phase::Sync { generation };
                Ok(Step::Progressed)
            }
            Some(Ok(other)) => Err(unexpected("poll", &other)),
            Some(Err(error)) if error.code == ErrorCode::UnknownMemberId => Ok(self.forget_member()),
            Some(Err(error)) => self.fail(error),
        }
    }

    async fn sync(&mut self, generation: i32) -> KafkaResult<Step> {
        let Some(member_id) = self.member.lock().member_id.clone() else { return Ok(self.forget_member()) };
        let request = Request::SyncGroup { group: self.group.clone(), member_id, generation };
        match self.conn.once(request).await {
            None => Ok(Step::Wait),
            Some(Ok(Reply::Assignment(partitions))) => {
                {
                    let mut member = self.member.lock();
                    member.generation = generation;
                    member.stable = true;
                }
                self.phase = Phase::Stable;
                Ok(Step::Assigned { generation, partitions })
            }
            Some(Ok(other)) => Err(unexpected("poll", &other)),
            Some(Err(error)) if error.code == ErrorCode::UnknownMemberId => Ok(self.forget_member()),
            Some(Err(error)) if matches!(error.code, ErrorCode::RebalanceInProgress | ErrorCode::IllegalGeneration) => {
                self.phase = Phase::Join;
                Ok(Step::Progressed)
            }
            Some(Err(error)) => self.fail(error),
        }
    }
}

/// Starts the heartbeat task of a member.
pub(crate) fn spawn_heartbeat(
    conn: Conn,
    group: String,
    config: &ConsumerConfig,
    member: SharedMember,
) -> JoinHandle<()> {
    let interval = (config.session_timeout / 3).min(HEARTBEAT_INTERVAL_MAX);
    let max_poll_interval = config.max_poll_interval;
    tokio::spawn(async move {
        let mut retry_now = false;
        loop {
            if !std::mem::take(&mut retry_now) {
                tokio::time::sleep(interval).await;
            }
            let (member_id, generation, stable, last_poll) = {
                let m = member.lock();
                if m.closed {
                    return;
                }
                (m.member_id.clone(), m.generation, m.stable, m.last_poll)
            };
            let Some(member_id) = member_id else { continue };
            if last_poll.elapsed() > max_poll_interval {
                leave_after_poll_timeout(&conn, &group, &member, member_id).await;
                continue;
            }
            let request = Request::Heartbeat {
                group: group.clone(),
                member_id: member_id.clone(),
                generation: if stable { generation } else { -1 },
            };
            // A lost heartbeat is retried at once, after half an interval rather than a whole
            // request timeout: over Kafka's TCP a lost packet is retransmitted within
            // milliseconds, so one lost datagram must not cost the member its session.
            let reply = tokio::time::timeout(interval / 2, conn.once(request)).await.ok().flatten();
            retry_now = reply.is_none();
            let mut m = member.lock();
            if m.member_id.as_deref() != Some(member_id.as_str()) || m.generation != generation || m.stable != stable {
                continue; // the membership moved on while the heartbeat was out
            }
            match reply {
                Some(Err(error)) if error.code == ErrorCode::UnknownMemberId => {
                    m.member_id = None;
                    m.lost = true;
                    m.stable = false;
                }
                Some(Err(error))
                    if stable
                        && matches!(error.code, ErrorCode::RebalanceInProgress | ErrorCode::IllegalGeneration) =>
                {
                    m.rejoin = true;
                }
                _ => {}
            }
        }
    })
}

/// Like the Java consumer's heartbeat thread: a member that stopped polling for longer than
/// `max.poll.interval.ms` leaves the group, so its partitions move on.
async fn leave_after_poll_timeout(conn: &Conn, group: &str, member: &SharedMember, member_id: String) {
    let request = Request::LeaveGroup { group: group.to_owned(), member_id: member_id.clone() };
    let _ = conn.once(request).await;
    let mut m = member.lock();
    if m.member_id.as_deref() == Some(member_id.as_str()) {
        m.member_id = None;
        m.lost = true;
        m.stable = false;
    }
}
