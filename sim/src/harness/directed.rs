//! Directed fault episodes: faults aimed at a moment of the engine's handovers, found by watching
//! the requests the broker receives, instead of left to chance.
//!
//! A random pause ends at a random moment, so a zombie that wakes inside the next owner's window
//! — after the group gave its tasks or tokens away, before the new owner fenced, restored or
//! committed — is rare. A [`Fault::ZombieWake`](super::faults::Fault::ZombieWake) episode makes
//! it the rule: the owner is frozen in the middle of a transaction (at its `TxnOffsetCommit`
//! when it runs tasks, at a page's changelog record when it holds extractor tokens — or, with
//! [`Aims::token_zombies`], at the page's first output write, so that its changelog record and
//! commit come after the wake; with [`Aims::held_write`] too, at the changelog record again,
//! that request held in the network until the wake), and woken
//! the moment another replica reaches the chosen step of taking over what it held — its fence
//! (`InitProducerId` of a transactional id the zombie held, or in the per-instance shape the
//! `OffsetFetch` of partitions the zombie committed), its restore (`ListOffsets` or `Fetch` of a
//! changelog partition the zombie wrote), its first commit (`EndTxn` of a transactional id taken
//! from the zombie, or `TxnOffsetCommit` of partitions it committed) —, while that request is
//! held for a moment, so the zombie acts inside the step.
//!
//! A [`Fault::FailingPageCommits`](super::faults::Fault::FailingPageCommits) window fails pages
//! at their commit, after their messages were sent: the second of a transaction's output and
//! changelog `Produce` requests is refused (an abortable error, as a refused batch is), so the
//! page aborts while the cycle polls the token's next configs — in shared-state seeds, feeds of
//! the same state key (blind to a state kept from the failed page). A window stays open until it
//! failed a page (the scenario may aim it, [`Aims::page_aim`]); a producer session has one page
//! failed at most, so those next pages commit.
//!
//! The watch sees requests only (the broker's view); it never draws randomness outside a
//! failing-commit window, so a run without directed episodes replays as before.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flechtwerk::kafka::TopicPartition;
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;
use madsim::task::NodeId;

use super::replicas::ReplicaView;
use crate::cluster::faults::{Directed, Director, Gate, GateOpener};
use crate::cluster::protocol::{ErrorCode, Request};
use crate::runner::Ctx;

/// The step of the next owner's takeover at which a [`Fault::ZombieWake`](super::faults::Fault::ZombieWake)
/// wakes the zombie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandoverStep {
    /// The next owner fences the zombie's transactional id (or, with one producer per instance,
    /// reads the offsets the zombie committed).
    Fence,
    /// The next owner reads a changelog partition the zombie wrote.
    Restore,
    /// The next owner commits its first transaction on what it took from the zombie.
    FirstCommit,
}

impl HandoverStep {
    /// The three steps, in takeover order.
    pub const ALL: [HandoverStep; 3] = [HandoverStep::Fence, HandoverStep::Restore, HandoverStep::FirstCommit];
}

impl fmt::Display for HandoverStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HandoverStep::Fence => "fence",
            HandoverStep::Restore => "restore",
            HandoverStep::FirstCommit => "first commit",
        })
    }
}

/// How long a zombie waits at most to be frozen mid-transaction (then it is frozen anyway).
const ARMED_MAX: Duration = Duration::from_secs(4);
/// How long a zombie stays frozen at most when no takeover step comes.
const FROZEN_MAX: Duration = Duration::from_secs(40);

/// The replica a client id belongs to (`replica-3` for `replica-3`, `replica-3-1`, …).
fn replica_of(client: &str) -> Option<&str> {
    let rest = client.strip_prefix("replica-")?;
    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    (digits > 0).then(|| &client[..8 + digits])
}

fn is_changelog(partition: &TopicPartition) -> bool {
    partition.topic.ends_with("-changelog")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the zombie's transactional write to freeze it there.
    Armed,
    /// Frozen, waiting for the next owner's step.
    Frozen,
}

struct Zombie {
    name: String,
    node: NodeId,
    /// Freeze at its `TxnOffsetCommit` (tasks), else at a changelog `Produce` (tokens).
    at_offsets: bool,
    step: HandoverStep,
    hold: Duration,
    phase: Phase,
    /// Which episode (to tell a fallback timer's own episode from a later one).
    episode: u64,
    /// The transactional id of the write it froze at: with [`Aims::token_zombies`], its fence
    /// and first commit are the steps that wake it (a holder of several tokens is frozen in one
    /// token's page; the fence of another would wake it while this one's fence goes through).
    frozen_id: Option<String>,
    /// With [`Aims::held_write`]: opens the gate its frozen changelog write waits at.
    held: Option<GateOpener>,
}

