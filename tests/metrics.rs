//! The Prometheus observer against the Python reference and against the engine's own events
//! (MET-01..06): needs `--features prometheus`.
//!
//! - Parity: the same hook calls as `tests/golden/python_metrics.py` give the exposition the
//!   real flechtwerk 0.17.0 package wrote (`tests/golden/python_metrics_exposition.txt`), family
//!   by family and sample by sample, less what this port leaves out on purpose.
//! - Counts: the counter transformer on the in-process cluster, with the Prometheus observer and
//!   a recording observer on the same run: every metric equals what the recorded events add up
//!   to, and families without events are absent.
//! - The endpoint: served while the run lasts (port free again after), a taken port fails the
//!   start (LIFE-17), the text format's content type.

#![cfg(all(feature = "prometheus", not(madsim)))]

mod metrics_support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
use flechtwerk::observer::prometheus::text::go_float;
use flechtwerk::observer::prometheus::{batch_size_buckets, Metrics, PrometheusObserver, BYTE_BUCKETS};
use flechtwerk::observer::{ConfigView, InvalidOutcome, Observer};
use flechtwerk::testing::{read_topic, Observed, RecordingObserver};
use flechtwerk::wire::InvalidMessageAction;
use flechtwerk::{transformer, Error, Event, Flechtwerk, Message};
use flechtwerk_sim::cluster::LocalCluster;
use flechtwerk_sim::stages::{COUNT, KEY, LABEL};
use metrics_support::{http_get, label_names, parse, samples, series};

const GOLDEN: &str = include_str!("golden/python_metrics_exposition.txt");

/// Every family this port exposes (all 32 of Python 0.17's), pinned.
const RUST_FAMILIES: [&str; 32] = [
    "flechtwerk_active_configs",
    "flechtwerk_batch_processing_seconds",
    "flechtwerk_batch_size",
    "flechtwerk_config_messages_in_total",
    "flechtwerk_config_store_bytes",
    "flechtwerk_config_store_entries",
    "flechtwerk_config_store_restored_entries_total",
    "flechtwerk_keyring_keys_loaded",
    "flechtwerk_message_in_bytes",
    "flechtwerk_message_in_max_bytes",
    "flechtwerk_message_out_bytes",
    "flechtwerk_message_out_max_bytes",
    "flechtwerk_message_processing_seconds",
    "flechtwerk_messages_in_total",
    "flechtwerk_messages_invalid_total",
    "flechtwerk_messages_out_total",
    "flechtwerk_mqtt_buffered_messages",
    "flechtwerk_mqtt_connects_total",
    "flechtwerk_mqtt_disconnects_total",
    "flechtwerk_mqtt_messages_dropped_total",
    "flechtwerk_mqtt_messages_in_total",
    "flechtwerk_poll_cycle_seconds",
    "flechtwerk_secret_decrypts_total",
    "flechtwerk_secret_plaintext_reads_total",
    "flechtwerk_secret_unsigned_reads_total",
    "flechtwerk_secret_verifications_total",
    "flechtwerk_state_record_bytes",
    "flechtwerk_state_record_max_bytes",
    "flechtwerk_state_restored_entries_total",
    "flechtwerk_tasks_assigned",
    "flechtwerk_tokens_assigned",
    "flechtwerk_transactions_committed_total",
];

/// A config store view of a given wire size (what Python's `config_store_bytes(n)` is told).
struct Weighs(usize);

impl ConfigView for Weighs {
    fn len(&self) -> usize {
        0
    }
    fn wire_bytes(&self) -> usize {
        self.0
    }
    fn for_each_entry(&self, _: &mut dyn FnMut(&str, &[u8])) {}
}

