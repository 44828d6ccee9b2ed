//! Fault schedules as data: what goes wrong, to whom, and when.
//!
//! A run's faults are generated up front by a [`FaultProfile`], as a list of [`TimedFault`]s, and
//! then executed by the harness. Being data, a schedule can be printed, replayed, and shrunk: a
//! failing run's schedule is cut down to the few faults that still make it fail.
//!
//! A profile makes schedules in two ways, from one set of kinds, weights and parameter ranges:
//!
//! - [`FaultProfile::generate`] draws the schedule *of a seed* (what [`crate::chaos::Chaos`] and
//!   the CLI's scenarios run): faults one after another, separated by the profile's gaps. It is
//!   the seed replay path, and its draws are unchanged since the seeds of `docs/simulation.md`
//!   were measured, so a seed names the same schedule as before. The harness's own shrinker
//!   (used by `Chaos` on a failing seed) then removes faults from it.
//! - [`FaultProfile::strategy`] is a [proptest] strategy over schedules, for properties of your
//!   own ("for any schedule of rebalances, the config store equals the topic's compaction"):
//!   proptest draws schedules from its own seed, and on a failure shrinks them — drops faults,
//!   moves them earlier, shortens them, lowers their probabilities — to a minimal failing one.
//!   Fault times are uniform over the period (not drawn by gaps), so the two paths give
//!   different schedules for the same numbers; a proptest failure replays through proptest
//!   (its printed minimal schedule, or `PROPTEST_RNG_SEED`), a seed through the harness.
//!   [`Fault::strategy_for`] gives single faults and [`FaultProfile::episode_strategy`] one
//!   episode (one fault, or a late-changelog handover's two).

use std::fmt;
use std::time::Duration;

use madsim::rand::Rng;
use proptest::prelude::{BoxedStrategy, Just, Strategy};
use proptest::strategy::Union;

pub use super::directed::HandoverStep;
use crate::cluster::RequestFaults;

/// One thing that goes wrong.
///
/// Replica targets are slots: a fault aimed at slot `i` hits the `i mod n`-th replica alive when
/// it fires (in start order), so a schedule stays meaningful when shrinking removes the fault
/// that added or removed a replica.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// The replica's node is killed and started again (a crash, and the orchestrator's restart).
    CrashRestart {
        /// Target slot.
        replica: usize,
    },
    /// The replica's application is stopped cleanly, as a rolling deploy's SIGTERM stops a pod
    /// (`run_until`'s shutdown: the batch in flight commits within the grace, its tasks stop,
    /// its consumers leave the group at once), and its supervisor starts it again. A launch that
    /// does not wait on [`ReplicaEnv::stop_requested`](super::replicas::ReplicaEnv::stop_requested)
    /// ignores it.
    StopRestart {
        /// Target slot.
        replica: usize,
    },
    /// One more replica starts (a scale-up: the group rebalances).
    AddReplica,
    /// A replica stops for good (a scale-down). Never the last one.
    RemoveReplica {
        /// Target slot.
        replica: usize,
    },
    /// The replica freezes (SIGSTOP, a long GC pause), timers and all, then resumes. Past the
    /// session timeout it is a zombie: its tasks move on and it must commit nothing when it wakes;
    /// past the transaction timeout the coordinator aborts its open transaction as well.
    Pause {
        /// Target slot.
        replica: usize,
        /// How long.
        duration: Duration,
    },
    /// The replica is cut off the network, both ways, then reconnected.
    Isolate {
        /// Target slot.
        replica: usize,
        /// How long.
        duration: Duration,
    },
    /// The broker restarts with its log intact; requests in flight are lost.
    BrokerRestart,
    /// The broker goes down (log intact, requests in flight lost), refuses every connection for
    /// `down`, then starts again: an outage the clients must ride out, not a quick restart.
    BrokerDown {
        /// How long the broker is down.
        down: Duration,
    },
    /// Requests of every kind are lost, answered late, held past the client's timeout, or
    /// answered with retriable or fatal errors — including ambiguous outcomes (handled, answer
    /// lost) — for a while.
    RequestChaos {
        /// How long.
        duration: Duration,
        /// The per-request probabilities.
        faults: RequestFaults,
    },
    /// Transactions fail: EndTxn and Produce answer retriable or fatal errors for a while.
    FailTransactions {
        /// How long.
        duration: Duration,
    },
    /// Commit/abort markers land late for a while, optionally only the changelog's (the
    /// previous owner's offsets are then decided while its state is not yet readable: the
    /// window in which a restore before the fence would miss that state).
    LateMarkers {
        /// How long the window lasts.
        duration: Duration,
        /// Shortest delay of a marker in the window.
        min: Duration,
        /// Longest delay of a marker in the window.
        max: Duration,
        /// Only markers on changelog partitions.
        only_changelog: bool,
    },
    /// The MQTT broker restarts (MQTT bridge runs only): every connection drops, the sessions
    /// and their messages stay, restored shared subscriptions are dead until subscribed again,
    /// and the broker refuses connections and publishes for `down` (the devices retry).
    MqttBrokerRestart {
        /// How long the broker is down.
        down: Duration,
    },
    /// The replica's MQTT connection drops (MQTT bridge runs only): acknowledgements not yet
    /// applied are lost, the client reconnects and the broker sends the unacknowledged messages
    /// again.
    MqttDisconnect {
        /// Target slot.
        replica: usize,
    },
    /// One broker of a cluster of several crashes (SIGKILL) and starts again after `down`, its
    /// log intact: the controller fences it when its heartbeats stop (9 s) or when it registers
    /// again, and whatever it led — partitions, transaction and group coordinators — moves to
    /// another in-sync replica. Skipped on a single broker.
    BrokerCrash {
        /// Target broker slot (`broker mod brokers`).
        broker: usize,
        /// How long it is down.
        down: Duration,
    },
    /// One broker freezes (SIGSTOP, a long GC pause): until `replica.lag.time.max.ms` (30 s)
    /// its partners' `acks=all` produces wait for it; past the broker session timeout (9 s) the
    /// controller fences it and its leaderships move. Skipped on a single broker.
    BrokerPause {
        /// Target broker slot.
        broker: usize,
        /// How long.
        duration: Duration,
    },
    /// One broker is cut off the network — clients, the other brokers, the controller — then
    /// reconnected. Skipped on a single broker.
    BrokerIsolate {
        /// Target broker slot.
        broker: usize,
        /// How long.
        duration: Duration,
    },
    /// The leadership of one partition, of a topic or of a coordinator topic (so a transaction
    /// or group coordinator), moves to another in-sync replica, as a preferred-leader election
    /// or a reassignment moves it. Skipped on a single broker.
    LeaderMove {
        /// Which partition: an index into the cluster's busy partitions (data partitions, and
        /// the coordinator partitions of the ids and groups in use), modulo their number.
        partition: usize,
        /// Target broker slot (the next in-sync one if it is not).
        to: usize,
    },
    /// A failover while the followers lag: every follower of one data partition is cut off from
    /// its leader for `lag` (under the broker session timeout: unfenced, still in the ISR), and
    /// `lead` into it the partition's leader crashes for `down` (from the crash), or its
    /// leadership moves to a follower while it lives on — the sequence that loses
    /// writes acknowledged before every in-sync replica had them, and truncates what the old
    /// leader appended alone. Skipped on a single broker.
    LaggingFailover {
        /// Which data partition: an index into them, modulo their number.
        partition: usize,
        /// How long the followers are cut off from the leader.
        lag: Duration,
        /// When the leader crashes, into the freeze.
        lead: Duration,
        /// How long the leader is down.
        down: Duration,
        /// The leader crashes; else its leadership moves to a follower while it lives on.
        crash: bool,
    },
    /// Commits fail abortably for a while: a share of the Produce requests is answered with an
    /// error, so the transaction that wrote the record cannot commit and must be aborted, while
    /// its producer stays usable (librdkafka's abortable errors: the application may abort and
    /// carry on with the same producer). Unlike [`Fault::FailTransactions`], no EndTxn fails,
    /// so no producer ends fatally; what survives the abort is the application's choice. A
    /// non-transactional producer's delivery simply fails.
    AbortableCommits {
        /// How long.
        duration: Duration,
        /// The share of Produce requests answered with an error.
        share: f64,
    },
    /// A directed zombie (`harness::directed`): a replica holding tasks or tokens freezes at its
    /// next transactional write (a task batch's offsets, a page's changelog record or, where the
    /// scenario aims token zombies, its first output write), and wakes
    /// the moment another replica reaches `step` of taking over what it held, that replica's
    /// request held for `hold` meanwhile: the zombie acts inside the next owner's window.
    ZombieWake {
        /// Target slot (the first replica from it that holds tasks or tokens).
        replica: usize,
        /// The next owner's step that wakes the zombie.
        step: HandoverStep,
        /// How long the next owner's request of that step is held.
        hold: Duration,
    },
    /// A page fails at its commit (`harness::directed`): from now on, of a transaction's output
    /// and changelog writes, the second to reach the broker is refused (abortable) with
    /// `probability`, until one page failed so (also past the end of the faults): the page
    /// aborts after its messages were sent while the cycle goes on.
    FailingPageCommits {
        /// How long the fault period makes room for it at least (it stays open until it failed
        /// a page).
        duration: Duration,
        /// Probability per page.
        probability: f64,
    },
}

