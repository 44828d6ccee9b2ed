//! The consumer: group member after `subscribe`, group-less after `assign`; always
//! `read_committed`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use flechtwerk::kafka::{
    Consumer, ConsumerConfig, Extent, GroupMetadata, KafkaError, KafkaErrorKind, KafkaResult, LogEnd, OffsetReset,
    Polled, Rebalance, RevocationGate, StartOffset, TopicPartition,
};
use flechtwerk::wire::RawRecord;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::admin::partition_count;
use super::membership::{spawn_heartbeat, GroupProtocol, SharedMember, Step};
use super::{unexpected, Conn, PollLog, API_TIMEOUT};
use crate::cluster::protocol::{ErrorCode, FetchedPartition, OffsetSpec, Reply, Request};

/// Pause between empty fetches while `poll` waits (the broker answers fetches at once instead
/// of holding them up to `fetch.max.wait.ms`).
pub const FETCH_BACKOFF: Duration = Duration::from_millis(50);

/// Budget of the LeaveGroup sent by `close`, including retries.
pub const LEAVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Group protocol requests one `poll` sends back to back at most (join, sync, offsets).
const GROUP_STEPS_PER_POLL_MAX: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Idle,
    Subscribed,
    Assigned,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    position: i64,
    /// Whether `position` is known. A group assignment is handed out at once, positions
    /// unknown, as librdkafka does: the committed offsets are looked up (waiting while a
    /// transaction holds them unstable) only when the partition is first fetched, sought or
    /// asked for its position.
    known: bool,
    paused: bool,
    /// The last fetch said the position is outside the log: reset before the next one.
    out_of_range: bool,
}

/// The consumer handed to the engine.
pub(crate) struct SimConsumer {
    conn: Conn,
    config: ConsumerConfig,
    mode: Mode,
    assignment: BTreeMap<TopicPartition, Slot>,
    group: Option<GroupProtocol>,
    member: SharedMember,
    heartbeat: Option<JoinHandle<()>>,
    rotation: usize,
    closed: bool,
    /// Revocations wait while it is held (`Consumer::hold_revocations`).
    gate: Option<RevocationGate>,
    /// A revocation whose rejoin failed: the next poll hands its event out first.
    revoked: Option<Vec<TopicPartition>>,
    /// A revocation a poll began, running on as a task of its own (it holds the group protocol
    /// meanwhile): it waits for the `RevocationGate`, then rejoins at once, whether or not a
    /// poll is still waiting for it, as librdkafka's rebalance callback goes on on the poll's
    /// thread after the application gave the poll up. The next poll waits for it.
    revoking: Option<JoinHandle<(GroupProtocol, KafkaResult<()>)>>,
    /// Where the records of every poll are logged, for the checks.
    polls: Arc<PollLog>,
}

fn usage(operation: &'static str, message: impl Into<String>) -> KafkaError {
    KafkaError::new(KafkaErrorKind::Fatal, operation, message)
}

impl SimConsumer {
    pub(crate) fn new(conn: Conn, config: ConsumerConfig, polls: Arc<PollLog>) -> Self {
        SimConsumer {
            conn,
            config,
            mode: Mode::Idle,
            assignment: BTreeMap::new(),
            group: None,
            member: SharedMember::new(),
            heartbeat: None,
            rotation: 0,
            closed: false,
            gate: None,
            revoked: None,
            revoking: None,
            polls,
        }
    }

    fn context(&self) -> String {
        match &self.config.group_id {
            Some(group) => format!("group {group}, client {}", self.conn.client_id()),
            None => format!("client {}", self.conn.client_id()),
        }
    }

    fn check_open(&self, operation: &'static str) -> KafkaResult<()> {
        if self.closed {
            return Err(usage(operation, "the consumer is closed").with_context(self.context()));
        }
        Ok(())
    }

    fn slot(&mut self, operation: &'static str, partition: &TopicPartition) -> KafkaResult<&mut Slot> {
        self.assignment.get_mut(partition).ok_or_else(|| {
            usage(operation, "no current assignment for the partition").with_context(partition.to_string())
        })
    }

