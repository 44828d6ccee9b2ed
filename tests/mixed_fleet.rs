//! Mixed fleets: a Rust and a Python instance of one application on the same records.
//!
//! `tests/golden/generate.py` ran the real Python `TransformerRunner.process_batch` of
//! flechtwerk 0.17.0 on a set of records (section `mixed_fleet` of `tests/golden/vectors.json`);
//! here the Rust engine runs the same transforms, ported line by line, on the same records on the
//! in-process simulated cluster, and every scenario must give Python's outputs, changelog writes,
//! offsets and hook calls, except where `docs/compatibility.md` ("Mixed fleets: where the
//! implementations differ") documents a difference: then the test asserts exactly that difference,
//! so it can neither grow nor disappear unnoticed. Also the forwarded-timestamp window
//! (`timestamp_forward`) and the client ids (`client_ids`).
//!
//! Hazards (the doc's table): 1 non-finite numbers and lone surrogates (INV-02), 2 state dedup
//! (TRX-20, ATTR-44), 3 timestamps (ATTR-40, TRX-13), 4 client ids (LIFE-04), 5 identities
//! (LIFE-03), 7 tombstones, keys, headers, lenient changelog bytes (TRX-07, INV-01, INV-17,
//! STO-11).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use chrono::DateTime;
use common::Harness;
use flechtwerk::attribute::{Attribute, INT};
use flechtwerk::json::{self, Value};
use flechtwerk::kafka::{
    Admin, Consumer, ConsumerConfig, Kafka, KafkaResult, NewTopic, OffsetReset, Producer, ProducerConfig,
    ProducerRecord, TopicPartition,
};
use flechtwerk::stage::transformer;
use flechtwerk::wire::{self, DecodeError, Header, InvalidMessageAction, Part, RawRecord};
use flechtwerk::{Event, IncomingMessage, Message, State, Transformer};
use flechtwerk_sim::cluster::LocalCluster;

// ---------------------------------------------------------------------------------------------
// The vectors

fn vectors() -> &'static Value {
    static VECTORS: OnceLock<Value> = OnceLock::new();
    VECTORS.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/vectors.json");
        json::parse(&std::fs::read_to_string(path).expect("vectors.json")).expect("vectors.json is JSON")
    })
}

fn field<'v>(v: &'v Value, key: &str) -> &'v Value {
    match v {
        Value::Object(map) => map.get(key).unwrap_or_else(|| panic!("no field {key:?}")),
        _ => panic!("not an object looking for {key:?}"),
    }
}

fn text(v: &Value) -> &str {
    match v {
        Value::Str(s) => s,
        other => panic!("not a string: {other:?}"),
    }
}

fn text_of<'v>(v: &'v Value, key: &str) -> &'v str {
    text(field(v, key))
}