/// How long a [`Fault::ZombieWake`] lasts at most when the next owner takes over in time: the
/// session timeout, the rebalance, the fence and the restore (it wakes at the end of the fault
/// period otherwise).
pub const ZOMBIE_WAKE_SPAN: Duration = Duration::from_secs(12);

impl Fault {
    /// A short kind name (for reports and the timeline).
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::CrashRestart { .. } => "crash-restart",
            Fault::StopRestart { .. } => "stop-restart",
            Fault::AddReplica => "add-replica",
            Fault::RemoveReplica { .. } => "remove-replica",
            Fault::Pause { .. } => "pause",
            Fault::Isolate { .. } => "isolate",
            Fault::BrokerRestart => "broker-restart",
            Fault::BrokerDown { .. } => "broker-down",
            Fault::RequestChaos { .. } => "request-chaos",
            Fault::FailTransactions { .. } => "fail-transactions",
            Fault::LateMarkers { .. } => "late-markers",
            Fault::MqttBrokerRestart { .. } => "mqtt-broker-restart",
            Fault::MqttDisconnect { .. } => "mqtt-disconnect",
            Fault::BrokerCrash { .. } => "broker-crash",
            Fault::BrokerPause { .. } => "broker-pause",
            Fault::BrokerIsolate { .. } => "broker-isolate",
            Fault::LeaderMove { .. } => "leader-move",
            Fault::LaggingFailover { .. } => "lagging-failover",
            Fault::AbortableCommits { .. } => "abortable-commits",
            Fault::ZombieWake { .. } => "zombie-wake",
            Fault::FailingPageCommits { .. } => "failing-page-commits",
        }
    }

    /// How long the fault lasts (zero for instantaneous ones).
    pub fn duration(&self) -> Duration {
        match self {
            Fault::Pause { duration, .. }
            | Fault::Isolate { duration, .. }
            | Fault::RequestChaos { duration, .. }
            | Fault::FailTransactions { duration }
            | Fault::AbortableCommits { duration, .. }
            | Fault::LateMarkers { duration, .. }
            | Fault::BrokerDown { down: duration }
            | Fault::BrokerCrash { down: duration, .. }
            | Fault::BrokerPause { duration, .. }
            | Fault::BrokerIsolate { duration, .. }
            | Fault::FailingPageCommits { duration, .. }
            | Fault::MqttBrokerRestart { down: duration } => *duration,
            Fault::ZombieWake { .. } => ZOMBIE_WAKE_SPAN,
            Fault::LaggingFailover { lag, lead, down, crash, .. } => {
                if *crash {
                    (*lead + *down).max(*lag)
                } else {
                    *lag
                }
            }
            _ => Duration::ZERO,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::CrashRestart { replica } => write!(f, "crash-restart replica#{replica}"),
            Fault::StopRestart { replica } => write!(f, "stop-restart replica#{replica}"),
            Fault::AddReplica => write!(f, "add-replica"),
            Fault::RemoveReplica { replica } => write!(f, "remove-replica replica#{replica}"),
            Fault::Pause { replica, duration } => write!(f, "pause replica#{replica} for {duration:?}"),
            Fault::Isolate { replica, duration } => write!(f, "isolate replica#{replica} for {duration:?}"),
            Fault::BrokerRestart => write!(f, "broker-restart"),
            Fault::BrokerDown { down } => write!(f, "broker-down for {down:?}"),
            Fault::RequestChaos { duration, faults } => write!(
                f,
                "request-chaos for {duration:?} (drop {:.2}/{:.2}, delay {:.2}/{:.2} ≤{:?}, hold {:.2}, retriable {:.2}, fatal {:.2})",
                faults.drop_request,
                faults.drop_response,
                faults.delay_request,
                faults.delay_response,
                faults.delay_max,
                faults.hold_past_timeout,
                faults.retriable_error,
                faults.fatal_error
            ),
            Fault::FailTransactions { duration } => write!(f, "fail-transactions for {duration:?}"),
            Fault::LateMarkers { duration, min, max, only_changelog } => write!(
                f,
                "late-markers for {duration:?} ({min:?}..{max:?}{})",
                if *only_changelog { ", changelog only" } else { "" }
            ),
            Fault::MqttBrokerRestart { down } => write!(f, "mqtt-broker-restart, down for {down:?}"),
            Fault::MqttDisconnect { replica } => write!(f, "mqtt-disconnect replica#{replica}"),
            Fault::BrokerCrash { broker, down } => write!(f, "broker-crash broker#{broker}, down for {down:?}"),
            Fault::BrokerPause { broker, duration } => write!(f, "broker-pause broker#{broker} for {duration:?}"),
            Fault::BrokerIsolate { broker, duration } => write!(f, "broker-isolate broker#{broker} for {duration:?}"),
            Fault::LeaderMove { partition, to } => write!(f, "leader-move partition#{partition} to broker#{to}"),
            Fault::LaggingFailover { partition, lag, lead, down, crash: true } => write!(
                f,
                "lagging-failover partition#{partition}: the followers cut off {lag:?}, the leader down {down:?} from {lead:?}"
            ),
            Fault::LaggingFailover { partition, lag, lead, crash: false, .. } => write!(
                f,
                "lagging-failover partition#{partition}: the followers cut off {lag:?}, the leadership moved from {lead:?}"
            ),
            Fault::AbortableCommits { duration, share } => {
                write!(f, "abortable-commits for {duration:?} ({share:.2} of Produce requests fail)")
            }
            Fault::ZombieWake { replica, step, hold } => {
                write!(f, "zombie-wake replica#{replica} at the next owner's {step}, held {hold:?}")
            }
            Fault::FailingPageCommits { duration, probability } => {
                write!(f, "failing-page-commits until a page failed (room {duration:?}, {probability:.2} of the pages)")
            }
        }
    }
}

