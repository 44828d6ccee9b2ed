//! The librdkafka adapter over TLS and SASL against Apache Kafka's SASL_SSL listener, with ACLs
//! (docs/security.md): the counter counts exactly once as the ordinary user `app` holding
//! exactly the transformer's documented ACLs, and two extractor replicas extract exactly once
//! holding exactly the extractor's; the conformance scenarios pass over SASL_SSL; a
//! wrong password, an untrusted certificate, a plaintext client on the TLS port and each missing
//! ACL end `run()` with a named error within a bound and commit nothing; no log line or error
//! of a failing run holds a password or key material.
//!
//! Needs `--features rdkafka` and the broker of `scripts/kafka start` (which `scripts/test`
//! starts): `KAFKA_BOOTSTRAP` (PLAINTEXT: topics are created, fed and checked there as the
//! super user ANONYMOUS), `KAFKA_SECURE_BOOTSTRAP`, `KAFKA_CA_FILE`, `KAFKA_SASL_ADMIN`,
//! `KAFKA_SASL_USER`. ACLs are granted with `scripts/kafka acl` (override:
//! `KAFKA_ACL_COMMAND`, a command taking AclCommand's arguments).
//!
//! `--nocapture` prints each refusal's text and time (`REFUSED ...`). Debugging aids:
//! `SECURE_TEST_DUMP_LOGS=1` prints the captured warnings and errors after each refusal,
//! `SECURE_TEST_LOG_FILE=path` writes everything the secret grep read.

#![cfg(all(feature = "rdkafka", not(madsim)))]

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flechtwerk::kafka::rdkafka::{builtin_features, RdKafka, SaslMechanism, Secret, Security};
use flechtwerk::kafka::{
    ConsumerConfig, Kafka, KafkaError, KafkaErrorKind, NewTopic, ProducerConfig, ProducerRecord, TopicPartition,
};
use flechtwerk::testing::conformance::{scenarios, Env};
use flechtwerk::testing::read_topic;
use flechtwerk::Flechtwerk;
use flechtwerk_sim::stages::{check_counts, counter};

/// Refused connections and missing ACLs must end `run()` within this bound (measured: well
/// under it; see docs/security.md). Generous: the test binary runs its tests in parallel on a
/// shared 2-core machine.
const REFUSAL_BOUND: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Environment and log capture
// ---------------------------------------------------------------------------------------------

fn env(name: &str) -> String {
    std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| {
        panic!("{name} is not set: run through scripts/test, or `scripts/kafka start` and export what it prints")
    })
}

fn credentials(name: &str) -> (String, Secret) {
    let value = env(name);
    let (user, password) = value.split_once(':').unwrap_or_else(|| panic!("{name} is not user:password"));
    (user.to_owned(), Secret::new(password))
}

fn unique(what: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_nanos();
    format!("sec-{what}-{}-{nanos:x}", std::process::id())
}

/// Every log line of this test binary (all levels of flechtwerk and librdkafka), for the grep.
fn captured() -> &'static Mutex<Vec<u8>> {
    static CAPTURED: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
    CAPTURED.get_or_init(|| Mutex::new(Vec::new()))
}

struct Capture;

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        captured().lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn init_logs() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
            .with_ansi(false)
            .with_writer(|| Capture)
            .init();
    });
}

fn plaintext() -> Arc<dyn Kafka> {
    Arc::new(RdKafka::new(env("KAFKA_BOOTSTRAP")))
}

fn secure(user: &str, password: Secret, mechanism: SaslMechanism) -> RdKafka {
    RdKafka::new(env("KAFKA_SECURE_BOOTSTRAP"))
        .with_security(Security::sasl_ssl(mechanism, user, password).with_ca_file(env("KAFKA_CA_FILE")))
        .expect("this build has TLS and SASL")
}

// ---------------------------------------------------------------------------------------------
// ACLs: what docs/security.md lists for a transformer, granted with Kafka's AclCommand
// ---------------------------------------------------------------------------------------------

