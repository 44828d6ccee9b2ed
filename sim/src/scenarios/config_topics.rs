//! Scenario `config-topics`: a config reader bootstraps and drains a config topic while a writer
//! keeps writing it (puts, all three deletion forms, non-canonical spellings), and the reader is
//! crash-restarted and paused at random points.
//!
//! Property (CFG-12 and CFG-20 of docs/behaviours.md, as the scenario's entry in
//! docs/simulation.md states it): after quiescence the reader's store equals the compaction of
//! the topic — last write per key, null / `b""` / `{}` delete — byte for byte in canonical form,
//! whichever mix of bootstrap and drains built it.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use flechtwerk::json::{to_canonical_bytes, Map, Value};
use flechtwerk::observer::NoopObserver;
use flechtwerk::testing::{decode_config_update, ConfigBootstrap};
use flechtwerk::wire::{RaisePolicy, RawRecord};
use flechtwerk::Config;
use flechtwerk::ConfigStore;
use madsim::rand::{thread_rng, Rng};
use madsim::runtime::Handle;
use madsim::time::sleep;

use crate::runner::{Ctx, Scenario};

/// The scenario.
pub static SCENARIO: Scenario = Scenario {
    name: "config-topics",
    about: "config store bootstrap + drain under writes, crash-restarts and pauses; store = compaction",
    faults: &["crash-restart", "pause", "crash"],
    run: |ctx| Box::pin(run(ctx)) as Pin<Box<dyn std::future::Future<Output = ()>>>,
};

/// Records a reader processes between yields during a bootstrap (so faults land mid-read).
const BOOTSTRAP_YIELD_RECORDS: usize = 16;
/// How long the reader gets to catch up once the writer is done.
const QUIESCENCE_MAX: Duration = Duration::from_secs(30);

/// The topic: records in read order. It lives outside every node, like a broker's log.
type Log = Arc<Mutex<Vec<RawRecord>>>;

/// What the reader last published: its read position and its store's contents.
type Published = Arc<Mutex<Option<(usize, BTreeMap<String, Vec<u8>>)>>>;

fn contents(store: &ConfigStore) -> BTreeMap<String, Vec<u8>> {
    store.keys().into_iter().map(|k| (k.clone(), store.get_bytes(&k).expect("listed key").to_vec())).collect()
}

fn random_value(rng: &mut impl Rng) -> Map {
    let mut map = Map::new();
    for field in ["a", "b", "c"].iter().take(rng.gen_range(1..=3)) {
        let value = match rng.gen_range(0..4) {
            0 => Value::Int(rng.gen_range(-5..1_000)),
            1 => Value::Str("x".repeat(rng.gen_range(0..40))),
            2 => Value::Float(f64::from(rng.gen_range(0..100)) / 8.0),
            _ => Value::List(vec![Value::Bool(rng.gen()), Value::Null]),
        };
        map.insert((*field).to_owned(), value);
    }
    map
}

/// One config record, as a writer (or ops tooling) would produce it.
fn random_record(rng: &mut impl Rng, offset: usize, keys: u32) -> RawRecord {
    let key = format!("tenant-{}", rng.gen_range(0..keys));
    let value = match rng.gen_range(0..100) {
        0..=59 => Some(Bytes::from(to_canonical_bytes(&Value::Object(random_value(rng))).expect("finite"))),
        60..=69 => {
            // Kafka UI style: pretty-printed, keys unsorted.
            let map = random_value(rng);
            let body: Vec<String> = map
                .iter()
                .rev()
                .map(|(k, v)| format!("\"{k}\" : {}", String::from_utf8(to_canonical_bytes(v).unwrap()).unwrap()))
                .collect();
            Some(Bytes::from(format!("{{ {} }}", body.join(" , "))))
        }
        70..=79 => None,
        80..=89 => Some(Bytes::new()),
        _ => Some(Bytes::from_static(b"{}")),
    };
    RawRecord {
        topic: Arc::from("configs"),
        partition: (flechtwerk::token_for(&key, 3)) as i32,
        offset: offset as i64,
        timestamp_ms: Some(offset as i64),
        key: Some(Bytes::from(key)),
        value,
        headers: Vec::new(),
    }
}

