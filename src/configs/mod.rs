//! The config store: every config topic, compacted by wire key, in one process-wide lookup table
//! (Kafka Streams' GlobalKTable, specialised to configuration; CFG-01..23).
//!
//! The store holds canonical JSON bytes, not parsed values, and decodes on every [`get`]
//! (a fresh [`Config`] each time, CFG-02): a stage can never mutate the table through a value it
//! read, and the memory cost is the wire size, not a parsed tree.
//!
//! ## Designed for size
//!
//! The whole table lives in RAM in every instance and is re-read in full on every boot, so its
//! footprint is the product's size contract. The Python store (a dict of bytes) measured 337 MiB
//! RSS for 191 MiB of wire bytes, and its bootstrap peaked near 755 MiB because it retained every
//! record before applying any. This store keeps keys and values back to back in a log of
//! [`CHUNK_BYTES`] chunks, indexed by an open-addressing table of 4-byte positions (chunk number
//! modulo 2^12 and byte offset; 8-byte positions once the live chunks span more than 4096 chunks,
//! 4 GiB; no per-entry allocation, no stored hash), and the bootstrap compacts while it reads: a superseded record's
//! bytes become garbage that compaction reclaims chunk by chunk, and a chunk whose records are
//! all dead is returned to the allocator at once. `docs/performance.md` has the measured figures.
//!
//! [`get`]: ConfigStore::get

pub(crate) mod arena;
pub(crate) mod bootstrap;
mod index;
#[cfg(feature = "secrets")]
mod scan;
mod store;

