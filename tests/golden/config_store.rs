//! Config store scenarios: bootstrap and drain over the vectors' records give Python's store,
//! return value and hook calls.

use std::collections::BTreeMap;

use flechtwerk::attribute::{Attribute, BOOL};
use flechtwerk::json::{Map, Value};
use flechtwerk::observer::InvalidOutcome;
use flechtwerk::testing::{decode_config_update, ConfigBootstrap, Observed, RecordingObserver};
use flechtwerk::wire::{self, Part, PolicyError, RawRecord};
use flechtwerk::{Config, ConfigStore};

use crate::vectors::{
    canonical, cases, field, hex_field, int, items, opt, raw_record, text, text_of, to_hex, HookCall, RecordingPolicy,
};

const ENRICHED: Attribute<bool> = Attribute::new("enriched", &BOOL);

/// The scenario's `enrich_config`: identity, or `config[ENRICHED] = True`.
fn enrich(kind: &str, config: Config) -> Config {
    match kind {
        "identity" => config,
        "flag" => config.with(&ENRICHED, true).unwrap(),
        other => panic!("unknown enrich {other:?}"),
    }
}

/// What one scenario produced, in the vectors' terms.
#[derive(Debug, Default)]
struct ScenarioOutcome {
    /// key, topic, partition, offset, value hex (None for a tombstone)
    returned: Vec<(String, String, i32, i64, Option<String>)>,
    error: Option<PolicyError>,
    store: BTreeMap<String, String>,
    nbytes: usize,
}

/// The records in the order `FakeKafkaConsumer.getmany` delivers them: grouped by
/// topic-partition, groups in order of first appearance.
fn fetch_order(case: &Value) -> Vec<RawRecord> {
    let mut groups: Vec<((String, i32), Vec<RawRecord>)> = Vec::new();
    for r in items(field(case, "records")) {
        let tp = (text_of(r, "topic").to_owned(), int(field(r, "partition")) as i32);
        let record = raw_record(
            &tp.0,
            tp.1,
            int(field(r, "offset")),
            hex_field(r, "key_hex").as_deref(),
            hex_field(r, "value_hex").as_deref(),
        );
        match groups.iter_mut().find(|(g, _)| *g == tp) {
            Some((_, records)) => records.push(record),
            None => groups.push((tp, vec![record])),
        }
    }
    groups.into_iter().flat_map(|(_, records)| records).collect()
}

fn returned(key: &str, record: &RawRecord, value: Option<&Map>) -> (String, String, i32, i64, Option<String>) {
    (key.to_owned(), record.topic.to_string(), record.partition, record.offset, value.map(|m| to_hex(&canonical(m))))
}

fn finish(outcome: &mut ScenarioOutcome, store: &ConfigStore) {
    for key in store.keys() {
        let bytes = store.get_bytes(&key).expect("listed key");
        outcome.nbytes += key.len() + bytes.len();
        outcome.store.insert(key, to_hex(bytes));
    }
}

/// Bootstrap: offer every record, then decide each survivor; identity enrichment takes
/// `apply_unenriched` (the fast path), flag enrichment decodes, enriches and stores.
fn run_bootstrap(case: &Value, policy: &RecordingPolicy, observer: &RecordingObserver) -> ScenarioOutcome {
    let enrich_kind = text_of(case, "enrich");
    let mut outcome = ScenarioOutcome::default();
    let mut bootstrap = ConfigBootstrap::new();
    for record in fetch_order(case) {
        if let Err(e) = bootstrap.offer(&record, policy, observer) {
            outcome.error = Some(e);
            break;
        }
    }
    let mut applied = Vec::new(); // identity: the returned value is read back from the store
    while outcome.error.is_none() {
        let Some(survivor) = bootstrap.next_survivor() else { break };
        let result = if enrich_kind == "identity" {
            bootstrap.apply_unenriched(&survivor, policy, observer).map(|stored| {
                if stored {
                    applied.push(survivor.clone());
                }
            })
        } else {
            flechtwerk::testing::decode_value_with(&survivor.record, policy, observer).map(|decoded| {
                if let Some(map) = decoded {
                    outcome.returned.push(returned(&survivor.key, &survivor.record, Some(&map)));
                    bootstrap.put(&survivor.key, &enrich(enrich_kind, Config::wrap(map))).unwrap();
                }
            })
        };
        if let Err(e) = result {
            outcome.error = Some(e);
        }
    }
    // After a crash the remaining survivors are never applied (Python's bootstrap stops too).
    while bootstrap.next_survivor().is_some() {}
    let store = bootstrap.finish();
    for survivor in &applied {
        let map = wire::decode_value(store.get_bytes(&survivor.key)).expect("stored bytes decode");
        outcome.returned.push(returned(&survivor.key, &survivor.record, Some(&map)));
    }
    finish(&mut outcome, &store);
    outcome
}

