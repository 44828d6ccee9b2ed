//! Scenario `mqtt`: the MQTT → Kafka bridge under chaos, on the simulated MQTT broker
//! (`crate::mqtt`) and the simulated Kafka cluster.
//!
//! Devices publish numbered QoS 1 messages per topic (some of them poison: not JSON, or a
//! payload the relay refuses; some filtered by the relay) while 1–3 bridge replicas run the
//! dispatched loop with shared subscriptions. Faults: the `counter` scenario's Kafka faults and
//! crash-restarts at any point (no scale-up or scale-down: a removed replica's session would keep
//! absorbing its share until it expires, MQ-52, which is the documented handover window, not a
//! bug), plus MQTT faults: dropped connections, broker restarts (sessions kept, restored `$share`
//! subscriptions dead until subscribed again, the broker unreachable for a while), slow acks,
//! and session loss: broker restarts without persistence, a clean start under a replica's
//! client id, outages of a replica's network to the MQTT broker, and in half the seeds a session
//! expiry of seconds that an outage (that one, a pause, a partition, a crash) outlasts. After a
//! lost session the broker has forgotten what it held for it and numbers packet ids from 1
//! again, so an acknowledgement of a packet id received on an earlier connection names another
//! message.
//! A config writer adds, suspends, resumes, re-points and deletes the *churn* configs; the
//! *stable* configs stay as they are for the whole run.
//!
//! Properties:
//! - **an ack only on its message's connection** (MQ-06, MQ-16): the bridge never asks for an
//!   acknowledgement of a message of an earlier connection once it was handed the CONNACK of
//!   the connection it would leave on (after a lost session the packet id names another
//!   message there) — checked at the send;
//! - **no ack before commit**, checked twice: when the bridge hands its client the ack of a
//!   relayed message (the send), and when the broker applies an ack to a message (which, after
//!   a lost session, may not be the message the bridge meant), the Kafka transaction carrying
//!   the message has been decided committed (a commit marker is in the log, or the coordinator
//!   is committing it) — checked at that moment, on the Kafka broker's own state;
//! - **no loss**: every message of a stable topic that the MQTT broker queued for a bridge
//!   session (a live subscription matched it, no queue overflowed) is in Kafka
//!   (`read_committed`) at least once, unless the relay filtered it or it was poison, or it was
//!   lost with its session and the process running now had not received its last send (a lost
//!   session's messages are gone from the broker; one the bridge holds is its to relay);
//! - **duplicates only from redeliveries**: a message is in Kafka at most as often as the broker
//!   delivered it (a redelivery follows a crash or a reconnect); duplicates are counted in the
//!   trace;
//! - **order**: per topic and replica, the first copies in Kafka of the messages the broker
//!   sent once (no redelivery) are in publish order;
//! - **poison never blocks**: every poison message is acknowledged, and counted by the
//!   observer at least once; nothing stays in flight or queued at the broker after quiescence;
//! - **subscriptions converge**: after quiescence each replica's live subscriptions at the
//!   broker equal the shared subscriptions of the active configs' filters, except left-over
//!   subscriptions of a previous process of the same replica (counted in the trace: a restarted
//!   process cannot know them, see docs/concepts/mqtt.md); a filter the current process
//!   subscribed and retired must be gone;
//! - same seed, same trace hash (`--check-determinism`).

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use flechtwerk::attribute::{Attribute, BOOL, INT, STR};
use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
use flechtwerk::mqtt::Publish;
use flechtwerk::observer::{ConfigView, Observer};
use flechtwerk::stage::{mqtt_extractor, MqttBrokerConfig};
use flechtwerk::wire::RawRecord;
use flechtwerk::{Event, Flechtwerk, Message};
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;
use madsim::time::sleep;

use crate::cluster::{Cluster, KafkaClient};
use crate::harness::disk::SimDisk;
use crate::harness::faults::{FaultProfile, FaultSchedule};
use crate::harness::mqtt::{self as bridge, ClientWatch, OwnSubscriptions};
use crate::harness::replicas::{Launch, ReplicaEnv, ReplicaObserver, Replicas};
use crate::harness::truth;
use crate::mqtt::{AckRoute, AckSeen, MqttBroker, ReceiptLog, SendAckHook, SimBrokerConfig};
use crate::runner::{Ctx, Scenario};

/// The scenario's fault kinds.
const FAULTS: &[&str] = &[
    "crash-restart",
    "pause",
    "network-partition",
    "broker-restart",
    "request-chaos",
    "fail-transactions",
    "late-markers",
    "kafka-drop-request",
    "kafka-hold-request",
    "kafka-delay-request",
    "kafka-error",
    "kafka-drop-response",
    "kafka-delay-response",
    "kafka-marker-delay",
    "buggify",
    "mqtt-broker-restart",
    "mqtt-disconnect",
    "broker-crash",
    "broker-pause",
    "broker-isolate",
    "leader-move",
    "lagging-failover",
    "mqtt-slow-ack",
    "mqtt-broker-restart-without-persistence",
    "mqtt-clean-start",
    "mqtt-outage",
    "mqtt-session-expiry",
];

