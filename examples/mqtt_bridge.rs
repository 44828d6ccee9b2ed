//! An MQTT → Kafka bridge: devices publish readings to `site/{device}/readings`; one config
//! entry per topic filter tells the bridge what to subscribe; each reading goes to Kafka keyed by
//! its device, and the MQTT message is acknowledged only once the Kafka transaction carrying it
//! committed.
//!
//! ```text
//! cargo run --example mqtt_bridge       # in-process simulated Kafka and MQTT broker, no setup
//! cargo run --example mqtt_bridge --features rdkafka,mqtt -- \
//!     --bootstrap 127.0.0.1:9092 --mqtt 127.0.0.1:1883     # real brokers (scripts/kafka, scripts/mosquitto)
//! ```
//!
//! It creates the topics, writes one config entry (`{"topic": "site/+/readings"}`), starts the
//! bridge, publishes `--readings` readings per device (every 50th one poison: not JSON), waits
//! until every valid reading is in Kafka, prints a line per device and the poison count, and
//! stops. With real brokers the devices publish through the same MQTT port (a second client).
//!
//! What the example shows:
//! - the relay is a plain function: payload (a JSON object) in, at most one Kafka message out;
//!   `Ok(None)` filters a message, an error drops it as poison (acknowledged and counted, never
//!   a stall);
//! - the subscriptions follow the config topic: add an entry to subscribe a filter, tombstone or
//!   suspend it to unsubscribe;
//! - delivery is at least once across crashes: a bridge that dies between a Kafka commit and
//!   the acknowledgement gets the messages again (docs/concepts/mqtt.md).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use flechtwerk::attribute::{Attribute, INT};
use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
use flechtwerk::mqtt::{Mqtt, QoS};
use flechtwerk::observer::Observer;
use flechtwerk::stage::{mqtt_extractor, MqttBrokerConfig};
use flechtwerk::testing::read_topic;
use flechtwerk::{Event, Flechtwerk, Message};

const VALUE: Attribute<i64> = Attribute::new("value", &INT);
const SEQ: Attribute<i64> = Attribute::new("seq", &INT);

struct Args {
    bootstrap: Option<String>,
    mqtt: Option<String>,
    devices: usize,
    readings: i64,
}