/// A fault and when it fires, measured from the start of the fault period.
#[derive(Clone, Debug, PartialEq)]
pub struct TimedFault {
    /// When.
    pub at: Duration,
    /// What.
    pub fault: Fault,
}

/// A run's faults, in firing order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultSchedule {
    /// The faults, sorted by [`TimedFault::at`].
    pub faults: Vec<TimedFault>,
}

/// A scenario's fault kinds with `stop-restart` appended ([`Fault::StopRestart`]), for the
/// `…-rolling` variants: `const ROLLING: [&str; FAULTS.len() + 1] = with_stop_restart(FAULTS);`.
pub const fn with_stop_restart<const N: usize>(kinds: &[&'static str]) -> [&'static str; N] {
    assert!(N == kinds.len() + 1, "N is kinds.len() + 1");
    let mut all = [""; N];
    let mut i = 0;
    while i < kinds.len() {
        all[i] = kinds[i];
        i += 1;
    }
    all[kinds.len()] = "stop-restart";
    all
}

impl FaultSchedule {
    /// No faults.
    pub fn none() -> Self {
        FaultSchedule::default()
    }

    /// The schedule with `extra` faults added, in firing order (at equal times, the schedule's
    /// first).
    pub fn merged(mut self, extra: Vec<TimedFault>) -> FaultSchedule {
        self.faults.extend(extra);
        self.faults.sort_by_key(|t| t.at);
        self
    }

    /// The schedule without the faults at `indices`.
    pub fn without(&self, indices: &[usize]) -> FaultSchedule {
        let faults = self.faults.iter().enumerate().filter(|(i, _)| !indices.contains(i)).map(|(_, f)| f.clone());
        FaultSchedule { faults: faults.collect() }
    }

    /// When the last fault has ended.
    pub fn end(&self) -> Duration {
        self.faults.iter().map(|f| f.at + f.fault.duration()).max().unwrap_or_default()
    }

    /// Number of faults.
    pub fn len(&self) -> usize {
        self.faults.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }
}

impl fmt::Display for FaultSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.faults.is_empty() {
            return write!(f, "(no faults)");
        }
        for (i, timed) in self.faults.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "  +{:>7.3}s {}", timed.at.as_secs_f64(), timed.fault)?;
        }
        Ok(())
    }
}

/// How likely each kind of fault is, and how often faults come.
///
/// A weight of zero leaves a kind out. Presets: [`calm`](Self::calm), [`rebalances`],
/// [`crashes`], [`zombies`], [`network`], [`broker`], [`everything`].
///
/// [`rebalances`]: Self::rebalances
/// [`crashes`]: Self::crashes
/// [`zombies`]: Self::zombies
/// [`network`]: Self::network
/// [`broker`]: Self::broker
/// [`everything`]: Self::everything
#[derive(Clone, Debug, PartialEq)]
pub struct FaultProfile {
    /// Preset name (for reports).
    pub name: &'static str,
    /// Weight of [`Fault::CrashRestart`].
    pub crash_restart: u32,
    /// Weight of [`Fault::AddReplica`].
    pub add_replica: u32,
    /// Weight of [`Fault::RemoveReplica`].
    pub remove_replica: u32,
    /// Weight of [`Fault::Pause`].
    pub pause: u32,
    /// Weight of [`Fault::Isolate`].
    pub isolate: u32,
    /// Weight of [`Fault::BrokerRestart`].
    pub broker_restart: u32,
    /// Weight of [`Fault::RequestChaos`].
    pub request_chaos: u32,
    /// Weight of [`Fault::FailTransactions`].
    pub fail_transactions: u32,
    /// Weight of [`Fault::LateMarkers`].
    pub late_markers: u32,
    /// Weight of a handover while the changelog's markers are late: a changelog-only
    /// [`Fault::LateMarkers`] window followed 1–3 s into it by a crash-restart, a pause past the
    /// session timeout, a scale-down or a scale-up (the ordering bug class behind TRX-31).
    pub late_changelog_handover: u32,
    /// Weight of [`Fault::MqttBrokerRestart`] (MQTT bridge runs only; zero in every preset,
    /// see [`FaultProfile::for_mqtt`]).
    pub mqtt_broker_restart: u32,
    /// Weight of [`Fault::MqttDisconnect`] (MQTT bridge runs only; zero in every preset, see
    /// [`FaultProfile::for_mqtt`]).
    pub mqtt_disconnect: u32,
    /// Weight of [`Fault::BrokerDown`] (zero in every preset, so the presets' seeds draw the
    /// schedules they drew before the kind existed; the `kafka-chaos` scenario sets it).
    pub broker_down: u32,
    /// Weight of [`Fault::StopRestart`] (zero in every preset, so the presets' seeds draw the
    /// schedules they drew before the kind existed; the `counter-rolling` scenario sets it).
    pub stop_restart: u32,
    /// Weight of [`Fault::BrokerCrash`] (zero in every preset; [`FaultProfile::on_brokers`]
    /// sets the four broker kinds for a cluster of several).
    pub broker_crash: u32,
    /// Weight of [`Fault::BrokerPause`].
    pub broker_pause: u32,
    /// Weight of [`Fault::BrokerIsolate`].
    pub broker_isolate: u32,
    /// Weight of [`Fault::LeaderMove`].
    pub leader_move: u32,
    /// Weight of [`Fault::LaggingFailover`].
    pub lagging_failover: u32,
    /// Weight of [`Fault::AbortableCommits`] (zero in every preset, so the presets' seeds draw
    /// the schedules they drew before the kind existed; see also
    /// [`FaultProfile::abortable_commit_windows`]).
    pub abortable_commits: u32,
    /// At most this many [`Fault::ZombieWake`] episodes per schedule, drawn by
    /// [`FaultProfile::directed`], not by [`FaultProfile::generate`] (zero in every preset).
    pub zombie_wakes: u32,
    /// At most this many [`Fault::FailingPageCommits`] windows per schedule, drawn by
    /// [`FaultProfile::directed`] (zero in every preset; extractor runs).
    pub failing_page_commits: u32,
    /// Gap between two faults (uniform).
    pub gap: (Duration, Duration),
    /// Session timeout of the replicas: pauses are drawn around it.
    pub session_timeout: Duration,
    /// Transaction timeout of the replicas: some pauses exceed it.
    pub transaction_timeout: Duration,
    /// Probability that a pause outlasts the transaction timeout (given a pause).
    pub pause_past_transaction_timeout: f64,
    /// Probability that the run also enables the engine's fault points (buggify) and madsim's
    /// network buggification.
    pub buggify: f64,
}

