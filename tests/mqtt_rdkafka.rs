//! The MQTT bridge against real parts: Mosquitto 2 (`scripts/mosquitto`) through the rumqttc
//! adapter, and Apache Kafka (`scripts/kafka`) through librdkafka. Needs `--features
//! rdkafka,mqtt`, `KAFKA_BOOTSTRAP`, `MQTT_BROKER` (host:port) and `MQTT_RESTART_COMMAND` (a
//! command that restarts that Mosquitto on its data; `scripts/test` sets all three). Devices are
//! played by `mosquitto_pub` (QoS 1, MQTT 5).
//!
//! One binary, two roles (`harness = false`): without arguments it runs the scenarios in turn;
//! with `--child …` it is a bridge process the parent kills with SIGKILL.
//!
//! - IT-MQ-1/2/5 (port level, through the adapter): an un-acknowledged message comes again to
//!   the same client id after a reconnect (DUP set); an acknowledged one does not; a sole
//!   share-group member gets what was published while it was away.
//! - End to end (MQ-30..34, MQ-10, MQ-06, MQ-50): a bridge relays 300 messages over two filters
//!   into Kafka while Mosquitto is restarted in the middle (sessions kept; the bridge
//!   re-subscribes after the ConnAck); every message published after the bridge subscribed is in
//!   Kafka.
//! - MQ-38: a bridge process SIGKILLs itself right after its first Kafka commit that carried
//!   messages, before it could acknowledge them; the next incarnation (same client id) gets them
//!   again: duplicates in Kafka, no loss.
//! - Python cut-over: one MQTT session (a client id) and one shared-subscription group handed
//!   from a Python flechtwerk 0.17 bridge (`tests/python/migration.py mqtt-bridge`) to a Rust
//!   bridge of the same stage and back, each switch a clean stop (SIGTERM), while a device
//!   publishes 1,500 numbered messages: every one reaches Kafka, in order of first arrival; the
//!   switch from Python leaves at most its last poll to be delivered again, the switch from
//!   Rust nothing (a stopping Rust bridge acknowledges its last committed poll, MQ-38).
//!   Needs `PYTHON_REF` (`scripts/python-ref`; `scripts/test` sets it).

#![cfg(all(feature = "rdkafka", feature = "mqtt", not(madsim)))]

mod child_support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flechtwerk::attribute::{Attribute, INT, STR};
use flechtwerk::kafka::rdkafka::RdKafka;
use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
use flechtwerk::mqtt::rumqttc::RumqttcBroker;
use flechtwerk::mqtt::{EventReceiver, Mqtt, MqttClient, MqttEvent, QoS, Session};
use flechtwerk::observer::Observer;
use flechtwerk::stage::{mqtt_extractor, MqttBrokerConfig};
use flechtwerk::testing::read_topic;
use flechtwerk::{Event, Flechtwerk, Message};

const SEQ: Attribute<i64> = Attribute::new("seq", &INT);
/// Which implementation relayed an output (the Python cut-over; `python` or `rust`).
const IMPL: Attribute<String> = Attribute::new("impl", &STR);
const SETTLE_MAX: Duration = Duration::from_secs(60);

fn env(name: &str) -> String {
    let value = std::env::var(name).unwrap_or_default();
    assert!(!value.is_empty(), "{name} is not set: run through scripts/test (it starts Kafka and Mosquitto)");
    value
}

fn mqtt_broker() -> RumqttcBroker {
    let address = env("MQTT_BROKER");
    let (host, port) = address.rsplit_once(':').expect("MQTT_BROKER is host:port");
    RumqttcBroker::new(host, port.parse().expect("a port")).keep_alive(Duration::from_secs(5))
}

fn unique(what: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos();
    format!("{what}-{nanos:x}")
}