/// `FAULTS` and clean stops, for `mqtt-rolling`.
const FAULTS_ROLLING: [&str; FAULTS.len() + 1] = crate::harness::faults::with_stop_restart(FAULTS);

/// Weight of clean restarts in `mqtt-rolling`: about a fifth of its faults, as in
/// `counter-rolling`.
const STOP_RESTART_WEIGHT: u32 = 8;

/// The scenario.
pub static SCENARIO: Scenario = Scenario {
    name: "mqtt",
    about: "MQTT -> Kafka bridge: ack after commit, no loss, order, poison, subscriptions under MQTT and Kafka faults",
    faults: FAULTS,
    run: |ctx| Box::pin(run(ctx, 0)) as Pin<Box<dyn std::future::Future<Output = ()>>>,
};

/// The same with clean stops and restarts among the faults (rolling deploys): a stopping bridge
/// acknowledges its last committed poll before it leaves the session (MQ-38), and never a
/// message that is not in Kafka.
pub static SCENARIO_ROLLING: Scenario = Scenario {
    name: "mqtt-rolling",
    about: "the mqtt scenario with clean stops and restarts among the faults (rolling deploys: acks at a clean stop)",
    faults: &FAULTS_ROLLING,
    run: |ctx| Box::pin(run(ctx, STOP_RESTART_WEIGHT)) as Pin<Box<dyn std::future::Future<Output = ()>>>,
};

const APP: &str = "bridge";
const CONFIGS: &str = "bridge-configs";
const OUTPUT: &str = "bridge-output";
const QUIESCENCE_MAX: Duration = Duration::from_secs(600);
/// Long enough that no session expires within a run (the seeds that do not draw a short one).
const SESSION_EXPIRY: Duration = Duration::from_secs(7_200);

const SEQ: Attribute<i64> = Attribute::new("seq", &INT);
const VIA: Attribute<String> = Attribute::new("via", &STR);
const POISON: Attribute<bool> = Attribute::new("poison", &BOOL);
const SKIP: Attribute<bool> = Attribute::new("skip", &BOOL);

/// One message a device got the broker to accept.
#[derive(Clone, Debug)]
struct Published {
    number: u64,
    topic: String,
    payload: Bytes,
    kind: Kind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Seq(i64),
    /// Not JSON, or refused by the relay.
    Poison,
    /// Dropped by the relay (`None`).
    Skip,
}

/// What the checks collect while the run goes on.
#[derive(Default)]
struct Journal {
    published: Vec<Published>,
    /// Acks the broker applied: publish numbers.
    acked: BTreeSet<u64>,
    /// Acks the bridges sent (asked their clients to send).
    sent: u64,
    /// (topic, seq) whose transaction was seen decided committed.
    decided: BTreeSet<(String, i64)>,
    violations: Vec<String>,
}

fn stable_topic(topic: &str) -> bool {
    topic.starts_with("dev/s")
}

/// Whether the transaction carrying (topic, seq) in the output is decided committed, on the
/// Kafka broker's own state: a commit marker after it, or its producer's transaction committing.
fn refresh_decided(cluster: &Cluster, replicas: &[String], decided: &mut BTreeSet<(String, i64)>) {
    let ids: Vec<String> = replicas.iter().map(|r| format!("{APP}-{r}")).collect();
    decided.extend(bridge::decided_outputs(cluster, &ids, OUTPUT, identity));
}

fn identity(key: Option<&[u8]>, value: Option<&[u8]>) -> Option<(String, i64)> {
    let topic = String::from_utf8_lossy(key?).into_owned();
    let value = Event::wrap(flechtwerk::wire::decode_value(value).ok()?);
    Some((topic, value.get(&SEQ).ok()??))
}

fn kind_of(payload: &[u8]) -> Kind {
    let Ok(value) = flechtwerk::wire::decode_value(Some(payload)) else { return Kind::Poison };
    let value = Event::wrap(value);
    if value.get(&POISON).ok().flatten() == Some(true) {
        return Kind::Poison;
    }
    if value.get(&SKIP).ok().flatten() == Some(true) {
        return Kind::Skip;
    }
    value.get(&SEQ).ok().flatten().map_or(Kind::Poison, Kind::Seq)
}