    async fn list_offset(
        &self,
        operation: &'static str,
        partition: &TopicPartition,
        spec: OffsetSpec,
    ) -> KafkaResult<i64> {
        let request = Request::ListOffsets { partition: partition.clone(), spec };
        match self.conn.call(operation, &partition.to_string(), request, API_TIMEOUT).await? {
            Reply::Offset(offset) => Ok(offset),
            other => Err(unexpected(operation, &other)),
        }
    }

    fn reset_spec(&self) -> OffsetSpec {
        match self.config.offset_reset {
            OffsetReset::Earliest => OffsetSpec::Earliest,
            OffsetReset::Latest => OffsetSpec::LastStable,
        }
    }

    /// Advances the group protocol; returns rebalance events: a revocation alone (handed out
    /// once the member sent its JoinGroup, as librdkafka rejoins when its revocation callback
    /// returns), or an assignment.
    async fn drive_group(&mut self) -> KafkaResult<Vec<Rebalance>> {
        if let Some(partitions) = self.revoked.take() {
            return Ok(vec![Rebalance::Revoked { partitions }]);
        }
        if self.revoking.is_none()
            && !self.assignment.is_empty()
            && self.group.as_ref().is_some_and(GroupProtocol::rejoin_requested)
        {
            let mut group = self.group.take().expect("checked above");
            let gate = self.gate.clone();
            // The member gives its partitions up only once no commit holds the gate (TRX-33),
            // then rejoins at once, as librdkafka does when its revocation callback returned:
            // the group can move on to its next generation while the application still
            // handles the revocation. Both go on if this poll is given up meanwhile.
            self.revoking = Some(tokio::spawn(async move {
                if let Some(gate) = gate {
                    gate.released().await;
                }
                group.take_rejoin();
                let joined = group.step().await.map(drop);
                (group, joined)
            }));
        }
        if let Some(partitions) = self.finish_revoking().await? {
            return Ok(vec![Rebalance::Revoked { partitions }]);
        }
        let Some(group) = self.group.as_mut() else { return Ok(Vec::new()) };
        group.take_rejoin();
        for _ in 0..GROUP_STEPS_PER_POLL_MAX {
            match group.step().await? {
                Step::Progressed => continue,
                Step::Wait => break,
                Step::Assigned { generation, partitions } => {
                    self.assignment = partitions
                        .iter()
                        .map(|tp| (tp.clone(), Slot { position: 0, known: false, paused: true, out_of_range: false }))
                        .collect();
                    return Ok(vec![Rebalance::Assigned { partitions, generation }]);
                }
            }
        }
        Ok(Vec::new())
    }

    /// Waits for the revocation a poll began, if any (cancellation-safe: the task goes on), and
    /// gives the partitions up: `Ok(Some(partitions))`. A failed rejoin keeps them for the next
    /// poll's event.
    async fn finish_revoking(&mut self) -> KafkaResult<Option<Vec<TopicPartition>>> {
        let Some(revoking) = self.revoking.as_mut() else { return Ok(None) };
        let (group, joined) = revoking.await.expect("the revocation task is aborted only by close");
        self.revoking = None;
        self.group = Some(group);
        let partitions = std::mem::take(&mut self.assignment).into_keys().collect();
        if let Err(error) = joined {
            self.revoked = Some(partitions);
            return Err(error);
        }
        Ok(Some(partitions))
    }

