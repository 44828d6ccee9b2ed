//! The group coordinator: members, generations, sessions, eager rebalances with the Range
//! assignor, and committed offsets.
//!
//! Joins are polled: a member re-sends JoinGroup until the rebalance completes (Kafka holds the
//! request open instead). A rebalance completes when every known member has rejoined (and, for
//! a group that was empty, the initial rebalance delay has passed), or when the rebalance
//! timeout evicts the members that did not. The coordinator computes the assignment itself
//! (Kafka's group leader does, client-side, with the same RangeAssignor).

use std::collections::BTreeMap;
use std::time::Duration;

use flechtwerk::kafka::TopicPartition;

use super::assign::range_assign;
use super::Broker;
use crate::cluster::protocol::{BrokerError, CoordinatorKey, ErrorCode, JoinOutcome, JoinRequest};

/// A group's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    /// No members.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Every member has its assignment for the current generation.
    Stable,
}

/// A group, for inspection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupView {
    /// State.
    pub state: GroupState,
    /// Current generation.
    pub generation: i32,
    /// Members and their assignments.
    pub members: BTreeMap<String, Vec<TopicPartition>>,
    /// Committed offsets.
    pub committed: BTreeMap<TopicPartition, i64>,
}

#[derive(Clone, Debug)]
struct Member {
    topics: Vec<String>,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    last_seen: Duration,
    /// Rejoined during the current rebalance.
    joined: bool,
    generation: i32,
    assignment: Vec<TopicPartition>,
}

#[derive(Clone, Debug)]
struct Group {
    generation: i32,
    state: GroupState,
    members: BTreeMap<String, Member>,
    committed: BTreeMap<TopicPartition, i64>,
    rebalance_deadline: Duration,
    not_before: Duration,
    /// The leader epoch of the coordinator partition that last served the group: when it
    /// changes, the new coordinator has loaded the group and its members' sessions start anew.
    coordinator_epoch: i32,
}

impl Group {
    fn new() -> Self {
        Group {
            coordinator_epoch: 0,
            generation: 0,
            state: GroupState::Empty,
            members: BTreeMap::new(),
            committed: BTreeMap::new(),
            rebalance_deadline: Duration::ZERO,
            not_before: Duration::ZERO,
        }
    }

    /// Starts a rebalance (if none is running): every member must rejoin.
    fn start_rebalance(&mut self, now: Duration, initial_delay: Duration, events: &mut Vec<String>, reason: &str) {
        if self.state == GroupState::PreparingRebalance {
            return;
        }
        let timeout = self.members.values().map(|m| m.rebalance_timeout).max().unwrap_or_default();
        self.not_before = if self.state == GroupState::Empty { now + initial_delay } else { now };
        self.rebalance_deadline = now + timeout;
        self.state = GroupState::PreparingRebalance;
        for member in self.members.values_mut() {
            member.joined = false;
        }
        events.push(format!("rebalance started after generation {} ({reason})", self.generation));
    }

    fn ready(&self, now: Duration) -> bool {
        let all_joined = self.members.values().all(|m| m.joined);
        (all_joined && now >= self.not_before) || now >= self.rebalance_deadline
    }