impl FaultProfile {
    fn base(name: &'static str) -> Self {
        FaultProfile {
            name,
            crash_restart: 0,
            add_replica: 0,
            remove_replica: 0,
            pause: 0,
            isolate: 0,
            broker_restart: 0,
            request_chaos: 0,
            fail_transactions: 0,
            late_markers: 0,
            late_changelog_handover: 0,
            mqtt_broker_restart: 0,
            mqtt_disconnect: 0,
            broker_down: 0,
            stop_restart: 0,
            broker_crash: 0,
            broker_pause: 0,
            broker_isolate: 0,
            leader_move: 0,
            lagging_failover: 0,
            abortable_commits: 0,
            zombie_wakes: 0,
            failing_page_commits: 0,
            gap: (Duration::from_millis(300), Duration::from_millis(3_000)),
            session_timeout: Duration::from_secs(6),
            transaction_timeout: Duration::from_secs(60),
            pause_past_transaction_timeout: 0.0,
            buggify: 0.0,
        }
    }

    /// No faults.
    pub fn calm() -> Self {
        FaultProfile::base("calm")
    }

    /// Scale-ups, scale-downs and crash-restarts: tasks change hands.
    pub fn rebalances() -> Self {
        FaultProfile { crash_restart: 2, add_replica: 1, remove_replica: 1, ..FaultProfile::base("rebalances") }
    }

    /// Crash-restarts at any point, with the engine's fault points on half the time.
    pub fn crashes() -> Self {
        FaultProfile { crash_restart: 1, buggify: 0.5, ..FaultProfile::base("crashes") }
    }

    /// Replicas frozen past their session timeout, sometimes past the transaction timeout.
    pub fn zombies() -> Self {
        FaultProfile { pause: 1, pause_past_transaction_timeout: 0.15, ..FaultProfile::base("zombies") }
    }

    /// Network partitions and request faults of every kind.
    pub fn network() -> Self {
        FaultProfile { isolate: 1, request_chaos: 2, ..FaultProfile::base("network") }
    }

    /// Broker restarts, failing transactions, late markers.
    pub fn broker() -> Self {
        FaultProfile {
            broker_restart: 1,
            fail_transactions: 1,
            late_markers: 1,
            late_changelog_handover: 1,
            ..FaultProfile::base("broker")
        }
    }

    /// All of the above.
    pub fn everything() -> Self {
        FaultProfile {
            crash_restart: 4,
            add_replica: 2,
            remove_replica: 2,
            pause: 2,
            isolate: 2,
            broker_restart: 2,
            request_chaos: 2,
            fail_transactions: 2,
            late_markers: 1,
            late_changelog_handover: 5,
            pause_past_transaction_timeout: 0.1,
            buggify: 0.5,
            ..FaultProfile::base("everything")
        }
    }

    /// The preset named `name`.
    pub fn named(name: &str) -> Option<Self> {
        Some(match name {
            "calm" => Self::calm(),
            "rebalances" => Self::rebalances(),
            "crashes" => Self::crashes(),
            "zombies" => Self::zombies(),
            "network" => Self::network(),
            "broker" => Self::broker(),
            "everything" => Self::everything(),
            _ => return None,
        })
    }

