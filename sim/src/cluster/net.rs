//! The simulated cluster on madsim: each broker is a node (`kafka-broker`, 10.0.0.1:9092, or
//! `kafka-broker-<n>` at 10.0.0.(n+1):9092 on a cluster of several) serving requests over
//! `madsim::net::Endpoint` datagrams; clients call them from their own nodes with a request
//! timeout, so lost requests and responses, delays and partitions reach the clients exactly as
//! a network would deliver them.
//!
//! On a cluster of several brokers, followers fetch from their leaders over the same network,
//! and each broker heartbeats to a controller node (`kafka-controller`, 10.0.0.100, KRaft's
//! quorum, never faulted itself) that fences a broker silent for
//! [`BROKER_SESSION_TIMEOUT`] or registering anew after a restart, and unfences it when it is
//! back: fencing moves the leaderships it held (see `broker::replicas`). A broker crashed, paused
//! or cut off therefore falls out of the ISRs and loses its leaderships exactly when Kafka's
//! would.
//!
//! The brokers' state lives outside the nodes, so a restart keeps every log, transaction and
//! group and loses only requests in flight.
//!
//! The RPC is madsim's own `call_timeout` / `add_rpc_handler` pattern (a request tag, a random
//! reply tag from the seeded RNG, `Box<dyn Any>` payloads), written out over the raw endpoint
//! so that requests need no serde implementations.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use flechtwerk::kafka::{
    Admin, Consumer, ConsumerConfig, Kafka, KafkaErrorKind, KafkaResult, Producer, ProducerConfig,
};
use madsim::net::{Endpoint, NetSim};
use madsim::runtime::Handle;
use madsim::task::NodeId;
use madsim::time::TimeHandle;

use super::broker::{Ack, Broker, BrokerConfig, ReplicaPosition};
use super::client::{BoxFuture, Connector, KafkaClient, RequestTimeout, Transport};
use super::faults::FaultPlan;
use super::protocol::{BrokerError, BrokerId, ErrorCode, Request, RequestKind, Response};
use crate::runner::Ctx;

/// The (first) broker's address.
pub const BROKER_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 9092);

/// Broker `id`'s address: 10.0.0.(id+1):9092.
pub fn broker_addr(id: BrokerId) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1 + id as u8)), 9092)
}

/// Broker `id`'s node name: `kafka-broker` when it is the only one, else `kafka-broker-<id>`.
pub(crate) fn broker_node_name(brokers: u32, id: BrokerId) -> String {
    if brokers == 1 {
        "kafka-broker".to_owned()
    } else {
        format!("kafka-broker-{id}")
    }
}

/// The controller's address (KRaft's quorum, one node).
const CONTROLLER_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 100)), 9093);

/// `broker.heartbeat.interval.ms` (Kafka: 2 s).
pub const BROKER_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(2);

/// `broker.session.timeout.ms` (Kafka: 9 s): the controller fences a broker silent this long.
pub const BROKER_SESSION_TIMEOUT: Duration = Duration::from_secs(9);

/// `replica.fetch.wait.max.ms` (Kafka: 500 ms): a follower's fetch that finds nothing new waits
/// this long at the leader for an append, and is answered at once when one comes (a long
/// poll, as Kafka's followers fetch).
pub const REPLICA_FETCH_WAIT_MAX: Duration = Duration::from_millis(500);

/// How long a follower waits for a leader's answer before it fetches again.
const REPLICA_FETCH_TIMEOUT: Duration = Duration::from_secs(2);

/// How often a produce waiting for its replication looks again.
const ACK_POLL: Duration = Duration::from_millis(5);

/// Interval of the broker's timer tick (delayed markers, session and transaction timeouts,
/// the cleaner); requests also run due timers.
pub const TICK_INTERVAL: Duration = Duration::from_millis(10);

/// Client addresses handed out by [`Cluster::client_ip`]: 10.0.1.1 onwards.
const CLIENT_IPS_MAX: u32 = 250 * 250;

const REQUEST_TAG: u64 = 0x6b61_666b_612d_7271;
const REPLICA_TAG: u64 = 0x6b61_666b_612d_7266;
const HEARTBEAT_TAG: u64 = 0x6b61_666b_612d_6862;

struct ReplicaFetch {
    reply_tag: u64,
    follower: BrokerId,
    positions: Vec<ReplicaPosition>,
}

struct Heartbeat {
    broker: BrokerId,
    boot: u64,
}