    /// Completes a due rebalance: evicts members that did not rejoin, bumps the generation,
    /// assigns with the RangeAssignor.
    fn try_complete(&mut self, now: Duration, counts: &BTreeMap<String, u32>, events: &mut Vec<String>) {
        if self.state != GroupState::PreparingRebalance || !self.ready(now) {
            return;
        }
        let laggards: Vec<String> = self.members.iter().filter(|(_, m)| !m.joined).map(|(id, _)| id.clone()).collect();
        for id in laggards {
            self.members.remove(&id);
            events.push(format!("member {id} removed: did not rejoin within the rebalance timeout"));
        }
        self.generation += 1;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            events.push(format!("generation {} completed: empty", self.generation));
            return;
        }
        let subscriptions: BTreeMap<String, Vec<String>> =
            self.members.iter().map(|(id, m)| (id.clone(), m.topics.clone())).collect();
        let assignment = range_assign(&subscriptions, counts);
        let mut listed = Vec::new();
        for (id, partitions) in assignment {
            let member = self.members.get_mut(&id).expect("assigned members exist");
            let names: Vec<String> = partitions.iter().map(ToString::to_string).collect();
            listed.push(format!("{id}=[{}]", names.join(",")));
            member.assignment = partitions;
            member.generation = self.generation;
            member.joined = false;
            member.last_seen = now;
        }
        self.state = GroupState::Stable;
        events.push(format!("generation {} completed: {}", self.generation, listed.join(" ")));
    }

    /// A new member: it starts a rebalance (and extends its deadline to its own timeout).
    fn add_member(
        &mut self,
        member_id: &str,
        join: &JoinRequest,
        now: Duration,
        delay: Duration,
        events: &mut Vec<String>,
    ) {
        let member = Member {
            topics: join.topics.clone(),
            session_timeout: join.session_timeout,
            rebalance_timeout: join.rebalance_timeout,
            last_seen: now,
            joined: false,
            generation: -1,
            assignment: Vec::new(),
        };
        self.members.insert(member_id.to_owned(), member);
        events.push(format!("member {member_id} joined, subscribed to [{}]", join.topics.join(",")));
        self.start_rebalance(now, delay, events, "member joined");
        self.rebalance_deadline = self.rebalance_deadline.max(now + join.rebalance_timeout);
    }

    /// A known member's (re-sent) join: it counts as rejoined for the running rebalance (or
    /// starts one if its subscription changed), which may complete the rebalance.
    fn rejoin(
        &mut self,
        member_id: &str,
        join: &JoinRequest,
        now: Duration,
        delay: Duration,
        counts: &BTreeMap<String, u32>,
        events: &mut Vec<String>,
    ) -> Result<JoinOutcome, BrokerError> {
        let member = self.member_mut(&join.group, member_id)?;
        member.last_seen = now;
        let changed = member.topics != join.topics;
        member.topics = join.topics.clone();
        member.session_timeout = join.session_timeout;
        member.rebalance_timeout = join.rebalance_timeout;
        let stale = member.generation != self.generation;
        if self.state != GroupState::PreparingRebalance && (changed || stale) {
            self.start_rebalance(now, delay, events, "subscription changed or member rejoined");
        }
        if self.state == GroupState::PreparingRebalance {
            self.members.get_mut(member_id).expect("present").joined = true;
            self.try_complete(now, counts, events);
        }
        match self.members.get(member_id) {
            Some(m) if self.state == GroupState::Stable && m.generation == self.generation => {
                Ok(JoinOutcome::Joined { member_id: member_id.to_owned(), generation: self.generation })
            }
            Some(_) => Ok(JoinOutcome::Pending { member_id: member_id.to_owned() }),
            None => Err(unknown_member(&join.group, member_id)),
        }
    }

    fn member_mut(&mut self, group: &str, member_id: &str) -> Result<&mut Member, BrokerError> {
        self.members.get_mut(member_id).ok_or_else(|| unknown_member(group, member_id))
    }
}

fn unknown_member(group: &str, member_id: &str) -> BrokerError {
    BrokerError::new(
        ErrorCode::UnknownMemberId,
        format!("group {group}: member {member_id} is unknown (evicted or left)"),
    )
}

