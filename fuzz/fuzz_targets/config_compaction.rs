//! Config compaction (CFG-12, CFG-20, INV-17, INV-19): any sequence of config records, applied
//! by a bootstrap over a prefix and drains over the rest, leaves the last decodable write per
//! key, with deletions (null, empty, `{}`) honoured; the policy sees only what it must.
#![no_main]

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use flechtwerk::json::to_canonical_bytes;
use flechtwerk::observer::NoopObserver;
use flechtwerk::testing::{decode_config_update, ConfigBootstrap};
use flechtwerk::wire::{self, InvalidMessageAction, RawRecord};
use flechtwerk::Config;
use libfuzzer_sys::fuzz_target;

fn records(data: &[u8]) -> Vec<RawRecord> {
    // Each record: [key byte][kind][len][value bytes...]. Kinds: 0 null, 1 empty, 2 `{}`,
    // 3 arbitrary bytes (often invalid), else a small valid object.
    let mut out = Vec::new();
    let mut i = 0;
    while i + 3 <= data.len() {
        let (key, kind, len) = (data[i], data[i + 1], usize::from(data[i + 2] % 16));
        let body = &data[(i + 3).min(data.len())..(i + 3 + len).min(data.len())];
        i += 3 + len;
        let value = match kind % 5 {
            0 => None,
            1 => Some(Bytes::new()),
            2 => Some(Bytes::from_static(b"{}")),
            3 => Some(Bytes::copy_from_slice(body)),
            _ => Some(Bytes::from(format!(r#"{{"v":{},"pad":"{}"}}"#, body.len(), "x".repeat(usize::from(kind))))),
        };
        // A key byte >= 0xf8 is not UTF-8: the policy (skip) drops the record.
        let key = if key >= 0xf8 { Bytes::from(vec![key]) } else { Bytes::from(format!("k{}", key % 8)) };
        out.push(RawRecord {
            topic: Arc::from("cfg"),
            partition: 0,
            offset: out.len() as i64,
            timestamp_ms: None,
            key: Some(key),
            value,
            headers: Vec::new(),
        });
    }
    out
}

/// The model: per key in order; undecodable keys skipped; tombstones delete; an undecodable
/// value is skipped — in a bootstrap only if it survives (earlier values are never read), in a
/// drain always (the previous value stays).
fn model(records: &[RawRecord], split: usize) -> BTreeMap<String, Vec<u8>> {
    let mut latest: BTreeMap<String, Option<&RawRecord>> = BTreeMap::new();
    for r in &records[..split] {
        let Ok(key) = std::str::from_utf8(r.key.as_deref().unwrap()) else { continue };
        let keep = (!wire::is_tombstone(r.value.as_deref())).then_some(r);
        latest.insert(key.to_owned(), keep);
    }
    let mut store: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (key, r) in latest {
        if let Some(map) = r.and_then(|r| wire::decode_value(r.value.as_deref()).ok()) {
            store.insert(key, Config::wrap(map).encode().unwrap());
        }
    }
    for r in &records[split..] {
        let Ok(key) = std::str::from_utf8(r.key.as_deref().unwrap()) else { continue };
        if wire::is_tombstone(r.value.as_deref()) {
            store.remove(key);
        } else if let Ok(map) = wire::decode_value(r.value.as_deref()) {
            store.insert(key.to_owned(), to_canonical_bytes(&flechtwerk::json::Value::Object(map)).unwrap());
        }
    }
    store
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let records = records(rest);
    let settle = first & 0x80 != 0;
    let split = usize::from(first & 0x7f) % (records.len() + 1);
    let skip = |_: &_| InvalidMessageAction::Skip;
    let mut bootstrap = ConfigBootstrap::with_chunk_bytes(128);
    if settle {
        // Both modes: every survivor pending, or canonical values settled as they are offered.
        bootstrap = bootstrap.without_enrichment();
    }
    for r in &records[..split] {
        bootstrap.offer(r, &skip, &NoopObserver).expect("skip never fails");
    }
    let mut store = bootstrap.finish_unenriched(&skip, &NoopObserver).expect("skip never fails");
    for r in &records[split..] {
        match decode_config_update(r, &skip, &NoopObserver).expect("skip never fails") {
            None => {}
            Some((key, None)) => {
                store.delete(&key);
            }
            Some((key, Some(map))) => store.put(&key, &Config::wrap(map)).expect("decoded values encode"),
        }
    }
    let got: BTreeMap<String, Vec<u8>> =
        store.keys().into_iter().map(|k| (k.clone(), store.get_bytes(&k).unwrap().to_vec())).collect();
    assert_eq!(got, model(&records, split));
});
