//! The metrics end to end: the counter example's stage on the real broker with metrics on,
//! scraped by a real Prometheus, queried through its HTTP API until the counts equal the inputs
//! processed.
//!
//! Needs `--features prometheus,rdkafka`, a broker at `KAFKA_BOOTSTRAP` (`scripts/kafka start`)
//! and a Prometheus at `PROMETHEUS_URL` that scrapes `FLECHTWERK_METRICS_ADDRESS` (default
//! `127.0.0.1:19464`), e.g. `scripts/prometheus start 127.0.0.1:19464`; `scripts/test` starts
//! both.

#![cfg(all(feature = "prometheus", feature = "rdkafka", not(madsim)))]

mod metrics_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flechtwerk::json::{self, Value};
use flechtwerk::kafka::rdkafka::RdKafka;
use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
use flechtwerk::observer::prometheus::{batch_size_buckets, Metrics};
use flechtwerk::testing::read_topic;
use flechtwerk::Flechtwerk;
use flechtwerk_sim::stages::{check_counts, counter};
use metrics_support::{http_get, samples, series};

const INPUTS: usize = 2_000;
const KEYS: usize = 20;

fn env(name: &str, hint: &str) -> String {
    let value = std::env::var(name).unwrap_or_default();
    assert!(!value.is_empty(), "{name} is not set: {hint}");
    value
}