fn fnv(seed: u64, text: &str, n: u64) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for byte in text.bytes().chain(n.to_le_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Every group.
#[derive(Debug)]
pub(super) struct Groups {
    seed: u64,
    members_created: u64,
    groups: BTreeMap<String, Group>,
}

impl Groups {
    /// Every group's current generation (for the broker's invariant checks).
    pub(super) fn generations(&self) -> impl Iterator<Item = (&str, i32)> {
        self.groups.iter().map(|(id, g)| (id.as_str(), g.generation))
    }

    pub(super) fn new(seed: u64) -> Self {
        Groups { seed, members_created: 0, groups: BTreeMap::new() }
    }

    /// A fresh member id: `{client_id}-{16 hex digits}`, like Kafka's `{client_id}-{uuid}`
    /// (the suffix varies with the seed, so Range's member order does too).
    fn new_member_id(&mut self, group: &str, client_id: &str) -> String {
        self.members_created += 1;
        format!("{client_id}-{:016x}", fnv(self.seed, group, self.members_created))
    }
}

impl Broker {
    /// A group's state, for inspection.
    pub fn group(&self, group: &str) -> Option<GroupView> {
        self.groups.groups.get(group).map(|g| GroupView {
            state: g.state,
            generation: g.generation,
            members: g.members.iter().map(|(id, m)| (id.clone(), m.assignment.clone())).collect(),
            committed: g.committed.clone(),
        })
    }

    fn group_events(&self, group: &str, events: Vec<String>) {
        for event in events {
            self.event(format!("group {group}: {event}"));
        }
    }

    fn check_session_timeout(&self, timeout: Duration) -> Result<(), BrokerError> {
        if timeout < self.config.session_timeout_min || timeout > self.config.session_timeout_max {
            return Err(BrokerError::new(
                ErrorCode::InvalidSessionTimeout,
                format!(
                    "session timeout {timeout:?} outside [{:?}, {:?}]",
                    self.config.session_timeout_min, self.config.session_timeout_max
                ),
            ));
        }
        Ok(())
    }

    pub(super) fn join_group(&mut self, join: JoinRequest) -> Result<JoinOutcome, BrokerError> {
        self.check_session_timeout(join.session_timeout)?;
        let (now, delay, counts) = (self.now, self.config.initial_rebalance_delay, self.partition_counts());
        let member_id = match &join.member_id {
            Some(id) => id.clone(),
            None => self.groups.new_member_id(&join.group, &join.client_id),
        };
        let group = self.groups.groups.entry(join.group.clone()).or_insert_with(Group::new);
        let mut events = Vec::new();
        if join.member_id.is_none() {
            group.add_member(&member_id, &join, now, delay, &mut events);
        }
        let result = group.rejoin(&member_id, &join, now, delay, &counts, &mut events);
        self.group_events(&join.group, events);
        result
    }

    pub(super) fn sync_group(
        &mut self,
        group_id: &str,
        member_id: &str,
        generation: i32,
    ) -> Result<Vec<TopicPartition>, BrokerError> {
        let now = self.now;
        let group = self.groups.groups.get_mut(group_id).ok_or_else(|| unknown_member(group_id, member_id))?;
        let (state, current) = (group.state, group.generation);
        let member = group.member_mut(group_id, member_id)?;
        member.last_seen = now;
        if state == GroupState::PreparingRebalance {
            return Err(rebalancing(group_id));
        }
        if member.generation != generation || current != generation {
            return Err(illegal_generation(group_id, generation, current));
        }
        Ok(member.assignment.clone())
    }

    pub(super) fn heartbeat(&mut self, group_id: &str, member_id: &str, generation: i32) -> Result<(), BrokerError> {
        let now = self.now;
        let group = self.groups.groups.get_mut(group_id).ok_or_else(|| unknown_member(group_id, member_id))?;
        let (state, current) = (group.state, group.generation);
        group.member_mut(group_id, member_id)?.last_seen = now;
        if state == GroupState::PreparingRebalance {
            return Err(rebalancing(group_id));
        }
        if generation != current {
            return Err(illegal_generation(group_id, generation, current));
        }
        Ok(())
    }

    pub(super) fn leave_group(&mut self, group_id: &str, member_id: &str) -> Result<(), BrokerError> {
        let (now, delay, counts) = (self.now, self.config.initial_rebalance_delay, self.partition_counts());
        let group = self.groups.groups.get_mut(group_id).ok_or_else(|| unknown_member(group_id, member_id))?;
        if group.members.remove(member_id).is_none() {
            return Err(unknown_member(group_id, member_id));
        }
        let mut events = vec![format!("member {member_id} left")];
        group.start_rebalance(now, delay, &mut events, "member left");
        group.try_complete(now, &counts, &mut events);
        self.group_events(group_id, events);
        Ok(())
    }

    /// Validates the committing member of an offset commit, plain or transactional (KIP-447),
    /// in the order and with the errors of Apache Kafka's classic group coordinator
    /// (`ClassicGroup.validateOffsetCommit`):
    /// - generation `-1` on a group without members: accepted (a group-less commit);
    /// - a generation, or a member id: the member must be in the group (UNKNOWN_MEMBER_ID), and
    ///   the generation must be the group's current one (ILLEGAL_GENERATION) — so a member id
    ///   with generation `-1`, or a generation without a member id, is refused;
    /// - neither: accepted for a transactional commit (the pre-KIP-447 call, which fences
    ///   nothing), UNKNOWN_MEMBER_ID for a plain commit while the group has members.
    ///
    /// An unknown group with a generation is ILLEGAL_GENERATION (Kafka's answer to
    /// TxnOffsetCommit and to OffsetCommit before version 9). FENCED_INSTANCE_ID needs static
    /// membership (`group.instance.id`), which no client of the port uses; Kafka's
    /// REBALANCE_IN_PROGRESS for a plain commit during CompletingRebalance has no counterpart,
    /// because this coordinator completes a rebalance with the assignment in one step.
    pub(super) fn check_group_member(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        transactional: bool,
    ) -> Result<(), BrokerError> {
        let group = self.groups.groups.get(group_id);
        let has_members = group.is_some_and(|g| !g.members.is_empty());
        if generation < 0 && !has_members && member_id.is_empty() {
            return Ok(());
        }
        if generation >= 0 || !member_id.is_empty() {
            let Some(group) = group else {
                return Err(illegal_generation(group_id, generation, -1));
            };
            if !group.members.contains_key(member_id) {
                return Err(unknown_member(group_id, member_id));
            }
            if generation != group.generation {
                return Err(illegal_generation(group_id, generation, group.generation));
            }
            return Ok(());
        }
        if !transactional && has_members {
            return Err(unknown_member(group_id, member_id));
        }
        Ok(())
    }

    pub(super) fn commit_group_offsets(&mut self, group_id: &str, offsets: &BTreeMap<TopicPartition, i64>) {
        let group = self.groups.groups.entry(group_id.to_owned()).or_insert_with(Group::new);
        group.committed.extend(offsets.iter().map(|(tp, o)| (tp.clone(), *o)));
    }

    pub(super) fn offset_fetch(
        &self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<Option<i64>>, BrokerError> {
        if let Some(tp) = partitions.iter().find(|tp| self.offsets_pending(group_id, tp)) {
            return Err(BrokerError::new(
                ErrorCode::UnstableOffsetCommit,
                format!("group {group_id}: offsets of {tp} wait in an unfinished transaction"),
            ));
        }
        let committed = self.groups.groups.get(group_id).map(|g| &g.committed);
        Ok(partitions.iter().map(|tp| committed.and_then(|c| c.get(tp)).copied()).collect())
    }

    pub(super) fn offset_commit(
        &mut self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        offsets: &[(TopicPartition, i64)],
    ) -> Result<(), BrokerError> {
        self.check_group_member(group_id, generation, member_id, false)?;
        let offsets: BTreeMap<TopicPartition, i64> = offsets.iter().cloned().collect();
        self.commit_group_offsets(group_id, &offsets);
        let listed: Vec<String> = offsets.iter().map(|(tp, o)| format!("{tp}={o}")).collect();
        self.event(format!("group {group_id}: offsets committed: {}", listed.join(", ")));
        Ok(())
    }

    /// Session timeouts (evict silent members) and due rebalances, in the groups whose
    /// coordinator serves.
    pub(super) fn run_group_timers(&mut self) {
        let (now, delay) = (self.now, self.config.initial_rebalance_delay);
        let mut counts = None;
        let mut all_events = Vec::new();
        let serving: BTreeMap<String, Option<i32>> = self
            .groups
            .groups
            .keys()
            .map(|name| {
                let key = CoordinatorKey::Group(name.clone());
                let ready = self.coordinator_ready(&key).is_ok();
                (name.clone(), ready.then(|| self.coordinator_epoch(&key)))
            })
            .collect();
        for (name, group) in &mut self.groups.groups {
            let mut events = Vec::new();
            let Some(epoch) = serving[name] else { continue };
            if epoch != group.coordinator_epoch {
                group.coordinator_epoch = epoch;
                for member in group.members.values_mut() {
                    member.last_seen = now;
                }
                if group.state == GroupState::PreparingRebalance {
                    let timeout = group.members.values().map(|m| m.rebalance_timeout).max().unwrap_or_default();
                    group.rebalance_deadline = now + timeout;
                }
                events.push(format!("loaded by a new coordinator (epoch {epoch}): sessions start anew"));
            }
            let expired: Vec<String> = group
                .members
                .iter()
                .filter(|(_, m)| now > m.last_seen + m.session_timeout)
                .map(|(id, _)| id.clone())
                .collect();
            for id in expired {
                let member = group.members.remove(&id).expect("listed");
                events.push(format!("member {id} evicted: session timeout {:?} expired", member.session_timeout));
                group.start_rebalance(now, delay, &mut events, "member evicted");
            }
            if group.state == GroupState::PreparingRebalance && group.ready(now) {
                let counts = counts.get_or_insert_with(|| super::partition_counts(&self.topics));
                group.try_complete(now, counts, &mut events);
            }
            if !events.is_empty() {
                all_events.push((name.clone(), events));
            }
        }
        for (name, events) in all_events {
            self.group_events(&name, events);
        }
    }

    /// A new topic changes the assignment of groups subscribed to it (Kafka's group leader
    /// notices through its metadata refresh).
    pub(super) fn on_topic_created(&mut self, topic: &str) {
        let (now, delay) = (self.now, self.config.initial_rebalance_delay);
        let mut all_events = Vec::new();
        for (name, group) in &mut self.groups.groups {
            if group.state == GroupState::Stable && group.members.values().any(|m| m.topics.iter().any(|t| t == topic))
            {
                let mut events = Vec::new();
                group.start_rebalance(now, delay, &mut events, &format!("topic {topic} created"));
                all_events.push((name.clone(), events));
            }
        }
        for (name, events) in all_events {
            self.group_events(&name, events);
        }
    }
}

fn rebalancing(group: &str) -> BrokerError {
    BrokerError::new(ErrorCode::RebalanceInProgress, format!("group {group} is rebalancing"))
}

fn illegal_generation(group: &str, generation: i32, current: i32) -> BrokerError {
    BrokerError::new(
        ErrorCode::IllegalGeneration,
        format!("group {group}: generation {generation}, current is {current}"),
    )
}