/// Bootstrap as the runner does it for a stage that does not enrich: canonical values settled
/// on offer, the rest decided in one call. The error as its text.
fn run_settled_bootstrap(
    case: &Value,
    policy: &RecordingPolicy,
    observer: &RecordingObserver,
) -> Result<ConfigStore, String> {
    let mut bootstrap = ConfigBootstrap::new().without_enrichment();
    for record in fetch_order(case) {
        bootstrap.offer(&record, policy, observer).map_err(|e| e.to_string())?;
    }
    bootstrap.finish_unenriched(policy, observer).map_err(|e| e.to_string())
}

/// Drain: each record through `decode_config_update`, then delete or enrich-and-put.
fn run_drain(case: &Value, policy: &RecordingPolicy, observer: &RecordingObserver) -> ScenarioOutcome {
    let mut outcome = ScenarioOutcome::default();
    let mut store = ConfigStore::new();
    let Value::Object(initial) = field(case, "initial_store_json") else { panic!("initial store") };
    for (key, value) in initial {
        store.put_bytes(key, text(value).as_bytes()).unwrap();
    }
    for record in fetch_order(case) {
        match decode_config_update(&record, policy, observer) {
            Err(e) => {
                outcome.error = Some(e);
                break;
            }
            Ok(None) => {} // skipped by the policy: not applied, not returned
            Ok(Some((key, None))) => {
                store.delete(&key);
                outcome.returned.push(returned(&key, &record, None));
            }
            Ok(Some((key, Some(map)))) => {
                outcome.returned.push(returned(&key, &record, Some(&map)));
                store.put(&key, &enrich(text_of(case, "enrich"), Config::wrap(map))).unwrap();
            }
        }
    }
    finish(&mut outcome, &store);
    outcome
}

