//! A counting transformer: for every input it increments its key's state and emits the count,
//! joined with the key's config (if any). Exactly once, through crashes and rebalances.
//!
//! ```text
//! cargo run --example counter                       # in-process simulated cluster, no setup
//! cargo run --example counter --features rdkafka -- --bootstrap 127.0.0.1:9092
//! cargo run --example counter --features rdkafka -- --bootstrap 127.0.0.1:9092 --serve --client pod-1
//! cargo run --example counter --features prometheus -- --metrics 127.0.0.1:9464 --linger 30
//! RUST_LOG=flechtwerk=info cargo run --example counter      # the engine's spans and events
//! cargo run --example counter --features rdkafka -- --bootstrap 127.0.0.1:9094 --serve \
//!     --sasl-user app --sasl-password-file /run/secrets/kafka --ca-file /etc/kafka/ca.pem
//! ```
//!
//! Without `--serve` it creates the topics, writes `--inputs` records over `--keys` keys, runs
//! until every count is out, prints the final count per key and stops. With `--serve` it only
//! runs the application until it is killed (the kill -9 test starts it that way, over and over).
//! Configuration comes from the command line here: the library itself reads none.
//!
//! The stage is `counter` below; the simulator's `counter` scenario runs a copy of it
//! (`flechtwerk_sim::stages::counter`) under seeded faults. Only the in-process cluster
//! (`--bootstrap` absent) and the exactly-once check of the outputs (`check_counts`) come from
//! the simulator crate.
//!
//! `--metrics ADDR` (feature `prometheus`) serves every `flechtwerk_*` metric at
//! `http://ADDR/metrics` while the application runs, labelled `app=<--app>` and
//! `pod=<--client>`; `--linger SECONDS` keeps it running that long after the last count is out,
//! for a Prometheus to scrape the final values.
//!
//! With `--sasl-user` it connects over SASL_SSL (SCRAM-SHA-512 unless `--sasl-mechanism` says
//! `SCRAM-SHA-256` or `PLAIN`), the password read from `--sasl-password-file`, the broker's
//! certificate checked against `--ca-file` (default: the system's CAs). The principal needs the
//! transformer's ACLs of docs/security.md (and, without `--serve`, Create on the three topics and
//! Write on the input to set them up and feed them).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flechtwerk::attribute::{Attribute, INT, STR};
use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
use flechtwerk::stage::{transformer, FnTransformer};
use flechtwerk::testing::read_topic;
use flechtwerk::{Event, Flechtwerk, FlechtwerkBuilder, Message};
use flechtwerk_sim::stages::check_counts;

/// The count, in the key's state and in each output value.
const COUNT: Attribute<i64> = Attribute::new("count", &INT);
/// The input key, repeated in the output value.
const KEY: Attribute<String> = Attribute::new("key", &STR);
/// The config join: the `label` of the key's config, when it has one.
const LABEL: Attribute<String> = Attribute::optional("label", &STR);

/// The stage: for every input on `input`, add one to the key's count (its state), and send
/// `{"count": n, "key": k, "label": <the key's config label or null>}` to `output`. The count,
/// the output and the consumed offset commit in one Kafka transaction, so a crash or a
/// rebalance never loses or repeats a count.
fn counter(input: &str, output: &str, configs: Option<&str>) -> FnTransformer {
    let output = output.to_owned();
    let builder = transformer([input]);
    let builder = match configs {
        Some(topic) => builder.config_topics([topic]),
        None => builder,
    };
    builder.transform(move |msg, mut state, out| {
        let count = state.get(&COUNT)?.unwrap_or(0) + 1;
        state.set(&COUNT, count)?;
        let label = out.configs().get(&msg.key)?.and_then(|c| c.get(&LABEL).ok().flatten());
        let value = Event::new().with(&COUNT, count)?.with(&KEY, msg.key.clone())?.with(&LABEL, label)?;
        out.send(Message::new(output.as_str(), msg.key.as_str(), value));
        out.set_state(state);
        Ok(())
    })
}

struct Args {
    bootstrap: Option<String>,
    sasl_user: Option<String>,
    sasl_mechanism: String,
    sasl_password_file: Option<String>,
    ca_file: Option<String>,
    serve: bool,
    app: String,
    client: String,
    input: String,
    output: String,
    configs: String,
    partitions: u32,
    inputs: usize,
    keys: usize,
    metrics: Option<String>,
    linger: u64,
}

fn parse() -> Args {
    let mut args = Args {
        bootstrap: None,
        sasl_user: None,
        sasl_mechanism: "SCRAM-SHA-512".into(),
        sasl_password_file: None,
        ca_file: None,
        serve: false,
        app: "counter".into(),
        client: "pod-0".into(),
        input: "counter-input".into(),
        output: "counter-output".into(),
        configs: "counter-configs".into(),
        partitions: 4,
        inputs: 1_000,
        keys: 20,
        metrics: None,
        linger: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--bootstrap" => args.bootstrap = Some(value()),
            "--sasl-user" => args.sasl_user = Some(value()),
            "--sasl-mechanism" => args.sasl_mechanism = value(),
            "--sasl-password-file" => args.sasl_password_file = Some(value()),
            "--ca-file" => args.ca_file = Some(value()),
            "--serve" => args.serve = true,
            "--app" => args.app = value(),
            "--client" => args.client = value(),
            "--input" => args.input = value(),
            "--output" => args.output = value(),
            "--configs" => args.configs = value(),
            "--partitions" => args.partitions = value().parse().expect("a partition count"),
            "--inputs" => args.inputs = value().parse().expect("an input count"),
            "--keys" => args.keys = value().parse().expect("a key count"),
            "--metrics" => args.metrics = Some(value()),
            "--linger" => args.linger = value().parse().expect("seconds"),
            other => panic!("unknown argument {other:?}"),
        }
    }
    args
}