/// Publishes one QoS 1 message as a device (mosquitto_pub, MQTT 5).
fn publish(topic: &str, payload: &str) {
    let address = env("MQTT_BROKER");
    let (host, port) = address.rsplit_once(':').expect("host:port");
    let status = Command::new("mosquitto_pub")
        .args(["-h", host, "-p", port, "-V", "mqttv5", "-q", "1", "-t", topic, "-m", payload])
        .status()
        .expect("mosquitto_pub runs (scripts/mosquitto installs it)");
    assert!(status.success(), "mosquitto_pub {topic} failed");
}

/// Publishes many messages through one mosquitto_pub process (one line each).
fn publish_lines(topic: &str, payloads: &[String]) {
    let address = env("MQTT_BROKER");
    let (host, port) = address.rsplit_once(':').expect("host:port");
    let mut child = Command::new("mosquitto_pub")
        .args(["-h", host, "-p", port, "-V", "mqttv5", "-q", "1", "-t", topic, "-l"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("mosquitto_pub runs");
    {
        use std::io::Write;
        let stdin = child.stdin.as_mut().expect("stdin");
        for p in payloads {
            writeln!(stdin, "{p}").expect("write");
        }
    }
    drop(child.stdin.take());
    assert!(child.wait().expect("wait").success(), "mosquitto_pub -l {topic} failed");
}

fn restart_mosquitto() {
    let command = env("MQTT_RESTART_COMMAND");
    let status = Command::new("sh").args(["-c", &command]).status().expect("restart command");
    assert!(status.success(), "{command} failed");
}

/// Waits for the next event matching `want`, up to `bound`.
async fn next(events: &mut EventReceiver, bound: Duration, want: impl Fn(&MqttEvent) -> bool) -> Option<MqttEvent> {
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(event)) if want(&event) => return Some(event),
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return None,
        }
    }
}

async fn open(client_id: &str) -> (Box<dyn MqttClient>, EventReceiver, bool) {
    let session = Session { client_id: client_id.to_owned(), session_expiry: Duration::from_secs(3600) };
    let (client, mut events) = mqtt_broker().connect(&session).expect("connect");
    let Some(MqttEvent::Connected { session_present, .. }) =
        next(&mut events, SETTLE_MAX, |e| matches!(e, MqttEvent::Connected { .. })).await
    else {
        panic!("{client_id}: no CONNACK");
    };
    (client, events, session_present)
}

fn is_publish(event: &MqttEvent) -> bool {
    matches!(event, MqttEvent::Publish(_))
}

