//! A paging extractor: one config entry per feed of an external source; each poll fetches the
//! feed's next pages after the committed cursor, emits their items and commits the cursor with
//! them, one Kafka transaction per page. Exactly once, through crashes and handovers.
//!
//! ```text
//! cargo run --example extractor                     # in-process simulated cluster, no setup
//! cargo run --example extractor --features rdkafka -- --bootstrap 127.0.0.1:9092
//! cargo run --example extractor --features rdkafka -- --bootstrap 127.0.0.1:9092 --serve --client pod-1
//! RUST_LOG=flechtwerk=info cargo run --example extractor    # the engine's spans and events
//! ```
//!
//! Without `--serve` it creates the topics, writes `--feeds` config entries (each asking for
//! `--items` items), runs until every item is out, checks that each feed's items arrived once
//! and in order, prints a line per feed and stops. With `--serve` it only runs the application
//! (start two or three with different `--client`s: the feeds are spread over them by ownership
//! token, and a replica that dies hands its feeds over within a session timeout).
//!
//! The "external source" here is a function of the feed and the cursor with a little latency,
//! standing in for an HTTP API; what the example shows is the shape of a real extractor:
//! - the cursor lives in `State` and commits in the same transaction as the page's items, so a
//!   crash between fetching and committing re-fetches the page rather than losing or repeating
//!   it (the source must serve the same page for the same cursor, or at least be idempotent);
//! - a poll sends a few pages and returns; the runner calls it again after `poll_interval`,
//!   so one busy feed does not starve the others on its token;
//! - a page must commit well within the transaction timeout (600 s for extractors).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flechtwerk::attribute::{Attribute, INT, STR};
use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
use flechtwerk::stage::BoxError;
use flechtwerk::testing::read_topic;
use flechtwerk::{Config, Event, Extractor, Flechtwerk, Message, Page, State};

/// The config entry of a feed: how many items its source has.
const ITEMS: Attribute<i64> = Attribute::new("items", &INT);
/// The committed cursor of a feed: the last item already in Kafka.
const AFTER: Attribute<i64> = Attribute::new("after", &INT);
/// An emitted item.
const SEQ: Attribute<i64> = Attribute::new("seq", &INT);
const TITLE: Attribute<String> = Attribute::new("title", &STR);

const PAGE_SIZE: i64 = 25;
const PAGES_PER_POLL: usize = 4;

/// The stand-in for an external API: `GET /feeds/{feed}/items?after={cursor}&limit={n}`.
struct Source;

impl Source {
    async fn items_after(&self, feed: &str, total: i64, after: i64, limit: i64) -> Vec<(i64, String)> {
        tokio::time::sleep(Duration::from_millis(5)).await;
        (after + 1..=(after + limit).min(total)).map(|seq| (seq, format!("{feed} item {seq}"))).collect()
    }
}

struct Feeds {
    configs: String,
    output: String,
    source: Source,
}

impl Extractor for Feeds {
    fn config_topics(&self) -> Vec<String> {
        vec![self.configs.clone()]
    }

    async fn poll(&self, config: Config, mut state: State, page: &mut Page<'_>) -> Result<(), BoxError> {
        let total = config.require(&ITEMS)?;
        let mut after = state.get(&AFTER)?.unwrap_or(0);
        for _ in 0..PAGES_PER_POLL {
            let items = self.source.items_after(page.key(), total, after, PAGE_SIZE).await;
            let Some(&(last, _)) = items.last() else { break };
            for (seq, title) in items {
                let event = Event::new().with(&SEQ, seq)?.with(&TITLE, title)?;
                page.send(Message::new(self.output.as_str(), page.key(), event)).await?;
            }
            after = last;
            state.set(&AFTER, after)?;
            // The page's items and the new cursor commit as one transaction.
            page.commit(state.clone()).await?;
        }
        Ok(())
    }
}