impl Zombie {
    /// Wakes it: its held write (if any) goes on first, then the node runs again.
    fn wake(&mut self) {
        if let Some(held) = self.held.take() {
            held.open();
        }
        if self.phase == Phase::Frozen {
            Handle::current().resume(self.node);
        }
    }
}

/// What a transactional producer's open transaction has sent so far (failing-commit windows):
/// the key of its first output record and of its changelog record (the page's config key and
/// state key).
#[derive(Default)]
struct Open {
    output: Option<String>,
    changelog: Option<String>,
}

/// Whether a page of config `key` (its first output record's key) under state key `state_key`
/// (its changelog record's key) is worth failing at its commit.
pub type PageAim = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;
/// Told of each page failed at its commit: its config key and state key.
pub type PageFailed = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// How a scenario aims its directed episodes (the default: as `counter` has them).
#[derive(Clone, Default)]
pub struct Aims {
    /// Zombies holding extractor tokens are frozen at a page's first output write (before its
    /// changelog record, so the page's state lands after the wake), woken at the fence or first
    /// commit of the transactional id they froze on, spared by the other faults while frozen
    /// (a crash, removal or pause of theirs is skipped), and outlast the fault period: a frozen
    /// one still waits for its step (or at most 40 s, `FROZEN_MAX`) once the faults stop.
    pub token_zombies: bool,
    /// With `token_zombies`: a zombie is frozen at its page's changelog record instead, and that
    /// write stays in the network until the wake (the TCP stream of a process frozen right after
    /// it wrote the request, stalled), so it reaches the broker after the next holder's grant —
    /// and the zombie, whose client has not given the request up (a request timeout longer than
    /// the freeze, as Kafka's 30 s is), commits the page right after. What a restore must read
    /// (EXT-37: everything committed before the fence) then includes a record appended after
    /// the grant.
    pub held_write: bool,
    /// Failing-commit windows fail only the pages this accepts.
    pub page_aim: Option<PageAim>,
    /// Told of every page failed at its commit.
    pub page_failed: Option<PageFailed>,
}

fn record_key(produce: &crate::cluster::protocol::ProduceRequest) -> String {
    produce
        .records
        .first()
        .and_then(|r| r.key.as_deref())
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .unwrap_or_default()
}

#[derive(Default)]
struct Watch {
    /// Per transactional id, the replica that started its current producer session.
    owners: BTreeMap<String, String>,
    /// Per transactional id, the replica its current session took it from.
    taken_from: BTreeMap<String, String>,
    /// Per changelog partition, the replica that wrote it last.
    writers: BTreeMap<TopicPartition, String>,
    /// Per (group, partition), the replica that sent its offsets last.
    committers: BTreeMap<(String, TopicPartition), String>,
    zombie: Option<Zombie>,
    episodes: u64,
    /// The faults stopped: no episode starts any more.
    calm: bool,
    /// The failing-commit windows open, in opening order: each one's probability per page.
    failing: Vec<f64>,
    /// Per producer client, what its open transaction sent.
    open: BTreeMap<String, Open>,
    /// Producer clients whose current session had a page failed: their later pages go through,
    /// so the cycle's next configs commit (a producer session fails once).
    failed: BTreeSet<String>,
    aims: Aims,
}