/// IT-MQ-1, IT-MQ-2, IT-MQ-5 on the adapter.
///
/// Pins: IT-MQ-1, IT-MQ-2, IT-MQ-5 (asserted in turn), MQ-02 and MQ-03 (the session survives a
/// plain disconnect: `clean_start=false`, the expiry sent, never set to 0 on DISCONNECT).
async fn port_level() {
    let id = unique("itmq");
    let filter = format!("flechtwerk/{id}/+/events");
    let shared = format!("$share/g/{filter}");
    // IT-MQ-5: subscribe, leave, publish while away, come back: the backlog is there.
    let (client, _events, present) = open(&id).await;
    assert!(!present, "a new client id has no session");
    client.subscribe(&shared, QoS::AtLeastOnce).expect("subscribe");
    tokio::time::sleep(Duration::from_millis(500)).await;
    client.disconnect().await.expect("disconnect");
    publish(&format!("flechtwerk/{id}/a/events"), r#"{"n":1}"#);
    let (client, mut events, present) = open(&id).await;
    assert!(present, "MQ-02: the session survived the disconnect (clean_start=false, expiry sent)");
    client.subscribe(&shared, QoS::AtLeastOnce).expect("subscribe");
    let Some(MqttEvent::Publish(first)) = next(&mut events, SETTLE_MAX, is_publish).await else {
        panic!("IT-MQ-5: the offline backlog did not arrive");
    };
    assert_eq!(
        (first.topic.as_str(), &first.payload[..]),
        (format!("flechtwerk/{id}/a/events").as_str(), &br#"{"n":1}"#[..])
    );
    // IT-MQ-1: not acknowledged → comes again to the same client id, with DUP.
    client.disconnect().await.expect("disconnect");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (client, mut events, _) = open(&id).await;
    client.subscribe(&shared, QoS::AtLeastOnce).expect("subscribe");
    let Some(MqttEvent::Publish(again)) = next(&mut events, SETTLE_MAX, is_publish).await else {
        panic!("IT-MQ-1: the un-acknowledged message was not redelivered");
    };
    assert_eq!((again.topic.clone(), again.payload.clone()), (first.topic.clone(), first.payload.clone()));
    assert!(again.dup, "IT-MQ-1: a redelivery carries DUP");
    // IT-MQ-2: acknowledged → not again.
    client.ack(&again).expect("ack");
    tokio::time::sleep(Duration::from_secs(1)).await;
    client.disconnect().await.expect("disconnect");
    let (client, mut events, _) = open(&id).await;
    client.subscribe(&shared, QoS::AtLeastOnce).expect("subscribe");
    let extra = next(&mut events, Duration::from_secs(3), is_publish).await;
    assert!(extra.is_none(), "IT-MQ-2: an acknowledged message came again: {extra:?}");
    client.disconnect().await.expect("disconnect");
    println!("IT-MQ-1/2/5: redelivered with DUP until acknowledged; offline backlog kept");
}

/// Kafka topics of one bridge scenario: configs, output.
async fn topics(kafka: &dyn Kafka, prefix: &str, filters: &[String]) -> (String, String) {
    let (configs, output) = (format!("{prefix}-configs"), format!("{prefix}-output"));
    let admin = kafka.admin().expect("admin");
    admin.create_topic(&NewTopic::new(&configs, 1).replication(1).compacted()).await.expect("create");
    admin.create_topic(&NewTopic::new(&output, 2).replication(1)).await.expect("create");
    let producer = kafka.producer(ProducerConfig::idempotent(format!("{prefix}-cfg"))).expect("producer");
    for (i, filter) in filters.iter().enumerate() {
        let record = ProducerRecord::new(&configs, format!("f{i}"), format!(r#"{{"topic":"{filter}"}}"#));
        producer.send(record).await.expect("send").await.expect("delivered");
    }
    producer.close().await;
    (configs, output)
}

/// Kills the process with SIGKILL at its first commit that carried MQTT messages (armed once
/// the bridge relayed something), before the next poll acknowledges them.
struct KillAfterCommit {
    armed: Arc<AtomicBool>,
}

impl Observer for KillAfterCommit {
    fn transaction_committed(&self) {
        if self.armed.load(Ordering::SeqCst) {
            eprintln!("child: SIGKILL right after a Kafka commit, before the MQTT acks");
            // SAFETY: kill(2) on our own pid.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
    }
}

fn bridge(
    prefix: &str,
    client_id: &str,
    configs: &str,
    output: &str,
    observer: Option<Arc<dyn Observer>>,
    relayed: Option<Arc<AtomicBool>>,
) -> Flechtwerk {
    let output = output.to_owned();
    let stage = mqtt_extractor([configs]).drain_limit(50).relay(move |_config, topic, payload| {
        if let Some(flag) = &relayed {
            flag.store(true, Ordering::SeqCst);
        }
        let value = Event::new().with(&SEQ, payload.require(&SEQ)?)?.with(&IMPL, "rust".to_owned())?;
        Ok(Some(Message::new(output.as_str(), topic, value)))
    });
    let mut builder = Flechtwerk::builder()
        .application_id(format!("{prefix}-app"))
        .client_id(client_id)
        .kafka(Arc::new(RdKafka::new(env("KAFKA_BOOTSTRAP"))))
        .replication_factor(1)
        .poll_interval(Duration::from_millis(200))
        .mqtt(MqttBrokerConfig::new(Arc::new(mqtt_broker())));
    if let Some(observer) = observer {
        builder = builder.observer(observer);
    }
    builder.build(stage).expect("valid settings")
}

/// Per MQTT topic, the seqs in Kafka output order.
async fn outputs(kafka: &dyn Kafka, output: &str) -> BTreeMap<String, Vec<i64>> {
    let per_topic = outputs_by(kafka, output).await;
    per_topic.into_iter().map(|(topic, relayed)| (topic, relayed.into_iter().map(|(seq, _)| seq).collect())).collect()
}

async fn wait_outputs(
    kafka: &dyn Kafka,
    output: &str,
    done: impl Fn(&BTreeMap<String, Vec<i64>>) -> bool,
) -> BTreeMap<String, Vec<i64>> {
    let deadline = Instant::now() + SETTLE_MAX * 2;
    loop {
        let got = outputs(kafka, output).await;
        if done(&got) || Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn payloads(range: std::ops::RangeInclusive<i64>) -> Vec<String> {
    range.map(|n| format!(r#"{{"seq":{n}}}"#)).collect()
}

/// End to end, with a Mosquitto restart in the middle.
///
/// Pins: MQ-04 (the bridge reconnects by itself: a Mosquitto restart within the grace does not
/// end the run), MQ-06 (it subscribes again after the reconnect: messages get through), MQ-31
/// (`relay` gets the publish topic and the decoded payload), MQ-51 (per topic, order holds).
async fn end_to_end_with_restart() {
    let prefix = unique("mqe2e");
    let filters = vec![format!("{prefix}/a/#"), format!("{prefix}/b/#")];
    let kafka = RdKafka::new(env("KAFKA_BOOTSTRAP"));
    let (configs, output) = topics(&kafka, &prefix, &filters).await;
    let app = bridge(&prefix, &format!("{prefix}-bridge-0"), &configs, &output, None, None);
    let running = tokio::spawn(async move {
        let Err(error) = app.run().await;
        error
    });
    // The bridge subscribes once it polled its configs; publish a probe until it arrives.
    let probe_topic = format!("{prefix}/a/probe");
    let deadline = Instant::now() + SETTLE_MAX;
    loop {
        publish(&probe_topic, r#"{"seq":0}"#);
        if outputs(&kafka, &output).await.contains_key(&probe_topic) {
            break;
        }
        assert!(Instant::now() < deadline, "the bridge never subscribed");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (ta, tb) = (format!("{prefix}/a/x"), format!("{prefix}/b/y"));
    publish_lines(&ta, &payloads(1..=100));
    publish_lines(&tb, &payloads(1..=50));
    // Mosquitto restarts mid-stream: the bridge reconnects (within its grace) and re-subscribes.
    restart_mosquitto();
    // Published right after the restart, the bridge's $share subscriptions may still be dead
    // (Mosquitto drops what arrives before the re-subscribe): publish under each filter until
    // one gets through on both (the filters are re-subscribed one by one: a probe through `b`
    // alone let `a/x`'s first 11 messages meet a dead subscription once, in a loaded CI run).
    let deadline = Instant::now() + SETTLE_MAX;
    let probes_after = [format!("{prefix}/a/after-restart"), format!("{prefix}/b/after-restart")];
    loop {
        let got = outputs(&kafka, &output).await;
        let waiting: Vec<&String> = probes_after.iter().filter(|p| !got.contains_key(*p)).collect();
        if waiting.is_empty() {
            break;
        }
        for probe in &waiting {
            publish(probe, r#"{"seq":0}"#);
        }
        assert!(Instant::now() < deadline, "MQ-06: nothing got through {waiting:?} after the Mosquitto restart");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    publish_lines(&ta, &payloads(101..=200));
    publish_lines(&tb, &payloads(51..=100));
    let got = wait_outputs(&kafka, &output, |got| {
        got.get(&ta).is_some_and(|v| v.iter().collect::<BTreeSet<_>>().len() >= 200)
            && got.get(&tb).is_some_and(|v| v.iter().collect::<BTreeSet<_>>().len() >= 100)
    })
    .await;
    assert!(!running.is_finished(), "the bridge ended: {:?}", running.await);
    running.abort();
    for (topic, n) in [(&ta, 200), (&tb, 100)] {
        let seqs = got.get(topic).cloned().unwrap_or_default();
        let distinct: BTreeSet<i64> = seqs.iter().copied().collect();
        assert_eq!(distinct, (1..=n).collect::<BTreeSet<i64>>(), "{topic}: messages missing in Kafka");
        // Per topic, first copies in publish order (MQ-51).
        let mut seen = BTreeSet::new();
        let firsts: Vec<i64> = seqs.iter().copied().filter(|s| seen.insert(*s)).collect();
        assert!(firsts.windows(2).all(|w| w[0] < w[1]), "{topic}: out of order: {firsts:?}");
    }
    println!("end to end: 300 messages over 2 filters in Kafka across a Mosquitto restart, in order");
}

/// MQ-38: SIGKILL between the Kafka commit and the acknowledgement.
///
/// Pins: MQ-34 (a relayed message is acknowledged only after its Kafka commit: the probe
/// committed before the kill comes again), MQ-38 (across the crash no message is lost).
async fn kill_between_commit_and_ack() {
    let prefix = unique("mqkill");
    let filters = vec![format!("{prefix}/#")];
    let kafka = RdKafka::new(env("KAFKA_BOOTSTRAP"));
    let (configs, output) = topics(&kafka, &prefix, &filters).await;
    let topic = format!("{prefix}/t");
    // First incarnation: subscribes (an empty run first, so the session and its subscription
    // exist), then relays and dies right after its first commit with messages.
    let child = |arm: bool| {
        Command::new(std::env::current_exe().expect("own path"))
            .args(["--child", &prefix, &configs, &output, if arm { "arm" } else { "run" }])
            .spawn()
            .expect("start a child")
    };
    let mut first = child(true);
    // Wait until the session is subscribed: a probe is relayed (and kills the child).
    let deadline = Instant::now() + SETTLE_MAX;
    let status = loop {
        publish(&topic, r#"{"seq":0}"#);
        if let Some(status) = first.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "the first bridge never relayed anything");
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "the child died of SIGKILL after its commit");
    publish_lines(&topic, &payloads(1..=100));
    let mut second = child(false);
    let got = wait_outputs(&kafka, &output, |got| {
        got.get(&topic).is_some_and(|v| v.iter().filter(|s| **s > 0).collect::<BTreeSet<_>>().len() >= 100)
    })
    .await;
    let _ = second.kill();
    let _ = second.wait();
    let seqs = got.get(&topic).cloned().unwrap_or_default();
    let distinct: BTreeSet<i64> = seqs.iter().copied().filter(|s| *s > 0).collect();
    assert_eq!(distinct, (1..=100).collect::<BTreeSet<i64>>(), "MQ-38: messages lost across the kill");
    let probes = seqs.iter().filter(|s| **s == 0).count();
    // The killed incarnation committed at least one probe and never acknowledged it: the broker
    // redelivered it to the next incarnation, which committed it again.
    assert!(probes >= 2, "MQ-38: the probe committed before the kill was not redelivered (copies: {probes})");
    println!("MQ-38: SIGKILL between commit and ack: {probes} copies of the probe in Kafka, 100/100 messages, no loss");
}

/// The Python cut-over: Python → Rust → Python on one MQTT session, clean stops.
///
/// Pins: MQ-38 (a stopping Rust bridge acknowledges its last committed poll: the switch from Rust
/// leaves no duplicate), MQ-10 and LIFE-40 (Rust subscribes `$share/{application_id}/{filter}`
/// as Python does: any other subscription in the session Python left would deliver twice),
/// LIFE-04 (the client id names the MQTT session each side takes over: every message arrives, in
/// order of first arrival).
async fn python_cutover() {
    let python = env("PYTHON_REF");
    let prefix = unique("mqpy");
    let filters = vec![format!("{prefix}/dev/#")];
    let kafka = RdKafka::new(env("KAFKA_BOOTSTRAP"));
    let (configs, output) = topics(&kafka, &prefix, &filters).await;
    let (app, client, topic) = (format!("{prefix}-app"), format!("{prefix}-pod"), format!("{prefix}/dev/1"));
    let logs = std::env::temp_dir().join(&prefix);
    std::fs::create_dir_all(&logs).expect("log dir");
    let spawn = |name: &str, mut command: Command| -> std::process::Child {
        let log = std::fs::File::create(logs.join(format!("{name}.log"))).expect("log file");
        command
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"))
    };
    let python_bridge = |name: &str| {
        let mut command = Command::new(&python);
        command.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/migration.py")).args([
            "mqtt-bridge",
            "--bootstrap",
            &env("KAFKA_BOOTSTRAP"),
            "--mqtt",
            &env("MQTT_BROKER"),
            "--app",
            &app,
            "--client",
            &client,
            "--configs",
            &configs,
            "--output",
            &output,
        ]);
        spawn(name, command)
    };
    let rust_bridge = |name: &str| {
        let mut command = Command::new(std::env::current_exe().expect("own path"));
        command.args(["--child", &prefix, &configs, &output, "serve", &client]);
        spawn(name, command)
    };
    // A clean stop: SIGTERM, then exit status 0 within 30 s.
    let stop = |name: &str, child: &mut std::process::Child| {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0, "SIGTERM to {name}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "{name} did not stop within 30 s of SIGTERM (logs in {})",
                logs.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "{name} exited with {status} after SIGTERM (logs in {})", logs.display());
    };
    let alive = |name: &str, child: &mut std::process::Child| {
        if let Some(status) = child.try_wait().expect("wait") {
            panic!("{name} ended with {status} (logs in {})", logs.display());
        }
    };
    let distinct = |got: &BTreeMap<String, Vec<(i64, String)>>| {
        got.get(&topic).map_or(0, |v| v.iter().map(|(s, _)| *s).filter(|s| *s > 0).collect::<BTreeSet<_>>().len())
    };
    const MESSAGES: i64 = 1_500;

    let mut py_first = python_bridge("py-first");
    // Until the session is subscribed, a `$share` publish reaches nobody: probe first.
    let deadline = Instant::now() + SETTLE_MAX;
    loop {
        alive("py-first", &mut py_first);
        publish(&topic, r#"{"seq":0}"#);
        tokio::time::sleep(Duration::from_secs(1)).await;
        if outputs_by(&kafka, &output).await.contains_key(&topic) {
            break;
        }
        assert!(Instant::now() < deadline, "the Python bridge never relayed a probe (logs in {})", logs.display());
    }
    // The device: 25 messages every 250 ms, in three phases, each started once the one before
    // has published everything (one publisher at a time keeps the publish order). Each phase
    // begins while its bridge runs and goes on across the switch that follows, so each bridge
    // has messages of its own and finds others queued in the session.
    let device = |range: std::ops::RangeInclusive<i64>| {
        let topic = topic.clone();
        std::thread::spawn(move || {
            for start in range.clone().step_by(25) {
                publish_lines(&topic, &payloads(start..=(start + 24).min(*range.end())));
                std::thread::sleep(Duration::from_millis(250));
            }
        })
    };
    let phase1 = device(1..=600);
    let wait_for = |what: &'static str, at_least: usize| {
        let kafka = &kafka;
        let output = &output;
        async move {
            let deadline = Instant::now() + SETTLE_MAX * 2;
            loop {
                let got = outputs_by(kafka, output).await;
                if distinct(&got) >= at_least {
                    return;
                }
                assert!(Instant::now() < deadline, "{what}: {} of {at_least} messages in Kafka", distinct(&got));
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
    };
    wait_for("Python to relay the first 300", 300).await;
    stop("py-first", &mut py_first);
    let mut rust = rust_bridge("rust");
    phase1.join().expect("device");
    let phase2 = device(601..=1_200);
    wait_for("Rust to take over the session and relay up to 900", 900).await;
    stop("rust", &mut rust);
    let mut py_back = python_bridge("py-back");
    phase2.join().expect("device");
    device(1_201..=MESSAGES).join().expect("device");
    wait_for("Python to relay every message", MESSAGES as usize).await;
    stop("py-back", &mut py_back);

    let got = outputs_by(&kafka, &output).await;
    let relayed = got.get(&topic).cloned().unwrap_or_default();
    let seqs: Vec<i64> = relayed.iter().map(|(s, _)| *s).filter(|s| *s > 0).collect();
    let mut seen = BTreeSet::new();
    let firsts: Vec<i64> = seqs.iter().copied().filter(|s| seen.insert(*s)).collect();
    assert_eq!(firsts, (1..=MESSAGES).collect::<Vec<_>>(), "every message, in order of first arrival");
    let duplicates = seqs.len() - firsts.len();
    // Where they came from: (who relayed the first copy, who the second).
    let mut first_by: BTreeMap<i64, &str> = BTreeMap::new();
    let mut switches: BTreeMap<String, usize> = BTreeMap::new();
    for (seq, by) in relayed.iter().filter(|(s, _)| *s > 0) {
        if let Some(first) = first_by.get(seq) {
            *switches.entry(format!("{first} then {by}")).or_default() += 1;
        } else {
            first_by.insert(*seq, by);
        }
    }
    // A clean switch from Python leaves at most its last poll unacknowledged (drain_limit, 50
    // messages of the one filter), and one from Rust nothing: a stopping Rust bridge
    // acknowledges its last committed poll before it leaves the session (MQ-38).
    assert!(
        duplicates <= 50 && !switches.contains_key("rust then python"),
        "{duplicates} duplicates over two clean switches: {switches:?}"
    );
    let by_rust = relayed.iter().filter(|(s, by)| *s > 0 && by == "rust").count();
    let first_rust = relayed.iter().position(|(_, by)| by == "rust").expect("Rust relayed nothing");
    let python_after = relayed[first_rust..].iter().filter(|(s, by)| *s > 0 && by == "python").count();
    assert!(by_rust > 0 && python_after > 0, "Rust relayed {by_rust}, Python after Rust {python_after}");
    println!(
        "Python cut-over: {MESSAGES}/{MESSAGES} messages in Kafka in order across two clean switches of one MQTT \
         session (Python → Rust → Python); Rust relayed {by_rust}, Python {python_after} after Rust; {duplicates} \
         duplicate(s) {switches:?}"
    );
}

/// Per MQTT topic, `(seq, impl)` in Kafka output order.
async fn outputs_by(kafka: &dyn Kafka, output: &str) -> BTreeMap<String, Vec<(i64, String)>> {
    let mut per_topic: BTreeMap<String, Vec<(i64, String)>> = BTreeMap::new();
    for record in read_topic(kafka, &unique("reader"), output).await.expect("read") {
        let value = Event::wrap(flechtwerk::wire::decode_value(record.value.as_deref()).expect("json"));
        let key = String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned();
        let by = value.get(&IMPL).ok().flatten().unwrap_or_default();
        per_topic.entry(key).or_default().push((value.require(&SEQ).expect("seq"), by));
    }
    per_topic
}

async fn child_main(args: &[String]) {
    let (prefix, configs, output, mode) = (&args[0], &args[1], &args[2], &args[3]);
    if mode == "serve" {
        // The Python cut-over's Rust bridge: the given client id, until SIGTERM (a clean stop).
        child_support::run_until_sigterm(bridge(prefix, &args[4], configs, output, None, None)).await;
        return;
    }
    let relayed = Arc::new(AtomicBool::new(false));
    let observer: Option<Arc<dyn Observer>> =
        (mode == "arm").then(|| Arc::new(KillAfterCommit { armed: relayed.clone() }) as Arc<dyn Observer>);
    let app = bridge(prefix, &format!("{prefix}-bridge-0"), configs, output, observer, Some(relayed));
    let Err(error) = app.run().await;
    eprintln!("child: {error}");
    std::process::exit(3);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    if args.first().map(String::as_str) == Some("--child") {
        runtime.block_on(child_main(&args[1..]));
        return;
    }
    let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).try_init();
    runtime.block_on(async {
        port_level().await;
        end_to_end_with_restart().await;
        kill_between_commit_and_ack().await;
        python_cutover().await;
    });
}
