//! The nemesis: the production stack (this library, its librdkafka adapter, librdkafka, Apache
//! Kafka) run as separate OS processes on the replicated 3-broker cluster of `scripts/kafka start
//! --brokers 3`, while a seeded schedule of faults fires: brokers SIGKILLed and restarted (also
//! with a stage's replicas restarted during the failover, so that their start-up reads meet the
//! broker's fencing), brokers SIGSTOPped past the session timeouts, preferred-leader elections,
//! application replicas SIGKILLed, stopped and rolled; with the cluster's clients through Toxiproxy
//! (`--toxiproxy`), one broker's connections of one stage or of every client cut, blackholed,
//! delayed, throttled, reset or cut off after some bytes. Then every fault heals, the stages
//! finish, and a checker reads what the brokers hold — with librdkafka directly, not through this library's
//! reading code — and verifies, per stage:
//!
//! - counter (3 replicas of a counting transformer with a config join): per key the counts are
//!   exactly 1..n, n its inputs in the input topic; every output joined with its config; the
//!   group's committed offsets at the end of the input;
//! - extractor (3 replicas of a paging extractor): per feed items 1..N exactly once, in order;
//!   per feed the cursors in the changelog never regress;
//! - bridge (with `MQTT_BROKER`: 2 replicas of an MQTT → Kafka bridge, a QoS 1 publisher): every
//!   reading Mosquitto acknowledged is in Kafka, at least once;
//! - no open transaction left on any output or changelog partition (the read_committed end
//!   equals the high watermark);
//! - no replica ended on its own: a replica whose `run()` returned an error (a fault the engine
//!   should have waited out, like issue 40's DestroyBroker) fails the run, with its error —
//!   except LIFE-23's let-it-crash ends (fenced, a transaction that must abort, the group's
//!   membership lost), also when they end a stop: those are counted, and the replica restarts;
//! - every clean stop (SIGTERM) ends within 40 s, whatever the brokers do meanwhile, as the
//!   replica measures it (SIGTERM to `run_until`'s end); a process that then does not exit is
//!   counted and shown, not a violation (the engine's budget held).
//!
//! One binary, four roles (`harness = false`): without arguments it is the nemesis and the
//! checker; `--counter PREFIX CLIENT`, `--extractor PREFIX CLIENT` and `--bridge PREFIX CLIENT`
//! are the replicas.
//!
//! Environment: `KAFKA_CLUSTER_BOOTSTRAP` and `KAFKA_CLUSTER_COMMAND` (what `scripts/kafka
//! start --brokers 3` prints; with `--toxiproxy` also the lanes' bootstraps, the direct one and
//! `KAFKA_CLUSTER_TOXIPROXY`, which turn the network faults on); `MQTT_BROKER` (Mosquitto,
//! `scripts/mosquitto start`: turns the bridge on); `NEMESIS_SECONDS` (faults for this long, default 180);
//! `NEMESIS_SEED` (the schedule; default from the clock). The seed and the whole schedule are
//! printed first: `NEMESIS_SEED=<seed> cargo test --features rdkafka,mqtt --test nemesis` repeats it
//! (the faults' times are the same; what the processes do between them is not deterministic).
//! `NEMESIS_PRODUCERS=per-instance` runs the counter with `Producers::PerInstance`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flechtwerk::attribute::{Attribute, INT};
use flechtwerk::kafka::rdkafka::RdKafka;
use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
use flechtwerk::stage::BoxError;
use flechtwerk::{Config, Event, Extractor, Flechtwerk, Message, Page, Producers, State};
use flechtwerk_sim::stages::{check_counts, counter, LABEL};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message as _;
use rdkafka::{Offset, TopicPartitionList};

const PARTITIONS: u32 = 6;
const REPLICAS: usize = 3;
const KEYS: usize = 200;
/// Counter inputs fed per second while the faults run.
const INPUT_RATE: u64 = 100;
const FEEDS: usize = 24;
const PAGE_ITEMS: i64 = 10;
/// Items per feed per second of faults: one page a second, so extraction lasts the run.
const FEED_RATE: i64 = 10;
/// Items one page takes at most: a feed that fell behind during the faults catches up at six
/// times its rate (the source holds what accumulated meanwhile), instead of paging at the rate
/// it grows by, which left a loaded run's extractor short of its items when `FINISH_MAX` ran out
/// (a clean-clone CI run: 41,591 of 43,200 items after 600 s).
const CATCH_UP_ITEMS: i64 = 6 * PAGE_ITEMS;
/// How long the stages may take to finish once everything healed (the extractor catches up
/// CATCH_UP_ITEMS a page; docs/kafka-broker.md has the times it took before it could).
const FINISH_MAX: Duration = Duration::from_secs(600);
/// How long a replica may take to stop cleanly (its shutdown grace and closes, with margin).
const STOP_MAX: Duration = Duration::from_secs(40);
/// The line the fleet writes to a replica's log before each start.
const START_MARKER: &str = "--- nemesis: replica started ---";
/// The line a replica prints when a stop ended, before the milliseconds it took.
const STOPPED_IN: &str = "REPLICA STOPPED after ms=";
/// The line a replica prints once its SIGTERM handler is in place: a SIGTERM before it would
/// kill the process as the default action does, which says nothing about the engine's stop.
const READY: &str = "REPLICA READY for SIGTERM";
/// How long a started replica may take to say [`READY`] (a process start and a runtime).
const READY_MAX: Duration = Duration::from_secs(15);

const SEQ: Attribute<i64> = Attribute::new("seq", &INT);
const CURSOR: Attribute<i64> = Attribute::new("cursor", &INT);
const ITEMS: Attribute<i64> = Attribute::new("items", &INT);
/// When the feed's source began to grow (Unix ms): by `t` it holds FEED_RATE items a second.
const SINCE_MS: Attribute<i64> = Attribute::new("since_ms", &INT);

fn env(name: &str) -> String {
    let value = std::env::var(name).unwrap_or_default();
    assert!(
        !value.is_empty(),
        "{name} is not set: run through scripts/test, or `scripts/kafka start --brokers 3` and export what it prints"
    );
    value
}

fn kafka() -> Arc<dyn Kafka> {
    Arc::new(RdKafka::new(env("KAFKA_CLUSTER_BOOTSTRAP")))
}

/// A stage's replicas connect through their own lane of proxies when the cluster has them (see
/// [`Lanes`]); the feeder and the setup through lane 0 (`KAFKA_CLUSTER_BOOTSTRAP`).
fn stage_kafka(stage: Stage) -> Arc<dyn Kafka> {
    let lane = std::env::var(format!("KAFKA_CLUSTER_BOOTSTRAP_LANE{}", stage.lane())).unwrap_or_default();
    if lane.is_empty() {
        kafka()
    } else {
        Arc::new(RdKafka::new(lane))
    }
}

/// The checker reads past the proxies when it can: what it sees must not depend on a toxic.
fn checker_bootstrap() -> String {
    std::env::var("KAFKA_CLUSTER_DIRECT_BOOTSTRAP")
        .ok()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| env("KAFKA_CLUSTER_BOOTSTRAP"))
}

struct Names {
    input: String,
    output: String,
    configs: String,
    feeds: String,
    items: String,
    counter_app: String,
    extractor_app: String,
}

fn names(prefix: &str) -> Names {
    Names {
        input: format!("{prefix}-input"),
        output: format!("{prefix}-output"),
        configs: format!("{prefix}-configs"),
        feeds: format!("{prefix}-feeds"),
        items: format!("{prefix}-items"),
        counter_app: format!("{prefix}-counter"),
        extractor_app: format!("{prefix}-extractor"),
    }
}

// ---------------------------------------------------------------------------------------------
// The replicas.

/// Pages through items 1..=N of its feed (N in the feed's config), one page per poll, of what its
/// source holds by now (it grows by FEED_RATE items a second from the config's `since_ms`).
struct Pager {
    feeds: String,
    items: String,
}

impl Extractor for Pager {
    fn config_topics(&self) -> Vec<String> {
        vec![self.feeds.clone()]
    }