impl Watch {
    /// What `request` from `replica` is of the frozen zombie's takeover at `step`, if anything.
    fn step_reached(&self, zombie: &Zombie, request: &Request) -> Option<String> {
        let (step, frozen_id, at_offsets) = (zombie.step, zombie.frozen_id.as_deref(), zombie.at_offsets);
        let zombie = zombie.name.as_str();
        // A token zombie wakes at the fence or first commit of the id it froze on.
        let its_id = |id: &str| frozen_id.is_none_or(|f| f == id);
        let committed_by_zombie = |group: &str, partitions: Vec<&TopicPartition>| -> Option<String> {
            partitions
                .into_iter()
                .find(|p| self.committers.get(&(group.to_owned(), (*p).clone())).is_some_and(|z| z == zombie))
                .map(ToString::to_string)
        };
        // A token zombie frozen before its page's changelog record may have written none yet:
        // any changelog read of another replica is a restore (a grant's).
        let token_zombie = self.aims.token_zombies && !at_offsets;
        let wrote =
            |p: &TopicPartition| is_changelog(p) && (token_zombie || self.writers.get(p).is_some_and(|z| z == zombie));
        match (step, request) {
            (HandoverStep::Fence, Request::InitProducerId { transactional_id: Some(id), expected: None, .. })
                if self.owners.get(id).is_some_and(|z| z == zombie) && its_id(id) =>
            {
                Some(format!("fence of {id}"))
            }
            (HandoverStep::Fence, Request::OffsetFetch { group, partitions }) => {
                committed_by_zombie(group, partitions.iter().collect()).map(|p| format!("offset fetch of {p}"))
            }
            (HandoverStep::Restore, Request::ListOffsets { partition, .. }) if wrote(partition) => {
                Some(format!("restore of {partition}"))
            }
            (HandoverStep::Restore, Request::Fetch { partitions, .. }) => {
                partitions.iter().map(|(p, _)| p).find(|p| wrote(p)).map(|p| format!("restore of {p}"))
            }
            (HandoverStep::FirstCommit, Request::EndTxn { transactional_id, commit: true, .. })
                if self.taken_from.get(transactional_id).is_some_and(|z| z == zombie) && its_id(transactional_id) =>
            {
                Some(format!("first commit of {transactional_id}"))
            }
            (HandoverStep::FirstCommit, Request::TxnOffsetCommit(offsets)) => {
                committed_by_zombie(&offsets.group, offsets.offsets.iter().map(|(p, _)| p).collect())
                    .map(|p| format!("first offsets of {p}"))
            }
            _ => None,
        }
    }

    /// Notes what `request` from `client` (of `replica`) tells about owners and open pages.
    fn note(&mut self, request: &Request, client: &str, replica: &str) {
        match request {
            Request::InitProducerId { transactional_id: Some(id), expected, .. } => {
                self.open.remove(client);
                if expected.is_none() {
                    self.failed.remove(client);
                    if let Some(previous) = self.owners.insert(id.clone(), replica.to_owned()) {
                        if previous != replica {
                            self.taken_from.insert(id.clone(), previous);
                        }
                    }
                }
            }
            Request::Produce(produce) if is_changelog(&produce.partition) => {
                self.writers.insert(produce.partition.clone(), replica.to_owned());
            }
            Request::TxnOffsetCommit(offsets) => {
                for (partition, _) in &offsets.offsets {
                    self.committers.insert((offsets.group.clone(), partition.clone()), replica.to_owned());
                }
            }
            Request::EndTxn { .. } => {
                self.open.remove(client);
            }
            _ => {}
        }
    }

    /// In a failing-commit window: whether this transactional `Produce` is the second of its
    /// transaction's output and changelog writes (noted either way).
    fn fails_page(&mut self, request: &Request, client: &str) -> Option<(String, String)> {
        let Request::Produce(produce) = request else { return None };
        produce.transactional_id.as_ref()?;
        let open = self.open.entry(client.to_owned()).or_default();
        let changelog = is_changelog(&produce.partition);
        let completes = if changelog {
            open.output.is_some() && open.changelog.is_none()
        } else {
            open.changelog.is_some() && open.output.is_none()
        };
        if changelog {
            open.changelog.get_or_insert_with(|| record_key(produce));
        } else {
            open.output.get_or_insert_with(|| record_key(produce));
        }
        let keys = (open.output.clone().unwrap_or_default(), open.changelog.clone().unwrap_or_default());
        match self.failing.first().copied() {
            Some(probability) if completes && !self.failed.contains(client) => {
                if self.aims.page_aim.as_ref().is_some_and(|aim| !aim(&keys.0, &keys.1)) {
                    return None;
                }
                let fails = thread_rng().gen_bool(probability);
                if fails {
                    // The window has failed its page: it closes.
                    self.failing.remove(0);
                    self.failed.insert(client.to_owned());
                    if let Some(failed) = &self.aims.page_failed {
                        failed(&keys.0, &keys.1);
                    }
                }
                fails.then_some(keys)
            }
            _ => None,
        }
    }
}

/// The directed episodes of one run: the watch over the broker's requests, installed as the
/// cluster's [`Director`].
#[derive(Clone)]
pub struct Directions {
    watch: Arc<Mutex<Watch>>,
    ctx: Ctx,
}