/// `tests/golden/python_metrics.py`'s calls, hook for hook (its `*_scope` blocks become the
/// durations they were timed at; `config_store_bytes(n)` is `config_store_updated` of a store of
/// that size; the keyring and secret hooks have no counterpart).
fn replay_golden_script(observer: &dyn Observer) {
    let secs = Duration::from_secs_f64;
    observer.tasks_assigned(2);
    observer.state_restored(0, 3);
    observer.state_restored(1, 0);
    for n in [120, 256, 257, 1_014_623] {
        observer.message_in_bytes("in", n);
    }
    observer.message_in_bytes("in", 100);
    observer.message_in_bytes("other-in", 5_000_000);
    for _ in 0..4 {
        observer.message_in("in");
    }
    observer.message_in("other-in");
    observer.message_invalid("in", InvalidOutcome::Raised);
    observer.message_invalid("in", InvalidOutcome::Skipped);
    observer.message_invalid("in", InvalidOutcome::Substituted);
    for d in [0.004, 0.3, 12.0] {
        observer.message_out("out");
        observer.message_processed(secs(d));
    }
    observer.message_out_bytes("out", 300);
    observer.message_out_bytes("out", 2_000_000);
    observer.batch_processed(1, secs(0.02));
    observer.batch_processed(499, secs(700.0));
    observer.batch_processed(500, secs(0.05));
    for n in [50, 4096, 100] {
        observer.state_record_bytes(n);
    }
    observer.transaction_committed();
    observer.transaction_committed();
    observer.config_store_restored(7);
    observer.config_store_updated(&Weighs(1234));
    observer.config_store_entries(7);
    observer.config_message_in("configs");
    observer.config_store_updated(&Weighs(1400));
    observer.config_store_entries(8);
    observer.tokens_assigned(3);
    observer.active_configs(5);
    observer.poll_cycle(secs(0.6));
    observer.poll_cycle(secs(45.0));
    observer.mqtt_connected();
    observer.mqtt_message_in("sensors/+/temp");
    observer.mqtt_message_in("sensors/+/temp");
    observer.mqtt_buffered("sensors/+/temp", 17);
    for reason in ["filtered", "poison", "unsubscribed"] {
        observer.mqtt_message_dropped("sensors/+/temp", reason);
    }
    observer.mqtt_message_dropped("(unmatched)", "stale");
    observer.mqtt_disconnected();
    observer.keyring_key_loaded("k1");
    observer.keyring_key_loaded("k2");
    observer.secret_plaintext_read("");
    observer.secret_decrypted("tenant", "k1");
    observer.secret_unsigned_read("tenant");
    observer.secret_verified("tenant", "k2");
}

fn demo_labels() -> Vec<(String, String)> {
    vec![("app".to_owned(), "demo".to_owned())]
}

/// MET-01..06 against the real package: every family Python 0.17 writes for the same calls, with
/// the same type, help text, label names, bucket bounds and sample values, byte for byte per
/// sample line, except the `*_created` series; the keyring and secret families (SEC-06) included.
#[test]
fn parity_with_the_python_exposition_sample_for_sample() {
    let observer = PrometheusObserver::new(&demo_labels(), 500).unwrap();
    replay_golden_script(&observer);
    let rust = parse(&observer.render());
    let python = parse(GOLDEN);

    let created: BTreeSet<&str> = python
        .iter()
        .filter(|(name, family)| name.ends_with("_created") && family.kind == "gauge")
        .map(|(name, _)| name.as_str())
        .collect();
    // Every `_created` family belongs to a counter or histogram family.
    for name in &created {
        let base = name.trim_end_matches("_created");
        assert!(python.contains_key(base) || python.contains_key(&format!("{base}_total")), "{name}");
    }
    let expected: BTreeSet<&str> = python.keys().map(String::as_str).filter(|name| !created.contains(name)).collect();
    let actual: BTreeSet<&str> = rust.keys().map(String::as_str).collect();
    assert_eq!(actual, expected, "the families");
    assert_eq!(actual, RUST_FAMILIES.into_iter().collect(), "the pinned list");
    assert_eq!(python.len(), 32 + created.len(), "Python 0.17 has 32 families (and their _created twins)");

    for name in &expected {
        let (r, p) = (&rust[*name], &python[*name]);
        assert_eq!(r.kind, p.kind, "type of {name}");
        assert_eq!(r.help, p.help, "help of {name}");
        assert_eq!(r.samples, p.samples, "samples of {name}");
    }
}