/// One `kafka-acls.sh --add` invocation: principal, pattern type, operations, resources.
#[derive(Clone, Debug, PartialEq)]
struct Grant {
    pattern: &'static str,
    operations: Vec<&'static str>,
    resource: (&'static str, String),
}

impl Grant {
    fn literal(operations: &[&'static str], kind: &'static str, name: &str) -> Self {
        Grant { pattern: "literal", operations: operations.to_vec(), resource: (kind, name.to_owned()) }
    }
    fn prefixed(operations: &[&'static str], kind: &'static str, name: &str) -> Self {
        Grant { pattern: "prefixed", operations: operations.to_vec(), resource: (kind, name.to_owned()) }
    }

    /// The AclCommand arguments after `--add --allow-principal User:<user>`.
    fn args(&self) -> Vec<String> {
        let mut args = vec!["--resource-pattern-type".to_owned(), self.pattern.to_owned()];
        for operation in &self.operations {
            args.push("--operation".into());
            args.push((*operation).into());
        }
        args.push(format!("--{}", self.resource.0));
        args.push(self.resource.1.clone());
        args
    }
}

/// The transformer's ACLs (docs/security.md, "Transformer"): one line each.
fn transformer_acls(app: &str, inputs: &[&str], configs: &[&str], outputs: &[&str]) -> Vec<Grant> {
    let mut grants = Vec::new();
    for input in inputs {
        grants.push(Grant::literal(&["Read", "Describe"], "topic", input));
    }
    for config in configs {
        grants.push(Grant::literal(&["Read", "Describe"], "topic", config));
    }
    for output in outputs {
        grants.push(Grant::literal(&["Write", "Describe"], "topic", output));
    }
    grants.push(Grant::literal(&["Read", "Write", "Describe", "Create"], "topic", &format!("{app}-changelog")));
    grants.push(Grant::literal(&["Read", "Describe"], "group", app));
    grants.push(Grant::prefixed(&["Write", "Describe"], "transactional-id", &format!("{app}-")));
    grants
}

/// The extractor's ACLs (docs/security.md, "Extractor"): one line each.
fn extractor_acls(app: &str, configs: &[&str], outputs: &[&str]) -> Vec<Grant> {
    let mut grants = Vec::new();
    for config in configs {
        grants.push(Grant::literal(&["Read", "Describe"], "topic", config));
    }
    for output in outputs {
        grants.push(Grant::literal(&["Write", "Describe"], "topic", output));
    }
    grants.push(Grant::literal(&["Read", "Write", "Describe", "Create"], "topic", &format!("{app}-changelog")));
    grants.push(Grant::literal(&["Read", "Describe"], "group", app));
    grants.push(Grant::prefixed(&["Write", "Describe"], "transactional-id", &format!("{app}-")));
    grants
}

/// The MQTT bridge's ACLs (docs/security.md, "MQTT bridge"): one line each. No group and no
/// changelog: the broker-dispatched loop takes no lease and keeps no state (EXT-50, EXT-51).
fn mqtt_bridge_acls(app: &str, client_id: &str, configs: &[&str], outputs: &[&str]) -> Vec<Grant> {
    let mut grants = Vec::new();
    for config in configs {
        grants.push(Grant::literal(&["Read", "Describe"], "topic", config));
    }
    for output in outputs {
        grants.push(Grant::literal(&["Write", "Describe"], "topic", output));
    }
    grants.push(Grant::literal(&["Write", "Describe"], "transactional-id", &format!("{app}-{client_id}")));
    grants
}

fn acl_command() -> Vec<String> {
    match std::env::var("KAFKA_ACL_COMMAND") {
        Ok(command) if !command.is_empty() => command.split_whitespace().map(str::to_owned).collect(),
        _ => vec![format!("{}/scripts/kafka", env!("CARGO_MANIFEST_DIR")), "acl".into()],
    }
}

/// Grants `grants` to `user`, one AclCommand run per grant, concurrently.
async fn grant(user: &str, grants: &[Grant]) {
    let runs = grants.iter().map(|g| {
        let mut command = acl_command();
        command.extend(["--add".to_owned(), "--allow-principal".to_owned(), format!("User:{user}")]);
        command.extend(g.args());
        async move {
            let output = tokio::process::Command::new(&command[0])
                .args(&command[1..])
                .output()
                .await
                .unwrap_or_else(|e| panic!("running {command:?}: {e}"));
            assert!(output.status.success(), "{command:?} failed: {}", String::from_utf8_lossy(&output.stderr));
        }
    });
    futures::future::join_all(runs).await;
}

// ---------------------------------------------------------------------------------------------
// The counter application
// ---------------------------------------------------------------------------------------------

struct Counter {
    app: String,
    input: String,
    output: String,
    configs: String,
    per_key: BTreeMap<String, i64>,
}

impl Counter {
    fn changelog(&self) -> String {
        format!("{}-changelog", self.app)
    }

    fn acls(&self) -> Vec<Grant> {
        transformer_acls(&self.app, &[&self.input], &[&self.configs], &[&self.output])
    }
}

/// Topics created and inputs fed over PLAINTEXT (as the super user): the application's
/// principal needs none of that.
async fn prepare(what: &str, inputs: usize, keys: usize) -> Counter {
    let app = unique(what);
    let counter = Counter {
        input: format!("{app}-in"),
        output: format!("{app}-out"),
        configs: format!("{app}-configs"),
        app,
        per_key: BTreeMap::new(),
    };
    let kafka = plaintext();
    let admin = kafka.admin().expect("admin");
    for (topic, compact) in [(&counter.input, false), (&counter.output, false), (&counter.configs, true)] {
        let mut spec = NewTopic::new(topic.as_str(), 2).replication(1);
        if compact {
            spec = spec.compacted();
        }
        admin.create_topic(&spec).await.expect("create topic");
    }
    let mut counter = counter;
    let producer = kafka.producer(ProducerConfig::idempotent(format!("{}-feeder", counter.app))).expect("feeder");
    let mut deliveries = Vec::new();
    for i in 0..inputs {
        let key = format!("key-{}", i % keys);
        *counter.per_key.entry(key.clone()).or_default() += 1;
        let record = ProducerRecord::new(&counter.input, key, format!(r#"{{"i":{i}}}"#));
        deliveries.push(producer.send(record).await.expect("send"));
    }
    for delivery in deliveries {
        delivery.await.expect("fed");
    }
    producer.close().await;
    counter
}

fn application(app: &Counter, kafka: Arc<dyn Kafka>) -> Flechtwerk {
    Flechtwerk::builder()
        .application_id(&app.app)
        .client_id("pod-0")
        .kafka(kafka)
        .replication_factor(1)
        .session_timeout(Duration::from_secs(6))
        .build(counter(&app.input, &app.output, Some(&app.configs)))
        .expect("build")
}

/// Runs the application expecting it to fail: its error and how long it took.
async fn run_refused(counter: &Counter, kafka: Arc<dyn Kafka>) -> (flechtwerk::Error, Duration) {
    let app = application(counter, kafka);
    let started = Instant::now();
    let outcome = tokio::time::timeout(REFUSAL_BOUND * 2, app.run()).await;
    let took = started.elapsed();
    match outcome {
        Ok(Err(error)) => (error, took),
        Ok(Ok(never)) => match never {},
        Err(_) => panic!("run() did not end within {:?}: a hang or a retry loop", REFUSAL_BOUND * 2),
    }
}

fn kafka_error(error: &flechtwerk::Error) -> &KafkaError {
    match error {
        flechtwerk::Error::Kafka(e) => e,
        other => panic!("expected a Kafka error, got {other:?}"),
    }
}

/// Nothing of the application committed: no output, no changelog record, no group offset.
async fn nothing_committed(counter: &Counter) {
    let kafka = plaintext();
    let outputs = read_topic(&*kafka, &format!("{}-check", counter.app), &counter.output).await.expect("read");
    assert!(outputs.is_empty(), "outputs committed: {}", outputs.len());
    match read_topic(&*kafka, &format!("{}-check", counter.app), &counter.changelog()).await {
        Ok(changes) => assert!(changes.is_empty(), "changelog records committed: {}", changes.len()),
        Err(e) => assert_eq!(e.kind(), KafkaErrorKind::UnknownTopic, "{e}"),
    }
    let mut group = kafka.consumer(ConsumerConfig::member(format!("{}-check", counter.app), &counter.app)).expect("c");
    let committed = group
        .committed(&[TopicPartition::new(&counter.input, 0), TopicPartition::new(&counter.input, 1)])
        .await
        .expect("committed offsets");
    assert_eq!(committed, vec![None, None], "input offsets committed");
    group.close().await.expect("close");
}

fn report(case: &str, error: &flechtwerk::Error, took: Duration) {
    // Shown with --nocapture (scripts/test prints it): the text a user sees, and the time.
    println!("REFUSED {case} after {:.1} s: {error}", took.as_secs_f64());
    if std::env::var_os("SECURE_TEST_DUMP_LOGS").is_some() {
        let logs = String::from_utf8_lossy(&captured().lock().expect("capture").clone()).into_owned();
        println!("  ({} captured lines)", logs.lines().count());
        for line in logs.lines().filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("FAIL")) {
            println!("  {line}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

/// docs/security.md lists, as `kafka-acls.sh` commands, exactly what `transformer_acls` grants
/// (the test below grants nothing else).
#[test]
fn the_documented_transformer_acls_are_the_ones_granted() {
    let granted = transformer_acls("APPLICATION_ID", &["INPUT"], &["CONFIG"], &["OUTPUT"]);
    assert_eq!(documented_acls("### Transformer"), commands(&granted), "docs/security.md and transformer_acls differ");
}

/// docs/security.md's extractor commands are exactly what `extractor_acls` grants.
#[test]
fn the_documented_extractor_acls_are_the_ones_granted() {
    let granted = extractor_acls("APPLICATION_ID", &["CONFIG"], &["OUTPUT"]);
    assert_eq!(documented_acls("### Extractor"), commands(&granted), "docs/security.md and extractor_acls differ");
}

/// docs/security.md's MQTT bridge commands are exactly what `mqtt_bridge_acls` grants.
#[test]
fn the_documented_mqtt_bridge_acls_are_the_ones_granted() {
    let granted = mqtt_bridge_acls("APPLICATION_ID", "CLIENT_ID", &["CONFIG"], &["OUTPUT"]);
    assert_eq!(documented_acls("### MQTT bridge"), commands(&granted), "docs/security.md and mqtt_bridge_acls differ");
}

/// The `kafka-acls.sh` lines of one section of docs/security.md.
fn documented_acls(section: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/security.md")).expect("docs");
    let start = doc.find(section).unwrap_or_else(|| panic!("docs/security.md has no {section}"));
    let rest = &doc[start + section.len()..];
    let end = rest.find("\n### ").unwrap_or(rest.len());
    rest[..end]
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("kafka-acls.sh --add --allow-principal User:APP "))
        .map(str::to_owned)
        .collect()
}

fn commands(grants: &[Grant]) -> Vec<String> {
    grants.iter().map(|g| format!("kafka-acls.sh --add --allow-principal User:APP {}", g.args().join(" "))).collect()
}

#[test]
fn librdkafka_has_tls_and_sasl_built_in() {
    let features = builtin_features();
    for feature in ["ssl", "sasl_plain", "sasl_scram", "sasl_oauthbearer"] {
        assert!(features.iter().any(|f| f == feature), "{feature} missing: {features:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mechanism_connects_over_sasl_ssl() {
    init_logs();
    let topic = unique("mechanisms");
    plaintext().admin().expect("admin").create_topic(&NewTopic::new(&topic, 3).replication(1)).await.expect("create");
    let (admin, password) = credentials("KAFKA_SASL_ADMIN");
    for mechanism in [SaslMechanism::ScramSha256, SaslMechanism::ScramSha512, SaslMechanism::Plain] {
        let kafka = secure(&admin, password.clone(), mechanism);
        let count = kafka.admin().expect("admin").partition_count(&topic).await;
        assert_eq!(count.expect("metadata over SASL_SSL"), Some(3), "{mechanism:?}");
    }
}

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
    use flechtwerk::attribute::{Attribute, INT};
    use flechtwerk::mqtt::rumqttc::RumqttcBroker;
    use flechtwerk::stage::{mqtt_extractor, MqttBrokerConfig};
    use flechtwerk::{Event, Message};
    const SEQ: Attribute<i64> = Attribute::new("seq", &INT);
    const MESSAGES: i64 = 50;
    init_logs();
    let app = unique("bridge");
    let (configs, output, client) = (format!("{app}-configs"), format!("{app}-out"), "pod-0");
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
    grant(&user, &mqtt_bridge_acls(&app, client, &[&configs], &[&output])).await;

    let mqtt_address = env("MQTT_BROKER");
    let (host, port) = mqtt_address.rsplit_once(':').expect("MQTT_BROKER is host:port");
    let mqtt = RumqttcBroker::new(host, port.parse().expect("a port")).keep_alive(Duration::from_secs(5));
    let out = output.clone();
    let stage = mqtt_extractor([configs.as_str()]).relay(move |_config, topic, payload| {
        Ok(Some(Message::new(out.as_str(), topic, Event::new().with(&SEQ, payload.require(&SEQ)?)?)))
    });
    let bridge = Flechtwerk::builder()
        .application_id(&app)
        .client_id(client)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_scenarios_pass_over_sasl_ssl() {
    init_logs();
    let (admin, password) = credentials("KAFKA_SASL_ADMIN");
    let kafka = secure(&admin, password, SaslMechanism::ScramSha512);
    let env = Env::new(unique("conformance"));
    let mut failures = Vec::new();
    for scenario in scenarios() {
        if scenario.name == "broker-restart" {
            // Restarting the broker would break the tests running beside this one; the
            // plaintext suite (tests/conformance_rdkafka.rs) runs it.
            println!("SKIP {} (restarts the broker)", scenario.name);
            continue;
        }
        let scoped = Env { prefix: format!("{}-{}", env.prefix, scenario.name), ..env.clone() };
        match (scenario.run)(&kafka, &scoped).await {
            Ok(()) => println!("PASS {} over SASL_SSL", scenario.name),
            Err(failure) => failures.push(format!("{}: {failure}", scenario.name)),
        }
    }
    assert!(failures.is_empty(), "over SASL_SSL:\n  {}", failures.join("\n  "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_refused() {
    init_logs();
    let counter = prepare("wrongpw", 10, 5).await;
    let (user, _) = credentials("KAFKA_SASL_USER");
    let wrong = Secret::new(format!("wrong-{}", unique("password")));
    let kafka: Arc<dyn Kafka> = Arc::new(secure(&user, wrong.clone(), SaslMechanism::ScramSha512));
    let (error, took) = run_refused(&counter, kafka).await;
    report("wrong password", &error, took);
    let e = kafka_error(&error);
    assert_eq!(e.kind(), KafkaErrorKind::Authentication, "{error}");
    assert!(error.to_string().contains("SASL authentication failed"), "{error}");
    assert!(took < REFUSAL_BOUND, "took {took:?}");
    assert!(!format!("{error} {error:?}").contains(wrong.expose()), "the password is in the error");
    nothing_committed(&counter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_refused() {
    init_logs();
    let counter = prepare("untrusted", 10, 5).await;
    let (user, password) = credentials("KAFKA_SASL_USER");
    // The system trust store does not know the throwaway CA that signed the broker's cert.
    let kafka: Arc<dyn Kafka> = Arc::new(
        RdKafka::new(env("KAFKA_SECURE_BOOTSTRAP"))
            .with_security(Security::sasl_ssl(SaslMechanism::ScramSha512, user, password))
            .expect("security"),
    );
    let (error, took) = run_refused(&counter, kafka).await;
    report("untrusted certificate", &error, took);
    assert_eq!(kafka_error(&error).kind(), KafkaErrorKind::Authentication, "{error}");
    assert!(error.to_string().contains("TLS handshake failed"), "{error}");
    assert!(error.to_string().contains("certificate verify failed"), "{error}");
    assert!(took < REFUSAL_BOUND, "took {took:?}");
    nothing_committed(&counter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_client_on_the_tls_port_is_refused() {
    init_logs();
    let counter = prepare("plainontls", 10, 5).await;
    let kafka: Arc<dyn Kafka> = Arc::new(RdKafka::new(env("KAFKA_SECURE_BOOTSTRAP")));
    let (error, took) = run_refused(&counter, kafka).await;
    report("plaintext client on the TLS port", &error, took);
    assert_eq!(kafka_error(&error).kind(), KafkaErrorKind::Authentication, "{error}");
    assert!(error.to_string().contains("plaintext client on a TLS listener"), "{error}");
    assert!(took < REFUSAL_BOUND, "took {took:?}");
    nothing_committed(&counter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_on_the_plaintext_port_is_refused() {
    init_logs();
    let counter = prepare("tlsonplain", 10, 5).await;
    let (user, password) = credentials("KAFKA_SASL_USER");
    let kafka: Arc<dyn Kafka> = Arc::new(
        RdKafka::new(env("KAFKA_BOOTSTRAP"))
            .with_security(
                Security::sasl_ssl(SaslMechanism::ScramSha512, user, password).with_ca_file(env("KAFKA_CA_FILE")),
            )
            .expect("security"),
    );
    let (error, took) = run_refused(&counter, kafka).await;
    report("TLS client on the plaintext port", &error, took);
    assert_eq!(kafka_error(&error).kind(), KafkaErrorKind::Authentication, "{error}");
    assert!(error.to_string().contains("TLS client on a plaintext listener"), "{error}");
    assert!(took < REFUSAL_BOUND, "took {took:?}");
    nothing_committed(&counter).await;
}

/// Grants the transformer's ACLs but `missing`, runs the counter as app, expects an
/// authorization error whose text contains `names`.
async fn missing_acl(case: &str, missing: impl Fn(&Grant) -> Option<Grant>, names: &[&str]) {
    init_logs();
    let counter = prepare(case, 20, 5).await;
    let (user, password) = credentials("KAFKA_SASL_USER");
    let grants: Vec<Grant> = counter.acls().iter().filter_map(&missing).collect();
    assert_ne!(grants, counter.acls(), "the case takes something away");
    grant(&user, &grants).await;
    let kafka: Arc<dyn Kafka> = Arc::new(secure(&user, password, SaslMechanism::ScramSha512));
    let (error, took) = run_refused(&counter, kafka).await;
    report(case, &error, took);
    assert_eq!(kafka_error(&error).kind(), KafkaErrorKind::Authorization, "{error}");
    for name in names {
        let name = name.replace("{app}", &counter.app);
        assert!(error.to_string().contains(&name), "{name:?} not in: {error}");
    }
    assert!(took < REFUSAL_BOUND, "took {took:?}");
    nothing_committed(&counter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_write_on_the_output_is_refused() {
    missing_acl(
        "nowrite",
        |g| {
            if g.resource.1.ends_with("-out") {
                None
            } else {
                Some(g.clone())
            }
        },
        &["{app}-out", "Topic authorization failed", "Write on the topic"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_transactional_id_permission_is_refused() {
    missing_acl(
        "notxnid",
        |g| (g.resource.0 != "transactional-id").then(|| g.clone()),
        &["transactional id {app}-", "Transactional Id authorization failed"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_group_read_is_refused() {
    missing_acl(
        "nogroup",
        |g| (g.resource.0 != "group").then(|| g.clone()),
        &["group {app}", "Group authorization failed"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_describe_on_a_config_topic_is_not_reported_as_missing() {
    missing_acl(
        "noconfig",
        |g| (!g.resource.1.ends_with("-configs")).then(|| g.clone()),
        &["{app}-configs", "Topic authorization failed"],
    )
    .await;
}

/// librdkafka's debug output on (every context), a client key given as PEM.
fn debugging(user: &str, password: Secret, key: &ClientKey) -> RdKafka {
    let mut settings = BTreeMap::new();
    settings.insert("debug".to_owned(), "all".to_owned());
    RdKafka::with_settings(env("KAFKA_SECURE_BOOTSTRAP"), settings)
        .expect("debug is no reserved setting")
        .with_security(
            Security::sasl_ssl(SaslMechanism::ScramSha512, user, password)
                .with_ca_file(env("KAFKA_CA_FILE"))
                .with_client_certificate_pem(key.certificate.clone(), Secret::new(key.key.clone()), None),
        )
        .expect("security")
}

/// Two failing runs with librdkafka's debug output on (every context) and a client key given as
/// PEM — one with the real password that gets as far as the first transaction (every ACL but
/// Write on the output), one with a wrong password: neither password nor the key appears in any
/// captured log line, error or `Debug`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_leak_into_logs_or_errors() {
    init_logs();
    let counter = prepare("secrets", 10, 5).await;
    let (user, password) = credentials("KAFKA_SASL_USER");
    let grants: Vec<Grant> = counter.acls().into_iter().filter(|g| !g.resource.1.ends_with("-out")).collect();
    grant(&user, &grants).await;
    let key = client_key();
    let kafka = debugging(&user, password.clone(), &key);
    let printed = format!("{kafka:?}");
    let (error, took) = run_refused(&counter, Arc::new(kafka)).await;
    report("no Write on the output, debug=all (secret grep run)", &error, took);
    assert_eq!(kafka_error(&error).kind(), KafkaErrorKind::Authorization, "{error}");
    let wrong = Secret::new(format!("wrong-{}", unique("pw")));
    let (wrong_error, _) = run_refused(&counter, Arc::new(debugging(&user, wrong.clone(), &key))).await;
    assert_eq!(kafka_error(&wrong_error).kind(), KafkaErrorKind::Authentication, "{wrong_error}");

    let logs = String::from_utf8_lossy(&captured().lock().expect("capture").clone()).into_owned();
    if let Some(path) = std::env::var_os("SECURE_TEST_LOG_FILE") {
        std::fs::write(path, &logs).expect("writing the captured logs");
    }
    assert!(logs.contains("librdkafka"), "librdkafka's logs were captured");
    assert!(logs.contains("sasl.password = [redacted]"), "librdkafka dumped its configuration, redacted");
    assert!(logs.lines().count() > 1000, "debug output was captured ({} lines)", logs.lines().count());
    let key_lines: Vec<&str> = key.key.lines().filter(|l| !l.starts_with("-----") && l.len() >= 16).collect();
    assert!(!key_lines.is_empty());
    let texts = [
        ("logs", logs.as_str()),
        ("error", &format!("{error} {error:?}")),
        ("wrong-password error", &format!("{wrong_error} {wrong_error:?}")),
        ("RdKafka Debug", &printed),
    ];
    for (what, text) in texts {
        assert!(!text.contains(password.expose()), "the password is in the {what}");
        assert!(!text.contains(wrong.expose()), "the wrong password is in the {what}");
        for line in &key_lines {
            assert!(!text.contains(line), "key material is in the {what}");
        }
    }
    println!(
        "secret grep: {} captured log lines ({} bytes), the errors and Debug: no password, no key line",
        logs.lines().count(),
        logs.len()
    );
}

struct ClientKey {
    certificate: String,
    key: String,
}

/// A self-signed certificate and its unencrypted key (openssl, as scripts/kafka uses).
fn client_key() -> ClientKey {
    let dir = std::env::temp_dir().join(unique("client-key"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let status = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=app"])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl");
    assert!(status.success());
    let key = ClientKey {
        certificate: std::fs::read_to_string(dir.join("cert.pem")).expect("cert"),
        key: std::fs::read_to_string(dir.join("key.pem")).expect("key"),
    };
    let _ = std::fs::remove_dir_all(&dir);
    key
}