pub(crate) use bootstrap::{decode_config_update, ConfigBootstrap};
#[cfg(feature = "secrets")]
pub use scan::{scan_config_topics, ScanEntry, ScanError};
pub use store::{ConfigStore, ConfigStoreError};

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use bytes::Bytes;

    use super::arena::CHUNK_BYTES;
    use super::bootstrap::Survivor;
    use crate::observer::{InvalidOutcome, NoopObserver, Observer};
    use crate::record::Config;
    use crate::testing::{Observed, RecordingObserver};
    use crate::wire::{InvalidMessageAction, InvalidMessageError, Part, RaisePolicy};
    use crate::wire::{InvalidMessagePolicy, PolicyError, RawRecord};

    fn record(topic: &str, offset: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> RawRecord {
        RawRecord {
            topic: Arc::from(topic),
            partition: 0,
            offset,
            timestamp_ms: Some(offset),
            key: key.map(Bytes::copy_from_slice),
            value: value.map(Bytes::copy_from_slice),
            headers: Vec::new(),
        }
    }

    fn bootstrap(
        records: &[RawRecord],
        policy: &dyn InvalidMessagePolicy,
        observer: &dyn Observer,
    ) -> Result<(ConfigStore, Vec<Survivor>), PolicyError> {
        let mut b = ConfigBootstrap::new();
        for r in records {
            b.offer(r, policy, observer)?;
        }
        let mut survivors = Vec::new();
        while let Some(s) = b.next_survivor() {
            b.apply_unenriched(&s, policy, observer)?;
            survivors.push(s);
        }
        let store = b.finish();
        // The in-place fast path decides the same way.
        let mut fast = ConfigBootstrap::with_chunk_bytes(64);
        for r in records {
            fast.offer(r, policy, observer)?;
        }
        let fast = fast.finish_unenriched(policy, observer)?;
        // And so does a bootstrap that settles canonical values as they are offered.
        let mut settled = ConfigBootstrap::with_chunk_bytes(64).without_enrichment();
        for r in records {
            settled.offer(r, policy, observer)?;
        }
        let settled = settled.finish_unenriched(policy, observer)?;
        for other in [&fast, &settled] {
            assert_eq!(other.keys(), store.keys());
            for k in store.keys() {
                assert_eq!(other.get_bytes(&k), store.get_bytes(&k));
            }
        }
        Ok((store, survivors))
    }

    #[test]
    fn cfg_01_one_key_space_across_topics_and_cfg_12_compaction() {
        let records = [
            record("a", 0, Some(b"gone"), Some(br#"{"n":1}"#)),
            record("a", 1, Some(b"kept"), Some(br#"{"n":2}"#)),
            record("a", 2, Some(b"gone"), None),
            record("b", 0, Some(b"far"), Some(br#"{ "n" : 3 }"#)),
            record("b", 1, Some(b"k1"), Some(br#"{"a":1}"#)),
            record("b", 2, Some(b"k1"), Some(br#"{"a":2}"#)),
            record("b", 3, Some(b"empty"), Some(br#"{"x":1}"#)),
            record("b", 4, Some(b"empty"), Some(b"")),
            record("b", 5, Some(b"braces"), Some(br#"{"x":1}"#)),
            record("b", 6, Some(b"braces"), Some(b"{}")),
            record("b", 7, Some(b"spaced"), Some(b"{ }")),
        ];
        let (store, survivors) = bootstrap(&records, &RaisePolicy, &RecordingObserver::default()).unwrap();
        assert_eq!(store.keys(), ["far", "k1", "kept", "spaced"]);
        assert_eq!(store.get_bytes("far"), Some(&br#"{"n":3}"#[..]));
        assert_eq!(store.get_bytes("k1"), Some(&br#"{"a":2}"#[..]));
        // `{ }` is not a tombstone (exact bytes), and stores as `{}` (what Python stores too).
        assert_eq!(store.get_bytes("spaced"), Some(&b"{}"[..]));
        // CFG-14: the surviving record, with its position.
        let k1 = survivors.iter().find(|s| s.key == "k1").unwrap();
        assert_eq!((&*k1.record.topic, k1.record.offset, k1.record.timestamp_ms), ("b", 2, Some(2)));
    }

    #[test]
    fn inv_19_only_the_survivor_value_is_decoded() {
        let observer = RecordingObserver::default();
        let records =
            [record("c", 0, Some(b"k"), Some(b"{not json")), record("c", 1, Some(b"k"), Some(br#"{"ok":1}"#))];
        let (store, _) = bootstrap(&records, &RaisePolicy, &observer).unwrap();
        assert_eq!(store.get_bytes("k"), Some(&br#"{"ok":1}"#[..]));
        assert!(observer.events().is_empty());
        let records =
            [record("c", 0, Some(b"k"), Some(br#"{"ok":1}"#)), record("c", 1, Some(b"k"), Some(b"{not json"))];
        let err = bootstrap(&records, &RaisePolicy, &observer).unwrap_err();
        let PolicyError::Raised(e) = err else { panic!("raised") };
        assert_eq!((e.part(), e.offset()), (Part::Value, 1));
        assert_eq!(
            observer.events(),
            [Observed::MessageInvalid { topic: "c".into(), outcome: InvalidOutcome::Raised }]
        );
    }

    #[test]
    fn inv_19_every_key_is_decoded_and_inv_17_skipped_tombstone_is_not_applied() {
        let seen = std::sync::Mutex::new(Vec::new());
        let skip = |e: &InvalidMessageError| {
            seen.lock().unwrap().push((e.part(), e.offset()));
            InvalidMessageAction::Skip
        };
        let records = [
            record("c", 0, Some(b"\xff\xfe"), Some(br#"{"a":1}"#)),
            record("c", 1, Some(b"k"), Some(br#"{"a":1}"#)),
            record("c", 2, Some(b"\xff"), None),
            record("c", 3, Some(b"v"), Some(b"[1]")),
        ];
        let (store, _) = bootstrap(&records, &skip, &RecordingObserver::default()).unwrap();
        assert_eq!(store.keys(), ["k"]);
        // All three bootstrap paths (see `bootstrap`) asked the policy the same questions.
        let seen = seen.lock().unwrap();
        assert_eq!(seen[..3], [(Part::Key, 0), (Part::Key, 2), (Part::Value, 3)]);
        assert_eq!(seen.len(), 9);
        assert_eq!(seen[3..6], seen[..3]);
        assert_eq!(seen[6..], seen[..3]);
    }

    #[test]
    fn inv_13_substitute_and_inv_14_key_substitution_is_refused() {
        let observer = RecordingObserver::default();
        let substitute = |_: &InvalidMessageError| {
            let crate::json::Value::Object(map) = crate::json::parse(r#"{"id":"recovered"}"#).unwrap() else {
                unreachable!()
            };
            InvalidMessageAction::Substitute(crate::Record::wrap(map))
        };
        let (store, _) = bootstrap(&[record("c", 0, Some(b"k"), Some(b"42"))], &substitute, &observer).unwrap();
        assert_eq!(store.get_bytes("k"), Some(&br#"{"id":"recovered"}"#[..]));
        let err = bootstrap(&[record("c", 5, Some(b"\xff"), Some(b"{}"))], &substitute, &observer).unwrap_err();
        assert!(matches!(err, PolicyError::KeySubstitution(_)));
        assert!(err.to_string().contains("state identity") && err.to_string().contains("c/0/5"), "{err}");
    }

    #[test]
    fn settled_bootstrap_leaves_only_non_canonical_survivors_pending() {
        let records = [
            record("c", 0, Some(b"a"), Some(br#"{"v":1}"#)), // canonical, superseded below
            record("c", 1, Some(b"a"), Some(br#"{ "v": 2 }"#)), // pending survivor
            record("c", 2, Some(b"b"), Some(br#"{ "v": 3 }"#)), // pending, then settled over
            record("c", 3, Some(b"b"), Some(br#"{"v":4}"#)),
            record("c", 4, Some(b"c"), Some(br#"{ "v": 5 }"#)), // pending, then deleted
            record("c", 5, Some(b"c"), Some(b"")),
            record("c", 6, Some(b"d"), Some(br#"{"v":6}"#)), // canonical, deleted
            record("c", 7, Some(b"d"), None),
        ];
        let mut b = ConfigBootstrap::with_chunk_bytes(64).without_enrichment();
        for r in &records {
            b.offer(r, &RaisePolicy, &NoopObserver).unwrap();
        }
        let survivor = b.next_survivor().expect("one undecided survivor");
        assert_eq!((survivor.key.as_str(), survivor.record.offset), ("a", 1));
        assert!(b.apply_unenriched(&survivor, &RaisePolicy, &NoopObserver).unwrap());
        assert!(b.next_survivor().is_none());
        let store = b.finish();
        assert_eq!(store.keys(), ["a", "b"]);
        assert_eq!(store.get_bytes("a"), Some(&br#"{"v":2}"#[..]));
        assert_eq!(store.get_bytes("b"), Some(&br#"{"v":4}"#[..]));
    }

    #[test]
    fn cfg_02_to_05_store_semantics() {
        let mut store = ConfigStore::of([("a", Config::new())]).unwrap();
        assert!(store.contains_key("a") && store.len() == 1);
        store.put_bytes("a", br#"{"v":1}"#).unwrap();
        store.put_bytes("a", br#"{"v":2}"#).unwrap();
        assert_eq!(store.get_bytes("a"), Some(&br#"{"v":2}"#[..]));
        assert!(store.delete("a"));
        assert!(!store.delete("a"));
        assert!(store.is_empty());
        assert!(store.put_bytes("b", b"[1]").is_err());
        // CFG-04: a corrupt stored value is an error, never an empty config.
        store.insert(b"bad", b"{not json", None);
        assert!(store.get("bad").is_err());
    }

    #[test]
    fn compaction_reclaims_garbage_and_keeps_every_entry() {
        let mut store = ConfigStore::new();
        let value = format!(r#"{{"pad":"{}"}}"#, "x".repeat(500));
        for round in 0..10 {
            for k in 0..10_000 {
                store.put_bytes(&format!("key-{k}"), value.replace('x', &(round % 10).to_string()).as_bytes()).unwrap();
            }
        }
        assert_eq!(store.len(), 10_000);
        let live = 10_000 * (value.len() + 12);
        assert!(
            store.arena.dead_bytes <= CHUNK_BYTES.max(live / 4) + CHUNK_BYTES,
            "garbage {}",
            store.arena.dead_bytes
        );
        // Live bytes, at most a quarter more of garbage, a chunk of slack, and the index.
        assert!(
            store.memory_bytes() < live + live / 4 + 3 * CHUNK_BYTES,
            "memory {} for {live} live",
            store.memory_bytes()
        );
        for k in 0..10_000 {
            let got = store.get_bytes(&format!("key-{k}")).unwrap();
            assert_eq!(got, value.replace('x', "9").as_bytes());
        }
    }

    /// One step of the narrow-index property: a put (value padded to `pad` bytes) or a delete.
    #[derive(Clone, Debug)]
    enum IndexOp {
        Put { key: u8, pad: usize },
        Delete { key: u8 },
    }

    fn index_op(keys: u8) -> impl proptest::strategy::Strategy<Value = IndexOp> {
        use proptest::prelude::*;
        prop_oneof![
            5 => (0..keys, 0usize..300).prop_map(|(key, pad)| IndexOp::Put { key, pad }),
            1 => (0..keys).prop_map(|key| IndexOp::Delete { key }),
        ]
    }

    fn index_value(step: usize, pad: usize) -> Vec<u8> {
        format!(r#"{{"pad":"{}","step":{step}}}"#, "p".repeat(pad)).into_bytes()
    }

    /// A store of `chunk_bytes` chunks whose narrow index tells at most `2^chunk_bits` chunks
    /// apart: its chunk numbers wrap within a few chunks, and it widens once its live chunks
    /// span more.
    fn small_narrow_store(chunk_bytes: usize, chunk_bits: u32) -> ConfigStore {
        ConfigStore::with_arena_and_chunk_bits(super::arena::Arena::new(Some(chunk_bytes)), chunk_bits)
    }

    /// Every key and value the store holds equals the model, each key found through the index.
    fn assert_matches_model(
        store: &ConfigStore,
        model: &std::collections::BTreeMap<String, Vec<u8>>,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        proptest::prop_assert_eq!(store.len(), model.len());
        proptest::prop_assert_eq!(store.keys(), model.keys().cloned().collect::<Vec<_>>());
        for (key, value) in model {
            proptest::prop_assert_eq!(store.get_bytes(key), Some(&value[..]), "key {}", key);
        }
        proptest::prop_assert_eq!(store.wire_bytes(), model.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>());
        // The arena's bookkeeping matches its bytes, and its live records are what the index holds.
        let mut live = store.arena.check_accounting();
        let mut indexed = Vec::new();
        store.table.for_each(&store.arena, |pos| indexed.push(pos));
        live.sort_unstable();
        indexed.sort_unstable();
        proptest::prop_assert_eq!(live, indexed);
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config { cases: 256, ..Default::default() })]

        /// CFG-01/CFG-03 with a narrow index: puts and deletes against a model, with chunk
        /// numbers wrapping every few chunks, compaction in batches of a few records (each batch
        /// repointed by a sorted search over decoded positions, across the wrap), and the switch
        /// to the wide index happening wherever the live chunks outgrow the narrow span (on an
        /// insert or in the middle of a compaction). Checked after every step.
        #[test]
        fn narrow_index_matches_a_model_across_wrap_and_widening(
            keys in 1u8..40,
            chunk_bytes in 64usize..1_200,
            chunk_bits in 1u32..6,
            ops in proptest::collection::vec(index_op(40), 0..400),
        ) {
            let mut store = small_narrow_store(chunk_bytes, chunk_bits);
            let mut model = std::collections::BTreeMap::new();
            let mut was_wide = false;
            for (step, op) in ops.iter().enumerate() {
                match *op {
                    IndexOp::Put { key, pad } => {
                        let (key, value) = (format!("k{}", key % keys), index_value(step, pad));
                        store.put_bytes(&key, &value).unwrap();
                        proptest::prop_assert_eq!(store.get_bytes(&key), Some(&value[..]));
                        model.insert(key, value);
                    }
                    IndexOp::Delete { key } => {
                        let key = format!("k{}", key % keys);
                        proptest::prop_assert_eq!(store.delete(&key), model.remove(&key).is_some());
                    }
                }
                // Widening is for good.
                proptest::prop_assert!(!(was_wide && store.table.is_narrow()));
                was_wide = !store.table.is_narrow();
                if step % 16 == 0 {
                    assert_matches_model(&store, &model)?;
                }
            }
            assert_matches_model(&store, &model)?;
        }

        /// CFG-12 with a narrow index: a bootstrap (pending records with origins, promoted in
        /// place or decided one by one) over a store whose chunk numbers wrap and whose index
        /// may widen mid-read, then live updates, against the model.
        #[test]
        fn narrow_index_bootstrap_matches_a_model(
            keys in 1u8..40,
            chunk_bytes in 64usize..1_200,
            chunk_bits in 1u32..6,
            ops in proptest::collection::vec(index_op(40), 0..400),
            split in proptest::arbitrary::any::<proptest::sample::Index>(),
            settle in proptest::bool::ANY,
            one_call in proptest::bool::ANY,
        ) {
            let split = split.index(ops.len() + 1);
            let records: Vec<RawRecord> = ops
                .iter()
                .enumerate()
                .map(|(step, op)| match *op {
                    IndexOp::Put { key, pad } => {
                        let mut value = index_value(step, pad);
                        if pad % 3 == 0 {
                            value.insert(0, b' '); // not canonical: decided at the end
                        }
                        record("cfg", step as i64, Some(format!("k{}", key % keys).as_bytes()), Some(&value))
                    }
                    IndexOp::Delete { key } => record("cfg", step as i64, Some(format!("k{}", key % keys).as_bytes()), None),
                })
                .collect();
            let mut model = std::collections::BTreeMap::new();
            for (step, op) in ops.iter().enumerate() {
                match *op {
                    IndexOp::Put { key, pad } => { model.insert(format!("k{}", key % keys), index_value(step, pad)); }
                    IndexOp::Delete { key } => { model.remove(&format!("k{}", key % keys)); }
                }
                if step + 1 == split {
                    break;
                }
            }
            if split == 0 {
                model.clear();
            }
            let mut bootstrap = ConfigBootstrap::with_store(small_narrow_store(chunk_bytes, chunk_bits));
            if settle {
                bootstrap = bootstrap.without_enrichment();
            }
            for r in &records[..split] {
                bootstrap.offer(r, &RaisePolicy, &NoopObserver).unwrap();
            }
            let mut store = if one_call {
                bootstrap.finish_unenriched(&RaisePolicy, &NoopObserver).unwrap()
            } else {
                while let Some(s) = bootstrap.next_survivor() {
                    proptest::prop_assert!(bootstrap.apply_unenriched(&s, &RaisePolicy, &NoopObserver).unwrap());
                }
                bootstrap.finish()
            };
            assert_matches_model(&store, &model)?;
            for (step, (r, op)) in records.iter().zip(&ops).enumerate().skip(split) {
                let key = std::str::from_utf8(r.key.as_deref().unwrap()).unwrap().to_owned();
                match *op {
                    IndexOp::Put { pad, .. } => {
                        store.put_bytes(&key, r.value.as_deref().unwrap()).unwrap();
                        model.insert(key, index_value(step, pad));
                    }
                    IndexOp::Delete { .. } => {
                        store.delete(&key);
                        model.remove(&key);
                    }
                }
            }
            assert_matches_model(&store, &model)?;
        }
    }

    /// The two regimes the properties above are for are both reached: a store that stays narrow
    /// while its chunk numbers wrap many times over, and one that widens, with every key intact.
    #[test]
    fn narrow_index_wraps_and_widens() {
        let mut store = small_narrow_store(256, 3); // 8 chunks apart
                                                    // Each update of a key is longer than the last (but every 40th), so it is appended, not
                                                    // written over its predecessor: the log moves on through the chunks.
        let pad = |step: usize| 10 + (step / 3) % 40;
        for step in 0..2_000 {
            store.put_bytes(&format!("k{}", step % 3), &index_value(step, pad(step))).unwrap();
        }
        let created = store.arena.first + store.arena.chunks.len() as u64;
        assert!(store.table.is_narrow() && created > 100, "still narrow after {created} chunks");
        for step in 2_000 - 3..2_000 {
            assert_eq!(store.get_bytes(&format!("k{}", step % 3)), Some(&index_value(step, pad(step))[..]));
        }
        // Live records over more than 8 chunks: the index widens, and nothing is lost.
        for step in 0..100 {
            store.put_bytes(&format!("w{step}"), &index_value(step, 100)).unwrap();
        }
        assert!(!store.table.is_narrow());
        for step in 0..100 {
            assert_eq!(store.get_bytes(&format!("w{step}")), Some(&index_value(step, 100)[..]));
        }
        assert_eq!(store.len(), 103);
    }

    /// At 1M-entry scale the narrow index is half the wide one: 4-byte slots.
    #[test]
    fn narrow_index_slots_are_four_bytes() {
        let mut narrow = ConfigStore::new();
        let mut wide = small_narrow_store(CHUNK_BYTES, 0); // no chunk bit: wide from the start
        assert!(narrow.table.is_narrow() && !wide.table.is_narrow());
        narrow.reserve(1 << 20);
        wide.reserve(1 << 20);
        let (n, w) = (narrow.table.allocation_size(), wide.table.allocation_size());
        // 2^21 slots: 4 (narrow) or 8 (wide) bytes plus a control byte each.
        assert_eq!((n >> 21, w >> 21), (5, 9));
    }
}
