//! Property tests: canonical JSON (ATTR-43, ATTR-44), codecs (ATTR-11, ATTR-14), strict decoding
//! (INV-01, INV-02) and config compaction (CFG-03, CFG-12, CFG-20).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;
use flechtwerk::attribute::{dict, list, set, tuple, Attribute, Codec, ANY, BOOL, FLOAT, INT, STR};
use flechtwerk::json::{self, check_canonical_object, to_canonical_bytes, Map, Value};
use flechtwerk::observer::NoopObserver;
use flechtwerk::testing::{decode_config_update, ConfigBootstrap};
use flechtwerk::wire::{self, RaisePolicy, RawRecord};
use flechtwerk::ConfigStore;
use flechtwerk::{Config, Event, Record};
use proptest::prelude::*;

fn finite_float() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |v| v.is_finite()),
        // Decimal-looking values and powers of ten hit the positional/scientific boundaries.
        (-20i32..=20, -1_000_000i64..1_000_000).prop_map(|(e, m)| m as f64 * 10f64.powi(e)),
        Just(0.0),
        Just(-0.0),
        Just(5e-324),
        Just(f64::MAX),
    ]
}

fn big_int() -> impl Strategy<Value = Value> {
    // Beyond i64 on either side: Python integers are unbounded.
    ("[1-9][0-9]{19,40}", any::<bool>())
        .prop_map(|(digits, negative)| json::parse(&format!("{}{digits}", if negative { "-" } else { "" })).unwrap())
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{0,8}",
        any::<String>(),
        proptest::collection::vec(
            prop_oneof![
                Just('\u{0}'),
                Just('\u{1f}'),
                Just('"'),
                Just('\\'),
                Just('\u{2028}'),
                Just('é'),
                Just('😀'),
                Just('\u{7f}')
            ],
            0..6
        )
        .prop_map(|chars| chars.into_iter().collect()),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        big_int(),
        finite_float().prop_map(Value::Float),
        text().prop_map(Value::Str),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::List),
            proptest::collection::btree_map(text(), inner, 0..6).prop_map(Value::Object),
        ]
    })
}

fn object() -> impl Strategy<Value = Map> {
    proptest::collection::btree_map(text(), value(), 0..8)
}

/// Re-serialises `value` with arbitrary (but valid) whitespace and key order, and optional
/// non-canonical escapes: the same value, spelled differently.
fn space(noise: &mut impl Iterator<Item = u8>, out: &mut String) {
    if noise.next().unwrap_or(0).is_multiple_of(3) {
        out.push_str(" \n\t");
    }
}