impl Directions {
    /// A watch that directs nothing until an episode starts.
    pub fn new(ctx: &Ctx) -> Self {
        Directions { watch: Arc::default(), ctx: ctx.clone() }
    }

    /// The cluster's director: every request passes here first.
    pub fn director(&self) -> Director {
        let this = self.clone();
        Arc::new(move |request: &Request, client: &str| this.direct(request, client))
    }

    fn direct(&self, request: &Request, client: &str) -> Directed {
        let Some(replica) = replica_of(client) else { return Directed::default() };
        let mut directed = Directed::default();
        let mut watch = self.watch.lock().expect("watch lock");
        if let Some(zombie) = &watch.zombie {
            if zombie.phase == Phase::Armed && zombie.name == replica {
                let token_zombies = watch.aims.token_zombies;
                let held_write = token_zombies && watch.aims.held_write;
                let at = match request {
                    Request::TxnOffsetCommit(_) => zombie.at_offsets,
                    // A page's changelog record (its commit next), or with token zombies aimed,
                    // its first output write (its changelog record and commit after the wake),
                    // or with held writes its changelog record again (held until the wake).
                    Request::Produce(produce) if !zombie.at_offsets && produce.transactional_id.is_some() => {
                        is_changelog(&produce.partition) != (token_zombies && !held_write)
                    }
                    _ => false,
                };
                if at {
                    let what = format!(
                        "{} frozen at its {} ({client}){}",
                        zombie.name,
                        request.kind(),
                        if held_write { ", the write held in the network until the wake" } else { "" }
                    );
                    Handle::current().pause(zombie.node);
                    let frozen_id = match request {
                        Request::Produce(produce) if token_zombies => produce.transactional_id.clone(),
                        _ => None,
                    };
                    let zombie = watch.zombie.as_mut().expect("a zombie");
                    zombie.phase = Phase::Frozen;
                    zombie.frozen_id = frozen_id;
                    if held_write {
                        let (gate, opener) = Gate::closed();
                        directed.until = Some(gate);
                        zombie.held = Some(opener);
                    }
                    self.ctx.event(format!("zombie-wake: {what}"));
                }
            } else if zombie.phase == Phase::Frozen && zombie.name != replica {
                if let Some(what) = watch.step_reached(zombie, request) {
                    let mut zombie = watch.zombie.take().expect("a zombie");
                    zombie.wake();
                    directed.hold = zombie.hold;
                    self.ctx.fault(
                        "zombie-wake",
                        format!("{} woken at {replica}'s {what}, held {:?}", zombie.name, zombie.hold),
                    );
                }
            }
        }
        watch.note(request, client, replica);
        if let Some((key, state_key)) = watch.fails_page(request, client) {
            directed.fail = Some(ErrorCode::MessageTooLarge);
            self.ctx.fault(
                "failing-page-commit",
                format!(
                    "{} from {client} (page of {key}, state key {state_key}), after the page's other writes",
                    request.kind()
                ),
            );
        }
        directed
    }

    /// Starts a zombie-wake episode on the first of `candidates` (name, node, view) that runs
    /// tasks or holds tokens, waiting for one and for the episode before to end (until the faults
    /// stop): frozen at its next
    /// transactional write (or within `ARMED_MAX` anyway), woken at the next owner's `step`
    /// with that step's request held for `hold` (or after `FROZEN_MAX`).
    pub fn zombie(&self, candidates: Vec<(String, NodeId, Arc<ReplicaView>)>, step: HandoverStep, hold: Duration) {
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                let (calm, busy) = {
                    let watch = this.watch.lock().expect("watch lock");
                    (watch.calm, watch.zombie.is_some())
                };
                if calm {
                    return;
                }
                // One zombie at a time: a later episode waits for the earlier one to end.
                let holder = if busy {
                    None
                } else {
                    candidates.iter().find(|(_, _, view)| {
                        view.tasks.load(Ordering::SeqCst) > 0 || view.tokens.load(Ordering::SeqCst) > 0
                    })
                };
                if let Some((name, node, view)) = holder {
                    let at_offsets = view.tasks.load(Ordering::SeqCst) > 0;
                    this.arm(name, *node, at_offsets, step, hold);
                    return;
                }
                madsim::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }

