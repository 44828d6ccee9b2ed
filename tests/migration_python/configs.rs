//! Config topics: a Python and a Rust stage write a config topic each from the same commands;
//! the records must be byte-identical per key, and the stores both implementations build from
//! either topic equal (after a bootstrap, and after a drain).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use flechtwerk::testing::read_topic;
use flechtwerk::wire;
use flechtwerk::Event;

use crate::checks::{fail, python_store, rust_store};
use crate::process::Proc;
use crate::topics::{committed, create_topics, produce};
use crate::{block, bootstrap, hex, kafka, wait_until, Setup, PHASE_MAX};

/// A config record as the byte comparison sees it: its partition and value.
type PartitionValue = (i32, Option<Vec<u8>>);

/// Config commands, round 1 and round 2: (key, value); a `None` value is a tombstone.
type Commands = Vec<(Option<&'static str>, Option<&'static [u8]>)>;

fn config_commands() -> (Commands, Commands, Vec<String>) {
    let plain: Vec<String> = (0..40).map(|n| format!("plain-{n}")).collect();
    let plain: &'static [String] = Box::leak(plain.into_boxed_slice());
    let values: &'static [String] =
        Box::leak((0..40).map(|n| format!(r#"{{"label": "l{n}", "n": {n}}}"#)).collect::<Vec<_>>().into_boxed_slice());
    let mut round1: Commands = plain.iter().zip(values).map(|(k, v)| (Some(k.as_str()), Some(v.as_bytes()))).collect();
    round1.extend([
        (
            Some("non-canonical"),
            Some(&br#"{ "b" : 1, "a" : [1, 2.50, 1E16, -0.0, 0.1, 1e-05], "z": {"y": null, "x": true} }"#[..]),
        ),
        (
            Some("unicode-\u{fc}-\u{1f980}"),
            Some(br#"{"name": "Gr\u00fc\u00dfe \ud83e\udd80 \u0001", "tab": "\t", "raw": "\u00e9"}"#),
        ),
        (Some("big"), Some(br#"{"n": 123456789012345678901234567890, "f": 1.0}"#)),
        (None, Some(br#"{"keyless": true}"#)),
        (Some("updated"), Some(br#"{"v": 1}"#)),
        (Some("updated"), Some(br#"{"v": 2}"#)),
        (Some("deleted-null"), Some(br#"{"v": 1}"#)),
        (Some("deleted-null"), None),
        (Some("deleted-object"), Some(br#"{"v": 1}"#)),
        (Some("deleted-object"), Some(b"{}")),
        (Some("deleted-empty"), Some(br#"{"v": 1}"#)),
        (Some("deleted-empty"), Some(b"")),
        (Some("back"), Some(br#"{"v": 1}"#)),
        (Some("back"), None),
        (Some("back"), Some(br#"{"back": true}"#)),
    ]);
    let round2: Commands = vec![
        (Some("updated"), Some(br#"{"v": 3}"#)),
        (Some("plain-0"), None),
        (Some("plain-1"), Some(b"{}")),
        (Some("plain-2"), Some(b"")),
        (Some("deleted-null"), Some(br#"{"again": 1}"#)),
        (Some("late"), Some(br#"{"late": true}"#)),
    ];
    (round1, round2, plain.to_vec())
}

/// The store the commands should leave (key hex → canonical value hex), by a model: the last
/// value per key, tombstones (null, `{}`, empty) delete, values canonical JSON.
fn expected_store(commands: &[&Commands]) -> BTreeMap<String, String> {
    let mut store = BTreeMap::new();
    for (key, value) in commands.iter().flat_map(|c| c.iter()) {
        let key = hex(key.unwrap_or("").as_bytes());
        let canonical = value.map(|v| Event::wrap(wire::decode_value(Some(v)).expect("valid")).encode().unwrap());
        match canonical {
            Some(v) if v != b"{}" => store.insert(key, hex(&v)),
            _ => store.remove(&key),
        };
    }
    store
}

/// Fails `configs` unless every named store equals `expected`.
fn compare_stores(
    what: &str,
    stores: &[(&str, Option<BTreeMap<String, String>>)],
    expected: &BTreeMap<String, String>,
    procs: &[&Proc],
) {
    let mut violations = Vec::new();
    for (name, store) in stores {
        match store {
            Some(store) if store == expected => {}
            Some(store) => {
                let extra: Vec<&String> = store.keys().filter(|k| !expected.contains_key(*k)).collect();
                let missing: Vec<&String> = expected.keys().filter(|k| !store.contains_key(*k)).collect();
                let differ: Vec<&String> =
                    store.iter().filter(|(k, v)| expected.get(*k).is_some_and(|e| e != *v)).map(|(k, _)| k).collect();
                violations
                    .push(format!("{name}: keys (hex) extra {extra:?}, missing {missing:?}, values differ {differ:?}"));
            }
            None => violations.push(format!("{name}: no store")),
        }
    }
    if !violations.is_empty() {
        fail("configs", what, &violations, procs);
    }
}

/// Config topics written by one implementation and read by the other.
///
/// Pins: ATTR-43 (the Rust writer's records are Python's byte for byte: values as canonical JSON,
/// keys as raw UTF-8, which the `quoted-key` planted bug breaks), CFG-10 and CFG-12 (the bootstrap
/// reads every partition and compacts by wire key), CFG-20 (a running store drains new records),
/// CFG-22 (a keyless record is stored under `""`), CFG-31 (null, empty and `{}` all delete).
pub(crate) fn configs(setup: Setup) -> String {
    let started = Instant::now();
    let p = &setup.prefix;
    let (commands, idle) = (format!("{p}-commands"), format!("{p}-idle"));
    let (cfg_py, cfg_rs) = (format!("{p}-cfg-py"), format!("{p}-cfg-rs"));
    create_topics(&[(&commands, 3, false), (&idle, 1, false), (&cfg_py, 3, true), (&cfg_rs, 3, true)]);
    let (round1, round2, _) = config_commands();
    produce(&commands, &round1);

    let (app_py, app_rs) = (format!("{p}-writer-py"), format!("{p}-writer-rs"));
    let mut writer_py = Proc::python(
        "writer-py",
        &setup.python,
        "tests/python/migration.py",
        &[
            "forward",
            "--bootstrap",
            &bootstrap(),
            "--app",
            &app_py,
            "--client",
            "writer-py",
            "--input",
            &commands,
            "--output",
            &cfg_py,
        ],
        &setup.logs,
    );
    let mut writer_rs = Proc::rust("writer-rs", &["forward", &app_rs, "writer-rs", &commands, &cfg_rs], &setup.logs);
    let written = |count: usize, writers: &mut [&mut Proc]| {
        wait_until("both writers to forward every command", PHASE_MAX, || {
            writers.iter_mut().for_each(|w| w.alive());
            committed(&app_py, &commands, 3) == count as i64 && committed(&app_rs, &commands, 3) == count as i64
        });
    };
    written(round1.len(), &mut [&mut writer_py, &mut writer_rs]);

    // Round 1: the stores both implementations bootstrap from both topics.
    let expected1 = expected_store(&[&round1]);
    let mut reader_py_topic = Proc::rust(
        "reader-of-cfg-py",
        &["config-store", &format!("{p}-reader-py"), "reader-py", &idle, &cfg_py],
        &setup.logs,
    );
    let mut reader_rs_topic = Proc::rust(
        "reader-of-cfg-rs",
        &["config-store", &format!("{p}-reader-rs"), "reader-rs", &idle, &cfg_rs],
        &setup.logs,
    );
    wait_until("the Rust readers' bootstrapped stores", PHASE_MAX, || {
        reader_py_topic.alive();
        reader_rs_topic.alive();
        rust_store(&reader_py_topic).is_some() && rust_store(&reader_rs_topic).is_some()
    });
    compare_stores(
        "after the bootstrap, a store differs from the expected one",
        &[
            ("Python's store of the Python-written topic", Some(python_store(&setup.python, &cfg_py, &setup.logs))),
            ("Python's store of the Rust-written topic", Some(python_store(&setup.python, &cfg_rs, &setup.logs))),
            ("Rust's store of the Python-written topic", rust_store(&reader_py_topic)),
            ("Rust's store of the Rust-written topic", rust_store(&reader_rs_topic)),
        ],
        &expected1,
        &[&writer_py, &writer_rs, &reader_py_topic, &reader_rs_topic],
    );

    // Round 2 while the Rust readers run: they drain it; Python bootstraps the final topics.
    produce(&commands, &round2);
    written(round1.len() + round2.len(), &mut [&mut writer_py, &mut writer_rs]);
    let expected2 = expected_store(&[&round1, &round2]);
    let (py_of_py, py_of_rs) =
        (python_store(&setup.python, &cfg_py, &setup.logs), python_store(&setup.python, &cfg_rs, &setup.logs));
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline
        && (rust_store(&reader_py_topic).as_ref() != Some(&expected2)
            || rust_store(&reader_rs_topic).as_ref() != Some(&expected2))
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    compare_stores(
        "after a drain, a store differs from the expected one",
        &[
            ("Python's store of the Python-written topic", Some(py_of_py)),
            ("Python's store of the Rust-written topic", Some(py_of_rs)),
            ("Rust's drained store of the Python-written topic", rust_store(&reader_py_topic)),
            ("Rust's drained store of the Rust-written topic", rust_store(&reader_rs_topic)),
        ],
        &expected2,
        &[&writer_py, &writer_rs, &reader_py_topic, &reader_rs_topic],
    );

    // The topics themselves: every key's records, in order, byte for byte, in the same partition.
    let by_key = |topic: &str| {
        let mut keys: BTreeMap<Vec<u8>, Vec<PartitionValue>> = BTreeMap::new();
        for r in block(read_topic(&*kafka(), "migration-reader", topic)).expect("read config topic") {
            keys.entry(r.key.as_deref().unwrap_or_default().to_vec())
                .or_default()
                .push((r.partition, r.value.map(|v| v.to_vec())));
        }
        keys
    };
    let (written_py, written_rs) = (by_key(&cfg_py), by_key(&cfg_rs));
    let records = written_py.values().map(Vec::len).sum::<usize>();
    if written_py != written_rs {
        let differ: Vec<String> = written_py
            .keys()
            .chain(written_rs.keys())
            .filter(|k| written_py.get(*k) != written_rs.get(*k))
            .map(|k| {
                format!(
                    "{:?}: Python wrote {:?}, Rust {:?}",
                    String::from_utf8_lossy(k),
                    written_py.get(k),
                    written_rs.get(k)
                )
            })
            .collect();
        fail("configs", "the two writers' records differ", &differ, &[&writer_py, &writer_rs]);
    }
    // Pinned bytes (so that two equally wrong implementations cannot agree).
    let pinned = [
        ("non-canonical", r#"{"a":[1,2.5,1e+16,-0.0,0.1,1e-05],"b":1,"z":{"x":true,"y":null}}"#),
        (
            "unicode-\u{fc}-\u{1f980}",
            "{\"name\":\"Gr\u{fc}\u{df}e \u{1f980} \\u0001\",\"raw\":\"\u{e9}\",\"tab\":\"\\t\"}",
        ),
        ("big", r#"{"f":1.0,"n":123456789012345678901234567890}"#),
        ("", r#"{"keyless":true}"#),
        ("updated", r#"{"v":3}"#),
    ];
    for (key, value) in pinned {
        assert_eq!(expected2.get(&hex(key.as_bytes())), Some(&hex(value.as_bytes())), "configs: pinned {key:?}");
    }
    for mut p in [writer_py, writer_rs, reader_py_topic, reader_rs_topic] {
        p.stop();
    }
    format!(
        "configs: {} commands written by a Python and a Rust stage: {records} records, byte-identical per key; the \
         stores both implementations build from both topics are equal ({} entries after bootstrap, {} after a \
         drain); {:.0} s",
        round1.len() + round2.len(),
        expected1.len(),
        expected2.len(),
        started.elapsed().as_secs_f64()
    )
}