    async fn poll(&self, config: Config, mut state: State, page: &mut Page<'_>) -> Result<(), BoxError> {
        let total = config.require(&ITEMS)?;
        let since_ms = config.require(&SINCE_MS)?;
        let now_ms = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis())?;
        // What the source holds by now (PAGE_ITEMS ahead, so that the first poll finds a page).
        let held = (now_ms.saturating_sub(since_ms) * FEED_RATE / 1000 + PAGE_ITEMS).min(total);
        let cursor = state.get(&CURSOR)?.unwrap_or(0);
        if cursor >= held {
            return Ok(());
        }
        let last = (cursor + CATCH_UP_ITEMS).min(held);
        for seq in cursor + 1..=last {
            page.send(Message::new(self.items.as_str(), page.key(), Event::new().with(&SEQ, seq)?)).await?;
        }
        state.set(&CURSOR, last)?;
        page.commit(state).await?;
        Ok(())
    }
}

/// A replica: runs until killed or stopped (SIGTERM: a clean stop, exit 0); a `run()` that ends
/// with an error exits 3 after printing it.
fn replica(role: &str, prefix: &str, client: &str) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let code = runtime.block_on(async {
        // The handler first, before anything that can take time; the fleet sends SIGTERM only
        // once the replica says it is in place.
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM");
        eprintln!("{READY}");
        // The engine's own account (tasks and tokens taken, aborts, closes given up) by
        // default: a replica that misbehaves is read from its log afterwards.
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,flechtwerk=info"));
        let _ =
            tracing_subscriber::fmt().with_ansi(false).with_env_filter(filter).with_writer(std::io::stderr).try_init();
        let n = names(prefix);
        // The MQTT client id is the client id, and Mosquitto is shared with the other test
        // programs of the run: a bare `bridge-0` there took another program's session over.
        let builder = Flechtwerk::builder()
            .client_id(format!("{prefix}-{client}"))
            .kafka(stage_kafka(match role {
                "--counter" => Stage::Counter,
                "--bridge" => Stage::Bridge,
                _ => Stage::Extractor,
            }))
            .session_timeout(Duration::from_secs(6))
            .poll_interval(Duration::from_millis(1000 / FEED_RATE as u64 * PAGE_ITEMS as u64));
        let app = match role {
            "--counter" => {
                let producers = match std::env::var("NEMESIS_PRODUCERS").as_deref() {
                    Ok("per-instance") => Producers::PerInstance,
                    _ => Producers::PerTask,
                };
                builder.application_id(&n.counter_app).producers(producers).build(counter(
                    &n.input,
                    &n.output,
                    Some(&n.configs),
                ))
            }
            "--bridge" => bridge_app(builder, prefix),
            _ => builder.application_id(&n.extractor_app).build(Pager { feeds: n.feeds, items: n.items }),
        }
        .expect("valid settings");
        let signalled = Arc::new(std::sync::OnceLock::new());
        let stopped = {
            let signalled = Arc::clone(&signalled);
            async move {
                term.recv().await.unwrap_or(());
                let _ = signalled.set(Instant::now());
                tracing::warn!("SIGTERM: stopping");
            }
        };
        let result = app.run_until(stopped).await;
        // How long the stop took, as the replica measured it: the fleet's own view is only as
        // fine as its tending, which a fault's command can hold up for seconds.
        if let Some(at) = signalled.get() {
            eprintln!("{STOPPED_IN}{}", at.elapsed().as_millis());
        }
        match result {
            Ok(()) => 0,
            Err(error) => {
                // A fence or a lost group membership ends run() by design (LIFE-23: let it
                // crash; the restart fences and restores): the nemesis tells those apart.
                let (kind, code) = match &error {
                    flechtwerk::Error::Kafka(e) => (format!("{:?}", e.kind()), e.code()),
                    _ => ("-".to_owned(), None),
                };
                eprintln!("REPLICA FAILED kind={kind} code={}: {error}", code.unwrap_or(0));
                3
            }
        }
    });
    // As a `#[tokio::main]` returning would: the runtime is shut down (the clients the engine
    // closed finish dropping on its blocking pool) before the process exits. An exit from
    // inside the runtime, while librdkafka handles were still being destroyed on other
    // threads, hung once in CI (the replica had printed its stop, 102 ms after SIGTERM).
    runtime.shutdown_timeout(Duration::from_secs(20));
    std::process::exit(code);
}

// ---------------------------------------------------------------------------------------------
// The schedule.

#[derive(Clone, Debug)]
enum Fault {
    KillBroker {
        broker: u32,
        down: Duration,
    },
    /// A broker killed, and `after` it a stage's replicas killed and restarted at once: their
    /// start-up reads (the config bootstrap, the changelog restore, the topic checks) are in
    /// flight when the controller fences the broker (9 s after the kill) and librdkafka
    /// destroys its handle of it — issue 40's `_DESTROY_BROKER`, on purpose.
    Failover {
        broker: u32,
        down: Duration,
        stage: Stage,
        after: Duration,
    },
    PauseBroker {
        broker: u32,
        paused: Duration,
    },
    ElectLeaders,
    KillReplica {
        stage: Stage,
        replica: usize,
        down: Duration,
    },
    StopReplica {
        stage: Stage,
        replica: usize,
    },
    Rolling {
        stage: Stage,
    },
    /// A network fault through Toxiproxy on one broker's proxies, for `lasting`; counts as a
    /// broker fault (never two brokers at once). Only with `--toxiproxy`'s proxies.
    Net {
        broker: u32,
        lanes: Lanes,
        toxic: Toxic,
        lasting: Duration,
    },
}

/// What the nemesis does later.
enum Action {
    /// A cluster command (`scripts/kafka` arguments), in the background.
    Cluster(Vec<String>),
    /// A clean stop of a replica (the next of a rolling restart).
    Stop((Stage, usize)),
    /// Every replica of a stage killed and restarted at once.
    Restart(Stage),
    /// Toxiproxy requests that heal a network fault.
    Heal(Vec<Request>),
}

/// Between the replicas of a rolling restart.
const ROLLING_STEP: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Counter,
    Extractor,
    /// The MQTT bridge (only with `MQTT_BROKER`): [`BRIDGE_REPLICAS`] replicas.
    Bridge,
}