struct Args {
    bootstrap: Option<String>,
    serve: bool,
    app: String,
    client: String,
    configs: String,
    output: String,
    tokens: u32,
    feeds: usize,
    items: i64,
}

fn parse() -> Args {
    let mut args = Args {
        bootstrap: None,
        serve: false,
        app: "feeds".into(),
        client: "pod-0".into(),
        configs: "feeds-configs".into(),
        output: "feeds-items".into(),
        tokens: 4,
        feeds: 12,
        items: 300,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--bootstrap" => args.bootstrap = Some(value()),
            "--serve" => args.serve = true,
            "--app" => args.app = value(),
            "--client" => args.client = value(),
            "--configs" => args.configs = value(),
            "--output" => args.output = value(),
            "--tokens" => args.tokens = value().parse().expect("a partition count"),
            "--feeds" => args.feeds = value().parse().expect("a feed count"),
            "--items" => args.items = value().parse().expect("an item count"),
            other => panic!("unknown argument {other:?}"),
        }
    }
    args
}

fn kafka(args: &Args) -> Arc<dyn Kafka> {
    match &args.bootstrap {
        None => Arc::new(flechtwerk_sim::cluster::LocalCluster::new()),
        #[cfg(feature = "rdkafka")]
        Some(servers) => Arc::new(flechtwerk::kafka::rdkafka::RdKafka::new(servers.clone())),
        #[cfg(not(feature = "rdkafka"))]
        Some(_) => panic!("--bootstrap needs the rdkafka feature: cargo run --example extractor --features rdkafka"),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .try_init();
    let args = parse();
    let kafka = kafka(&args);
    let stage = Feeds { configs: args.configs.clone(), output: args.output.clone(), source: Source };
    let app = Arc::new(
        Flechtwerk::builder()
            .application_id(&args.app)
            .client_id(&args.client)
            .kafka(kafka.clone())
            .poll_interval(Duration::from_millis(200))
            .build(stage)?,
    );
    if args.serve {
        app.run().await?;
        return Ok(());
    }

    // The token space is the config topic's partition count; the changelog gets as many. Every
    // topic has the cluster's default.replication.factor (3 on a replicated cluster).
    let admin = kafka.admin()?;
    admin.create_topic(&NewTopic::new(args.configs.as_str(), args.tokens).compacted()).await?;
    admin.create_topic(&NewTopic::new(args.output.as_str(), 4)).await?;
    let producer = kafka.producer(ProducerConfig::idempotent(format!("{}-setup", args.client)))?;
    for feed in 0..args.feeds {
        let config = format!(r#"{{"items":{}}}"#, args.items);
        producer.send(ProducerRecord::new(&args.configs, format!("feed-{feed:02}"), config)).await?.await?;
    }
    producer.close().await;

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn({
        let app = app.clone();
        async move { app.run_until(async { stopped.await.unwrap_or(()) }).await }
    });
    let total = args.feeds * args.items as usize;
    let records = loop {
        let records = read_topic(&*kafka, "feeds-reader", &args.output).await?;
        if records.len() >= total {
            break records;
        }
        if running.is_finished() {
            running.await??;
            return Err("the application stopped before every item was out".into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let _ = stop.send(());
    running.await??;

    let mut per_feed: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for record in &records {
        let key = String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned();
        let event = Event::wrap(flechtwerk::wire::decode_value(record.value.as_deref())?);
        per_feed.entry(key).or_default().push(event.require(&SEQ)?);
    }
    let want: Vec<i64> = (1..=args.items).collect();
    for (feed, seqs) in &per_feed {
        let verdict = if *seqs == want { "each once, in order" } else { "NOT exactly once" };
        println!("{feed}: {} items, {verdict}", seqs.len());
    }
    if per_feed.len() != args.feeds || per_feed.values().any(|seqs| *seqs != want) {
        return Err("some feed's items are missing, repeated or out of order".into());
    }
    Ok(())
}