struct Envelope {
    reply_tag: u64,
    client: String,
    /// The client connection the request travels on.
    connection: Connection,
    request: Request,
}

/// A client's connection: the transport's id and how many times it has reconnected.
///
/// Requests travel on connections, as over TCP: a client that gets no response in time closes
/// its connection and sends later requests on a new one (librdkafka and the Java client
/// disconnect on a request timeout), and the broker never handles a request of a connection
/// once it has handled one of the same client's newer connection — a closed connection's bytes
/// are discarded. Without this, a request delayed past its retry (madsim's buggified network
/// delays add seconds per hop) could land in the producer's *next* transaction: seed 62457 of
/// `counter` saw a 20 s late `TxnOffsetCommit` rewind the group's offsets that way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Connection {
    transport: u64,
    epoch: u64,
}

struct Server {
    broker: Mutex<Broker>,
    faults: FaultPlan,
    nodes: Vec<BrokerNode>,
    /// Woken when something was appended: the followers' waiting fetches.
    appended: tokio::sync::Notify,
    /// The append count the waiters last heard of.
    appends_seen: AtomicU64,
}

/// What one broker node keeps across its restarts.
#[derive(Default)]
struct BrokerNode {
    boots: AtomicU64,
    /// Newest connection epoch handled per transport.
    connections: Mutex<HashMap<u64, u64>>,
}

fn elapsed() -> Duration {
    TimeHandle::current().elapsed()
}

impl Server {
    fn with_broker<R>(&self, f: impl FnOnce(&mut Broker, Duration, &mut FaultPlan) -> R) -> R {
        let mut faults = self.faults.clone();
        let (result, appends) = {
            let mut broker = self.broker.lock().expect("broker lock");
            let result = f(&mut broker, elapsed(), &mut faults);
            (result, broker.appends())
        };
        if self.nodes.len() > 1 && self.appends_seen.swap(appends, Ordering::SeqCst) != appends {
            self.appended.notify_waiters();
        }
        result
    }
}

fn injected(kind: KafkaErrorKind, request: RequestKind) -> BrokerError {
    let code = match kind {
        KafkaErrorKind::Retriable if request.is_coordinator_request() => ErrorCode::NotCoordinator,
        KafkaErrorKind::Retriable => ErrorCode::NotLeaderOrFollower,
        _ => ErrorCode::UnknownServerError,
    };
    BrokerError { code, kind, message: format!("injected fault on {request}") }
}

async fn handle(endpoint: Endpoint, server: Arc<Server>, id: BrokerId, envelope: Envelope, from: SocketAddr) {
    let Envelope { reply_tag, client, connection, request } = envelope;
    let kind = request.kind();
    let directed = server.faults.direct(&request, &client);
    let fate = server.faults.decide(kind, &client);
    if fate.drop_request {
        return;
    }
    if !(fate.delay_request + directed.hold).is_zero() {
        madsim::time::sleep(fate.delay_request + directed.hold).await;
    }
    if let Some(gate) = directed.until {
        gate.passed().await;
    }
    {
        // A request of a connection the client has replaced is discarded (see `Connection`).
        let mut connections = server.nodes[id as usize].connections.lock().expect("connections lock");
        let newest = connections.entry(connection.transport).or_insert(connection.epoch);
        if connection.epoch < *newest {
            return;
        }
        *newest = connection.epoch;
    }
    let (mut response, wait) = match (directed.fail, fate.inject) {
        (Some(code), _) => (Err(BrokerError::new(code, format!("directed fault on {kind}"))), None),
        (None, Some(error_kind)) => (Err(injected(error_kind, kind)), None),
        (None, None) => server.with_broker(|broker, now, faults| broker.handle_at(id, request, now, faults)),
    };
    if let Some(wait) = wait {
        // acks=all: the answer waits until every in-sync replica has the batch.
        // Within the produce request's own timeout (the client's request timeout).
        let timeout = server.faults.request_timeout();
        let deadline = elapsed() + timeout;
        loop {
            let ack = server.broker.lock().expect("broker lock").acknowledged(&wait);
            match ack {
                Ack::Replicated => break,
                Ack::LeaderChanged => {
                    let message = format!("{}: the leader changed before the batch was replicated", wait.partition);
                    response = Err(BrokerError::new(ErrorCode::NotLeaderOrFollower, message));
                    break;
                }
                Ack::Waiting if elapsed() >= deadline => {
                    let message = format!("{}: not replicated within {timeout:?}", wait.partition);
                    response = Err(BrokerError::new(ErrorCode::RequestTimedOut, message));
                    break;
                }
                Ack::Waiting => madsim::time::sleep(ACK_POLL).await,
            }
        }
    }
    if fate.drop_response {
        return;
    }
    if !fate.delay_response.is_zero() {
        madsim::time::sleep(fate.delay_response).await;
    }
    let _ = endpoint.send_to_raw(from, reply_tag, Box::new(response)).await;
}

