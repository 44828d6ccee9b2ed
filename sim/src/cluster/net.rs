//! The simulated cluster on madsim: the broker is a node (`kafka-broker`, 10.0.0.1:9092)
//! serving requests over `madsim::net::Endpoint` datagrams; clients call it from their own
//! nodes with a request timeout, so lost requests and responses, delays and partitions reach
//! the clients exactly as a network would deliver them.
//!
//! The broker's state lives outside the node, so [`Cluster::restart_broker`] keeps every log,
//! transaction and group and loses only requests in flight.
//!
//! The RPC is madsim's own `call_timeout` / `add_rpc_handler` pattern (a request tag, a random
//! reply tag from the seeded RNG, `Box<dyn Any>` payloads), written out over the raw endpoint
//! so that requests need no serde implementations.

use std::collections::HashMap;
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

use super::broker::{Broker, BrokerConfig};
use super::client::{BoxFuture, Connector, KafkaClient, Transport, REQUEST_TIMEOUT};
use super::faults::FaultPlan;
use super::protocol::{BrokerError, ErrorCode, Request, RequestKind, Response};
use crate::runner::Ctx;

/// The broker's address.
pub const BROKER_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 9092);

/// Interval of the broker's timer tick (delayed markers, session and transaction timeouts,
/// the cleaner); requests also run due timers.
pub const TICK_INTERVAL: Duration = Duration::from_millis(10);

/// Client addresses handed out by [`Cluster::client_ip`]: 10.0.1.1 onwards.
const CLIENT_IPS_MAX: u32 = 250 * 250;

const REQUEST_TAG: u64 = 0x6b61_666b_612d_7271;

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
        f(&mut self.broker.lock().expect("broker lock"), elapsed(), &mut faults)
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

async fn handle(endpoint: Endpoint, server: Arc<Server>, envelope: Envelope, from: SocketAddr) {
    let Envelope { reply_tag, client, connection, request } = envelope;
    let kind = request.kind();
    let fate = server.faults.decide(kind, &client);
    if fate.drop_request {
        return;
    }
    if !fate.delay_request.is_zero() {
        madsim::time::sleep(fate.delay_request).await;
    }
    {
        // A request of a connection the client has replaced is discarded (see `Connection`).
        let mut connections = server.connections.lock().expect("connections lock");
        let newest = connections.entry(connection.transport).or_insert(connection.epoch);
        if connection.epoch < *newest {
            return;
        }
        *newest = connection.epoch;
    }
    let response: Response = match fate.inject {
        Some(error_kind) => Err(injected(error_kind, kind)),
        None => server.with_broker(|broker, now, faults| broker.handle(request, now, faults)),
    };
    if fate.drop_response {
        return;
    }
    if !fate.delay_response.is_zero() {
        madsim::time::sleep(fate.delay_response).await;
    }
    let _ = endpoint.send_to_raw(from, reply_tag, Box::new(response)).await;
}

/// The broker node's main task (re-run on every restart).
async fn serve(server: Arc<Server>, ctx: Ctx) {
    let boot = server.boots.fetch_add(1, Ordering::SeqCst) + 1;
    let endpoint = Endpoint::bind(BROKER_ADDR).await.expect("the broker address is free (kill before restart)");
    ctx.event(format!("kafka: broker up (boot #{boot})"));
    let ticker = server.clone();
    tokio::spawn(async move {
        loop {
            madsim::time::sleep(TICK_INTERVAL).await;
            ticker.with_broker(|broker, now, faults| broker.advance(now, faults));
        }
    });
    loop {
        let Ok((payload, from)) = endpoint.recv_from_raw(REQUEST_TAG).await else { continue };
        let envelope = *payload.downcast::<Envelope>().expect("only requests use the request tag");
        tokio::spawn(handle(endpoint.clone(), server.clone(), envelope, from));
    }
}

struct SimTransport {
    endpoint: tokio::sync::OnceCell<Endpoint>,
    client: String,
    id: u64,
    /// The current connection's epoch; bumped when a request gets no response in time.
    epoch: AtomicU64,
}