/// CFG-01, CFG-03, CFG-12..14, CFG-20..22, INV-11..13, INV-17, INV-19, INV-20: the config store
/// scenarios, bootstrap and drain, give Python's store, return value and hook calls.
#[test]
fn cfg_12_cfg_20_inv_19_config_store_scenarios_match_python() {
    for case in cases("config_store") {
        let name = text_of(case, "name");
        let policy = RecordingPolicy::new(text_of(case, "policy"));
        let observer = RecordingObserver::default();
        let outcome = match text_of(case, "phase") {
            "bootstrap" => run_bootstrap(case, &policy, &observer),
            "drain" => run_drain(case, &policy, &observer),
            other => panic!("{name}: unknown phase {other:?}"),
        };
        let calls = policy.calls();

        if text_of(case, "phase") == "bootstrap" && text_of(case, "enrich") == "identity" {
            // A stage that does not enrich settles canonical values as they are offered; the
            // store, the hook calls and the crash are the same as deciding every survivor.
            let settled_policy = RecordingPolicy::new(text_of(case, "policy"));
            let settled = run_settled_bootstrap(case, &settled_policy, &RecordingObserver::default());
            assert_eq!(settled_policy.calls(), calls, "{name}: settled bootstrap, hook calls");
            match settled {
                Ok(store) => {
                    assert!(outcome.error.is_none(), "{name}: settled bootstrap did not crash");
                    let mut settled_outcome = ScenarioOutcome::default();
                    finish(&mut settled_outcome, &store);
                    assert_eq!(settled_outcome.store, outcome.store, "{name}: settled bootstrap, store");
                }
                Err(e) => assert_eq!(
                    Some(e),
                    outcome.error.as_ref().map(ToString::to_string),
                    "{name}: settled bootstrap, error"
                ),
            }
        }

        // Every hook call is counted with its outcome (INV-20).
        let want_outcome = match text_of(case, "policy") {
            "raise" => InvalidOutcome::Raised,
            "skip" => InvalidOutcome::Skipped,
            _ => InvalidOutcome::Substituted,
        };
        let counted: Vec<Observed> =
            calls.iter().map(|c| Observed::MessageInvalid { topic: c.1.clone(), outcome: want_outcome }).collect();
        assert_eq!(observer.events(), counted, "{name}: counted hook calls");

        if name.contains("_crashes_at_store_put") {
            // Divergence (mixed-fleet hazard 1): Python decodes NaN, infinities and lone
            // surrogates, never asks the hook, then crashes at the store put whatever the policy
            // (bootstrap and drain alike). We reject them at decode, so the policy decides: skip
            // leaves the store as it was, raise raises the InvalidMessageError.
            let error = opt(case, "error").unwrap_or_else(|| panic!("{name}: Python crashes"));
            assert!(matches!(text_of(error, "type"), "ValueError" | "UnicodeEncodeError"), "{name}: {error:?}");
            assert!(items(field(case, "hook_calls")).is_empty(), "{name}: Python never asks the hook");
            let record = fetch_order(case).pop().unwrap();
            assert_eq!(
                calls,
                [(Part::Value, "cfg".to_owned(), 0, record.offset, "JSONDecodeError")],
                "{name}: we ask the hook once"
            );
            let Value::Object(initial) = field(case, "initial_store_json") else { panic!("{name}: initial store") };
            let initial: BTreeMap<String, String> =
                initial.iter().map(|(k, v)| (k.clone(), to_hex(text(v).as_bytes()))).collect();
            assert_eq!(outcome.store, initial, "{name}: the store is unchanged");
            assert!(outcome.returned.is_empty(), "{name}");
            match text_of(case, "policy") {
                "skip" => assert!(outcome.error.is_none(), "{name}: {:?}", outcome.error),
                _ => assert!(matches!(outcome.error, Some(PolicyError::Raised(_))), "{name}: {:?}", outcome.error),
            }
            continue;
        }

        let want_returned: Vec<_> = opt(case, "returned")
            .map(items)
            .unwrap_or_default()
            .iter()
            .map(|r| {
                (
                    text_of(r, "key").to_owned(),
                    text_of(r, "topic").to_owned(),
                    int(field(r, "partition")) as i32,
                    int(field(r, "offset")),
                    match field(r, "value_hex") {
                        Value::Null => None,
                        v => Some(text(v).to_owned()),
                    },
                )
            })
            .collect();
        if opt(case, "error").is_none() {
            // (A crashed Python bootstrap returns nothing; only the store state is comparable.)
            assert_eq!(outcome.returned, want_returned, "{name}: returned records");
        }

        let Value::Object(want_store) = field(case, "store") else { panic!("{name}: store") };
        let want_store: BTreeMap<String, String> =
            want_store.iter().map(|(k, v)| (k.clone(), text(v).to_owned())).collect();
        assert_eq!(outcome.store, want_store, "{name}: store contents");
        assert_eq!(outcome.nbytes as i64, int(field(case, "nbytes")), "{name}: nbytes");

        let want_calls: Vec<HookCall> = items(field(case, "hook_calls"))
            .iter()
            .map(|c| {
                let part = if text_of(c, "part") == "key" { Part::Key } else { Part::Value };
                let cause = match text_of(c, "cause_type") {
                    "UnicodeDecodeError" => "UnicodeDecodeError",
                    "JSONDecodeError" => "JSONDecodeError",
                    "ValueError" => "ValueError",
                    other => panic!("{name}: cause {other}"),
                };
                (
                    part,
                    text_of(c, "topic").to_owned(),
                    int(field(c, "partition")) as i32,
                    int(field(c, "offset")),
                    cause,
                )
            })
            .collect();
        assert_eq!(calls, want_calls, "{name}: hook calls");

        match (opt(case, "error"), &outcome.error) {
            (None, None) => {}
            (Some(error), Some(PolicyError::Raised(e))) => {
                assert_eq!(text_of(error, "type"), "InvalidMessageError", "{name}");
                assert!(text_of(error, "message").contains(&format!("{}/{}/{}", e.topic(), e.partition(), e.offset())));
            }
            (want, got) => panic!("{name}: Python error {want:?}, ours {got:?}"),
        }
    }
}
