//! Replicas of one application, each a node of the simulation under a supervisor (a crashed
//! application starts again, like a restarted pod), and the executor of a [`FaultSchedule`].

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flechtwerk::observer::{ConfigView, Observer};
use flechtwerk::{Flechtwerk, FlechtwerkBuilder, IntoRunner};
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;
use madsim::task::{JoinHandle, NodeId};
use madsim::time::sleep;
use tokio::sync::watch;

use super::directed::{Aims, Directions};
use super::disk::{DiskStores, SimDisk};
use super::faults::{Fault, FaultSchedule};
use super::truth::ConfigCompaction;
use crate::cluster::net::broker_node_name;
use crate::cluster::protocol::{BrokerId, ErrorCode, RequestKind};
use crate::cluster::{Cluster, KafkaClient, MarkerFaults, RequestFaults};
use crate::mqtt::MqttBroker;
use crate::runner::Ctx;

/// What every replica's name (its client id) starts with: `replica-0`, `replica-1`, …
const REPLICA_PREFIX: &str = "replica-";

/// How long a crashed application waits before its supervisor starts it again.
const RESTART_DELAY_MAX_MS: u64 = 1_000;

/// What a replica's application is given.
#[derive(Clone)]
pub struct ReplicaEnv {
    /// The replica's name (`replica-0`, ...): its client id.
    pub name: String,
    /// The simulated cluster's client factory.
    pub kafka: KafkaClient,
    /// The replica's task state, on its node's (simulated) disk.
    pub stores: DiskStores,
    /// The run's context (trace, faults, violations).
    pub ctx: Ctx,
    /// What the replica reports for the checks.
    pub view: Arc<ReplicaView>,
    /// Which start of the application this is (1, 2, … after crashes).
    pub incarnation: u32,
    /// Counts the clean stops asked of the replica ([`Fault::StopRestart`]); this incarnation
    /// has seen those asked before it started.
    stop: watch::Receiver<u64>,
}