fn parse() -> Args {
    let mut args = Args { bootstrap: None, mqtt: None, devices: 3, readings: 100 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--bootstrap" => args.bootstrap = Some(value()),
            "--mqtt" => args.mqtt = Some(value()),
            "--devices" => args.devices = value().parse().expect("a device count"),
            "--readings" => args.readings = value().parse().expect("a reading count"),
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

fn kafka(args: &Args) -> Arc<dyn Kafka> {
    match &args.bootstrap {
        None => Arc::new(flechtwerk_sim::cluster::LocalCluster::new()),
        #[cfg(feature = "rdkafka")]
        Some(bootstrap) => Arc::new(flechtwerk::kafka::rdkafka::RdKafka::new(bootstrap.clone())),
        #[cfg(not(feature = "rdkafka"))]
        Some(_) => panic!("--bootstrap needs the rdkafka feature"),
    }
}

/// The MQTT broker, and a way for the devices to publish to it.
enum Devices {
    Simulated(flechtwerk_sim::mqtt::MqttBroker),
    #[cfg(feature = "mqtt")]
    Real(String),
}

impl Devices {
    fn publish(&self, topic: &str, payload: &str) {
        match self {
            Devices::Simulated(broker) => {
                broker.publish(topic, payload.to_owned()).expect("the simulated broker is up");
            }
            #[cfg(feature = "mqtt")]
            Devices::Real(address) => {
                let (host, port) = address.rsplit_once(':').expect("--mqtt host:port");
                let status = std::process::Command::new("mosquitto_pub")
                    .args(["-h", host, "-p", port, "-V", "mqttv5", "-q", "1", "-t", topic, "-m", payload])
                    .status()
                    .expect("mosquitto_pub (apt install mosquitto-clients)");
                assert!(status.success(), "mosquitto_pub failed");
            }
        }
    }
}

fn mqtt(args: &Args) -> (Arc<dyn Mqtt>, Devices) {
    match &args.mqtt {
        None => {
            let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
            tokio::spawn(broker.clone().run_housekeeping());
            let rng = Arc::new(AtomicU64::new(1));
            let adapter = flechtwerk_sim::mqtt::SimMqtt::new(
                broker.clone(),
                Default::default(),
                Arc::new(move |n| rng.fetch_add(7, Ordering::Relaxed) % n),
            );
            (Arc::new(adapter), Devices::Simulated(broker))
        }
        #[cfg(feature = "mqtt")]
        Some(address) => {
            let (host, port) = address.rsplit_once(':').expect("--mqtt host:port");
            let broker = flechtwerk::mqtt::rumqttc::RumqttcBroker::new(host, port.parse().expect("a port"));
            (Arc::new(broker), Devices::Real(address.clone()))
        }
        #[cfg(not(feature = "mqtt"))]
        Some(_) => panic!("--mqtt needs the mqtt feature"),
    }
}

/// Counts poison drops (the Prometheus observer exports them as
/// `flechtwerk_mqtt_messages_dropped_total{reason="poison"}`).
#[derive(Default)]
struct Drops(AtomicU64);

impl Observer for Drops {
    fn mqtt_message_dropped(&self, _topic: &str, reason: &str) {
        if reason == "poison" {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args = parse();
    let kafka = kafka(&args);
    let (broker, devices) = mqtt(&args);
    let run = format!("{:x}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis());
    let (configs, output) = (format!("bridge-configs-{run}"), format!("readings-{run}"));
    let admin = kafka.admin()?;
    admin.create_topic(&NewTopic::new(&configs, 1).compacted()).await?;
    admin.create_topic(&NewTopic::new(&output, 3)).await?;
    let producer = kafka.producer(ProducerConfig::idempotent("bridge-example-configs"))?;
    producer.send(ProducerRecord::new(&configs, "site-readings", r#"{"topic":"site/+/readings"}"#)).await?.await?;
    producer.close().await;

    // The relay: the device id from the topic is the Kafka key.
    let out = output.clone();
    let stage = mqtt_extractor([configs.as_str()]).drain_limit(200).relay(move |_config, topic, payload| {
        let device = topic.split('/').nth(1).unwrap_or("unknown");
        let value = Event::new().with(&SEQ, payload.require(&SEQ)?)?.with(&VALUE, payload.require(&VALUE)?)?;
        Ok(Some(Message::new(out.as_str(), device, value)))
    });
    let drops = Arc::new(Drops::default());
    let app = Flechtwerk::builder()
        .application_id(format!("bridge-example-{run}"))
        // Per run, like the application id: a persistent session of an earlier run under the same
        // client id would still hold that run's `$share/<old group>/…` subscription and deliver
        // every reading a second time through it.
        .client_id(format!("bridge-{run}"))
        .kafka(kafka.clone())
        .poll_interval(Duration::from_millis(200))
        .observer(drops.clone())
        .mqtt(MqttBrokerConfig::new(broker.clone()).qos(QoS::AtLeastOnce))
        .build(stage)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        app.run_until(async {
            let _ = stopped.await;
        })
        .await
    });

    // Wait until the bridge subscribed: a probe device's message gets through.
    let probes = probe_subscribed(&devices, &*kafka, &output).await?;
    println!("bridge subscribed (probe published {probes} times)");
    let mut poison = 0;
    for seq in 1..=args.readings {
        for d in 0..args.devices {
            let topic = format!("site/dev-{d}/readings");
            if seq % 50 == 0 {
                devices.publish(&topic, "not json");
                poison += 1;
            }
            devices.publish(&topic, &format!(r#"{{"seq":{seq},"value":{}}}"#, seq * 10 + d as i64));
        }
    }
    let want = args.readings as usize * args.devices;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let per_device = loop {
        let mut per_device: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for record in read_topic(&*kafka, "bridge-example-reader", &output).await? {
            let value = Event::wrap(flechtwerk::wire::decode_value(record.value.as_deref())?);
            let key = String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned();
            if key != "probe" {
                per_device.entry(key).or_default().push(value.require(&SEQ)?);
            }
        }
        if per_device.values().map(Vec::len).sum::<usize>() >= want || tokio::time::Instant::now() > deadline {
            break per_device;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let _ = stop.send(());
    running.await??;
    for (device, seqs) in &per_device {
        let in_order = seqs.windows(2).all(|w| w[0] < w[1]);
        println!("{device}: {} readings in Kafka, in order: {in_order}", seqs.len());
    }
    println!("poison messages published {poison}, dropped and acknowledged {}", drops.0.load(Ordering::SeqCst));
    let got: usize = per_device.values().map(Vec::len).sum();
    if got < want {
        return Err(format!("only {got} of {want} readings reached Kafka").into());
    }
    // A calm run (no crash, no reconnect) has no redelivery: every reading once, in order.
    if per_device.values().any(|seqs| !seqs.windows(2).all(|w| w[0] < w[1])) {
        return Err("a device's readings are repeated or out of order in Kafka".into());
    }
    let dropped = drops.0.load(Ordering::SeqCst);
    if dropped != poison {
        return Err(format!("{poison} poison messages published, {dropped} dropped").into());
    }
    Ok(())
}

/// Waits until the bridge's subscription is live: a probe device publishes until its reading
/// is in Kafka (a message published to a shared subscription nobody holds yet is dropped by the
/// broker, so the devices wait for this).
async fn probe_subscribed(devices: &Devices, kafka: &dyn Kafka, output: &str) -> Result<usize, flechtwerk::Error> {
    for attempt in 1..=60 {
        devices.publish("site/probe/readings", r#"{"seq":0,"value":0}"#);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let records = read_topic(kafka, "bridge-example-probe", output).await?;
        if records.iter().any(|r| r.key.as_deref() == Some(&b"probe"[..])) {
            return Ok(attempt);
        }
    }
    Err(flechtwerk::Error::Invalid("the bridge did not subscribe within 30 s".into()))
}