/// The weaker claim the strong one implies, spelled out: names, types, label names and bounds.
#[test]
fn parity_of_names_types_labels_and_bounds() {
    let observer = PrometheusObserver::new(&demo_labels(), 500).unwrap();
    replay_golden_script(&observer);
    let signature = |families: &BTreeMap<String, metrics_support::Family>| {
        families
            .iter()
            .filter(|(name, _)| RUST_FAMILIES.contains(&name.as_str()))
            .map(|(name, f)| {
                let labels: BTreeSet<Vec<String>> = f.samples.iter().map(|s| label_names(s)).collect();
                let bounds: BTreeSet<String> = f
                    .samples
                    .iter()
                    .filter_map(|s| s.split("le=\"").nth(1).map(|rest| rest.split('"').next().unwrap().to_owned()))
                    .collect();
                (name.clone(), f.kind.clone(), labels, bounds)
            })
            .collect::<Vec<_>>()
    };
    let rust = signature(&parse(&observer.render()));
    assert_eq!(rust, signature(&parse(GOLDEN)));
    // And what they are, for the record: the caller's labels first, the family's own after.
    let by_name: BTreeMap<_, _> = rust.iter().map(|(n, k, l, _)| (n.as_str(), (k.as_str(), l))).collect();
    assert_eq!(by_name["flechtwerk_messages_invalid_total"].1.iter().next().unwrap(), &["app", "outcome", "topic"]);
    assert_eq!(by_name["flechtwerk_message_in_bytes"].0, "histogram");
}

// ---------------------------------------------------------------------------------------------
// Counts on a real run.

/// Records the config store's wire size at every update, and checks the O(1) count against a
/// walk of the store.
#[derive(Default)]
struct StoreBytes(Mutex<Vec<usize>>);

impl Observer for StoreBytes {
    fn config_store_updated(&self, store: &dyn ConfigView) {
        let mut walked = 0;
        store.for_each_entry(&mut |k, v| walked += k.len() + v.len());
        assert_eq!(store.wire_bytes(), walked, "the store's wire bytes are its keys plus values");
        self.0.lock().unwrap().push(walked);
    }
}

