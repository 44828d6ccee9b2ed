//! Each stage shape as the ordinary user `app` holding exactly its documented ACLs: the counter
//! counts exactly once, two extractor replicas extract exactly once, the MQTT bridge relays
//! every reading once, in order.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flechtwerk::kafka::rdkafka::SaslMechanism;
use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
use flechtwerk::testing::read_topic;
use flechtwerk::Flechtwerk;
use flechtwerk_sim::stages::check_counts;

use crate::acls::{extractor_acls, grant};
use crate::counter_app::{application, prepare};
use crate::{credentials, init_logs, plaintext, secure, unique};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_counts_exactly_once_as_app_with_exactly_the_documented_acls() {
    init_logs();
    let inputs = 400;
    let counter = prepare("counter", inputs, 20).await;
    let (user, password) = credentials("KAFKA_SASL_USER");
    grant(&user, &counter.acls()).await;
    let kafka: Arc<dyn Kafka> = Arc::new(secure(&user, password, SaslMechanism::ScramSha512));
    let app = application(&counter, kafka);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move { app.run_until(async { stopped.await.unwrap_or(()) }).await });
    let reader = plaintext();
    let deadline = Instant::now() + Duration::from_secs(120);
    let outputs = loop {
        let outputs = read_topic(&*reader, &format!("{}-reader", counter.app), &counter.output).await.expect("read");
        if outputs.len() >= inputs || Instant::now() > deadline || running.is_finished() {
            break outputs;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let _ = stop.send(());
    running.await.expect("join").expect("the application ran without error over SASL_SSL as app");
    let (violations, finals) = check_counts(&counter.per_key, &outputs);
    assert!(violations.is_empty(), "exactly-once violated: {violations:?}");
    assert_eq!(finals, counter.per_key, "every key counted to its input count");
    assert_eq!(outputs.len(), inputs, "one output per input");
}

/// The extractor as `app` with exactly its documented ACLs: two replicas split the tokens
/// (the membership group, the per-token transactional ids, the changelog it creates) and every
/// feed's items arrive once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extractor_extracts_exactly_once_as_app_with_exactly_the_documented_acls() {
    use flechtwerk::attribute::{Attribute, INT};
    use flechtwerk::stage::{extractor, Emit};
    use flechtwerk::{Event, Message, State};
    const CURSOR: Attribute<i64> = Attribute::new("cursor", &INT);
    const ITEM: Attribute<i64> = Attribute::new("item", &INT);
    const ITEMS: i64 = 30;
    init_logs();
    let app = unique("extractor");
    let (configs, output) = (format!("{app}-configs"), format!("{app}-out"));
    let kafka = plaintext();
    let admin = kafka.admin().expect("admin");
    admin.create_topic(&NewTopic::new(&configs, 4).replication(1).compacted()).await.expect("create");
    admin.create_topic(&NewTopic::new(&output, 2).replication(1)).await.expect("create");
    let feeds: Vec<String> = (0..8).map(|i| format!("feed-{i}")).collect();
    let producer = kafka.producer(ProducerConfig::idempotent(format!("{app}-writer"))).expect("writer");
    for feed in &feeds {
        producer
            .send(ProducerRecord::new(&configs, feed.clone(), "{\"on\":true}"))
            .await
            .expect("send")
            .await
            .expect("config");
    }
    producer.close().await;
    let (user, password) = credentials("KAFKA_SASL_USER");
    grant(&user, &extractor_acls(&app, &[&configs], &[&output])).await;

    let replica = |client: &str| {
        let out = output.clone();
        let stage = extractor([configs.as_str()]).poll(move |key, _config, state| {
            let cursor = state.get(&CURSOR)?.unwrap_or(0);
            let mut emits = Vec::new();
            // One page per poll: up to five items and the cursor after them.
            let last = (cursor + 5).min(ITEMS);
            for item in cursor + 1..=last {
                emits.push(Emit::Message(Message::new(out.as_str(), key, Event::new().with(&ITEM, item)?)));
            }
            emits.push(Emit::State(State::new().with(&CURSOR, last)?));
            Ok(emits)
        });
        let kafka: Arc<dyn Kafka> = Arc::new(secure(&user, password.clone(), SaslMechanism::ScramSha512));
        Flechtwerk::builder()
            .application_id(&app)
            .client_id(client)
            .kafka(kafka)
            .replication_factor(1)
            .session_timeout(Duration::from_secs(6))
            .poll_interval(Duration::from_millis(100))
            .build(stage)
            .expect("build")
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let running: Vec<_> = ["pod-0", "pod-1"]
        .into_iter()
        .map(|client| {
            let app = replica(client);
            let mut stopped = stopped.clone();
            tokio::spawn(async move {
                app.run_until(async move { stopped.wait_for(|s| *s).await.map(|_| ()).unwrap_or(()) }).await
            })
        })
        .collect();
    let want = feeds.len() * ITEMS as usize;
    let deadline = Instant::now() + Duration::from_secs(120);
    let outputs = loop {
        let outputs = read_topic(&*kafka, &format!("{app}-reader"), &output).await.expect("read");
        if outputs.len() >= want || Instant::now() > deadline || running.iter().any(|r| r.is_finished()) {
            break outputs;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    stop.send(true).expect("replicas listen");
    for run in running {
        run.await.expect("join").expect("the extractor ran without error over SASL_SSL as app");
    }
    let mut per_feed: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for record in &outputs {
        let key = String::from_utf8(record.key.clone().expect("keyed").to_vec()).expect("utf-8");
        let value = Event::wrap(flechtwerk::wire::decode_value(record.value.as_deref()).expect("a JSON object"));
        per_feed.entry(key).or_default().push(value.require(&ITEM).expect("item"));
    }
    let expected: Vec<i64> = (1..=ITEMS).collect();
    for feed in &feeds {
        assert_eq!(per_feed.get(feed), Some(&expected), "{feed}: every item once, in order");
    }
    assert_eq!(outputs.len(), want, "nothing else in the output");
}

/// The MQTT bridge as `app` with exactly its documented ACLs (needs Mosquitto: `MQTT_BROKER`,
/// started by scripts/test): messages published to the config's filter arrive in Kafka, each
/// once and in order, relayed over SASL_SSL with SCRAM-SHA-512 through the instance's one
/// transactional producer; nothing needs a group or a changelog.
#[cfg(feature = "mqtt")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mqtt_bridge_relays_as_app_with_exactly_the_documented_acls() {
    use std::io::Write;

    use flechtwerk::attribute::{Attribute, INT};
    use flechtwerk::mqtt::rumqttc::RumqttcBroker;
    use flechtwerk::stage::{mqtt_extractor, MqttBrokerConfig};
    use flechtwerk::{Event, Message};

    use crate::acls::mqtt_bridge_acls;
    use crate::env;
    const SEQ: Attribute<i64> = Attribute::new("seq", &INT);
    const MESSAGES: i64 = 50;
    init_logs();
    let app = unique("bridge");
    // The client id names the MQTT session on the Mosquitto the run's programs share: unique.
    let (configs, output, client) = (format!("{app}-configs"), format!("{app}-out"), format!("{app}-pod-0"));
    let filter = format!("{app}/+/readings");
    let kafka = plaintext();
    let admin = kafka.admin().expect("admin");
    admin.create_topic(&NewTopic::new(&configs, 1).replication(1).compacted()).await.expect("create");
    admin.create_topic(&NewTopic::new(&output, 2).replication(1)).await.expect("create");
    let producer = kafka.producer(ProducerConfig::idempotent(format!("{app}-writer"))).expect("writer");
    let config = format!(r#"{{"topic":"{filter}"}}"#);
    producer.send(ProducerRecord::new(&configs, "site", config)).await.expect("send").await.expect("config");
    producer.close().await;
    let (user, password) = credentials("KAFKA_SASL_USER");
    grant(&user, &mqtt_bridge_acls(&app, &client, &[&configs], &[&output])).await;

    let mqtt_address = env("MQTT_BROKER");
    let (host, port) = mqtt_address.rsplit_once(':').expect("MQTT_BROKER is host:port");
    let mqtt = RumqttcBroker::new(host, port.parse().expect("a port")).keep_alive(Duration::from_secs(5));
    let out = output.clone();
    let stage = mqtt_extractor([configs.as_str()]).relay(move |_config, topic, payload| {
        Ok(Some(Message::new(out.as_str(), topic, Event::new().with(&SEQ, payload.require(&SEQ)?)?)))
    });
    let bridge = Flechtwerk::builder()
        .application_id(&app)
        .client_id(&client)
        .kafka(Arc::new(secure(&user, password, SaslMechanism::ScramSha512)))
        .replication_factor(1)
        .poll_interval(Duration::from_millis(200))
        .mqtt(MqttBrokerConfig::new(Arc::new(mqtt)))
        .build(stage)
        .expect("build");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move { bridge.run_until(async { stopped.await.unwrap_or(()) }).await });
    let publish = |topic: &str, lines: &[String]| {
        let mut child = std::process::Command::new("mosquitto_pub")
            .args(["-h", host, "-p", port, "-V", "mqttv5", "-q", "1", "-t", topic, "-l"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("mosquitto_pub runs (scripts/mosquitto installs it)");
        child.stdin.take().expect("stdin").write_all(lines.join("\n").as_bytes()).expect("write");
        assert!(child.wait().expect("mosquitto_pub").success(), "mosquitto_pub {topic} failed");
    };
    let seqs_in = |records: &[flechtwerk::wire::RawRecord], topic: &str| -> Vec<i64> {
        records
            .iter()
            .filter(|r| r.key.as_deref() == Some(topic.as_bytes()))
            .map(|r| {
                Event::wrap(flechtwerk::wire::decode_value(r.value.as_deref()).expect("json"))
                    .require(&SEQ)
                    .expect("seq")
            })
            .collect()
    };
    // The bridge subscribes once it polled its configs: a probe until one gets through.
    let probe = format!("{app}/probe/readings");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        publish(&probe, &[r#"{"seq":0}"#.to_owned()]);
        let records = read_topic(&*kafka, &unique("reader"), &output).await.expect("read");
        if !seqs_in(&records, &probe).is_empty() {
            break;
        }
        assert!(Instant::now() < deadline && !running.is_finished(), "the bridge never relayed the probe");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let topic = format!("{app}/dev-1/readings");
    publish(&topic, &(1..=MESSAGES).map(|n| format!(r#"{{"seq":{n}}}"#)).collect::<Vec<_>>());
    let deadline = Instant::now() + Duration::from_secs(60);
    let seqs = loop {
        let records = read_topic(&*kafka, &unique("reader"), &output).await.expect("read");
        let seqs = seqs_in(&records, &topic);
        if seqs.len() >= MESSAGES as usize || Instant::now() > deadline || running.is_finished() {
            break seqs;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let _ = stop.send(());
    running.await.expect("join").expect("the bridge ran without error over SASL_SSL as app");
    assert_eq!(seqs, (1..=MESSAGES).collect::<Vec<_>>(), "every reading once, in order");
}