/// A broker node's main task (re-run on every restart).
async fn serve(server: Arc<Server>, ctx: Ctx, id: BrokerId) {
    let boot = server.nodes[id as usize].boots.fetch_add(1, Ordering::SeqCst) + 1;
    let endpoint = Endpoint::bind(broker_addr(id)).await.expect("the broker address is free (kill before restart)");
    let several = server.nodes.len() > 1;
    if several {
        ctx.event(format!("kafka: broker {id} up (boot #{boot})"));
    } else {
        ctx.event(format!("kafka: broker up (boot #{boot})"));
    }
    if !several {
        tokio::spawn(tick(server.clone()));
    }
    if several {
        tokio::spawn(heartbeat(endpoint.clone(), id, boot));
        for leader in (0..server.nodes.len() as BrokerId).filter(|&leader| leader != id) {
            tokio::spawn(follow(endpoint.clone(), server.clone(), id, leader));
        }
        tokio::spawn(lead(endpoint.clone(), server.clone(), id));
    }
    loop {
        let Ok((payload, from)) = endpoint.recv_from_raw(REQUEST_TAG).await else { continue };
        let envelope = *payload.downcast::<Envelope>().expect("only requests use the request tag");
        tokio::spawn(handle(endpoint.clone(), server.clone(), id, envelope, from));
    }
}

/// The timers of the cluster's shared state (on the broker node of a single broker, on the
/// controller node of several: one ticker for the shared state, not one per broker).
async fn tick(server: Arc<Server>) {
    loop {
        madsim::time::sleep(TICK_INTERVAL).await;
        server.with_broker(|broker, now, faults| broker.advance(now, faults));
    }
}

/// A broker's heartbeats to the controller.
async fn heartbeat(endpoint: Endpoint, broker: BrokerId, boot: u64) {
    loop {
        let _ = endpoint.send_to_raw(CONTROLLER_ADDR, HEARTBEAT_TAG, Box::new(Heartbeat { broker, boot })).await;
        madsim::time::sleep(BROKER_HEARTBEAT_INTERVAL).await;
    }
}

/// A broker's replica fetcher for one leader (Kafka runs one per source broker): fetches what
/// it follows of `leader`'s partitions, again as soon as an answer came.
async fn follow(endpoint: Endpoint, server: Arc<Server>, follower: BrokerId, leader: BrokerId) {
    loop {
        let positions = server.broker.lock().expect("broker lock").follower_positions(follower, leader);
        if positions.is_empty() {
            // Nothing of `leader`'s to follow (now): look again later.
            madsim::time::sleep(REPLICA_FETCH_WAIT_MAX).await;
            continue;
        }
        let answers = async {
            let reply_tag: u64 = madsim::rand::random();
            let fetch = ReplicaFetch { reply_tag, follower, positions };
            endpoint.send_to_raw(broker_addr(leader), REPLICA_TAG, Box::new(fetch)).await.ok()?;
            let (payload, _) =
                madsim::time::timeout(REPLICA_FETCH_TIMEOUT, endpoint.recv_from_raw(reply_tag)).await.ok()?.ok()?;
            payload.downcast::<Vec<ReplicaPosition>>().ok().map(|answers| *answers)
        }
        .await;
        match answers {
            Some(answers) => server.broker.lock().expect("broker lock").replica_fetched(follower, &answers),
            // The leader is down, frozen or cut off: try again after a pause.
            None => madsim::time::sleep(REPLICA_FETCH_WAIT_MAX).await,
        }
    }
}