    /// Every preset's name.
    pub const PRESETS: [&'static str; 7] =
        ["calm", "rebalances", "crashes", "zombies", "network", "broker", "everything"];

    fn total_weight(&self) -> u32 {
        self.crash_restart
            + self.add_replica
            + self.remove_replica
            + self.pause
            + self.isolate
            + self.broker_restart
            + self.request_chaos
            + self.fail_transactions
            + self.late_markers
            + self.late_changelog_handover
            + self.mqtt_broker_restart
            + self.mqtt_disconnect
            + self.broker_down
            + self.stop_restart
            + self.broker_crash
            + self.broker_pause
            + self.broker_isolate
            + self.leader_move
            + self.lagging_failover
            + self.abortable_commits
    }

    /// This profile on a cluster of `brokers`: on several, a profile with any fault gets the
    /// broker kinds too (weights already set are kept): broker crashes 4, pauses 2, isolations
    /// 1, leadership moves 6, failovers while the followers lag 8 (the sharpest: what a
    /// Jepsen nemesis aims at). On one broker the profile is unchanged, so its seeds draw the
    /// schedules they drew before the kinds existed.
    ///
    /// ```
    /// use flechtwerk_sim::harness::faults::FaultProfile;
    /// let three = FaultProfile::everything().on_brokers(3);
    /// assert_eq!((three.broker_crash, three.broker_pause, three.broker_isolate, three.leader_move), (4, 2, 1, 6));
    /// assert_eq!(three.lagging_failover, 8);
    /// assert_eq!(FaultProfile::everything().on_brokers(1), FaultProfile::everything());
    /// assert_eq!(FaultProfile::calm().on_brokers(3), FaultProfile::calm());
    /// ```
    pub fn on_brokers(&self, brokers: u32) -> Self {
        if brokers <= 1 || self.total_weight() == 0 {
            return self.clone();
        }
        let or = |set: u32, default: u32| if set > 0 { set } else { default };
        FaultProfile {
            broker_crash: or(self.broker_crash, 4),
            broker_pause: or(self.broker_pause, 2),
            broker_isolate: or(self.broker_isolate, 1),
            leader_move: or(self.leader_move, 6),
            lagging_failover: or(self.lagging_failover, 8),
            ..self.clone()
        }
    }

    /// This profile for an MQTT bridge (what [`crate::chaos::Chaos::mqtt`] runs): no
    /// scale-ups, scale-downs or late-changelog handovers (a removed replica's persistent session
    /// keeps absorbing its share of the messages until it expires, MQ-52, the documented handover
    /// window; and the bridge has no changelog), and MQTT faults as often as their Kafka
    /// counterparts: MQTT broker restarts with the weight of broker restarts, dropped MQTT
    /// connections with the weight of network partitions (which cut the MQTT connection too).
    /// Weights already set for the MQTT faults are kept.
    ///
    /// ```
    /// use flechtwerk_sim::harness::faults::FaultProfile;
    /// let bridge = FaultProfile::everything().for_mqtt();
    /// assert_eq!((bridge.add_replica, bridge.remove_replica, bridge.late_changelog_handover), (0, 0, 0));
    /// assert_eq!((bridge.mqtt_broker_restart, bridge.mqtt_disconnect), (2, 2));
    /// ```
    pub fn for_mqtt(&self) -> Self {
        FaultProfile {
            add_replica: 0,
            remove_replica: 0,
            late_changelog_handover: 0,
            mqtt_broker_restart: if self.mqtt_broker_restart > 0 {
                self.mqtt_broker_restart
            } else {
                self.broker_restart
            },
            mqtt_disconnect: if self.mqtt_disconnect > 0 { self.mqtt_disconnect } else { self.isolate },
            ..self.clone()
        }
    }

    /// A schedule whose faults fire within `period` (the last one may outlast it).
    pub fn generate(&self, rng: &mut impl Rng, period: Duration) -> FaultSchedule {
        let mut faults = Vec::new();
        let total = self.total_weight();
        if total == 0 {
            return FaultSchedule::none();
        }
        let mut at = Duration::ZERO;
        loop {
            at += uniform(rng, self.gap.0, self.gap.1);
            if at >= period {
                break;
            }
            let slot = rng.gen_range(0..16);
            let mut pick = rng.gen_range(0..total);
            let mut take = |weight: u32| {
                if pick < weight {
                    true
                } else {
                    pick -= weight;
                    false
                }
            };
            let fault = if take(self.crash_restart) {
                Fault::CrashRestart { replica: slot }
            } else if take(self.add_replica) {
                Fault::AddReplica
            } else if take(self.remove_replica) {
                Fault::RemoveReplica { replica: slot }
            } else if take(self.pause) {
                let duration = if rng.gen_bool(self.pause_past_transaction_timeout) {
                    self.transaction_timeout + uniform(rng, Duration::from_secs(1), Duration::from_secs(15))
                } else {
                    self.session_timeout + uniform(rng, Duration::from_secs(1), Duration::from_secs(6))
                };
                Fault::Pause { replica: slot, duration }
            } else if take(self.isolate) {
                Fault::Isolate {
                    replica: slot,
                    duration: uniform(rng, Duration::from_millis(500), Duration::from_secs(8)),
                }
            } else if take(self.broker_restart) {
                Fault::BrokerRestart
            } else if take(self.request_chaos) {
                Fault::RequestChaos {
                    duration: uniform(rng, Duration::from_secs(1), Duration::from_secs(5)),
                    faults: RequestFaults {
                        drop_request: rng.gen_range(0.0..0.08),
                        drop_response: rng.gen_range(0.0..0.08),
                        delay_request: rng.gen_range(0.0..0.3),
                        delay_response: rng.gen_range(0.0..0.3),
                        hold_past_timeout: rng.gen_range(0.0..0.05),
                        delay_max: uniform(rng, Duration::from_millis(100), Duration::from_secs(2)),
                        retriable_error: rng.gen_range(0.0..0.1),
                        fatal_error: rng.gen_range(0.0..0.02),
                    },
                }
            } else if take(self.fail_transactions) {
                Fault::FailTransactions { duration: uniform(rng, Duration::from_secs(1), Duration::from_secs(3)) }
            } else if take(self.late_markers) {
                let max = if rng.gen_bool(0.5) { Duration::from_secs(12) } else { Duration::from_secs(2) };
                Fault::LateMarkers {
                    duration: Duration::from_secs(5),
                    min: Duration::ZERO,
                    max,
                    only_changelog: rng.gen_bool(0.3),
                }
            } else if take(self.mqtt_broker_restart) {
                Fault::MqttBrokerRestart { down: uniform(rng, Duration::from_millis(50), Duration::from_secs(6)) }
            } else if take(self.mqtt_disconnect) {
                Fault::MqttDisconnect { replica: slot }
            } else if take(self.broker_down) {
                // Drawn last among the single faults, and only when picked: a profile with no
                // weight on it draws exactly the schedules it drew before the kind existed.
                Fault::BrokerDown { down: uniform(rng, Duration::from_millis(500), Duration::from_secs(4)) }
            } else if take(self.stop_restart) {
                // Likewise drawn only when picked, after every older kind.
                Fault::StopRestart { replica: slot }
            } else if take(self.broker_crash) {
                // The broker kinds likewise (weight zero unless `on_brokers` set them).
                let down = if rng.gen_bool(0.5) {
                    uniform(rng, Duration::from_millis(200), Duration::from_secs(5))
                } else {
                    uniform(rng, Duration::from_secs(10), Duration::from_secs(25))
                };
                Fault::BrokerCrash { broker: slot, down }
            } else if take(self.broker_pause) {
                let duration = match rng.gen_range(0..4) {
                    0 => uniform(rng, Duration::from_millis(500), Duration::from_secs(5)),
                    1 | 2 => uniform(rng, Duration::from_secs(10), Duration::from_secs(20)),
                    _ => uniform(rng, Duration::from_secs(31), Duration::from_secs(40)),
                };
                Fault::BrokerPause { broker: slot, duration }
            } else if take(self.broker_isolate) {
                Fault::BrokerIsolate {
                    broker: slot,
                    duration: uniform(rng, Duration::from_secs(1), Duration::from_secs(15)),
                }
            } else if take(self.leader_move) {
                Fault::LeaderMove { partition: rng.gen_range(0..1_000), to: slot }
            } else if take(self.lagging_failover) {
                Fault::LaggingFailover {
                    partition: rng.gen_range(0..1_000),
                    lag: uniform(rng, Duration::from_secs(2), Duration::from_secs(8)),
                    lead: uniform(rng, Duration::from_millis(300), Duration::from_millis(1_500)),
                    down: uniform(rng, Duration::from_secs(2), Duration::from_secs(15)),
                    crash: rng.gen_bool(0.5),
                }
            } else if take(self.abortable_commits) {
                // Likewise drawn only when picked, after every older kind.
                abortable_commits(rng)
            } else {
                // A handover while only the changelog's markers are late. The owner that loses
                // its tasks must have committed inside the window first (so the handover comes
                // 1–3 s into it), and its last changelog marker must still be late when the next
                // owner starts: after a crash or a removal that is the session timeout later
                // (6 s), so the delays are 5–15 s. A commit with a late marker holds its
                // producer's next transaction (CONCURRENT_TRANSACTIONS) until the marker lands,
                // which also holds up the revocation of a live owner: handovers where the owner
                // dies or freezes are the sharp ones, so they are the common ones.
                let min = uniform(rng, Duration::from_secs(5), Duration::from_secs(9));
                let lead = uniform(rng, Duration::from_secs(1), Duration::from_secs(3));
                faults.push(TimedFault {
                    at,
                    fault: Fault::LateMarkers {
                        duration: lead + uniform(rng, Duration::from_millis(500), Duration::from_secs(2)),
                        min,
                        max: min + Duration::from_secs(6),
                        only_changelog: true,
                    },
                });
                at += lead;
                match rng.gen_range(0..20) {
                    0..=7 => Fault::CrashRestart { replica: slot },
                    8..=12 => Fault::Pause {
                        replica: slot,
                        duration: self.session_timeout + uniform(rng, Duration::from_secs(1), Duration::from_secs(6)),
                    },
                    13..=16 => Fault::RemoveReplica { replica: slot },
                    _ => Fault::AddReplica,
                }
            };
            faults.push(TimedFault { at, fault });
        }
        FaultSchedule { faults }
    }

    /// `count` windows of [`Fault::AbortableCommits`] at uniform times in `period`, each 1–4 s
    /// long with 10–35 % of the Produce requests failing, sorted by time: what a scenario adds to
    /// a schedule drawn before (merge with [`FaultSchedule::merged`]), so that its seeds keep
    /// every fault they drew and abort-and-continue paths still run in most of them.
    pub fn abortable_commit_windows(rng: &mut impl Rng, period: Duration, count: usize) -> Vec<TimedFault> {
        let mut windows: Vec<TimedFault> = (0..count)
            .map(|_| TimedFault { at: uniform(rng, Duration::ZERO, period), fault: abortable_commits(rng) })
            .collect();
        windows.sort_by_key(|t| t.at);
        windows
    }
}

/// A [`Fault::AbortableCommits`] as [`FaultProfile::generate`] draws it.
fn abortable_commits(rng: &mut impl Rng) -> Fault {
    Fault::AbortableCommits {
        duration: uniform(rng, Duration::from_secs(1), Duration::from_secs(4)),
        share: rng.gen_range(0.1..0.35),
    }
}

impl FaultProfile {
    /// The directed episodes of a schedule within `period` (`harness::directed`), drawn apart
    /// from [`FaultProfile::generate`] so that a seed keeps the faults it drew before, and
    /// merged into its schedule ([`FaultSchedule::merged`]): up to
    /// [`zombie_wakes`](Self::zombie_wakes) zombie wakes in the first two thirds of the period
    /// (a step of the takeover each, the next owner's request held 0.5–2.5 s), and up to
    /// [`failing_page_commits`](Self::failing_page_commits) windows (3–10 s of room in the fault
    /// period) in which 50–100 % of the pages fail at their commit until one did (one per
    /// producer session).
    pub fn directed(&self, rng: &mut impl Rng, period: Duration) -> Vec<TimedFault> {
        let mut faults = Vec::new();
        if self.zombie_wakes > 0 {
            for _ in 0..rng.gen_range(0..=self.zombie_wakes) {
                let at = uniform(rng, Duration::ZERO, period * 2 / 3);
                let fault = Fault::ZombieWake {
                    replica: rng.gen_range(0..16),
                    step: HandoverStep::ALL[rng.gen_range(0..HandoverStep::ALL.len())],
                    hold: uniform(rng, Duration::from_millis(500), Duration::from_millis(2_500)),
                };
                faults.push(TimedFault { at, fault });
            }
        }
        if self.failing_page_commits > 0 {
            for _ in 0..rng.gen_range(0..=self.failing_page_commits) {
                let at = uniform(rng, Duration::ZERO, period);
                let fault = Fault::FailingPageCommits {
                    duration: uniform(rng, Duration::from_secs(3), Duration::from_secs(10)),
                    probability: rng.gen_range(0.5..1.0),
                };
                faults.push(TimedFault { at, fault });
            }
        }
        faults
    }
}

/// The proptest side: strategies over faults and schedules (see the [module](self) docs).
impl FaultProfile {
    /// A proptest strategy over this profile's schedules within `period`: up to twice as many
    /// episodes as the profile's mean gap fits in the period (at least one), each at a uniform
    /// time in the period, sorted by time. The calm profile gives only the empty schedule.
    ///
    /// Shrinking drops episodes, moves them towards the start, and shrinks each fault (shorter
    /// durations, lower slots, lower probabilities; a pause past the transaction timeout towards
    /// one past the session timeout).
    pub fn strategy(&self, period: Duration) -> BoxedStrategy<FaultSchedule> {
        if self.total_weight() == 0 || period.is_zero() {
            return Just(FaultSchedule::none()).boxed();
        }
        let mean_gap = (self.gap.0 + self.gap.1) / 2;
        let fit = if mean_gap.is_zero() { 1 } else { (period.as_micros() / mean_gap.as_micros().max(1)) as usize };
        let max = (2 * fit).max(1);
        let period_us = period.as_micros() as u64;
        let episode = (0..period_us, self.episode_strategy());
        proptest::collection::vec(episode, 0..=max)
            .prop_map(|episodes| {
                let mut faults: Vec<TimedFault> = episodes
                    .into_iter()
                    .flat_map(|(start, episode)| {
                        let start = Duration::from_micros(start);
                        episode.into_iter().map(move |t| TimedFault { at: start + t.at, fault: t.fault })
                    })
                    .collect();
                // Stable: a handover's late markers stay before its fault at the same time.
                faults.sort_by_key(|t| t.at);
                FaultSchedule { faults }
            })
            .boxed()
    }