    fn arm(&self, name: &str, node: NodeId, at_offsets: bool, step: HandoverStep, hold: Duration) {
        let episode = {
            let mut watch = self.watch.lock().expect("watch lock");
            if watch.calm {
                return;
            }
            if let Some(busy) = &watch.zombie {
                self.ctx.event(format!("skipped zombie-wake of {name}: {} is in one", busy.name));
                return;
            }
            watch.episodes += 1;
            let episode = watch.episodes;
            watch.zombie = Some(Zombie {
                name: name.to_owned(),
                node,
                at_offsets,
                step,
                hold,
                phase: Phase::Armed,
                episode,
                frozen_id: None,
                held: None,
            });
            episode
        };
        self.ctx.event(format!("zombie-wake: {name} armed, to wake at the next owner's {step}"));
        let this = self.clone();
        tokio::spawn(async move {
            madsim::time::sleep(ARMED_MAX).await;
            {
                let mut watch = this.watch.lock().expect("watch lock");
                match watch.zombie.as_mut() {
                    Some(zombie) if zombie.episode == episode && zombie.phase == Phase::Armed => {
                        Handle::current().pause(zombie.node);
                        zombie.phase = Phase::Frozen;
                        this.ctx.event(format!("zombie-wake: {} frozen (no transactional write)", zombie.name));
                    }
                    _ => {}
                }
            }
            madsim::time::sleep(FROZEN_MAX).await;
            this.end_zombie(Some(episode), "no takeover step came");
        });
    }

    /// Wakes the zombie of `episode` (any, with `None`) if it is still frozen, and ends the
    /// episode.
    fn end_zombie(&self, episode: Option<u64>, why: &str) {
        let mut watch = self.watch.lock().expect("watch lock");
        let ours = watch.zombie.as_ref().is_some_and(|z| episode.is_none_or(|e| z.episode == e));
        if ours {
            let mut zombie = watch.zombie.take().expect("a zombie");
            zombie.wake();
            self.ctx.event(format!("zombie-wake: {} released ({why})", zombie.name));
        }
    }

    /// Opens a failing-commit window: the next page whose output and changelog writes both
    /// reach the broker (and that the scenario's [`Aims::page_aim`] accepts) has the second
    /// refused with `probability`, and the window stays open until it failed one (also past the
    /// end of the faults).
    pub fn fail_pages(&self, probability: f64) {
        self.watch.lock().expect("watch lock").failing.push(probability);
    }

    /// Ends the episodes (quiescence): a frozen zombie wakes (with [`Aims::token_zombies`], once
    /// its step comes or 40 s, `FROZEN_MAX`, passed), no episode starts; a failing-commit window
    /// still open stays open until it failed a page.
    pub fn calm_down(&self) {
        let outlasts = {
            let watch = self.watch.lock().expect("watch lock");
            watch.aims.token_zombies && watch.zombie.as_ref().is_some_and(|z| z.phase == Phase::Frozen)
        };
        if !outlasts {
            self.end_zombie(None, "the faults stopped");
        }
        // Failing-commit windows still open stay open until they failed a page: under heavy
        // faults the pages often go through only once the faults stopped.
        self.watch.lock().expect("watch lock").calm = true;
    }

    /// Sets how the episodes are aimed (before the faults start).
    pub fn set_aims(&self, aims: Aims) {
        self.watch.lock().expect("watch lock").aims = aims;
    }

    /// Whether a fault that would crash, remove or pause `name` spares it: it is a frozen token
    /// zombie (with [`Aims::token_zombies`]).
    pub fn spares(&self, name: &str) -> bool {
        let watch = self.watch.lock().expect("watch lock");
        watch.aims.token_zombies && watch.zombie.as_ref().is_some_and(|z| z.name == name && z.phase == Phase::Frozen)
    }

    /// Ends the episode of `name` (woken if frozen): another fault crashed, removed or paused
    /// its node.
    pub fn release(&self, name: &str, why: &str) {
        let episode = {
            let watch = self.watch.lock().expect("watch lock");
            watch.zombie.as_ref().filter(|z| z.name == name).map(|z| z.episode)
        };
        if episode.is_some() {
            self.end_zombie(episode, why);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ids_name_their_replica() {
        assert_eq!(replica_of("replica-3"), Some("replica-3"));
        assert_eq!(replica_of("replica-12-4"), Some("replica-12"));
        assert_eq!(replica_of("replica-1-config"), Some("replica-1"));
        assert_eq!(replica_of("feeder"), None);
        assert_eq!(replica_of("replica-"), None);
    }
}