fn kafka(args: &Args) -> Arc<dyn Kafka> {
    match &args.bootstrap {
        None => Arc::new(flechtwerk_sim::cluster::LocalCluster::new()),
        #[cfg(feature = "rdkafka")]
        Some(servers) => {
            use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
            let kafka = RdKafka::new(servers.clone());
            let Some(user) = &args.sasl_user else { return Arc::new(kafka) };
            let mechanism = match args.sasl_mechanism.as_str() {
                "PLAIN" => SaslMechanism::Plain,
                "SCRAM-SHA-256" => SaslMechanism::ScramSha256,
                "SCRAM-SHA-512" => SaslMechanism::ScramSha512,
                other => panic!("unknown SASL mechanism {other:?}"),
            };
            let file = args.sasl_password_file.as_ref().expect("--sasl-user needs --sasl-password-file");
            let password = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {file}: {e}"));
            let mut security = Security::sasl_ssl(mechanism, user, Secret::new(password.trim_end()));
            if let Some(ca) = &args.ca_file {
                security = security.with_ca_file(ca);
            }
            Arc::new(kafka.with_security(security).expect("TLS and SASL settings"))
        }
        #[cfg(not(feature = "rdkafka"))]
        Some(_) => panic!("--bootstrap needs the rdkafka feature: cargo run --example counter --features rdkafka"),
    }
}

/// `--metrics ADDR`: the Prometheus observer, served at ADDR while the application runs.
#[cfg(feature = "prometheus")]
fn with_metrics(builder: FlechtwerkBuilder, args: &Args) -> FlechtwerkBuilder {
    match &args.metrics {
        Some(address) => builder
            .metrics_labels([("app", args.app.as_str()), ("pod", args.client.as_str())])
            .metrics(flechtwerk::observer::prometheus::Metrics::serve(address)),
        None => builder,
    }
}

#[cfg(not(feature = "prometheus"))]
fn with_metrics(builder: FlechtwerkBuilder, args: &Args) -> FlechtwerkBuilder {
    assert!(
        args.metrics.is_none(),
        "--metrics needs the prometheus feature: cargo run --example counter --features prometheus"
    );
    builder
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // RUST_LOG=flechtwerk=info: the engine's events, and each span (task start, fence, restore,
    // batch, transaction, config bootstrap and drain) as it closes, with its fields and timing.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .try_init();
    let args = parse();
    let kafka = kafka(&args);
    // Every topic (its own and the ones it creates here) with the cluster's
    // default.replication.factor: 1 on the single test broker, 3 on a replicated cluster.
    let builder = Flechtwerk::builder().application_id(&args.app).client_id(&args.client).kafka(kafka.clone());
    let app = Arc::new(with_metrics(builder, &args).build(counter(&args.input, &args.output, Some(&args.configs)))?);
    if args.serve {
        app.run().await?;
        return Ok(());
    }

    let admin = kafka.admin()?;
    for (topic, compact) in [(&args.input, false), (&args.output, false), (&args.configs, true)] {
        let mut spec = NewTopic::new(topic.as_str(), args.partitions);
        if compact {
            spec = spec.compacted();
        }
        admin.create_topic(&spec).await?;
    }
    let producer = kafka.producer(ProducerConfig::idempotent(format!("{}-feeder", args.client)))?;
    let mut per_key: BTreeMap<String, i64> = BTreeMap::new();
    let mut deliveries = Vec::new();
    for i in 0..args.inputs {
        let key = format!("key-{}", i % args.keys);
        *per_key.entry(key.clone()).or_default() += 1;
        deliveries.push(producer.send(ProducerRecord::new(&args.input, key, format!(r#"{{"i":{i}}}"#))).await?);
    }
    for delivery in deliveries {
        delivery.await?;
    }
    producer.close().await;

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn({
        let app = app.clone();
        async move { app.run_until(async { stopped.await.unwrap_or(()) }).await }
    });
    let outputs = loop {
        let outputs = read_topic(&*kafka, "counter-reader", &args.output).await?;
        if outputs.len() >= args.inputs {
            break outputs;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    if let Some(address) = app.metrics_address() {
        println!("metrics at http://{address}/metrics for {} s more", args.linger);
        tokio::time::sleep(Duration::from_secs(args.linger)).await;
        if let Some(text) = app.render_metrics() {
            let processed = text.lines().find(|l| l.starts_with("flechtwerk_messages_in_total{"));
            println!("{}", processed.unwrap_or("no flechtwerk_messages_in_total"));
        }
    }
    let _ = stop.send(());
    running.await??;
    let (violations, finals) = check_counts(&per_key, &outputs);
    for (key, count) in &finals {
        println!("{key}: {count}");
    }
    if violations.is_empty() {
        println!("{} outputs for {} inputs: every count exactly once", outputs.len(), args.inputs);
        Ok(())
    } else {
        Err(format!("exactly-once violated: {violations:?}").into())
    }
}