    /// One episode of this profile, its times relative to the episode's start: a single fault
    /// (at 0), or a late-changelog handover (changelog-only late markers at 0, the handover 1–3 s
    /// later). Weighted as in [`FaultProfile::generate`]. Panics on the calm profile (no kind
    /// has weight).
    pub fn episode_strategy(&self) -> BoxedStrategy<Vec<TimedFault>> {
        let at_zero =
            |s: BoxedStrategy<Fault>| s.prop_map(|fault| vec![TimedFault { at: Duration::ZERO, fault }]).boxed();
        let mut arms: Vec<(u32, BoxedStrategy<Vec<TimedFault>>)> = Vec::new();
        for kind in FaultKind::ALL {
            let weight = self.weight(kind);
            if weight > 0 {
                arms.push((weight, at_zero(Fault::strategy_for(kind, self))));
            }
        }
        if self.late_changelog_handover > 0 {
            arms.push((self.late_changelog_handover, self.handover_strategy()));
        }
        assert!(!arms.is_empty(), "the {} profile has no fault kind with weight", self.name);
        Union::new_weighted(arms).boxed()
    }

    /// A handover while only the changelog's markers are late (see
    /// [`FaultProfile::late_changelog_handover`]), with the ranges of [`FaultProfile::generate`].
    fn handover_strategy(&self) -> BoxedStrategy<Vec<TimedFault>> {
        let session = self.session_timeout;
        let handover = Union::new_weighted(vec![
            (8, slot().prop_map(|replica| Fault::CrashRestart { replica }).boxed()),
            (
                5,
                (slot(), span(session + Duration::from_secs(1), session + Duration::from_secs(6)))
                    .prop_map(|(replica, duration)| Fault::Pause { replica, duration })
                    .boxed(),
            ),
            (4, slot().prop_map(|replica| Fault::RemoveReplica { replica }).boxed()),
            (3, Just(Fault::AddReplica).boxed()),
        ]);
        (
            span(Duration::from_secs(5), Duration::from_secs(9)),
            span(Duration::from_secs(1), Duration::from_secs(3)),
            span(Duration::from_millis(500), Duration::from_secs(2)),
            handover,
        )
            .prop_map(|(min, lead, rest, fault)| {
                vec![
                    TimedFault {
                        at: Duration::ZERO,
                        fault: Fault::LateMarkers {
                            duration: lead + rest,
                            min,
                            max: min + Duration::from_secs(6),
                            only_changelog: true,
                        },
                    },
                    TimedFault { at: lead, fault },
                ]
            })
            .boxed()
    }