/// The ack check (no ack before commit), run by the broker at each applied ack.
fn on_ack(cluster: &Cluster, replicas: &[String], journal: &Mutex<Journal>, ack: &AckSeen) {
    let mut journal = journal.lock().expect("journal lock");
    journal.acked.insert(ack.message.number);
    let Kind::Seq(seq) = kind_of(&ack.message.payload) else { return };
    if !stable_topic(&ack.message.topic) {
        // A churn filter's message may be dropped legitimately (unsubscribed, stale).
        return;
    }
    let id = (ack.message.topic.clone(), seq);
    if journal.decided.contains(&id) {
        return;
    }
    refresh_decided(cluster, replicas, &mut journal.decided);
    if !journal.decided.contains(&id) {
        journal.violations.push(format!(
            "{} acknowledged {} seq {seq} (publish #{}) before the Kafka transaction carrying it committed",
            ack.client_id, ack.message.topic, ack.message.number
        ));
    }
}

/// The ack check at the send: whenever a bridge asks its client to acknowledge a relayed
/// message, the Kafka transaction carrying it is decided committed. An ack sent early but
/// applied late (a slow ack, a partition) passes the check at the broker; not this one.
fn on_send_ack(
    cluster: &Cluster,
    replicas: &[String],
    journal: &Mutex<Journal>,
    client: &str,
    publish: &Publish,
    route: AckRoute,
) {
    let mut journal = journal.lock().expect("journal lock");
    journal.sent += 1;
    if let Some(stale) = bridge::stale_ack(client, publish, route) {
        journal.violations.push(stale);
    }
    let Kind::Seq(seq) = kind_of(&publish.payload) else { return };
    if !stable_topic(&publish.topic) {
        return;
    }
    let id = (publish.topic.clone(), seq);
    if journal.decided.contains(&id) {
        return;
    }
    refresh_decided(cluster, replicas, &mut journal.decided);
    if !journal.decided.contains(&id) {
        journal.violations.push(format!(
            "{client} sent the acknowledgement of {} seq {seq} (packet {} of connection {}) before the Kafka \
             transaction carrying it committed",
            publish.topic, publish.packet_id, publish.connection
        ));
    }
}

/// Per replica, the messages its current process received (replaced at every start of it).
type OwnReceipts = Arc<Mutex<BTreeMap<String, ReceiptLog>>>;

/// A replica's observer: the harness's, plus the MQTT connection count (for the relay's stamp)
/// and the poison count.
struct BridgeObserver {
    inner: ReplicaObserver,
    name: String,
    ctx: Ctx,
    connections: Arc<AtomicU64>,
    poison: Arc<AtomicU64>,
}

impl Observer for BridgeObserver {
    fn config_store_updated(&self, store: &dyn ConfigView) {
        self.inner.config_store_updated(store);
    }

    fn mqtt_connected(&self) {
        self.connections.fetch_add(1, Ordering::SeqCst);
    }

    fn transaction_committed(&self) {
        self.ctx.event(format!("{}: committed", self.name));
    }