    /// Looks up the start position of every assigned partition in `wanted` whose position is
    /// not known yet: the group's committed offset, else per `offset_reset`. `Ok(false)` when
    /// the offsets are unstable (a transaction holds them) or the request was lost: try later.
    async fn resolve_positions(&mut self, wanted: &[TopicPartition]) -> KafkaResult<bool> {
        let unknown: Vec<TopicPartition> =
            wanted.iter().filter(|tp| self.assignment.get(*tp).is_some_and(|s| !s.known)).cloned().collect();
        if unknown.is_empty() {
            return Ok(true);
        }
        let Some(group) = self.config.group_id.clone() else {
            return Err(usage("poll", "a partition without a position and without a group"));
        };
        let request = Request::OffsetFetch { group, partitions: unknown.clone() };
        let committed = match self.conn.once(request).await {
            None => return Ok(false),
            Some(Ok(Reply::Committed(committed))) => committed,
            Some(Ok(other)) => return Err(unexpected("poll", &other)),
            Some(Err(error)) if error.kind == KafkaErrorKind::Retriable => return Ok(false),
            Some(Err(error)) => return Err(error.into_kafka("poll", self.context())),
        };
        for (partition, committed) in unknown.into_iter().zip(committed) {
            let position = match committed {
                Some(offset) => offset,
                None => self.list_offset("poll", &partition, self.reset_spec()).await?,
            };
            // A seek while the lookup ran wins.
            if let Some(slot) = self.assignment.get_mut(&partition).filter(|s| !s.known) {
                *slot = Slot { position, known: true, ..*slot };
            }
        }
        Ok(true)
    }

    /// Moves partitions whose position fell out of the log to where `offset_reset` says.
    async fn reset_out_of_range(&mut self) -> KafkaResult<()> {
        let stale: Vec<TopicPartition> =
            self.assignment.iter().filter(|(_, s)| s.out_of_range).map(|(tp, _)| tp.clone()).collect();
        for partition in stale {
            let position = self.list_offset("poll", &partition, self.reset_spec()).await?;
            if let Some(slot) = self.assignment.get_mut(&partition) {
                *slot = Slot { position, out_of_range: false, ..*slot };
            }
        }
        Ok(())
    }

    /// One fetch from every assigned, resumed partition: the records, and whether a position
    /// moved (past markers or aborted records, too). Cancellation-safe: positions move only
    /// after the last await, together with the records handed back.
    async fn fetch(&mut self, max_records: usize) -> KafkaResult<(Vec<RawRecord>, bool)> {
        self.reset_out_of_range().await?;
        let resumed: Vec<TopicPartition> =
            self.assignment.iter().filter(|(_, s)| !s.paused).map(|(tp, _)| tp.clone()).collect();
        if !self.resolve_positions(&resumed).await? {
            return Ok((Vec::new(), false));
        }
        let mut wanted: Vec<(TopicPartition, i64)> =
            self.assignment.iter().filter(|(_, s)| !s.paused).map(|(tp, s)| (tp.clone(), s.position)).collect();
        if wanted.is_empty() || max_records == 0 {
            return Ok((Vec::new(), false));
        }
        let turn = self.rotation % wanted.len();
        wanted.rotate_left(turn);
        self.rotation = self.rotation.wrapping_add(1);
        let request = Request::Fetch { partitions: wanted.clone(), max_records };
        let fetched = match self.conn.once(request).await {
            None => return Ok((Vec::new(), false)),
            Some(Ok(Reply::Fetched(fetched))) => fetched,
            Some(Ok(other)) => return Err(unexpected("poll", &other)),
            Some(Err(error)) if error.kind == KafkaErrorKind::Retriable => return Ok((Vec::new(), false)),
            Some(Err(error)) => return Err(error.into_kafka("poll", self.context())),
        };
        let (mut records, mut moved) = (Vec::new(), false);
        for (FetchedPartition { partition, records: got, next_offset, error }, (_, requested)) in
            fetched.into_iter().zip(wanted)
        {
            let Some(slot) = self.assignment.get_mut(&partition) else { continue };
            if slot.paused || slot.position != requested {
                continue;
            }
            match error {
                Some(e) if e.code == ErrorCode::OffsetOutOfRange => slot.out_of_range = true,
                Some(_) => {}
                None => {
                    moved |= next_offset != slot.position;
                    records.extend(got);
                    slot.position = next_offset;
                }
            }
        }
        Ok((records, moved))
    }
}

impl Drop for SimConsumer {
    fn drop(&mut self) {
        self.member.lock().closed = true;
        if let Some(heartbeat) = self.heartbeat.take() {
            heartbeat.abort();
        }
        if let Some(revoking) = self.revoking.take() {
            revoking.abort();
        }
    }
}