/// The reader: bootstrap to the end captured at boot, then drain forever.
async fn reader(ctx: Ctx, log: Log, published: Published, boots: Arc<AtomicU64>) {
    let boot = boots.fetch_add(1, Ordering::SeqCst) + 1;
    let end = log.lock().expect("log lock").len();
    ctx.event(format!("reader boot #{boot}: bootstrap to {end}"));
    let mut bootstrap = ConfigBootstrap::with_chunk_bytes(512);
    // Either mode per boot: every survivor pending (an enriching stage), or canonical values
    // settled as they are offered (what the runner does for a stage that does not enrich).
    let settle = thread_rng().gen_bool(0.5);
    if settle {
        bootstrap = bootstrap.without_enrichment();
    }
    let mut position = 0;
    while position < end {
        let batch: Vec<RawRecord> = {
            let log = log.lock().expect("log lock");
            log[position..end.min(position + BOOTSTRAP_YIELD_RECORDS)].to_vec()
        };
        for record in &batch {
            bootstrap.offer(record, &RaisePolicy, &NoopObserver).expect("valid config keys");
        }
        position += batch.len();
        sleep(Duration::from_millis(1)).await;
    }
    let mut store = bootstrap.finish_unenriched(&RaisePolicy, &NoopObserver).expect("valid config values");
    ctx.event(format!("reader boot #{boot}: bootstrapped {} entries (settled on offer: {settle})", store.len()));
    *published.lock().expect("published lock") = Some((position, contents(&store)));
    loop {
        let pause = Duration::from_millis(thread_rng().gen_range(20..300));
        sleep(pause).await;
        let batch: Vec<RawRecord> = log.lock().expect("log lock")[position..].to_vec();
        for record in &batch {
            match decode_config_update(record, &RaisePolicy, &NoopObserver).expect("valid configs") {
                Some((key, None)) => {
                    store.delete(&key);
                }
                Some((key, Some(map))) => store.put(&key, &Config::wrap(map)).expect("finite"),
                None => unreachable!("the raise policy never skips"),
            }
        }
        position += batch.len();
        if !batch.is_empty() {
            ctx.event(format!("reader boot #{boot}: drained {} to {position}", batch.len()));
        }
        *published.lock().expect("published lock") = Some((position, contents(&store)));
    }
}

async fn run(ctx: Ctx) {
    let handle = Handle::current();
    let log: Log = Arc::default();
    let published: Published = Arc::default();
    let boots = Arc::new(AtomicU64::new(0));
    let (records, keys) = {
        let mut rng = thread_rng();
        (rng.gen_range(50..400usize), rng.gen_range(3..40u32))
    };
    ctx.event(format!("start: {records} records over {keys} keys"));

    let reader_node = {
        let (ctx, log, published, boots) = (ctx.clone(), log.clone(), published.clone(), boots.clone());
        handle
            .create_node()
            .name("reader")
            .ip([10, 0, 0, 2].into())
            .init(move || reader(ctx.clone(), log.clone(), published.clone(), boots.clone()))
            .build()
    };

    let writer = {
        let (ctx, log) = (ctx.clone(), log.clone());
        handle.create_node().name("writer").ip([10, 0, 0, 3].into()).build().spawn(async move {
            for offset in 0..records {
                let record = random_record(&mut thread_rng(), offset, keys);
                ctx.event(format!(
                    "write {offset} {} {}",
                    String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()),
                    record.value.as_ref().map_or(-1, |v| v.len() as i64)
                ));
                log.lock().expect("log lock").push(record);
                sleep(Duration::from_millis(thread_rng().gen_range(1..40))).await;
            }
        })
    };

    // The fault schedule, while the writer runs.
    let reader_id = reader_node.id();
    while !writer.is_finished() {
        sleep(Duration::from_millis(thread_rng().gen_range(100..2_000))).await;
        match thread_rng().gen_range(0..3) {
            0 => {
                ctx.fault("crash-restart", "reader");
                handle.kill(reader_id);
                handle.restart(reader_id);
            }
            1 => {
                let pause = Duration::from_millis(thread_rng().gen_range(200..3_000));
                ctx.fault("pause", format!("reader for {pause:?}"));
                handle.pause(reader_id);
                sleep(pause).await;
                handle.resume(reader_id);
            }
            _ => {
                let down = Duration::from_millis(thread_rng().gen_range(100..2_000));
                ctx.fault("crash", format!("reader down for {down:?}"));
                handle.kill(reader_id);
                sleep(down).await;
                handle.restart(reader_id);
            }
        }
    }
    writer.await.expect("the writer runs on a node that is never killed");

    // Quiescence: the reader has read everything.
    let end = log.lock().expect("log lock").len();
    let deadline = ctx.now() + QUIESCENCE_MAX;
    loop {
        let caught_up = published.lock().expect("published lock").as_ref().is_some_and(|(p, _)| *p == end);
        if caught_up {
            break;
        }
        if ctx.now() > deadline {
            ctx.violation(format!("the reader did not read to the end ({end}) within {QUIESCENCE_MAX:?}"));
            return;
        }
        sleep(Duration::from_millis(50)).await;
    }
    // The rule's model, shared with every scenario and the chaos harness.
    let want = crate::harness::truth::config_compaction(&log.lock().expect("log lock"));
    let (_, got) = published.lock().expect("published lock").clone().expect("published");
    if got != want {
        let missing: Vec<&String> = want.keys().filter(|k| !got.contains_key(*k)).collect();
        let extra: Vec<&String> = got.keys().filter(|k| !want.contains_key(*k)).collect();
        let differing: Vec<&String> = want.keys().filter(|k| got.get(*k).is_some_and(|v| v != &want[*k])).collect();
        ctx.violation(format!(
            "config store != compaction of the topic: missing {missing:?}, extra {extra:?}, differing {differing:?}"
        ));
    }
    ctx.event(format!("end: {} entries, {} reader boots", want.len(), boots.load(Ordering::SeqCst)));
}