impl Transport for SimTransport {
    fn call(&self, request: Request) -> BoxFuture<'_, Option<Response>> {
        Box::pin(async move {
            let endpoint = self.endpoint.get_or_try_init(|| Endpoint::bind("0.0.0.0:0")).await.ok()?;
            let reply_tag: u64 = madsim::rand::random();
            let connection = Connection { transport: self.id, epoch: self.epoch.load(Ordering::SeqCst) };
            let envelope = Envelope { reply_tag, client: self.client.clone(), connection, request };
            let response = async {
                endpoint.send_to_raw(BROKER_ADDR, REQUEST_TAG, Box::new(envelope)).await.ok()?;
                let (payload, _) =
                    madsim::time::timeout(REQUEST_TIMEOUT, endpoint.recv_from_raw(reply_tag)).await.ok()?.ok()?;
                payload.downcast::<Response>().ok().map(|response| *response)
            }
            .await;
            if response.is_none() {
                // Timed out: close this connection; the next request opens a new one.
                self.epoch.fetch_max(connection.epoch + 1, Ordering::SeqCst);
            }
            response
        })
    }
}

struct SimConnector;

impl Connector for SimConnector {
    fn connect(&self, client_id: &str) -> Arc<dyn Transport> {
        Arc::new(SimTransport {
            endpoint: tokio::sync::OnceCell::new(),
            client: client_id.to_owned(),
            id: madsim::rand::random(),
            epoch: AtomicU64::new(0),
        })
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
    node: NodeId,
    ctx: Ctx,
    client: KafkaClient,
    next_ip: Arc<AtomicU32>,
    /// Names of the nodes cut off by [`isolate`](Cluster::isolate), for parts of a simulation
    /// that do not talk over `madsim::net` (the MQTT broker) but must see the same partition.
    isolated: Arc<Mutex<std::collections::BTreeSet<String>>>,
}

impl Cluster {
    /// Starts the broker node with default settings, a seed for its choices from the run's
    /// RNG, and the simulated wall clock for record timestamps.
    pub fn start(ctx: &Ctx) -> Cluster {
        let epoch_origin_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let config = BrokerConfig { seed: madsim::rand::random(), epoch_origin_ms, ..BrokerConfig::default() };
        Cluster::with_config(ctx, config)
    }

    /// Starts the broker node with `config`. Broker events go to the run's trace; injected
    /// faults are counted in the run's report.
    pub fn with_config(ctx: &Ctx, config: BrokerConfig) -> Cluster {
        let recorder = ctx.clone();
        let faults =
            FaultPlan::new().with_recorder(Arc::new(move |kind: &str, what: String| recorder.fault(kind, what)));
        let server = Arc::new(Server {
            broker: Mutex::new(Broker::new(config, ctx.trace.clone())),
            faults,
            boots: AtomicU64::new(0),
            connections: Mutex::new(HashMap::new()),
        });
        let init = {
            let (server, ctx) = (server.clone(), ctx.clone());
            move || serve(server.clone(), ctx.clone())
        };
        let node = Handle::current().create_node().name("kafka-broker").ip(BROKER_ADDR.ip()).init(init).build();
        Cluster {
            server,
            node: node.id(),
            ctx: ctx.clone(),
            client: KafkaClient::new(Arc::new(SimConnector)),
            next_ip: Arc::new(AtomicU32::new(0)),
            isolated: Arc::default(),
        }
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
        self.node
    }

    /// A fresh client IP: 10.0.1.1, 10.0.1.2, … (never the broker's).
    pub fn client_ip(&self) -> IpAddr {
        let n = self.next_ip.fetch_add(1, Ordering::SeqCst);
        assert!(n < CLIENT_IPS_MAX, "more than {CLIENT_IPS_MAX} client nodes");
        IpAddr::V4(Ipv4Addr::new(10, 0, 1 + (n / 250) as u8, 1 + (n % 250) as u8))
    }

    /// Kills and restarts the broker node: requests in flight are lost, the state is kept.
    pub fn restart_broker(&self) {
        self.ctx.fault("broker-restart", "kafka-broker");
        let handle = Handle::current();
        handle.kill(self.node);
        handle.restart(self.node);
    }

    /// Takes the broker down until [`start_broker`](Cluster::start_broker).
    pub fn stop_broker(&self) {
        self.ctx.fault("broker-down", "kafka-broker");
        Handle::current().kill(self.node);
    }

    /// Brings a stopped broker back.
    pub fn start_broker(&self) {
        self.ctx.event("kafka: broker starting");
        Handle::current().restart(self.node);
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