fn percent_encode(query: &str) -> String {
    query
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An instant query: the value of the first result, if any.
async fn query(prometheus: &str, promql: &str) -> Option<f64> {
    let base = prometheus.trim_start_matches("http://");
    let addr = base.parse().expect("PROMETHEUS_URL is http://IP:PORT");
    let path = format!("/api/v1/query?query={}", percent_encode(promql));
    let (status, _, body) = tokio::task::spawn_blocking(move || http_get(addr, Box::leak(path.into_boxed_str())))
        .await
        .unwrap()
        .expect("Prometheus answers");
    assert!(status.contains("200"), "{promql}: {status} {body}");
    let Ok(Value::Object(answer)) = json::parse(&body) else { panic!("not a JSON object: {body}") };
    let Some(Value::Object(data)) = answer.get("data") else { panic!("no data: {body}") };
    let Some(Value::List(result)) = data.get("result") else { panic!("no result: {body}") };
    let Some(Value::Object(first)) = result.first() else { return None };
    let Some(Value::List(value)) = first.get("value") else { panic!("no value: {body}") };
    match value.get(1) {
        Some(Value::Str(v)) => v.parse().ok(),
        other => panic!("not a sample value: {other:?}"),
    }
}

/// Polls `promql` until it reads `expected` (30 s: the first scrape lands ~5 s after a target
/// appears, then one a second).
async fn until_equal(prometheus: &str, promql: &str, expected: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let value = query(prometheus, promql).await;
        if value == Some(expected) {
            return expected;
        }
        assert!(Instant::now() < deadline, "{promql} reads {value:?}, expected {expected}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_what_the_counter_processed() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let bootstrap =
        env("KAFKA_BOOTSTRAP", "run through scripts/test, or `scripts/kafka start` and export what it prints");
    let prometheus = env("PROMETHEUS_URL", "run through scripts/test, or `scripts/prometheus start 127.0.0.1:19464`");
    let address = std::env::var("FLECHTWERK_METRICS_ADDRESS").unwrap_or_else(|_| "127.0.0.1:19464".to_owned());
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    let app_id = format!("metrics-{nanos:x}");
    let (input, output, configs) = (format!("{app_id}-in"), format!("{app_id}-out"), format!("{app_id}-configs"));

    let kafka: Arc<dyn Kafka> = Arc::new(RdKafka::new(bootstrap));
    let admin = kafka.admin().unwrap();
    for (topic, compact) in [(&input, false), (&output, false), (&configs, true)] {
        let mut spec = NewTopic::new(topic.as_str(), 4).replication(1);
        if compact {
            spec = spec.compacted();
        }
        admin.create_topic(&spec).await.unwrap();
    }
    let producer = kafka.producer(ProducerConfig::idempotent(format!("{app_id}-feeder"))).unwrap();
    let mut per_key: BTreeMap<String, i64> = BTreeMap::new();
    let mut deliveries = Vec::new();
    for i in 0..INPUTS {
        let key = format!("key-{}", i % KEYS);
        *per_key.entry(key.clone()).or_default() += 1;
        deliveries.push(producer.send(ProducerRecord::new(&input, key, format!(r#"{{"i":{i}}}"#))).await.unwrap());
    }
    for delivery in deliveries {
        delivery.await.unwrap();
    }
    producer.close().await;

    let app = Arc::new(
        Flechtwerk::builder()
            .application_id(&app_id)
            .client_id("pod-0")
            .kafka(kafka.clone())
            .replication_factor(1)
            .metrics_labels([("app", app_id.as_str()), ("pod", "pod-0")])
            .metrics(Metrics::serve(&address))
            .build(counter(&input, &output, Some(&configs)))
            .unwrap(),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn({
        let app = app.clone();
        async move { app.run_until(async { stopped.await.unwrap_or(()) }).await }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let outputs = loop {
        let outputs = read_topic(&*kafka, &format!("{app_id}-reader"), &output).await.unwrap();
        if outputs.len() >= INPUTS {
            break outputs;
        }
        assert!(Instant::now() < deadline, "{} of {INPUTS} outputs", outputs.len());
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let (violations, _) = check_counts(&per_key, &outputs);
    assert!(violations.is_empty(), "{violations:?}");

    // The endpoint itself, then what Prometheus scraped from it. A batch is observed just after
    // its commit returns, so the outputs can be visible before the last batch is counted: read
    // the endpoint until every input is in an observed batch (under load that takes a moment).
    let addr = app.metrics_address().expect("serving");
    let labels = [("app", app_id.as_str()), ("pod", "pod-0")];
    let deadline = Instant::now() + Duration::from_secs(30);
    let (status, headers, own) = loop {
        let (status, headers, body) =
            tokio::task::spawn_blocking(move || http_get(addr, "/metrics")).await.unwrap().unwrap();
        let own = samples(&body);
        let observed = own.get(&series("flechtwerk_batch_size_sum", &labels)).copied().unwrap_or(0.0);
        if observed == INPUTS as f64 {
            break (status, headers, own);
        }
        assert!(Instant::now() < deadline, "{observed} of {INPUTS} inputs in observed batches");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    let local = |name: &str, extra: &[(&str, &str)]| {
        let mut all = labels.to_vec();
        all.extend_from_slice(extra);
        own[&series(name, &all)]
    };
    assert_eq!(local("flechtwerk_messages_in_total", &[("topic", &input)]), INPUTS as f64);
    let transactions = local("flechtwerk_transactions_committed_total", &[]);
    let batches = local("flechtwerk_batch_processing_seconds_count", &[]);
    assert!(transactions >= 1.0 && batches >= 1.0);

    let selector = format!(r#"app="{app_id}",job="flechtwerk""#);
    let mut report = Vec::new();
    for (promql, expected) in [
        (format!("sum(flechtwerk_messages_in_total{{{selector}}})"), INPUTS as f64),
        (format!("sum(flechtwerk_messages_out_total{{{selector}}})"), INPUTS as f64),
        (format!("sum(flechtwerk_batch_size_sum{{{selector}}})"), INPUTS as f64),
        (format!("sum(flechtwerk_transactions_committed_total{{{selector}}})"), transactions),
        (format!(r#"sum(flechtwerk_batch_processing_seconds_bucket{{{selector},le="+Inf"}})"#), batches),
        (format!("sum(flechtwerk_batch_processing_seconds_count{{{selector}}})"), batches),
        (format!("sum(flechtwerk_message_in_bytes_count{{{selector}}})"), INPUTS as f64),
        (format!("max(flechtwerk_tasks_assigned{{{selector}}})"), 4.0),
        // Python's ladder, topped by max_poll_records (500) at the default max_batch_records
        // (2 000), then +Inf (MET-03): one set of bounds beside a Python fleet.
        (format!(r#"count(flechtwerk_batch_size_bucket{{{selector}}})"#), (batch_size_buckets(500).len() + 1) as f64),
    ] {
        let value = until_equal(&prometheus, &promql, expected).await;
        report.push(format!("{promql} = {value}"));
    }
    // Every duration bucket is there, with the 1.048576e+06 byte bound parsed as a number.
    until_equal(&prometheus, &format!("count(flechtwerk_batch_processing_seconds_bucket{{{selector}}})"), 20.0).await;
    let byte_bound = format!(r#"sum(flechtwerk_message_in_bytes_bucket{{{selector},le="1.048576e+06"}})"#);
    until_equal(&prometheus, &byte_bound, INPUTS as f64).await;
    println!("Prometheus query results:\n  {}", report.join("\n  "));

    let _ = stop.send(());
    running.await.unwrap().unwrap();
    std::net::TcpListener::bind(addr).expect("the metrics port is free after the run");
}