fn items(v: &Value) -> &[Value] {
    match v {
        Value::List(items) => items,
        other => panic!("not a list: {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("not an int: {other:?}"),
    }
}

fn opt_int(v: &Value) -> Option<i64> {
    match v {
        Value::Null => None,
        other => Some(int(other)),
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn opt_hex(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::Null => None,
        other => Some(hex(text(other))),
    }
}

fn show(bytes: Option<&[u8]>) -> String {
    bytes.map_or_else(|| "null".to_owned(), |b| String::from_utf8_lossy(b).into_owned())
}

// ---------------------------------------------------------------------------------------------
// The four transforms of generate.py's "mixed fleets: the runner", ported line by line

const N: Attribute<i64> = Attribute::new("n", &INT);

/// What one transform call saw: key, value (canonical bytes, `None` for a tombstone), state.
type Seen = (String, Option<Vec<u8>>, Vec<u8>);

/// The transform `kind` with the scenario's policy (recorded, then skip or raise).
fn stage(
    kind: &str,
    raise: bool,
    input: &str,
    output: &str,
    seen: Arc<Mutex<Vec<Seen>>>,
    calls: Arc<Mutex<Vec<Hook>>>,
) -> impl Transformer + use<> {
    let (kind, out) = (kind.to_owned(), output.to_owned());
    transformer([input])
        .on_invalid_message(move |e| {
            calls.lock().unwrap().push(Hook::of(e));
            if raise {
                InvalidMessageAction::Raise
            } else {
                InvalidMessageAction::Skip
            }
        })
        .transform(move |msg: IncomingMessage, mut state: State, o| {
            let value = msg.value.as_ref().map(|v| v.encode().unwrap());
            seen.lock().unwrap().push((msg.key.clone(), value, state.encode().unwrap()));
            let timestamped = |m: Message| match msg.timestamp {
                Some(ts) => m.with_timestamp(ts),
                None => m,
            };
            match kind.as_str() {
                "count" => {
                    let n = state.get(&N)?.unwrap_or(0) + 1;
                    state.set(&N, n)?;
                    o.set_state(state);
                    o.send(timestamped(Message::new(out.as_str(), msg.key.as_str(), Event::new().with(&N, n)?)));
                }
                "forward" => o.send(timestamped(Message::new(out.as_str(), msg.key.as_str(), msg.value))),
                "keep_value" | "echo_keep" => {
                    if kind == "echo_keep" {
                        o.send(Message::new(out.as_str(), msg.key.as_str(), Event::wrap(state.raw().clone())));
                    }
                    o.set_state(msg.value.map_or_else(State::new, |v| State::wrap(v.into_record().into_raw())));
                }
                other => panic!("unknown transform {other}"),
            }
            Ok(())
        })
}

/// A policy call: part, key bytes, offset, the Python class of the cause.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Hook {
    part: Part,
    key: Option<Vec<u8>>,
    offset: i64,
    cause: &'static str,
}

impl Hook {
    fn of(e: &flechtwerk::InvalidMessageError) -> Self {
        let cause = match e.decode_error() {
            DecodeError::Utf8(_) => "UnicodeDecodeError",
            DecodeError::Json(json::JsonError::IntegerTooLong { .. }) | DecodeError::NotAnObject { .. } => "ValueError",
            DecodeError::Json(_) => "JSONDecodeError",
        };
        Hook { part: e.part(), key: e.key().map(|k| k.to_vec()), offset: e.offset(), cause }
    }
}

// ---------------------------------------------------------------------------------------------
// Running scenarios on the simulated cluster

/// One scenario of the vectors.
struct Scenario {
    case: &'static Value,
    name: &'static str,
    hazard: &'static str,
    transform: &'static str,
    policy: &'static str,
    initial: Vec<(String, Vec<u8>)>,
    batches: Vec<Vec<InputRecord>>,
}

#[derive(Clone)]
struct InputRecord {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    timestamp_ms: i64,
    headers: Vec<Header>,
}

impl InputRecord {
    /// The decoded key, as a transform and the output see it ("" when absent).
    fn key_text(&self) -> String {
        String::from_utf8(self.key.clone().unwrap_or_default()).unwrap()
    }
}

fn scenarios() -> Vec<Scenario> {
    items(field(vectors(), "mixed_fleet"))
        .iter()
        .map(|case| {
            let Value::Object(initial) = field(case, "initial_store") else { panic!("initial_store") };
            Scenario {
                case,
                name: text_of(case, "name"),
                hazard: text_of(case, "hazard"),
                transform: text_of(case, "transform"),
                policy: text_of(case, "policy"),
                initial: initial.iter().map(|(k, v)| (k.clone(), hex(text(v)))).collect(),
                batches: items(field(case, "batches"))
                    .iter()
                    .map(|b| {
                        items(field(b, "records"))
                            .iter()
                            .map(|r| InputRecord {
                                key: opt_hex(field(r, "key_hex")),
                                value: opt_hex(field(r, "value_hex")),
                                timestamp_ms: int(field(r, "timestamp_ms")),
                                headers: items(field(r, "headers"))
                                    .iter()
                                    .map(|h| Header {
                                        key: text(&items(h)[0]).to_owned(),
                                        value: opt_hex(&items(h)[1]).map(Bytes::from),
                                    })
                                    .collect(),
                            })
                            .collect()
                    })
                    .collect(),
            }
        })
        .collect()
}

/// An output record as read back: key, value, timestamp, headers.
type OutRecord = (Vec<u8>, Option<Vec<u8>>, Option<i64>, Vec<Header>);

/// A record to produce: key, value, timestamp, headers.
type ToProduce = (Option<Vec<u8>>, Option<Vec<u8>>, i64, Vec<Header>);

/// What a batch left visible: outputs (key, value, timestamp), changelog writes (key, value),
/// hook calls, transform calls; or the error the run ended with.
#[derive(Debug, Default, Clone)]
struct Visible {
    outputs: Vec<OutRecord>,
    changelog: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    hooks: Vec<Hook>,
    seen: Vec<Seen>,
    committed: bool,
    error: Option<String>,
}

/// Runs scenarios that share a transform and a policy in one application: every record of
/// batch `i` of every scenario is produced before the run's batch `i` is awaited (so a
/// scenario's batch is one fetch, as in Python), and each scenario is read back by its keys.
/// Returns, per scenario, the visible result of each batch.
async fn run(h: &Harness, label: &str, group: &[&Scenario]) -> Vec<Vec<Visible>> {
    let transform = group[0].transform;
    assert!(group.iter().all(|s| s.transform == transform && s.policy == group[0].policy));
    let keys: Vec<BTreeSet<String>> =
        group.iter().map(|s| s.batches.iter().flatten().map(InputRecord::key_text).collect()).collect();
    for (i, a) in keys.iter().enumerate() {
        for b in &keys[i + 1..] {
            assert!(a.is_disjoint(b), "{label}: scenarios of one run need their own keys");
        }
    }
    let input = h.topic(&format!("{label}-in"), 1, false).await;
    let output = h.topic(&format!("{label}-out"), 1, false).await;
    let app = h.name(label);
    let changelog = h.topic(&format!("{label}-changelog"), 1, true).await;
    assert_eq!(changelog, format!("{app}-changelog"));
    let initial: Vec<ToProduce> = group
        .iter()
        .flat_map(|s| s.initial.iter().map(|(k, v)| (Some(k.as_bytes().to_vec()), Some(v.clone()), 1, Vec::new())))
        .collect();
    produce(h, &changelog, &initial).await;

    let seen = Arc::new(Mutex::new(Vec::new()));
    let hooks = Arc::new(Mutex::new(Vec::new()));
    let stage = stage(transform, group[0].policy == "raise", &input, &output, seen.clone(), hooks.clone());
    let running = h.start(&app, "pod-0", stage, Arc::new(common::Probe::default()));

    let batches = group.iter().map(|s| s.batches.len()).max().unwrap();
    let mut results: Vec<Vec<Visible>> = vec![Vec::new(); group.len()];
    let (mut produced, mut outputs_before, mut changelog_before) = (0usize, 0usize, initial.len());
    let mut ended = None;
    let mut running = Some(running);
    for b in 0..batches {
        let records: Vec<ToProduce> = group
            .iter()
            .filter_map(|s| s.batches.get(b))
            .flatten()
            .map(|r| (r.key.clone(), r.value.clone(), r.timestamp_ms, r.headers.clone()))
            .collect();
        produce(h, &input, &records).await;
        produced += records.len();
        let committed = settle(h, &app, &input, produced as i64, running.as_ref().unwrap()).await;
        if !committed {
            ended = Some(running.take().unwrap().ended().await.expect_err("the run ended"));
        }
        let out = h.read(&output).await;
        let log = h.read(&changelog).await;
        let hook_calls = std::mem::take(&mut *hooks.lock().unwrap());
        let seen_calls = std::mem::take(&mut *seen.lock().unwrap());
        for (i, s) in group.iter().enumerate() {
            let Some(batch) = s.batches.get(b) else { continue };
            let mine = &keys[i];
            let batch_keys: BTreeSet<Option<Vec<u8>>> = batch.iter().map(|r| r.key.clone()).collect();
            results[i].push(Visible {
                outputs: out[outputs_before..]
                    .iter()
                    .filter(|r| mine.contains(&String::from_utf8(r.key.clone().unwrap().to_vec()).unwrap()))
                    .map(|r| {
                        (
                            r.key.as_deref().unwrap().to_vec(),
                            r.value.as_ref().map(|v| v.to_vec()),
                            r.timestamp_ms,
                            r.headers.clone(),
                        )
                    })
                    .collect(),
                changelog: log[changelog_before..]
                    .iter()
                    .filter(|r| mine.contains(&String::from_utf8(r.key.clone().unwrap().to_vec()).unwrap()))
                    .map(|r| (r.key.as_deref().unwrap().to_vec(), r.value.as_ref().map(|v| v.to_vec())))
                    .collect(),
                hooks: hook_calls.iter().filter(|c| batch_keys.contains(&c.key)).cloned().collect(),
                seen: seen_calls.iter().filter(|c| mine.contains(&c.0)).cloned().collect(),
                committed,
                error: ended.as_ref().map(ToString::to_string),
            });
        }
        outputs_before = out.len();
        changelog_before = log.len();
        if ended.is_some() {
            break;
        }
    }
    if let Some(running) = running {
        running.stop().await.unwrap();
    }
    results
}

async fn produce(h: &Harness, topic: &str, records: &[ToProduce]) {
    if records.is_empty() {
        return;
    }
    let producer = h.kafka.producer(ProducerConfig::idempotent(h.name("seed"))).unwrap();
    for (key, value, timestamp_ms, headers) in records {
        let record = ProducerRecord {
            topic: topic.to_owned(),
            partition: Some(0),
            key: key.clone().map(Bytes::from),
            value: value.clone().map(Bytes::from),
            headers: headers.clone(),
            timestamp_ms: Some(*timestamp_ms),
        };
        producer.send(record).await.unwrap().await.unwrap();
    }
    producer.close().await;
}

/// Waits until the group committed `next` on the input, or the run ended; true when committed.
async fn settle(h: &Harness, app: &str, input: &str, next: i64, running: &common::Running) -> bool {
    let deadline = tokio::time::Instant::now() + common::SETTLE_MAX;
    loop {
        if h.committed(app, &[TopicPartition::new(input, 0)]).await == vec![Some(next)] {
            return true;
        }
        if running.is_finished() {
            return false;
        }
        assert!(tokio::time::Instant::now() < deadline, "{app}: offset {next} never committed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Comparing with Python

/// Python's visible result of a batch.
fn python(batch: &Value) -> Visible {
    let committed = matches!(field(batch, "committed"), Value::Bool(true));
    Visible {
        outputs: items(field(batch, "outputs"))
            .iter()
            .map(|o| {
                (
                    hex(text_of(o, "key_hex")),
                    opt_hex(field(o, "value_hex")),
                    opt_int(field(o, "timestamp_ms")),
                    Vec::new(),
                )
            })
            .collect(),
        changelog: items(field(batch, "changelog"))
            .iter()
            .map(|c| (hex(text_of(c, "key_hex")), opt_hex(field(c, "value_hex"))))
            .collect(),
        hooks: items(field(batch, "hook_calls"))
            .iter()
            .map(|c| Hook { part: Part::Value, key: None, offset: int(field(c, "offset")), cause: "python" })
            .collect(),
        seen: Vec::new(),
        committed,
        error: match batch {
            Value::Object(map) => {
                map.get("error").map(|e| format!("{}: {}", text_of(e, "type"), text_of(e, "message")))
            }
            _ => None,
        },
    }
}

fn transform_calls(batch: &Value) -> Vec<Option<&str>> {
    items(field(batch, "transform_calls"))
        .iter()
        .map(|c| match field(c, "value") {
            Value::Null => None,
            v => Some(text(v)),
        })
        .collect()
}

/// Outputs as compared: a Python output without a timestamp gets the producer's clock, so
/// only a set timestamp is compared.
fn comparable_outputs(python: &Visible, ours: &Visible) -> (Vec<String>, Vec<String>) {
    let render = |outputs: &[OutRecord], with_ts: &[bool]| -> Vec<String> {
        outputs
            .iter()
            .enumerate()
            .map(|(i, (k, v, ts, _))| {
                let ts = if with_ts.get(i).copied().unwrap_or(true) { format!("{ts:?}") } else { "now".to_owned() };
                format!("{} => {} @ {ts}", show(Some(k)), show(v.as_deref()))
            })
            .collect()
    };
    let with_ts: Vec<bool> = python.outputs.iter().map(|o| o.2.is_some()).collect();
    (render(&python.outputs, &with_ts), render(&ours.outputs, &with_ts))
}

fn changelog_text(changelog: &[(Vec<u8>, Option<Vec<u8>>)]) -> Vec<String> {
    changelog.iter().map(|(k, v)| format!("{} => {}", show(Some(k)), show(v.as_deref()))).collect()
}

/// Asserts that ours is Python's result for `batch` of `scenario`.
fn assert_same(scenario: &Scenario, b: usize, python: &Visible, ours: &Visible) {
    let name = format!("{} (batch {b})", scenario.name);
    let (want, got) = comparable_outputs(python, ours);
    assert_eq!(got, want, "{name}: outputs");
    assert_eq!(changelog_text(&ours.changelog), changelog_text(&python.changelog), "{name}: changelog");
    assert_eq!(ours.committed, python.committed, "{name}: committed ({:?} vs {:?})", ours.error, python.error);
    assert!(ours.hooks.is_empty() && python.hooks.is_empty(), "{name}: hook calls {:?}", ours.hooks);
    for output in &ours.outputs {
        assert!(output.3.is_empty(), "{name}: an output carries headers {:?}", output.3);
    }
}

/// Non-finite numbers and lone surrogates that Python's `json.loads` reads and our strict
/// parser rejects (hazard 1): every scenario of that hazard but the underflow control.
fn rejected_at_decode(s: &Scenario) -> bool {
    s.hazard == "non_finite_and_surrogates" && !s.name.ends_with("underflow_control")
}

/// Scenarios whose result differs from Python's, and how (docs/compatibility.md).
fn check(scenario: &Scenario, ours: &[Visible]) {
    let name = scenario.name;
    let batches = items(field(scenario.case, "batches"));
    assert_eq!(ours.len(), batches.len(), "{name}: batches run");
    for (b, (batch, ours)) in batches.iter().zip(ours).enumerate() {
        let py = python(batch);
        let records = &scenario.batches[b];
        if rejected_at_decode(scenario) {
            // Python: the transform sees the value (nan, inf, a lone surrogate) and the batch
            // commits unless the value is encoded again (output or state), which crashes at the
            // send whatever the policy; the hook is never asked.
            assert!(py.hooks.is_empty(), "{name}: Python never asks the hook");
            assert_eq!(transform_calls(batch).len(), 1, "{name}: Python's transform sees the record");
            match scenario.transform {
                "count" => assert!(py.committed && py.outputs.len() == 1, "{name}: Python counts it"),
                _ => assert!(!py.committed && py.error.is_some(), "{name}: Python crashes at the send"),
            }
            // Ours: an ordinary invalid record. The hook decides; the transform never sees it.
            let record = &records[0];
            assert_eq!(ours.hooks.len(), 1, "{name}: we ask the hook once: {ours:?}");
            assert_eq!(
                ours.hooks[0],
                Hook {
                    part: Part::Value,
                    key: record.key.clone(),
                    offset: ours.hooks[0].offset,
                    cause: "JSONDecodeError"
                },
                "{name}"
            );
            assert!(ours.seen.is_empty() && ours.outputs.is_empty() && ours.changelog.is_empty(), "{name}: {ours:?}");
            match scenario.policy {
                "skip" => assert!(ours.committed, "{name}: skipped, its offset commits"),
                _ => assert!(
                    !ours.committed && ours.error.as_deref().is_some_and(|e| e.contains("undecodable value")),
                    "{name}: raised: {ours:?}"
                ),
            }
            continue;
        }
        match name {
            // Hazard 2: Python compares dicts (1 == 1.0 == True, 0.0 == -0.0) and writes
            // nothing; our equality is the bytes', so the changed state is written.
            "dedup_int_to_float"
            | "dedup_int_to_bool"
            | "dedup_zero_to_false"
            | "dedup_zero_to_neg_zero"
            | "dedup_nested_int_to_float"
            | "dedup_float_to_int" => {
                assert!(py.changelog.is_empty(), "{name}: Python writes nothing");
                let yielded = canonical(records[0].value.as_deref());
                let key = records[0].key.clone().unwrap();
                assert_eq!(ours.changelog, [(key, Some(yielded))], "{name}: we write the yielded state");
                let py_no_changelog = Visible { changelog: ours.changelog.clone(), ..py.clone() };
                assert_same(scenario, b, &py_no_changelog, ours);
            }
            // ... so the next batch sees the baseline in Python and the yielded state here.
            "dedup_next_batch_sees_baseline" if b == 0 => {
                assert!(py.changelog.is_empty(), "{name}: Python writes nothing");
                assert_eq!(changelog_text(&ours.changelog), ["k => {\"a\":1.0}"], "{name}");
                assert_same(scenario, b, &Visible { changelog: ours.changelog.clone(), ..py.clone() }, ours);
            }
            "dedup_next_batch_sees_baseline" => {
                let (want, got) = comparable_outputs(&py, ours);
                assert_eq!(want, ["k => {\"a\":1} @ now"], "{name}: Python's next batch sees the baseline");
                assert_eq!(got, ["k => {\"a\":1.0} @ now"], "{name}: ours sees the state yielded last");
                assert_eq!(changelog_text(&ours.changelog), changelog_text(&py.changelog), "{name}");
            }
            // Hazard 3: Python's float round trip moves some forwarded timestamps outside
            // [2004-11-03T19:53:47.776Z, 2038-01-19T03:14:08Z) by one millisecond; ours are exact.
            "forward_ts_epoch_plus_1001" | "forward_ts_before_window_diff" | "forward_ts_after_window_diff" => {
                let input = records[0].timestamp_ms;
                let python_ts = py.outputs[0].2.unwrap();
                assert_eq!((python_ts - input).abs(), 1, "{name}: Python is a millisecond off");
                assert_eq!(ours.outputs[0].2, Some(input), "{name}: ours is exact");
                let mut adjusted = py.clone();
                adjusted.outputs[0].2 = Some(input);
                assert_same(scenario, b, &adjusted, ours);
            }
            // Python cannot represent a timestamp past year 9999: `parse_message` raises outside
            // the hook and the stage crash-loops; we forward it.
            "forward_ts_year_10000" => {
                assert!(
                    !py.committed && py.error.as_deref() == Some("ValueError: year 10000 is out of range"),
                    "{name}"
                );
                assert!(transform_calls(batch).is_empty(), "{name}: Python never calls the transform");
                assert!(ours.committed, "{name}: {ours:?}");
                assert_eq!(ours.outputs[0].2, Some(records[0].timestamp_ms), "{name}");
            }
            // Hazard 7: a changelog value Python's lenient `json.loads(bytes)` reads (a UTF-8
            // BOM) is a corrupt state for our strict decoder: the run ends, nothing commits.
            "count_bom_baseline" => {
                assert!(py.committed, "{name}: Python reads it");
                assert!(
                    !ours.committed && ours.error.as_deref().is_some_and(|e| e.contains("state")),
                    "{name}: {ours:?}"
                );
                assert!(ours.outputs.is_empty() && ours.changelog.is_empty(), "{name}");
            }
            // Outputs (and changelog writes) of different state keys in one batch: Python's
            // buckets go in the order their keys first appear, ours in key order. Per key the
            // order is the same; neither promises more (batch boundaries differ anyway).
            "count_bucket_order" => {
                let keys = |v: &Visible| v.outputs.iter().map(|o| show(Some(&o.0))).collect::<Vec<_>>();
                assert_eq!(keys(&py), ["order-z", "order-z", "order-a"], "{name}: Python, first seen");
                assert_eq!(keys(ours), ["order-a", "order-z", "order-z"], "{name}: ours, by key");
                let mut sorted = py.clone();
                sorted.outputs.sort_by(|a, b| a.0.cmp(&b.0));
                sorted.changelog.sort_by(|a, b| a.0.cmp(&b.0));
                assert_same(scenario, b, &sorted, ours);
            }
            // Both crash, nothing visible: Python at the put (NaN), ours at the read.
            "count_nan_baseline" => {
                assert!(!py.committed && !ours.committed, "{name}: {py:?} {ours:?}");
                assert!(ours.error.as_deref().is_some_and(|e| e.contains("state")), "{name}: {ours:?}");
                assert!(ours.outputs.is_empty() && ours.changelog.is_empty(), "{name}");
            }
            _ => {
                assert_same(scenario, b, &py, ours);
                // The transform saw what Python's saw: a tombstone as None, a value as a value.
                let python_calls: Vec<bool> = transform_calls(batch).iter().map(Option::is_none).collect();
                let our_calls: Vec<bool> = ours.seen.iter().map(|s| s.1.is_none()).collect();
                assert_eq!(our_calls, python_calls, "{name}: tombstones seen");
            }
        }
    }
}

fn canonical(value: Option<&[u8]>) -> Vec<u8> {
    Event::wrap(wire::decode_value(value).unwrap()).encode().unwrap()
}

/// Runs every scenario of `hazard` and checks it: scenarios that share a transform and the skip
/// policy, and have one batch, run together in one application; the others alone.
async fn hazard(hazard: &str) {
    let all = scenarios();
    let mine: Vec<&Scenario> = all.iter().filter(|s| s.hazard == hazard).collect();
    assert!(!mine.is_empty(), "no scenarios of {hazard}");
    let h = Harness::new(Arc::new(LocalCluster::new()), format!("mf-{hazard}"), 1);
    let alone = |s: &Scenario| {
        s.batches.len() > 1 || s.policy != "skip" || matches!(s.name, "count_bom_baseline" | "count_nan_baseline")
    };
    let mut groups: BTreeMap<(&str, usize), Vec<&Scenario>> = BTreeMap::new();
    for (i, s) in mine.iter().enumerate() {
        let slot = if alone(s) { i + 1 } else { 0 };
        groups.entry((s.transform, slot)).or_default().push(s);
    }
    let runs = groups.iter().enumerate().map(|(n, ((transform, _), group))| {
        let h = &h;
        async move {
            let label = format!("{transform}-{n}");
            (group, run(h, &label, group).await)
        }
    });
    for (group, results) in futures::future::join_all(runs).await {
        for (scenario, visible) in group.iter().zip(results) {
            check(scenario, &visible);
        }
    }
}

/// Hazard 1, INV-02: NaN, ±Infinity, numbers that overflow and lone surrogate escapes. Python
/// hands them to the transform and crashes only if they are encoded again (whatever the
/// policy); we reject them at decode and the policy decides. `1e-400` reads as `0.0` in both.
#[tokio::test]
async fn inv_02_hazard_1_non_finite_and_lone_surrogates_vs_python() {
    hazard("non_finite_and_surrogates").await;
}

/// Hazard 2, TRX-20, ATTR-44: a state is written when its bytes change; Python's dict equality
/// skips `1 → 1.0`, `1 → true`, `0.0 → -0.0` and `1e16 → 10000000000000000`, so its next batch
/// sees the old baseline. Otherwise identical (a non-canonical baseline equal to the yielded
/// state writes nothing in both; an empty state deletes in both).
#[tokio::test]
async fn trx_20_hazard_2_state_dedup_vs_python() {
    hazard("state_dedup").await;
}

/// Hazard 3, ATTR-40, TRX-13: forwarded timestamps through the engine: exact here, Python's
/// float round trip is a millisecond off for some instants outside 2004-11-03..2038-01-19, and
/// cannot read one past year 9999.
#[tokio::test]
async fn attr_40_hazard_3_forwarded_timestamps_vs_python() {
    hazard("timestamps").await;
}

/// Hazard 7, TRX-07, INV-01, INV-17, STO-11: a tombstone reaches the transform as `None` (and a
/// forwarded one stays a tombstone), an empty value as `{}`; an absent key and an empty key are
/// one state key `""` and write an empty (not null) key; input headers are not forwarded; a
/// changelog value Python's lenient reader accepts (a BOM) is corrupt state here; outputs of
/// different keys in one batch go in key order here, first-seen order in Python.
#[tokio::test]
async fn trx_07_hazard_7_tombstones_keys_headers_vs_python() {
    hazard("tombstones_and_keys").await;
}

// ---------------------------------------------------------------------------------------------
// Hazard 3: the forwarded-timestamp window

fn pair(entry: &Value) -> (i64, String) {
    let (a, b) = text(entry).split_once('>').expect("input>output");
    (a.parse().unwrap(), b.to_owned())
}

/// ATTR-40, TRX-13 (hazard 3): a forwarded timestamp leaves as it arrived here; in Python it
/// goes `datetime.fromtimestamp(ms / 1000)` → `int(dt.timestamp() * 1000)`, which is exact for
/// every millisecond in [2^40, 2^31·1000) ms = [2004-11-03T19:53:47.776Z, 2038-01-19T03:14:08Z)
/// and a millisecond off for about 1% of instants outside it. Computed timestamps (µs) leave as
/// their floor in both inside the window.
#[test]
fn attr_40_hazard_3_forwarded_timestamp_window() {
    let t = field(vectors(), "timestamp_forward");
    let window = items(field(t, "window"));
    let (lo, hi) = (int(&window[0]), int(&window[1]));
    assert_eq!((lo, hi), (1 << 40, (1i64 << 31) * 1000));
    let forward = |ms: i64| {
        let record = RawRecord {
            topic: Arc::from("t"),
            partition: 0,
            offset: 0,
            timestamp_ms: Some(ms),
            key: Some(Bytes::from_static(b"k")),
            value: None,
            headers: Vec::new(),
        };
        let observer = flechtwerk::testing::RecordingObserver::default();
        let msg = flechtwerk::testing::decode_input(&record, &wire::RaisePolicy, &observer).unwrap().unwrap();
        Message::new("o", "k", "v").with_timestamp(msg.timestamp.unwrap()).timestamp_ms().unwrap()
    };
    let mut differs = 0;
    for range in items(field(t, "ranges")).iter().chain(items(field(t, "bands"))) {
        let (from, to) = (int(field(range, "from")), int(field(range, "to")));
        for entry in items(field(range, "output_differs")) {
            let (ms, python) = pair(entry);
            let python: i64 = python.parse().unwrap();
            assert!(!(lo..hi).contains(&ms), "{ms}: Python differs inside the window");
            assert!((from..to).contains(&ms) && (python - ms).abs() == 1, "{ms} -> {python}");
            assert_eq!(forward(ms), ms, "{ms}: ours is exact");
            differs += 1;
        }
    }
    // Every millisecond of the dense ranges, and the seeded samples, forward exactly here.
    for range in items(field(t, "ranges")) {
        for ms in (int(field(range, "from"))..int(field(range, "to"))).step_by(7) {
            assert_eq!(forward(ms), ms);
        }
    }
    // 24 in the first 4 s after the epoch, 240 in each 2 s around the window's edges, 159 of the
    // 15200 sampled instants (about 1% outside the window).
    assert_eq!(differs, 24 + 240 + 240 + 159, "Python's off-by-one forwards in the vectors");
    for entry in items(field(t, "window_micros_to_millis")) {
        let (us, python) = pair(entry);
        let ts = DateTime::from_timestamp_micros(us).unwrap();
        let ours = Message::new("o", "k", "v").with_timestamp(ts).timestamp_ms().unwrap();
        assert_eq!(ours.to_string(), python, "{us} µs");
    }
    // What the transform sees is exact here; Python's datetime is off by microseconds near
    // year 9999 (fromtimestamp of a float), and it cannot represent year 10000 at all.
    let last = items(field(t, "ranges")).last().unwrap();
    assert_eq!(int(field(last, "seen_inexact_count")), 3840);
    assert_eq!(text_of(field(t, "year_10000_error"), "message"), "year 10000 is out of range");
    assert_eq!(forward(253_402_300_800_000), 253_402_300_800_000);
}

// ---------------------------------------------------------------------------------------------
// Hazards 4 and 5: client ids, transactional ids, group, changelog

/// A `Kafka` that records the configs of every client it builds.
struct RecordingKafka {
    inner: Arc<dyn Kafka>,
    consumers: Mutex<Vec<ConsumerConfig>>,
    producers: Mutex<Vec<ProducerConfig>>,
}

impl Kafka for RecordingKafka {
    fn consumer(&self, config: ConsumerConfig) -> KafkaResult<Box<dyn Consumer>> {
        self.consumers.lock().unwrap().push(config.clone());
        self.inner.consumer(config)
    }
    fn producer(&self, config: ProducerConfig) -> KafkaResult<Box<dyn Producer>> {
        self.producers.lock().unwrap().push(config.clone());
        self.inner.producer(config)
    }
    fn admin(&self) -> KafkaResult<Box<dyn Admin>> {
        self.inner.admin()
    }
}

/// LIFE-03, LIFE-04 (hazards 4, 5): every client id, transactional id, the group and the
/// changelog a transformer with a config topic uses are Python's: main consumer `client_id` in
/// group `application_id` (from the earliest offset), config consumer `{client_id}-config`,
/// restore consumers `client_id` (group-less), task producers `{client_id}-{p}` with
/// transactional id `{application_id}-{p}`, changelog `{application_id}-changelog`. Only the
/// admin client differs (Python: aiokafka's default `aiokafka-<version>`; ours has none in the
/// port, librdkafka's adapter names it `flechtwerk-admin`).
#[tokio::test]
async fn life_03_life_04_hazards_4_5_client_ids_match_python() {
    let ids = field(vectors(), "client_ids");
    let (app, client) = (text_of(ids, "application_id"), text_of(ids, "client_id"));
    let cluster: Arc<dyn Kafka> = Arc::new(LocalCluster::new());
    let kafka =
        Arc::new(RecordingKafka { inner: cluster.clone(), consumers: Mutex::default(), producers: Mutex::default() });
    let h = Harness::new(kafka.clone(), "ids", 1);
    let admin = cluster.admin().unwrap();
    for (topic, partitions) in [("in", 4), ("cfg", 1)] {
        admin.create_topic(&NewTopic::new(topic, partitions)).await.unwrap();
    }
    let stage = transformer(["in"]).config_topics(["cfg"]).transform(|_, _, _| Ok(()));
    let probe = Arc::new(common::Probe::default());
    let running = h.start(app, client, stage, probe.clone());
    common::wait_for("four tasks", || probe.tasks.load(std::sync::atomic::Ordering::SeqCst) == 4).await;
    running.stop().await.unwrap();

    let consumers = kafka.consumers.lock().unwrap().clone();
    let main = field(ids, "main_consumer");
    let member: Vec<&ConsumerConfig> = consumers.iter().filter(|c| c.group_id.is_some()).collect();
    assert_eq!(member.len(), 1, "{consumers:?}");
    assert_eq!(member[0].client_id, text_of(main, "client_id"));
    assert_eq!(member[0].group_id.as_deref(), Some(text_of(main, "group_id")));
    assert_eq!(member[0].offset_reset, OffsetReset::Earliest);
    assert_eq!(items(field(main, "assignors")).iter().map(text).collect::<Vec<_>>(), ["range"]);
    let groupless: BTreeSet<&str> =
        consumers.iter().filter(|c| c.group_id.is_none()).map(|c| c.client_id.as_str()).collect();
    let want: BTreeSet<&str> =
        [text_of(field(ids, "config_consumer"), "client_id"), text_of(field(ids, "restore_consumer"), "client_id")]
            .into();
    assert_eq!(groupless, want, "config and restore consumers");
    for name in ["main_consumer", "config_consumer", "restore_consumer"] {
        assert_eq!(
            text_of(field(ids, name), "isolation_level"),
            "read_committed",
            "{name} (ours are all read_committed)"
        );
    }

    let producers = kafka.producers.lock().unwrap().clone();
    let ours: BTreeMap<String, Option<String>> =
        producers.iter().map(|p| (p.client_id.clone(), p.transactional_id.clone())).collect();
    let Value::Object(tasks) = field(ids, "task_producers") else { panic!("task_producers") };
    for (p, python) in tasks {
        assert_eq!(
            ours.get(text_of(python, "client_id")),
            Some(&Some(text_of(python, "transactional_id").to_owned())),
            "task {p}: {ours:?}"
        );
    }
    assert_eq!(ours.len(), 4, "one producer per task: {ours:?}");
    assert_eq!(text_of(ids, "changelog_topic"), format!("{app}-changelog"));
    assert_eq!(admin.partition_count(text_of(ids, "changelog_topic")).await.unwrap(), Some(4));
    assert!(text_of(ids, "admin_client_id").starts_with("aiokafka-"));
}

/// Hazard 6 (mixing `Guarantee::AtLeastOnce` with exactly-once members): nothing a member tells
/// the group can carry its guarantee. Python's members join with protocol type `consumer` and
/// assignor `range`, whose metadata is version 0 with empty user data; ours (librdkafka's range,
/// `group.protocol=classic`) send version 3 with empty user data, and aiokafka, leading the
/// group, reads the version-0 fields of it and an empty user data. So no member can refuse the
/// other kind (docs/compatibility.md, "Mixing guarantees"); the rule is one guarantee per
/// `application_id`.
#[test]
fn hazard_6_the_group_protocol_carries_no_guarantee() {
    let protocol = field(field(vectors(), "client_ids"), "group_protocol");
    assert_eq!(text_of(protocol, "protocol_type"), "consumer");
    assert_eq!(text_of(protocol, "assignor"), "range");
    assert_eq!(int(field(protocol, "aiokafka_metadata_version")), 0);
    assert_eq!(text_of(protocol, "aiokafka_user_data_hex"), "");
    // version 0, one topic "in", user data of length 0
    assert_eq!(hex(text_of(protocol, "aiokafka_metadata_hex")), b"\x00\x00\x00\x00\x00\x01\x00\x02in\x00\x00\x00\x00");
    let read = field(protocol, "aiokafka_reads_librdkafka");
    assert_eq!((int(field(read, "version")), text_of(read, "user_data_hex")), (3, ""));
    assert_eq!(items(field(read, "subscription")).iter().map(text).collect::<Vec<_>>(), ["in"]);
}