#[async_trait]
impl Consumer for SimConsumer {
    async fn subscribe(&mut self, topics: &[String]) -> KafkaResult<()> {
        self.check_open("subscribe")?;
        let Some(group) = self.config.group_id.clone() else {
            return Err(
                usage("subscribe", "a consumer without a group id cannot subscribe").with_context(self.context())
            );
        };
        if self.mode == Mode::Assigned {
            return Err(
                usage("subscribe", "manual assignment and subscription are exclusive").with_context(self.context())
            );
        }
        self.mode = Mode::Subscribed;
        // A revocation under way holds the protocol: it finishes first, its event for the next
        // poll.
        if let Some(partitions) = self.finish_revoking().await? {
            self.revoked = Some(partitions);
        }
        let protocol = self.group.get_or_insert_with(|| {
            GroupProtocol::new(self.conn.clone(), group.clone(), self.config.clone(), self.member.clone())
        });
        protocol.set_topics(topics);
        if self.heartbeat.is_none() {
            self.heartbeat = Some(spawn_heartbeat(self.conn.clone(), group, &self.config, self.member.clone()));
        }
        Ok(())
    }

    async fn assign(&mut self, partitions: &[(TopicPartition, StartOffset)]) -> KafkaResult<()> {
        self.check_open("assign")?;
        if self.mode == Mode::Subscribed {
            return Err(
                usage("assign", "manual assignment and subscription are exclusive").with_context(self.context())
            );
        }
        let mut assignment = BTreeMap::new();
        for (partition, start) in partitions {
            let position = match start {
                StartOffset::Beginning => self.list_offset("assign", partition, OffsetSpec::Earliest).await?,
                StartOffset::End => self.list_offset("assign", partition, OffsetSpec::LastStable).await?,
                StartOffset::At(offset) => *offset,
            };
            assignment.insert(partition.clone(), Slot { position, known: true, paused: false, out_of_range: false });
        }
        self.assignment = assignment;
        self.mode = Mode::Assigned;
        Ok(())
    }