impl ReplicaEnv {
    /// Resolves once a clean stop of this incarnation is asked for ([`Fault::StopRestart`]):
    /// the shutdown to hand to `run_until`, as a pod hands it SIGTERM. Pending for good if the
    /// run never asks.
    pub fn stop_requested(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut stop = self.stop.clone();
        async move {
            if stop.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// An observer that keeps `view` current and writes task counts to the trace.
    pub fn observer(&self) -> ReplicaObserver {
        ReplicaObserver { name: self.name.clone(), ctx: self.ctx.clone(), view: self.view.clone() }
    }
}

/// What a replica's application reports while it runs.
#[derive(Default)]
pub struct ReplicaView {
    /// The config store, as of its last bootstrap or drain (`None` before the first one).
    pub configs: Mutex<Option<BTreeMap<String, Vec<u8>>>>,
    /// Live tasks.
    pub tasks: AtomicUsize,
    /// Held extractor tokens.
    pub tokens: AtomicUsize,
    /// Token grants so far (assignments with at least one token), over every incarnation.
    pub grants: std::sync::atomic::AtomicU64,
}

impl ReplicaView {
    /// Whether the config store is one `want` accepts.
    pub fn configs_match(&self, want: &ConfigCompaction) -> bool {
        self.configs.lock().expect("view lock").as_ref().is_some_and(|store| want.accepts(store))
    }
}

/// The views of the replicas still part of a run, shared with a task that waits on them while
/// the faults fire (the chaos harness's feeder at a config change): [`Replicas`] adds a replica's
/// view when it starts one and drops it when it removes one.
#[derive(Clone, Default)]
pub struct LiveViews(Arc<Mutex<Vec<NamedView>>>);

/// A replica's name and view.
type NamedView = (String, Arc<ReplicaView>);

impl LiveViews {
    /// The live replicas whose config store does not equal `want` (yet): those still booting
    /// one, or behind on its topics.
    pub fn configs_behind(&self, want: &ConfigCompaction) -> Vec<String> {
        let live = self.0.lock().expect("live views lock");
        live.iter().filter(|(_, view)| !view.configs_match(want)).map(|(name, _)| name.clone()).collect()
    }
}

/// The observer of a replica's application (see [`ReplicaEnv::observer`]).
pub struct ReplicaObserver {
    name: String,
    ctx: Ctx,
    view: Arc<ReplicaView>,
}

impl Observer for ReplicaObserver {
    fn tasks_assigned(&self, count: usize) {
        self.view.tasks.store(count, Ordering::SeqCst);
        self.ctx.event(format!("{}: {count} tasks", self.name));
    }

    fn tokens_assigned(&self, count: usize) {
        self.view.tokens.store(count, Ordering::SeqCst);
        if count > 0 {
            self.view.grants.fetch_add(1, Ordering::SeqCst);
        }
        self.ctx.event(format!("{}: {count} tokens", self.name));
    }

    fn config_store_updated(&self, store: &dyn ConfigView) {
        *self.view.configs.lock().expect("view lock") = Some(store.to_map());
    }
}

/// Runs one incarnation of a replica's application until it ends; `Err` is why it crashed.
pub type Launch = Arc<dyn Fn(ReplicaEnv) -> Pin<Box<dyn Future<Output = Result<(), String>>>> + Send + Sync>;

/// The launch of a transformer application as every simulation runs one: application id
/// `application_id`, the replica's name as client id, the simulated cluster, `max_poll_records`,
/// the harness's [`SESSION_TIMEOUT`](super::SESSION_TIMEOUT), replication factor 1, the
/// replica's observer and its disk's state stores; `stage()` builds the stage at each start.
pub fn transformer_launch<S, M>(
    application_id: impl Into<String>,
    max_poll_records: usize,
    stage: impl Fn() -> S + Send + Sync + 'static,
) -> Launch
where
    S: IntoRunner<M> + 'static,
    M: 'static,
{
    stage_launch(application_id, max_poll_records, None, stage)
}

/// [`transformer_launch`] for any stage: with `poll_interval` set (extractors require it;
/// transformers ignore it), or not.
pub fn stage_launch<S, M>(
    application_id: impl Into<String>,
    max_poll_records: usize,
    poll_interval: Option<Duration>,
    stage: impl Fn() -> S + Send + Sync + 'static,
) -> Launch
where
    S: IntoRunner<M> + 'static,
    M: 'static,
{
    let configure = move |builder: FlechtwerkBuilder| match poll_interval {
        Some(interval) => builder.poll_interval(interval),
        None => builder,
    };
    launch_with(application_id, max_poll_records, configure, stage)
}

/// [`transformer_launch`] with more settings: `configure` gets the builder with the harness's
/// settings and returns it with its own (e.g. `|b| b.producers(Producers::PerInstance)`).
pub fn launch_with<S, M>(
    application_id: impl Into<String>,
    max_poll_records: usize,
    configure: impl Fn(FlechtwerkBuilder) -> FlechtwerkBuilder + Send + Sync + 'static,
    stage: impl Fn() -> S + Send + Sync + 'static,
) -> Launch
where
    S: IntoRunner<M> + 'static,
    M: 'static,
{
    let application_id = application_id.into();
    let (stage, configure) = (Arc::new(stage), Arc::new(configure));
    Arc::new(move |env: ReplicaEnv| {
        let (stage, configure, application_id) = (stage.clone(), configure.clone(), application_id.clone());
        Box::pin(async move {
            let builder = Flechtwerk::builder()
                .application_id(&application_id)
                .client_id(&env.name)
                .kafka(Arc::new(env.kafka.clone()))
                .max_poll_records(max_poll_records)
                .session_timeout(super::SESSION_TIMEOUT)
                .replication_factor(env.kafka.replication_factor())
                .observer(Arc::new(env.observer()))
                .state_stores(Arc::new(env.stores.clone()))
                .local_state_max_age(super::disk::LOCAL_STATE_MAX_AGE);
            let app = configure(builder).build(stage()).map_err(|e| e.to_string())?;
            app.run_until(env.stop_requested()).await.map_err(|error| error_kind(&error))
        })
    })
}

/// A deterministic description of why an application stopped (for the trace: a Kafka error by
/// operation, kind and the broker's error code if it gave one — `kafka commit_transaction Fenced
/// (ProducerFenced 90)` —, no free text that could differ between runs of a seed).
pub fn error_kind(error: &flechtwerk::Error) -> String {
    match error {
        flechtwerk::Error::Kafka(e) => match e.code() {
            Some(code) => match ErrorCode::from_code(code) {
                Some(name) => format!("kafka {} {:?} ({name:?} {code})", e.operation(), e.kind()),
                None => format!("kafka {} {:?} (code {code})", e.operation(), e.kind()),
            },
            None => format!("kafka {} {:?}", e.operation(), e.kind()),
        },
        other => other.to_string(),
    }
}

/// One replica.
pub struct Replica {
    /// Its name.
    pub name: String,
    /// Its node.
    pub node: NodeId,
    /// What it reports.
    pub view: Arc<ReplicaView>,
    /// Whether it is still part of the run (not removed).
    pub alive: bool,
    /// Asks its application for a clean stop (see [`ReplicaEnv::stop_requested`]).
    stop: watch::Sender<u64>,
}

/// The replicas of a run.
pub struct Replicas {
    cluster: Cluster,
    ctx: Ctx,
    disk: SimDisk,
    launch: Launch,
    max: usize,
    list: Vec<Replica>,
    /// Markers always land with a little jitter; a late-marker window returns to this.
    baseline_markers: MarkerFaults,
    /// Request faults outside request-chaos windows (none unless set).
    baseline_requests: RequestFaults,
    /// When the broker comes back from a [`Fault::BrokerDown`] outage (`None`: it is up).
    /// Outages that overlap merge into one; a restart during one is skipped.
    broker_back_at: Arc<Mutex<Option<madsim::time::Instant>>>,
    /// The MQTT broker of a bridge run, which MQTT faults hit.
    mqtt: Option<MqttBroker>,
    /// What each fault [`run_schedule`](Self::run_schedule) applied hit, in schedule order (not
    /// traced: reports only).
    hits: Vec<Option<String>>,
    /// The views of the replicas alive, shared ([`Replicas::live_views`]).
    live: LiveViews,
    /// The directed episodes' watch over the broker's requests (the cluster's director).
    directions: Directions,
}

impl Replicas {
    /// Starts `count` replicas of `launch` (at most `max` alive at once, later).
    pub fn start(cluster: &Cluster, ctx: &Ctx, disk: &SimDisk, launch: Launch, count: usize, max: usize) -> Self {
        let baseline_markers =
            MarkerFaults { delay: 0.3, delay_max: Duration::from_millis(300), ..MarkerFaults::default() };
        cluster.faults().update(|f| f.markers = baseline_markers.clone());
        let directions = Directions::new(ctx);
        cluster.faults().set_director(Some(directions.director()));
        let mut replicas = Replicas {
            cluster: cluster.clone(),
            ctx: ctx.clone(),
            disk: disk.clone(),
            launch,
            max,
            list: Vec::new(),
            baseline_markers,
            baseline_requests: RequestFaults::default(),
            broker_back_at: Arc::default(),
            mqtt: None,
            hits: Vec::new(),
            live: LiveViews::default(),
            directions,
        };
        for _ in 0..count {
            replicas.add();
        }
        replicas
    }

    /// Sets how the directed episodes are aimed (`harness::directed`; before the faults start).
    pub fn aim_directions(&self, aims: Aims) {
        self.directions.set_aims(aims);
    }

    /// Makes `markers` the marker faults outside late-marker windows (instead of the jitter).
    pub fn set_baseline_markers(&mut self, markers: MarkerFaults) {
        self.cluster.faults().update(|f| f.markers = markers.clone());
        self.baseline_markers = markers;
    }

    /// Makes `requests` the request faults of every kind outside request-chaos windows (instead
    /// of none), from now until [`calm_down`](Self::calm_down): a cluster whose network is never
    /// quite clean during the fault period.
    pub fn set_baseline_requests(&mut self, requests: RequestFaults) {
        self.cluster.faults().update(|f| f.requests = requests.clone());
        self.baseline_requests = requests;
    }

    /// The simulated MQTT broker that [`Fault::MqttBrokerRestart`] and [`Fault::MqttDisconnect`]
    /// hit (without one they are skipped), and that [`calm_down`](Self::calm_down) starts again.
    pub fn set_mqtt_broker(&mut self, broker: MqttBroker) {
        self.mqtt = Some(broker);
    }

    /// Every replica ever started, in start order.
    pub fn all(&self) -> &[Replica] {
        &self.list
    }

    /// The replicas still part of the run.
    pub fn alive(&self) -> impl Iterator<Item = &Replica> {
        self.list.iter().filter(|r| r.alive)
    }

    fn add(&mut self) {
        let name = format!("{REPLICA_PREFIX}{}", self.list.len());
        let view = Arc::new(ReplicaView::default());
        let (stop, stop_requests) = watch::channel(0);
        let env = ReplicaEnv {
            name: name.clone(),
            kafka: self.cluster.kafka(),
            stores: self.disk.stores(&name),
            ctx: self.ctx.clone(),
            view: view.clone(),
            incarnation: 0,
            stop: stop_requests,
        };
        let launch = self.launch.clone();
        let node = Handle::current()
            .create_node()
            .name(&name)
            .ip(self.cluster.client_ip())
            .init(move || supervise(env.clone(), launch.clone()))
            .build();
        self.ctx.event(format!("{name}: started"));
        self.live.0.lock().expect("live views lock").push((name.clone(), view.clone()));
        self.list.push(Replica { name, node: node.id(), view, alive: true, stop });
    }

    /// The views of the replicas alive now and later (a shared handle, kept current as replicas
    /// are added and removed).
    pub fn live_views(&self) -> LiveViews {
        self.live.clone()
    }

    /// The replica a fault aimed at `slot` hits: the `slot mod n`-th alive one.
    fn target(&self, slot: usize) -> usize {
        let alive: Vec<usize> = (0..self.list.len()).filter(|&i| self.list[i].alive).collect();
        alive[slot % alive.len()]
    }

    /// Runs `schedule` (times relative to now); returns once the last fault has fired (faults
    /// with a duration end in the background).
    pub async fn run_schedule(&mut self, schedule: &FaultSchedule) {
        let start = madsim::time::Instant::now();
        for timed in &schedule.faults {
            let due = start + timed.at;
            let now = madsim::time::Instant::now();
            if due > now {
                sleep(due - now).await;
            }
            let hit = self.hit(&timed.fault);
            self.hits.push(hit);
            self.apply(&timed.fault);
        }
    }

    /// What each fault of the schedules run so far hit, in order: the replica a slot resolved to
    /// (`replica#7` is the `7 mod n`-th alive one), the replica added, the broker a broker slot
    /// named; `None` for a fault that names no target.
    pub fn hits(&self) -> &[Option<String>] {
        &self.hits
    }

    /// The node `fault` hits if applied now (see [`hits`](Self::hits)).
    fn hit(&self, fault: &Fault) -> Option<String> {
        let brokers = self.cluster.brokers();
        // The broker `apply` stops or cuts off for this slot.
        let broker = |slot: usize| broker_node_name(brokers, (slot % brokers as usize) as BrokerId);
        match *fault {
            Fault::CrashRestart { replica }
            | Fault::StopRestart { replica }
            | Fault::RemoveReplica { replica }
            | Fault::Pause { replica, .. }
            | Fault::Isolate { replica, .. }
            | Fault::MqttDisconnect { replica } => Some(self.list[self.target(replica)].name.clone()),
            Fault::ZombieWake { replica, .. } => Some(
                self.owner(replica)
                    .map_or_else(|| "(a replica holding work)".to_owned(), |i| self.list[i].name.clone()),
            ),
            Fault::AddReplica => Some(format!("replica-{}", self.list.len())),
            Fault::BrokerCrash { broker: slot, .. }
            | Fault::BrokerPause { broker: slot, .. }
            | Fault::BrokerIsolate { broker: slot, .. } => Some(broker(slot)),
            _ => None,
        }
    }

    /// The replica a [`Fault::ZombieWake`] aimed at `slot` freezes: the first alive one from
    /// the slot's (in start order, wrapping) that runs tasks or holds tokens.
    fn owner(&self, slot: usize) -> Option<usize> {
        let alive: Vec<usize> = (0..self.list.len()).filter(|&i| self.list[i].alive).collect();
        let holds = |i: usize| {
            let view = &self.list[i].view;
            view.tasks.load(Ordering::SeqCst) > 0 || view.tokens.load(Ordering::SeqCst) > 0
        };
        (0..alive.len()).map(|k| alive[(slot + k) % alive.len()]).find(|&i| holds(i))
    }

    /// Applies one fault now.
    pub fn apply(&mut self, fault: &Fault) {
        let cluster = self.cluster.clone();
        match *fault {
            Fault::CrashRestart { replica } | Fault::RemoveReplica { replica } | Fault::Pause { replica, .. }
                if self.directions.spares(&self.list[self.target(replica)].name) =>
            {
                let name = &self.list[self.target(replica)].name;
                self.ctx.event(format!("skipped {fault}: {name} is a frozen zombie"));
            }
            Fault::CrashRestart { replica } => {
                let r = &self.list[self.target(replica)];
                self.directions.release(&r.name, "crash-restart");
                // The crash hits the disk first: buffered writes are lost, and one crash-restart in
                // four tears a store's files (STO-05: the copy is discarded on restart). Counted,
                // not drawn: a scenario without state draws nothing more than before.
                if let Some(partition) = self.disk.crash_restart(&r.name, replica) {
                    self.ctx.event(format!("{}: torn write of the store of task {partition}", r.name));
                }
                cluster.crash_restart(r.node, &r.name);
            }
            Fault::StopRestart { replica } => {
                let r = &self.list[self.target(replica)];
                self.ctx.fault("stop-restart", r.name.clone());
                r.stop.send_modify(|asked| *asked += 1);
            }
            Fault::AddReplica if self.alive().count() < self.max => {
                self.ctx.fault("add-replica", format!("replica-{}", self.list.len()));
                self.add();
            }
            Fault::RemoveReplica { replica } if self.alive().count() > 1 => {
                let i = self.target(replica);
                self.ctx.fault("remove-replica", self.list[i].name.clone());
                self.directions.release(&self.list[i].name, "remove-replica");
                self.disk.crash(&self.list[i].name);
                Handle::current().kill(self.list[i].node);
                self.list[i].alive = false;
                let name = &self.list[i].name;
                self.live.0.lock().expect("live views lock").retain(|(live, _)| live != name);
            }
            Fault::AddReplica | Fault::RemoveReplica { .. } => {
                self.ctx.event(format!("skipped {fault}: {} replicas alive", self.alive().count()));
            }
            Fault::Pause { replica, duration } => {
                let r = &self.list[self.target(replica)];
                let (node, name) = (r.node, r.name.clone());
                self.directions.release(&name, "pause");
                tokio::spawn(async move { cluster.pause_for(node, &name, duration).await });
            }
            Fault::Isolate { replica, duration } => {
                let r = &self.list[self.target(replica)];
                let (node, name) = (r.node, r.name.clone());
                cluster.isolate(node, &name);
                tokio::spawn(async move {
                    sleep(duration).await;
                    cluster.heal(node, &name);
                });
            }
            Fault::BrokerRestart if self.broker_back_at.lock().expect("broker lock").is_some() => {
                self.ctx.event(format!("skipped {fault}: the broker is down"));
            }
            Fault::BrokerRestart => cluster.restart_broker(),
            Fault::BrokerDown { down } => {
                let back = madsim::time::Instant::now() + down;
                let mut back_at = self.broker_back_at.lock().expect("broker lock");
                match *back_at {
                    Some(at) => {
                        self.ctx.event(format!("{fault}: the broker is down already, the outage lasts on"));
                        *back_at = Some(at.max(back));
                    }
                    None => {
                        *back_at = Some(back);
                        cluster.stop_broker();
                    }
                }
                let back_at = self.broker_back_at.clone();
                tokio::spawn(async move {
                    sleep(down).await;
                    let mut back_at = back_at.lock().expect("broker lock");
                    if back_at.is_some_and(|at| at <= madsim::time::Instant::now()) {
                        *back_at = None;
                        cluster.start_broker();
                    }
                });
            }
            Fault::RequestChaos { duration, ref faults } => {
                self.ctx.fault("request-chaos", format!("{fault}"));
                let faults = faults.clone();
                cluster.faults().update(|f| f.requests = faults);
                let baseline = self.baseline_requests.clone();
                tokio::spawn(async move {
                    sleep(duration).await;
                    cluster.faults().update(|f| f.requests = baseline);
                });
            }
            Fault::FailTransactions { duration } => {
                self.ctx.fault("fail-transactions", format!("EndTxn and Produce fail for {duration:?}"));
                let failing = RequestFaults { fatal_error: 0.3, retriable_error: 0.2, ..RequestFaults::default() };
                cluster.faults().update(|f| {
                    f.by_kind.insert(RequestKind::EndTxn, failing.clone());
                    f.by_kind.insert(RequestKind::Produce, failing);
                    // Every client's (an abortable-commits window may have narrowed Produce's).
                    f.by_kind_clients.remove(&RequestKind::Produce);
                });
                tokio::spawn(async move {
                    sleep(duration).await;
                    cluster.faults().update(|f| {
                        f.by_kind.remove(&RequestKind::EndTxn);
                        f.by_kind.remove(&RequestKind::Produce);
                    });
                });
            }
            Fault::AbortableCommits { duration, share } => {
                self.ctx.fault("abortable-commits", format!("{fault}"));
                // Only Produce: a failed delivery makes a transaction abortable and leaves its
                // producer usable. Only the replicas' (the run's inputs keep flowing). The
                // override is taken back at the end only if it is still this window's (a
                // failing-transactions window may have replaced it).
                let failing = RequestFaults { fatal_error: share, ..RequestFaults::default() };
                cluster.faults().update(|f| {
                    f.by_kind.insert(RequestKind::Produce, failing.clone());
                    f.by_kind_clients.insert(RequestKind::Produce, REPLICA_PREFIX.to_owned());
                });
                tokio::spawn(async move {
                    sleep(duration).await;
                    cluster.faults().update(|f| {
                        if f.by_kind.get(&RequestKind::Produce) == Some(&failing) {
                            f.by_kind.remove(&RequestKind::Produce);
                            f.by_kind_clients.remove(&RequestKind::Produce);
                        }
                    });
                });
            }
            Fault::LateMarkers { duration, min, max, only_changelog } => {
                self.ctx.fault("late-markers", format!("{fault}"));
                cluster.faults().update(|f| {
                    f.markers = MarkerFaults {
                        delay: 1.0,
                        delay_min: min,
                        delay_max: max,
                        only_targets_containing: only_changelog.then(|| "-changelog/".to_owned()),
                        ..MarkerFaults::default()
                    }
                });
                let baseline = self.baseline_markers.clone();
                tokio::spawn(async move {
                    sleep(duration).await;
                    cluster.faults().update(|f| f.markers = baseline);
                });
            }
            Fault::MqttBrokerRestart { down } => match &self.mqtt {
                Some(broker) => {
                    self.ctx.fault("mqtt-broker-restart", format!("down for {down:?}"));
                    broker.stop();
                    let broker = broker.clone();
                    tokio::spawn(async move {
                        sleep(down).await;
                        broker.start();
                    });
                }
                None => self.ctx.event(format!("skipped {fault}: no MQTT broker")),
            },
            Fault::MqttDisconnect { replica } => {
                let name = self.list[self.target(replica)].name.clone();
                match &self.mqtt {
                    Some(broker) if broker.drop_connection(&name) => self.ctx.fault("mqtt-disconnect", name),
                    Some(_) => self.ctx.event(format!("skipped {fault}: {name} is not connected")),
                    None => self.ctx.event(format!("skipped {fault}: no MQTT broker")),
                }
            }
            Fault::BrokerCrash { .. }
            | Fault::BrokerPause { .. }
            | Fault::BrokerIsolate { .. }
            | Fault::LeaderMove { .. }
            | Fault::LaggingFailover { .. }
                if cluster.brokers() == 1 =>
            {
                self.ctx.event(format!("skipped {fault}: a single broker"));
            }
            Fault::BrokerCrash { broker, down } => {
                let id = (broker % cluster.brokers() as usize) as i32;
                cluster.stop_broker_id(id);
                tokio::spawn(async move {
                    sleep(down).await;
                    cluster.start_broker_id(id);
                });
            }
            Fault::BrokerPause { broker, duration } => {
                let id = (broker % cluster.brokers() as usize) as i32;
                tokio::spawn(async move { cluster.pause_broker(id, duration).await });
            }
            Fault::BrokerIsolate { broker, duration } => {
                let id = (broker % cluster.brokers() as usize) as i32;
                tokio::spawn(async move { cluster.isolate_broker(id, duration).await });
            }
            Fault::LeaderMove { partition, to } => {
                if !cluster.move_some_leader(partition, to) {
                    self.ctx.event(format!("skipped {fault}: no other in-sync replica"));
                }
            }
            Fault::LaggingFailover { partition, lag, lead, down, crash } => {
                if !cluster.lagging_failover(partition, lag, lead, down, crash) {
                    self.ctx.event(format!("skipped {fault}: no partition with a leader and a follower"));
                }
            }
            Fault::ZombieWake { replica, step, hold } => {
                // From the slot's replica on, the first that runs tasks or holds tokens (once one
                // does: the group may be rebalancing).
                let alive: Vec<usize> = (0..self.list.len()).filter(|&i| self.list[i].alive).collect();
                let candidates = (0..alive.len())
                    .map(|k| &self.list[alive[(replica + k) % alive.len()]])
                    .map(|r| (r.name.clone(), r.node, r.view.clone()))
                    .collect();
                self.directions.zombie(candidates, step, hold);
            }
            Fault::FailingPageCommits { probability, .. } => {
                self.ctx.event(format!("{fault}"));
                self.directions.fail_pages(probability);
            }
        }
    }

    /// Waits (checking every `poll`) until a live replica runs tasks or holds extractor tokens,
    /// at most `max`.
    pub async fn wait_for_tasks(&self, max: Duration, poll: Duration) {
        let deadline = self.ctx.now() + max;
        let idle = |r: &Replica| r.view.tasks.load(Ordering::SeqCst) == 0 && r.view.tokens.load(Ordering::SeqCst) == 0;
        while self.ctx.now() < deadline && self.alive().all(idle) {
            sleep(poll).await;
        }
    }

    /// The fault period: runs `schedule` (times from now), awaits `feeders` (in order), waits
    /// until the last fault has ended, then ends every fault for good (buggify off,
    /// [`calm_down`](Self::calm_down)) and traces "faults stop".
    pub async fn run_faults(&mut self, schedule: &FaultSchedule, feeders: Vec<JoinHandle<()>>) {
        let faults_start = self.ctx.now();
        self.run_schedule(schedule).await;
        for feeder in feeders {
            feeder.await.expect("feeder nodes are never killed");
        }
        let faults_end = faults_start + schedule.end();
        if self.ctx.now() < faults_end {
            sleep(faults_end - self.ctx.now()).await;
        }
        madsim::buggify::disable();
        self.calm_down();
        self.ctx.event("faults stop");
    }

    /// Waits (checking every 500 ms) until every live replica's config store is one `want`
    /// accepts, at most `max`.
    pub async fn await_configs(&self, want: &ConfigCompaction, max: Duration) {
        let deadline = self.ctx.now() + max;
        while self.ctx.now() < deadline && !self.alive().all(|r| r.view.configs_match(want)) {
            sleep(Duration::from_millis(500)).await;
        }
    }

    /// One violation per live replica whose config store `want` (the compaction of `topics`)
    /// does not accept, naming the keys missing, extra and differing.
    pub fn config_mismatches(&self, want: &ConfigCompaction, topics: &str) -> Vec<String> {
        let mut violations = Vec::new();
        for replica in self.alive() {
            match replica.view.configs.lock().expect("view lock").as_ref() {
                Some(got) => {
                    if let Some(differences) = want.differences(got) {
                        violations
                            .push(format!("{}: config store != compaction of {topics}: {differences}", replica.name))
                    }
                }
                None => violations.push(format!("{}: no config store after quiescence", replica.name)),
            }
        }
        violations
    }

    /// Ends every fault for good (quiescence): request faults off, markers on time, the broker
    /// and the MQTT broker (if any) up.
    pub fn calm_down(&self) {
        if self.broker_back_at.lock().expect("broker lock").take().is_some() {
            self.cluster.start_broker();
        }
        self.cluster.faults().update(|f| {
            f.requests = RequestFaults::default();
            f.by_kind.clear();
            f.by_kind_clients.clear();
            f.markers = MarkerFaults::default();
        });
        if let Some(broker) = &self.mqtt {
            broker.start();
        }
        self.directions.calm_down();
    }
}

/// A replica's supervisor: runs the application, and after it crashes starts it again.
async fn supervise(env: ReplicaEnv, launch: Launch) {
    let mut incarnation = 0;
    loop {
        incarnation += 1;
        *env.view.configs.lock().expect("view lock") = None;
        env.view.tasks.store(0, Ordering::SeqCst);
        env.view.tokens.store(0, Ordering::SeqCst);
        env.ctx.event(format!("{}: application start #{incarnation}", env.name));
        // Only the stops asked from now on are this incarnation's.
        let mut stop = env.stop.clone();
        stop.borrow_and_update();
        match launch(ReplicaEnv { incarnation, stop, ..env.clone() }).await {
            Ok(()) => env.ctx.event(format!("{}: application stopped", env.name)),
            Err(why) => env.ctx.event(format!("{}: application crashed: {why}", env.name)),
        }
        sleep(Duration::from_millis(thread_rng().gen_range(10..RESTART_DELAY_MAX_MS))).await;
    }
}
