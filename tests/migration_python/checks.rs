//! Checks: a counter's committed outputs and changelog, a scenario's failure report, and what
//! Python 0.17's own consumer and config store read (`tests/python/migration.py`).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::process::Command;

use flechtwerk::json::{self, Value};
use flechtwerk::wire::{self, RawRecord};
use flechtwerk::Event;

use crate::process::Proc;
use crate::{bootstrap, hex, repo, I, INPUTS, KEYS, SEEN};

/// The committed outputs of a counter: every key's outputs lie in one partition and, in order,
/// are `{"i": k + (j-1)·KEYS, "seen": j}` for j = 1..n, n = the key's input count. Returns the
/// violations (at most a few per kind) and the final count per key.
pub(crate) fn check_counter_outputs(outputs: &[RawRecord]) -> (Vec<String>, BTreeMap<String, i64>) {
    let (violations, finals, _) = check_counter_outputs_at(outputs);
    (violations.into_iter().map(|(_, v)| v).collect(), finals)
}

/// What [`check_counter_outputs_at`] finds: each violation with its key (if it is about one),
/// each key's input count, and where a key's outputs first go wrong (partition, offset).
pub(crate) type CounterCheck = (Vec<(Option<String>, String)>, BTreeMap<String, i64>, BTreeMap<String, (i32, i64)>);

/// [`check_counter_outputs`], each violation with its key and where the key's outputs first go
/// wrong (partition, offset), when they do at an output.
pub(crate) fn check_counter_outputs_at(outputs: &[RawRecord]) -> CounterCheck {
    let mut wrong_at = BTreeMap::new();
    let mut per_key: BTreeMap<String, Vec<(i32, i64, i64, i64)>> = BTreeMap::new();
    let mut violations = Vec::new();
    for r in outputs {
        let key = String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned();
        match wire::decode_value(r.value.as_deref()).map(Event::wrap) {
            Ok(v) => match (v.get(&SEEN), v.get(&I)) {
                (Ok(Some(seen)), Ok(Some(i))) => per_key.entry(key).or_default().push((r.partition, seen, i, r.offset)),
                other => {
                    violations.push((None, format!("output {key}@{}/{}: no seen/i: {other:?}", r.partition, r.offset)))
                }
            },
            Err(e) => violations.push((None, format!("output {key}@{}/{}: {e}", r.partition, r.offset))),
        }
    }
    let mut finals = BTreeMap::new();
    for k in 0..KEYS {
        let key = format!("key-{k}");
        let n = ((INPUTS + KEYS - 1 - k) / KEYS) as i64;
        let got = per_key.remove(&key).unwrap_or_default();
        let partitions: std::collections::BTreeSet<i32> = got.iter().map(|g| g.0).collect();
        if partitions.len() > 1 {
            violations.push((None, format!("{key}: outputs in partitions {partitions:?}")));
        }
        let expected: Vec<(i64, i64)> = (1..=n).map(|j| (j, k as i64 + (j - 1) * KEYS as i64)).collect();
        let actual: Vec<(i64, i64)> = got.iter().map(|g| (g.1, g.2)).collect();
        if actual != expected {
            let seen: Vec<i64> = actual.iter().map(|a| a.0).collect();
            // Where it first goes wrong: the output's place and input tie it to a handover.
            let first =
                actual.iter().zip(&expected).position(|(a, e)| a != e).unwrap_or(expected.len().min(actual.len()));
            let at = match (got.get(first), expected.get(first)) {
                (Some(&(partition, seen, i, offset)), Some(&(_, want))) => {
                    wrong_at.insert(key.clone(), (partition, offset));
                    format!("; first off at output {partition}/{offset} (seen {seen}, i {i}; i {want} expected)")
                }
                (Some(&(partition, seen, i, offset)), None) => {
                    wrong_at.insert(key.clone(), (partition, offset));
                    format!("; an extra output at {partition}/{offset} (seen {seen}, i {i})")
                }
                _ => String::new(),
            };
            violations.push((
                Some(key.clone()),
                format!("{key}: {} outputs for {n} inputs, seen = {}{at}", actual.len(), abbreviate(&seen)),
            ));
        }
        finals.insert(key, n);
    }
    for (key, got) in per_key {
        violations.push((None, format!("outputs for a key never input: {key} ({} of them)", got.len())));
    }
    (violations, finals, wrong_at)
}

pub(crate) fn abbreviate(counts: &[i64]) -> String {
    if counts.len() <= 12 {
        return format!("{counts:?}");
    }
    format!("{:?} ... {:?}", &counts[..6], &counts[counts.len() - 6..])
}

/// The changelog's last state per key must be `{"seen": n}`.
pub(crate) fn check_changelog(finals: &BTreeMap<String, i64>, changelog: &[RawRecord]) -> Vec<String> {
    let mut last: BTreeMap<String, Option<i64>> = BTreeMap::new();
    for r in changelog {
        let key = String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned();
        let seen = wire::decode_value(r.value.as_deref()).ok().and_then(|m| Event::wrap(m).get(&SEEN).ok().flatten());
        last.insert(key, if wire::is_tombstone(r.value.as_deref()) { None } else { seen });
    }
    finals
        .iter()
        .filter(|(key, n)| last.get(*key).copied().flatten() != Some(**n))
        .map(|(key, n)| format!("changelog ends {key} at {:?}, the outputs at {n}", last.get(key)))
        .collect()
}

