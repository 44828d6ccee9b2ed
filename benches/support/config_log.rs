//! The config topic log both config benches use (`config_store`, `config_boot`), and its
//! Python twin in `benches/python_config_store.py`: 20-character keys, ~180-byte canonical
//! values; every key once, then 20% rewrites, then 2% deleted and written again, in a fixed
//! order (the same bytes on every run).

use std::sync::Arc;

use bytes::Bytes;
use flechtwerk::wire::RawRecord;

pub const KEY_CHARS: usize = 20;

/// A small deterministic generator (SplitMix64): the same log on every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

pub fn key(n: u64) -> String {
    let key = format!("tenant-{n:013}");
    debug_assert_eq!(key.len(), KEY_CHARS);
    key
}

/// A ~180-byte config value, canonical or pretty-printed.
pub fn value(rng: &mut Rng, n: u64, pretty: bool) -> Vec<u8> {
    let r = rng.next();
    let canonical = format!(
        r#"{{"api_key":"{:016x}{:016x}","enabled":true,"endpoint":"https://api.example.com/v1/t/{n}","interval_s":{},"labels":["edge","eu-{}"],"owner":"team-{}","retries":3}}"#,
        r,
        r.rotate_left(17),
        30 + r % 90,
        r % 7,
        r % 1000
    );
    if pretty {
        canonical.replace(",\"", ", \"").replace("\":", "\": ").into_bytes()
    } else {
        canonical.into_bytes()
    }
}

/// Records in the log of a topic with `entries` live keys.
pub fn log_len(entries: u64) -> u64 {
    entries + entries / 5 + 2 * (entries / 50)
}

/// The log of a config topic with `entries` live keys: every key once, 20% rewritten, 2%
/// deleted and written again, in a shuffled but fixed order. Partition `n % 6`, offsets in log
/// order (the in-memory bench's placement; a broker places them by key).
pub fn log(entries: u64, pretty: bool) -> impl Iterator<Item = RawRecord> {
    let topic: Arc<str> = Arc::from("configs");
    let mut rng = Rng(0x5eed);
    let updates = entries / 5;
    let deletes = entries / 50;
    let total = log_len(entries);
    (0..total).map(move |offset| {
        let (n, kind) = if offset < entries {
            (offset, 0)
        } else if offset < entries + updates {
            (rng.next() % entries, 0)
        } else if offset < entries + updates + deletes {
            (offset - entries - updates, 1)
        } else {
            (offset - entries - updates - deletes, 0)
        };
        let value = if kind == 1 { None } else { Some(Bytes::from(value(&mut rng, n, pretty))) };
        RawRecord {
            topic: Arc::clone(&topic),
            partition: (n % 6) as i32,
            offset: offset as i64,
            timestamp_ms: Some(1_700_000_000_000 + offset as i64),
            key: Some(Bytes::from(key(n))),
            value,
            headers: Vec::new(),
        }
    })
}

/// Key + value bytes of the last record per key: the compacted topic's size.
pub fn wire_bytes(entries: u64) -> u64 {
    let mut latest = vec![0u32; entries as usize];
    for record in log(entries, false) {
        let n: usize = std::str::from_utf8(&record.key.as_ref().unwrap()[7..]).unwrap().parse().unwrap();
        latest[n] = record.size_bytes() as u32 * u32::from(record.value.is_some());
    }
    latest.iter().map(|&b| u64::from(b)).sum()
}