    fn mqtt_message_dropped(&self, _topic: &str, reason: &str) {
        if reason == "poison" {
            self.poison.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The config topic's writer: stable configs once; churn configs added, suspended, resumed,
/// re-pointed and deleted over the period.
async fn write_configs(kafka: KafkaClient, ctx: Ctx, stable: u32, churn: u32, writes: usize, period: Duration) {
    let producer = kafka.producer(ProducerConfig::idempotent("config-writer")).expect("producer");
    let gap_max = (period.as_millis() as u64 / writes.max(1) as u64).max(2);
    let mut deliveries = Vec::new();
    let record = |key: String, value: Option<String>| {
        ctx.event(format!("config writer: {key}: {value:?}"));
        ProducerRecord { value: value.map(Bytes::from), ..ProducerRecord::new(CONFIGS, key, Vec::new()) }
    };
    for k in 0..stable {
        let r = record(format!("s{k}"), Some(format!(r#"{{"topic":"dev/s{k}/#"}}"#)));
        if let Ok(d) = producer.send(r).await {
            deliveries.push(d);
        }
    }
    for k in 0..churn {
        let r = record(format!("c{k}"), Some(format!(r#"{{"topic":"dev/c{k}/#"}}"#)));
        if let Ok(d) = producer.send(r).await {
            deliveries.push(d);
        }
    }
    for _ in 0..writes {
        sleep(Duration::from_millis(thread_rng().gen_range(1..gap_max))).await;
        if churn == 0 {
            break;
        }
        let k = thread_rng().gen_range(0..churn);
        let value = match thread_rng().gen_range(0..6) {
            0 => None,
            1 => Some(format!(r#"{{"topic":"dev/c{k}/#","suspended":true}}"#)),
            2 => Some(format!(r#"{{"topic":"dev/c{k}b/#"}}"#)),
            _ => Some(format!(r#"{{"topic":"dev/c{k}/#"}}"#)),
        };
        if let Ok(d) = producer.send(record(format!("c{k}"), value)).await {
            deliveries.push(d);
        }
    }
    for d in deliveries {
        let _ = d.await;
    }
    producer.close().await;
    ctx.event("config writer: done");
}

/// The devices: numbered messages per topic, some poison, some filtered.
async fn publish(broker: MqttBroker, journal: Arc<Mutex<Journal>>, topics: Vec<String>, period: Duration) {
    let end = madsim::time::Instant::now() + period;
    let mut seqs: BTreeMap<String, i64> = BTreeMap::new();
    while madsim::time::Instant::now() < end {
        let topic = topics[thread_rng().gen_range(0..topics.len())].clone();
        let roll = thread_rng().gen_range(0..100);
        let (payload, kind) = match roll {
            0 => ("not json".to_owned(), Kind::Poison),
            1 => (r#"{"poison":true}"#.to_owned(), Kind::Poison),
            2 => (r#"{"skip":true}"#.to_owned(), Kind::Skip),
            _ => {
                let seq = seqs.get(&topic).copied().unwrap_or(0) + 1;
                (format!(r#"{{"seq":{seq}}}"#), Kind::Seq(seq))
            }
        };
        // A device retries until the broker takes the message.
        let number = loop {
            if let Some(number) = broker.publish(&topic, payload.clone()) {
                break number;
            }
            sleep(Duration::from_millis(200)).await;
        };
        if let Kind::Seq(seq) = kind {
            seqs.insert(topic.clone(), seq);
        }
        journal.lock().expect("journal lock").published.push(Published {
            number,
            topic,
            payload: Bytes::from(payload),
            kind,
        });
        sleep(Duration::from_millis(thread_rng().gen_range(5..120))).await;
    }
}

/// MQTT faults: dropped connections, broker restarts with and without persistence, clean
/// starts under a replica's client id, outages of a replica's network to the broker.
async fn mqtt_faults(broker: MqttBroker, ctx: Ctx, replicas: Vec<String>, period: Duration, rate: u64) {
    if rate == 0 {
        return;
    }
    let end = madsim::time::Instant::now() + period;
    loop {
        sleep(Duration::from_millis(thread_rng().gen_range(500..rate))).await;
        if madsim::time::Instant::now() >= end {
            break;
        }
        let victim = &replicas[thread_rng().gen_range(0..replicas.len())];
        match thread_rng().gen_range(0..100) {
            0..30 => {
                let down = Duration::from_millis(thread_rng().gen_range(50..6_000));
                ctx.fault("mqtt-broker-restart", format!("down for {down:?}"));
                broker.stop();
                sleep(down).await;
                broker.start();
            }
            30..45 => {
                // Sometimes a crash loop: restarts a few seconds apart, each session lost young
                // (its packet ids still low, so the next session soon reuses them).
                let restarts = thread_rng().gen_range(1..=3);
                for i in 0..restarts {
                    if i > 0 {
                        sleep(Duration::from_millis(thread_rng().gen_range(300..3_000))).await;
                    }
                    let down = Duration::from_millis(thread_rng().gen_range(50..6_000));
                    ctx.fault("mqtt-broker-restart-without-persistence", format!("down for {down:?}"));
                    broker.stop_without_persistence();
                    sleep(down).await;
                    broker.start();
                }
            }
            45..75 => {
                if broker.drop_connection(victim) {
                    ctx.fault("mqtt-disconnect", victim.clone());
                }
            }
            75..85 => {
                // 1-4 clean starts 0.3-3 s apart: the other client may be crash-looping too.
                let starts = thread_rng().gen_range(1..=4);
                for i in 0..starts {
                    if i > 0 {
                        sleep(Duration::from_millis(thread_rng().gen_range(300..3_000))).await;
                    }
                    if broker.clean_start(victim) {
                        ctx.fault("mqtt-clean-start", victim.clone());
                    }
                }
            }
            _ => {
                let outage = Duration::from_millis(thread_rng().gen_range(1_000..20_000));
                ctx.fault("mqtt-outage", format!("{victim} cut off the MQTT broker for {outage:?}"));
                broker.cut(victim, outage);
            }
        }
    }
}

/// The live subscriptions every replica must end with: the active filters, shared.
fn wanted_subscriptions(cluster: &Cluster) -> BTreeSet<(Option<String>, String)> {
    bridge::wanted_subscriptions(cluster, APP, &[CONFIGS])
}

fn outputs(cluster: &Cluster) -> Vec<RawRecord> {
    truth::committed_records(cluster, OUTPUT)
}

/// One run: set-up, the fault run, quiescence, the checks; `stop_restart` is the weight of clean
/// restarts among the faults (`mqtt-rolling`).
async fn run(ctx: Ctx, stop_restart: u32) {
    let profile = FaultProfile {
        stop_restart,
        add_replica: 0,
        remove_replica: 0,
        // Its handover ends in a scale-up or -down as often as in a crash; the dispatched loop
        // has no changelog either.
        late_changelog_handover: 0,
        transaction_timeout: Duration::from_secs(600),
        pause_past_transaction_timeout: 0.02,
        ..FaultProfile::everything()
    };
    if thread_rng().gen_bool(profile.buggify) {
        madsim::buggify::enable();
        ctx.event("buggify on");
    }
    let cluster = Cluster::start(&ctx);
    let plan = draw_plan(&ctx, &cluster, &profile);
    set_up_topics(&cluster).await;

    let broker =
        bridge::start_broker(&ctx, SimBrokerConfig { inflight_window: plan.window, ..SimBrokerConfig::default() });
    let names: Vec<String> = (0..plan.replica_count).map(|i| format!("replica-{i}")).collect();
    let journal: Arc<Mutex<Journal>> = Arc::default();
    {
        let (cluster, names, journal) = (cluster.clone(), names.clone(), journal.clone());
        broker.on_ack(Arc::new(move |ack| on_ack(&cluster, &names, &journal, ack)));
    }
    let poison_counted = Arc::new(AtomicU64::new(0));
    let disk = SimDisk::default();
    // What each replica's current process subscribed and received (replaced at every start).
    let own = OwnSubscriptions::default();
    let receipts = OwnReceipts::default();
    let checks = Checks { cluster: cluster.clone(), names: names.clone(), journal: journal.clone(), receipts };
    let launch = launch(&checks, &broker, &own, &poison_counted, &plan);
    let mut replicas = Replicas::start(&cluster, &ctx, &disk, launch, plan.replica_count, plan.replica_count);
    run_faults(&ctx, &cluster, &mut replicas, &broker, &journal, &names, &plan).await;
    await_quiescence(&ctx, &checks, &broker, &own).await;
    // Two more cycles' worth: every last reconcile sees the final configs.
    sleep(Duration::from_secs(3)).await;
    check(&ctx, &checks, &broker, &poison_counted, &own);
}

/// What the checks read: the Kafka cluster, the replicas' names, the journal, and the messages
/// each replica's current process received.
#[derive(Clone)]
struct Checks {
    cluster: Cluster,
    names: Vec<String>,
    journal: Arc<Mutex<Journal>>,
    receipts: OwnReceipts,
}

/// What one seed draws for its run: the replicas, the configs and their writes, the broker's
/// in-flight window, the MQTT faults, the reconnect grace, the fault period and schedule.
struct Plan {
    replica_count: usize,
    /// Configs that stay as they are for the whole run.
    stable: u32,
    /// Configs the writer adds, suspends, resumes, re-points and deletes.
    churn: u32,
    writes: usize,
    period: Duration,
    window: usize,
    slow_ack_ms: u64,
    /// MQTT faults every ≤ this many milliseconds (0: none).
    fault_rate: u64,
    grace: Duration,
    /// The bridges' session expiry interval: in half the seeds seconds, so that outages
    /// outlast it.
    session_expiry: Duration,
    schedule: FaultSchedule,
}

/// Draws the seed's plan and traces it.
fn draw_plan(ctx: &Ctx, cluster: &Cluster, profile: &FaultProfile) -> Plan {
    let (replica_count, stable, churn, writes, period, window, slow_ack_ms, fault_rate, grace, session_expiry) = {
        let mut rng = thread_rng();
        (
            rng.gen_range(1..=3usize),
            rng.gen_range(1..4u32),
            rng.gen_range(0..3u32),
            rng.gen_range(0..15usize),
            Duration::from_secs(rng.gen_range(10..30)),
            [5usize, 20, 100][rng.gen_range(0..3)],
            [0u64, 0, 200, 2_000][rng.gen_range(0..4)],
            [0u64, 3_000, 8_000][rng.gen_range(0..3)],
            Duration::from_secs([0u64, 5, 30][rng.gen_range(0..3)]),
            [SESSION_EXPIRY, SESSION_EXPIRY, Duration::from_secs(10), Duration::from_secs(3)][rng.gen_range(0..4)],
        )
    };
    let schedule = profile.on_brokers(cluster.brokers()).generate(&mut thread_rng(), period);
    ctx.event(format!(
        "mqtt: {replica_count} replicas, {stable} stable + {churn} churn configs, {writes} config writes, \
         in-flight window {window}, slow acks ≤{slow_ack_ms} ms, MQTT faults every ≤{fault_rate} ms, \
         reconnect grace {grace:?}, session expiry {session_expiry:?}, {} Kafka faults over {period:?}:\n{schedule}",
        schedule.len()
    ));
    if session_expiry < SESSION_EXPIRY {
        ctx.fault("mqtt-session-expiry", format!("sessions expire {session_expiry:?} after their client left"));
    }
    Plan {
        replica_count,
        stable,
        churn,
        writes,
        period,
        window,
        slow_ack_ms,
        fault_rate,
        grace,
        session_expiry,
        schedule,
    }
}

/// Set-up: the config and output topics, created from a node of their own (retried until the
/// cluster takes them).
async fn set_up_topics(cluster: &Cluster) {
    let setup = Handle::current().create_node().name("setup").ip(cluster.client_ip()).build();
    let admin_kafka = cluster.kafka();
    setup
        .spawn(async move {
            let admin = admin_kafka.admin().expect("admin");
            for spec in [NewTopic::new(CONFIGS, 1).compacted(), NewTopic::new(OUTPUT, 2)] {
                while admin.create_topic(&spec).await.is_err() {
                    sleep(Duration::from_millis(100)).await;
                }
            }
        })
        .await
        .expect("the setup node is never killed");
}

/// The replicas' launch: each start builds a bridge whose relay numbers what it relays (the
/// process, and its connection), on a client of `broker` with the seed's slow acks, whose
/// acknowledgements are checked as they are sent and whose receipts are logged.
fn launch(
    checks: &Checks,
    broker: &MqttBroker,
    own: &OwnSubscriptions,
    poison_counted: &Arc<AtomicU64>,
    plan: &Plan,
) -> Launch {
    let (slow_ack_ms, grace, session_expiry) = (plan.slow_ack_ms, plan.grace, plan.session_expiry);
    // Numbers every start of an application (a node restart begins its incarnations anew).
    let starts = Arc::new(AtomicU64::new(0));
    let (broker, poison_counted, own) = (broker.clone(), poison_counted.clone(), own.clone());
    let checks = checks.clone();
    Arc::new(move |env: ReplicaEnv| {
        let (broker, poison, checks, own) = (broker.clone(), poison_counted.clone(), checks.clone(), own.clone());
        let start = starts.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            let connections = Arc::new(AtomicU64::new(0));
            let stamp = connections.clone();
            let via_prefix = format!("{}:{start}", env.name);
            let trace = env.ctx.clone();
            let stage = mqtt_extractor([CONFIGS]).drain_limit(thread_rng().gen_range(1..50)).relay(
                move |_config, topic, payload| {
                    if payload.get(&POISON)? == Some(true) {
                        return Err("the relay refuses this payload".into());
                    }
                    if payload.get(&SKIP)? == Some(true) {
                        return Ok(None);
                    }
                    let seq = payload.require(&SEQ)?;
                    let via = format!("{via_prefix}:{}", stamp.load(Ordering::SeqCst));
                    trace.event(format!("{via} relays {topic} seq {seq}"));
                    let value = Event::new().with(&SEQ, seq)?.with(&VIA, via)?;
                    Ok(Some(Message::new(OUTPUT, topic, value)))
                },
            );
            let received = ReceiptLog::default();
            checks.receipts.lock().expect("receipts lock").insert(env.name.clone(), received.clone());
            let send_check: SendAckHook = {
                let checks = checks.clone();
                Arc::new(move |client: &str, publish: &Publish, route: AckRoute| {
                    on_send_ack(&checks.cluster, &checks.names, &checks.journal, client, publish, route);
                })
            };
            let watch = ClientWatch { on_send_ack: Some(send_check), received: Some(received) };
            let mqtt =
                bridge::client(&broker, &checks.cluster, &env.name, Duration::from_millis(slow_ack_ms), &own, watch);
            let observer = BridgeObserver {
                inner: env.observer(),
                name: env.name.clone(),
                ctx: env.ctx.clone(),
                connections,
                poison,
            };
            let app = Flechtwerk::builder()
                .application_id(APP)
                .client_id(&env.name)
                .kafka(Arc::new(env.kafka.clone()))
                .poll_interval(Duration::from_millis(thread_rng().gen_range(100..1_000)))
                .replication_factor(env.kafka.replication_factor())
                .observer(Arc::new(observer))
                .mqtt(MqttBrokerConfig::new(mqtt).session_expiry(session_expiry).reconnect_grace(grace))
                .build(stage)
                .map_err(|e| e.to_string())?;
            app.run_until(env.stop_requested()).await.map_err(|error| crate::harness::replicas::error_kind(&error))
        })
    })
}

/// The fault run: the config writer, the devices and the MQTT faults start, the schedule's
/// Kafka faults fire; once all of them are done and the schedule's time is up, every fault
/// stops (buggify off, the replicas calmed, the MQTT broker up).
async fn run_faults(
    ctx: &Ctx,
    cluster: &Cluster,
    replicas: &mut Replicas,
    broker: &MqttBroker,
    journal: &Arc<Mutex<Journal>>,
    names: &[String],
    plan: &Plan,
) {
    let writer = Handle::current().create_node().name("config-writer").ip(cluster.client_ip()).build();
    let writing =
        writer.spawn(write_configs(cluster.kafka(), ctx.clone(), plan.stable, plan.churn, plan.writes, plan.period));
    let mut topics: Vec<String> = Vec::new();
    for k in 0..plan.stable {
        topics.extend([format!("dev/s{k}/a"), format!("dev/s{k}/b")]);
    }
    for k in 0..plan.churn {
        topics.extend([format!("dev/c{k}/a"), format!("dev/c{k}b/a")]);
    }
    let devices = Handle::current().create_node().name("devices").build();
    let publishing = devices.spawn(publish(broker.clone(), journal.clone(), topics, plan.period));
    let chaos = Handle::current().create_node().name("mqtt-chaos").build();
    let mqtt_chaos =
        chaos.spawn(mqtt_faults(broker.clone(), ctx.clone(), names.to_vec(), plan.period, plan.fault_rate));

    let faults_start = ctx.now();
    replicas.run_schedule(&plan.schedule).await;
    writing.await.expect("the writer node is never killed");
    publishing.await.expect("the devices node is never killed");
    mqtt_chaos.await.expect("the chaos node is never killed");
    let faults_end = faults_start + plan.schedule.end();
    if ctx.now() < faults_end {
        sleep(faults_end - ctx.now()).await;
    }
    madsim::buggify::disable();
    replicas.calm_down();
    broker.start();
    ctx.event("faults stop");
}

/// Quiescence, within [`QUIESCENCE_MAX`]: nothing held at the broker, no open transaction,
/// every required message in, every active filter subscribed and none that the current
/// processes retired.
async fn await_quiescence(ctx: &Ctx, checks: &Checks, broker: &MqttBroker, own: &OwnSubscriptions) {
    let deadline = ctx.now() + QUIESCENCE_MAX;
    let since = ctx.now();
    let Checks { cluster, names, .. } = checks;
    loop {
        let want = wanted_subscriptions(cluster);
        let idle = names.iter().all(|n| bridge::settled(broker, own, n, &want))
            && truth::no_open_transactions(cluster, OUTPUT);
        if (idle && missing(checks, broker).0.is_empty()) || ctx.now() >= deadline {
            break;
        }
        sleep(Duration::from_secs(1)).await;
    }
    ctx.event(format!("quiescent after {:?}", ctx.now() - since));
}

/// Required messages not in Kafka: queued for a session by the broker (no overflow), on a
/// stable topic, a numbered payload, and not lost with its session unless the process that is
/// running now had received it on the connection it was last sent on (then it holds the only
/// copy: a copy received earlier it may have dropped for the redelivery that then never came).
/// Also returns how many numbered messages of stable topics were lost with a session and not
/// required.
fn missing(checks: &Checks, broker: &MqttBroker) -> (Vec<(String, i64)>, usize) {
    let have: BTreeSet<(String, i64)> =
        outputs(&checks.cluster).iter().filter_map(|r| identity(r.key.as_deref(), r.value.as_deref())).collect();
    // Per replica, what its current process received.
    let received: BTreeMap<String, BTreeSet<(String, Bytes, u64)>> = checks
        .receipts
        .lock()
        .expect("receipts lock")
        .iter()
        .map(|(replica, log)| (replica.clone(), log.lock().expect("receipt log lock").clone()))
        .collect();
    let journal = checks.journal.lock().expect("journal lock");
    let mut exempt = 0;
    let missing = journal
        .published
        .iter()
        .filter(|p| stable_topic(&p.topic))
        .filter_map(|p| {
            let Kind::Seq(seq) = p.kind else { return None };
            let outcome = broker.outcome(p.number)?;
            let mut required = !outcome.queued_for.is_empty() && outcome.dropped_by.is_empty();
            // Lost in flight on a connection whose process received it and is still running:
            // that process holds the only copy.
            let held = |(replica, connection): &(String, u64)| {
                let receipt = (p.topic.clone(), p.payload.clone(), *connection);
                received.get(replica).is_some_and(|r| r.contains(&receipt))
            };
            if required && !outcome.lost_by.is_empty() && !outcome.lost_by.iter().any(held) {
                required = false;
                exempt += 1;
            }
            let id = (p.topic.clone(), seq);
            (required && !have.contains(&id)).then_some(id)
        })
        .collect();
    (missing, exempt)
}

/// The checks after quiescence, each family in turn: the acknowledgements, loss, copies and
/// order, poison, what the broker still holds, the subscriptions.
fn check(ctx: &Ctx, checks: &Checks, broker: &MqttBroker, poison_counted: &AtomicU64, own: &OwnSubscriptions) {
    let Checks { cluster, names, journal, .. } = checks;
    for v in journal.lock().expect("journal lock").violations.iter().take(5) {
        ctx.violation(v.clone());
    }
    let (lost, lost_with_sessions) = missing(checks, broker);
    if !lost.is_empty() {
        ctx.violation(format!(
            "{} required messages are not in Kafka (first 10: {:?})",
            lost.len(),
            &lost[..lost.len().min(10)]
        ));
    }
    let copies = check_copies(ctx, cluster, broker, journal);
    let duplicates: usize = copies.values().map(|v| v.len() - 1).sum();
    let journal = journal.lock().expect("journal lock");
    let poison = check_poison(ctx, broker, &journal, poison_counted);
    // Nothing stuck at the broker.
    for name in names {
        let held = broker.held(name);
        if held > 0 {
            ctx.violation(format!("{name}: {held} messages still held at the MQTT broker after quiescence"));
        }
    }
    // Subscriptions converge on the active configs' filters. Extra subscriptions of a previous
    // process are reported, not a violation: a restarted process cannot know which filters its
    // persistent session still holds for configs suspended, deleted or re-pointed while it was
    // down (docs/concepts/mqtt.md, "left-over subscriptions"); the broker delivers their
    // messages, which the bridge acknowledges as stale.
    let (violations, extra) = bridge::subscription_violations(broker, own, names, &wanted_subscriptions(cluster));
    for v in violations {
        ctx.violation(v);
    }
    ctx.event(format!(
        "end: {} published, {} in Kafka ({duplicates} duplicates), {} acks sent, {} acked, {} poison, \
         {lost_with_sessions} lost with their sessions, {extra} left-over subscriptions",
        journal.published.len(),
        copies.len(),
        journal.sent,
        journal.acked.len(),
        poison
    ));
}

/// Duplicates and order: a message is in Kafka at most as often as the broker delivered it,
/// and per topic and replica the first copies of the messages sent once are in publish order.
/// Returns the copies in Kafka per message (the replica each came through).
fn check_copies(
    ctx: &Ctx,
    cluster: &Cluster,
    broker: &MqttBroker,
    journal: &Mutex<Journal>,
) -> BTreeMap<(String, i64), Vec<String>> {
    let numbers: BTreeMap<(String, i64), u64> = journal
        .lock()
        .expect("journal lock")
        .published
        .iter()
        .filter_map(|p| match p.kind {
            Kind::Seq(seq) => Some(((p.topic.clone(), seq), p.number)),
            _ => None,
        })
        .collect();
    let mut copies: BTreeMap<(String, i64), Vec<String>> = BTreeMap::new();
    let mut firsts: BTreeMap<(String, String), Vec<i64>> = BTreeMap::new();
    for record in outputs(cluster) {
        let Some(id) = identity(record.key.as_deref(), record.value.as_deref()) else { continue };
        let value = Event::wrap(flechtwerk::wire::decode_value(record.value.as_deref()).expect("decoded above"));
        let via = value.get(&VIA).ok().flatten().unwrap_or_default();
        let replica = via.split(':').next().unwrap_or_default().to_owned();
        let seen = copies.entry(id.clone()).or_default();
        // Order is checked among messages the broker sent once: a redelivered message may
        // legitimately land behind later ones (e.g. its first delivery was acknowledged as stale
        // while its filter was retired, the ack was lost, and the redelivery came after the
        // filter was active again: mqtt seed 1485).
        let once = numbers.get(&id).is_some_and(|n| broker.deliveries(*n) == 1);
        if seen.is_empty() && once {
            firsts.entry((id.0.clone(), replica)).or_default().push(id.1);
        }
        seen.push(via);
    }
    // A copy in Kafka per delivery at most: one delivery is never relayed into two committed
    // transactions; a duplicate needs a redelivery (after a crash or a reconnect).
    for (id, vias) in &copies {
        let delivered = numbers.get(id).map_or(0, |n| broker.deliveries(*n)) as usize;
        if vias.len() > delivered {
            ctx.violation(format!(
                "{} seq {} is in Kafka {} times but was delivered {delivered} times (copies via {vias:?})",
                id.0,
                id.1,
                vias.len()
            ));
        }
    }
    for ((topic, replica), seqs) in &firsts {
        if seqs.windows(2).any(|w| w[0] >= w[1]) {
            ctx.violation(format!("{topic} via {replica}: first copies out of publish order: {seqs:?}"));
        }
    }
    copies
}

/// Poison never blocks: every poison message the broker queued on a stable topic was
/// acknowledged (unless it was lost with its session: the broker has nothing to acknowledge
/// any more), and the observer counted at least as many. Returns how many there were.
fn check_poison(ctx: &Ctx, broker: &MqttBroker, journal: &Journal, poison_counted: &AtomicU64) -> usize {
    let poison: Vec<&Published> = journal
        .published
        .iter()
        .filter(|p| {
            p.kind == Kind::Poison
                && stable_topic(&p.topic)
                && broker.outcome(p.number).is_some_and(|o| !o.queued_for.is_empty() && o.lost_by.is_empty())
        })
        .collect();
    let unacked: Vec<u64> = poison.iter().filter(|p| !journal.acked.contains(&p.number)).map(|p| p.number).collect();
    if !unacked.is_empty() {
        ctx.violation(format!("poison messages never acknowledged: {unacked:?}"));
    }
    let acked_poison = poison.len() - unacked.len();
    if (poison_counted.load(Ordering::SeqCst) as usize) < acked_poison {
        ctx.violation(format!(
            "{acked_poison} poison messages acknowledged, only {} counted",
            poison_counted.load(Ordering::SeqCst)
        ));
    }
    poison.len()
}