/// A broker's answers to its followers' fetches: at once when the follower lacks something,
/// else when something is appended or after [`REPLICA_FETCH_WAIT_MAX`].
async fn lead(endpoint: Endpoint, server: Arc<Server>, leader: BrokerId) {
    loop {
        let Ok((payload, from)) = endpoint.recv_from_raw(REPLICA_TAG).await else { continue };
        let fetch = *payload.downcast::<ReplicaFetch>().expect("only replica fetches use the replica tag");
        let (endpoint, server) = (endpoint.clone(), server.clone());
        tokio::spawn(async move {
            let appended = server.appended.notified();
            let answers = server.broker.lock().expect("broker lock").replica_fetch(
                leader,
                fetch.follower,
                &fetch.positions,
                elapsed(),
            );
            let news = answers.iter().zip(&fetch.positions).any(|(a, p)| a.log_end > p.log_end);
            let answers = if news || answers.len() < fetch.positions.len() {
                answers
            } else {
                let _ = madsim::time::timeout(REPLICA_FETCH_WAIT_MAX, appended).await;
                server.broker.lock().expect("broker lock").replica_fetch(
                    leader,
                    fetch.follower,
                    &fetch.positions,
                    elapsed(),
                )
            };
            let _ = endpoint.send_to_raw(from, fetch.reply_tag, Box::new(answers)).await;
        });
    }
}

/// The controller node: fences brokers whose heartbeats stop or whose boot changed, unfences
/// them when they are back.
async fn control(server: Arc<Server>, ctx: Ctx) {
    let endpoint = Endpoint::bind(CONTROLLER_ADDR).await.expect("the controller address is free");
    tokio::spawn(tick(server.clone()));
    let mut sessions: BTreeMap<BrokerId, (u64, Duration)> = BTreeMap::new();
    loop {
        let received =
            madsim::time::timeout(BROKER_HEARTBEAT_INTERVAL / 4, endpoint.recv_from_raw(HEARTBEAT_TAG)).await;
        let now = elapsed();
        if let Ok(Ok((payload, _))) = received {
            let Heartbeat { broker, boot } = *payload.downcast::<Heartbeat>().expect("only heartbeats");
            let mut state = server.broker.lock().expect("broker lock");
            match sessions.insert(broker, (boot, now)) {
                Some((seen, _)) if seen != boot => {
                    // A new incarnation: the old one is fenced first, whatever it led moves.
                    ctx.event(format!("kafka: controller: broker {broker} registers again (boot #{boot})"));
                    state.fence_broker(broker, now);
                    state.unfence_broker(broker, now);
                }
                _ => state.unfence_broker(broker, now),
            }
        }
        let expired: Vec<BrokerId> = sessions
            .iter()
            .filter(|(_, (_, last))| now > *last + BROKER_SESSION_TIMEOUT)
            .map(|(broker, _)| *broker)
            .collect();
        let mut state = server.broker.lock().expect("broker lock");
        for broker in expired {
            if !state.fenced().contains(&broker) {
                state.fence_broker(broker, now);
            }
        }
    }
}

struct SimTransport {
    endpoint: tokio::sync::OnceCell<Endpoint>,
    client: String,
    id: u64,
    timeout: RequestTimeout,
    /// Per broker, the current connection's epoch; bumped when a request gets no response in
    /// time.
    epochs: Vec<AtomicU64>,
}

impl Transport for SimTransport {
    fn call(&self, broker: BrokerId, request: Request) -> BoxFuture<'_, Option<Response>> {
        Box::pin(async move {
            let endpoint = self.endpoint.get_or_try_init(|| Endpoint::bind("0.0.0.0:0")).await.ok()?;
            let reply_tag: u64 = madsim::rand::random();
            let epoch = &self.epochs[broker as usize];
            let connection = Connection { transport: self.id, epoch: epoch.load(Ordering::SeqCst) };
            let envelope = Envelope { reply_tag, client: self.client.clone(), connection, request };
            let response = async {
                endpoint.send_to_raw(broker_addr(broker), REQUEST_TAG, Box::new(envelope)).await.ok()?;
                let (payload, _) =
                    madsim::time::timeout(self.timeout.get(), endpoint.recv_from_raw(reply_tag)).await.ok()?.ok()?;
                payload.downcast::<Response>().ok().map(|response| *response)
            }
            .await;
            if response.is_none() {
                // Timed out: close this connection; the next request opens a new one.
                epoch.fetch_max(connection.epoch + 1, Ordering::SeqCst);
            }
            response
        })
    }
}

struct SimConnector {
    brokers: u32,
    timeout: RequestTimeout,
}