    async fn poll(&mut self, max_records: usize, timeout: Duration) -> KafkaResult<Polled> {
        self.check_open("poll")?;
        if self.mode == Mode::Idle {
            return Err(usage("poll", "neither subscribed nor assigned").with_context(self.context()));
        }
        let deadline = Instant::now() + timeout;
        loop {
            self.member.lock().last_poll = Instant::now();
            let rebalances = self.drive_group().await?;
            if !rebalances.is_empty() {
                return Ok(Polled { rebalances, records: Vec::new() });
            }
            let (records, moved) = self.fetch(max_records).await?;
            if !records.is_empty() || moved {
                self.polls.record(&records);
                return Ok(Polled { rebalances: Vec::new(), records });
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Polled::default());
            }
            tokio::time::sleep(FETCH_BACKOFF.min(deadline - now)).await;
        }
    }

    fn pause(&mut self, partitions: &[TopicPartition]) -> KafkaResult<()> {
        for partition in partitions {
            self.slot("pause", partition)?.paused = true;
        }
        Ok(())
    }

    fn resume(&mut self, partitions: &[TopicPartition]) -> KafkaResult<()> {
        for partition in partitions {
            self.slot("resume", partition)?.paused = false;
        }
        Ok(())
    }

    async fn seek(&mut self, partition: &TopicPartition, offset: i64) -> KafkaResult<()> {
        let slot = self.slot("seek", partition)?;
        *slot = Slot { position: offset, known: true, out_of_range: false, ..*slot };
        Ok(())
    }

    async fn position(&mut self, partition: &TopicPartition) -> KafkaResult<i64> {
        self.slot("position", partition)?;
        while !self.resolve_positions(std::slice::from_ref(partition)).await? {
            tokio::time::sleep(super::RETRY_BACKOFF).await;
        }
        Ok(self.slot("position", partition)?.position)
    }

    async fn commit_offsets(&mut self, offsets: &[(TopicPartition, i64)]) -> KafkaResult<()> {
        self.check_open("commit_offsets")?;
        let Some(group) = self.config.group_id.clone() else {
            return Err(usage("commit_offsets", "a consumer without a group id cannot commit"));
        };
        let (generation, member_id) = {
            let member = self.member.lock();
            (member.generation, member.member_id.clone().unwrap_or_default())
        };
        let request = Request::OffsetCommit { group: group.clone(), generation, member_id, offsets: offsets.to_vec() };
        self.conn.call("commit_offsets", &format!("group {group}"), request, API_TIMEOUT).await.map(|_| ())
    }

    async fn committed(&mut self, partitions: &[TopicPartition]) -> KafkaResult<Vec<Option<i64>>> {
        self.check_open("committed")?;
        let Some(group) = self.config.group_id.clone() else {
            return Err(usage("committed", "a consumer without a group id has no committed offsets"));
        };
        let request = Request::OffsetFetch { group: group.clone(), partitions: partitions.to_vec() };
        match self.conn.call("committed", &format!("group {group}"), request, API_TIMEOUT).await? {
            Reply::Committed(offsets) => Ok(offsets),
            other => Err(unexpected("committed", &other)),
        }
    }

    async fn end_offset(&mut self, partition: &TopicPartition) -> KafkaResult<i64> {
        self.check_open("end_offset")?;
        self.list_offset("end_offset", partition, OffsetSpec::LastStable).await
    }

    async fn log_end_offset(&mut self, partition: &TopicPartition) -> KafkaResult<i64> {
        self.check_open("log_end_offset")?;
        self.list_offset("log_end_offset", partition, OffsetSpec::HighWatermark).await
    }

    async fn extents(&mut self, partitions: &[TopicPartition], end: LogEnd) -> KafkaResult<Vec<Extent>> {
        self.check_open("extents")?;
        // One request per partition and kind, each answered at its own instant (librdkafka
        // sends one per broker and kind; a partition's answers are no more atomic there): the
        // log starts first, then the ends, so an end is never older than its start.
        let mut starts = Vec::with_capacity(partitions.len());
        for partition in partitions {
            starts.push(self.list_offset("extents", partition, OffsetSpec::Earliest).await?);
        }
        let spec = match end {
            LogEnd::Stable => OffsetSpec::LastStable,
            LogEnd::HighWatermark => OffsetSpec::HighWatermark,
        };
        let mut extents = Vec::with_capacity(partitions.len());
        for (partition, start) in partitions.iter().zip(starts) {
            extents.push(Extent { start, end: self.list_offset("extents", partition, spec).await? });
        }
        Ok(extents)
    }

    async fn partition_count(&mut self, topic: &str) -> KafkaResult<Option<u32>> {
        self.check_open("partition_count")?;
        partition_count(&self.conn, "partition_count", topic).await
    }

    fn hold_revocations(&mut self, gate: RevocationGate) {
        self.gate = Some(gate);
    }

    fn group_metadata(&self) -> Option<GroupMetadata> {
        let group_id = self.config.group_id.clone()?;
        let member = self.member.lock();
        if member.generation < 0 {
            return None;
        }
        Some(GroupMetadata {
            group_id,
            generation: member.generation,
            member_id: member.member_id.clone()?,
            native: None,
        })
    }

    async fn close(&mut self) -> KafkaResult<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        let member_id = {
            let mut member = self.member.lock();
            member.closed = true;
            member.member_id.take()
        };
        if let Some(heartbeat) = self.heartbeat.take() {
            heartbeat.abort();
        }
        if let Some(revoking) = self.revoking.take() {
            revoking.abort();
        }
        if let (Some(group), Some(member_id)) = (self.config.group_id.clone(), member_id) {
            // Best effort, like Kafka's: a member whose leave is lost is evicted by its session.
            let context = format!("group {group}");
            let _ = self.conn.call("close", &context, Request::LeaveGroup { group, member_id }, LEAVE_TIMEOUT).await;
        }
        self.assignment.clear();
        Ok(())
    }
}