fn respell(value: &Value, noise: &mut impl Iterator<Item = u8>, out: &mut String) {
    match value {
        Value::Object(map) => {
            out.push('{');
            let mut entries: Vec<_> = map.iter().collect();
            entries.reverse();
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                space(noise, out);
                // Escape every key character: valid, never canonical.
                out.push('"');
                for unit in k.encode_utf16() {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
                out.push('"');
                space(noise, out);
                out.push(':');
                respell(v, noise, out);
            }
            out.push('}');
        }
        Value::List(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                space(noise, out);
                respell(v, noise, out);
            }
            out.push(']');
        }
        other => out.push_str(std::str::from_utf8(&to_canonical_bytes(other).unwrap()).unwrap()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// ATTR-44: decode ∘ encode = id, and the encoding is canonical by our own scanner.
    #[test]
    fn attr_44_decode_encode_roundtrip(v in value()) {
        let bytes = to_canonical_bytes(&v).unwrap();
        let text = std::str::from_utf8(&bytes).expect("canonical JSON is UTF-8");
        prop_assert_eq!(json::parse(text).unwrap(), v.clone());
        if let Value::Object(_) = v {
            prop_assert_eq!(check_canonical_object(&bytes), Ok(true));
        }
    }

    /// ATTR-44: records that compare equal encode to the same bytes, whatever order their keys
    /// were inserted in; a respelled document decodes to the same record.
    #[test]
    fn attr_44_equal_records_equal_bytes(map in object(), seed in any::<u64>()) {
        let mut reversed = Map::new();
        for (k, v) in map.iter().rev() {
            reversed.insert(k.clone(), v.clone());
        }
        let a = Event::wrap(map.clone());
        let b = Event::wrap(reversed);
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(a.encode().unwrap(), b.encode().unwrap());
        let mut noise = (0..).map(|i: u64| (seed.rotate_left(i as u32 % 64) & 0xff) as u8);
        let mut text = String::new();
        respell(&Value::Object(map.clone()), &mut noise, &mut text);
        let reparsed = wire::decode_value(Some(text.as_bytes())).unwrap();
        prop_assert_eq!(Event::wrap(reparsed).encode().unwrap(), a.encode().unwrap());
        // The scanner calls a spelling canonical exactly when it is the canonical bytes.
        let canonical = a.encode().unwrap();
        prop_assert_eq!(check_canonical_object(text.as_bytes()) == Ok(true), text.as_bytes() == &canonical[..], "{}", text);
    }

    /// The canonical scanner and the parser agree on every input: same acceptance, and
    /// "canonical" means the bytes re-encode to themselves.
    #[test]
    fn canonical_scanner_agrees_with_parser(bytes in prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        object().prop_map(|m| to_canonical_bytes(&Value::Object(m)).unwrap()),
        (object(), any::<usize>(), any::<u8>()).prop_map(|(m, at, b)| {
            let mut bytes = to_canonical_bytes(&Value::Object(m)).unwrap();
            let at = at % bytes.len();
            bytes[at] = b;
            bytes
        }),
    ]) {
        let scanned = check_canonical_object(&bytes);
        let parsed = std::str::from_utf8(&bytes).ok().map(json::parse);
        match (&scanned, &parsed) {
            (Err(_), None) | (Err(_), Some(Err(_))) => {}
            (Ok(canonical), Some(Ok(v))) => {
                let reencoded = to_canonical_bytes(v).unwrap();
                prop_assert_eq!(*canonical, matches!(v, Value::Object(_)) && reencoded == bytes);
            }
            _ => prop_assert!(false, "scanner {:?} vs parser {:?} on {:?}", scanned, parsed, bytes),
        }
    }

    /// INV-01/INV-02: strict decoding accepts exactly UTF-8 keys and UTF-8 JSON-object values;
    /// empty and absent values are the empty record.
    #[test]
    fn inv_02_value_decoding_is_strict(bytes in proptest::collection::vec(any::<u8>(), 0..48)) {
        let key = wire::decode_key(Some(&bytes));
        prop_assert_eq!(key.is_ok(), std::str::from_utf8(&bytes).is_ok());
        match wire::decode_value(Some(&bytes)) {
            Ok(map) => {
                if bytes.is_empty() {
                    prop_assert!(map.is_empty());
                } else {
                    let parsed = json::parse(std::str::from_utf8(&bytes).unwrap()).unwrap();
                    prop_assert_eq!(Value::Object(map), parsed);
                }
            }
            Err(wire::DecodeError::Utf8(_)) => prop_assert!(std::str::from_utf8(&bytes).is_err()),
            Err(wire::DecodeError::Json(_)) => prop_assert!(json::parse(std::str::from_utf8(&bytes).unwrap()).is_err()),
            Err(wire::DecodeError::NotAnObject { .. }) => {
                let v = json::parse(std::str::from_utf8(&bytes).unwrap()).unwrap();
                prop_assert!(!matches!(v, Value::Object(_)));
            }
        }
    }

    /// ATTR-11/ATTR-14: codecs round-trip their values and SET encodes sorted.
    #[test]
    fn attr_14_codecs_roundtrip(
        ints in proptest::collection::vec(any::<i64>(), 0..8),
        names in proptest::collection::btree_set(text(), 0..8),
        ratios in proptest::collection::btree_map(text(), proptest::collection::vec(finite_float(), 0..4), 0..4),
        flag in any::<bool>(),
        raw in value(),
    ) {
        const INTS: Attribute<Vec<i64>> = Attribute::new("ints", &list(INT));
        const NAMES: Attribute<BTreeSet<String>> = Attribute::new("names", &set(STR));
        const RATIOS: Attribute<BTreeMap<String, Box<[f64]>>> = Attribute::new("ratios", &dict(tuple(FLOAT)));
        const FLAG: Attribute<bool> = Attribute::new("flag", &BOOL);
        const RAW: Attribute<Value> = Attribute::new("raw", &ANY);
        let ratios: BTreeMap<String, Box<[f64]>> = ratios.into_iter().map(|(k, v)| (k, v.into_boxed_slice())).collect();
        let record = Record::new()
            .with(&INTS, ints.clone()).unwrap()
            .with(&NAMES, names.clone()).unwrap()
            .with(&RATIOS, ratios.clone()).unwrap()
            .with(&FLAG, flag).unwrap()
            .with(&RAW, raw.clone()).unwrap();
        let decoded = Record::wrap(wire::decode_value(Some(&record.encode().unwrap())).unwrap());
        prop_assert_eq!(decoded.require(&INTS).unwrap(), ints.clone());
        let got_names = decoded.require(&NAMES).unwrap();
        prop_assert_eq!(&got_names, &names);
        let got_ratios = decoded.require(&RATIOS).unwrap();
        prop_assert_eq!(got_ratios.len(), ratios.len());
        for (k, v) in &ratios {
            let got: Vec<u64> = got_ratios[k].iter().map(|f| f.to_bits()).collect();
            let want: Vec<u64> = v.iter().map(|f| f.to_bits()).collect();
            prop_assert_eq!(got, want);
        }
        prop_assert_eq!(decoded.require(&FLAG).unwrap(), flag);
        // A stored null reads as absent.
        prop_assert_eq!(decoded.get(&RAW).unwrap().unwrap_or(Value::Null), raw);
        let Value::List(wire_names) = &decoded.raw()["names"] else { panic!("a list") };
        let mut sorted = wire_names.clone();
        sorted.sort_by(|a, b| match (a, b) { (Value::Str(a), Value::Str(b)) => a.cmp(b), _ => unreachable!() });
        prop_assert_eq!(wire_names, &sorted);
        // Exact types: an INT never reads a float, a FLOAT never reads an integer.
        prop_assert!(INT.decode(&Value::Float(1.0)).is_err());
        prop_assert!(FLOAT.decode(&Value::Int(ints.first().copied().unwrap_or(1))).is_err());
    }
}