pub(crate) fn fail(scenario: &str, what: &str, violations: &[String], procs: &[&Proc]) -> ! {
    let shown: Vec<&String> = violations.iter().take(20).collect();
    let logs: Vec<String> = procs.iter().map(|p| p.context()).collect();
    panic!(
        "{scenario}: {what}: {} violation(s), first {}:\n  {}\nlogs: {}",
        violations.len(),
        shown.len(),
        shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  "),
        logs.join(", ")
    );
}

/// Reads `topic` with Python 0.17's own consumer and decoder (`migration.py read`).
pub(crate) fn python_read(python: &Path, topic: &str, logs: &Path) -> Vec<Value> {
    let out = Command::new(python)
        .arg(repo().join("tests/python/migration.py"))
        .args(["--log-level", "WARNING", "read", "--bootstrap", &bootstrap(), "--topic", topic])
        .stderr(File::create(logs.join(format!("read-{topic}.log"))).expect("log"))
        .output()
        .expect("run migration.py read");
    assert!(out.status.success(), "migration.py read {topic}: {} (log in {})", out.status, logs.display());
    let Value::Object(doc) = json::parse(std::str::from_utf8(&out.stdout).expect("UTF-8")).expect("JSON") else {
        panic!("not an object")
    };
    match doc.get("records") {
        Some(Value::List(records)) => records.clone(),
        other => panic!("no records: {other:?}"),
    }
}

/// The config store Python 0.17 bootstraps from `topic` (`migration.py config-store`): key →
/// value bytes, both hex.
pub(crate) fn python_store(python: &Path, topic: &str, logs: &Path) -> BTreeMap<String, String> {
    let out = Command::new(python)
        .arg(repo().join("tests/python/migration.py"))
        .args(["--log-level", "WARNING", "config-store", "--bootstrap", &bootstrap(), "--topic", topic])
        .stderr(File::create(logs.join(format!("store-{topic}.log"))).expect("log"))
        .output()
        .expect("run migration.py config-store");
    assert!(out.status.success(), "migration.py config-store {topic}: {} (log in {})", out.status, logs.display());
    let Value::Object(doc) = json::parse(std::str::from_utf8(&out.stdout).expect("UTF-8")).expect("JSON") else {
        panic!("not an object")
    };
    let Some(Value::Object(entries)) = doc.get("entries") else { panic!("no entries") };
    entries
        .iter()
        .map(|(k, v)| match v {
            Value::Str(v) => (hex(k.as_bytes()), v.clone()),
            other => panic!("entry {k}: {other:?}"),
        })
        .collect()
}

/// The Rust engine's config store as a `config-store` child last printed it.
pub(crate) fn rust_store(p: &Proc) -> Option<BTreeMap<String, String>> {
    p.last(|line| line.strip_prefix("store ").map(str::to_owned)).map(|entries| {
        entries
            .split(',')
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (k, v) = e.split_once('=').expect("key=value");
                (k.to_owned(), v.to_owned())
            })
            .collect()
    })
}

fn field<'v>(v: &'v Value, name: &str) -> &'v Value {
    match v {
        Value::Object(map) => map.get(name).unwrap_or_else(|| panic!("no {name} in {v:?}")),
        _ => panic!("not an object: {v:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("not an int: {other:?}"),
    }
}

/// A Python consumer's view of an output topic must be the Rust reader's, record for record:
/// same partitions, offsets, keys, timestamps, and Python's canonical encoding of the value it
/// decoded is the very bytes on the wire.
pub(crate) fn compare_python_view(python: &[Value], rust: &[RawRecord]) -> Vec<String> {
    let mut violations = Vec::new();
    if python.len() != rust.len() {
        violations.push(format!("Python read {} records, Rust {}", python.len(), rust.len()));
    }
    for (p, r) in python.iter().zip(rust) {
        let position = (int(field(p, "partition")), int(field(p, "offset")));
        if position != (i64::from(r.partition), r.offset) {
            violations.push(format!("Python's record at {position:?}, Rust's at {}/{}", r.partition, r.offset));
            continue;
        }
        let key = match field(p, "key") {
            Value::Str(s) => s.clone(),
            other => panic!("key {other:?}"),
        };
        let value = match field(p, "value_hex") {
            Value::Str(s) => Some(s.clone()),
            Value::Null => None,
            other => panic!("value_hex {other:?}"),
        };
        let timestamp = int(field(p, "timestamp_ms"));
        if key.as_bytes() != r.key.as_deref().unwrap_or_default()
            || value != r.value.as_deref().map(hex)
            || Some(timestamp) != r.timestamp_ms
        {
            violations.push(format!(
                "{}/{}: Python read {key:?} {value:?} at {timestamp}, Rust {r:?}",
                r.partition, r.offset
            ));
        }
    }
    violations
}