/// What a recording adds up to, as exposition series → value (the `*_seconds` buckets and sums
/// are timings: only their counts are compared).
fn expected_from(
    events: &[Observed],
    store_bytes: &[usize],
    labels: &[(&str, &str)],
    cap: usize,
) -> BTreeMap<String, f64> {
    let mut expected: BTreeMap<String, f64> = BTreeMap::new();
    let with = |own: &[(&'static str, String)]| -> Vec<(String, String)> {
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .chain(own.iter().map(|(k, v)| ((*k).to_owned(), v.clone())))
            .collect()
    };
    let key = |name: &str, labels: &[(String, String)]| {
        let pairs: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        series(name, &pairs)
    };
    let mut add =
        |name: &str, labels: Vec<(String, String)>, by: f64| *expected.entry(key(name, &labels)).or_default() += by;
    let mut histograms: BTreeMap<Series, Vec<f64>> = BTreeMap::new();
    let mut maxima: BTreeMap<Series, f64> = BTreeMap::new();
    let mut gauges: BTreeMap<Series, f64> = BTreeMap::new();
    let mut observe = |name: &str, labels: Vec<(String, String)>, v: f64, max: Option<&str>| {
        histograms.entry((name.to_owned(), labels.clone())).or_default().push(v);
        if let Some(max) = max {
            if v > 0.0 {
                let m = maxima.entry((max.to_owned(), labels)).or_default();
                *m = m.max(v);
            }
        }
    };
    for event in events {
        match event {
            Observed::MessageIn { topic } => {
                add("flechtwerk_messages_in_total", with(&[("topic", topic.clone())]), 1.0)
            }
            Observed::MessageInvalid { topic, outcome } => add(
                "flechtwerk_messages_invalid_total",
                with(&[("outcome", outcome.as_str().to_owned()), ("topic", topic.clone())]),
                1.0,
            ),
            Observed::MessageOut { topic } => {
                add("flechtwerk_messages_out_total", with(&[("topic", topic.clone())]), 1.0)
            }
            Observed::MessageInBytes { topic, bytes } => observe(
                "flechtwerk_message_in_bytes",
                with(&[("topic", topic.clone())]),
                *bytes as f64,
                Some("flechtwerk_message_in_max_bytes"),
            ),
            Observed::MessageOutBytes { topic, bytes } => observe(
                "flechtwerk_message_out_bytes",
                with(&[("topic", topic.clone())]),
                *bytes as f64,
                Some("flechtwerk_message_out_max_bytes"),
            ),
            Observed::StateRecordBytes { bytes } => observe(
                "flechtwerk_state_record_bytes",
                with(&[]),
                *bytes as f64,
                Some("flechtwerk_state_record_max_bytes"),
            ),
            Observed::BatchProcessed { size } => {
                observe("flechtwerk_batch_size", with(&[]), *size as f64, None);
                add("flechtwerk_batch_processing_seconds_count", with(&[]), 1.0);
            }
            Observed::MessageProcessed => add("flechtwerk_message_processing_seconds_count", with(&[]), 1.0),
            Observed::PollCycle => add("flechtwerk_poll_cycle_seconds_count", with(&[]), 1.0),
            Observed::TransactionCommitted => add("flechtwerk_transactions_committed_total", with(&[]), 1.0),
            Observed::ConfigMessageIn { topic } => {
                add("flechtwerk_config_messages_in_total", with(&[("topic", topic.clone())]), 1.0)
            }
            Observed::ConfigStoreRestored { count } => {
                add("flechtwerk_config_store_restored_entries_total", with(&[]), *count as f64)
            }
            Observed::StateRestored { partition, count } => add(
                "flechtwerk_state_restored_entries_total",
                with(&[("partition", partition.to_string())]),
                *count as f64,
            ),
            Observed::ConfigStoreEntries { count } => {
                gauges.insert(("flechtwerk_config_store_entries".into(), with(&[])), *count as f64);
            }
            Observed::TasksAssigned { count } => {
                gauges.insert(("flechtwerk_tasks_assigned".into(), with(&[])), *count as f64);
            }
            Observed::TokensAssigned { count } => {
                gauges.insert(("flechtwerk_tokens_assigned".into(), with(&[])), *count as f64);
            }
            Observed::ActiveConfigs { count } => {
                gauges.insert(("flechtwerk_active_configs".into(), with(&[])), *count as f64);
            }
            other => panic!("a transformer run does not emit {other:?}"),
        }
    }
    if let Some(bytes) = store_bytes.last() {
        gauges.insert(("flechtwerk_config_store_bytes".into(), with(&[])), *bytes as f64);
    }
    for ((name, labels), value) in gauges.into_iter().chain(maxima) {
        expected.insert(key(&name, &labels), value);
    }
    for ((name, labels), values) in histograms {
        let bounds: Vec<f64> =
            if name == "flechtwerk_batch_size" { batch_size_buckets(cap) } else { BYTE_BUCKETS.to_vec() };
        for bound in bounds.iter().copied().chain([f64::INFINITY]) {
            let mut labels = labels.clone();
            labels.push(("le".to_owned(), go_float(bound)));
            expected
                .insert(key(&format!("{name}_bucket"), &labels), values.iter().filter(|v| **v <= bound).count() as f64);
        }
        expected.insert(key(&format!("{name}_count"), &labels), values.len() as f64);
        expected.insert(key(&format!("{name}_sum"), &labels), values.iter().sum());
    }
    expected
}

/// A series: its family name and label pairs.
type Series = (String, Vec<(String, String)>);

fn is_timing(series: &str) -> bool {
    let name = series.split('{').next().unwrap();
    name.ends_with("_seconds_bucket") || name.ends_with("_seconds_sum")
}

/// The counter with a config join and a skipping invalid-message policy.
fn counter_stage(input: &str, output: &str, configs: &str) -> impl flechtwerk::Transformer + use<> {
    let output = output.to_owned();
    transformer([input]).config_topics([configs]).on_invalid_message(|_| InvalidMessageAction::Skip).transform(
        move |msg, mut state, out| {
            let count = state.get(&COUNT)?.unwrap_or(0) + 1;
            state.set(&COUNT, count)?;
            let label = out.configs().get(&msg.key)?.and_then(|c| c.get(&LABEL).ok().flatten());
            let value = Event::new().with(&COUNT, count)?.with(&KEY, msg.key.clone())?.with(&LABEL, label)?;
            out.send(Message::new(output.as_str(), msg.key.as_str(), value));
            out.set_state(state);
            Ok(())
        },
    )
}

async fn send_all(kafka: &dyn Kafka, records: Vec<ProducerRecord>) {
    let producer = kafka.producer(ProducerConfig::idempotent("metrics-feeder")).unwrap();
    let mut deliveries = Vec::new();
    for record in records {
        deliveries.push(producer.send(record).await.unwrap());
    }
    for delivery in deliveries {
        delivery.await.unwrap();
    }
    producer.close().await;
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every metric equals what the recorded events add up to, on one run with both observers
/// (MET-06: the table's "when emitted" is the hook's; the adapter adds and drops nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_counts_what_the_engine_reported() {
    const INPUTS: usize = 1_200;
    const INVALID: usize = 7;
    const CAP: usize = 100;
    // The default max_batch_records, four polls; the batch_size ladder stays Python's, topped by
    // max_poll_records (MET-03), so gathered batches land in +Inf.
    const BATCH_CAP: usize = 4 * CAP;
    let cluster = LocalCluster::new();
    let kafka: Arc<dyn Kafka> = Arc::new(cluster.clone());
    let admin = kafka.admin().unwrap();
    admin.create_topic(&NewTopic::new("in", 4)).await.unwrap();
    admin.create_topic(&NewTopic::new("out", 4)).await.unwrap();
    admin.create_topic(&NewTopic::new("configs", 2).compacted()).await.unwrap();
    // Configs: three entries, one overwritten, one deleted, one undecodable (skipped).
    let mut configs: Vec<ProducerRecord> =
        (0..4).map(|k| ProducerRecord::new("configs", format!("key-{k}"), format!(r#"{{"label":"L{k}"}}"#))).collect();
    configs.push(ProducerRecord::new("configs", "key-1", r#"{"label":"L1b"}"#));
    configs.push(ProducerRecord { value: None, ..ProducerRecord::new("configs", "key-3", "") });
    configs.push(ProducerRecord::new("configs", "key-9", "not json"));
    send_all(&*kafka, configs).await;
    let mut inputs: Vec<ProducerRecord> =
        (0..INPUTS).map(|i| ProducerRecord::new("in", format!("key-{}", i % 10), format!(r#"{{"i":{i}}}"#))).collect();
    for i in 0..INVALID {
        inputs.insert(i * 100, ProducerRecord::new("in", format!("key-{i}"), "{not json"));
    }
    send_all(&*kafka, inputs).await;

    let recording = RecordingObserver::default();
    let store_bytes = Arc::new(StoreBytes::default());
    let labels = [("app", "counter"), ("pod", "pod-0")];
    let app = Flechtwerk::builder()
        .application_id("metrics-counter")
        .client_id("pod-0")
        .kafka(kafka.clone())
        .max_poll_records(CAP)
        .observer(Arc::new(flechtwerk::observer::FanOut::new(vec![Arc::new(recording.clone()), store_bytes.clone()])))
        .metrics_labels(labels)
        .metrics(Metrics::unserved())
        .build(counter_stage("in", "out", "configs"))
        .unwrap();
    assert_eq!(app.render_metrics().as_deref(), Some(""), "no family before the first event");
    let app = Arc::new(app);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn({
        let app = app.clone();
        async move { app.run_until(async { stopped.await.unwrap_or(()) }).await }
    });
    let outputs = async {
        loop {
            let outputs = read_topic(&*kafka, "metrics-reader", "out").await.unwrap();
            if outputs.len() >= INPUTS {
                return outputs;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let outputs = tokio::time::timeout(Duration::from_secs(120), outputs).await.expect("every count out");
    assert_eq!(outputs.len(), INPUTS);
    // A config update while running: drained and applied (config_messages_in, entries, bytes).
    send_all(&*kafka, vec![ProducerRecord::new("configs", "key-5", r#"{"label":"late"}"#)]).await;
    wait_for("the drained config", || recording.events().iter().any(|e| matches!(e, Observed::ConfigMessageIn { .. })))
        .await;
    let _ = stop.send(());
    running.await.unwrap().unwrap();

    let events = recording.events();
    let text = app.render_metrics().unwrap();
    let exposed = samples(&text);
    let expected = expected_from(&events, &store_bytes.0.lock().unwrap(), &labels, CAP);
    let exposed_compared: BTreeMap<&String, &f64> = exposed.iter().filter(|(s, _)| !is_timing(s)).collect();
    let expected_compared: BTreeMap<&String, &f64> = expected.iter().collect();
    assert_eq!(exposed_compared, expected_compared, "\n{text}");

    // The workload, in the metrics: every input in, every output out, the invalid ones skipped.
    let get = |name: &str, own: &[(&str, &str)]| {
        let mut all = labels.to_vec();
        all.extend_from_slice(own);
        exposed.get(&series(name, &all)).copied().unwrap_or_else(|| panic!("{name} {own:?} in\n{text}"))
    };
    assert_eq!(get("flechtwerk_messages_in_total", &[("topic", "in")]), INPUTS as f64);
    assert_eq!(get("flechtwerk_messages_out_total", &[("topic", "out")]), INPUTS as f64);
    assert_eq!(get("flechtwerk_messages_invalid_total", &[("outcome", "skipped"), ("topic", "in")]), INVALID as f64);
    assert_eq!(get("flechtwerk_messages_invalid_total", &[("outcome", "skipped"), ("topic", "configs")]), 1.0);
    assert_eq!(get("flechtwerk_message_in_bytes_count", &[("topic", "in")]), (INPUTS + INVALID) as f64);
    assert_eq!(get("flechtwerk_batch_size_sum", &[]), INPUTS as f64, "records after the decode loop");
    assert!(get("flechtwerk_batch_size_count", &[]) >= (INPUTS / BATCH_CAP) as f64);
    assert!(get("flechtwerk_transactions_committed_total", &[]) >= 1.0);
    // Tasks: 4 after the start, 0 after the stop's teardown.
    assert_eq!(get("flechtwerk_tasks_assigned", &[]), 0.0);
    assert!(events.contains(&Observed::TasksAssigned { count: 4 }));
    assert_eq!(get("flechtwerk_config_store_restored_entries_total", &[]), 3.0, "key-0, key-1, key-2 survive");
    assert_eq!(get("flechtwerk_config_store_entries", &[]), 4.0);
    assert_eq!(get("flechtwerk_config_messages_in_total", &[("topic", "configs")]), 1.0);
    let wire = |k: &str, v: &str| (k.len() + v.len()) as f64;
    assert_eq!(
        get("flechtwerk_config_store_bytes", &[]),
        wire("key-0", r#"{"label":"L0"}"#)
            + wire("key-1", r#"{"label":"L1b"}"#)
            + wire("key-2", r#"{"label":"L2"}"#)
            + wire("key-5", r#"{"label":"late"}"#)
    );
    // A transformer has no extractor or MQTT events: those families are absent, as in Python.
    for absent in
        ["flechtwerk_poll_cycle_seconds", "flechtwerk_active_configs", "flechtwerk_tokens_assigned", "flechtwerk_mqtt_"]
    {
        assert!(!text.contains(absent), "{absent} in\n{text}");
    }
}

// ---------------------------------------------------------------------------------------------
// The endpoint.

fn idle_stage() -> impl flechtwerk::Transformer {
    transformer(["idle-in"]).transform(|_, _, _| Ok(()))
}

async fn idle_cluster() -> Arc<dyn Kafka> {
    let kafka: Arc<dyn Kafka> = Arc::new(LocalCluster::new());
    kafka.admin().unwrap().create_topic(&NewTopic::new("idle-in", 1)).await.unwrap();
    kafka
}

async fn get(addr: std::net::SocketAddr, path: &'static str) -> (String, BTreeMap<String, String>, String) {
    tokio::task::spawn_blocking(move || http_get(addr, path)).await.unwrap().unwrap()
}

/// `/metrics` exists while the run lasts, on the configured address; afterwards the port is
/// free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_serves_while_the_run_lasts() {
    let app = Flechtwerk::builder()
        .application_id("metrics-endpoint")
        .client_id("pod-0")
        .kafka(idle_cluster().await)
        .metrics_labels([("app", "endpoint")])
        .metrics(Metrics::serve("127.0.0.1:0"))
        .build(idle_stage())
        .unwrap();
    assert_eq!(app.metrics_address(), None, "nothing is bound before the run");
    let app = Arc::new(app);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn({
        let app = app.clone();
        async move { app.run_until(async { stopped.await.unwrap_or(()) }).await }
    });
    wait_for("the endpoint", || app.metrics_address().is_some()).await;
    let addr = app.metrics_address().unwrap();
    assert!(addr.ip().is_loopback(), "bound where configured: {addr}");
    // The first assignment sets tasks_assigned.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (status, headers, body) = loop {
        let response = get(addr, "/metrics").await;
        if response.2.contains("flechtwerk_tasks_assigned") || tokio::time::Instant::now() > deadline {
            break response;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    assert!(body.contains("flechtwerk_tasks_assigned{app=\"endpoint\"} 1.0\n"), "{body}");
    assert_eq!(body, app.render_metrics().unwrap());
    let (status, _, _) = get(addr, "/").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");

    let _ = stop.send(());
    running.await.unwrap().unwrap();
    assert_eq!(app.metrics_address(), None);
    assert!(std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(), "nothing listens");
    std::net::TcpListener::bind(addr).expect("the port is free again");
}

/// LIFE-17: a port that is taken fails the start with the OS error, not a warning; and the
/// application can be run again once it is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn life_17_a_taken_port_fails_the_start() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let app = Flechtwerk::builder()
        .application_id("metrics-taken")
        .client_id("pod-0")
        .kafka(idle_cluster().await)
        .metrics(Metrics::serve(addr.to_string()))
        .build(idle_stage())
        .unwrap();
    for _ in 0..2 {
        match app.run_until(async {}).await {
            Err(Error::Metrics { address, source }) => {
                assert_eq!(address, addr.to_string());
                assert_eq!(source.kind(), std::io::ErrorKind::AddrInUse, "{source}");
            }
            other => panic!("expected a metrics startup error, got {other:?}"),
        }
    }
    drop(taken);
    app.run_until(async {}).await.expect("runs once the port is free");
}

#[test]
fn metrics_labels_are_checked_at_build() {
    let build = |labels: &[(&str, &str)]| {
        Flechtwerk::builder()
            .application_id("a")
            .client_id("c")
            .kafka(Arc::new(LocalCluster::new()))
            .metrics_labels(labels.iter().copied())
            .metrics(Metrics::unserved())
            .build(idle_stage())
    };
    match build(&[("topic", "x")]) {
        Err(Error::Invalid(message)) => assert!(message.contains("reserved"), "{message}"),
        other => panic!("{:?}", other.err()),
    }
    assert!(build(&[("app", "a"), ("pod", "p")]).is_ok());
    // Metrics off: no metrics, nothing rendered, labels or not.
    let off = Flechtwerk::builder()
        .application_id("a")
        .client_id("c")
        .kafka(Arc::new(LocalCluster::new()))
        .metrics_labels([("app", "a")])
        .build(idle_stage())
        .unwrap();
    assert_eq!(off.render_metrics(), None);
}

/// The Grafana dashboard (docs/grafana/flechtwerk.json) is an importable JSON model that queries
/// only families this port (and Python 0.17) exposes, filtered by its `metrics_labels`
/// template variables.
#[test]
fn the_grafana_dashboard_queries_existing_families() {
    use flechtwerk::json::{self, Value};
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/grafana/flechtwerk.json")).unwrap();
    let Ok(Value::Object(dashboard)) = json::parse(&text) else { panic!("not a JSON object") };
    let Some(Value::List(inputs)) = dashboard.get("__inputs") else { panic!("no __inputs") };
    assert!(inputs
        .iter()
        .any(|i| matches!(i, Value::Object(o) if o.get("name") == Some(&Value::Str("DS_PROMETHEUS".into())))));
    let Some(Value::Object(templating)) = dashboard.get("templating") else { panic!("no templating") };
    let Some(Value::List(variables)) = templating.get("list") else { panic!("no variables") };
    let names: Vec<&Value> =
        variables.iter().filter_map(|v| if let Value::Object(o) = v { o.get("name") } else { None }).collect();
    assert_eq!(names, [&Value::Str("app".into()), &Value::Str("pod".into())]);

    fn exprs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::Object(map) => {
                for (key, v) in map.iter() {
                    match (key.as_str(), v) {
                        ("expr", Value::Str(e)) => out.push(e),
                        _ => exprs(v, out),
                    }
                }
            }
            Value::List(items) => items.iter().for_each(|v| exprs(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    let whole = Value::Object(dashboard.clone());
    exprs(&whole, &mut all);
    assert!(all.len() >= 20, "{} queries", all.len());
    let mut used = BTreeSet::new();
    for expr in all {
        assert!(expr.contains(r#"app=~"$app",pod=~"$pod""#), "not filtered by the template variables: {expr}");
        let mut rest = expr;
        while let Some(at) = rest.find("flechtwerk_") {
            let name: String = rest[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            rest = &rest[at + name.len()..];
            let family = ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|f| RUST_FAMILIES.contains(f)))
                .unwrap_or(&name)
                .to_owned();
            assert!(RUST_FAMILIES.contains(&family.as_str()), "{name} in {expr} is no family");
            used.insert(family);
        }
    }
    // Every family has a panel.
    let unused: Vec<&str> = RUST_FAMILIES.iter().copied().filter(|f| !used.contains(*f)).collect();
    assert!(unused.is_empty(), "families without a panel: {unused:?}");
}