impl Stage {
    fn replicas(self) -> usize {
        match self {
            Stage::Bridge => BRIDGE_REPLICAS,
            _ => REPLICAS,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Network faults through Toxiproxy (`scripts/kafka start --brokers 3 --toxiproxy`).
//
// Every client connection to a broker passes a proxy; each broker has one proxy per client
// *lane* (its own listener, advertised as that proxy): lane 0 is the feeder's and the setup's,
// lane 1 the counter's replicas', lane 2 the extractor's, lane 3 the bridge's. A fault on one lane cuts, delays or
// resets the connections of one stage to one broker while the others still reach it; on every
// lane, all clients'. Inter-broker replication and the controller are never faulted, and the
// checker reads past the proxies.

impl Stage {
    fn lane(self) -> u32 {
        match self {
            Stage::Counter => 1,
            Stage::Extractor => 2,
            Stage::Bridge => 3,
        }
    }
}

/// Whose connections to the broker a network fault hits.
#[derive(Clone, Copy, Debug)]
enum Lanes {
    /// Every client's (every lane's proxy of the broker).
    All,
    /// One stage's replicas' only.
    Stage(Stage),
}

impl Lanes {
    fn proxies(self, broker: u32) -> Vec<String> {
        let lanes = match self {
            Lanes::All => vec![0, Stage::Counter.lane(), Stage::Extractor.lane(), Stage::Bridge.lane()],
            Lanes::Stage(stage) => vec![stage.lane()],
        };
        lanes.into_iter().map(|lane| format!("lane{lane}-broker{broker}")).collect()
    }
}

/// What a network fault does to the connections through a proxy.
#[derive(Clone, Copy, Debug)]
enum Toxic {
    /// The proxy disabled: its connections closed, new ones refused.
    Cut,
    /// Nothing passes (Toxiproxy's `timeout` toxic, 0: the bytes are dropped, the connections
    /// stay open), as a partition that TCP does not notice. Healed by closing the connections
    /// (proxy disabled, toxic removed, enabled): dropped bytes would corrupt the stream.
    Blackhole,
    /// Each chunk delayed by `ms` ± `jitter_ms` (`latency`).
    Latency { ms: u64, jitter_ms: u64, upstream: bool },
    /// At most `kb_per_s` KB/s (`bandwidth`).
    Bandwidth { kb_per_s: u64, upstream: bool },
    /// Every connection reset (RST) `after_ms` after its first data (`reset_peer`).
    ResetPeer { after_ms: u64 },
    /// Every connection closed once `bytes` passed in one direction (`limit_data`): requests or
    /// answers cut off in the middle.
    LimitData { bytes: u64, upstream: bool },
}

impl Toxic {
    fn name(self) -> &'static str {
        match self {
            Toxic::Cut => "net: connections cut",
            Toxic::Blackhole => "net: blackhole",
            Toxic::Latency { .. } => "net: latency",
            Toxic::Bandwidth { .. } => "net: bandwidth",
            Toxic::ResetPeer { .. } => "net: reset_peer",
            Toxic::LimitData { .. } => "net: limit_data",
        }
    }

    fn draw(rng: &mut Rng) -> (Toxic, Duration) {
        let upstream = rng.below(2) == 0;
        match rng.below(6) {
            0 => (Toxic::Cut, rng.secs(3, 15)),
            1 => (Toxic::Blackhole, rng.secs(3, 15)),
            2 => (Toxic::Latency { ms: 50 + rng.below(1950), jitter_ms: rng.below(200), upstream }, rng.secs(10, 30)),
            3 => (Toxic::Bandwidth { kb_per_s: 4 + rng.below(124), upstream }, rng.secs(10, 30)),
            4 => (Toxic::ResetPeer { after_ms: rng.below(3000) }, rng.secs(3, 12)),
            _ => (Toxic::LimitData { bytes: 100 + rng.below(50_000), upstream }, rng.secs(3, 12)),
        }
    }

    /// Toxiproxy's toxic: (type, stream, attributes as JSON).
    fn toxic(self) -> Option<(&'static str, &'static str, String)> {
        let stream = |upstream: bool| if upstream { "upstream" } else { "downstream" };
        Some(match self {
            Toxic::Cut => return None,
            Toxic::Blackhole => ("timeout", "upstream", r#"{"timeout":0}"#.to_owned()),
            Toxic::Latency { ms, jitter_ms, upstream } => {
                ("latency", stream(upstream), format!(r#"{{"latency":{ms},"jitter":{jitter_ms}}}"#))
            }
            Toxic::Bandwidth { kb_per_s, upstream } => {
                ("bandwidth", stream(upstream), format!(r#"{{"rate":{kb_per_s}}}"#))
            }
            Toxic::ResetPeer { after_ms } => ("reset_peer", "upstream", format!(r#"{{"timeout":{after_ms}}}"#)),
            Toxic::LimitData { bytes, upstream } => ("limit_data", stream(upstream), format!(r#"{{"bytes":{bytes}}}"#)),
        })
    }

    /// The requests that start the fault on `proxy`, and those that heal it.
    fn requests(self, proxy: &str) -> (Vec<Request>, Vec<Request>) {
        let enable = |on: bool| Request::post(format!("/proxies/{proxy}"), format!(r#"{{"enabled":{on}}}"#));
        let Some((kind, stream, attributes)) = self.toxic() else {
            return (vec![enable(false)], vec![enable(true)]);
        };
        let add = Request::post(
            format!("/proxies/{proxy}/toxics"),
            format!(
                r#"{{"name":"nemesis","type":"{kind}","stream":"{stream}","toxicity":1.0,"attributes":{attributes}}}"#
            ),
        );
        let remove =
            Request { method: "DELETE", path: format!("/proxies/{proxy}/toxics/nemesis"), body: String::new() };
        match self {
            Toxic::Blackhole => (vec![add], vec![enable(false), remove, enable(true)]),
            _ => (vec![add], vec![remove]),
        }
    }
}

/// One request to Toxiproxy's HTTP API.
#[derive(Clone, Debug)]
struct Request {
    method: &'static str,
    path: String,
    body: String,
}

impl Request {
    fn post(path: String, body: String) -> Request {
        Request { method: "POST", path, body }
    }

    /// Sends it (HTTP/1.1 over a plain `TcpStream`, one connection each); a failure is printed,
    /// not fatal: the run's healing resets everything anyway.
    fn send(&self) -> bool {
        let url = env("KAFKA_CLUSTER_TOXIPROXY");
        let address = url.trim_start_matches("http://").trim_end_matches('/');
        match self.exchange(address) {
            Ok(answer) if answer.split(' ').nth(1).is_some_and(|code| code.starts_with('2')) => true,
            Ok(answer) => {
                println!("nemesis: toxiproxy {} {}: {}", self.method, self.path, answer.lines().next().unwrap_or(""));
                false
            }
            Err(error) => {
                println!("nemesis: toxiproxy {} {}: {error}", self.method, self.path);
                false
            }
        }
    }

    /// The request on a fresh connection (`Connection: close`), the whole answer back.
    fn exchange(&self, address: &str) -> std::io::Result<String> {
        let mut stream = std::net::TcpStream::connect(address)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_write_timeout(Some(Duration::from_secs(10)))?;
        let head = format!(
            "{} {} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.method,
            self.path,
            self.body.len()
        );
        write!(stream, "{head}Connection: close\r\n\r\n{}", self.body)?;
        let mut answer = String::new();
        std::io::Read::read_to_string(&mut stream, &mut answer)?;
        Ok(answer)
    }
}

/// Whether the cluster's client connections pass Toxiproxy (`--toxiproxy`): only then does the
/// schedule draw network faults.
fn network_faults() -> bool {
    std::env::var("KAFKA_CLUSTER_TOXIPROXY").is_ok_and(|url| !url.is_empty())
}

/// Starts a network fault; returns the requests that heal it.
fn net_fault(broker: u32, lanes: Lanes, toxic: Toxic) -> Vec<Request> {
    let mut heal = Vec::new();
    for proxy in lanes.proxies(broker) {
        let (start, undo) = toxic.requests(&proxy);
        for request in &start {
            request.send();
        }
        heal.extend(undo);
    }
    heal
}

/// Every proxy enabled, every toxic removed (Toxiproxy's reset). Run after the heals due, so no
/// blackhole is left to remove this way (see [`Toxic::Blackhole`]).
fn net_heal_all() {
    Request::post("/reset".to_owned(), String::new()).send();
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn secs(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from * 1000 + self.below((to - from) * 1000))
    }
}

/// Faults at random times over `length`, one every 5–12 s; at most one broker faulted at a time
/// (so the in-sync replicas stay at `min.insync.replicas`), each broker fault long enough for
/// the controller to fence the broker (9 s) in half the cases. With `network` (Toxiproxy's
/// proxies), network faults too, on one broker at a time like the others; with `bridge`, the
/// bridge's replicas among the replica faults. With neither, a seed draws the schedule it drew
/// before both existed.
fn schedule(seed: u64, length: Duration, network: bool, bridge: bool) -> Vec<(Duration, Fault)> {
    let mut rng = Rng(seed.max(1));
    let mut at = Duration::from_secs(5);
    let mut brokers_free = Duration::ZERO;
    let mut faults = Vec::new();
    while at < length {
        let stage = match rng.below(if bridge { 3 } else { 2 }) {
            0 => Stage::Counter,
            1 => Stage::Extractor,
            _ => Stage::Bridge,
        };
        let replica = rng.below(REPLICAS as u64) as usize % stage.replicas();
        let broker = 1 + rng.below(3) as u32;
        let fault = match rng.below(if network { 14 } else { 10 }) {
            0..=1 if at >= brokers_free => {
                let down = rng.secs(3, 20);
                brokers_free = at + down + Duration::from_secs(10);
                Fault::KillBroker { broker, down }
            }
            2 if at >= brokers_free => {
                // Down past its fencing, so that the restarted replicas' reads meet it.
                let down = rng.secs(12, 20);
                brokers_free = at + down + Duration::from_secs(10);
                Fault::Failover { broker, down, stage, after: rng.secs(2, 7) }
            }
            3..=4 if at >= brokers_free => {
                let paused = rng.secs(3, 20);
                brokers_free = at + paused + Duration::from_secs(10);
                Fault::PauseBroker { broker, paused }
            }
            5 => Fault::ElectLeaders,
            6..=7 => Fault::KillReplica { stage, replica, down: rng.secs(0, 5) },
            8 => Fault::StopReplica { stage, replica },
            10..=13 if at >= brokers_free => {
                let lanes = match rng.below(3) {
                    0 => Lanes::All,
                    _ => Lanes::Stage(stage),
                };
                let (toxic, lasting) = Toxic::draw(&mut rng);
                brokers_free = at + lasting + Duration::from_secs(5);
                Fault::Net { broker, lanes, toxic, lasting }
            }
            10..=13 => Fault::KillReplica { stage, replica, down: rng.secs(0, 5) },
            _ => Fault::Rolling { stage },
        };
        faults.push((at, fault));
        at += rng.secs(5, 12);
    }
    faults
}

// ---------------------------------------------------------------------------------------------
// The processes.

/// A cluster command run in the background (a broker's start waits until it answers, an
/// election can wait out a paused broker): the schedule does not wait for it.
fn cluster_spawn(args: &[&str]) -> Option<Child> {
    let command = env("KAFKA_CLUSTER_COMMAND");
    match Command::new(&command).args(args).stdout(Stdio::null()).spawn() {
        Ok(child) => Some(child),
        Err(error) => {
            eprintln!("nemesis: {command} {args:?}: {error}");
            None
        }
    }
}

fn cluster(args: &[&str]) {
    let command = env("KAFKA_CLUSTER_COMMAND");
    match Command::new(&command).args(args).stdout(Stdio::null()).status() {
        Ok(status) if status.success() => {}
        other => eprintln!("nemesis: {command} {args:?}: {other:?}"),
    }
}

struct Replica {
    role: &'static str,
    client: String,
    child: Option<Child>,
    log: PathBuf,
    /// A restart pending at this time (a killed replica stays down a while).
    restart_at: Option<Instant>,
    /// When it was asked to stop cleanly (SIGTERM); restarted once it has.
    stopping: Option<Instant>,
}

struct Fleet {
    prefix: String,
    dir: PathBuf,
    replicas: BTreeMap<(Stage, usize), Replica>,
    /// Replicas that ended on their own, with their last words.
    failures: Vec<String>,
    /// Replicas that crashed as LIFE-23 wants them to (a fence, a lost membership), by reason.
    crashes: BTreeMap<String, usize>,
    /// Clean stops that ended, and the longest of them (SIGTERM to exit).
    stops: usize,
    longest_stop: Duration,
}

/// Why a replica's end, by its last words, is LIFE-23's "let it crash" (a fence, a failed
/// transaction or a lost group membership ends `run()`; the restart fences the old producers
/// and restores), if it is. Every other end is a violation: a fatal or unclassified error, a
/// read that gave up (its retry budget outlasts every fault here), a stage-contract error.
fn let_it_crash(words: &str) -> Option<&'static str> {
    if words.contains("REPLICA FAILED kind=Fenced ") {
        Some("fenced")
    } else if words.contains("REPLICA FAILED kind=Abortable ") {
        // A transaction that must abort (a produce or commit failed during a failover).
        Some("transaction failed")
    } else if words.contains("code=25:") || words.contains("code=22:") {
        // UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION: the group moved on without this member.
        Some("membership lost")
    } else {
        None
    }
}

impl Fleet {
    fn spawn(&mut self, key: (Stage, usize)) {
        let replica = self.replicas.get_mut(&key).expect("a replica");
        let mut log = std::fs::OpenOptions::new().create(true).append(true).open(&replica.log).expect("log file");
        // Each start's lines follow a marker: its last words are read after the last one.
        let _ = writeln!(log, "{START_MARKER}");
        let child = Command::new(std::env::current_exe().expect("own path"))
            .args([replica.role, &self.prefix, &replica.client])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start a replica");
        replica.child = Some(child);
        replica.restart_at = None;
    }

    fn signal(&mut self, key: (Stage, usize), signal: &str) {
        if let Some(child) = self.replicas.get_mut(&key).and_then(|r| r.child.as_mut()) {
            let _ = Command::new("kill").args([signal, &child.id().to_string()]).status();
        }
    }

    /// SIGKILL; restarted after `down`.
    fn kill(&mut self, key: (Stage, usize), down: Duration) {
        self.signal(key, "-KILL");
        let replica = self.replicas.get_mut(&key).expect("a replica");
        if let Some(mut child) = replica.child.take() {
            let _ = child.wait();
        }
        replica.restart_at = Some(Instant::now() + down);
    }

    /// SIGTERM: a clean stop, then a restart at once ([`Fleet::tend`] sees it through). A
    /// replica that has not yet said [`READY`] (just restarted) is waited for, up to
    /// [`READY_MAX`] from now; one that never says it is a failure, and is not signalled.
    fn stop(&mut self, key: (Stage, usize)) {
        let replica = self.replicas.get_mut(&key).expect("a replica");
        if replica.child.is_none() || replica.stopping.is_some() {
            return;
        }
        let deadline = Instant::now() + READY_MAX;
        while !is_ready(&replica.log) {
            if replica.child.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_some()) {
                // Ended before it was ready: `tend` reads its last words.
                return;
            }
            if Instant::now() >= deadline {
                let failure = format!("{} did not install its SIGTERM handler within {READY_MAX:?}", replica.client);
                self.failures.push(failure);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        replica.stopping = Some(Instant::now());
        self.signal(key, "-TERM");
    }

    /// Restarts the replicas due, sees clean stops through (killed past [`STOP_MAX`]), and
    /// records the replicas that ended on their own or did not stop cleanly.
    ///
    /// Pins: LIFE-21 (a clean stop, SIGTERM to `run_until`'s end, ends within `STOP_MAX` whatever the
    /// brokers do, and with no error but the let-it-crash ends the fleet tolerates).
    fn tend(&mut self) {
        let keys: Vec<(Stage, usize)> = self.replicas.keys().copied().collect();
        for key in keys {
            let replica = self.replicas.get_mut(&key).expect("a replica");
            if let Some(child) = replica.child.as_mut() {
                let exited = child.try_wait().ok().flatten();
                let mut slow = None;
                if let (Some(_), Some(since)) = (exited, replica.stopping) {
                    self.stops += 1;
                    let took = stopped_in(&replica.log).unwrap_or_else(|| since.elapsed());
                    self.longest_stop = self.longest_stop.max(took);
                    if took > STOP_MAX {
                        slow = Some(format!("{} took {took:?} to stop (allowed: {STOP_MAX:?})", replica.client));
                    }
                }
                let failure = match (exited, replica.stopping) {
                    (None, Some(since)) if since.elapsed() > STOP_MAX => {
                        // Why it hangs, before the kill: every thread's stack, into its log.
                        dump_stacks(child.id(), &replica.log);
                        let _ = child.kill();
                        let _ = child.wait();
                        match stopped_in(&replica.log) {
                            // `run_until` ended in time; the process then did not exit. Not the
                            // engine's stop (its budget held), but counted and shown.
                            Some(took) => {
                                println!(
                                    "nemesis: {} stopped in {took:?} but its process had not exited after {STOP_MAX:?}",
                                    replica.client
                                );
                                *self.crashes.entry("exit hung after a clean stop".to_owned()).or_default() += 1;
                                Some(String::new())
                            }
                            None => Some(format!("{} did not stop within {STOP_MAX:?} of SIGTERM", replica.client)),
                        }
                    }
                    (None, _) => None,
                    (Some(status), Some(_)) if status.success() => Some(slow.unwrap_or_default()),
                    // A stop's last commit can meet a fence too: while it waited for a
                    // coordinator on a broker that was down, the group moved its tasks on and
                    // their new owner fenced it (LIFE-23 again; nothing it wrote commits).
                    (Some(status), stopping) => {
                        let words = last_words(&replica.log);
                        if let Some(reason) = let_it_crash(&words) {
                            let reason =
                                if stopping.is_some() { format!("{reason} while stopping") } else { reason.to_owned() };
                            *self.crashes.entry(reason).or_default() += 1;
                            Some(String::new())
                        } else if stopping.is_some() {
                            Some(format!("{} stopped with {status}: {words}", replica.client))
                        } else {
                            Some(format!("{} ended on its own ({status}): {words}", replica.client))
                        }
                    }
                };
                if let Some(failure) = failure {
                    if !failure.is_empty() {
                        self.failures.push(failure);
                    }
                    replica.child = None;
                    replica.stopping = None;
                    replica.restart_at = Some(Instant::now());
                }
            }
            if replica.restart_at.is_some_and(|at| Instant::now() >= at) {
                self.spawn(key);
            }
        }
    }

    fn shutdown(&mut self) {
        let keys: Vec<(Stage, usize)> = self.replicas.keys().copied().collect();
        for key in &keys {
            self.signal(*key, "-KILL");
        }
        for replica in self.replicas.values_mut() {
            if let Some(mut child) = replica.child.take() {
                let _ = child.wait();
            }
        }
    }
}

/// Appends every thread's stack of process `pid` to `log`, through gdb if the machine has it
/// (a replica that does not stop: which call holds its threads). Bounded to 60 s.
fn dump_stacks(pid: u32, log: &Path) {
    let Ok(mut file) = std::fs::OpenOptions::new().append(true).open(log) else { return };
    // First the signal state of the process and of each thread (pending, blocked, caught): a
    // replica that never logged its SIGTERM shows whether the signal is pending and where.
    let signals = |status: &str| -> String {
        std::fs::read_to_string(status)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("Name:") || l.starts_with("Sig") || l.starts_with("ShdPnd"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(file, "--- signal state of process {pid}: {}", signals(&format!("/proc/{pid}/status")));
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let _ = writeln!(
                file,
                "--- thread {}: {}",
                task.file_name().to_string_lossy(),
                signals(&format!("{}/status", task.path().display()))
            );
        }
    }
    let Ok(err) = file.try_clone() else { return };
    let spawned = Command::new("timeout")
        .args(["60", "gdb", "-p", &pid.to_string(), "-batch", "-ex", "thread apply all bt 40"])
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .status();
    match spawned {
        Ok(status) if status.success() => println!("nemesis: the threads of process {pid} are in {}", log.display()),
        Ok(status) => println!("nemesis: no stacks of process {pid} (gdb: {status})"),
        Err(e) => println!("nemesis: no stacks of process {pid} ({e})"),
    }
}

/// Whether the replica's current start has said [`READY`].
fn is_ready(log: &Path) -> bool {
    this_start(log).is_some_and(|text| text.lines().any(|l| l == READY))
}

/// What the replica's log holds since its current start (the last [`START_MARKER`]); `None`
/// when the log cannot be read.
fn this_start(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    Some(text.rsplit(START_MARKER).next().unwrap_or_default().to_owned())
}

/// How long the last stop took, as the replica measured it (SIGTERM to `run_until`'s end).
fn stopped_in(log: &Path) -> Option<Duration> {
    let last = this_start(log)?;
    let ms = last.lines().rev().find_map(|l| l.strip_prefix(STOPPED_IN))?;
    ms.trim().parse().ok().map(Duration::from_millis)
}

/// The line a failed replica printed about its end (else its last line).
fn last_words(log: &Path) -> String {
    let Some(text) = this_start(log) else { return "(no log)".into() };
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    lines
        .iter()
        .rev()
        .find(|l| l.starts_with("REPLICA FAILED"))
        .or(lines.last())
        .map(|l| (*l).to_owned())
        .unwrap_or_else(|| "(empty log)".into())
}

// ---------------------------------------------------------------------------------------------
// The checker: librdkafka directly.

fn rd_consumer(isolation: &str, group: Option<&str>) -> BaseConsumer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", checker_bootstrap())
        .set("isolation.level", isolation)
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("group.id", group.unwrap_or("nemesis-checker"));
    config.create().expect("a checker consumer")
}

/// `read` retried for up to a minute: the checker runs right after the brokers healed, when a
/// partition's leadership may still be moving (NotLeaderForPartition, a broker still loading).
/// Its reads see through a failover as the engine's own do (issue 40); only a lasting error fails.
fn retrying<T>(what: &str, mut read: impl FnMut() -> rdkafka::error::KafkaResult<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match read() {
            Ok(value) => return value,
            Err(error) if Instant::now() < deadline => {
                eprintln!("nemesis checker: {what}: {error}; retrying");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(error) => panic!("nemesis checker: {what} still failing after 60 s: {error}"),
        }
    }
}

/// Every committed record of `topic`: (partition, offset, key, value, timestamp in ms).
fn read_committed(topic: &str) -> Vec<(i32, i64, String, Vec<u8>, i64)> {
    let consumer = rd_consumer("read_committed", None);
    let timeout = Duration::from_secs(30);
    let partitions =
        retrying("metadata", || consumer.fetch_metadata(Some(topic), timeout)).topics()[0].partitions().len();
    let mut ends = BTreeMap::new();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions as i32 {
        let (_, end) = retrying("the stable end", || consumer.fetch_watermarks(topic, p, timeout));
        ends.insert(p, end);
        tpl.add_partition_offset(topic, p, Offset::Beginning).expect("partition");
    }
    consumer.assign(&tpl).expect("assign");
    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    // The position, not the last record's offset: a transaction's marker is never delivered.
    let position = |p: i32| {
        let offset = consumer.position().ok().and_then(|t| t.find_partition(topic, p).map(|e| e.offset()));
        match offset {
            Some(Offset::Offset(offset)) => offset,
            _ => 0,
        }
    };
    while ends.iter().any(|(p, end)| position(*p) < *end) {
        assert!(Instant::now() < deadline, "{topic}: not read to its end within 120 s");
        let Some(message) = consumer.poll(Duration::from_millis(200)) else { continue };
        let message = match message {
            Ok(message) => message,
            // A fetch error while a leader moves: librdkafka refetches on its own.
            Err(error) => {
                assert!(Instant::now() < deadline, "{topic}: {error}");
                continue;
            }
        };
        let key = String::from_utf8_lossy(message.key().unwrap_or_default()).into_owned();
        let at = message.timestamp().to_millis().unwrap_or(0);
        records.push((message.partition(), message.offset(), key, message.payload().unwrap_or_default().to_vec(), at));
    }
    records
}

/// Partitions whose read_committed end (the last stable offset) is below the high watermark:
/// a transaction left open.
fn open_transactions(topic: &str) -> Vec<String> {
    let committed = rd_consumer("read_committed", None);
    let uncommitted = rd_consumer("read_uncommitted", None);
    let timeout = Duration::from_secs(30);
    let partitions =
        retrying("metadata", || committed.fetch_metadata(Some(topic), timeout)).topics()[0].partitions().len();
    let mut open = Vec::new();
    for p in 0..partitions as i32 {
        // A transaction the coordinator is still deciding gets a few seconds.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (_, stable) = retrying("the stable end", || committed.fetch_watermarks(topic, p, timeout));
            let (_, high) = retrying("the high watermark", || uncommitted.fetch_watermarks(topic, p, timeout));
            if stable == high {
                break;
            }
            if Instant::now() >= deadline {
                open.push(format!("{topic}/{p}: last stable offset {stable} < high watermark {high}"));
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    open
}

/// The longest stretch between two consecutive records (by timestamp) of `records`: how long
/// a stage produced nothing at its worst.
fn longest_gap(records: &[(i32, i64, String, Vec<u8>, i64)]) -> Duration {
    let mut stamps: Vec<i64> = records.iter().map(|r| r.4).collect();
    stamps.sort_unstable();
    let gap = stamps.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    Duration::from_millis(gap.max(0) as u64)
}

fn decode(value: &[u8]) -> Event {
    Event::wrap(flechtwerk::wire::decode_value(Some(value)).expect("json"))
}

// ---------------------------------------------------------------------------------------------
// The nemesis.

async fn setup(n: &Names, feed_items: i64) {
    let kafka = kafka();
    let admin = kafka.admin().expect("admin");
    for (topic, partitions, compact) in [
        (&n.input, PARTITIONS, false),
        (&n.output, PARTITIONS, false),
        (&n.configs, 3, true),
        (&n.feeds, PARTITIONS, true),
        (&n.items, PARTITIONS, false),
    ] {
        let mut spec = NewTopic::new(topic.as_str(), partitions);
        if compact {
            spec = spec.compacted();
        }
        admin.create_topic(&spec).await.expect("create a topic");
    }
    let producer = kafka.producer(ProducerConfig::idempotent("nemesis-setup")).expect("producer");
    for k in 0..KEYS {
        let value = format!(r#"{{"label":"config of key-{k}"}}"#);
        producer
            .send(ProducerRecord::new(&n.configs, format!("key-{k}"), value))
            .await
            .expect("send")
            .await
            .expect("delivered");
    }
    let since_ms = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis();
    for f in 0..FEEDS {
        let value = format!(r#"{{"items":{feed_items},"since_ms":{since_ms}}}"#);
        producer
            .send(ProducerRecord::new(&n.feeds, format!("feed-{f:02}"), value))
            .await
            .expect("send")
            .await
            .expect("delivered");
    }
    producer.close().await;
}

/// Feeds the counter's input at `INPUT_RATE` until `until`; a failed send is retried with a
/// new producer (the checker counts what the input topic holds, not what was sent).
async fn feed(input: String, until: Instant) -> u64 {
    let kafka = kafka();
    let mut producer = kafka.producer(ProducerConfig::idempotent("nemesis-feeder")).expect("producer");
    let mut sent = 0u64;
    let started = Instant::now();
    while Instant::now() < until {
        let due = started.elapsed().as_millis() as u64 * INPUT_RATE / 1000;
        // Not past `until` either: a feeder behind its rate (each send awaits its delivery)
        // would otherwise go on feeding for minutes after the faults.
        while sent < due && Instant::now() < until {
            let record =
                ProducerRecord::new(&input, format!("key-{}", sent % KEYS as u64), format!(r#"{{"i":{sent}}}"#));
            let delivered = match producer.send(record).await {
                Ok(delivery) => delivery.await.map(|_| ()),
                Err(error) => Err(error),
            };
            match delivered {
                Ok(()) => sent += 1,
                Err(error) => {
                    eprintln!("nemesis: feeding: {error} (retrying)");
                    producer.close().await;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    producer = kafka.producer(ProducerConfig::idempotent("nemesis-feeder")).expect("producer");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    producer.close().await;
    sent
}

fn nemesis() {
    let seed: u64 = std::env::var("NEMESIS_SEED")
        .ok()
        .map(|s| s.parse().expect("NEMESIS_SEED: a number"))
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos() as u64 % 1_000_000);
    let seconds: u64 =
        std::env::var("NEMESIS_SECONDS").ok().map(|s| s.parse().expect("NEMESIS_SECONDS")).unwrap_or(180);
    let length = Duration::from_secs(seconds);
    let network = network_faults();
    let bridge = bridge_on();
    let faults = schedule(seed, length, network, bridge);
    println!(
        "nemesis: NEMESIS_SEED={seed} NEMESIS_SECONDS={seconds}: {} faults ({}; {})",
        faults.len(),
        if network { "with network faults: the clients pass Toxiproxy" } else { "no network faults: no Toxiproxy" },
        if bridge { "with the MQTT bridge" } else { "no MQTT bridge: no MQTT_BROKER" }
    );
    for (at, fault) in &faults {
        println!("  {:>6.1} s  {fault:?}", at.as_secs_f64());
    }

    let prefix =
        format!("nemesis-{seed}-{:x}", SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_millis());
    let n = names(&prefix);
    let feed_items = seconds as i64 * FEED_RATE;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(setup(&n, feed_items));
    if bridge {
        runtime.block_on(bridge_setup(&prefix));
    }

    let dir = std::env::temp_dir().join(&prefix);
    std::fs::create_dir_all(&dir).expect("log dir");
    let mut fleet = Fleet {
        prefix: prefix.clone(),
        dir: dir.clone(),
        replicas: BTreeMap::new(),
        failures: Vec::new(),
        crashes: BTreeMap::new(),
        stops: 0,
        longest_stop: Duration::ZERO,
    };
    let stages: &[Stage] =
        if bridge { &[Stage::Counter, Stage::Extractor, Stage::Bridge] } else { &[Stage::Counter, Stage::Extractor] };
    for &stage in stages {
        for r in 0..stage.replicas() {
            let (role, name) = match stage {
                Stage::Counter => ("--counter", "counter"),
                Stage::Extractor => ("--extractor", "extractor"),
                Stage::Bridge => ("--bridge", "bridge"),
            };
            let client = format!("{name}-{r}");
            let log = fleet.dir.join(format!("{client}.log"));
            fleet
                .replicas
                .insert((stage, r), Replica { role, client, child: None, log, restart_at: None, stopping: None });
            fleet.spawn((stage, r));
        }
    }

    let started = Instant::now();
    let feeder = runtime.spawn(feed(n.input.clone(), started + length));
    let publisher = bridge.then(|| {
        let prefix = prefix.clone();
        std::thread::spawn(move || publish_readings(&prefix, started + length))
    });
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    // Actions due later: a broker's heal, the next replica of a rolling restart.
    let mut timed: Vec<(Instant, Action)> = Vec::new();
    // Cluster commands still running; no broker fault fires while one is.
    let mut commands: Vec<Child> = Vec::new();
    let mut brokers_faulted = 0usize;
    for (at, fault) in faults {
        // Fire the fault at its time, tending the fleet and the timed actions meanwhile.
        loop {
            let now = Instant::now();
            commands.retain_mut(|c| c.try_wait().ok().flatten().is_none());
            let (due, later): (Vec<_>, Vec<_>) = timed.drain(..).partition(|(when, _)| *when <= now);
            timed = later;
            for (_, action) in due {
                match action {
                    Action::Cluster(args) => {
                        let args: Vec<&str> = args.iter().map(String::as_str).collect();
                        commands.extend(cluster_spawn(&args));
                        brokers_faulted = brokers_faulted.saturating_sub(1);
                    }
                    Action::Stop(key) => fleet.stop(key),
                    Action::Restart(stage) => {
                        for r in 0..stage.replicas() {
                            fleet.kill((stage, r), Duration::ZERO);
                        }
                    }
                    Action::Heal(requests) => {
                        for request in &requests {
                            request.send();
                        }
                        brokers_faulted = brokers_faulted.saturating_sub(1);
                    }
                }
            }
            fleet.tend();
            if started + at <= now || started.elapsed() >= length {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if started.elapsed() >= length {
            break;
        }
        let now = Instant::now();
        let broker_fault = matches!(
            fault,
            Fault::KillBroker { .. } | Fault::PauseBroker { .. } | Fault::Failover { .. } | Fault::Net { .. }
        );
        if broker_fault && (brokers_faulted > 0 || !commands.is_empty()) {
            println!(
                "nemesis: {:>6.1} s  skipped (a broker is still faulted or starting): {fault:?}",
                at.as_secs_f64()
            );
            *counts.entry("skipped").or_default() += 1;
            continue;
        }
        println!("nemesis: {:>6.1} s  {fault:?}", started.elapsed().as_secs_f64());
        let name = match fault {
            Fault::KillBroker { broker, down } => {
                cluster(&["broker", &broker.to_string(), "kill"]);
                brokers_faulted += 1;
                timed.push((now + down, Action::Cluster(vec!["broker".into(), broker.to_string(), "start".into()])));
                "broker killed"
            }
            Fault::Failover { broker, down, stage, after } => {
                cluster(&["broker", &broker.to_string(), "kill"]);
                brokers_faulted += 1;
                timed.push((now + down, Action::Cluster(vec!["broker".into(), broker.to_string(), "start".into()])));
                timed.push((now + after, Action::Restart(stage)));
                "broker killed, a stage restarted in its failover"
            }
            Fault::PauseBroker { broker, paused } => {
                cluster(&["broker", &broker.to_string(), "pause"]);
                brokers_faulted += 1;
                timed.push((now + paused, Action::Cluster(vec!["broker".into(), broker.to_string(), "resume".into()])));
                "broker paused"
            }
            Fault::ElectLeaders => {
                commands.extend(cluster_spawn(&["elect-leaders"]));
                "preferred leaders elected"
            }
            Fault::KillReplica { stage, replica, down } => {
                fleet.kill((stage, replica), down);
                "replica killed"
            }
            Fault::StopReplica { stage, replica } => {
                fleet.stop((stage, replica));
                "replica stopped"
            }
            Fault::Rolling { stage } => {
                fleet.stop((stage, 0));
                for r in 1..stage.replicas() {
                    timed.push((now + ROLLING_STEP * r as u32, Action::Stop((stage, r))));
                }
                "rolling restart"
            }
            Fault::Net { broker, lanes, toxic, lasting } => {
                brokers_faulted += 1;
                timed.push((now + lasting, Action::Heal(net_fault(broker, lanes, toxic))));
                toxic.name()
            }
        };
        *counts.entry(name).or_default() += 1;
    }
    // The faults are over: the heals still due happen now (a restart due is moot).
    for (_, action) in timed.drain(..) {
        match action {
            Action::Cluster(args) => {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                cluster(&args);
            }
            Action::Heal(requests) => {
                for request in &requests {
                    request.send();
                }
            }
            _ => {}
        }
    }
    if network {
        net_heal_all();
    }
    for mut command in commands {
        let _ = command.wait();
    }
    let inputs = runtime.block_on(feeder).expect("the feeder");
    let published = publisher.map(|p| p.join().expect("the MQTT publisher")).unwrap_or_default();
    println!(
        "nemesis: faults over after {:.0} s ({counts:?}); {inputs} inputs fed; healing",
        started.elapsed().as_secs_f64()
    );
    for broker in 1..=3 {
        cluster(&["broker", &broker.to_string(), "resume"]);
        if Command::new(env("KAFKA_CLUSTER_COMMAND"))
            .args(["broker", &broker.to_string(), "status"])
            .status()
            .map(|s| !s.success())
            .unwrap_or(true)
        {
            cluster(&["broker", &broker.to_string(), "start"]);
        }
    }

    // The stages finish: every input counted, every feed extracted.
    let healed = Instant::now();
    let expected_items = FEEDS * feed_items as usize;
    let last = loop {
        fleet.tend();
        let outputs = read_committed(&n.output).len();
        let items = read_committed(&n.items).len();
        let relayed = !bridge || bridge_missing(&prefix, &published.acked) == 0;
        if (outputs >= inputs as usize && items >= expected_items && relayed) || healed.elapsed() > FINISH_MAX {
            break (outputs, items);
        }
        std::thread::sleep(Duration::from_secs(2));
    };
    println!(
        "nemesis: {} of {inputs} counts and {} of {expected_items} items out {:.0} s after healing",
        last.0,
        last.1,
        healed.elapsed().as_secs_f64()
    );
    fleet.tend();
    fleet.shutdown();
    println!("nemesis: replicas that crashed by design (LIFE-23), restarted: {:?}", fleet.crashes);
    println!(
        "nemesis: {} clean stops (SIGTERM), the longest took {:.1} s (allowed: {STOP_MAX:?})",
        fleet.stops,
        fleet.longest_stop.as_secs_f64()
    );

    let mut violations: Vec<String> = fleet.failures.clone();
    violations.extend(check_counter(&n));
    violations.extend(check_extractor(&n, feed_items));
    for topic in
        [&n.output, &n.items, &format!("{}-changelog", n.counter_app), &format!("{}-changelog", n.extractor_app)]
    {
        violations.extend(open_transactions(topic));
    }
    if bridge {
        violations.extend(check_bridge(&prefix, &published));
    }
    if violations.is_empty() {
        println!("nemesis: NEMESIS_SEED={seed}: no violation (replica logs in {})", dir.display());
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        for violation in &violations {
            println!("VIOLATION: {violation}");
        }
        println!("nemesis: NEMESIS_SEED={seed}: {} violations (replica logs in {})", violations.len(), dir.display());
        std::process::exit(1);
    }
}

/// The counter's checks: per key the counts are exactly 1..n, every output joined with its
/// config, the group's offsets at the end of the input.
///
/// Pins: TRX-10 (one transaction per task holds outputs, state and offsets: counts exactly 1..n
/// per key across every fault), TRX-11 (the group's committed offsets end exactly at the input's
/// end), TRX-31 (restarted and handed-over tasks restore their state after the fence), CFG-10 and
/// CFG-24 (the config store is read in full before the group subscription: every output joined
/// with its key's config, written before the replicas started).
fn check_counter(n: &Names) -> Vec<String> {
    let mut per_key: BTreeMap<String, i64> = BTreeMap::new();
    let inputs = read_committed(&n.input);
    let mut ends: BTreeMap<i32, i64> = BTreeMap::new();
    for (partition, offset, key, _, _) in &inputs {
        *per_key.entry(key.clone()).or_default() += 1;
        let end = ends.entry(*partition).or_default();
        *end = (*end).max(offset + 1);
    }
    let read = read_committed(&n.output);
    let gap = longest_gap(&read);
    let outputs: Vec<flechtwerk::wire::RawRecord> = read
        .into_iter()
        .map(|(partition, offset, key, value, _)| flechtwerk::wire::RawRecord {
            topic: n.output.as_str().into(),
            partition,
            offset,
            timestamp_ms: None,
            key: Some(key.into_bytes().into()),
            value: Some(value.into()),
            headers: Vec::new(),
        })
        .collect();
    let (mut violations, _) = check_counts(&per_key, &outputs);
    violations.truncate(20);
    let unjoined = outputs
        .iter()
        .filter(|r| decode(r.value.as_deref().unwrap_or_default()).get(&LABEL).ok().flatten().is_none())
        .count();
    if unjoined > 0 {
        violations.push(format!("{unjoined} outputs without their key's config"));
    }
    // The group's offsets at the end of the input (the last batch committed them).
    let consumer = rd_consumer("read_committed", Some(&n.counter_app));
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS as i32 {
        tpl.add_partition(&n.input, p);
    }
    let committed = retrying("committed offsets", || consumer.committed_offsets(tpl.clone(), Duration::from_secs(30)));
    for element in committed.elements() {
        let end = ends.get(&element.partition()).copied().unwrap_or(0);
        let at = match element.offset() {
            Offset::Offset(o) => o,
            _ => 0,
        };
        if at != end {
            violations.push(format!(
                "{}/{}: the group's offset {at} is not the input's end {end}",
                n.input,
                element.partition()
            ));
        }
    }
    println!(
        "nemesis: counter: {} inputs over {} keys, {} outputs; longest stretch without an output {:.1} s",
        inputs.len(),
        per_key.len(),
        outputs.len(),
        gap.as_secs_f64()
    );
    violations
}

/// The extractor's checks: per feed items 1..N exactly once, in order; the cursors in the
/// changelog never regress.
///
/// Pins: EXT-10 (a page's items and its cursor commit together: every feed's items exactly once,
/// in order, across every fault), EXT-25 (per feed the cursors in the changelog never regress).
fn check_extractor(n: &Names, feed_items: i64) -> Vec<String> {
    let mut violations = Vec::new();
    let mut per_feed: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let read = read_committed(&n.items);
    let gap = longest_gap(&read);
    for (_, _, key, value, _) in read {
        per_feed.entry(key).or_default().push(decode(&value).require(&SEQ).expect("seq"));
    }
    let expected: Vec<i64> = (1..=feed_items).collect();
    for f in 0..FEEDS {
        let feed = format!("feed-{f:02}");
        let seqs = per_feed.get(&feed).map(Vec::as_slice).unwrap_or_default();
        if seqs != expected.as_slice() {
            let first_bad = seqs.iter().zip(1..).position(|(s, i)| *s != i).unwrap_or(seqs.len());
            violations.push(format!(
                "{feed}: {} items, not 1..={feed_items} once in order (first difference at index {first_bad}: {:?})",
                seqs.len(),
                seqs.get(first_bad)
            ));
        }
    }
    // Cursors never regress, per state key, in changelog order.
    let mut cursors: BTreeMap<String, i64> = BTreeMap::new();
    for (partition, offset, key, value, _) in read_committed(&format!("{}-changelog", n.extractor_app)) {
        if value.is_empty() {
            continue;
        }
        let cursor = decode(&value).get(&CURSOR).ok().flatten().unwrap_or(0);
        let previous = cursors.insert(key.clone(), cursor).unwrap_or(0);
        if cursor < previous {
            violations.push(format!("{key}: cursor {cursor} after {previous} (changelog {partition}@{offset})"));
        }
    }
    println!(
        "nemesis: extractor: {} items over {} feeds; longest stretch without an item {:.1} s",
        per_feed.values().map(Vec::len).sum::<usize>(),
        per_feed.len(),
        gap.as_secs_f64()
    );
    violations
}

// ---------------------------------------------------------------------------------------------
// The MQTT bridge (with `MQTT_BROKER`, Mosquitto as `scripts/mosquitto` runs it): two replicas of
// an `mqtt_extractor` relaying `nemesis/<run>/readings` (QoS 1, a shared subscription) into
// Kafka, while a publisher sends numbered readings with QoS 1 through `mosquitto_pub`. The
// checker: every reading whose publish Mosquitto acknowledged is in Kafka (read_committed), at
// least once (a replica killed between its Kafka commit and its MQTT acks gets them again: MQ-38);
// a reading acknowledged to Mosquitto before its Kafka commit and then lost with a killed replica
// would be missing.

const BRIDGE_REPLICAS: usize = 2;
/// Readings published per second while the faults run (one `mosquitto_pub` per second).
const READINGS_RATE: i64 = 20;
const DEVICES: i64 = 4;

fn bridge_on() -> bool {
    std::env::var("MQTT_BROKER").is_ok_and(|b| !b.is_empty())
}

fn mqtt_address() -> (String, u16) {
    let address = env("MQTT_BROKER");
    let (host, port) = address.rsplit_once(':').expect("MQTT_BROKER is host:port");
    (host.to_owned(), port.parse().expect("MQTT_BROKER's port"))
}

/// (configs topic, readings topic, MQTT topic of the readings).
fn bridge_names(prefix: &str) -> (String, String, String) {
    (format!("{prefix}-bridge-configs"), format!("{prefix}-readings"), format!("nemesis/{prefix}/readings"))
}

fn bridge_app(builder: flechtwerk::FlechtwerkBuilder, prefix: &str) -> Result<Flechtwerk, flechtwerk::Error> {
    use flechtwerk::mqtt::rumqttc::RumqttcBroker;
    use flechtwerk::stage::{mqtt_extractor, MqttBrokerConfig};
    let (configs, readings, _) = bridge_names(prefix);
    let stage = mqtt_extractor([configs.as_str()]).drain_limit(100).relay(move |_config, _topic, payload| {
        let seq = payload.require(&SEQ)?;
        Ok(Some(Message::new(readings.as_str(), format!("dev-{}", seq % DEVICES), Event::new().with(&SEQ, seq)?)))
    });
    let (host, port) = mqtt_address();
    let broker = RumqttcBroker::new(host, port).keep_alive(Duration::from_secs(5));
    builder
        .application_id(format!("{prefix}-bridge"))
        .poll_interval(Duration::from_millis(200))
        .mqtt(MqttBrokerConfig::new(Arc::new(broker)).qos(flechtwerk::mqtt::QoS::AtLeastOnce))
        .build(stage)
}

async fn bridge_setup(prefix: &str) {
    let (configs, readings, mqtt_topic) = bridge_names(prefix);
    let kafka = kafka();
    let admin = kafka.admin().expect("admin");
    admin.create_topic(&NewTopic::new(configs.as_str(), 1).compacted()).await.expect("create a topic");
    admin.create_topic(&NewTopic::new(readings.as_str(), 3)).await.expect("create a topic");
    let producer = kafka.producer(ProducerConfig::idempotent("nemesis-bridge-setup")).expect("producer");
    let value = format!(r#"{{"topic":"{mqtt_topic}"}}"#);
    producer.send(ProducerRecord::new(&configs, "readings", value)).await.expect("send").await.expect("delivered");
    producer.close().await;
}

/// What the publisher sent: the readings Mosquitto acknowledged (a `mosquitto_pub` that exited
/// 0), and those of batches that failed (maybe delivered, maybe not: not checked).
#[derive(Default)]
struct Published {
    acked: std::collections::BTreeSet<i64>,
    failed: usize,
}

/// One `mosquitto_pub -l` (QoS 1, MQTT 5) for `payloads`; true when it exited 0 (every PUBACK).
fn mosquitto_pub(topic: &str, payloads: &[String]) -> bool {
    let (host, port) = mqtt_address();
    let Ok(mut child) = Command::new("mosquitto_pub")
        .args(["-h", &host, "-p", &port.to_string(), "-V", "mqttv5", "-q", "1", "-t", topic, "-l"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return false;
    };
    if let Some(mut stdin) = child.stdin.take() {
        for payload in payloads {
            let _ = writeln!(stdin, "{payload}");
        }
    }
    child.wait().is_ok_and(|status| status.success())
}

/// Publishes readings until `until`: first a probe until the bridge relays it (a publish to a
/// shared subscription nobody holds yet reaches nobody), then `READINGS_RATE` a second.
fn publish_readings(prefix: &str, until: Instant) -> Published {
    let (_, readings, topic) = bridge_names(prefix);
    let mut published = Published::default();
    let probe_until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < probe_until && read_committed(&readings).is_empty() {
        mosquitto_pub(&topic, &[r#"{"seq":0}"#.to_owned()]);
        std::thread::sleep(Duration::from_millis(500));
    }
    let mut next = 1i64;
    while Instant::now() < until {
        let batch: Vec<i64> = (next..next + READINGS_RATE).collect();
        next += READINGS_RATE;
        let payloads: Vec<String> = batch.iter().map(|seq| format!(r#"{{"seq":{seq}}}"#)).collect();
        if mosquitto_pub(&topic, &payloads) {
            published.acked.extend(batch);
        } else {
            published.failed += batch.len();
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    published
}

/// How many acknowledged readings are not (yet) in Kafka.
fn bridge_missing(prefix: &str, acked: &std::collections::BTreeSet<i64>) -> usize {
    let (_, readings, _) = bridge_names(prefix);
    let seen: std::collections::BTreeSet<i64> =
        read_committed(&readings).iter().filter_map(|r| decode(&r.3).get(&SEQ).ok().flatten()).collect();
    acked.difference(&seen).count()
}

/// The bridge's checks: every reading Mosquitto acknowledged is in Kafka (read_committed), at
/// least once; no transaction left open on the readings topic.
///
/// Pins: MQ-38 (an MQTT message is acknowledged only after the Kafka transaction carrying it
/// committed: across replicas killed, stopped and cut off from brokers, none is lost).
fn check_bridge(prefix: &str, published: &Published) -> Vec<String> {
    let (_, readings, _) = bridge_names(prefix);
    let read = read_committed(&readings);
    let gap = longest_gap(&read);
    let mut copies: BTreeMap<i64, usize> = BTreeMap::new();
    for record in &read {
        if let Some(seq) = decode(&record.3).get(&SEQ).ok().flatten() {
            *copies.entry(seq).or_default() += 1;
        }
    }
    let missing: Vec<i64> = published.acked.iter().filter(|seq| !copies.contains_key(seq)).copied().collect();
    let duplicated = copies.iter().filter(|(seq, n)| **seq > 0 && **n > 1).count();
    println!(
        "nemesis: bridge: {} readings acknowledged by Mosquitto ({} in failed batches, not checked), {} in Kafka, \
         {duplicated} of them more than once (redelivered after a crash), {} missing; longest stretch without a reading {:.1} s",
        published.acked.len(),
        published.failed,
        copies.keys().filter(|seq| **seq > 0).count(),
        missing.len(),
        gap.as_secs_f64()
    );
    let mut violations = Vec::new();
    if !missing.is_empty() {
        violations.push(format!(
            "bridge: {} acknowledged readings not in Kafka (first: {:?})",
            missing.len(),
            &missing[..missing.len().min(10)]
        ));
    }
    violations.extend(open_transactions(&readings));
    violations
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(role @ ("--counter" | "--extractor" | "--bridge")) => replica(role, &args[1], &args[2]),
        // `cargo test` passes the libtest flags (`--quiet`, a filter): the nemesis ignores them.
        _ => nemesis(),
    }
}