impl Connector for SimConnector {
    fn connect(&self, client_id: &str) -> Arc<dyn Transport> {
        Arc::new(SimTransport {
            endpoint: tokio::sync::OnceCell::new(),
            client: client_id.to_owned(),
            id: madsim::rand::random(),
            timeout: self.timeout.clone(),
            epochs: (0..self.brokers).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    fn brokers(&self) -> u32 {
        self.brokers
    }
}

/// The simulated cluster of one run, implementing [`Kafka`].
///
/// Clients must run on nodes with an IP (madsim drops datagrams from nodes without one):
/// build client nodes with `.ip(cluster.client_ip())`.
///
/// ```ignore
/// let cluster = Cluster::start(&ctx);
/// cluster.faults().update(|f| f.requests.drop_response = 0.05);
/// let kafka = cluster.kafka();
/// let node = Handle::current().create_node().name("app").ip(cluster.client_ip()).build();
/// node.spawn(async move { kafka.admin()?.create_topic(&NewTopic::new("in", 4)).await }).await;
/// cluster.restart_broker();
/// ```
#[derive(Clone)]
pub struct Cluster {
    server: Arc<Server>,
    /// The broker nodes, by broker id.
    nodes: Vec<NodeId>,
    ctx: Ctx,
    client: KafkaClient,
    next_ip: Arc<AtomicU32>,
    /// The clients' request timeout (shared with the transports and the fault plan).
    request_timeout: RequestTimeout,
    /// Brokers crashed by [`stop_broker_id`](Cluster::stop_broker_id) and not yet back.
    down: Arc<Mutex<std::collections::BTreeSet<BrokerId>>>,
    /// Names of the nodes cut off by [`isolate`](Cluster::isolate), for parts of a simulation
    /// that do not talk over `madsim::net` (the MQTT broker) but must see the same partition.
    isolated: Arc<Mutex<std::collections::BTreeSet<String>>>,
}

impl Cluster {
    /// Starts the broker nodes (`ctx.brokers` of them, on `ctx.transaction_version`) with
    /// default settings otherwise, a seed for its choices from the run's RNG, and the simulated
    /// wall clock for record timestamps.
    pub fn start(ctx: &Ctx) -> Cluster {
        let epoch_origin_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let brokers = ctx.brokers.max(1);
        let config = BrokerConfig {
            seed: madsim::rand::random(),
            epoch_origin_ms,
            brokers,
            transaction_version: ctx.transaction_version.max(1),
            ..BrokerConfig::default()
        };
        Cluster::with_config(ctx, config)
    }

    /// Starts the broker node with `config`. Broker events go to the run's trace; injected
    /// faults are counted in the run's report.
    pub fn with_config(ctx: &Ctx, config: BrokerConfig) -> Cluster {
        let recorder = ctx.clone();
        let timeout = RequestTimeout::default();
        let faults = FaultPlan::new()
            .with_recorder(Arc::new(move |kind: &str, what: String| recorder.fault(kind, what)))
            .with_request_timeout(timeout.clone());
        let brokers = config.brokers.max(1);
        let server = Arc::new(Server {
            broker: Mutex::new(Broker::new(config, ctx.trace.clone())),
            faults,
            nodes: (0..brokers).map(|_| BrokerNode::default()).collect(),
            appended: tokio::sync::Notify::new(),
            appends_seen: AtomicU64::new(0),
        });
        let handle = Handle::current();
        let nodes = (0..brokers as BrokerId)
            .map(|id| {
                let init = {
                    let (server, ctx) = (server.clone(), ctx.clone());
                    move || serve(server.clone(), ctx.clone(), id)
                };
                let name = broker_node_name(brokers, id);
                handle.create_node().name(name).ip(broker_addr(id).ip()).init(init).build().id()
            })
            .collect();
        if brokers > 1 {
            let (server, ctx) = (server.clone(), ctx.clone());
            handle
                .create_node()
                .name("kafka-controller")
                .ip(CONTROLLER_ADDR.ip())
                .init(move || control(server.clone(), ctx.clone()))
                .build();
        }
        Cluster {
            server,
            nodes,
            ctx: ctx.clone(),
            client: KafkaClient::new(Arc::new(SimConnector { brokers, timeout: timeout.clone() })),
            request_timeout: timeout,
            next_ip: Arc::new(AtomicU32::new(0)),
            down: Arc::default(),
            isolated: Arc::default(),
        }
    }

    /// Sets the clients' request timeout (`request.timeout.ms`;
    /// [`REQUEST_TIMEOUT`](super::client::REQUEST_TIMEOUT) unless set):
    /// how long a client waits for a response before it closes the connection and retries.
    /// Set it before the clients start. Kafka's own default is 30 s: a request in flight when its
    /// sender froze for less than that is still answered when it wakes.
    pub fn set_request_timeout(&self, timeout: Duration) {
        self.request_timeout.set(timeout);
    }

    /// The client factory, to hand to the engine (clonable, `Send + Sync`).
    pub fn kafka(&self) -> KafkaClient {
        self.client.clone()
    }

    /// The fault plan: change it at any time.
    pub fn faults(&self) -> &FaultPlan {
        &self.server.faults
    }

    /// The broker node (for `NetSim` clogs or pauses).
    pub fn broker_node(&self) -> NodeId {
        self.nodes[0]
    }

    /// Every broker's node, by broker id.
    pub fn broker_nodes(&self) -> &[NodeId] {
        &self.nodes
    }

    /// How many brokers the cluster has.
    pub fn brokers(&self) -> u32 {
        self.nodes.len() as u32
    }

    fn broker_name(&self, id: BrokerId) -> String {
        broker_node_name(self.brokers(), id)
    }

    /// Kills and restarts broker `id` (unless it is down): its requests in flight are lost, its
    /// log is kept; the controller fences its old incarnation when it registers again, so what
    /// it led moves.
    pub fn restart_broker_id(&self, id: BrokerId) {
        if self.down.lock().expect("down lock").contains(&id) {
            self.ctx.event(format!("skipped restarting {}: it is down", self.broker_name(id)));
            return;
        }
        self.ctx.fault("broker-restart", self.broker_name(id));
        let handle = Handle::current();
        handle.kill(self.nodes[id as usize]);
        handle.restart(self.nodes[id as usize]);
    }

    /// Crashes broker `id` and keeps it down until [`start_broker_id`](Cluster::start_broker_id)
    /// (a whole-cluster [`restart_broker`](Cluster::restart_broker) leaves it down).
    pub fn stop_broker_id(&self, id: BrokerId) {
        if !self.down.lock().expect("down lock").insert(id) {
            self.ctx.event(format!("skipped crashing {}: it is down", self.broker_name(id)));
            return;
        }
        self.ctx.fault("broker-crash", self.broker_name(id));
        Handle::current().kill(self.nodes[id as usize]);
    }

    /// Brings broker `id` back from [`stop_broker_id`](Cluster::stop_broker_id).
    pub fn start_broker_id(&self, id: BrokerId) {
        if !self.down.lock().expect("down lock").remove(&id) {
            return;
        }
        self.ctx.event(format!("kafka: {} starting", self.broker_name(id)));
        let handle = Handle::current();
        // A whole-cluster outage may hold it down still: a restart of a down node is a start.
        handle.kill(self.nodes[id as usize]);
        handle.restart(self.nodes[id as usize]);
    }

    /// Pauses broker `id` for `duration` (a GC pause, SIGSTOP).
    pub async fn pause_broker(&self, id: BrokerId, duration: Duration) {
        self.ctx.fault("broker-pause", format!("{} for {duration:?}", self.broker_name(id)));
        let handle = Handle::current();
        handle.pause(self.nodes[id as usize]);
        madsim::time::sleep(duration).await;
        handle.resume(self.nodes[id as usize]);
    }

    /// Cuts broker `id` off the network (clients, other brokers, the controller) for
    /// `duration`.
    pub async fn isolate_broker(&self, id: BrokerId, duration: Duration) {
        self.ctx.fault("broker-isolate", format!("{} for {duration:?}", self.broker_name(id)));
        let net = NetSim::current();
        net.clog_node(self.nodes[id as usize]);
        madsim::time::sleep(duration).await;
        net.unclog_node(self.nodes[id as usize]);
        self.ctx.event(format!("network healed: {}", self.broker_name(id)));
    }

    /// Moves the leadership of the `pick`-th busy partition (modulo their number: the data
    /// partitions, then the coordinator partitions of the transactional ids and groups in use)
    /// to broker `to`, or to the next in-sync replica after it; `false` when none other is in
    /// sync.
    pub fn move_some_leader(&self, pick: usize, to: usize) -> bool {
        let partitions = self.inspect(|broker| broker.busy_partitions());
        if partitions.is_empty() {
            return false;
        }
        let partition = &partitions[pick % partitions.len()];
        let brokers = self.brokers() as usize;
        (0..brokers).any(|step| self.move_leader(partition, ((to + step) % brokers) as BrokerId))
    }

    /// A failover while the followers lag, the way acknowledged writes get lost when they were
    /// acknowledged too early: every follower of the `pick`-th data partition is cut off from
    /// its leader (both ways; clients and the controller still reach everyone) for `lag`, under
    /// the session timeout (they stay unfenced and in the ISR), and `lead` into it the leader
    /// crashes for `down` (or, without `crash`, its leadership moves to a follower); a follower
    /// that lacks the leader's last appends takes over. `false` when there is no such partition
    /// yet.
    pub fn lagging_failover(&self, pick: usize, lag: Duration, lead: Duration, down: Duration, crash: bool) -> bool {
        let partitions = self.inspect(|broker| broker.data_partitions());
        if partitions.is_empty() {
            return false;
        }
        let partition = partitions[pick % partitions.len()].clone();
        let placement = self.inspect(|broker| broker.placement(&partition).cloned());
        let Some(placement) = placement else { return false };
        let Some(leader) = placement.leader else { return false };
        let followers: Vec<BrokerId> = placement.replicas.iter().copied().filter(|&b| b != leader).collect();
        if followers.is_empty() {
            return false;
        }
        self.ctx.fault(
            "lagging-failover",
            format!(
                "{partition}: followers {followers:?} cut off from leader {leader} for {lag:?}, which {} after {lead:?}",
                if crash { "crashes" } else { "loses its leadership" }
            ),
        );
        let net = NetSim::current();
        let links: Vec<(NodeId, NodeId)> =
            followers.iter().map(|&f| (self.nodes[f as usize], self.nodes[leader as usize])).collect();
        for &(follower, leader) in &links {
            net.clog_link(follower, leader);
            net.clog_link(leader, follower);
        }
        let cluster = self.clone();
        tokio::spawn(async move {
            madsim::time::sleep(lead).await;
            if crash {
                cluster.stop_broker_id(leader);
            } else {
                // The controller still reaches everyone: a preferred election or a reassignment
                // moves the leadership to a cut-off follower (in the ISR), and the old leader,
                // alive, answers the produces waiting for their replication NOT_LEADER.
                cluster.move_leader(&partition, followers[0]);
            }
            madsim::time::sleep(lag.saturating_sub(lead)).await;
            let net = NetSim::current();
            for &(follower, leader) in &links {
                net.unclog_link(follower, leader);
                net.unclog_link(leader, follower);
            }
            if crash {
                madsim::time::sleep(down.saturating_sub(lag.saturating_sub(lead))).await;
                cluster.start_broker_id(leader);
            }
        });
        true
    }

    /// Moves the leadership of `partition` (data or coordinator topic) to broker `to`, as a
    /// preferred-leader election or a reassignment does; `false` when `to` is not an in-sync
    /// replica.
    pub fn move_leader(&self, partition: &flechtwerk::kafka::TopicPartition, to: BrokerId) -> bool {
        let moved = self.server.broker.lock().expect("broker lock").move_leader(partition, to, elapsed());
        if moved {
            self.ctx.fault("leader-move", format!("{partition} to broker {to}"));
        }
        moved
    }

    /// A fresh client IP: 10.0.1.1, 10.0.1.2, … (never the broker's).
    pub fn client_ip(&self) -> IpAddr {
        let n = self.next_ip.fetch_add(1, Ordering::SeqCst);
        assert!(n < CLIENT_IPS_MAX, "more than {CLIENT_IPS_MAX} client nodes");
        IpAddr::V4(Ipv4Addr::new(10, 0, 1 + (n / 250) as u8, 1 + (n % 250) as u8))
    }

    /// Kills and restarts every broker node (the whole cluster): requests in flight are lost,
    /// the state is kept.
    pub fn restart_broker(&self) {
        self.ctx.fault("broker-restart", "kafka-broker");
        let handle = Handle::current();
        let down = self.down.lock().expect("down lock").clone();
        for (id, &node) in self.nodes.iter().enumerate() {
            if !down.contains(&(id as BrokerId)) {
                handle.kill(node);
                handle.restart(node);
            }
        }
    }

    /// Takes every broker down until [`start_broker`](Cluster::start_broker).
    pub fn stop_broker(&self) {
        self.ctx.fault("broker-down", "kafka-broker");
        for &node in &self.nodes {
            Handle::current().kill(node);
        }
    }

    /// Brings the stopped brokers back (not those a broker crash still holds down).
    pub fn start_broker(&self) {
        self.ctx.event("kafka: broker starting");
        let down = self.down.lock().expect("down lock").clone();
        for (id, &node) in self.nodes.iter().enumerate() {
            if !down.contains(&(id as BrokerId)) {
                if self.nodes.len() > 1 {
                    // One broker may be up already (a crash of its own ended): a start of a
                    // running node is a restart.
                    Handle::current().kill(node);
                }
                Handle::current().restart(node);
            }
        }
    }

    /// Crashes a client node and starts it again (its `init` runs anew).
    pub fn crash_restart(&self, node: NodeId, name: &str) {
        self.ctx.fault("crash-restart", name.to_owned());
        let handle = Handle::current();
        handle.kill(node);
        handle.restart(node);
    }

    /// Pauses a node for `duration` (like a long GC pause or SIGSTOP: timers keep running,
    /// messages queue up), then resumes it.
    pub async fn pause_for(&self, node: NodeId, name: &str, duration: Duration) {
        self.ctx.fault("pause", format!("{name} for {duration:?}"));
        let handle = Handle::current();
        handle.pause(node);
        madsim::time::sleep(duration).await;
        handle.resume(node);
    }

    /// Cuts `node` off the network (both directions) until [`heal`](Cluster::heal).
    pub fn isolate(&self, node: NodeId, name: &str) {
        self.ctx.fault("network-partition", name.to_owned());
        NetSim::current().clog_node(node);
        self.isolated.lock().expect("isolated lock").insert(name.to_owned());
    }

    /// Whether the node named `name` is cut off the network right now.
    pub fn is_isolated(&self, name: &str) -> bool {
        self.isolated.lock().expect("isolated lock").contains(name)
    }

    /// Reconnects an isolated node.
    pub fn heal(&self, node: NodeId, name: &str) {
        self.ctx.event(format!("network healed: {name}"));
        NetSim::current().unclog_node(node);
        self.isolated.lock().expect("isolated lock").remove(name);
    }

    /// Reads the broker state (for property checks).
    pub fn inspect<R>(&self, f: impl FnOnce(&Broker) -> R) -> R {
        f(&self.server.broker.lock().expect("broker lock"))
    }
}

impl Kafka for Cluster {
    fn consumer(&self, config: ConsumerConfig) -> KafkaResult<Box<dyn Consumer>> {
        self.client.consumer(config)
    }

    fn producer(&self, config: ProducerConfig) -> KafkaResult<Box<dyn Producer>> {
        self.client.producer(config)
    }

    fn admin(&self) -> KafkaResult<Box<dyn Admin>> {
        self.client.admin()
    }
}

/// The conformance suite's cluster controls ([`flechtwerk::testing::conformance::ClusterControl`])
/// on the simulated cluster: broker ids 0..N, 50 partitions per coordinator topic.
#[async_trait::async_trait]
impl flechtwerk::testing::conformance::ClusterControl for Cluster {
    fn brokers(&self) -> Vec<i32> {
        (0..self.brokers() as BrokerId).collect()
    }

    async fn leader(&self, partition: &flechtwerk::kafka::TopicPartition) -> Option<i32> {
        self.inspect(|broker| broker.placement(partition).and_then(|p| p.leader))
    }

    async fn move_leader(&self, partition: &flechtwerk::kafka::TopicPartition, to: i32) {
        // `to` may still be catching up (out of the ISR): try again until it can lead.
        let deadline = elapsed() + Duration::from_secs(60);
        while !Cluster::move_leader(self, partition, to) && elapsed() < deadline {
            if self.inspect(|broker| broker.placement(partition).and_then(|p| p.leader)) == Some(to) {
                return;
            }
            madsim::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn kill(&self, broker: i32) {
        self.stop_broker_id(broker);
    }

    async fn start(&self, broker: i32) {
        self.start_broker_id(broker);
        // Answers once the controller has unfenced it (its first heartbeat).
        let deadline = elapsed() + Duration::from_secs(30);
        while self.inspect(|state| state.fenced().contains(&broker)) && elapsed() < deadline {
            madsim::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn pause(&self, broker: i32) {
        self.ctx.fault("broker-pause", self.broker_name(broker));
        Handle::current().pause(self.nodes[broker as usize]);
    }

    async fn resume(&self, broker: i32) {
        self.ctx.event(format!("kafka: {} resumed", self.broker_name(broker)));
        Handle::current().resume(self.nodes[broker as usize]);
    }
}