    fn weight(&self, kind: FaultKind) -> u32 {
        match kind {
            FaultKind::CrashRestart => self.crash_restart,
            FaultKind::AddReplica => self.add_replica,
            FaultKind::RemoveReplica => self.remove_replica,
            FaultKind::Pause => self.pause,
            FaultKind::Isolate => self.isolate,
            FaultKind::BrokerRestart => self.broker_restart,
            FaultKind::RequestChaos => self.request_chaos,
            FaultKind::FailTransactions => self.fail_transactions,
            FaultKind::LateMarkers => self.late_markers,
            FaultKind::MqttBrokerRestart => self.mqtt_broker_restart,
            FaultKind::MqttDisconnect => self.mqtt_disconnect,
            FaultKind::BrokerDown => self.broker_down,
            FaultKind::StopRestart => self.stop_restart,
            FaultKind::BrokerCrash => self.broker_crash,
            FaultKind::BrokerPause => self.broker_pause,
            FaultKind::BrokerIsolate => self.broker_isolate,
            FaultKind::LeaderMove => self.leader_move,
            FaultKind::LaggingFailover => self.lagging_failover,
            FaultKind::AbortableCommits => self.abortable_commits,
        }
    }
}

/// A kind of [`Fault`], for [`Fault::strategy_for`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// [`Fault::CrashRestart`].
    CrashRestart,
    /// [`Fault::AddReplica`].
    AddReplica,
    /// [`Fault::RemoveReplica`].
    RemoveReplica,
    /// [`Fault::Pause`].
    Pause,
    /// [`Fault::Isolate`].
    Isolate,
    /// [`Fault::BrokerRestart`].
    BrokerRestart,
    /// [`Fault::RequestChaos`].
    RequestChaos,
    /// [`Fault::FailTransactions`].
    FailTransactions,
    /// [`Fault::LateMarkers`].
    LateMarkers,
    /// [`Fault::MqttBrokerRestart`].
    MqttBrokerRestart,
    /// [`Fault::MqttDisconnect`].
    MqttDisconnect,
    /// [`Fault::BrokerDown`].
    BrokerDown,
    /// [`Fault::StopRestart`].
    StopRestart,
    /// [`Fault::BrokerCrash`].
    BrokerCrash,
    /// [`Fault::BrokerPause`].
    BrokerPause,
    /// [`Fault::BrokerIsolate`].
    BrokerIsolate,
    /// [`Fault::LeaderMove`].
    LeaderMove,
    /// [`Fault::LaggingFailover`].
    LaggingFailover,
    /// [`Fault::AbortableCommits`].
    AbortableCommits,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 19] = [
        FaultKind::CrashRestart,
        FaultKind::AddReplica,
        FaultKind::RemoveReplica,
        FaultKind::Pause,
        FaultKind::Isolate,
        FaultKind::BrokerRestart,
        FaultKind::RequestChaos,
        FaultKind::FailTransactions,
        FaultKind::LateMarkers,
        FaultKind::MqttBrokerRestart,
        FaultKind::MqttDisconnect,
        FaultKind::BrokerDown,
        FaultKind::StopRestart,
        FaultKind::BrokerCrash,
        FaultKind::BrokerPause,
        FaultKind::BrokerIsolate,
        FaultKind::LeaderMove,
        FaultKind::LaggingFailover,
        FaultKind::AbortableCommits,
    ];
}

impl Fault {
    /// A proptest strategy over faults of `kind`, with the parameter ranges `profile` draws
    /// them from in [`FaultProfile::generate`] (pauses around its session timeout, some past its
    /// transaction timeout).
    pub fn strategy_for(kind: FaultKind, profile: &FaultProfile) -> BoxedStrategy<Fault> {
        match kind {
            FaultKind::CrashRestart => slot().prop_map(|replica| Fault::CrashRestart { replica }).boxed(),
            FaultKind::AddReplica => Just(Fault::AddReplica).boxed(),
            FaultKind::RemoveReplica => slot().prop_map(|replica| Fault::RemoveReplica { replica }).boxed(),
            FaultKind::Pause => {
                let session = profile.session_timeout;
                let past_session = span(session + Duration::from_secs(1), session + Duration::from_secs(6));
                let transaction = profile.transaction_timeout;
                let past_transaction =
                    span(transaction + Duration::from_secs(1), transaction + Duration::from_secs(15));
                let p = (profile.pause_past_transaction_timeout.clamp(0.0, 1.0) * 1000.0).round() as u32;
                let mut durations = Vec::new();
                if p < 1000 {
                    durations.push((1000 - p, past_session));
                }
                if p > 0 {
                    durations.push((p, past_transaction));
                }
                (slot(), Union::new_weighted(durations))
                    .prop_map(|(replica, duration)| Fault::Pause { replica, duration })
                    .boxed()
            }
            FaultKind::Isolate => (slot(), span(Duration::from_millis(500), Duration::from_secs(8)))
                .prop_map(|(replica, duration)| Fault::Isolate { replica, duration })
                .boxed(),
            FaultKind::BrokerRestart => Just(Fault::BrokerRestart).boxed(),
            FaultKind::RequestChaos => (
                span(Duration::from_secs(1), Duration::from_secs(5)),
                (0.0..0.08f64, 0.0..0.08f64, 0.0..0.3f64, 0.0..0.3f64),
                (0.0..0.05f64, span(Duration::from_millis(100), Duration::from_secs(2))),
                (0.0..0.1f64, 0.0..0.02f64),
            )
                .prop_map(
                    |(
                        duration,
                        (drop_request, drop_response, delay_request, delay_response),
                        (hold_past_timeout, delay_max),
                        (retriable_error, fatal_error),
                    )| Fault::RequestChaos {
                        duration,
                        faults: RequestFaults {
                            drop_request,
                            drop_response,
                            delay_request,
                            delay_response,
                            hold_past_timeout,
                            delay_max,
                            retriable_error,
                            fatal_error,
                        },
                    },
                )
                .boxed(),
            FaultKind::FailTransactions => span(Duration::from_secs(1), Duration::from_secs(3))
                .prop_map(|duration| Fault::FailTransactions { duration })
                .boxed(),
            FaultKind::LateMarkers => (proptest::bool::weighted(0.5), proptest::bool::weighted(0.3))
                .prop_map(|(long, only_changelog)| Fault::LateMarkers {
                    duration: Duration::from_secs(5),
                    min: Duration::ZERO,
                    max: if long { Duration::from_secs(12) } else { Duration::from_secs(2) },
                    only_changelog,
                })
                .boxed(),
            FaultKind::MqttBrokerRestart => span(Duration::from_millis(50), Duration::from_secs(6))
                .prop_map(|down| Fault::MqttBrokerRestart { down })
                .boxed(),
            FaultKind::MqttDisconnect => slot().prop_map(|replica| Fault::MqttDisconnect { replica }).boxed(),
            FaultKind::BrokerDown => span(Duration::from_millis(500), Duration::from_secs(4))
                .prop_map(|down| Fault::BrokerDown { down })
                .boxed(),
            FaultKind::StopRestart => slot().prop_map(|replica| Fault::StopRestart { replica }).boxed(),
            FaultKind::BrokerCrash => (slot(), span(Duration::from_millis(200), Duration::from_secs(25)))
                .prop_map(|(broker, down)| Fault::BrokerCrash { broker, down })
                .boxed(),
            FaultKind::BrokerPause => (slot(), span(Duration::from_millis(500), Duration::from_secs(40)))
                .prop_map(|(broker, duration)| Fault::BrokerPause { broker, duration })
                .boxed(),
            FaultKind::BrokerIsolate => (slot(), span(Duration::from_secs(1), Duration::from_secs(15)))
                .prop_map(|(broker, duration)| Fault::BrokerIsolate { broker, duration })
                .boxed(),
            FaultKind::LeaderMove => {
                (0..1_000usize, slot()).prop_map(|(partition, to)| Fault::LeaderMove { partition, to }).boxed()
            }
            FaultKind::LaggingFailover => (
                0..1_000usize,
                span(Duration::from_secs(2), Duration::from_secs(8)),
                span(Duration::from_millis(300), Duration::from_millis(1_500)),
                span(Duration::from_secs(2), Duration::from_secs(15)),
                proptest::bool::ANY,
            )
                .prop_map(|(partition, lag, lead, down, crash)| Fault::LaggingFailover {
                    partition,
                    lag,
                    lead,
                    down,
                    crash,
                })
                .boxed(),
            FaultKind::AbortableCommits => (span(Duration::from_secs(1), Duration::from_secs(4)), 0.1..0.35f64)
                .prop_map(|(duration, share)| Fault::AbortableCommits { duration, share })
                .boxed(),
        }
    }
}