/// One config-topic operation for the compaction property.
#[derive(Clone, Debug)]
enum Op {
    Put {
        key: u8,
        value: Map,
        /// Written with a leading space: the same object, not canonical (parsed on bootstrap).
        pretty: bool,
    },
    /// A Kafka tombstone (null value).
    Null { key: u8 },
    /// An empty value, `b""`.
    Empty { key: u8 },
    /// The exact bytes `{}`.
    Braces { key: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..24;
    prop_oneof![
        6 => (key.clone(), proptest::collection::btree_map("[a-c]{1,2}", value(), 0..4), 0usize..2_000)
            .prop_map(|(key, mut value, pad)| {
                value.insert("pad".into(), Value::Str("p".repeat(pad)));
                Op::Put { key, value, pretty: pad % 3 == 0 }
            }),
        1 => key.clone().prop_map(|key| Op::Null { key }),
        1 => key.clone().prop_map(|key| Op::Empty { key }),
        1 => key.prop_map(|key| Op::Braces { key }),
    ]
}

fn to_record(offset: usize, op: &Op) -> RawRecord {
    let (key, value): (u8, Option<Vec<u8>>) = match op {
        Op::Put { key, value, pretty } => {
            let mut bytes = to_canonical_bytes(&Value::Object(value.clone())).unwrap();
            if *pretty {
                bytes.insert(0, b' '); // the same object, not canonical
            }
            (*key, Some(bytes))
        }
        Op::Null { key } => (*key, None),
        Op::Empty { key } => (*key, Some(Vec::new())),
        Op::Braces { key } => (*key, Some(b"{}".to_vec())),
    };
    RawRecord {
        topic: Arc::from(["cfg-a", "cfg-b"][offset % 2]),
        partition: (offset % 3) as i32,
        offset: offset as i64,
        timestamp_ms: None,
        key: Some(Bytes::from(format!("key-{key}"))),
        value: value.map(Bytes::from),
        headers: Vec::new(),
    }
}

/// The model: last write per key wins, and null, `b""` and `{}` delete (CFG-12).
fn model(ops: &[Op]) -> BTreeMap<String, Vec<u8>> {
    let mut model = BTreeMap::new();
    for op in ops {
        match op {
            Op::Put { key, value, .. } => {
                model.insert(format!("key-{key}"), to_canonical_bytes(&Value::Object(value.clone())).unwrap());
            }
            Op::Null { key } | Op::Empty { key } | Op::Braces { key } => {
                model.remove(&format!("key-{key}"));
            }
        }
    }
    model
}

/// What `flechtwerk_config_store_bytes` weighs (Python's `ConfigStore.nbytes`): UTF-8 keys plus
/// encoded values.
fn wire_bytes(entries: &BTreeMap<String, Vec<u8>>) -> usize {
    entries.iter().map(|(k, v)| k.len() + v.len()).sum()
}

fn contents(store: &ConfigStore) -> BTreeMap<String, Vec<u8>> {
    store
        .keys()
        .into_iter()
        .map(|k| {
            let v = store.get_bytes(&k).unwrap().to_vec();
            (k, v)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// CFG-12/CFG-20: for any interleaving of puts and the three kinds of deletion, a bootstrap
    /// over a prefix followed by draining the rest leaves exactly the last write per key, with
    /// small chunks so that compaction runs mid-bootstrap and mid-drain. Every way of deciding
    /// the survivors agrees: all survivors pending (an enriching stage) or canonical values
    /// settled on offer (`without_enrichment`), each finished in one call or survivor by survivor.
    #[test]
    fn cfg_12_compaction_is_last_write_per_key(ops in proptest::collection::vec(op(), 0..300), split in any::<prop::sample::Index>(), chunk in 256usize..8_192, settle in any::<bool>(), one_call in any::<bool>()) {
        let split = split.index(ops.len() + 1);
        let records: Vec<RawRecord> = ops.iter().enumerate().map(|(i, op)| to_record(i, op)).collect();
        let mut bootstrap = ConfigBootstrap::with_chunk_bytes(chunk);
        if settle {
            bootstrap = bootstrap.without_enrichment();
        }
        for record in &records[..split] {
            bootstrap.offer(record, &RaisePolicy, &NoopObserver).unwrap();
        }
        let mut store = if one_call {
            bootstrap.finish_unenriched(&RaisePolicy, &NoopObserver).unwrap()
        } else {
            let mut survivors = 0;
            while let Some(s) = bootstrap.next_survivor() {
                prop_assert!(bootstrap.apply_unenriched(&s, &RaisePolicy, &NoopObserver).unwrap());
                survivors += 1;
            }
            // Settled on offer: only the survivors written non-canonically are left to decide.
            let mut last: BTreeMap<u8, bool> = BTreeMap::new();
            for op in &ops[..split] {
                match op {
                    Op::Put { key, pretty, .. } => { last.insert(*key, *pretty); }
                    Op::Null { key } | Op::Empty { key } | Op::Braces { key } => { last.remove(key); }
                }
            }
            let undecided = if settle { last.values().filter(|&&pretty| pretty).count() } else { last.len() };
            prop_assert_eq!(survivors, undecided);
            bootstrap.finish()
        };
        prop_assert_eq!(contents(&store), model(&ops[..split]));
        prop_assert_eq!(store.wire_bytes(), wire_bytes(&model(&ops[..split])), "config_store_bytes after the bootstrap");
        for record in &records[split..] {
            match decode_config_update(record, &RaisePolicy, &NoopObserver).unwrap() {
                Some((key, None)) => { store.delete(&key); }
                Some((key, Some(map))) => store.put(&key, &Config::wrap(map)).unwrap(),
                None => prop_assert!(false, "the raise policy never skips"),
            }
        }
        prop_assert_eq!(contents(&store), model(&ops));
        prop_assert_eq!(store.len(), model(&ops).len());
        prop_assert_eq!(store.wire_bytes(), wire_bytes(&model(&ops)), "config_store_bytes after the drain");
    }
}