/// A replica slot, as [`FaultProfile::generate`] draws it.
fn slot() -> impl Strategy<Value = usize> + Clone {
    0..16usize
}

/// A duration in `low..high` (microseconds), shrinking towards `low`.
fn span(low: Duration, high: Duration) -> BoxedStrategy<Duration> {
    if high <= low {
        return Just(low).boxed();
    }
    (low.as_micros() as u64..high.as_micros() as u64).prop_map(Duration::from_micros).boxed()
}

fn uniform(rng: &mut impl Rng, low: Duration, high: Duration) -> Duration {
    if high <= low {
        return low;
    }
    Duration::from_micros(rng.gen_range(low.as_micros() as u64..high.as_micros() as u64))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    use super::*;

    /// Whether `profile` can draw `fault`: its kind has weight, or a late-changelog handover makes it.
    fn allowed(profile: &FaultProfile, fault: &Fault) -> bool {
        let handover = profile.late_changelog_handover > 0;
        match fault {
            Fault::CrashRestart { .. } => profile.crash_restart > 0 || handover,
            Fault::AddReplica => profile.add_replica > 0 || handover,
            Fault::RemoveReplica { .. } => profile.remove_replica > 0 || handover,
            Fault::Pause { .. } => profile.pause > 0 || handover,
            Fault::Isolate { .. } => profile.isolate > 0,
            Fault::BrokerRestart => profile.broker_restart > 0,
            Fault::BrokerDown { .. } => profile.broker_down > 0,
            Fault::StopRestart { .. } => profile.stop_restart > 0,
            Fault::RequestChaos { .. } => profile.request_chaos > 0,
            Fault::FailTransactions { .. } => profile.fail_transactions > 0,
            Fault::LateMarkers { only_changelog, .. } => profile.late_markers > 0 || (handover && *only_changelog),
            Fault::MqttBrokerRestart { .. } => profile.mqtt_broker_restart > 0,
            Fault::MqttDisconnect { .. } => profile.mqtt_disconnect > 0,
            Fault::BrokerCrash { .. } => profile.broker_crash > 0,
            Fault::BrokerPause { .. } => profile.broker_pause > 0,
            Fault::BrokerIsolate { .. } => profile.broker_isolate > 0,
            Fault::LeaderMove { .. } => profile.leader_move > 0,
            Fault::LaggingFailover { .. } => profile.lagging_failover > 0,
            Fault::AbortableCommits { .. } => profile.abortable_commits > 0,
            Fault::ZombieWake { .. } => profile.zombie_wakes > 0,
            Fault::FailingPageCommits { .. } => profile.failing_page_commits > 0,
        }
    }

    #[test]
    fn abortable_commit_windows_join_a_schedule_without_moving_its_faults() {
        let period = Duration::from_secs(30);
        let drawn = FaultProfile::everything().generate(&mut crate::chaos::Gen::new(3, 0), period);
        let windows = FaultProfile::abortable_commit_windows(&mut crate::chaos::Gen::new(4, 0), period, 3);
        assert_eq!(windows.len(), 3);
        for window in &windows {
            let Fault::AbortableCommits { duration, share } = window.fault else { panic!("{}", window.fault) };
            assert!(window.at < period && duration >= Duration::from_secs(1) && duration < Duration::from_secs(4));
            assert!((0.1..0.35).contains(&share), "{share}");
        }
        let merged = drawn.clone().merged(windows.clone());
        assert_eq!(merged.len(), drawn.len() + 3);
        assert!(merged.faults.windows(2).all(|w| w[0].at <= w[1].at), "{merged}");
        let kept: Vec<&TimedFault> =
            merged.faults.iter().filter(|t| !matches!(t.fault, Fault::AbortableCommits { .. })).collect();
        assert_eq!(kept, drawn.faults.iter().collect::<Vec<_>>());
        for name in FaultProfile::PRESETS {
            assert_eq!(FaultProfile::named(name).expect("a preset").abortable_commits, 0, "{name}");
        }
    }

    #[test]
    fn strategies_draw_sorted_schedules_of_the_profiles_kinds_within_the_period() {
        let period = Duration::from_secs(12);
        let presets = FaultProfile::PRESETS.map(|name| (name, FaultProfile::named(name).expect("a preset")));
        let bridges = presets.clone().map(|(name, profile)| (name, profile.for_mqtt()));
        for (name, profile) in presets.into_iter().chain(bridges) {
            let mut runner = TestRunner::new(Config { cases: 64, failure_persistence: None, ..Config::default() });
            runner
                .run(&profile.strategy(period), |schedule| {
                    prop_assert!(schedule.faults.windows(2).all(|w| w[0].at <= w[1].at), "unsorted:\n{schedule}");
                    // An episode starts within the period; a handover's fault comes ≤ 3 s later.
                    prop_assert!(schedule.faults.iter().all(|t| t.at < period + Duration::from_secs(3)));
                    prop_assert!(schedule.faults.iter().all(|t| allowed(&profile, &t.fault)), "{name}:\n{schedule}");
                    if name == "calm" {
                        prop_assert!(schedule.is_empty());
                    }
                    Ok(())
                })
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn broker_outages_are_drawn_only_with_weight_and_last_half_a_second_to_four() {
        let period = Duration::from_secs(600);
        for name in FaultProfile::PRESETS {
            let profile = FaultProfile::named(name).expect("a preset");
            assert_eq!(profile.broker_down, 0, "{name}");
            let schedule = profile.generate(&mut crate::chaos::Gen::new(7, 0), period);
            assert!(!schedule.faults.iter().any(|t| matches!(t.fault, Fault::BrokerDown { .. })), "{name}");
        }
        let outages = FaultProfile { broker_down: 1, broker_restart: 1, ..FaultProfile::calm() };
        let schedule = outages.generate(&mut crate::chaos::Gen::new(7, 0), period);
        let downs: Vec<Duration> = schedule
            .faults
            .iter()
            .filter_map(|t| match t.fault {
                Fault::BrokerDown { down } => Some(down),
                _ => None,
            })
            .collect();
        assert!(downs.len() > 50 && downs.len() < schedule.len(), "{schedule}");
        assert!(downs.iter().all(|d| *d >= Duration::from_millis(500) && *d < Duration::from_secs(4)), "{downs:?}");
        assert!(schedule.end() >= schedule.faults.last().expect("faults").at);
    }

    #[test]
    fn pauses_come_from_the_profiles_timeouts() {
        let profile = FaultProfile { pause_past_transaction_timeout: 0.5, ..FaultProfile::zombies() };
        let mut runner = TestRunner::new(Config { cases: 256, failure_persistence: None, ..Config::default() });
        runner
            .run(&Fault::strategy_for(FaultKind::Pause, &profile), |fault| {
                let Fault::Pause { duration, .. } = fault else { panic!("a pause: {fault}") };
                let past_session =
                    duration > profile.session_timeout && duration <= profile.session_timeout + Duration::from_secs(6);
                let past_transaction = duration > profile.transaction_timeout
                    && duration <= profile.transaction_timeout + Duration::from_secs(15);
                prop_assert!(past_session || past_transaction, "{duration:?}");
                Ok(())
            })
            .unwrap();
    }
}
